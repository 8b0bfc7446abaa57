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


def test_report_of_two_designs_names_commands_that_run_one_design_each(tmp_path):
    """rev65: with two SPECs and a --set, the line offered 'topo train A B --fail ...' (topo train takes one SPEC:
    'unrecognized arguments') and dropped the --set the user's fabric was built with; the plan's command keeps both
    SPECs (topo plan compares them), the train command names one SPEC at a time, each with the overrides."""
    specs = ["gb200-nvl72-superpod", "gb300-nvl72-superpod"]
    bad = run_cli("report", *specs, "--set", "cluster.num_units=3", *FAIL, "-o", str(tmp_path / "r.html"))
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1, bad.stderr
    assert ("topo plan gb200-nvl72-superpod gb300-nvl72-superpod --set cluster.num_units=3 --fail nvswitch1 "
            "--no-collectives; a job placed around it: topo train SPEC --set cluster.num_units=3 --fail nvswitch1 "
            "--model M --skip-domains N, SPEC one of gb200-nvl72-superpod, gb300-nvl72-superpod)") in bad.stderr, \
        bad.stderr
    ok = run_cli("train", specs[1], "--set", "cluster.num_units=3", *FAIL, "--model", "llama3-8b", "--gpus", "64",
                 "--global-batch", "64", "--skip-domains", "1", check=True)
    assert "step" in ok.stdout
