"""``topo plan`` / ``topo report`` with a failed NVLink switch that cuts a rack's GPUs apart (place64's Left 1): their
own collectives over every GPU cannot run; the line says what the user can run instead (plan: ``--no-collectives``;
report, which has no page without its all-reduce over every GPU: the plan of the failed fabric, or a job placed
around it), and the way out it names works."""

from conftest import run_cli

SPEC, FAIL = "gb200-nvl72-superpod", ["--fail", "nvswitch1"]


def test_plan_names_no_collectives_and_it_runs():
    bad = run_cli("plan", SPEC, *FAIL)
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1
    assert bad.stderr.startswith("error: --fail: ") and "allowed: --no-collectives (the plan of the failed fabric " \
        "without them: its degraded bisection, power and cost)" in bad.stderr, bad.stderr
    ok = run_cli("plan", SPEC, *FAIL, "--no-collectives", check=True)
    assert "note: with failed parts (nvswitch1): the network figures (bisection, cross-pod collectives) are those " \
        "of the failed fabric" in ok.stdout


def test_report_names_the_commands_that_run(tmp_path):
    bad = run_cli("report", SPEC, *FAIL, "-o", str(tmp_path / "r.html"))
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1
    assert bad.stderr.startswith("error: --fail: GPU ") and (
        "allowed: failed parts that leave every GPU a path (the failed fabric's degraded bisection, power and cost: "
        "topo plan gb200-nvl72-superpod --fail nvswitch1 --no-collectives; a job placed around it: topo train "
        "gb200-nvl72-superpod --fail nvswitch1 --model M --skip-domains N)") in bad.stderr, bad.stderr
    assert not (tmp_path / "r.html").exists()
