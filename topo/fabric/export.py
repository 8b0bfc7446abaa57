"""Export a fabric's graph to a file: GraphML or networkx node-link JSON, written atomically.

Both are streamed from the fabric's arrays (:meth:`Fabric.node_records`, :meth:`Fabric.edge_records`) without
building a networkx graph, so a 100k-GPU fabric exports in seconds and little memory; networkx reads both back
(``nx.read_graphml``, ``nx.node_link_graph(data)``) into the same graph as ``fabric.graph``: an undirected simple
graph in which parallel cables between two switches are one edge with their count in ``num_links``. The JSON
keeps its edges under ``"edges"``, the key networkx >= 3.6 reads by default (3.4 and 3.5 need
``edges="edges"``). Both files say ``written by topo`` near their start (see :mod:`topo.atomic`).
"""

from __future__ import annotations

import json
from html import escape as _html_escape
from pathlib import Path

from .. import __version__
from ..atomic import SIGNATURE, open_output
from ..errors import TopoError
from .fabric import Fabric

__all__ = ["export_fabric", "EXPORT_FORMATS", "write_graphml", "write_json"]

EXPORT_FORMATS = ("graphml", "json")

_GRAPHML_TYPES = {"role": "string", "tier": "string", "rail": "int", "server": "int", "domain": "int", "unit": "int",
                  "pod": "int", "plane": "int", "level": "string", "num_links": "int", "bandwidth_Bps": "double",
                  "link_bandwidth_Bps": "double", "latency_s": "double", "num_failed": "int", "site": "string",
                  "distance_km": "double", "planes": "string", "failed": "boolean"}
_BATCH = 20_000
_WHITESPACE = str.maketrans({"\n": "&#10;", "\r": "&#13;", "\t": "&#9;"})


def escape(text: str) -> str:
    """``text`` as XML character data: ``&``, ``<`` and ``>`` escaped (``html`` is a light import; ``xml.sax``
    pulls in ``urllib.request``, ``http`` and ``email``, tens of milliseconds on every command).

    >>> escape("a<b & c")
    'a&lt;b &amp; c'
    """
    return _html_escape(text, quote=False)


def quoteattr(text: str) -> str:
    """``text`` as a double-quoted XML attribute value (quotes and whitespace as character references).

    >>> quoteattr('say "hi" & <b>')
    '"say &quot;hi&quot; &amp; &lt;b&gt;"'
    """
    return '"' + _html_escape(text, quote=True).translate(_WHITESPACE) + '"'


def export_fabric(fabric: Fabric, path: str | Path, fmt: str = "graphml", *, force: bool = False,
                  **output) -> Path:
    """Write the fabric's graph to ``path`` (``"-"``: standard output) as ``graphml`` or ``json`` (networkx
    node-link data).

    The file appears whole or not at all, and never over the spec it came from or, unless ``force``, over an
    existing file topo did not write (:func:`topo.atomic.open_output`, which also takes ``output``'s keywords).
    Returns the path written.
    """
    fmt = fmt.lower()
    if fmt not in EXPORT_FORMATS:
        raise TopoError(f"unknown format {fmt!r}; allowed: {', '.join(EXPORT_FORMATS)}", key="format")
    inputs = [fabric.spec.input_path] if fabric.spec.input_path else []
    with open_output(path, "w", inputs=inputs, force=force, **output) as fh:
        write_fabric(fabric, fh, fmt)
    return Path(path)


def write_fabric(fabric: Fabric, fh, fmt: str = "graphml") -> None:
    """Stream the fabric's graph into an open text file ``fh`` as ``graphml`` or ``json``."""
    (_write_graphml if fmt == "graphml" else _write_json)(fabric, fh)


def _chunks(lines, fh):
    buf = []
    for line in lines:
        buf.append(line)
        if len(buf) >= _BATCH:
            fh.write("".join(buf))
            buf.clear()
    fh.write("".join(buf))


def _data(keys: dict, attrs: dict) -> str:
    # GraphML's booleans are XML Schema's: "true" / "false" (Python's str gives "True")
    return "".join(f'<data key="{keys[k]}">{str(v).lower() if isinstance(v, bool) else escape(str(v))}</data>'
                   for k, v in attrs.items())


