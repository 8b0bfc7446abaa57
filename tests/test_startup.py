"""Start-up: a command imports the modules it runs, not every command's library (issue 19: `topo describe` and
`topo plan` within 10% of the earlier CPU time, most of which is imports).

Measured (2 shared cores, least user+sys CPU of 7 runs, alternating trees): `topo describe h100-100k --json`
1.03 s -> 0.77 s when topo.cli.main stopped importing every command and ``import topo`` stopped importing the
engine (39 of topo's modules imported instead of about 110; 30 since the estimate flags left topo.cli.common).
``benchmarks/bench_startup.py`` measures it against another tree.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from conftest import ROOT
from topo.cli.main import COMMANDS, build_parser, command_in


def _imported_after(code: str) -> set[str]:
    """topo's modules imported by running ``code`` in a fresh interpreter."""
    script = (f"import contextlib, io, sys\n{code}\n"
              "print(' '.join(sorted(m for m in sys.modules if m == 'topo' or m.startswith('topo.'))))")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, check=True)
    return set(proc.stdout.split())


def _subparsers(parser):
    return next(a for a in parser._actions if a.dest == "command").choices


def test_every_command_s_module_registers_that_command():
    assert list(_subparsers(build_parser())) == list(COMMANDS)  # `topo --help` lists them in this order
    for name in COMMANDS:
        assert list(_subparsers(build_parser(name))) == [name]


@pytest.mark.parametrize("argv, command", [
    (["describe", "--json"], "describe"), (["--debug", "plan"], "plan"), (["--debug", "--debug", "list"], "list"),
    (["--help"], None), (["--version"], None), (["--debug"], None), ([], None), (["describ"], None),
    (["-h", "describe"], None), (["--debug", "-h", "estimate"], None)])
def test_the_command_is_told_from_its_first_argument_after_debug(argv, command):
    assert command_in(argv) == command


@pytest.mark.parametrize("argv", [
    ["describe", "dgx-h100-superpod", "--set", "cluster.num_units=2", "--fail", "spine0", "--json"],
    ["estimate", "--size", "1GiB", "-a", "ring", "--ecmp", "hash", "--no-pxn", "-g", "64"],
    ["plan", "h100-100k", "--json"],
    ["--debug", "list", "--json"],
])
def test_a_command_parses_the_same_with_only_its_own_parser(argv):
    whole = vars(build_parser().parse_args(argv))
    alone = vars(build_parser(command_in(argv)).parse_args(argv))
    assert alone == whole


def test_describe_imports_no_other_command_s_library():
    code = ("from topo.cli.main import main\nwith contextlib.redirect_stdout(io.StringIO()):\n"
            "    assert main(['describe', 'dgx-h100-superpod', '--json']) == 0")
    mods = _imported_after(code)
    assert {"topo.cli.describe", "topo.fabric.inventory", "topo.spec.model"} <= mods
    # describe reads the network profiles' files (topo.engine.profile_data), not the engine's options and router
    others = sorted(m for m in mods if m.startswith(("topo.plan", "topo.training", "topo.calibrate", "topo.report",
                                                     "topo.sweep", "topo.engine.estimate", "topo.engine.cost",
                                                     "topo.engine.options", "topo.engine.route",
                                                     "topo.engine.profiles"))
                    or m.startswith("topo.cli.") and m[9:] in set(COMMANDS.values()) - {"describe"})
    assert not others, f"topo describe imported {others}"


def test_import_topo_imports_no_engine_and_its_names_resolve():
    assert _imported_after("import topo") == {"topo", "topo.errors"}
    import importlib

    import topo

    for name in topo.__all__:
        module = importlib.import_module(topo._EXPORTS[name], "topo") if name in topo._EXPORTS else topo
        assert getattr(topo, name) is getattr(module, name), name
    assert set(topo.__all__) <= set(dir(topo))
    with pytest.raises(AttributeError, match="has no attribute 'nope'"):
        topo.nope  # noqa: B018


def test_plan_imports_the_training_model_only_for_model():
    # topo.training.predict_mfu is a lazy export: the step model is about 8% of the instructions of topo plan's
    # imports (callgrind, python -c "import topo.cli.main, topo.cli.plan": 1.620e9 -> 1.486e9)
    code = ("from topo.cli.main import main\nwith contextlib.redirect_stdout(io.StringIO()):\n"
            "    assert main(['plan', 'dgx-h100-superpod', '--json']) == 0")
    mods = _imported_after(code)
    assert "topo.plan.planner" in mods and not sorted(m for m in mods if m.startswith("topo.training."))
    import topo.training
    from topo.training.mfu import predict_mfu

    assert topo.training.predict_mfu is predict_mfu
    with pytest.raises(AttributeError, match="has no attribute 'nope'"):
        topo.training.nope  # noqa: B018


def test_report_builds_no_schema_of_a_training_model_or_layout():
    # pydantic builds a deferred model's validator when it is first validated: `topo report` imports the training
    # package (for --train) but validates neither without it (callgrind, python -c "import topo.cli.plan" while it
    # imported the training package: 1.660e9 -> 1.620e9 instructions)
    code = ("import topo.cli.report\n"
            "from topo.plan.bom import _LogicalTier\nfrom topo.training.model import ModelSpec, MoeSpec\n"
            "from topo.training.parallel import ParallelLayout\n"
            "built = [c.__name__ for c in (ModelSpec, MoeSpec, ParallelLayout, _LogicalTier) "
            "if c.__pydantic_complete__]\nassert not built, built")
    assert "topo.training.model" in _imported_after(code)


def test_a_deferred_model_validates_as_before():
    from topo.training.model import load_model
    from topo.training.parallel import make_layout

    assert load_model("llama3-70b").layers == 80
    with pytest.raises(Exception, match="tp"):
        make_layout(tp=0)


def _third_party_after(code: str, package: str) -> bool:
    """Whether running ``code`` in a fresh interpreter imports ``package``."""
    script = f"import contextlib, io, sys\n{code}\nprint({package!r} in sys.modules)"
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, check=True)
    return proc.stdout.split()[-1] == "True"


def test_a_dense_step_imports_no_scipy_special_and_a_moe_step_does():
    # scipy.special (with numpy.f2py: about 0.15 s of CPU) serves only a dropless router's spread
    # (topo.training.router_load): `topo train region-1m --model llama3-405b` 1.05 -> 0.93 s CPU (section 169)
    run = ("from topo.cli.main import main\nwith contextlib.redirect_stdout(io.StringIO()):\n"
           "    assert main(['train', 'dgx-h100-superpod', '--model', {!r}, '--tp', {!r}, '--ep', {!r}, "
           "'--global-batch', '512', '--json']) == 0")
    # scipy.sparse is imported by the step's traffic mix since it shares links max-min fairly (the solver's CSR
    # incidence, topo.engine.maxmin; section 477): ~0.18 s of import a process, left (findings 477's Left)
    assert not _third_party_after(run.format("llama3-8b", "8", "1"), "scipy.special")
    assert _third_party_after(run.format("mixtral-8x7b", "2", "8"), "scipy.special")
