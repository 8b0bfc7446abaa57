"""Shared by the benchmark scripts: machine description, timing of whole commands, and RESULTS.md sections."""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "RESULTS.md"


def machine() -> str:
    cpu = platform.processor() or "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        mem_kb = int(re.search(r"MemTotal:\s+(\d+)", Path("/proc/meminfo").read_text()).group(1))
        mem = f"{mem_kb / 2**20:.0f} GiB"
    except (OSError, AttributeError):
        mem = "unknown memory"
    return f"{cpu}, {os.cpu_count()} cores, {mem}, Python {platform.python_version()}, {platform.system()}"


def peak_rss_of(args: list[str]) -> tuple[float, float, str]:
    """Wall time and peak RSS (MiB) of one run, measured with /usr/bin/time-like wait4 accounting."""
    run = measured_run(args)
    return run["wall_s"], run["rss_MiB"], run["out"]


def measured_run(args: list[str], env: dict | None = None, cwd: Path = ROOT) -> dict:
    """One run of a command: wall time, CPU time (user + system: what a shared machine's load does not inflate),
    peak RSS (MiB) and stdout, with /usr/bin/time-like wait4 accounting.

    The child's stdout and stderr are drained by two threads while ``wait4`` waits, so a child that writes more
    than a pipe buffer (64 KiB: three designs' ``plan --json`` is ~90 KB) cannot block on a full pipe while its
    parent waits for it to exit (the deadlock of issue 23).
    """
    t0 = time.perf_counter()
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cwd, env=env)
    chunks: dict[str, str] = {}

    def drain(name, stream):
        chunks[name] = stream.read()

    readers = [threading.Thread(target=drain, args=(n, s), daemon=True)
               for n, s in (("out", proc.stdout), ("err", proc.stderr))]
    for r in readers:
        r.start()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    for r in readers:
        r.join()
    proc.returncode = os.waitstatus_to_exitcode(status)  # reaped by wait4: keep Popen from waiting again
    out, err = chunks.get("out", ""), chunks.get("err", "")
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed: {err}")
    return {"wall_s": wall, "cpu_s": usage.ru_utime + usage.ru_stime, "rss_MiB": usage.ru_maxrss / 1024, "out": out}


def fastest_run(args: list[str], repeats: int = 3) -> tuple[float, float, str]:
    """Wall time, peak RSS (MiB) and stdout of the fastest of ``repeats`` runs of one command."""
    return min((peak_rss_of(args) for _ in range(repeats)), key=lambda run: run[0])


class _Parser(argparse.ArgumentParser):
    """argparse with a bad command line refused on one line: what was wrong and the flags allowed."""

    def error(self, message: str):
        allowed = sorted(k for k, a in self._option_string_actions.items()
                         if k.startswith("--") and a.help is not argparse.SUPPRESS)
        self.exit(2, f"{self.prog}: error: {message}; allowed: {', '.join(allowed)}\n")


def arguments(doc: str, write: bool = True) -> argparse.ArgumentParser:
    """The argument parser of a benchmark script: the first line of its docstring ``doc`` as description, and
    ``--write`` (update RESULTS.md) unless ``write`` is false. The script adds its own flags and calls
    ``parse_args()``, which answers ``--help`` at once and refuses an unknown flag or a bad value on one line
    naming it and the flags allowed."""
    ap = _Parser(description=doc.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter,
                 epilog="\n".join(doc.splitlines()[1:]).strip())
    if write:
        ap.add_argument("--write", action="store_true", help="update benchmarks/RESULTS.md")
    return ap


def writing() -> bool:
    """Whether this run was asked to rewrite RESULTS.md (``--write`` on the command line)."""
    return "--write" in sys.argv[1:]


def update_section(name: str, body: str, command: str) -> None:
    """Replace (or append) the section ``name`` of RESULTS.md, stamped with command, machine and date, when the
    script was run with ``--write``; otherwise print the section on stdout and leave the tracked file alone."""
    stamp = (f"Command: `{command} --write`  \nMachine: {machine()}  \n"
             f"Date: {dt.datetime.now(dt.timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}\n")
    section = f"<!-- begin {name} -->\n## {name}\n\n{stamp}\n{body.rstrip()}\n<!-- end {name} -->\n"
    if not writing():
        print(section, end="")
        print(f"(benchmarks/RESULTS.md not written: run `{command} --write` to record this section)",
              file=sys.stderr)
        return
    text = RESULTS.read_text() if RESULTS.exists() else (
        "# Benchmark results\n\nWritten by the scripts in `benchmarks/` when run with `--write`; each section says "
        "how to regenerate it.\n\n")
    pattern = re.compile(rf"<!-- begin {re.escape(name)} -->.*?<!-- end {re.escape(name)} -->\n", re.S)
    text = pattern.sub(lambda _: section, text) if pattern.search(text) else text + "\n" + section
    tmp = RESULTS.with_suffix(".tmp")
    tmp.write_text(text)
    tmp.replace(RESULTS)


PY = sys.executable


def compile_bytecode(*roots: Path) -> None:
    """Compile each tree's ``topo`` package to bytecode first, as ``pip install`` does for an installed wheel.

    With ``PYTHONDONTWRITEBYTECODE`` set (it is on this machine) a source checkout recompiles every module it
    imports on every run, so the tree whose modules changed most recently pays ~0.1-0.3 s more per command: a
    difference no user of an installed package sees.
    """
    import compileall

    for root in roots:
        compileall.compile_dir(str(Path(root) / "topo"), quiet=1)
