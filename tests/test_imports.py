"""The package's import structure: no import cycles between topo modules, and no function-level imports of topo
modules to dodge them (a product type lives apart from the module that produces it instead).

Read with ``ast`` from the sources, so the test needs no import of its own and names file and line.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "topo"

# Function-level imports of topo modules that are allowed, with why: views that pull a heavy optional dependency
# only when the command runs and asks for them (`topo --help`, and the tests of the flags, build every command's
# parser: registering a command's flags imports its topo.cli module; `topo NAME` imports only NAME's).
LAZY_ALLOWED = {
    ("topo/cli/report.py", "topo.report"): "plotly, only for `topo report`",
    ("topo/cli/report.py", "topo.report.files"): "plotly, only for `topo report`",
    ("topo/cli/report.py", "topo.report.figures"): "plotly, only for `topo report --figure`",
    ("topo/cli/report.py", "topo.report.plan_figures"): "plotly, only for `topo report --figure power|capex|...`",
    ("topo/cli/report.py", "topo.training.tier_bytes"): "pandas, only for `topo report --train`",
    ("topo/cli/sweep.py", "topo.sweep"): "pandas, pyarrow (and dask when it runs), only for `topo sweep`",
    ("topo/cli/sweep.py", "topo.report.sweep"): "plotly, only for `topo sweep` (its --report page)",
}

# Left for the fabric/route restructuring of issue 19 part "a": none left (its function-level imports moved to the
# top when the fabric's product types left the builders and the all-to-all policy left the router).
PENDING: set = set()
PENDING_CYCLES: list = []


def _modules() -> dict[str, Path]:
    out = {}
    for p in ROOT.rglob("*.py"):
        parts = list(p.relative_to(ROOT.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = p
    return out


MODULES = _modules()


def _targets(module: str, path: Path, node: ast.Import | ast.ImportFrom) -> list[str]:
    """The topo modules an import statement loads (a submodule named in ``from pkg import sub`` is the target,
    not the package)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names if a.name.split(".")[0] == "topo"]
    if node.level:
        base = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
        base = base[:len(base) - (node.level - 1)]
        pkg = ".".join(base + ([node.module] if node.module else []))
    else:
        pkg = node.module or ""
    if pkg.split(".")[0] != "topo":
        return []
    subs = [f"{pkg}.{a.name}" for a in node.names if f"{pkg}.{a.name}" in MODULES]
    return subs + ([pkg] if len(subs) < len(node.names) else [])


def _imports():
    """(module, file, line, target, at module level) for every import of a topo module."""
    for module, path in sorted(MODULES.items()):
        tree = ast.parse(path.read_text(), str(path))
        top = {id(n) for n in tree.body}
        top |= {id(n) for s in tree.body if isinstance(s, (ast.If, ast.Try)) for n in ast.walk(s)}
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for t in _targets(module, path, node):
                    yield module, path.relative_to(ROOT.parent).as_posix(), node.lineno, t, id(node) in top


def _type_checking_only(path: Path) -> set[int]:
    tree = ast.parse(path.read_text())
    lines = set()
    for s in tree.body:
        if isinstance(s, ast.If) and "TYPE_CHECKING" in ast.unparse(s.test):
            lines |= {n.lineno for n in ast.walk(s) if isinstance(n, (ast.Import, ast.ImportFrom))}
    return lines


def test_no_function_level_imports_of_topo_modules():
    bad = [f"{f}:{line}: imports {t} inside a function" for _, f, line, t, top in _imports()
           if not top and (f, t) not in LAZY_ALLOWED and (f, t) not in PENDING]
    assert not bad, "\n".join(bad)


def test_the_allowed_lists_name_imports_that_exist():
    lazy = {(f, t) for _, f, _, t, top in _imports() if not top}
    stale = sorted(set(LAZY_ALLOWED) - lazy) + sorted(PENDING - lazy)
    assert not stale, f"no longer function-level imports, remove from the lists: {stale}"


def _cycles(edges: dict[str, set[str]]) -> list[set[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]
    for root in edges:
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges.get(w, ())))))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = set()
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.add(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        out.append(comp)
    return out


def test_no_import_cycles_between_topo_modules():
    # every import counts, at module level or inside a function: a function-level import only postpones a cycle
    edges: dict[str, set[str]] = {m: set() for m in MODULES}
    guarded = {m: _type_checking_only(p) for m, p in MODULES.items()}
    for module, _, line, target, _ in _imports():
        if target != module and target in MODULES and line not in guarded[module]:
            edges[module].add(target)
    cycles = [c for c in _cycles(edges) if not any(c <= p for p in PENDING_CYCLES)]
    assert not cycles, "import cycles: " + "; ".join(" <-> ".join(sorted(c)) for c in cycles)


def test_the_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [{"a", "b", "c"}]
    assert _cycles({"a": {"b"}, "b": set()}) == []
