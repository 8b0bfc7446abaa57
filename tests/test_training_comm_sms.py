"""The SMs overlapped NCCL collectives hold, and what they cost the compute beside them (issue 29).

NCCL launches one CTA (one SM) per channel, caps the channels at ``NCCL_MAX_CTAS`` and raises them to at least
``NCCL_MIN_CTAS`` (NVIDIA/nccl ``src/graph/connect.cc``@v2.28.3-1 lines 487-491; the environment overrides a
communicator's config, ``src/init.cc`` ``envConfigOverride``). The MLPerf v5.1 University of Florida Llama 3.1 8B
runs (mlcommons/training_results_v5.1@441d65f4 ``b200_nemo/config_common.sh``) export ``NCCL_MIN_CTAS=16`` and
``NCCL_MAX_CTAS=32``: 16 of B200's 148 SMs while their hidden DP collectives run."""

import pytest

import topo
from topo.engine.estimate import default_profile
from topo.training.comm import CommEngine
from topo.training.comm_sms import nccl_p2p_sms, nccl_sms, reduced_gpu, sm_loss_s
from topo.training.gpus import gpu_compute
from topo.training.kernels import gemm_s, memory_s
from topo.training.model import load_model
from topo.training.operators import stage_compute
from topo.training.parallel import make_layout
from topo.training.step import ep_held_sms, estimate_step


def test_nccl_channels_capped_by_max_then_raised_to_min_ctas():
    # connect.cc: nChannels = min(nChannels, maxCTAs), then copied up to minCTAs
    assert nccl_sms(16) == 16
    assert nccl_sms(16, 16, 32) == 16  # UF's env: NCCL's 16 channels stay 16
    assert nccl_sms(16, None, 8) == 8
    assert nccl_sms(16, 24, 32) == 24
    assert nccl_sms(16, 24) == 24
    assert nccl_sms(4, 8, 2) == 2  # the minimum is applied after the cap, but never above it:
    assert nccl_sms(16, 32, 8) == 8  # init.cc envConfigOverride: "minCTAs larger than maxCTAs, set both to maxCTAs"


def test_the_profile_channel_count_is_ncclss_sixteen_on_8_nic_servers():
    # topo/data/profiles/nccl: 16 coll channels on 8-GPU NVSwitch servers with 8 NICs (NCCL_DEBUG=INFO logs)
    pod = topo.build_fabric(topo.load_spec("dgx-h100-superpod"))
    assert default_profile(pod).channels == 16


def test_an_nccl_all_to_all_holds_the_p2p_channels_a_power_of_two():
    # NVIDIA/nccl src/graph/paths.cc ncclTopoComputeP2pChannels (v2.28.3-1 f1308997, master 5067397c):
    # p2pnChannels = pow2Up(max(min(nChannels, NCCL_MAX_P2P_NCHANNELS = MAXCHANNELS = 64), 1)), nChannels the
    # collective channels after NCCL_MIN/MAX_CTAS; an all-to-all's grid is every p2p channel it touches
    assert nccl_p2p_sms(16) == 16  # the profile's 16 channels: 16 SMs, not DeepEP's 20
    assert nccl_p2p_sms(12) == 16 and nccl_p2p_sms(17) == 32 and nccl_p2p_sms(3) == 4
    assert nccl_p2p_sms(16, 24) == 32  # NCCL_MIN_CTAS 24 -> 24 collective channels -> 32 p2p
    assert nccl_p2p_sms(16, None, 8) == 8 and nccl_p2p_sms(16, None, 12) == 16
    assert nccl_p2p_sms(64) == 64 and nccl_p2p_sms(80) == 64  # MAXCHANNELS


def test_the_sms_the_expert_all_to_all_holds_are_decided_by_its_dispatcher():
    """Megatron-Core's ``alltoall`` dispatcher calls PyTorch's all_to_all_single (NCCL send/recv pairs): NCCL's p2p
    channels; the flex dispatcher (DeepEP / HybridEP) launches on the recipe's ``moe_deepep_num_sms`` /
    ``moe_hybridep_num_sms``, the layout's ``ep_comm_sms`` (DeepSeek-V3 sec. 3.2.2: 20)."""
    prof = default_profile(topo.build_fabric(topo.load_spec("dgx-h100-superpod")))
    a2a = make_layout(ep=8, dp=8, global_batch=64, ep_comm_sms=24)
    assert ep_held_sms(a2a, prof) == 16
    assert ep_held_sms(a2a.model_copy(update={"nccl_min_ctas": 32}), prof) == 32
    flex = a2a.model_copy(update={"ep_dispatcher": "deepep"})
    assert ep_held_sms(flex, prof) == 24 and ep_held_sms(flex.model_copy(update={"nccl_min_ctas": 32}), prof) == 24
    # DualPipe runs DeepSeek's own all-to-all kernels (DeepSeek-V3 sec. 3.2.2: 20 SMs), not NCCL's
    dualpipe = make_layout(ep=8, dp=4, pp=2, global_batch=64, pipeline_schedule="dualpipe")
    assert ep_held_sms(dualpipe, prof) == 20


