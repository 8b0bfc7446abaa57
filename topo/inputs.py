"""Reading input files so that nothing hangs or floods memory: regular files only, with a size limit.

Every file topo reads on a user's behalf (a spec, an nccl-tests log, a profile, a traffic, model, layout or plan
file) goes through :func:`read_input_bytes`, :func:`read_input_text` or :func:`read_toml`. They

- refuse a directory, a device (``/dev/zero``), a named pipe or a socket with one line naming the file: such a
  path is never opened for a blocking read, so ``mkfifo f.toml; topo compare f.toml`` is an error, not a hang.
  The check is made on the open file (``fstat``), opened without blocking, so a path swapped after the check is
  refused too;
- refuse a file larger than ``limit`` bytes before reading it, instead of running out of memory;
- take ``-`` as standard input where the caller allows it (``allow_stdin``), read up to the same limit.

The library's errors name the file (``source``), never a command-line flag; the caller says what the file is
(``what``: ``"log file"``, ``"traffic file"``) so that the message reads naturally.
"""

from __future__ import annotations

import errno
import os
import re
import stat
import sys
import tomllib
from pathlib import Path

from .errors import TopoError

__all__ = ["STDIN", "MAX_TOML_BYTES", "MAX_TOML_DEPTH", "MAX_LOG_BYTES", "check_input", "is_input_file",
           "read_input_bytes", "read_input_text", "read_toml", "loads_toml"]

STDIN = "-"
"""The name that means standard input (where a command allows it)."""
MAX_TOML_BYTES = 16 * 2**20
"""The largest TOML input read (specs, profiles, traffic, model, layout and plan files are a few kB)."""
MAX_TOML_DEPTH = 32
"""The deepest nesting of tables and arrays read (the bundled files nest at most 5 levels); deeper, the copies and
checks that follow would exceed Python's recursion limit (an internal error, not one line naming the file)."""
MAX_LOG_BYTES = 256 * 2**20
"""The largest nccl-tests log read (a sweep with ``NCCL_DEBUG=INFO`` lines from thousands of ranks fits)."""


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a named pipe"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"


def _is_fifo(path) -> bool:
    try:
        return stat.S_ISFIFO(os.stat(path).st_mode)
    except (OSError, ValueError):
        return False


def _check_named(path, what: str, allow_stdin: bool) -> None:
    """:func:`check_input`, whose refusal of a named pipe says how to read it when ``-`` (standard input) may be
    given instead."""
    try:
        check_input(path, what)
    except TopoError as exc:
        if allow_stdin and _is_fifo(path):
            raise TopoError(f"{exc.message}, or - to read standard input (- < {path})", source=str(path)) from None
        raise


def _not_regular(path, mode: int, what: str) -> TopoError:
    kind = _kind(mode)
    return TopoError(f"is not a regular file ({kind}); give a {what}" if kind != "not a regular file" else
                     f"is not a regular file; give a {what}", source=str(path))


def is_input_file(path: str | Path) -> bool:
    """True when ``path`` exists as anything at all (a file, a folder, a device, a pipe): a name that is there is
    the user's file, never a bundled name to look up. Broken links and missing paths are False."""
    try:
        os.stat(path)
    except (OSError, ValueError):
        return False
    return True


def check_input(path: str | Path, what: str = "file") -> Path:
    """``path`` as a :class:`~pathlib.Path` if it is a regular file (links followed); else raise
    :class:`TopoError` naming it: missing, a directory, a device, a pipe or a socket.

    Parameters
    ----------
    path : str or Path
        The file a user named.
    what : str
        What the file should be, for the message (``"log file"``, ``"traffic file"``).

    Returns
    -------
    Path
        ``path``, checked.

    Raises
    ------
    TopoError
        When ``path`` does not exist or is not a regular file (``source`` is ``path``).
    """
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise TopoError(f"no such {what}", source=str(path)) from None
    except (OSError, ValueError) as exc:
        raise TopoError(f"cannot read the {what}: {getattr(exc, 'strerror', None) or exc}", source=str(path)) from None
    if not stat.S_ISREG(st.st_mode):
        raise _not_regular(path, st.st_mode, what)
    return Path(path)


def _read_limited(fh, limit: int, source: str, what: str) -> bytes:
    data = fh.read(limit + 1)
    if len(data) > limit:
        raise TopoError(f"is larger than the {_mib(limit)} a {what} may have; give a smaller file", source=source)
    return data


def _mib(n: int) -> str:
    return f"{n / 2**20:g} MiB"


def read_input_bytes(path: str | Path, what: str = "file", limit: int = MAX_TOML_BYTES,
                     allow_stdin: bool = False) -> bytes:
    """The bytes of a regular file (or of standard input for ``-`` when ``allow_stdin``), at most ``limit``.

    Parameters
    ----------
    path : str or Path
        The file a user named; ``-`` is standard input when ``allow_stdin`` is true.
    what : str
        What the file should be, for messages (``"log file"``).
    limit : int
        The largest size read, in bytes; a larger file is an error before it is read.
    allow_stdin : bool
        Whether ``-`` means standard input.

    Returns
    -------
    bytes
        The whole content.

    Raises
    ------
    TopoError
        Missing, not a regular file (a directory, device, named pipe or socket: never opened for a blocking
        read), larger than ``limit``, or unreadable; ``source`` names the file (``<stdin>`` for standard input).

    Examples
    --------
    >>> read_input_bytes("/dev/null")
    Traceback (most recent call last):
    ...
    topo.errors.TopoError: /dev/null: is not a regular file (a device); give a file
    """
    if allow_stdin and str(path) == STDIN:
        stream = getattr(sys.stdin, "buffer", None)
        if stream is None:
            raise TopoError("standard input is closed", source="<stdin>")
        return _read_limited(stream, limit, "<stdin>", what)
    _check_named(path, what, allow_stdin)
    source = str(path)
    try:  # without blocking: a path swapped for a pipe after the check above must not hang the open
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise TopoError(f"no such {what}", source=source) from None
    except OSError as exc:
        raise TopoError(f"cannot read the {what}: {exc.strerror}", source=source) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise _not_regular(path, st.st_mode, what)
        if st.st_size > limit:
            raise TopoError(f"is larger than the {_mib(limit)} a {what} may have ({st.st_size / 2**20:,.1f} MiB); "
                            "give a smaller file", source=source)
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        with os.fdopen(fd, "rb") as fh:
            fd = -1
            try:
                return _read_limited(fh, limit, source, what)
            except OSError as exc:
                if exc.errno == errno.EISDIR:
                    raise _not_regular(path, stat.S_IFDIR, what) from None
                raise TopoError(f"cannot read the {what}: {exc.strerror}", source=source) from None
    finally:
        if fd >= 0:
            os.close(fd)


