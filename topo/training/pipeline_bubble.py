"""When the pipeline bubble is large: a note pointing to more micro-batches a replica (a larger global batch), a
higher vpp or ``topo train --search`` (walk29 Left 5). It reads the step's own bubble and compute
(:func:`topo.training.step.step_breakdown`), so it follows the schedule the step priced (1F1B, interleaved or
DualPipe); the limit is GPipe's published "negligible" point (``topo/data/compute/pipeline_bubble.toml``)."""

import math
import tomllib
from functools import lru_cache

from ..resources import data_dir

__all__ = ["negligible_bubble_over_compute", "bubble_note"]


@lru_cache(maxsize=None)
def negligible_bubble_over_compute() -> float:
    """The bubble over the micro-batches' compute below which the bubble is negligible: 1/4, GPipe's M >= 4K
    (Huang et al. 2019, arXiv 1811.06965 sec. 2.3).

    Returns
    -------
    float
        The ratio (``pipeline_bubble.toml``).
    """
    table = tomllib.loads((data_dir("compute") / "pipeline_bubble.toml").read_text(encoding="utf-8"))
    return float(table["negligible"]["bubble_over_compute"])


def bubble_note(breakdown_s: dict, microbatches: int) -> str:
    """A note when the step's bubble exceeds the negligible share of its compute, else ``""``.

    Parameters
    ----------
    breakdown_s : dict
        The step's seconds by component (``compute`` and ``bubble`` read).
    microbatches : int
        Micro-batches a replica runs a step.

    Returns
    -------
    str
        The bubble, its share of the step, and the micro-batches a replica at which the same bubble would be the
        negligible share (the bubble is fixed in micro-batch times, the compute grows with them).
    """
    bubble, compute = breakdown_s.get("bubble", 0.0), breakdown_s.get("compute", 0.0)
    limit = negligible_bubble_over_compute()
    if compute <= 0 or bubble <= limit * compute:
        return ""
    step = sum(breakdown_s.values())
    needed = math.ceil(microbatches * bubble / compute / limit - 1e-9)
    return (f"pipeline bubble {bubble / compute:.2f} x the compute, {bubble / step:.0%} of the step, with "
            f"{microbatches} micro-batch{'es' if microbatches != 1 else ''} a replica; GPipe (Huang et al. 2019, "
            f"sec. 2.3) found it negligible from 4 micro-batches a stage, where it is under {limit:.0%} of the "
            f"compute: here from {needed} micro-batches a replica (a larger --global-batch), or a higher vpp; "
            f"topo train --search ranks the layouts with it priced")