def test_a_many_wave_gemm_loses_the_held_share_a_one_wave_gemm_nothing():
    b200 = gpu_compute("B200")  # 148 SMs (gpus.toml)
    less = reduced_gpu(b200, 16)
    assert less.kernels.sms == 132 and b200.kernels.sms == 148
    # per-SM rate unchanged: the peak scales with the SMs left
    assert less.kernels.peak_flops["bf16"] == pytest.approx(b200.kernels.peak_flops["bf16"] * 132 / 148)
    # 16384^3: thousands of tiles, so the wave count is ~tiles/SMs and the time ~SMs / (SMs - held)
    big = gemm_s(less.kernels, 16384, 16384, 16384) / gemm_s(b200.kernels, 16384, 16384, 16384)
    assert big == pytest.approx(148 / 132, rel=0.02)
    # a GEMM of fewer tiles than 132 runs one wave either way: no loss
    small = gemm_s(less.kernels, 1024, 1024, 8192) / gemm_s(b200.kernels, 1024, 1024, 8192)
    assert small == pytest.approx(1.0, rel=1e-12)
    # HBM-bound kernels keep their rate
    assert memory_s(less.kernels, 1e9) == memory_s(b200.kernels, 1e9)
    assert reduced_gpu(b200, 0) is b200


def test_a_two_sm_tile_chosen_on_the_whole_b200_runs_its_waves_over_the_pairs_left():
    """Closed form (rev43, the merge of tile35's 2-SM tiles with sm35's launch on the whole GPU): B200's 148 SMs,
    16 held by NCCL. M = 576, N = 5,760 is 3 x 23 = 69 tiles of 2-SM 256 x 256 (one wave of B200's 74 pairs) or
    5 x 45 = 225 of 128 x 128 (two waves of 148 SMs): a tie at 148, the first listed kept. On the 132 SMs left the
    kernel keeps that tile (chosen for 148), and its 69 pair tiles take two waves of the 66 pairs: t = 2 x 2 x 256
    x 256 x K / (2 x peak / 148 x e); a tile re-chosen for 132 SMs (128 x 128, still two waves) would take half."""
    from dataclasses import replace

    b200 = gpu_compute("B200")
    km = replace(b200.kernels, tile_overhead_k=0.0, tile_shapes={"bf16": ((256, 256, 2), (128, 128, 1))})
    less = reduced_gpu(replace(b200, kernels=km), 16).kernels
    assert less.sms == 132 and less.launch_sms == 148
    K, e = 65536, 0.8  # compute-bound: the operands cross HBM in a third of a wave
    pair = 2 * 256 * 256 * K / (2 * km.peak_flops["bf16"] / 148 * e)
    assert gemm_s(km, 576, 5760, K, efficiency=e) == pytest.approx(pair, rel=1e-9)
    assert gemm_s(less, 576, 5760, K, efficiency=e) == pytest.approx(2 * pair, rel=1e-9)
    assert gemm_s(replace(less, launch_sms=None), 576, 5760, K, efficiency=e) == pytest.approx(pair, rel=1e-9)


def test_loss_is_hidden_times_held_share_when_compute_is_linear_in_sms():
    # t' = t x SMs / (SMs - held)  =>  hidden x (1 - t/t') = hidden x held / SMs (DeepSeek-V3 sec. 3.2.2's 20/132)
    t = 0.1
    assert sm_loss_s(0.05, t, t * 132 / 112) == pytest.approx(0.05 * 20 / 132, rel=1e-12)
    assert sm_loss_s(0.0, t, 2 * t) == 0.0
    assert sm_loss_s(0.05, t, t) == 0.0


@pytest.fixture(scope="module")
def b200_pod():
    # DGX-B200 as benchmarks/training_accuracy.py builds it (SPECS["DGX-B200"])
    return topo.build_fabric(topo.load_spec("dgx-h100-superpod",
                                            ["gpu=B200", "scale_up.bandwidth_per_gpu=900 GB/s"]))