def read_input_text(path: str | Path, what: str = "file", limit: int = MAX_TOML_BYTES,
                    allow_stdin: bool = False, errors: str = "strict") -> str:
    """The text of a regular file (UTF-8), as :func:`read_input_bytes` reads it.

    Parameters
    ----------
    path, what, limit, allow_stdin
        As for :func:`read_input_bytes`.
    errors : str
        How undecodable bytes are handled (``"strict"``: an error naming the file; ``"replace"``).

    Returns
    -------
    str
        The decoded text.

    Raises
    ------
    TopoError
        As :func:`read_input_bytes`, and for text that is not UTF-8 (with ``errors="strict"``).
    """
    data = read_input_bytes(path, what, limit, allow_stdin)
    try:
        return data.decode("utf-8", errors=errors)
    except UnicodeDecodeError as exc:
        source = "<stdin>" if allow_stdin and str(path) == STDIN else str(path)
        raise TopoError(f"is not UTF-8 text (byte {exc.start}); give a {what}", source=source) from None


def shown_value(value) -> str:
    """A value read from an input file as the file writes it, for error messages: TOML's ``true``/``false`` for
    booleans, else Python's repr.

    Parameters
    ----------
    value : object

    Returns
    -------
    str
    """
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value)


def read_toml(path: str | Path, what: str = "TOML file", source: str | None = None) -> dict:
    """A TOML file read as :func:`read_input_text` reads it (at most :data:`MAX_TOML_BYTES`), parsed; a leading
    UTF-8 byte-order mark is skipped.

    Parameters
    ----------
    path : str or Path
        The file.
    what : str
        What the file should be, for messages (``"traffic file"``).
    source : str, optional
        The name errors give the file (default: ``path`` as given).

    Returns
    -------
    dict
        The parsed document.

    Raises
    ------
    TopoError
        As :func:`read_input_text`, and ``invalid TOML: ...`` for a file that does not parse.
    """
    try:
        text = read_input_text(path, what)
    except TopoError as exc:
        raise TopoError(exc.message, source=source or exc.source, key=exc.key) from None
    # one leading byte-order mark (Windows Notepad saves UTF-8 with it) is part of a valid UTF-8 document, which
    # TOML 1.0 reads as one (toml-lang/toml#437); tomllib stops at it ("Invalid statement (at line 1, column 1)")
    text = text.removeprefix("\ufeff")
    try:
        return loads_toml(text, source or str(path))
    except tomllib.TOMLDecodeError as exc:
        raise TopoError(f"invalid TOML: {exc}", source=source or str(path)) from None


def loads_toml(text: str, source: str) -> dict:
    """``tomllib.loads``, refusing a document nested more than :data:`MAX_TOML_DEPTH` levels deep.

    Parameters
    ----------
    text : str
        TOML text.
    source : str
        What errors name (the file, or ``--set KEY=VALUE``).

    Returns
    -------
    dict

    Raises
    ------
    tomllib.TOMLDecodeError
        Text that is not TOML.
    TopoError
        Tables and arrays nested too deep.
    """
    too_deep = f"tables and arrays nest more than {MAX_TOML_DEPTH} levels deep (the bundled files nest 5 at most)"
    if _LONG_DOTTED_KEY.search(text):  # tomllib takes time and memory quadratic in a dotted key's parts
        raise TopoError(too_deep, source=source)
    try:
        doc = tomllib.loads(text)
    except RecursionError:  # tomllib reads nested arrays and inline tables recursively
        raise TopoError(too_deep, source=source) from None
    if _deeper_than(doc, MAX_TOML_DEPTH):
        raise TopoError(too_deep, source=source)
    return doc


# a dotted key of more than MAX_TOML_DEPTH parts (bare ones), which would nest deeper than the limit anyway. Each
# try starts at a word's first character and takes a word whole (possessive ++, Python 3.11): with a plain + the
# search backtracked through every tail of a long word, time quadratic in its length (fuzz136: a spec with a 5 MB
# comment word, well under MAX_TOML_BYTES, ran for hours; 20,000 characters took 8 s)
_LONG_DOTTED_KEY = re.compile(r"(?<![A-Za-z0-9_-])(?:[A-Za-z0-9_-]++[ \t]*+\.[ \t]*+){%d}[A-Za-z0-9_-]"
                              % MAX_TOML_DEPTH)


def _deeper_than(doc: dict, limit: int) -> bool:
    """True when tables and arrays nest more than ``limit`` levels in ``doc`` (walked without recursion)."""
    stack = [(doc, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > limit:
            return True
        children = node.values() if isinstance(node, dict) else node
        stack.extend((c, depth + 1) for c in children if isinstance(c, (dict, list)))
    return False
