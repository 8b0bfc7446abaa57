"""The reference of every spec field, generated from the typed model (:mod:`topo.spec.model`) so it cannot drift.

``docs/spec-reference.md`` is this module's output; ``tests/test_spec_reference.py`` checks that the committed
file equals a fresh one. Regenerate it after changing the model with::

    python -m topo.spec.reference docs/spec-reference.md
"""

from __future__ import annotations

import ast
import inspect
import sys
import types
import typing

from annotated_types import Ge, Gt, MaxLen, MinLen
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from ..atomic import SIGNATURE, open_output
from ..errors import TopoError
from ..units import format_rate, format_time
from . import model as m
from . import sites as r

__all__ = ["spec_reference", "field_docs", "SECTIONS"]

# (TOML table, model); list tables are written [[...]]
SECTIONS: list[tuple[str, type[BaseModel]]] = [
    ("(top level)", m.Spec), ("[scale_up]", m.ScaleUpSpec), ("[server]", m.ServerSpec),
    ("[cluster]", m.ClusterSpec), ("[fabric]", m.FabricSpec), ("[[fabric.tiers]]", m.TierSpec),
    # a region of several sites (a file with [[sites]]: topo/spec/sites.py)
    ("region (top level)", r.RegionSpec), ("[[sites]]", r.SiteSpec), ("[interconnect]", r.InterconnectSpec),
    ("[[interconnect.spans]]", r.SpanSpec), ("[nccl]", r.RegionNcclSpec),
]

_KIND = {m._bandwidth: "bandwidth with its unit, e.g. \"400 Gb/s\", \"450 GB/s\"",
         r._positive_rate: "bandwidth with its unit (> 0), e.g. \"800 Gb/s\"",
         m._time: "time with its unit, e.g. \"130 ns\", \"1.5 us\"",
         m._link_rate: "bandwidth with its unit, e.g. \"400 Gb/s\", \"450 GB/s\" "
                       f"(<= {m.max_link_Bps() / 1e12:g} TB/s)",
         m._site_latency: f"time with its unit, e.g. \"130 ns\", \"1.5 us\" (<= {m.MAX_LATENCY_S * 1e3:g} ms)"}


def _parts(annotation, metadata) -> tuple[typing.Any, list, bool]:
    """The base type, every constraint and validator, and whether the field may be left out (None)."""
    meta = list(metadata)
    optional = False
    while True:
        origin = typing.get_origin(annotation)
        if origin is typing.Annotated:
            annotation, *extra = typing.get_args(annotation)
            for x in extra:
                meta.extend(x.metadata if isinstance(x, FieldInfo) else [x])
        elif origin in (typing.Union, types.UnionType) and type(None) in typing.get_args(annotation):
            args = [a for a in typing.get_args(annotation) if a is not type(None)]
            optional = True
            annotation = args[0] if len(args) == 1 else typing.Union[tuple(args)]
        else:
            return annotation, meta, optional


def _type_text(annotation, meta) -> str:
    for x in meta:
        func = getattr(x, "func", None)
        if func in _KIND:
            return _KIND[func]
    origin = typing.get_origin(annotation)
    if origin is typing.Literal:
        return "one of " + ", ".join(f"`{a}`" for a in typing.get_args(annotation))
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_type_text(a, []) for a in typing.get_args(annotation))
    if origin is list:
        (item,) = typing.get_args(annotation)
        item, _, _ = _parts(item, [])
        return "list of tables" if isinstance(item, type) and issubclass(item, BaseModel) else f"list of {_type_text(item, [])}s"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "table"
    text = {int: "integer", float: "number", str: "string", bool: "true or false", dict: "table"}.get(
        annotation, str(annotation))
    bounds = [f">= {x.ge}" for x in meta if isinstance(x, Ge)] + [f"> {x.gt}" for x in meta if isinstance(x, Gt)]
    bounds += [f"at least {x.min_length} long" for x in meta if isinstance(x, MinLen)]
    bounds += [f"at most {x.max_length} long" for x in meta if isinstance(x, MaxLen)]
    if any(getattr(x, "func", None) is m._plausible_radix for x in meta):
        bounds.append(f"<= {m.MAX_RADIX:,}")
    return text + (f" ({', '.join(bounds)})" if bounds else "")


def _default_text(field: FieldInfo, meta) -> str:
    if field.is_required():
        return "required"
    d = field.default
    if d is None:
        return "not set"
    if isinstance(d, BaseModel):
        return "all defaults"
    funcs = {getattr(x, "func", None) for x in meta}
    if m._bandwidth in funcs or m._link_rate in funcs or r._positive_rate in funcs:
        return f'`"{format_rate(d)}"`'
    if m._time in funcs or m._site_latency in funcs:
        return f'`"{format_time(d, zeros=False)}"`' if d else '`"0 s"`'
    if isinstance(d, bool):
        return f"`{str(d).lower()}`"
    if isinstance(d, str):
        return f'`"{d}"`'
    return f"`{d}`"


