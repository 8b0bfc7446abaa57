"""Writing output files so that nothing is ever destroyed: whole or not at all, never over an input.

Two layers:

- :func:`atomic_open` writes a *regular file* whole or not at all (a temporary file beside the target, renamed
  over it on success, removed on any error). The file gets the mode a plain ``open`` would give it (0666 less the
  umask), not the private 0600 of :func:`tempfile.mkstemp`: reports and exports are meant to be read by others.
  Anything that is not a regular file (``/dev/stdout``, ``/dev/null``, ``/dev/full``, a named pipe) is streamed
  to, never replaced (a named pipe no process reads within :data:`FIFO_READER_WAIT_S` is refused: the write would
  wait for ever); a symbolic link is followed, so the file it points to is rewritten and the link stays.
- :func:`open_output` is what commands use for ``-o FILE``. On top of the above it

  * takes ``-`` as standard output;
  * refuses a directory, and any path that is one of the ``inputs`` (the same file, also through a link);
  * refuses to replace an existing regular file that is not *ours* unless ``force`` is true. A file is ours when
    it is empty or when its first 4 KiB carry :data:`SIGNATURE` (``written by topo``), which every file topo
    writes contains near its start (an HTML or XML comment, a JSON ``"generator"`` key, a PNG text chunk). So a
    second ``topo report`` replaces the report of the first, but never a user's spec, notes or picture.

:func:`safe_file_name` makes a default output name from a spec's name (no folders, no leading dot).
"""

from __future__ import annotations

import errno
import os
import re
import stat
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterable

from .errors import TopoError
from .units import format_time

__all__ = ["atomic_open", "open_output", "check_output", "is_ours", "safe_file_name", "SIGNATURE", "STDOUT"]

SIGNATURE = "written by topo"
"""The mark every output file of topo carries near its start: the test of "ours" in :func:`open_output`."""
STDOUT = "-"
_HEAD_BYTES = 4096
FIFO_READER_WAIT_S = 5.0
"""How long a named pipe given as an output may go without a reader before it is refused: its reader, started
just before topo (``cat pipe & topo export -o pipe``), has long opened it by then; none at all would block the
write for ever (``open`` waits for a reader, pipe(7))."""


def safe_file_name(stem: str, suffix: str, fallback: str = "topo") -> str:
    """A file name for the working folder made from ``stem`` (e.g. a spec's name) and ``suffix`` (``.json``).

    Path separators and other characters outside ``A-Z a-z 0-9 . _ -`` become ``-``; leading dots and dashes are
    dropped (no hidden files, no names read as options, no ``..``); an empty result becomes ``fallback``.

    >>> safe_file_name("../escaped-by-name", ".json")
    'escaped-by-name.json'
    >>> safe_file_name("dgx-h100-superpod", ".graphml")
    'dgx-h100-superpod.graphml'
    """
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", stem).lstrip(".-")[:200]
    return (name or fallback) + suffix


