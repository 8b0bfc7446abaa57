"""PAT (Parallel Aggregated Trees), NCCL's logarithmic all-gather and reduce-scatter (topo/engine/algorithms/pat.py).

Where NCCL runs it and what its model charges are NVIDIA/nccl src/graph/tuning.cc at NCCL 2.29.2 (commit ebd1e929):
``ncclPatEnable`` (one GPU per node: nNodes == nRanks), PAT only for all-gather and reduce-scatter with Simple,
``busBw *= .75``, latency ``baseLat[PAT] (8.0) + log2i(nNodes) * interLat / 3.5 + nRanks * 2.8`` with interLat
the Tree's network step (14 us for Simple on InfiniBand) because ppn = 1; and the bandwidth is left a bus
bandwidth (not made an algorithm bandwidth, as the ring's is). The algorithm: S. Jeaugey, arXiv:2506.20252 (2025),
a Bruck all-gather with its dimensions reversed: ceil(log2 p) steps, (p-1)/p of the buffer per rank in all. NCCL's
maintainer (NVIDIA/nccl #1473): PAT "only support[s] one GPU per node at the moment".

No published PAT measurement was found in the stored sources (NVIDIA's NCCL 2.23 blog post, which shows PAT
against ring at scale, is not among them; the measurement set has no run that NCCL would have run with PAT: its
1-GPU-per-node all-gather and reduce-scatter runs are 4-16 GiB, where NCCL's model takes the ring).

Hand derivation of the single-switch fabric (as tests/test_closed_forms.py): p servers of one GPU and one 400 Gb/s
NIC (B = 50e9 B/s) with 1 us NIC latency under one switch of 0.5 us: a GPU-NIC-switch-NIC-GPU path costs
0.5 + 0.75 + 0.75 + 0.5 = 2.5 us = alpha.
"""

import math
from types import SimpleNamespace

import pytest

from conftest import run_cli
from topo import TopoError, build_fabric, spec_from_dict
from topo.calibrate.setup import _algorithm
from topo.engine.algorithms.pat import pat_steps
from topo.engine.estimate import estimate, evaluate
from topo.engine.tuner import nccl_choice, nccl_time_s

ALPHA = 2.5e-6
B = 50e9
NDR_EFF = 0.94  # network/infiniband_ndr.toml network_efficiency
WINDOW = 19136512  # model/topo.toml pipeline_window_bytes (18.25 MiB)
US = 1e-6
PROFILE = "hopper+infiniband_ndr"


def single_switch(p, gpus=1):
    return build_fabric(spec_from_dict({
        "name": "uniform", "gpu": "H100",
        "scale_up": {"gpus_per_domain": gpus},
        "server": {"gpus": gpus, "nics": gpus, "nic_rate": "400 Gb/s", "nic_latency": "1 us",
                   "pcie_bandwidth": "100 GB/s"},
        "cluster": {"num_servers": p},
        "fabric": {"kind": "fat_tree", "tiers": [{"name": "switch", "radix": 128, "port_rate": "400 Gb/s",
                                                  "latency": "0.5 us"}]},
    }))


@pytest.mark.parametrize("p", [2, 3, 5, 6, 7, 8, 12, 16, 100, 1000])
def test_steps_are_log2_and_move_p_minus_1_blocks(p):
    steps = pat_steps(p)
    assert len(steps) == math.ceil(math.log2(p))
    assert sum(b for _, b in steps) == p - 1  # every rank receives every other rank's block exactly once
    assert steps[0][1] == 1  # the farthest step carries one block: PAT keeps long-distance traffic small
    assert [d for d, _ in steps] == sorted((d for d, _ in steps), reverse=True)


def test_steps_of_eight_ranks_are_the_reversed_bruck():
    # p = 8: distance 4 with 1 block, 2 with 2, 1 with 4 (Jeaugey 2025, dimension-reversed Bruck)
    assert pat_steps(8) == [(4, 1), (2, 2), (1, 4)]


@pytest.mark.parametrize("coll", ["all_gather", "reduce_scatter"])
@pytest.mark.parametrize("p", [4, 6, 8, 16])
@pytest.mark.parametrize("S", [2**20, 2**30])
def test_ideal_closed_form(coll, p, S):
    # textbook machine: ceil(log2 p) steps of alpha, and each rank's NIC carries (p-1)/p of S in all
    r = estimate(single_switch(p), coll, S, algorithm="pat", profile="ideal")
    assert r.results[0].time_s == pytest.approx(math.ceil(math.log2(p)) * ALPHA + (p - 1) / p * S / B, rel=1e-12)


