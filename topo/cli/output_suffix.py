"""An output name whose suffix says another format than the one written: refused before any work.

``topo export -o graph.json`` (GraphML by default) or ``topo report -o fig.png`` (HTML by default) would otherwise
write one format under another's name, which the reader (``json.load``, an image viewer) then fails on.
"""

from __future__ import annotations

from pathlib import PurePath

from ..atomic import STDOUT
from ..errors import TopoError

__all__ = ["check_output_suffix"]


def check_output_suffix(out: str, fmt: str, suffixes: dict[str, str], *, default: str, key: str = "-o",
                        writer: str | None = None) -> None:
    """Refuse ``out`` when its suffix is one of ``suffixes`` (suffix -> format) and names a format other than
    ``fmt``; another suffix, none, or standard output is accepted as given.

    Parameters
    ----------
    out : str
        The output name (``-`` for standard output).
    fmt : str
        The format that will be written.
    suffixes : dict of str to str
        Known suffixes, lower case with their dot, and the format each names.
    default : str
        The format written when ``--format`` is not given (the message says so).
    key : str
        The flag named in the error.
    writer : str, optional
        A command that writes ``fmt`` only (no ``--format``), named in the error instead of ``--format``'s choice
        (walk36: ``topo calibrate -o p.json`` wrote a TOML profile under a JSON name).

    Raises
    ------
    TopoError
        One line: the suffix's format, the format written, and the two ways out.

    Examples
    --------
    >>> check_output_suffix("g.graphml", "graphml", {".graphml": "graphml", ".json": "json"}, default="graphml")
    >>> check_output_suffix("g.json", "graphml", {".graphml": "graphml", ".json": "json"}, default="graphml")
    Traceback (most recent call last):
    ...
    topo.errors.TopoError: g.json: -o: a .json name, but --format graphml (the default) writes graphml; add --format json, or name it g.graphml
    >>> check_output_suffix("p.json", "toml", {".toml": "toml", ".json": "json"}, default="toml",
    ...                     writer="topo calibrate")
    Traceback (most recent call last):
    ...
    topo.errors.TopoError: p.json: -o: a .json name, but topo calibrate writes toml only; name it p.toml
    """
    if out == STDOUT:
        return
    path = PurePath(out)
    named = suffixes.get(path.suffix.lower())
    if named is None or named == fmt:
        return
    given = " (the default)" if fmt == default else ""
    own = next((s for s, f in suffixes.items() if f == fmt), None)  # a format with no listed suffix: no name offered
    rename = f"name it {path.with_suffix(own).name}" if own else f"give it another suffix than {path.suffix}"
    if writer is not None:
        raise TopoError(f"a {path.suffix} name, but {writer} writes {fmt} only; {rename}", source=out, key=key)
    raise TopoError(f"a {path.suffix} name, but --format {fmt}{given} writes {fmt}; add --format {named}, or {rename}",
                    source=out, key=key)
