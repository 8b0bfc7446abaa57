"""docs/architecture.md is the map a newcomer reads (issue 19 item 4): every module, file and type it names must
exist, and every module of the core packages (spec, fabric, engine) must be on it.

Issue 19 walk-through: the names table said `Floor` (the type is `FloorPlan`) and `compare` for
`topo.calibrate.compare` (no such function: `compare_run`), and engine/collectives.py, fabric/hardware.py,
hosts.py and export.py were on no line of the map.
"""

import importlib
import pkgutil
import re
from pathlib import Path

import topo

ROOT = Path(__file__).resolve().parents[1]
DOC = (ROOT / "docs" / "architecture.md").read_text()
TICKED = re.findall(r"`([^`]+)`", DOC)


def _modules():
    names = ["topo"]
    for m in pkgutil.walk_packages(topo.__path__, "topo."):
        names.append(m.name)
    return [importlib.import_module(n) for n in names]


def test_every_named_type_exists():
    everywhere = set()
    for mod in _modules():
        everywhere |= set(vars(mod))
    camel = {t for t in TICKED if re.fullmatch(r"[A-Z][a-z]+[A-Z]\w*|[A-Z][a-z]{3,}", t)}
    assert camel, "the doc names types"
    missing = sorted(t for t in camel if t not in everywhere)
    assert not missing, f"docs/architecture.md names types that do not exist: {missing}"


def test_every_named_module_and_attribute_exists():
    for t in TICKED:
        m = re.fullmatch(r"(topo(?:\.\w+)+)", t)
        if not m:
            continue
        parts = t.split(".")
        for i in range(len(parts), 0, -1):  # the longest importable prefix, then attributes
            try:
                obj = importlib.import_module(".".join(parts[:i]))
            except ModuleNotFoundError:
                continue
            for attr in parts[i:]:
                assert hasattr(obj, attr), f"{t}: {'.'.join(parts[:i])} has no {attr}"
                obj = getattr(obj, attr)
            break
        else:
            raise AssertionError(f"{t}: no such module")
    for path in re.findall(r"(topo/[\w/]+\.py|tests/\w+\.py)", DOC):
        assert (ROOT / path).exists(), path


def test_the_names_table_lives_where_it_says():
    """Each type or function a row of the names table names is in the module the row says (or, for a catalog
    key such as ``price_ranges``, a catalog file of that name; a catalog type, in the catalog's schema)."""
    rows = re.findall(r"^\| ([^|]+) \| ([^|]+) \| `(topo(?:\.\w+)+)`", DOC, flags=re.M)
    assert len(rows) >= 10
    catalog = {p.stem for p in (ROOT / "topo" / "data").rglob("*.toml")}
    for name, means, where in rows:
        mod = importlib.import_module(where)
        types = [v for v in vars(mod).values() if isinstance(v, type)]
        for t in re.findall(r"`([A-Za-z]\w*)`", means):
            if not re.fullmatch(r"[A-Z]\w+|[a-z]+_\w+", t) or t in catalog:
                continue
            found = hasattr(mod, t) or any(hasattr(c, t) for c in types) or hasattr(
                importlib.import_module("topo.plan.catalog_schema"), t)
            assert found, f"{where} has no {t} (row {name.strip()!r})"


def test_the_core_packages_are_on_the_map():
    core = [p for d in ("spec", "fabric", "engine") for p in sorted((ROOT / "topo" / d).rglob("*.py"))
            if p.name != "__init__.py" and "algorithms" not in p.parts]
    missing = [str(p.relative_to(ROOT)) for p in core
               if p.name not in DOC and str(p.relative_to(ROOT / "topo")) not in DOC]
    assert not missing, f"modules on no line of docs/architecture.md: {missing}"


# --- every :mod:, :func: and :class: reference resolves (issue 30: 16 pointed at the old flat layout, e.g.
# :mod:`topo.route` for topo.engine.route) ----------------------------------------------------------------------

_REF = re.compile(r":(mod|func|class):`~?([^`<>]+?)`")


def _resolves(name: str, module: str | None) -> bool:
    """Whether ``name`` imports, as Sphinx reads it: absolute, relative to ``module``'s package (``.point``), or
    a name of ``module`` or of its package."""
    name = name.strip().removesuffix("()")
    if name.startswith("."):
        pkg, rest = module.rsplit(".", 1)[0], name[1:]
        while rest.startswith("."):
            pkg, rest = pkg.rsplit(".", 1)[0], rest[1:]
        candidates = [f"{pkg}.{rest}"]
    else:
        candidates = [name] + ([f"{module}.{name}", f"{module.rsplit('.', 1)[0]}.{name}"] if module else [])
    for c in candidates:
        parts = c.split(".")
        for i in range(len(parts), 0, -1):  # the longest importable prefix, then attributes
            try:
                obj = importlib.import_module(".".join(parts[:i]))
            except ImportError:
                continue
            for attr in parts[i:]:
                obj = getattr(obj, attr, None)
                if obj is None:
                    break
            else:
                return True
            break
    return False


def test_every_mod_func_and_class_reference_resolves():
    files = sorted((ROOT / "topo").rglob("*.py")) + sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md"]
    bad = []
    for f in files:
        module = None
        if f.suffix == ".py":
            module = ".".join(f.relative_to(ROOT).with_suffix("").parts)
            if module.endswith(".__init__"):  # a package: its relative names are its own modules
                module = module[: -len("__init__")] + "x"
        for kind, name in _REF.findall(f.read_text()):
            if not _resolves(name, module):
                bad.append(f"{f.relative_to(ROOT)}: :{kind}:`{name}`")
    assert not bad, "references that do not resolve:\n" + "\n".join(bad)
