"""The links a training step loads: bytes per step per link level (tier) and per dimension.

Each collective of the step (:func:`topo.training.step.step_traffic`) contributes its engine link loads (every
group at once, :meth:`topo.training.comm.CommEngine.link_loads`) times its calls per step. The result is data
for the report (bars per tier) and for a user asking which tier carries DP's bytes.
"""

from __future__ import annotations

import pandas as pd

from ..fabric.fabric import Fabric
from .comm import CommEngine
from .parallel import ParallelLayout
from .mapping import default_placement, map_layout
from .model import ModelSpec
from .step import step_traffic

__all__ = ["tier_bytes"]


def tier_bytes(fabric: Fabric, model: ModelSpec, lay: ParallelLayout, engine: CommEngine | None = None) -> pd.DataFrame:
    """One row per (dimension, level): ``bytes_per_step`` over all directed links of the level, the busiest
    link's bytes (``max_link_bytes_per_step``) and the number of links that carry any."""
    engine = engine or CommEngine(fabric)
    lay, _ = default_placement(lay, fabric.spec.gpus_per_domain, fabric.layout.num_gpus)
    mapping = map_layout(lay, fabric.spec.gpus_per_domain, fabric.layout.num_gpus)
    rows = []
    for item in step_traffic(model, lay):
        G = mapping.groups(item["groups"])
        frame = engine.link_loads(item["collective"], G, item["size_bytes"])
        frame = frame[frame["bytes"] > 0]
        by = frame.groupby("level", observed=True)["bytes"].agg(["sum", "max", "count"])
        for level, r in by.iterrows():
            rows.append({"dim": item["dim"], "collective": item["collective"], "level": str(level),
                         "bytes_per_step": float(r["sum"]) * item["calls"],
                         "max_link_bytes_per_step": float(r["max"]) * item["calls"], "links": int(r["count"])})
    out = pd.DataFrame(rows, columns=["dim", "collective", "level", "bytes_per_step", "max_link_bytes_per_step",
                                      "links"])
    return out.groupby(["dim", "level"], as_index=False, sort=False).agg(
        bytes_per_step=("bytes_per_step", "sum"), max_link_bytes_per_step=("max_link_bytes_per_step", "sum"),
        links=("links", "max"))
