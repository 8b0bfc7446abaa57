"""net66: walk25's leftovers (section 269, "Left"), each one rule in one place with a test seen failing without it."""

import pytest
from conftest import run_cli

from topo.engine.profile_data import bundled_files, in_network_reduction

# dgx-h100-superpod with one scalable unit: 2 tiers of QM9700 (InfiniBand NDR) without sharp.
ONE_SU = ("dgx-h100-superpod", "--set", "cluster.num_units=1")
AR = ("-c", "all_reduce", "-g", "64", "-b", "1G", "-e", "1G")


@pytest.mark.parametrize("tech", ["roce", "oci_roce", "gcp_roce", "efa", "efa_v4", "gcp_tcpx", "gcp_tcpxo"])
def test_sharp_is_refused_where_the_switches_cannot_reduce(tech):
    """walk25: `sharp = true` on a RoCE fabric was priced as SHARP (1 GiB at 65,536: busbw 318.6 -> 567.8 GB/s).
    NVIDIA SHARP Rev 3.13.0's device list (https://docs.nvidia.com/networking/display/sharpv3130/general-information)
    names only InfiniBand Quantum, Quantum-2 and Quantum-3 switches; the network files say so in
    ``in_network_reduction`` and the spec loader refuses the key elsewhere: one line naming the file, the key,
    the value and what is allowed."""
    proc = run_cli("estimate", *ONE_SU, "--set", f"fabric.technology={tech}", "--set",
                   "fabric.tiers[spine].sharp=true", *AR)
    assert proc.returncode != 0
    err = proc.stderr.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert err.startswith("error: topologies/dgx-h100-superpod.toml (--set fabric.tiers[spine].sharp=true): "
                          "fabric.tiers[1].sharp: true on the 'spine' tier")
    assert f"topo/data/profiles/network/{tech}.toml: in_network_reduction = 0" in err
    assert err.endswith("allowed: sharp = false, or fabric.technology one of infiniband_hdr, infiniband_ndr, "
                        "infiniband_xdr")


def test_sharp_stays_on_infiniband():
    """The same switches on InfiniBand NDR (Quantum-2 is on NVIDIA's SHARP device list) run SHARP."""
    out = run_cli("estimate", *ONE_SU, "--set", "fabric.tiers[leaf].sharp=true", "--set",
                  "fabric.tiers[spine].sharp=true", "-a", "sharp", *AR, check=True).stdout
    assert "sharp" in out


def test_the_rule_is_in_the_network_files():
    """Every bundled network file says whether its switches reduce; only InfiniBand's do (SHARP's device list)."""
    reduces = {n for n in bundled_files()["network"] if in_network_reduction(n)[0]}
    assert reduces == {"infiniband_hdr", "infiniband_ndr", "infiniband_xdr"}


STUDY = """name = "typo"
spec = "h100-100k"
compute = ["estimate"]
seeds = 3
[axes]
collective = ["all_reduce"]
size = ["1G"]
fail = ["", "FAIL"]
"""


@pytest.mark.parametrize("fail, words", [
    # walk25's own string, random:link, is a level since tidy69 (every network cable); a misspelt level is not
    ("random:lnk:0.01:{seed}", "'random:lnk:0.01:{seed}': unknown level or tier 'lnk'; levels: nvlink, pcie, "
                               "nic-leaf, leaf-spine, spine-core"),
    ("random:spine-core:2:{seed}", "the fraction must be in (0, 1], got '2'"),
    ("random:spine:0.5:{seed},rail:x", "expected a whole number in 'rail:x'"),
])
def test_a_sweeps_bad_failure_is_one_line_before_any_point_runs(tmp_path, fail, words):
    """walk25: `fail = ["random:link:0.01:{seed}"]` became 24 error rows after the points ran. Every failure string
    of the fail axis, each seed put in, is checked as far as it can be without a fabric before anything runs: one
    line naming the study and axes.fail, exit non-zero, nothing written."""
    study = tmp_path / "typo.toml"
    study.write_text(STUDY.replace("FAIL", fail))
    out = tmp_path / "out"
    proc = run_cli("sweep", str(study), "-o", str(out), "--scheduler", "serial", cwd=tmp_path)
    assert proc.returncode != 0
    err = proc.stderr.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert err.startswith("error: ") and "axes.fail" in err and words in err, err
    assert not out.exists()


def test_a_good_failure_axis_passes_the_check():
    """The bundled failure study's values (a tier level of h100-100k, seeds put in) pass."""
    from topo.sweep import load_study
    assert load_study("failures-100k").axes["fail"] == ["", "random:spine-core:0.01:{seed}"]


def test_a_third_tier_over_rail_only_stays_one_clos_per_rail():
    """walk25: a core tier over `rail_only` was accepted though the rail-only note says no switch joins two rails.
    The builder keeps the rail groups at every tier (topo.fabric.builders.rail_only: "spines (and cores) serve one
    rail only"), so the note holds and now says so: every spine-core cable joins a spine and a core of one rail,
    and each core reaches one rail only. rail-only-h100-16k at 128 units = 32,768 GPUs grows a core of 512."""
    import numpy as np

    from topo.fabric.builders import build_fabric
    from topo.spec import load_spec

    f = build_fabric(load_spec("rail-only-h100-16k", ["cluster.num_units=128"]))
    L = f.layout
    assert [t.name for t in L.tiers] == ["leaf", "spine", "core"]
    lo1, lo2 = f.switch_node(1, 0), f.switch_node(2, 0)
    src, dst = f.links["src"], f.links["dst"]
    up = (src >= lo1) & (src < lo1 + L.tiers[1].num_switches) & (dst >= lo2) & (dst < lo2 + L.tiers[2].num_switches)
    spine_rail = L.switch_rail_group(1, src[up] - lo1)
    core_rail = L.switch_rail_group(2, dst[up] - lo2)
    assert up.sum() > 0 and np.array_equal(spine_rail, core_rail)
    assert len(np.unique(core_rail)) == 8  # the 8 rails each have their cores
    out = run_cli("describe", "rail-only-h100-16k", "--set", "cluster.num_units=128", check=True).stdout
    assert ("note: rail-only: no switch joins two rails, at any tier (each rail its own 3-tier Clos: leaf, spine, "
            "core)") in out


def test_compare_verdict_follows_the_numbers():
    """walk25: on nccl-tests #322 (1,024 H100 on RoCE, ring LL128; tests/data/nccl_logs/SOURCES.md) compare said
    "1.21x faster than the model" and then blamed "a slow or missing link" for 1 GiB alone (66%), though 2-16 GiB
    cross the same links at 97-130% of the model. The verdict now says the one slower size is slower, and not a
    slow link."""
    from pathlib import Path

    log = Path(__file__).parent / "data" / "nccl_logs" / "ncclt322_h100_1024_roce_ring.txt"
    out = run_cli("compare", str(log), "--network", "roce", check=True).stdout
    verdict = next(line for line in out.splitlines() if line.startswith("verdict: "))
    assert "this run is 1.21x faster than the model" in verdict
    assert "slow or missing link" not in verdict
    assert ("but at 1 GiB it is slower (66% of the model, where bandwidth dominates): not a slow link, which would "
            "slow the other sizes over the same links too; a dip of this run at that size") in verdict
