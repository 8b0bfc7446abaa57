"""Functions of one screen (docs/style: small modules, one idea each, functions of one screen): no function or
method of topo is longer than 70 lines, its docstring included (task tidy9 split the nine that were, the lead estimate_step);
nor of any benchmark (task tidy12 split training_accuracy.py's ``_setups`` and ``main``, task tidy13
bench_sweep.py's and bench_tiers.py's ``main``, so every ``benchmarks/*.py`` is covered)."""

import ast
from pathlib import Path

TOPO = Path(__file__).resolve().parent.parent / "topo"
BENCHMARKS = sorted((TOPO.parent / "benchmarks").glob("*.py"))
MAX_LINES = 70


def long_functions(source: str, name: str = "<source>") -> list[str]:
    """``name:line function (N lines)`` for every function or method of ``source`` over :data:`MAX_LINES`."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            n = node.end_lineno - node.lineno + 1
            if n > MAX_LINES:
                out.append(f"{name}:{node.lineno} {node.name} ({n} lines)")
    return out


def test_no_function_is_longer_than_one_screen():
    bad = []
    for path in sorted(TOPO.rglob("*.py")):
        bad += long_functions(path.read_text(), f"topo/{path.relative_to(TOPO).as_posix()}")
    assert not bad, "split into named steps of one screen: " + "; ".join(bad)


def test_no_benchmark_function_is_longer_than_one_screen():
    assert len(BENCHMARKS) >= 18  # every script of benchmarks/ (not an empty glob)
    bad = []
    for path in BENCHMARKS:
        bad += long_functions(path.read_text(), f"benchmarks/{path.name}")
    assert not bad, "split into named steps of one screen: " + "; ".join(bad)


def test_the_checker_counts_a_function_from_def_to_its_last_line():
    body = "".join(f"    x{i} = {i}\n" for i in range(MAX_LINES - 1))
    assert long_functions("def f():\n" + body) == []
    assert long_functions("class A:\n    def g(self):\n" + "    " + body.replace("\n    ", "\n        ")
                          + "        return 1\n") == ["<source>:2 g (71 lines)"]
