"""Write files whole or not at all: write to a temporary file beside the target, then rename over it.

The file gets the mode a plain ``open`` would give it (0666 less the umask), not the private 0600 of
:func:`tempfile.mkstemp`: reports and exports are meant to be read by others.
"""

from __future__ import annotations

import os
import tempfile
from contextlib import contextmanager
from pathlib import Path

from .errors import TopoError

__all__ = ["atomic_open"]


@contextmanager
def atomic_open(path: str | Path, mode: str = "w", encoding: str | None = "utf-8"):
    """Open a temporary file next to ``path``; on success it replaces ``path``, on any error it is removed.

    Raises :class:`TopoError` when the folder does not exist or cannot be written.
    """
    path = Path(path)
    folder = path.parent if str(path.parent) else Path(".")
    if not folder.is_dir():
        raise TopoError(f"the folder {str(folder)!r} does not exist", source=str(path))
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=folder)
    except OSError as exc:
        raise TopoError(f"cannot write here: {exc.strerror}", source=str(path)) from None
    binary = "b" in mode
    try:
        with os.fdopen(fd, mode, encoding=None if binary else encoding) as fh:
            yield fh
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
