"""topo: GPU-cluster network topology and collective-communication modeler.

>>> import topo
>>> fabric = topo.build_fabric(topo.load_spec("dgx-h100-superpod"))
>>> fabric.num_gpus
1024

The names below are imported on first use (a module ``__getattr__``, PEP 562): ``import topo`` alone, which every
``topo`` command does, does not import the engine, the fabric builders or the spec models; each command imports
the parts it runs.
"""

import importlib

from .errors import TopoError

# public name -> the module that defines it (imported when the name is first read)
_EXPORTS = {"load_spec": ".spec", "spec_from_dict": ".spec", "bundled_specs": ".spec", "Spec": ".spec",
            "DEFAULT_SPEC": ".spec", "build_fabric": ".fabric.builders", "fat_tree": ".fabric.builders",
            "rail_optimized": ".fabric.builders", "rail_only": ".fabric.builders", "Fabric": ".fabric.fabric",
            "inventory": ".fabric.inventory", "Inventory": ".fabric.inventory", "estimate": ".engine.estimate",
            "size_sweep": ".engine.estimate", "EstimateOptions": ".engine.options"}

__all__ = ["load_spec", "spec_from_dict", "bundled_specs", "build_fabric", "fat_tree", "rail_optimized",
           "rail_only", "Fabric", "inventory", "Inventory", "Spec", "TopoError", "DEFAULT_SPEC", "estimate",
           "size_sweep", "EstimateOptions"]
__version__ = "0.1.0"


def __getattr__(name):
    # topo.sweep (a study on Dask, returning a DataFrame) loads dask, pyarrow and pandas only when first used
    if name == "sweep":
        return importlib.import_module(".sweep", __name__)
    if name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name], __name__), name)
        globals()[name] = value  # looked up once
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(__all__))