@pytest.mark.parametrize("coll", ["all_gather", "reduce_scatter"])
@pytest.mark.parametrize("p, S", [(16, 2**20), (16, 2**30), (64, 4096), (12, 2**26)])
def test_nccl_profile_closed_form(coll, p, S):
    # NCCL's latency: 8.0 + floor(log2 p) x 14 / 3.5 + p x 2.8 us (16 ranks: 8 + 16 + 44.8 = 68.8 us), plus the
    # routed path of each of the ceil(log2 p) steps (alpha); bandwidth: NDR at 0.94 x 50e9, x 0.75 (PAT), each NIC
    # carrying (p-1)/p of S, the first min(S, W) bytes at half speed (topo's pipeline window); and the H100's
    # kernel launch once (gpu/hopper.toml launch_us 2.433 us: H200's figure, te42kyfo/gpu-benches @1c36d509ee71)
    r = estimate(single_switch(p), coll, S, algorithm="pat", profile=PROFILE).results[0]
    lat = ((8.0 + math.floor(math.log2(p)) * 14.0 / 3.5 + p * 2.8 + 2.433) * US
           + math.ceil(math.log2(p)) * ALPHA)
    rate = 0.75 * NDR_EFF * B * p / (p - 1)
    assert r.protocol == "Simple"
    assert r.latency_s == pytest.approx(lat, rel=1e-12)
    assert r.time_s == pytest.approx(lat + (S + min(S, WINDOW)) / rate, rel=1e-12)


def test_refused_with_several_gpus_per_node():
    f = single_switch(4, gpus=8)
    with pytest.raises(TopoError, match="NCCL runs PAT with one GPU per node only .* 8 ranks in each NVLink domain"):
        estimate(f, "all_gather", 2**20, algorithm="pat")
    # auto leaves it out and says why; one rank per server runs it
    r = estimate(f, "all_gather", 2**10)
    assert "one GPU per node" in r.unavailable["pat"] and r.results[0].algorithm == "ring"
    r = estimate(f, "all_gather", 2**10, gpus=4, placement="one_per_server", algorithm="pat")
    assert r.results[0].algorithm == "pat"


def test_refused_for_other_collectives_protocols_and_old_nccl():
    f = single_switch(8)
    with pytest.raises(TopoError, match=r"unknown algorithm 'pat' for all_reduce \(pat runs all_gather, "
                                        r"reduce_scatter\)"):
        estimate(f, "all_reduce", 2**20, algorithm="pat")
    with pytest.raises(TopoError, match="does not run with protocol LL \\(it has: Simple\\)"):
        estimate(f, "all_gather", 2**20, algorithm="pat", protocol="LL")
    # NCCL 2.7's constants have no PAT (it came with 2.23)
    with pytest.raises(TopoError, match="has no pat protocols"):
        estimate(f, "all_gather", 2**20, algorithm="pat", profile="ampere+infiniband_ndr@2.7")


def test_cli_refuses_in_one_line():
    proc = run_cli("estimate", "dgx-h100-superpod", "-c", "all_gather", "-g", "16", "-a", "pat")
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.splitlines() == [
        "error: --algorithm: pat cannot run here: NCCL runs PAT with one GPU per node only (NCCL_PAT_ENABLE's "
        "default: nNodes == nRanks, src/graph/tuning.cc), and this communicator has 8 ranks in each NVLink domain; "
        "use ring, or one rank per NVLink domain"]
    proc = run_cli("estimate", "dgx-h100-superpod", "-c", "all_gather", "-g", "16", "--placement", "one_per_server",
                   "-a", "pat", "--size", "1M", check=True)
    rows = [x for x in proc.stdout.splitlines() if x.strip() and not x.startswith("#")]
    assert len(rows) == 1 and rows[0].split("  # ")[1].split()[:2] == ["pat", "Simple"]


@pytest.fixture(scope="module")
def nodes64():
    return evaluate(single_switch(64), "all_gather", profile=PROFILE, choose="nccl")


def test_nccl_model_time_of_pat(nodes64):
    # NCCL's model (no routed latency, no window): 8 + 6 x 4 + 64 x 2.8 = 211.2 us; bandwidth 0.75 x busBw, not
    # turned into an algbw: S / (0.75 x 0.94 x 50e9)
    ev = nodes64
    S = 2**24
    t = nccl_time_s("pat", ev.costed, ev.profile, "Simple", S, "all_gather", 64, 64)
    assert t == pytest.approx(211.2 * US + S / (0.75 * NDR_EFF * B), rel=1e-9)


def test_nccl_choice_at_64_nodes_follows_nccls_rule(nodes64):
    # NCCL's model at 64 x 1 GPU, all-gather (tuning.cc; one GPU per node, so the ring's network steps are priced
    # with the Tree's latency; all 63 ring steps cross the network):
    #   ring/LL     6.6 + 63 x 5.0 = 321.6 us, algbw 0.5 B' x 64/63   (B' = 0.94 x 50e9)
    #   ring/LL128 14.0 + 63 x 8.5 = 549.5 us, algbw 0.92 B' x 64/63
    #   PAT         211.2 us,                   0.75 B' (no 64/63)
    # PAT beats ring/LL at every size (less latency, more bandwidth) and ring/LL128 up to
    # S* = (549.5 - 211.2) us / (1/(0.75 B') - 63/(64 x 0.92 B')) = 60.4 MB; ring beyond.
    ev = nodes64
    Bp = NDR_EFF * B
    s_star = (549.5 - 211.2) * US / (1 / (0.75 * Bp) - 63 / (64 * 0.92 * Bp))
    assert s_star == pytest.approx(60.4e6, rel=1e-2)

    def choice(S):
        return nccl_choice(ev.costed, ev.protocols, ev.profile, int(S), "all_gather", 64, 64)

    assert (choice(1024).algorithm, choice(1024).protocol) == ("pat", "Simple")
    assert choice(0.95 * s_star).algorithm == "pat"
    assert (choice(1.05 * s_star).algorithm, choice(1.05 * s_star).protocol) == ("ring", "LL128")
    assert choice(2**30).algorithm == "ring"


