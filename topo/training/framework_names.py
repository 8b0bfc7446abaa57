"""Other frameworks' names for a layout field's values (torchtitan's, PyTorch pipelining's, torchao's), read from
``topo/data/compute/framework_names.toml``: what topo calls the same setting, or that topo does not model it. Only an
error line uses them; a value topo does not know stays an error."""

from __future__ import annotations

import tomllib
from functools import lru_cache

from ..resources import data_dir

__all__ = ["other_framework_hint"]


@lru_cache(maxsize=None)
def _names() -> dict[str, dict[str, str]]:
    table = tomllib.loads((data_dir("compute") / "framework_names.toml").read_text(encoding="utf-8"))
    return {field: dict(entry["names"]) for field, entry in table.items() if isinstance(entry, dict)}


def other_framework_hint(field: str, value) -> str | None:
    """What topo calls another framework's ``value`` of layout field ``field``, or why topo does not model it.

    Parameters
    ----------
    field : str
        A layout field, e.g. ``"pipeline_schedule"``.
    value : object
        The value given, e.g. ``"ZBVZeroBubble"``; matched case-insensitively with a leading ``Schedule`` dropped
        (PyTorch's class names).

    Returns
    -------
    str or None
        One clause for the error line, or None when the value is no other framework's name topo knows.
    """
    if not isinstance(value, str):
        return None
    name = value.strip().lower()
    if name.startswith("schedule") and len(name) > len("schedule"):
        name = name[len("schedule"):]
    return _names().get(field, {}).get(name)
