"""auto's choice as NCCL's tuner makes it (topo/tuner.py): NCCL's cost model picks, the routed model times.

Closed forms are NCCL's (NVIDIA/nccl src/graph/tuning.cc, ncclTopoTuneModel / ncclTopoGetAlgoTime, read at 2.20.3)
with the constants of topo/data/profiles/nccl/2.30.7.toml and gpu/hopper.toml, derived by hand below.
"""

import pytest

from topo import TopoError, build_fabric, spec_from_dict
from topo.calibrate.setup import node_spec
from topo.engine.estimate import estimate, evaluate
from topo.engine.profiles import profile_for
from topo.engine.tuner import nccl_choice, nccl_time_s, tree_correction

GiB = 2**30


def nodes(gpu, nics, rate, tech, servers):
    return build_fabric(spec_from_dict(node_spec(gpu, nics, rate, tech, servers, 8, None)))


@pytest.fixture(scope="module")
def h100_4n():
    f = nodes("H100", 8, "400 Gb/s", "infiniband_ndr", 4)
    return evaluate(f, "all_reduce", gpus=32)


def test_ring_simple_closed_form_beyond_two_nodes(h100_4n):
    # 4 x 8 H100, 8 x 400G NDR per node. Ring busBw = 8 NICs x 50 GB/s x 0.94 (NDR efficiency) = 376 GB/s,
    # algbw = 376 x 32 / 62 = 194.06 GB/s. Latency (NCCL 2.30.7, Ring/Simple; tuning.cc: nsteps = 2 x (32 - 1)
    # = 62, nInterSteps = 2 x (nNodes - 1) = 6 since NCCL 2.23.4): 8.4 base + 56 intra-node steps x max(3.4
    # NVLink, 3 x 1.0 network overhead) + 6 network steps x 14.0 = 282.8 us, x 1.4 (ring plateau, 1 GiB / 32
    # ranks >= 1024 B) = 395.92 us. Time = 395.92 + 2^30 / 194.06e3 = 395.92 + 5532.91 us.
    ev = h100_4n
    t = nccl_time_s("ring", ev.costed, ev.profile, "Simple", GiB, "all_reduce", 32, 4)
    assert t * 1e6 == pytest.approx(395.92 + GiB / (376e9 * 32 / 62) * 1e6, rel=1e-9)


def test_tree_beyond_two_nodes_is_priced_with_the_rings_network_bandwidth(h100_4n):
    # NCCL beyond 2 nodes rates a tree by bwInter, the ring's network bandwidth per channel: busBw 376 GB/s,
    # x 0.92 (tree), under the cap 16 channels x 36.0 GB/s (perChMaxTreeBws Hopper, 4+ nodes) = 576, algbw
    # = 345.92 / 2 = 172.96 GB/s; treeCorrectionFactor is 1 from 512 MiB. Latency (Tree/Simple): 8.4 + 2 x
    # (7 NVLink x 4.0 + log2(4) x 14.0) = 120.4 us.
    ev = h100_4n
    t = nccl_time_s("tree", ev.costed, ev.profile, "Simple", GiB, "all_reduce", 32, 4)
    assert t * 1e6 == pytest.approx(120.4 + GiB / (0.92 * 376e9 / 2) * 1e6, rel=1e-9)
    # below 512 MiB the correction applies: 1 MiB is treeCorrectionFactor[Simple][log2(2^20 / 64) = 14] = 0.5
    S = 2**20
    t = nccl_time_s("tree", ev.costed, ev.profile, "Simple", S, "all_reduce", 32, 4)
    assert t * 1e6 == pytest.approx(120.4 + S / (0.5 * 0.92 * 376e9 / 2) * 1e6, rel=1e-9)


def test_tree_correction_table_lookup():
    p = profile_for("hopper", "infiniband_ndr")
    # NCCL's table (tuning.cc, 2.30.7): Simple at 64 B (index 0) 0.9; at 1 MiB (index 14) 0.5; LL128 at 4 MiB
    # (index 16) 0.8; Simple at 512 MiB (index 23, the 24th entry) 0.9 for NVLSTree only: ncclTopoGetAlgoTime reads
    # 'logSize < 23' for Tree, 'logSize < 24' for NVLSTree; nothing from 1 GiB (past the table)
    assert tree_correction(p, "Simple", 64) == 0.9
    assert tree_correction(p, "Simple", 2**20) == 0.5
    assert tree_correction(p, "LL128", 4 * 2**20) == 0.8
    assert tree_correction(p, "Simple", 512 * 2**20) == 1.0
    assert tree_correction(p, "Simple", 512 * 2**20, "nvls_tree") == 0.9
    assert tree_correction(p, "Simple", 256 * 2**20) == 0.9  # index 22, the Tree's last
    assert tree_correction(p, "Simple", 2**30) == 1.0
    assert tree_correction(p, "LL", 8) == 1.0  # 8 >> 6 = 0: index 0


