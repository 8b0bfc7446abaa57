"""topo: GPU-cluster network topology and collective-communication modeler.

>>> import topo
>>> fabric = topo.build_fabric(topo.load_spec("dgx-h100-superpod"))
>>> fabric.num_gpus
1024
"""

from .engine.estimate import estimate, size_sweep
from .engine.options import EstimateOptions
from .errors import TopoError
from .fabric.builders import build_fabric, fat_tree, rail_only, rail_optimized
from .fabric.fabric import Fabric
from .fabric.inventory import Inventory, inventory
from .spec import DEFAULT_SPEC, Spec, bundled_specs, load_spec, spec_from_dict

__all__ = ["load_spec", "spec_from_dict", "bundled_specs", "build_fabric", "fat_tree", "rail_optimized",
           "rail_only", "Fabric", "inventory", "Inventory", "Spec", "TopoError", "DEFAULT_SPEC", "estimate",
           "size_sweep", "EstimateOptions"]
__version__ = "0.1.0"


def __getattr__(name):
    # topo.sweep (a study on Dask, returning a DataFrame) loads dask, pyarrow and pandas only when first used
    if name == "sweep":
        import importlib

        return importlib.import_module(".sweep", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
