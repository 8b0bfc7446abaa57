"""Running ``topo ARGS`` for a test: in this interpreter when the call only prints, in a fresh one otherwise.

A subprocess costs 0.3-1 s of CPU a call, mostly imports (docs/calibration-findings.md section 206); the suite
makes several hundred of them. :func:`in_process` calls :func:`topo.cli.main.main` itself with its standard
output and error captured, exit status taken from its return or its ``SystemExit``, in the folder the test gave,
and Python's warnings shown on the captured stderr as a fresh interpreter's default filters would show them.
:func:`prints_only` says which calls may run so: a command that only reads its inputs and prints, with no output
file, no standard input, no device file or FIFO, no ``--debug`` traceback and no ``TOPO_*`` variable set by the
test. Every other call, and every call a test asks to run ``fresh``, is a real ``python -m topo`` subprocess;
tests/test_cli_entry.py keeps one such call per command family and checks that both runners agree.
"""

from __future__ import annotations

import io
import os
import stat
import subprocess
import sys
import traceback
import warnings
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

from topo.cli.main import COMMANDS, main

# Commands that read and print only, when given no output flag. report, export and sweep write files by default
# (sweep also starts Dask workers): always a subprocess.
PRINTING_COMMANDS = frozenset(COMMANDS) - {"report", "export", "sweep"}
# Flags that name a file to write (estimate's -o is --op, an operation, not an output).
OUTPUT_FLAGS = ("--output", "--bom-csv", "--csv", "--report", "--force")


def _command(args) -> str | None:
    return next((a for a in args if a != "--debug"), None)


def _special_path(arg: str, cwd: Path) -> bool:
    """A FIFO, device or other non-regular file (the test's subject is how topo reads it)."""
    if arg.startswith("/dev/"):
        return True
    try:
        mode = os.stat(cwd / arg).st_mode
    except (OSError, ValueError):
        return False
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


def prints_only(args, cwd) -> bool:
    """Whether ``topo ARGS`` in ``cwd`` may run in this interpreter (see the module's docstring)."""
    command = _command(args)
    if command not in PRINTING_COMMANDS or "--debug" in args or "-" in args:
        return False
    if any(k.startswith("TOPO_") for k in os.environ):
        return False
    for a in args:
        if a.startswith(OUTPUT_FLAGS) or (a.startswith("-o") and command != "estimate"):
            return False
        if _special_path(a, Path(cwd)):
            return False
    return True


def _shown_warnings(caught) -> str:
    return "".join(warnings.formatwarning(w.message, w.category, w.filename, w.lineno, w.line) for w in caught)


def in_process(args, cwd) -> subprocess.CompletedProcess:
    """``topo ARGS`` run by :func:`topo.cli.main.main` in ``cwd``, as a ``CompletedProcess`` (text streams)."""
    out, err, here = io.StringIO(), io.StringIO(), os.getcwd()
    argv = [str(a) for a in args]
    with warnings.catch_warnings(record=True) as caught:
        warnings.resetwarnings()  # a fresh interpreter's default filters (the warnings module's documentation)
        warnings.simplefilter("default")
        for category in (DeprecationWarning, PendingDeprecationWarning, ImportWarning, ResourceWarning):
            warnings.simplefilter("ignore", category)
        os.chdir(cwd)
        try:
            with redirect_stdout(out), redirect_stderr(err):
                try:
                    code = main(argv)
                except SystemExit as exc:
                    code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
                    if exc.code is not None and not isinstance(exc.code, int):
                        sys.stderr.write(f"{exc.code}\n")
                except Exception:  # what an uncaught exception does to a fresh interpreter
                    traceback.print_exc()
                    code = 1
        finally:
            os.chdir(here)
    return subprocess.CompletedProcess([sys.executable, "-m", "topo", *argv], code or 0, out.getvalue(),
                                       err.getvalue() + _shown_warnings(caught))
