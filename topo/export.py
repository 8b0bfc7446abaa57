"""Export a fabric's graph to a file: GraphML or networkx node-link JSON, written atomically."""

from __future__ import annotations

import json
from pathlib import Path

from .atomic import atomic_open
from .errors import TopoError
from .fabric import Fabric

__all__ = ["export_fabric", "EXPORT_FORMATS"]

EXPORT_FORMATS = ("graphml", "json")


def export_fabric(fabric: Fabric, path: str | Path, fmt: str = "graphml") -> Path:
    """Write ``fabric.to_networkx()`` to ``path`` as ``graphml`` or ``json`` (networkx node-link data).

    The file appears whole or not at all. Returns the path written.
    """
    import networkx as nx

    fmt = fmt.lower()
    if fmt not in EXPORT_FORMATS:
        raise TopoError(f"unknown format {fmt!r}; allowed: {', '.join(EXPORT_FORMATS)}", key="--format")
    graph = fabric.graph
    path = Path(path)
    if fmt == "graphml":
        with atomic_open(path, "wb") as fh:
            nx.write_graphml(graph, fh)
    else:
        data = nx.node_link_data(graph, edges="links")
        with atomic_open(path, "w") as fh:
            json.dump(data, fh, separators=(",", ":"))
    return path
