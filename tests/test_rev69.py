"""rev69: the review of the session's later merges (nhbw69, goodput69, rev68, fp8pg69, walk28, fast68, tidy69 and
the lead's), each fix with a test seen failing before it."""

from conftest import run_cli

_JOB = ("--model", "llama3-8b", "--layout", "tp=8,dp=64,global_batch=512", "--no-collectives")


def test_a_jobs_optics_line_says_whose_modules_each_count_is():
    """goodput69 took the modules on GPU links at the job's share, the NIC-side and any-module counts stayed the
    cluster's: DGX H100 SuperPOD (1,024 GPUs; 512 twin-port NIC-side modules and the leaves' 512 at the catalog's
    4-year MTTF, tests/test_plan_optics.py) with a job of 512 GPUs printed "512 modules on GPU links, both ends;
    NIC-side alone: ... (512 modules)", a job with no leaf-side module. 4 x 8,760 h / 512 = 68.4 h each."""
    out = run_cli("plan", "dgx-h100-superpod", *_JOB, check=True).stdout
    assert ("first job-stopping optics failure: 68.4 h (512 modules on the job's GPU links, both ends); the "
            "cluster's NIC-side alone: 68.4 h (512 modules); of any module") in out, out
    # without a job (or a job of every GPU) the counts are all the cluster's, said as before
    out = run_cli("plan", "dgx-h100-superpod", "--no-collectives", check=True).stdout
    assert "34.2 h (1,024 modules on GPU links, both ends); NIC-side alone: 68.4 h (512 modules)" in out


def test_estimate_names_the_cut_as_describe_and_the_report_do():
    """tidy69 named the GPUs a failure cuts off in describe, train and the report (topo.fabric.cut), but `estimate`
    still said only the router's two GPUs: GB200 NVL72 SuperPOD (4 pods of 8 racks x 72 GPUs = 576, bundled spec)
    with pod 1's uplinks failed read "GPU 568 cannot reach GPU 640"."""
    p = run_cli("estimate", "gb200-nvl72-superpod", "--fail", "pod:1")
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "Traceback" not in p.stderr, p.stderr
    assert p.stderr.startswith("error: --fail: GPUs 576 to 1,151 (pod 1) are cut off: no working path joins them "
                               "to the other 1,728 GPUs: GPU "), p.stderr
    assert "cannot reach GPU" in p.stderr and "failures: pod:1" in p.stderr


def test_plan_names_the_cut_its_collectives_cannot_cross():
    """The same for `plan`'s refusal of its collectives over every GPU (place64): it named the router's two GPUs."""
    p = run_cli("plan", "gb200-nvl72-superpod", "--fail", "pod:1")
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "Traceback" not in p.stderr, p.stderr
    assert p.stderr.startswith("error: --fail: GPUs 576 to 1,151 (pod 1) are cut off: no working path joins them "
                               "to the other 1,728 GPUs: GPU "), p.stderr
    assert "allowed: --no-collectives" in p.stderr


def test_an_oversubscription_written_uplinks_first_is_told_a_number_it_takes():
    """walk28's hint wrote a / b: Meta's "1:7" (the bundled meta-llama3-24k's own description, "1:7 between 8
    pods") was told "write 0.1429", which is refused in turn (oversubscription >= 1); the hint is the larger over the
    smaller, and none where a side is 0."""
    def err(value):
        p = run_cli("describe", "meta-llama3-24k", "--set", f"fabric.tiers[1].oversubscription={value}")
        assert p.returncode == 2 and p.stderr.count("\n") == 1 and "Traceback" not in p.stderr, p.stderr
        return p.stderr
    assert "(a downlink:uplink ratio is one number, at least 1: write 7 for 1:7)" in err("1:7")
    assert "write 7 for 7:1" in err("7:1")
    assert err("0:1").rstrip().endswith("must be a finite number, got '0:1'")
    # the number it says is one a spec takes (h100-100k's 7:1 between pods, its spines)
    p = run_cli("describe", "h100-100k", "--set", "fabric.tiers[1].oversubscription=7")
    assert p.returncode == 0, p.stderr


def test_a_failed_gpu_is_failed_not_cut_off():
    """tidy69's cut (topo.fabric.cut) counted a GPU the failures name as "cut off" (all its links are down), so
    `describe --fail gpu3` said "GPU 3 is cut off" and, with estimate naming the cut, the router's "GPU 3 itself
    failed" came after "GPU 3 is cut off: no working path joins it to the other 1,023 GPUs"."""
    p = run_cli("estimate", "dgx-h100-superpod", "-g", "8", "--size", "1M", "-a", "ring", "--fail", "gpu3")
    assert p.stderr == ("error: --fail: GPU 3 itself failed (failures: gpu3) and is a rank of the communicator: "
                        "place the ranks on working GPUs\n")
    assert "cut apart" not in run_cli("describe", "dgx-h100-superpod", "--fail", "gpu3", check=True).stdout
    # a cut beside a failed GPU: the failed one is not among the cut, nor among "the other" GPUs (24,576 - 3,072 - 1)
    text = run_cli("describe", "meta-llama3-24k", "--fail", "pod:0", "--fail", "gpu5000", check=True).stdout
    assert "cut apart: GPUs 0 to 3,071 (pod 0) are cut off: no working path joins them to the other 21,503 GPUs" \
        in text, text
