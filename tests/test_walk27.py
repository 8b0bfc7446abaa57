"""walk27's fixes (a reliability lead on failures and goodput on Meta's 24,576-H100 Llama 3 cluster)."""

import json

import pytest

from conftest import run_cli
from topo.sweep import sweep

_LAYOUT = "tp=8,dp=128,global_batch=1024"


def test_a_sweeps_plan_after_train_gives_topo_plan_models_figures():
    """A study computing train then plan prices each point as `topo plan SPEC --model M --layout L` does: the
    step's MFU, its precision and the model's parameters (the checkpoint, and the storage sized to write it).
    walk27: the sweep's plan took the MFU alone, so a bf16 step's MFU multiplied the catalog's default fp8 peak
    (effective FLOP twice topo plan's: 1.48e26 against 7.39e25 for Llama 3 405B on meta-llama3-24k) on storage
    sized for the Chinchilla-sized model ($1.639B of capex against $1.594B)."""
    df = sweep({"spec": "dgx-h100-superpod", "compute": ["train", "plan"],
                "axes": {"model": "llama3-8b", "layout": _LAYOUT}}, scheduler="serial")
    assert df["error"].isna().all()
    cli = json.loads(run_cli("plan", "dgx-h100-superpod", "--model", "llama3-8b", "--layout", _LAYOUT,
                             "--no-collectives", "--json", check=True).stdout)
    assert df["effective_flop"].iat[0] == pytest.approx(cli["reliability"]["effective_flop"], rel=1e-12)
    for k in ("goodput", "capex_usd", "it_power_W"):
        assert df[k].iat[0] == pytest.approx(cli[k], rel=1e-12), k


_JOB = ("train", "meta-llama3-24k", "--model", "llama3-8b", "--tp", "8", "--dp", "8", "--global-batch", "64")


def test_a_job_on_a_rack_cut_off_by_its_leaf_is_told_the_racks_to_skip():
    """walk27: on meta-llama3-24k a rack is 2 servers under one ToR (rtsw); `--fail rtsw0` under a job on GPUs 0-63
    said "GPU 0 is cut off: every NIC of server 0 failed" (the NICs work; their switch failed) and offered no way
    round the rack, where a failed GPU's line offers --skip-domains and --first-gpu. The line now names the job's
    domains the leaf cuts off (servers 0 and 1: NVLink domains 0 and 1), and the job placed past them runs as the
    same job on a healthy rack (GPUs 16-79, the racks alike)."""
    p = run_cli(*_JOB, "--fail", "rtsw0")
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "Traceback" not in p.stderr
    assert "GPU 0 is cut off: no NIC of server 0 reaches a switch (failures: rtsw0)" in p.stderr
    assert "--skip-domains [0,1]" in p.stderr and "--first-gpu 16 or past it" in p.stderr
    skipped = json.loads(run_cli(*_JOB, "--fail", "rtsw0", "--skip-domains", "0,1", "--json", check=True).stdout)
    moved = json.loads(run_cli(*_JOB, "--first-gpu", "16", "--json", check=True).stdout)
    assert skipped["step_time_s"] == moved["step_time_s"]
    # a leaf outside the job cuts nothing of it
    assert run_cli(*_JOB, "--fail", "rtsw5", check=True).returncode == 0


def test_a_report_with_its_plan_of_a_cut_fabric_writes_its_page(tmp_path):
    """walk27: `topo report meta-llama3-24k --fail rtsw0 --plan` stopped at "GPU 0 is cut off" (the plan's all-reduce
    and all-to-all run over every GPU) where the report without --plan writes its page naming the cut (tidy67) and
    `topo plan --fail rtsw0` offers --no-collectives: the page now carries the failed fabric's plan without them."""
    out = tmp_path / "cut.html"
    p = run_cli("report", "dgx-h100-superpod", "--fail", "random:spine:1.0", "--plan", "-o", str(out))
    assert p.returncode == 0, p.stderr
    assert "its plan without the all-reduce and all-to-all over every GPU" in p.stderr
    assert "goodput" in out.read_text().lower()


def test_the_one_part_failed_row_fails_a_part_that_is_still_working():
    """walk27: `topo plan meta-llama3-24k --fail ctsw0` said "ctsw0 1.00x" beside "ctsw0 1.14x" without --fail: the
    row failed the part --fail had already taken out. It now fails the next of the kind in pod 0, ctsw1: pod 0's
    uplinks to the atsw tier go from 7 of 8 cluster switches to 6, 7/6 of the time on the bound tier (ctsw-atsw,
    an all-reduce between two pods; 384 down / 55 up per ctsw, meta-llama3-24k.toml), the latency part aside."""
    import topo
    from topo.plan.blast import collective_times_with_failures

    fabric = topo.build_fabric(topo.load_spec("meta-llama3-24k")).with_failures("ctsw0", "nic0.0")
    impact = {x.part: x for x in collective_times_with_failures(fabric, parts=("nic", "spine"))}
    assert impact["spine"].name == "ctsw1" and impact["nic"].name == "nic0.1"
    assert impact["spine"].slowdown == pytest.approx(7 / 6, rel=0.01)
