"""Writing the report's files: whole or not at all (:func:`topo.atomic.atomic_open`), readable like any new file.

``atomic_open`` writes through :func:`tempfile.mkstemp`, whose file is private (mode 0600); a report is meant to
be opened by others (a browser, a web server, a colleague), so it gets the mode a plain ``open`` would give it:
0666 less the umask.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..atomic import atomic_open

__all__ = ["write_bytes"]


def write_bytes(path: str | Path, data: bytes) -> int:
    """Write ``data`` to ``path`` atomically with the usual permissions; returns the number of bytes."""
    with atomic_open(path, "wb") as fh:
        fh.write(data)
    umask = os.umask(0)
    os.umask(umask)
    try:
        os.chmod(path, 0o666 & ~umask)
    except OSError:  # pragma: no cover - e.g. a file system without modes; the file is written all the same
        pass
    return len(data)