def is_ours(path: str | Path) -> bool:
    """True when ``path`` is a regular file that is empty or carries :data:`SIGNATURE` in its first 4 KiB."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(_HEAD_BYTES)
    except OSError:
        return False
    return not head or SIGNATURE.encode() in head


def _stat(path: Path):
    try:
        return os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        raise TopoError(f"cannot use this output: {exc.strerror}", source=str(path)) from None


def _is_fifo(path: Path) -> bool:
    try:
        return stat.S_ISFIFO(os.stat(path).st_mode)
    except OSError:
        return False


def _open_fifo(path: Path) -> int:
    """A named pipe opened for writing once a process reads it, waiting at most :data:`FIFO_READER_WAIT_S`; a
    blocking ``open`` would wait for ever when none comes. A non-blocking ``open`` for writing fails with ENXIO
    while the pipe has no reader (pipe(7), fifo(7)); the descriptor is made blocking again for the write."""
    deadline = time.monotonic() + FIFO_READER_WAIT_S
    while True:
        try:
            fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
        except OSError as exc:
            if exc.errno != errno.ENXIO:
                raise
            if time.monotonic() >= deadline:
                raise TopoError(f"is a named pipe with no reader after {format_time(FIFO_READER_WAIT_S)}; start its reader "
                                f"first (cat {path} &), or give a regular file", source=str(path)) from None
            time.sleep(0.05)
            continue
        os.set_blocking(fd, True)
        return fd


@contextmanager
def _stream(path: Path, mode: str, encoding: str | None):
    """Write straight into a device, a pipe or another non-regular file (never replace it)."""
    binary = "b" in mode
    try:
        fh = os.fdopen(_open_fifo(path), mode, encoding=None if binary else encoding) if _is_fifo(path) else \
            open(path, mode, encoding=None if binary else encoding)
    except OSError as exc:
        raise TopoError(f"cannot write here: {exc.strerror}", source=str(path)) from None
    try:
        with fh:
            yield fh
    except BrokenPipeError:  # the reader went away (e.g. | head): not bad input
        raise
    except OSError as exc:
        raise TopoError(f"cannot write here: {exc.strerror}", source=str(path)) from None


@contextmanager
def atomic_open(path: str | Path, mode: str = "w", encoding: str | None = "utf-8"):
    """Open ``path`` for writing: a regular file appears whole or not at all; anything else is streamed to.

    A new or regular file: a temporary file next to it, which replaces it on success and is removed on any error.
    A symbolic link is followed (the file it points to is replaced, the link stays). A device, pipe or socket
    (``/dev/stdout``, ``/dev/null``) is written in place, never replaced. Raises :class:`TopoError` when the
    path is a directory, the folder does not exist, or it cannot be written. (It does not refuse to replace an
    existing file: :func:`open_output` does that.)
    """
    path = Path(path)
    st = _stat(path)
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise TopoError("is a directory; give a file name, e.g. " + str(path / "out"), source=str(path))
    if st is not None and not stat.S_ISREG(st.st_mode):
        with _stream(path, mode, encoding) as fh:
            yield fh
        return
    if path.is_symlink():
        path = Path(os.path.realpath(path))
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
    except BaseException as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(exc, OSError) and not isinstance(exc, (BrokenPipeError, FileNotFoundError)):
            raise TopoError(f"cannot write here: {exc.strerror or exc}", source=str(path)) from None
        raise


@contextmanager
def _stdout(mode: str):
    fh = sys.stdout.buffer if "b" in mode else sys.stdout
    yield fh
    fh.flush()


def check_output(path: str | Path, *, inputs: Iterable[str | Path] = (), force: bool = False,
                 key: str = "output", force_option: str = "force") -> None:
    """Raise :class:`TopoError` if :func:`open_output` would refuse ``path``; write nothing. Commands call it
    before long work so that a bad ``-o`` fails at once."""
    if str(path) == "":
        raise TopoError(f"an empty file name; give a file name, or {STDOUT} for standard output", key=key)
    if str(path) == STDOUT:
        return
    path = Path(path)
    st = _stat(path)
    if st is None:
        folder = path.parent if str(path.parent) else Path(".")
        if not folder.is_dir():
            raise TopoError(f"the folder {str(folder)!r} does not exist", source=str(path))
        return
    if stat.S_ISDIR(st.st_mode):
        raise TopoError("is a directory; give a file name inside it", source=str(path), key=key)
    for src in inputs:
        try:
            same = os.path.samefile(path, src)
        except OSError:
            same = False
        if same:
            raise TopoError(f"is an input ({src}); refusing to write over it, choose another output file",
                            source=str(path), key=key)
    if stat.S_ISREG(st.st_mode) and not force and not is_ours(path):
        raise TopoError("exists and was not written by topo; refusing to replace it; choose another file "
                        f"or use {force_option}", source=str(path), key=key)


def open_output(path: str | Path, mode: str = "w", *, inputs: Iterable[str | Path] = (), force: bool = False,
                encoding: str | None = "utf-8", key: str = "output", force_option: str = "force"):
    """Open an output file the safe way (see the module's doc): ``-`` is standard output; refuses directories,
    the ``inputs`` and, unless ``force``, an existing regular file that is not ours (:func:`check_output`).
    ``key`` names the option in errors and ``force_option`` the way to force (the CLI passes its own flags)."""
    inputs = [str(x) for x in inputs if x]
    check_output(path, inputs=inputs, force=force, key=key, force_option=force_option)
    if str(path) == STDOUT:
        return _stdout(mode)
    return atomic_open(path, mode, encoding)
