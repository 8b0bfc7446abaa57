"""Export a region's graph: every site's fabric (node names prefixed ``SITE:``, as ``--fail SITE:PART`` names them),
one DCI node per site, and the DCI spans between them, as GraphML or networkx node-link JSON, written atomically.

Each site's nodes and edges are its fabric's (:meth:`topo.fabric.fabric.Fabric.node_records`), with a ``site``
attribute. ``SITE:dci`` (role and tier ``dci``) stands for the site's DCI equipment; every switch of the tier the DCI
attaches to (``attach_tier``, default the top tier) has an edge to it (level ``dci_attach``) carrying an equal share
of what the site exchanges with the DCI (:meth:`topo.fabric.region.Region.border_Bps`, 0 when ``--fail`` cuts all
its spans: the model pools it, so the split is the export's convention). Each span is one edge between two sites'
DCI nodes (level ``dci``): its waves in ``num_links``, waves x rate in ``bandwidth_Bps``, one-way latency,
``distance_km``, and ``num_failed`` = its waves when ``--fail dci:A-B`` cuts it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..atomic import open_output
from ..errors import TopoError
from .export import EXPORT_FORMATS, write_graphml, write_json
from .fabric import ROLE_SWITCH
from .region import Region

__all__ = ["export_region", "region_records"]

NODE_ATTRS = ("site", "role", "tier", "rail", "server", "domain", "unit", "pod", "plane", "planes", "failed")
EDGE_ATTRS = ("level", "num_links", "bandwidth_Bps", "link_bandwidth_Bps", "latency_s", "num_failed", "distance_km")


def region_records(region: Region):
    """The region's ``(nodes, edges)`` iterators: ``(name, attrs)`` and ``(u, v, attrs)``, attributes
    :data:`NODE_ATTRS` and :data:`EDGE_ATTRS` (see the module doc).

    Parameters
    ----------
    region : Region
        The built region (its sites' fabrics and DCI spans).

    Returns
    -------
    tuple
        ``(nodes, edges)``, two generators.
    """
    return _nodes(region), _edges(region)


def _nodes(region: Region):
    for site, fabric in zip(region.site_names, region.fabrics):
        for name, attrs in fabric.node_records():
            yield f"{site}:{name}", {"site": site, **attrs}
        yield f"{site}:dci", {"site": site, "role": "dci", "tier": "dci",
                              **{k: -1 for k in NODE_ATTRS[3:-2]}, "planes": "", "failed": False}


def _edges(region: Region):
    for k, (site, fabric) in enumerate(zip(region.site_names, region.fabrics)):
        names = fabric.node_names()
        for u, v, attrs in fabric.edge_records(names):
            yield f"{site}:{u}", f"{site}:{v}", {**attrs, "distance_km": 0.0}
        nodes = fabric.nodes
        ids = np.flatnonzero((nodes["role"] == ROLE_SWITCH) & (nodes["tier"] == int(region.attach_tier[k])))
        top = [names[i] for i in ids.tolist()]
        share = region.border_Bps(k) / len(top)
        for n in top:
            yield f"{site}:{n}", f"{site}:dci", {"level": "dci_attach", "num_links": 1, "bandwidth_Bps": share,
                                                 "link_bandwidth_Bps": share, "latency_s": 0.0, "num_failed": 0,
                                                 "distance_km": 0.0}
    sp = region.spans
    for i in range(region.num_spans):
        a, b, waves = region.site_names[int(sp["a"][i])], region.site_names[int(sp["b"][i])], int(sp["waves"][i])
        rate = float(sp["wave_rate_Bps"][i])
        yield f"{a}:dci", f"{b}:dci", {"level": "dci", "num_links": waves, "bandwidth_Bps": waves * rate,
                                       "link_bandwidth_Bps": rate, "latency_s": float(sp["latency_s"][i]),
                                       "num_failed": waves if bool(region.failed[i]) else 0,
                                       "distance_km": float(sp["distance_km"][i])}


def export_region(region: Region, path: str | Path, fmt: str = "graphml", *, inputs=(), force: bool = False,
                  **output) -> Path:
    """Write the region's graph (see the module doc) to ``path`` (``"-"``: standard output) as ``graphml`` or
    ``json``, whole or not at all, never over ``inputs`` nor, unless ``force``, over a file topo did not write
    (:func:`topo.atomic.open_output`, which also takes ``output``'s keywords).

    Parameters
    ----------
    region : Region
        The built region.
    path : str or Path
        Where to write (``"-"``: standard output).
    fmt : str
        ``graphml`` or ``json``.
    inputs : sequence of str
        Files the command read, never written over.
    force : bool
        Write over a file topo did not write.
    **output
        :func:`topo.atomic.open_output`'s keywords.

    Returns
    -------
    Path
        The path written.

    Raises
    ------
    TopoError
        An unknown format, or a path ``open_output`` refuses.
    """
    fmt = fmt.lower()
    if fmt not in EXPORT_FORMATS:
        raise TopoError(f"unknown format {fmt!r}; allowed: {', '.join(EXPORT_FORMATS)}", key="format")
    nodes, edges = region_records(region)
    with open_output(path, "w", inputs=list(inputs), force=force, **output) as fh:
        if fmt == "graphml":
            write_graphml(fh, region.name, region.num_gpus, NODE_ATTRS, EDGE_ATTRS, nodes, edges)
        else:
            write_json(fh, region.name, region.num_gpus, nodes, edges)
    return Path(path)
