"""Shared output for every command: data on stdout (a table or one JSON document), messages on stderr."""

from __future__ import annotations

import json
import math
import sys
from typing import Sequence

from ..units import format_in

__all__ = ["emit_json", "emit", "note", "table", "ratio", "safe_text", "mfu_text"]


def _clean(obj):
    """JSON-safe: non-finite floats become null (JSON has no Infinity)."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: _clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean(v) for v in obj]
    return obj


def safe_text(text) -> str:
    """``text`` with control characters (ESC, BEL, TAB, bidirectional overrides such as U+202E, ...) shown as
    escapes, so a name from a spec cannot drive the terminal: ``a\\x1b[31mb``."""
    text = str(text)
    if all(ch.isprintable() or ch == " " for ch in text):
        return text
    out = []
    for ch in text:
        if ch.isprintable() or ch == " ":
            out.append(ch)
        else:
            o = ord(ch)
            out.append(f"\\x{o:02x}" if o < 0x100 else (f"\\u{o:04x}" if o < 0x10000 else f"\\U{o:08x}"))
    return "".join(out)


def emit_json(obj) -> None:
    """Print one JSON document on stdout and nothing else."""
    sys.stdout.write(json.dumps(_clean(obj), indent=2, allow_nan=False) + "\n")


def emit(text: str = "") -> None:
    """Print human text on stdout, control characters escaped line by line (:func:`safe_text`): names and
    descriptions from a spec never reach the terminal raw."""
    sys.stdout.write("\n".join(safe_text(line) for line in str(text).split("\n")) + "\n")


def note(text: str) -> None:
    """A human message: stderr, so stdout stays data (control characters escaped, as :func:`emit`)."""
    sys.stderr.write("\n".join(safe_text(line) for line in str(text).split("\n")) + "\n")


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


def mfu_text(mfu: float, precision: str, peak_flop_per_s_per_gpu: float) -> str:
    """An MFU with the peak it is of (FP8 and BF16 conventions differ): ``MFU 19.0% of the fp8 peak (5,000
    TFLOP/s dense)``.

    Parameters
    ----------
    mfu : float
        Model FLOPs over the peak, 0 to 1.
    precision : str
        The precision whose peak it is (``bf16``, ``fp8``, ...).
    peak_flop_per_s_per_gpu : float
        That peak, dense, in FLOP/s per GPU.

    Returns
    -------
    str

    >>> mfu_text(0.19, "fp8", 5e15)
    'MFU 19.0% of the fp8 peak (5,000 TFLOP/s dense)'
    """
    return f"MFU {mfu:.1%} of the {precision} peak ({format_in(peak_flop_per_s_per_gpu, 'TFLOP/s', ',.0f')} dense)"
