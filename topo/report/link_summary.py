"""Link loads made small enough to draw: a 100k-GPU fabric has ~800k directed links; a page shows per-tier
percentiles, a group x tier grid and the hottest link of each tier.

Everything here reads the frame :meth:`topo.engine.result.EstimateResult.link_loads` returns (columns ``link``,
``src``, ``dst``, ``level``, ``bytes``, ``bandwidth_Bps``, ``utilization``) and the fabric's node table; it
groups and ranks with numpy and pandas and computes no load itself.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..fabric.fabric import Fabric

__all__ = ["LoadSummary", "summarize_loads", "PERCENTILES"]

PERCENTILES = (0, 5, 25, 50, 75, 95, 100)


@dataclass
class LoadSummary:
    """What the report shows of one link-load frame.

    Attributes
    ----------
    levels : list of str
        Link levels in fabric order (``nvlink``, ``pcie``, ``nic-leaf``, ``leaf-spine``, ``spine-core``).
    percentiles : DataFrame
        One row per level: ``level``, ``links`` (directed), ``loaded`` (links carrying bytes), ``mean`` and
        ``p0`` ... ``p100`` of the utilization of the loaded links (fraction of line rate over the collective's
        time; all 0 when no link of the level carries traffic). A job on part of the cluster leaves most links
        idle; their zeros would hide the links it does use.
    grid : DataFrame
        Maximum utilization, index = group (pod, or unit in a fabric of one pod), columns = levels;
        ``grid_mean`` the same with the mean, ``grid_links`` the number of directed links per cell.
    group_name : str
        What a grid column is: ``pod`` or the fabric's unit name.
    hottest : DataFrame
        Per level, the most utilized directed link: ``level``, ``src``, ``dst`` (node names), ``utilization``,
        ``bytes``, ``bandwidth_Bps`` and ``tied`` (how many links of the level carry at least 99.9% of it).
    attrs : dict
        The frame's ``size_bytes``, ``time_s`` and ``algorithm``.
    """

    levels: list[str]
    percentiles: pd.DataFrame
    grid: pd.DataFrame
    grid_mean: pd.DataFrame
    grid_links: pd.DataFrame
    group_name: str
    hottest: pd.DataFrame
    attrs: dict


def summarize_loads(frame: pd.DataFrame, fabric: Fabric) -> LoadSummary:
    """Reduce a link-load frame of ``fabric`` to percentiles, a group x level grid and the hottest links.

    A link belongs to the group (pod, or unit when the fabric has one pod) of its lower end, so a spine's
    uplinks count in its pod. Vectorised: no Python loop runs per link.
    """
    levels = list(frame["level"].cat.categories) if hasattr(frame["level"], "cat") else fabric.level_names
    codes = frame["level"].cat.codes.to_numpy() if hasattr(frame["level"], "cat") else \
        pd.Categorical(frame["level"], categories=levels).codes
    util = frame["utilization"].to_numpy(dtype=float)
    nbytes = frame["bytes"].to_numpy(dtype=float)

    rows = []
    for i, name in enumerate(levels):
        u = util[codes == i]
        if u.size == 0:
            continue
        busy = u[u > 0]
        q = np.percentile(busy, PERCENTILES) if busy.size else np.zeros(len(PERCENTILES))
        rows.append({"level": name, "links": int(u.size), "loaded": int(busy.size),
                     "mean": float(busy.mean()) if busy.size else 0.0,
                     **{f"p{p}": float(v) for p, v in zip(PERCENTILES, q)}})
    percentiles = pd.DataFrame(rows)

    layout = fabric.layout
    by_pod = layout.num_pods > 1
    group_name = "pod" if by_pod else layout.unit_name
    lower = fabric.links["src"][frame["link"].to_numpy()]
    group = fabric.nodes["pod" if by_pod else "unit"][lower].astype(np.int64)
    keep = group >= 0
    df = pd.DataFrame({"group": group[keep], "level": codes[keep], "u": util[keep]})
    agg = df.groupby(["group", "level"], sort=True)["u"].agg(["max", "mean", "size"])
    present = [i for i in range(len(levels)) if np.any(codes == i)]
    names = {i: levels[i] for i in present}

    def pivot(col):
        p = agg[col].unstack("level").reindex(columns=present)
        p.columns = [names[i] for i in p.columns]
        p.index.name = group_name
        return p

    grid, grid_mean, grid_links = pivot("max"), pivot("mean"), pivot("size").fillna(0).astype(int)

    hot = []
    for i in present:
        idx = np.flatnonzero(codes == i)
        j = idx[np.argmax(util[idx])]
        top = util[j]
        tied = int(np.count_nonzero(util[idx] >= top * 0.999)) if top > 0 else int(idx.size)
        ids = ("src_id", "dst_id") if "src_id" in frame else ("src", "dst")  # link_loads names nodes; ids beside
        src, dst = fabric.node_names([int(frame[ids[0]].iat[j]), int(frame[ids[1]].iat[j])])
        hot.append({"level": levels[i], "src": src, "dst": dst, "utilization": float(top), "bytes": float(nbytes[j]),
                    "bandwidth_Bps": float(frame["bandwidth_Bps"].iat[j]), "tied": tied})
    hottest = pd.DataFrame(hot).sort_values("utilization", ascending=False, kind="stable").reset_index(drop=True)
    return LoadSummary(levels=[levels[i] for i in present], percentiles=percentiles, grid=grid, grid_mean=grid_mean,
                       grid_links=grid_links, group_name=group_name, hottest=hottest, attrs=dict(frame.attrs))