def _write_graphml(fabric: Fabric, fh) -> None:
    names = fabric.node_names()
    write_graphml(fh, fabric.name, fabric.num_gpus, fabric.NODE_ATTRS, fabric.EDGE_ATTRS, fabric.node_records(),
                  fabric.edge_records(names))


def write_graphml(fh, name: str, num_gpus: int, node_attrs, edge_attrs, nodes, edges) -> None:
    """Stream a graph's ``(name, attrs)`` nodes and ``(u, v, attrs)`` edges into ``fh`` as GraphML (attribute types
    from ``_GRAPHML_TYPES``).

    Parameters
    ----------
    fh : text file
        Open for writing.
    name : str
        The graph's name.
    num_gpus : int
        Its GPUs (a graph attribute).
    node_attrs, edge_attrs : sequence of str
        The attributes declared, in order.
    nodes, edges : iterable
        ``(name, attrs)`` and ``(u, v, attrs)`` records.
    """
    nkeys = {a: f"n{i}" for i, a in enumerate(node_attrs)}
    ekeys = {a: f"e{i}" for i, a in enumerate(edge_attrs)}
    fh.write("<?xml version='1.0' encoding='utf-8'?>\n"
             f"<!-- {SIGNATURE} {_version()}: parallel links are one edge with their count in num_links -->\n"
             '<graphml xmlns="http://graphml.graphdrawing.org/xmlns" '
             'xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" '
             'xsi:schemaLocation="http://graphml.graphdrawing.org/xmlns '
             'http://graphml.graphdrawing.org/xmlns/1.0/graphml.xsd">\n')
    fh.write('<key id="g0" for="graph" attr.name="name" attr.type="string"/>\n'
             '<key id="g1" for="graph" attr.name="num_gpus" attr.type="int"/>\n')
    for keys, kind in ((nkeys, "node"), (ekeys, "edge")):
        for a, k in keys.items():
            fh.write(f'<key id="{k}" for="{kind}" attr.name="{a}" attr.type="{_GRAPHML_TYPES[a]}"/>\n')
    fh.write(f'<graph edgedefault="undirected"><data key="g0">{escape(name)}</data>'
             f'<data key="g1">{num_gpus}</data>\n')
    _chunks((f"<node id={quoteattr(n)}>{_data(nkeys, a)}</node>\n" for n, a in nodes), fh)
    _chunks((f"<edge source={quoteattr(u)} target={quoteattr(v)}>{_data(ekeys, a)}</edge>\n"
             for u, v, a in edges), fh)
    fh.write("</graph></graphml>\n")


def _write_json(fabric: Fabric, fh) -> None:
    names = fabric.node_names()
    write_json(fh, fabric.name, fabric.num_gpus, fabric.node_records(), fabric.edge_records(names))


def write_json(fh, name: str, num_gpus: int, nodes, edges) -> None:
    """Stream a graph's ``(name, attrs)`` nodes and ``(u, v, attrs)`` edges into ``fh`` as networkx node-link
    JSON.

    Parameters
    ----------
    fh, name, num_gpus, nodes, edges
        As :func:`write_graphml` (JSON declares no attribute list).
    """
    dump = json.dumps
    fh.write('{"generator":' + dump(f"{SIGNATURE} {_version()}") + ',"directed":false,"multigraph":false,"graph":'
             + dump({"name": name, "num_gpus": num_gpus}, separators=(",", ":")) + ',"nodes":[')
    first = [True]

    def node_lines():
        for n, a in nodes:
            yield ("" if first[0] else ",") + dump({**a, "id": n}, separators=(",", ":"))
            first[0] = False

    _chunks(node_lines(), fh)
    fh.write('],"edges":[')
    first[0] = True

    def edge_lines():
        for u, v, a in edges:
            yield ("" if first[0] else ",") + dump({**a, "source": u, "target": v}, separators=(",", ":"))
            first[0] = False

    _chunks(edge_lines(), fh)
    fh.write("]}\n")


def _version() -> str:
    return __version__
