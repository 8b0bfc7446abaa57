"""Shared output for every command: data on stdout (a table or one JSON document), messages on stderr."""

from __future__ import annotations

import json
import math
import sys
from typing import Sequence

__all__ = ["emit_json", "emit", "note", "table", "ratio"]


def _clean(obj):
    """JSON-safe: non-finite floats become null (JSON has no Infinity)."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: _clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean(v) for v in obj]
    return obj


def emit_json(obj) -> None:
    """Print one JSON document on stdout and nothing else."""
    sys.stdout.write(json.dumps(_clean(obj), indent=2, allow_nan=False) + "\n")


def emit(text: str = "") -> None:
    sys.stdout.write(text + "\n")


def note(text: str) -> None:
    """A human message: stderr, so stdout stays data."""
    sys.stderr.write(text + "\n")


def table(rows: Sequence[Sequence], headers: Sequence[str], right: Sequence[bool] | None = None,
          indent: str = "") -> str:
    """A plain aligned text table."""
    cells = [[str(h) for h in headers]] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    right = right or [False] * len(headers)
    lines = []
    for r in cells:
        parts = [c.rjust(w) if ra else c.ljust(w) for c, w, ra in zip(r, widths, right)]
        lines.append(indent + "  ".join(parts).rstrip())
    return "\n".join(lines)


def ratio(x: float | None) -> str:
    """An oversubscription as ``7:1`` (``-`` for none)."""
    if x is None:
        return "-"
    return f"{x:.3g}:1"