def field_docs(model: type[BaseModel]) -> dict[str, str]:
    """The docstring under each field of a model's class body, read from its source.

    Parameters
    ----------
    model : type[pydantic.BaseModel]
        A spec model (its class body in a source file).

    Returns
    -------
    dict[str, str]
        Field name -> the string literal written right after the field's annotated assignment, cleaned as
        :func:`inspect.cleandoc` does; a field without one is absent.

    Notes
    -----
    The spec models do not ask pydantic for ``use_attribute_docstrings``: it reads every model's source when the
    module is imported, which every command paid for; only this reference needs the text.
    """
    body = ast.parse(inspect.getsource(model).lstrip()).body[0].body
    docs = {}
    for stmt, after in zip(body, body[1:]):
        if (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and isinstance(after, ast.Expr)
                and isinstance(after.value, ast.Constant) and isinstance(after.value.value, str)):
            docs[stmt.target.id] = inspect.cleandoc(after.value.value)
    return docs


def _clean(text: str | None) -> str:
    return " ".join((text or "").split()).replace("|", "\\|")


def spec_reference() -> str:
    """Markdown: one table per spec section, one row per field (key, type, default, what it means)."""
    out = [f"<!-- {SIGNATURE}: generated by python -m topo.spec.reference; edit topo/spec/model.py or sites.py instead -->",
           "# Spec reference", "",
           "Every field a spec (a TOML file, a dict, or `--set KEY=VALUE`) may give, generated from the typed model "
           "in `topo/spec/model.py` by `python -m topo.spec.reference docs/spec-reference.md` (a test checks that "
           "this file is current). Unknown keys are an error. Quantities are written with their units; GB = 1e9 "
           "bytes, `400 Gb/s` = 50 GB/s, bandwidths per direction. A region of several sites (a file with `[[sites]]`, "
           "`topo/spec/sites.py`) has the last four sections.", "",
           f"A link's rate in a site is at most {m.max_link_Bps() / 1e12:g} TB/s a direction: {m.LINK_RATE_FACTOR} "
           f"times the fastest link in topo's GPU catalog ({m.max_link_Bps() / m.LINK_RATE_FACTOR / 1e9:g} GB/s, "
           "NVLink 5; the catalog's fastest switch port is 800 Gb/s; NVLink 6 as announced for Rubin, 3.6 TB/s both "
           "directions per GPU (NVIDIA, as wheelersnetwork.com/2025/11/decoding-nvidias-rubin-networking-math.html "
           "quotes it), is within it): a rate "
           "beyond is a unit typo, not hardware. A switch, NIC or NVSwitch latency is at most "
           f"{m.MAX_LATENCY_S * 1e3:g} ms: light in fibre takes 4.9 us a km, so 1 ms is 200 km of fibre, farther "
           "than any building or campus, where a switch hop takes 0.1-1 us; a span between sites belongs in a region "
           "file (the last four sections).", ""]
    for table, model in SECTIONS:
        out += [f"## {table}", "", _clean(model.__doc__), "", "| key | type | default | meaning |",
                "|---|---|---|---|"]
        docs = field_docs(model)
        for name, field in model.model_fields.items():
            if name not in docs:
                raise ValueError(f"{model.__name__}.{name} has no docstring; every spec field must say what it is")
            annotation, meta, _ = _parts(field.annotation, field.metadata)
            out.append(f"| `{field.alias or name}` | {_type_text(annotation, meta)} | {_default_text(field, meta)} | "
                       f"{_clean(docs[name])} |")
        out.append("")
    return "\n".join(out)


USAGE = ("usage: python -m topo.spec.reference [FILE]\n"
         "Write the spec reference (markdown) to FILE, or to standard output without one; e.g. "
         "python -m topo.spec.reference docs/spec-reference.md\n")


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] in ("-h", "--help"):
        sys.stdout.write(USAGE)
        return 0
    if len(argv) > 1 or (argv and argv[0].startswith("-") and argv[0] != "-"):
        sys.stderr.write(USAGE + f"error: {' '.join(argv)}: expected one output file (or none)\n")
        return 2
    text = spec_reference()
    if not argv or argv[0] == "-":
        sys.stdout.write(text)
        return 0
    try:
        with open_output(argv[0]) as fh:  # never over a file topo did not write
            fh.write(text)
    except TopoError as exc:
        sys.stderr.write(f"error: {exc.line()}\n")
        return 2
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
