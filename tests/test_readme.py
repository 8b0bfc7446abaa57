"""The README's set-up commands are the ones CI runs, and its Python tour runs."""

import re

from conftest import ROOT


def readme():
    return (ROOT / "README.md").read_text()


def setup_commands():
    blocks = re.findall(r"```sh\n(.*?)```", readme(), flags=re.S)
    return [b.strip() for b in blocks[:2]]


def test_readme_starts_with_the_two_commands_and_ci_runs_them():
    main_job, tests = setup_commands()
    assert "topo describe" in main_job
    assert "pytest" in tests
    ci = (ROOT / ".ci" / "run").read_text()
    assert main_job in ci and tests in ci


def test_readme_python_tour_runs():
    code = re.findall(r"```python\n(.*?)```", readme(), flags=re.S)
    assert code
    for block in code:
        exec(compile(block, "README.md", "exec"), {})


# --- every `topo ...` command of the README runs (issue 8: a tour command failed) --------------------------------

import importlib.util  # noqa: E402
import json  # noqa: E402
import shlex  # noqa: E402

import pytest  # noqa: E402

from conftest import run_cli  # noqa: E402


def readme_commands() -> list[list[str]]:
    """Each ``topo ...`` line of the README's sh blocks after the two set-up commands, as argv (comments cut);
    usage synopses (an argument in [brackets]) are not commands."""
    blocks = re.findall(r"```sh\n(.*?)```", readme(), flags=re.S)[2:]
    out = []
    for block in blocks:
        for line in block.replace("\\\n", " ").splitlines():  # a command continued with a backslash is one line
            argv = shlex.split(line, comments=True)
            if argv[:1] == ["topo"] and not any(a.startswith("[") for a in argv):
                out.append(argv)
    return out


def test_the_readme_has_a_tour_to_run():
    cmds = [" ".join(c[:2]) for c in readme_commands()]
    for cmd in ("topo list", "topo describe", "topo estimate", "topo report", "topo export"):
        assert cmd in cmds


def _needs_image_tools(argv) -> bool:
    return "--format" in argv and argv[argv.index("--format") + 1] in ("png", "svg")


@pytest.mark.parametrize("argv", readme_commands(), ids=lambda a: " ".join(a[1:])[:60])
def test_readme_command_runs(argv, tmp_path):
    # the README's nccl-tests examples run on a real log (NVIDIA/nccl issue #1453, tests/data/nccl_logs/SOURCES.md)
    log = ROOT / "tests" / "data" / "nccl_logs" / "nccl1453_h100_allreduce_tagged.txt"
    (tmp_path / "all_reduce.log").write_text(log.read_text())
    if "--profile" in argv and argv[argv.index("--profile") + 1].endswith(".toml"):  # made by the calibrate line
        run_cli("calibrate", "all_reduce.log", "--gpu", "H100", "-o", argv[argv.index("--profile") + 1],
                cwd=tmp_path, check=True)
    proc = run_cli(*argv[1:], cwd=tmp_path)  # outputs land in a fresh folder
    if _needs_image_tools(argv) and importlib.util.find_spec("kaleido") is None:
        # documented: without kaleido the command stops with one line saying what to install
        assert proc.returncode == 2 and "needs the kaleido package" in proc.stderr
        return
    assert proc.returncode == 0, f"{' '.join(argv)}: {proc.stderr}"
    if "--json" in argv:
        json.loads(proc.stdout)
    if "-o" in argv:
        assert (tmp_path / argv[argv.index("-o") + 1]).stat().st_size > 0


def test_readme_example_output_is_what_the_command_prints():
    """The ``$ topo ...`` example: same command, same sizes and algorithms in the same rows."""
    m = re.search(r"```\n\$ (topo [^\n]*)\n(.*?)```", readme(), flags=re.S)
    assert m
    argv = shlex.split(m.group(1))
    proc = run_cli(*argv[1:], check=True)

    def rows(text):  # size and algorithm (topo's first column after the '#' that ends nccl-tests' columns)
        return [(r.split()[0], r.split("#", 1)[1].split()[0]) for r in text.splitlines()
                if r.strip() and not r.startswith("#")]
    assert rows(proc.stdout) == rows(m.group(2))
