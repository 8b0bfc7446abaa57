"""Start-up of `topo` commands: CPU time and peak memory of whole commands whose time is mostly imports, this tree
against other trees (the code before a change), run in alternation.

The least user + system CPU of the runs is the figure: a shared machine's load inflates wall time and, less, CPU
time; the least of several alternating runs is the fairest comparison of two trees on it. Each tree's package is
compiled to bytecode first (as an installed package is). Also counted: how many of topo's modules a command
imports, in one more run of each.

    python benchmarks/bench_startup.py                                      # this tree only
    python benchmarks/bench_startup.py --before /tmp/before --also main=/path/to/main/checkout
    python benchmarks/bench_startup.py --before /tmp/before --write         # and update benchmarks/RESULTS.md
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from _results import PY, ROOT, arguments, compile_bytecode, measured_run, update_section

COMMANDS = [
    ["describe", "h100-100k", "--json"],
    ["plan", "h100-100k", "--json"],
    ["list"],
    ["estimate", "dgx-h100-superpod", "--size", "1GiB", "-a", "ring", "--json"],
]
RUN = "import sys; from topo.cli.main import main; sys.exit(main(sys.argv[1:]))"
COUNT = ("import contextlib, io, sys; from topo.cli.main import main\nwith contextlib.redirect_stdout(io.StringIO()):"
         " main(sys.argv[1:])\nprint(sum(m == 'topo' or m.startswith('topo.') for m in sys.modules))")


def _env(tree: Path) -> dict:
    return {**os.environ, "PYTHONPATH": str(tree)}


def modules_imported(tree: Path, command: list[str]) -> int:
    """How many of topo's modules one run of ``command`` imports from ``tree``."""
    out = subprocess.run([PY, "-c", COUNT, *command], capture_output=True, text=True, cwd=tree, env=_env(tree))
    return int(out.stdout.split()[-1]) if out.returncode == 0 and out.stdout.split() else -1


def main() -> None:
    ap = arguments(__doc__, write=False)
    ap.add_argument("--before", type=Path, help="a checkout of the code to compare with (e.g. commit 60cb2ef)")
    ap.add_argument("--also", action="append", default=[], metavar="LABEL=DIR", help="another tree to compare")
    ap.add_argument("--repeats", type=int, default=7, help="runs of each command in each tree (default 7)")
    ap.add_argument("--write", action="store_true", help="update benchmarks/RESULTS.md")
    a = ap.parse_args()
    trees = ([("before", a.before)] if a.before else []) + [
        (x.split("=", 1)[0], Path(x.split("=", 1)[1])) for x in a.also] + [("this tree", ROOT)]
    compile_bytecode(*(t for _, t in trees))
    cpu: dict = {}
    rss: dict = {}
    load = [os.getloadavg()[0]]
    for _ in range(a.repeats):
        for cmd in COMMANDS:
            for label, tree in trees:  # alternating: a change in the machine's load falls on every tree alike
                run = measured_run([PY, "-c", RUN, *cmd], env=_env(tree), cwd=tree)
                cpu.setdefault((label, tuple(cmd)), []).append(run["cpu_s"])
                rss[(label, tuple(cmd))] = max(rss.get((label, tuple(cmd)), 0.0), run["rss_MiB"])
    head = " | ".join(f"{label} CPU (s) | {label} (MiB) | {label} modules" for label, _ in trees)
    lines = [f"Least user + system CPU of {a.repeats} runs of each command, the trees run in alternation; peak RSS; "
             "topo's modules the command imports. Trees: "
             + ", ".join(f"{label} `{tree}`" for label, tree in trees) + ".", "",
             f"| command | {head} |", "|---|" + "---:|" * (3 * len(trees))]
    for cmd in COMMANDS:
        cells = " | ".join(f"{min(cpu[(label, tuple(cmd))]):.3f} | {rss[(label, tuple(cmd))]:.0f} | "
                           f"{modules_imported(tree, cmd)}" for label, tree in trees)
        lines.append(f"| `topo {' '.join(cmd)}` | {cells} |")
    load.append(os.getloadavg()[0])
    lines += ["", f"Load average when measured: {min(load):.1f} to {max(load):.1f} on {os.cpu_count()} cores (other "
              "sessions share the machine; CPU time is inflated less than wall time by their contention)."]
    update_section("Start-up: CPU of commands that are mostly imports", "\n".join(lines),
                   "python benchmarks/bench_startup.py" + (" --before DIR" if a.before else ""))


if __name__ == "__main__":
    sys.exit(main())
