"""Writing the report's files: whole or not at all, readable like any new file (:func:`topo.atomic.atomic_open`)."""

from __future__ import annotations

from pathlib import Path

from ..atomic import atomic_open

__all__ = ["write_bytes"]


def write_bytes(path: str | Path, data: bytes) -> int:
    """Write ``data`` to ``path`` atomically with the usual permissions; returns the number of bytes."""
    with atomic_open(path, "wb") as fh:
        fh.write(data)
    return len(data)
