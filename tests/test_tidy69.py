"""tidy69: the second wave's leftovers (plan68, walk27, tidy68), each with a test seen failing before its fix."""

import json

import pytest

from conftest import run_cli
from small_regions import region_file, two_sites
from topo import TopoError, build_fabric, load_spec
from topo.fabric.cut import cut_words
from topo.fabric.failures import check_failure
from topo.fabric.region import build_region
from topo.plan.region import plan_region


@pytest.fixture(scope="module")
def one_su(tmp_path_factory):
    """Two sites (east, west) of one DGX H100 SU each (tests/small_regions.py)."""
    return region_file(tmp_path_factory, two_sites("one-su", "two sites of one DGX H100 SU", "dgx-h100-superpod", 1),
                       "one-su")


def test_a_regions_plan_computes_no_sites_collectives(one_su):
    """tidy68 Left: a region's plan shows nothing a site's collectives give (its text and --json are the same with
    --no-collectives, tests/test_tidy68.py), yet it ran each site's top-tier collectives and blast radius; it runs
    none, whatever ``collectives`` it is given."""
    r = plan_region(build_region(one_su), one_site=True, collectives=True)
    for p in r.site_plans:
        assert p.network.all_reduce_s is None and p.network.alltoall_s is None and p.network.profile is None
        assert p.failure_impact == []


# meta-llama3-24k (bundled; Meta's Llama 3 paper, sec. 3.3.1): 8 pods of 3,072 H100, ctsw k of pod p reaches atsw k
# only, so failing ctsw0-atsw0 ... ctsw7-atsw7 takes every uplink of pod 0 (walk27, section 288)
_POD0 = [a for k in range(8) for a in ("--fail", f"ctsw{k}-atsw{k}")]
_JOB = ("train", "meta-llama3-24k", "--model", "llama3-8b", "--tp", "8", "--dp", "512", "--global-batch", "512")


def test_the_gpus_a_failure_cuts_off_are_named_as_ranges():
    """One rule (topo.fabric.cut.cut_words) for the GPUs failed parts cut off: a pod's uplinks, a rack's leaf (2
    servers of 8: GPUs 0-15), two leaves (racks 0 and 5), a failed NVLink switch's domain (GB200 NVL72: 72 GPUs a
    domain, nvswitch1's GPUs 72 to 143); a spine that leaves every pod a path cuts nothing."""
    f = build_fabric(load_spec("meta-llama3-24k"))
    assert cut_words(f.with_failures(*_POD0[1::2])) == [
        f"GPUs 0 to 3,071 (pod 0) are cut off: no working path joins them to the other {24_576 - 3_072:,} GPUs"]
    assert cut_words(f.with_failures("rtsw0")) == [
        f"GPUs 0 to 15 are cut off (in 2 pieces, none reaching another): no working path joins them to the other "
        f"{24_576 - 16:,} GPUs"]
    assert cut_words(f.with_failures("rtsw0", "rtsw5"))[0].startswith(
        "GPUs 0 to 15 and 80 to 95 are cut off (in 4 pieces")
    # every spine of dgx-h100-superpod's 4 SUs of 256 GPUs down: four alike pieces, none the largest
    su = build_fabric(load_spec("dgx-h100-superpod")).with_failures("random:spine:1.0")
    assert cut_words(su) == ["the working links join the GPUs in 4 pieces, none reaching another: GPUs 0 to 255; "
                             "GPUs 256 to 511; GPUs 512 to 767; GPUs 768 to 1,023"]
    assert cut_words(f.with_failures("ctsw0")) == []
    gb = build_fabric(load_spec("gb200-nvl72-superpod")).with_failures("nvswitch1")
    assert cut_words(gb) == ["nvswitch1 failed: its NVLink domain (GPUs 72 to 143), whose GPUs reach each other "
                             "only through it"]


def test_describe_says_a_pod_is_cut_off():
    """walk27: `describe` with pod 0's uplinks failed showed 66 TB/s and "ctsw0: no uplinks left", not that 3,072
    GPUs cannot reach the other 21,504."""
    text = run_cli("describe", "meta-llama3-24k", *_POD0, check=True).stdout
    assert "cut apart: GPUs 0 to 3,071 (pod 0) are cut off: no working path joins them to the other 21,504 GPUs" \
        in text
    doc = json.loads(run_cli("describe", "meta-llama3-24k", *_POD0, "--json", check=True).stdout)
    assert doc["failures"]["cut"][0].startswith("GPUs 0 to 3,071 (pod 0) are cut off")