def _uf_8b(**kw):
    # UF's Llama 3.1 8B at 32 GPUs: TP1 CP2 DP16, MBS 1, GBS 16, FP8, distributed optimizer, overlapped DP
    return make_layout(tp=1, cp=2, dp=16, micro_batch=1, global_batch=16, seq_len=8192, precision="fp8",
                       dp_sharding="zero1", grad_reduce_bytes=2.0, **kw)


@pytest.fixture
def sms_only(monkeypatch):
    """The SMs' part of the loss alone: no HBM bytes moved (that part: tests/test_training_comm_interference.py)."""
    from topo.training import comm_sms
    monkeypatch.setattr(comm_sms, "hbm_bytes_per_byte", lambda: 0.0)


def test_hidden_dp_collectives_cost_the_compute_the_sms_they_hold(b200_pod, sms_only):
    m = load_model("llama3-8b")
    engine = CommEngine(b200_pod)
    gpu = gpu_compute("B200")
    runs = {ctas: estimate_step(b200_pod, m, _uf_8b(nccl_min_ctas=ctas, nccl_max_ctas=ctas), engine=engine,
                                contention=False)
            for ctas in (1, 16, 32)}
    sc = stage_compute(m, _uf_8b(), gpu, 0.0)
    share = {c: 1 - sc.microbatch_s / stage_compute(m, _uf_8b(), reduced_gpu(gpu, c), 0.0).microbatch_s
             for c in runs}
    for c in (16, 32):
        assert 0.5 * c / 148 < share[c] <= c / 148 + 1e-12  # memory-bound kernels lose less than linear
    # one SM: whether a GEMM's tiles need another wave depends on its shape (a 2-SM Blackwell tile runs in 73 pairs
    # on 147 SMs as on 146), so only the bounds hold
    assert 0 < share[1] <= 1 / 148
    # each collective's exposed = rule's exposed E + hidden H x share: two CTA counts give E and H, and H must be
    # what the rule leaves unexposed, time - E
    for ctas in (16, 32):
        one = {c.collective: c for c in runs[1].comm if c.dim == "dp"}
        for c in (c for c in runs[ctas].comm if c.dim == "dp"):
            hidden = (c.exposed_s - one[c.collective].exposed_s) / (share[ctas] - share[1])
            rule = c.exposed_s - hidden * share[ctas]
            assert hidden > 0 and rule > 0
            assert hidden == pytest.approx(c.time_s - rule, rel=1e-6)
    gained = runs[16].breakdown_s["dp"] - runs[1].breakdown_s["dp"]
    assert 5e-3 < gained < 12e-3  # ~9 ms of cp34's 10-19 ms estimate (docs/calibration-findings.md sec. 65)
    assert runs[32].breakdown_s["dp"] > runs[16].breakdown_s["dp"]
    # the step says so
    assert any(n.startswith("hidden DP/CP collectives hold 16 of the 148 SMs") for n in runs[16].notes)


def test_no_loss_when_nothing_is_hidden(b200_pod):
    m = load_model("llama3-8b")
    engine = CommEngine(b200_pod)
    off = estimate_step(b200_pod, m, _uf_8b(overlap_dp=False, overlap_cp=False), engine=engine, contention=False)
    for c in off.comm:
        if c.dim == "dp":
            assert c.exposed_s == pytest.approx(c.time_s, rel=1e-12)
    assert not any(n.startswith("hidden DP/CP collectives") for n in off.notes)


def test_the_dp_streams_hidden_seconds_are_capped_at_the_compute(b200_pod, sms_only):
    # ZeRO-3 gathers of every layer twice per micro-batch and a reduce-scatter of Llama 3 70B over 64 ranks at 512
    # tokens a rank: the DP collectives hide more than the compute; they queue on one stream, so at most the whole
    # compute runs on fewer SMs
    m = load_model("llama3-70b")
    engine = CommEngine(b200_pod)
    lay = make_layout(dp=64, micro_batch=1, global_batch=64, seq_len=512, dp_sharding="zero3")
    r = estimate_step(b200_pod, m, lay, engine=engine, contention=False)
    gpu = gpu_compute("B200")
    sc = stage_compute(m, lay, gpu, 0.0)
    share = 1 - sc.microbatch_s / stage_compute(m, lay, reduced_gpu(gpu, 16), 0.0).microbatch_s
    window = lay.microbatches * sc.microbatch_s
    no_loss = estimate_step(b200_pod, m, lay.model_copy(update={"nccl_min_ctas": 1, "nccl_max_ctas": 1}),
                            engine=engine, contention=False)
    share1 = 1 - sc.microbatch_s / stage_compute(m, lay, reduced_gpu(gpu, 1), 0.0).microbatch_s
    dp = [c for c in r.comm if c.dim == "dp"]
    assert sum(c.time_s for c in dp) - no_loss.breakdown_s["dp"] > window  # the case: more DP hidden than compute
    # the loss is the capped window's: window x (share - share1) between the two CTA counts
    assert r.breakdown_s["dp"] - no_loss.breakdown_s["dp"] == pytest.approx(window * (share - share1), rel=1e-6)