def test_nccl_choice_at_two_nodes_is_the_ring():
    # 2 x 1 GPU: ring/LL 6.6 + 5.0 = 11.6 us against PAT's 8 + 1 x 4 + 2 x 2.8 = 17.6 us, and PAT's 0.75 B' is
    # below both ring/LL's 0.5 B' x 2 and ring/Simple's B' x 2: NCCL never picks PAT on two nodes
    ev = evaluate(single_switch(2), "all_gather", profile=PROFILE, choose="nccl")
    for S in (8, 2**10, 2**16, 2**20, 2**24, 2**30):
        assert nccl_choice(ev.costed, ev.protocols, ev.profile, S, "all_gather", 2, 2).algorithm == "ring"
    assert nccl_time_s("pat", ev.costed, ev.profile, "Simple", 8, "all_gather", 2, 2) == pytest.approx(
        17.6 * US + 8 / (0.75 * NDR_EFF * B), rel=1e-9)


def test_estimate_with_choose_nccl_runs_pat_where_nccl_would(nodes64):
    f = single_switch(64)
    r = estimate(f, "reduce_scatter", [1024, 2**30], profile=PROFILE, choose="nccl")
    assert [x.algorithm for x in r.results] == ["pat", "ring"]


@pytest.mark.parametrize("algo, collective, expected", [
    ("PAT", "all_gather", "pat"),  # a log that forced PAT is modelled with PAT
    ("Ring,PAT", "reduce_scatter", "ring,pat"),
    ("^PAT", "all_reduce", "auto"),  # NCCL_ALGO names PAT, which all-reduce never runs: nothing left out
    ("Ring,PAT", "all_reduce", "ring"),
])
def test_nccl_algo_pat_in_logs(algo, collective, expected):
    got, _ = _algorithm(SimpleNamespace(env={"NCCL_ALGO": algo}, collective=collective))
    assert got == expected


def test_a_scaling_op_leaves_pat_out_of_reduce_scatter(nodes64):
    # NCCL has no PAT kernel for a scaled sum (ncclAvg: SumPostDiv/PreMulSum; ncclPreMulSum) and leaves PAT out of
    # such a reduce-scatter (src/enqueue.cc updateCollCostTable; Meta's NCCLX says the same of upstream PAT in
    # shouldSkipPatForReduceOp). At 64 x 1 GPU, 1 KiB, NCCL's choice with op sum is PAT (the test above).
    f = single_switch(64)
    summed = estimate(f, "reduce_scatter", [1024], profile=PROFILE, choose="nccl")
    avg = estimate(f, "reduce_scatter", [1024], profile=PROFILE, choose="nccl", op="avg")
    assert summed.results[0].algorithm == "pat" and avg.results[0].algorithm != "pat"
    assert avg.results[0].redop == "avg" and summed.results[0].redop == "sum"
    # all-gather does not reduce: the op changes nothing there
    ag = estimate(f, "all_gather", [1024], profile=PROFILE, choose="nccl", op="avg")
    assert ag.results[0].algorithm == "pat"
    with pytest.raises(TopoError, match="no PAT kernel for a reduce-scatter with op mulsum"):
        estimate(f, "reduce_scatter", [1024], profile=PROFILE, algorithm="pat", op="mulsum")


def test_cli_op_avg_refuses_pat_in_one_line():
    proc = run_cli("estimate", "dgx-h100-superpod", "-c", "reduce_scatter", "-g", "16", "--placement",
                   "one_per_server", "-a", "pat", "-o", "avg", "--size", "1M")
    assert proc.returncode == 2 and proc.stdout == ""
    assert len(proc.stderr.splitlines()) == 1
    assert proc.stderr.startswith("error: --algorithm: pat cannot run here: NCCL has no PAT kernel")
    proc = run_cli("estimate", "dgx-h100-superpod", "-c", "reduce_scatter", "-g", "16", "--placement",
                   "one_per_server", "-o", "avg", "--size", "1M", check=True)
    rows = [x for x in proc.stdout.splitlines() if x.strip() and not x.startswith("#")]
    assert rows[0].split()[3] == "avg" and rows[0].split("  # ")[1].split()[0] != "pat"