def test_train_on_a_cut_off_pod_names_it_and_offers_the_first_gpu_past_it():
    """walk27: a job across pod 0 cut off said "GPU 2048 cannot reach GPU 3072" and offered nothing; the line names
    the pod and --first-gpu 3072, and the job placed there runs as on a healthy fabric (the pods alike)."""
    p = run_cli(*_JOB, *_POD0)
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "Traceback" not in p.stderr, p.stderr
    assert p.stderr.startswith("error: --fail: GPUs 0 to 3,071 (pod 0) are cut off"), p.stderr
    assert "the job's GPUs (0 to 4,095) fall on both sides of the cut" in p.stderr
    assert "--first-gpu 3072 or past it (the first GPU past the cut)" in p.stderr
    past = json.loads(run_cli(*_JOB, *_POD0, "--first-gpu", "3072", "--json", check=True).stdout)
    moved = json.loads(run_cli(*_JOB, "--first-gpu", "3072", "--json", check=True).stdout)
    assert past["step_time_s"] == moved["step_time_s"]
    # a job wholly inside the cut-off pod reaches its own GPUs
    assert run_cli(*_JOB[:-4], "--dp", "256", "--global-batch", "256", *_POD0, check=True).returncode == 0


def test_a_pods_uplinks_are_one_part():
    """walk27: `pod:0` was refused and the user listed ctsw0-atsw0 ... ctsw7-atsw7 (ctsw k of pod 0 reaches atsw k
    only, found by trial); pod:N fails the same cables: pod 0's 8 ctsw x 55 uplinks = 440 (the bundled spec's
    up_ports = 55, Meta's 1:7 oversubscription, Llama 3 sec. 3.3.1)."""
    f = build_fabric(load_spec("meta-llama3-24k"))
    pod = f.with_failures("pod:0")
    assert (pod.failed == f.with_failures(*_POD0[1::2]).failed).all() and int(pod.failed.sum()) == 8 * 55
    assert cut_words(f.with_failures("pod:7"))[0].startswith("GPUs 21,504 to 24,575 (pod 7) are cut off")
    for bad, words in (("pod:8", "no such pod 8: pod:N takes pods 0 to 7"),
                       ("pod:x", "expected a whole number in 'pod:x'")):
        p = run_cli("describe", "meta-llama3-24k", "--fail", bad)
        assert p.returncode == 2 and p.stderr.count("\n") == 1 and words in p.stderr, p.stderr
    p = run_cli("describe", "dgx-h100-superpod", "--fail", "pod:0")  # two tiers: no tier joins pods
    assert p.returncode == 2 and "pod:0: this fabric has 2 tiers, so no tier joins pods" in p.stderr, p.stderr


def test_random_link_fails_a_fraction_of_every_network_cable():
    """walk27: `--fail random:link:F` was refused (levels and tiers only); it draws F of every cable from the NICs
    up, together: 1% of meta-llama3-24k's 52,672 (24,576 nic-rtsw, 24,576 rtsw-ctsw, 8 pods x 8 ctsw x 55 = 3,520
    ctsw-atsw) is 526.72, so 526 or 527 (the mean kept, _draw_count), none NVLink or PCIe."""
    f = build_fabric(load_spec("meta-llama3-24k"))
    net = f.links["level"] >= 2  # NIC-leaf and every switch uplink (topo.fabric.levels: 0 NVLink, 1 PCIe)
    g = f.with_failures("random:link:0.01:3")
    assert int(net.sum()) == 52_672 and int(g.failed.sum()) in (526, 527) and not (g.failed & ~net).any()
    check_failure("random:link:0.01", [["rtsw", "ctsw", "atsw"]])  # a sweep's check takes it too
    with pytest.raises(TopoError, match="or link"):
        check_failure("random:links:0.01", [["rtsw", "ctsw", "atsw"]])


_405B = ("--model", "llama3-405b", "--layout", "tp=8,cp=2,pp=16,vpp=4,dp=128,global_batch=2048", "--no-collectives",
         "--json")


def test_it_power_sizes_with_the_jobs_own_workload():
    """plan68 Left (a): `--it-power` sized each count with the catalog's workload (the compute-optimal model), so
    h100-100k at 50 MW stopped at 19 pods (48.27 MW by the sizing) where Llama 3 405B's own plan drew 47.33 MW: its
    parameters and precision size the checkpoint and so the storage. Sized with them, 20 pods fit, and the sizing's
    figures are the plans' of the job at 20 and 21 pods."""
    fit = json.loads(run_cli("plan", "h100-100k", "--it-power", "50MW", *_405B, check=True).stdout)
    pf = fit["power_fit"]
    assert (pf["count"], pf["gpus"]) == (20, 20 * 7 * 256) and pf["it_power_W"] <= 50e6 < pf["next_it_power_W"]
    assert fit["it_power_W"] == pf["it_power_W"]
    more = json.loads(run_cli("plan", "h100-100k", "--set", "cluster.num_pods=21", *_405B, check=True).stdout)
    assert more["it_power_W"] == pytest.approx(pf["next_it_power_W"], rel=1e-12)