def test_nccl_1453_choices_24_h100():
    # NVIDIA/nccl issue #1453 (NCCL 2.22.3; 3 nodes x 8 H100, 8 x 200 Gb/s ConnectX-7 RoCE per node), NCCL_DEBUG=INFO:
    #   "1024 Bytes -> Algo 0 proto 0 time 25.331232"        Tree / LL
    #   "8589934592 Bytes -> Algo 1 proto 2 time 86069.968750"  Ring / Simple
    f = nodes("H100", 8, "200 Gb/s", "roce", 3)
    ev = evaluate(f, "all_reduce", gpus=24)
    small = nccl_choice(ev.costed, ev.protocols, ev.profile, 1024, "all_reduce", 24, 3)
    assert (small.algorithm, small.protocol) == ("tree", "LL")
    # NCCL's modelled time for it, 25.33 us: 6.8 + 2 x (7 x 0.6 + log2(3) = 1 x 5.0) = 25.2 us + 1 KiB at LL's
    # capped rate; latency-bound, so it does not depend on the graph bandwidth. NCCL's figure has no RoCE term:
    # the tuner prices with NCCL's constants (Profile.nccl_model), not topo's fitted 7.97 us per step (41.1 us)
    assert small.model_time_s * 1e6 == pytest.approx(25.331232, rel=0.01)
    big = nccl_choice(ev.costed, ev.protocols, ev.profile, 8 * GiB, "all_reduce", 24, 3)
    assert (big.algorithm, big.protocol) == ("ring", "Simple")
    # NCCL's modelled time of that choice, 86,070 us, is 319.8 us of latency ((8.4 + 40 x 3.4 + 6 x 14) x 1.4) and
    # 8 GiB at its graph's busBw of 16 channels x 12 GB/s = 192 GB/s. topo's graph bandwidth is the routed ring's,
    # 8 x 25 GB/s x 0.872 (roce efficiency) = 174.4 GB/s: rescaled to it, NCCL's own figure is 319.8 + 85,750 x
    # 192 / 174.4 = 94,723 us. (topo counts 2 (nodes - 1) network steps where 2.20+ counts 2 nodes: 30 us less.)
    assert ev.profile.network_efficiency == 0.872
    assert big.model_time_s * 1e6 == pytest.approx(319.8 + (86069.97 - 319.8) * 192 / 174.4, rel=0.001)
    # estimate's auto with choose="nccl" runs NCCL's choice; the routed-fastest choice (the default) is the tree,
    # which at 3 nodes loads a node's NICs less than the ring does
    assert estimate(f, "all_reduce", 8 * GiB, gpus=24, choose="nccl").results[0].algorithm == "ring"
    assert estimate(f, "all_reduce", 8 * GiB, gpus=24).results[0].algorithm == "tree"


def test_p4dn_three_nodes_runs_the_ring():
    # NVIDIA/nccl issue #527 (8 A100 + 4 x 100G EFA per node, NCCL 2.9.9): 1 GiB busbw 31.77 GB/s at 3 nodes, the
    # 4-node ring's figure (29.61), not a tree's (docs/calibration-findings.md section 1). NCCL's model rates the
    # tree by the ring's network bandwidth beyond 2 nodes, so it runs the ring; topo's routed tree is faster.
    f = nodes("A100", 4, "100 Gb/s", "efa", 3)
    nccl = estimate(f, "all_reduce", GiB, gpus=24, choose="nccl").results[0]
    fastest = estimate(f, "all_reduce", GiB, gpus=24, choose="fastest").results[0]
    assert nccl.algorithm == "ring" and fastest.algorithm == "tree"
    assert abs(nccl.busbw_GBps / 31.77 - 1) < abs(fastest.busbw_GBps / 31.77 - 1)


def test_two_nodes_keep_the_tree():
    # On 2 nodes NCCL rates the tree by bwIntra (up to twice bwInter): tree / Simple at 1 GiB on 2 x 8 A100 with
    # 4 x 100G EFA, as the 2-node run of issue #527 (57 GB/s, above the ring's 45 GB/s bound) shows
    f = nodes("A100", 4, "100 Gb/s", "efa", 2)
    assert estimate(f, "all_reduce", GiB, gpus=16, choose="nccl").results[0].algorithm == "tree"


