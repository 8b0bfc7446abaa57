"""The cluster planner: a spec + a catalog (power, prices, optics) + a floor layout -> bill of materials, power,
energy, cost, compute, failures and goodput; designs side by side.

>>> from topo.plan import plan
>>> r = plan("dgx-h100-superpod", collectives=False)
>>> r.num_gpus
1024
"""

from .catalog import Catalog, load_catalog
from .planner import compare_designs, plan, read_plan_file
from .reliability import LOST_PART_LABELS
from .result import DesignComparison, PlanResult

__all__ = ["plan", "compare_designs", "read_plan_file", "load_catalog", "Catalog", "PlanResult", "DesignComparison",
           "LOST_PART_LABELS"]