def test_one_gpu_per_node_groups_hold_ncclss_four_channels():
    # NVIDIA/nccl v2.26.2-1 / v2.30.7-1, one GPU per node (nNodes == nRanks) with its own 400 Gb/s NIC: the ring
    # search finds 1 channel at 48 GB/s (search.cc sm90SpeedArrayInter), ncclTopoDupChannels doubles it and
    # connect.cc ncclTopoPostset doubles again: 4 (the 8-NIC servers' 16 come from 8 searched channels x 2)
    pod = topo.build_fabric(topo.load_spec("dgx-h100-superpod"))
    prof = default_profile(pod)
    assert prof.channels_one_gpu_per_node == 4 and prof.channels == 16


def test_expert_dp_groups_of_one_gpu_per_node_cost_the_compute_four_sms(monkeypatch, sms_only):
    # EP8 inside each 8-GPU node, experts ZeRO-3 over EDP 8 = one GPU per node (Megatron-FSDP's expert groups,
    # Megatron-MoE-ModelZoo's Qwen3-235B EP8 FSDP row at smaller scale); the dense weights over DP 64, 8 per node
    from topo.training import step as st

    # the step's compute with the same expert all-to-all cover of the host as ``share`` below (none): the host's
    # waits do not shrink with the SMs, so a different cover would make the two shares differ by the host time
    monkeypatch.setattr(st, "_ep_cover_s", lambda *a: 0.0)
    pod = topo.build_fabric(topo.load_spec("dgx-h100-superpod"))
    m = load_model("qwen3-30b-a3b")
    lay = make_layout(dp=64, ep=8, micro_batch=1, global_batch=128, seq_len=4096, dp_sharding="zero3")
    engine = CommEngine(pod)
    r = estimate_step(pod, m, lay, engine=engine, contention=False)
    real_loss = st.sm_loss_s
    monkeypatch.setattr(st, "sm_loss_s", lambda *a: 0.0)
    rule = estimate_step(pod, m, lay, engine=engine, contention=False)
    monkeypatch.setattr(st, "sm_loss_s", real_loss)
    monkeypatch.setattr(st, "_group_channels", lambda prof, c: prof.channels)
    sixteen = estimate_step(pod, m, lay, engine=engine, contention=False)
    gpu = gpu_compute("H100")
    sc = stage_compute(m, lay, gpu, 0.0)

    def share(n):
        return 1 - sc.microbatch_s / stage_compute(m, lay, reduced_gpu(gpu, n), 0.0).microbatch_s

    def ratios(run):  # each hidden DP second's cost: cap x share(SMs held), the cap common to all
        out = {}
        for c, c0 in zip(run.comm, rule.comm):
            if c.dim in ("dp", "dp_experts") and c.time_s > c0.exposed_s:
                out.setdefault(c.dim, []).append((c.exposed_s - c0.exposed_s) / (c.time_s - c0.exposed_s))
        return out

    assert {c.dim: c.group_size == c.domains_per_group for c in r.comm if c.dim.startswith("dp")} == \
        {"dp": False, "dp_experts": True}
    same, now = ratios(sixteen), ratios(r)
    for x in same["dp_experts"]:  # every group on 16 SMs: the same cost per hidden second
        assert x == pytest.approx(same["dp"][0], rel=1e-9)
    for x in now["dp_experts"]:  # the one-per-node group on 4: share(4) / share(16) of it
        assert x / now["dp"][0] == pytest.approx(share(4) / share(16), rel=0.1)
        assert x / now["dp"][0] < 0.4
    # walk8: "hold 16/4 of the 132 SMs" read as a fraction; each collective holds one of the counts
    assert any(n.startswith("hidden DP/CP collectives hold 16 or 4 of the 132 SMs (NCCL's channels, by collective)")
               for n in r.notes)