def test_fastest_is_the_default_and_the_minimum_over_candidates():
    f = nodes("A100", 4, "100 Gb/s", "efa", 3)
    r = estimate(f, "all_reduce", [2**16, 2**24, GiB], gpus=24)
    for i, x in enumerate(r.results):
        times = [t[i] for t in r.candidates.values() if t[i] is not None]
        assert x.time_s == pytest.approx(min(times), rel=1e-12)


def test_choose_is_validated():
    f = nodes("A100", 4, "100 Gb/s", "efa", 2)
    with pytest.raises(TopoError) as e:
        estimate(f, "all_reduce", GiB, gpus=16, choose="quickest")
    assert e.value.key == "choose" and "quickest" in str(e.value) and "fastest" in str(e.value)


def test_tree_correction_table_is_validated():
    from topo.engine.profile_data import parse_profile_doc

    doc = {"profile": {"kind": "user", "name": "x", "base": "hopper+infiniband_ndr"},
           "tree_correction": {"value": {"LL": [1.0, 1.5]}, "source": "a typo"}}
    with pytest.raises(TopoError) as e:
        parse_profile_doc(doc, "my.toml")
    assert e.value.key == "tree_correction.value.LL[1]" and "1.5" in str(e.value)
    doc["tree_correction"]["value"] = {"LL129": [1.0]}
    with pytest.raises(TopoError) as e:
        parse_profile_doc(doc, "my.toml")
    assert e.value.key == "tree_correction.value.LL129"


def test_cli_choose_flag():
    # the bundled 100k-GPU cluster with 4 NICs per 8-GPU server, 3 servers: the routed model's fastest at 1 GiB is
    # the tree (fewer bytes through a node's NICs), NCCL's tuner runs the ring (it rates a tree beyond 2 nodes by
    # the ring's network bandwidth)
    import json

    from conftest import run_cli

    algos = {}
    for choose in ("fastest", "nccl"):
        proc = run_cli("estimate", "--gpus", "24", "--size", "1G", "--set", "server.nics=4", "--choose", choose,
                       "--json", check=True)
        algos[choose] = json.loads(proc.stdout)["results"][0]["algorithm"]
        assert json.loads(proc.stdout)["choose"] == choose  # walk16: the document did not say which rule chose
    assert algos == {"fastest": "tree", "nccl": "ring"}
    # walk16: the text's header said "algorithm auto" either way, so a ring slower than the tree looked like a bug
    text = run_cli("estimate", "--gpus", "24", "--size", "1G", "--set", "server.nics=4", "--choose", "nccl",
                   check=True).stdout.splitlines()
    assert text[1].startswith("# algorithm auto as NCCL's tuner chooses (--choose nccl), ecmp ideal"), text[1]
    text = run_cli("estimate", "--gpus", "24", "--size", "1G", "--set", "server.nics=4", check=True).stdout
    assert text.splitlines()[1].startswith("# algorithm auto, ecmp ideal")
    bad = run_cli("estimate", "--choose", "quickest")
    assert bad.returncode == 2 and "--choose" in bad.stderr and "quickest" in bad.stderr


def test_ring_plateau_of_the_2_7_constants():
    # nccl/2.7.toml (tuning.cc @01afd20a): Ring/Simple all-reduce latency x1.9 from nBytes >= nRanks / 16 x 65536,
    # i.e. 4096 B per rank. 2 x 8 A100 on HDR: latency 8.4 base + 28 NVLink steps x 3.4 + 2 network steps x 9.6
    # = 122.8 us (no network overhead term in 2.7), so crossing 16 x 4096 B adds 0.9 x 122.8 = 110.52 us (and
    # 64 B more at the ring's rate, negligible)
    f = nodes("A100", 8, "200 Gb/s", "infiniband_hdr", 2)
    ev = evaluate(f, "all_reduce", gpus=16, profile="ampere+infiniband_hdr@2.7")
    S = 16 * 4096
    below = nccl_time_s("ring", ev.costed, ev.profile, "Simple", S - 64, "all_reduce", 16, 2)
    at = nccl_time_s("ring", ev.costed, ev.profile, "Simple", S, "all_reduce", 16, 2)
    assert (at - below) * 1e6 == pytest.approx(110.52, abs=0.01)
