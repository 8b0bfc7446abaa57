"""The README's set-up commands are the ones CI runs, and its Python tour runs."""

import re
import tempfile

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

from conftest import DESIGNS_405B_ARGV, run_cli  # noqa: E402


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
def test_readme_command_runs(argv, tmp_path, request):
    if tuple(argv[1:]) == DESIGNS_405B_ARGV:  # run once a session, in its own fresh folder (conftest.py)
        tmp_path, proc = request.getfixturevalue("designs_405b_run")
        assert proc.returncode == 0, f"{' '.join(argv)}: {proc.stderr}"
        assert (tmp_path / "designs-405b-report.html").stat().st_size > 0
        return
    # the README's nccl-tests examples run on a real log (NVIDIA/nccl issue #1453, tests/data/nccl_logs/SOURCES.md)
    log = ROOT / "tests" / "data" / "nccl_logs" / "nccl1453_h100_allreduce_tagged.txt"
    (tmp_path / "all_reduce.log").write_text(log.read_text())
    if "--profile" in argv and argv[argv.index("--profile") + 1].endswith(".toml"):  # made by the calibrate line
        run_cli("calibrate", "all_reduce.log", "--gpu", "H100", "-o", argv[argv.index("--profile") + 1],
                cwd=tmp_path, check=True)
    if "--plan-file" in argv:  # the README's plan file of catalog overrides: one price
        (tmp_path / argv[argv.index("--plan-file") + 1]).write_text("[switches.QM9700]\nprice_usd = 30000\n")
    proc = run_cli(*argv[1:], cwd=tmp_path)  # outputs land in a fresh folder
    if _needs_image_tools(argv) and importlib.util.find_spec("kaleido") is None:
        # documented: without kaleido the command stops with one line saying what to install
        assert proc.returncode == 2 and "needs the kaleido package" in proc.stderr
        return
    assert proc.returncode == 0, f"{' '.join(argv)}: {proc.stderr}"
    # walk41: a layout the README gives to copy is one that can start (its GB200 DeepSeek-V3 line needed 209.7 GB of
    # the 198.7 GB a GB200 holds); a search never ranks one that does not fit
    assert "DOES NOT FIT" not in proc.stdout, f"{' '.join(argv)}: the README's layout does not fit"
    if "--json" in argv:
        json.loads(proc.stdout)
    if "-o" in argv:
        assert (tmp_path / argv[argv.index("-o") + 1]).stat().st_size > 0


# --- the README's sample outputs are what the tool prints (issue 23: they had drifted) ------------------------------
#
# A sample is a plain ``` block whose lines start with ``$ topo ...``: each command is followed by what it prints
# (its standard output, or its one error line when it fails), exactly. After a change of output, regenerate them:
#     python tests/test_readme.py --regenerate

_SAMPLE = re.compile(r"```\n(\$ topo .*?)```", flags=re.S)


def samples(text: str | None = None) -> list[tuple[str, str]]:
    """(command, shown output) for every ``$ topo`` command of the README's sample blocks."""
    out = []
    for block in _SAMPLE.findall(readme() if text is None else text):
        parts = re.split(r"^\$ (topo .*)\n", block, flags=re.M)[1:]
        out += [(cmd, shown) for cmd, shown in zip(parts[::2], parts[1::2])]
    return out


def printed(cmd: str) -> str:
    """What ``cmd`` prints, as a sample shows it: stdout, or stderr when it fails; run outside the repository, as
    a user of a plain install runs it (walk9: the samples showed `topologies/h100-100k.toml`, a path inside the
    clone, where an installed topo names `bundled spec h100-100k`)."""
    with tempfile.TemporaryDirectory() as scratch:
        proc = run_cli(*shlex.split(cmd)[1:], cwd=scratch)
    return proc.stdout if proc.returncode == 0 else proc.stderr


def test_the_readme_shows_sample_outputs():
    cmds = [c.split()[1] for c, _ in samples()]
    assert {"estimate", "describe", "plan"} <= set(cmds), cmds


@pytest.mark.parametrize("cmd,shown", samples(), ids=lambda x: x[:70] if x.startswith("topo") else "")
def test_readme_sample_output_is_what_the_command_prints(cmd, shown):
    assert printed(cmd) == shown, f"{cmd}: the README's sample differs; python tests/test_readme.py --regenerate"


def regenerate() -> int:
    """Rewrite every sample block of the README with what its commands print now."""
    text = readme()

    def block(m):
        body = m.group(1)
        cmds = re.findall(r"^\$ (topo .*)$", body, flags=re.M)
        return "```\n" + "".join(f"$ {c}\n{printed(c)}" for c in cmds) + "```"

    new = _SAMPLE.sub(block, text)
    if new != text:
        (ROOT / "README.md").write_text(new)
    return 0


if __name__ == "__main__":
    import sys

    if sys.argv[1:] != ["--regenerate"]:
        raise SystemExit("usage: python tests/test_readme.py --regenerate")
    raise SystemExit(regenerate())


# --- links stay inside the repository; the test command prints its summary (issue 23) ----------------------------

def test_the_readme_links_only_to_files_in_the_repository():
    text = readme()
    assert "../shared" not in text
    for target in re.findall(r"\]\(([^)#]+)\)", text):
        if not re.match(r"https?://", target):
            assert (ROOT / target).exists(), target


def test_the_readme_says_which_commands_take_fail():
    import argparse

    from topo.cli.main import build_parser

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    takes = {name for name, p in sub.choices.items() if any("--fail" in a.option_strings for a in p._actions)}
    m = re.search(r"`--fail PART` \(repeatable; on (.*?), not on (.*?),", readme(), flags=re.S)
    assert m, "the README's --fail paragraph names the commands that take it"
    said = set(re.findall(r"`(\w+)`", m.group(1)))
    assert said == takes and not set(re.findall(r"`(\w+)`", m.group(2))) & takes


def test_the_readme_test_command_prints_the_passed_summary(tmp_path):
    """`python3 -m pytest` as the README says it prints "N passed": the project's addopts and the README's command
    together give at most one -q (two hide the summary line)."""
    import subprocess
    import sys

    cmd = setup_commands()[1].split("&&")[-1].split()
    assert cmd[:3] == ["python3", "-m", "pytest"]
    proc = subprocess.run([sys.executable, *cmd[1:], "-p", "no:cacheprovider", "topo/errors.py"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert re.search(r"^\d+ passed in ", proc.stdout, flags=re.M), proc.stdout  # topo/errors.py's doctests (2 since closest)


def test_the_readme_spec_and_region_examples_load(tmp_path):
    """The README's TOML examples of a spec and of a region file are files a user can copy: each builds (a user
    writing a region from the README alone had no example of one; walk12)."""
    import topo
    from topo.fabric.region import build_region

    blocks = re.findall(r"```toml\n(.*?)```", readme(), flags=re.S)
    built = []
    for i, block in enumerate(blocks):
        path = tmp_path / f"example{i}.toml"
        path.write_text(block)
        if "[[sites]]" in block:
            built.append(("region", build_region(path).num_sites))
        elif "[fabric]" in block:
            built.append(("spec", topo.build_fabric(topo.load_spec(path)).num_gpus))
    assert ("spec", 1024) in built and ("region", 3) in built, built
