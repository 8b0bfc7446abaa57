"""``--set SPEC:KEY=VALUE``: an override of one design among several SPECs (``topo plan A B``), beside the plain
``--set KEY=VALUE`` that every SPEC takes (walk34 Left 2: two designs of ~50k GPUs each needed two spec files)."""

from __future__ import annotations

from pathlib import Path

from ..errors import TopoError
from ..spec import DEFAULT_SPEC
from ..spec.overrides import Unset, override_label

__all__ = ["design_of", "overrides_for"]


def design_of(item: str) -> tuple[str | None, str]:
    """``(design, KEY=VALUE)`` of one override: the text before a ``:`` in its key names the design (None: every
    design). Only the key is read (a value may hold a colon); an ``--unset`` stays one."""
    key = item.split("=", 1)[0]
    if ":" not in key:
        return None, item
    design, rest = item.split(":", 1)
    return design.strip(), (Unset(rest) if isinstance(item, Unset) else rest)


def _names_of(spec: str | None) -> set[str]:
    """What ``SPEC:`` may say for a SPEC as given: itself (the default's bundled name), or a file's name without
    ``.toml``."""
    given = spec or DEFAULT_SPEC
    return {given, Path(given).stem}


def overrides_for(args, name: str | None) -> list[str]:
    """The ``--set``/``--unset`` overrides design ``name`` takes: every unprefixed one and those prefixed by its name,
    in the order given.

    Parameters
    ----------
    args : argparse.Namespace
        A command's flags: ``overrides`` and, for a command of several designs, ``specs``.
    name : str or None
        The SPEC as given (None: the default).

    Raises
    ------
    TopoError
        (key ``--set`` or ``--unset``) for a prefix that names none of the SPECs (a command of one SPEC, without
        ``specs``, takes its overrides as given).
    """
    overrides = getattr(args, "overrides", None) or []
    if not hasattr(args, "specs"):  # a command of one SPEC: its keys as given
        return list(overrides)
    designs = args.specs or [None]
    known = set().union(*(_names_of(s) for s in designs))
    out = []
    for item in overrides:
        design, rest = design_of(item)
        if design is None:
            out.append(item)
            continue
        flag = "--unset" if isinstance(item, Unset) else "--set"
        if design not in known:
            among = ", ".join(repr(s or DEFAULT_SPEC) for s in designs)
            raise TopoError(f"{override_label(item)[len(flag) + 1:]!r} names the design {design!r}, which is not "
                            f"among the SPECs ({among}); allowed: SPEC:KEY=VALUE with SPEC as given or a file's name "
                            "without .toml, or KEY=VALUE for every SPEC", key=flag)
        if design in _names_of(name):
            out.append(rest)
    return out
