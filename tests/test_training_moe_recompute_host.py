"""A recomputed ``moe`` module syncs with the host again: Megatron-Core's MoELayer with ``"moe"`` in
``recompute_modules`` checkpoints its whole forward (router, dispatch, experts, shared experts, combine:
NVIDIA/Megatron-LM@00119989 megatron/core/transformer/moe/moe_layer.py ``MoELayer.forward``), so in the backward a
dropless router hands its tokens per expert to the host again (the device-to-host sync of Megatron-LM
docs/discussions/deepseek-v3-gb200-optimization sec. 2.3) before the experts' GEMMs are launched, the host calls the
dispatch and the combine again (``self.dispatch`` and ``self.combine`` inside the checkpointed ``custom_forward``,
NVIDIA/Megatron-LM@6cd6ea530e and @44151194 moe_layer.py), and the GPU waits for the host's launches of that forward
beyond its own time, as in the forward pass. Full recomputation checkpoints the whole layer, the MoE forward in it. Nemotron 3 Nano's H100 FP8
recipe recomputes ``moe`` eagerly (Megatron-Bridge NEMOTRON_3_NANO_PRETRAIN_CONFIG_H100_FP8_CS_V1,
zidanehuang001/Megatron-Bridge@8e0fe90)."""

import math

import pytest
from conftest import every_kernel_a_call

from topo.training.gpus import gpu_compute
from topo.training.model import load_model
from topo.training.operators import (MOE_MODULE, SYNC_OP, _synced_layer_wait_s, block_ops, block_time, host_launch_s,
                                     kernels_launched, op_time_s, stage_compute)
from topo.training.parallel import make_layout

NANO_H100 = dict(tp=1, ep=8, dp=16, micro_batch=1, global_batch=1024, seq_len=8192, precision="fp8", etp=1,
                 moe_imbalance=1.0)
# exact balance: at a uniform router's expected busiest-rank load (1.008 x the mean) this forward is 0.8% GPU-bound
# (host 3.15 ms, GPU 3.18 ms), and the test is of the recomputed forward's host wait, which needs a host-bound one


def _moe_forward_host_and_gpu_s(model, lay, gpu):
    """The MoELayer forward's host launch seconds and GPU seconds, from its operators (one MoE block)."""
    ops = [op for op in block_ops(model, lay, "E") if op.module in MOE_MODULE and op.passes != "backward"]
    host = sum(host_launch_s(op, gpu, precision=lay.precision) for op in ops)
    return host, sum(op_time_s(op, gpu, lay.precision) for op in ops)


def _replay_wait_s(model, lay, gpu, call_s, cover_s):
    """The recomputed MoELayer forward's wait, simulated kernel by kernel (tidy58: the forward's flow-line rule,
    operators._synced_layer_wait_s, on the MoELayer's own ops): one host thread launches, from the sync, the sync's
    round trip, the dispatch call (``call_s`` of host, half of ``cover_s`` on the GPU), the ops after the sync, the
    combine call, then the router's ops before the sync; the GPU, idle at the start, runs each kernel once it is
    launched and the one before it is done. The wait is when the GPU is done less its busy time."""
    ops = [op for op in block_ops(model, lay, "E") if op.module in MOE_MODULE and op.passes != "backward"]
    at = next(i for i, op in enumerate(ops) if op.name == SYNC_OP)
    seq = [(op.name, host_launch_s(op, gpu, precision=lay.precision), op_time_s(op, gpu, lay.precision),
            kernels_launched(op, lay.precision)) for op in ops]
    call = ("call", call_s, cover_s / 2, 1)
    line = [("sync", gpu.kernels.sync_s, 0.0, 1), call, *seq[at:], call, *seq[:at]]
    host = done = busy = 0.0
    for _, h, g, n in line:
        for _ in range(int(n)):
            host += h / n
            done = max(done, host) + g / n
        busy += g
    return done - busy


def test_recomputed_moe_module_waits_for_the_host_in_the_backward():
    """Nano (23 MoE layers, one stage): recomputing ``moe`` adds to each micro-batch's backward, per MoE layer, the
    replayed forward's flow line from its sync (:func:`_replay_wait_s`), at least the host's launches of the MoELayer
    forward minus that forward's GPU time (eager, 8 local experts launched one
    by one), the host's two calls of the replayed dispatch and combine (one launch each, ``launch_host_s``; no
    all-to-all time given here) and the replayed sync's round trip (``sync_s``); the other recomputed modules add no
    wait. At the top of
    the host's published 5-20 us a launch, every kernel priced as a call (the kernels Transformer Engine's C++ launches
    in a loop cost less, ``launch_calls``, and leave this forward GPU-bound: a mechanism test needs a host-bound one). The permutation is
    priced here as a contiguous copy (90% of HBM): at the permute kernels' measured rates (kernels.toml
    ``permute_TBps``) the forward is GPU-bound (host 3.30 ms, GPU 3.69 ms) and has no wait to test."""
    contiguous = {"permute_TBps": 0.9 * 4.8, "unpermute_TBps": 0.9 * 4.8}  # 90% of the measuring H200's 4.8 TB/s
    nano = load_model("nemotron-3-nano-30b-a3b")
    gpu = gpu_compute("H100", overrides={"launch": every_kernel_a_call(2e-5), "memory": contiguous})
    others = ("layernorm", "core_attn", "moe_act")
    base = stage_compute(nano, make_layout(**NANO_H100, recompute_modules=others), gpu)
    lay = make_layout(**NANO_H100, recompute_modules=("moe", *others))
    moe = stage_compute(nano, lay, gpu)
    host, gpu_s = _moe_forward_host_and_gpu_s(nano, lay, gpu)
    assert host > gpu_s  # the eager MoE forward is host-bound on H100
    calls = 2 * gpu.kernels.launch_host_s
    wait = _replay_wait_s(nano, lay, gpu, gpu.kernels.launch_host_s, 0.0)
    assert moe.backward_s - base.backward_s == pytest.approx(23 * wait, rel=1e-9)
    # the line is at least the host's launches beyond the GPU's time (the sum rule before tidy58), here 0.5% more
    assert 1 < wait / (host + calls - gpu_s + gpu.kernels.sync_s) < 1.01
    assert moe.forward_s == pytest.approx(base.forward_s, rel=1e-12)
    plain = stage_compute(nano, make_layout(**NANO_H100), gpu)
    assert base.backward_s == pytest.approx(plain.backward_s, rel=1e-12)


def test_no_sync_no_recomputed_wait():
    """A padded router (capacity factor) or a full-iteration CUDA graph has no device-to-host sync: recomputing
    ``moe`` then adds no host wait to the backward."""
    nano, gpu = load_model("nemotron-3-nano-30b-a3b"), gpu_compute("H100")
    for kw in ({"moe_capacity_factor": 1.0}, {"cuda_graph_scope": ("full_iteration",)}):
        with_moe = stage_compute(nano, make_layout(**NANO_H100, recompute_modules=("moe",), **kw), gpu)
        without = stage_compute(nano, make_layout(**NANO_H100, **kw), gpu)
        assert with_moe.backward_s == pytest.approx(without.backward_s, rel=1e-12)


QWEN_H100 = dict(tp=1, ep=8, dp=8, micro_batch=1, global_batch=64, seq_len=4096, etp=1, moe_imbalance=1.0)


@pytest.mark.parametrize("cover_s", [0.0, 2e-4, 1e-3, math.inf])
def test_the_recomputed_moe_forward_calls_its_two_all_to_alls_again(cover_s):
    """Qwen3-30B-A3B EP8 on H100 (48 MoE layers, all-to-all dispatcher, dropless): recomputing ``moe`` adds, per
    layer, the sync's round trip and the longer of the dispatch call's launch (the host makes it after the sync,
    the GPU drained) and the replayed forward's host launches (its ops' and the two calls') over its GPU time (its
    ops' and the two all-to-alls', ``cover_s``). Host-bound at 0 and 0.2 ms of all-to-all; at 1 ms the GPU leads
    and the wait is the round trip and one launch; the search's bound (``math.inf``) keeps that floor. ``moe_act``
    (the experts' activation alone) calls nothing again."""
    m, gpu = load_model("qwen3-30b-a3b"), gpu_compute("H100")
    none = stage_compute(m, make_layout(**QWEN_H100), gpu, cover_s)
    lay = make_layout(**QWEN_H100, recompute="selective", recompute_modules=("moe",))
    got = (stage_compute(m, lay, gpu, cover_s).backward_s - none.backward_s) / 48
    host, gpu_s = _moe_forward_host_and_gpu_s(m, lay, gpu)
    call, sync = gpu.kernels.launch_host_s, gpu.kernels.sync_s
    if math.isinf(cover_s):  # the search's bound: the line's floor, the round trip and the dispatch call
        assert got == pytest.approx(sync + call, rel=1e-9)
    else:
        assert got == pytest.approx(_replay_wait_s(m, lay, gpu, call, cover_s), rel=1e-9)
    assert got >= (sync + max(call, host + 2 * call - gpu_s - cover_s)) * (1 - 1e-12)  # the sum rule, a floor
    assert (got > sync + call * (1 + 1e-9)) == (cover_s < 1e-3)  # host-bound below a millisecond of all-to-all
    act = make_layout(**QWEN_H100, recompute="selective", recompute_modules=("moe_act",))
    assert stage_compute(m, act, gpu, cover_s).backward_s == pytest.approx(none.backward_s, rel=1e-12)


@pytest.mark.parametrize("cover_s", [0.0, 1e-3])
def test_a_fully_recomputed_synced_layer_waits_its_forward_stretch_again(cover_s):
    """Full recomputation replays the whole layer's forward, its router's sync and the dispatch and combine calls
    in it: each recomputed layer's backward waits what the forward's synced stretch waits (the attention block, then
    the MoE block, synced), only the first ``recompute_num_layers`` of the stage (Megatron's ``block`` method),
    every layer without it."""
    m, gpu = load_model("qwen3-30b-a3b"), gpu_compute("H100")
    lay = make_layout(**QWEN_H100)
    none = stage_compute(m, lay, gpu, cover_s)
    stretch = _synced_layer_wait_s([block_time(m, lay, gpu, "*"), block_time(m, lay, gpu, "E")], 1, cover_s)
    assert stretch >= gpu.kernels.sync_s + gpu.kernels.launch_host_s
    for n, layers in ((1, 1), (5, 5), (None, 48)):
        full = make_layout(**QWEN_H100, recompute="full", recompute_num_layers=n)
        assert stage_compute(m, full, gpu, cover_s).backward_s - none.backward_s == pytest.approx(
            layers * stretch, rel=1e-9)


@pytest.mark.parametrize("cover_s", [0.0, 5e-3])
def test_a_recomputed_hybridep_forward_calls_at_the_measured_call_price(cover_s):
    """rev62: the recomputed ``moe`` forward's two HybridEP calls are priced as the forward's and the backward's
    (the block's ``call_host_s``, one place): each ``dispatch_with_permute`` / ``combine_with_unpermute`` call
    (4.253 - 3.109) s / 6,144 = 186.2 us of host on DGX H100 (Megatron-Bridge PR #5094's Nsight table,
    NVIDIA-NeMo/Megatron-Bridge@7ded17dae skills/nemo-mbridge-perf-moe-comm-overlap/SKILL.md; host_calls.toml), its
    permute and un-permute launched inside the calls (no host launch of their own). Closed form as
    :func:`test_the_recomputed_moe_forward_calls_its_two_all_to_alls_again`'s, with that price: host-bound at no
    all-to-all time, the round trip and one call at 5 ms of it."""
    m, gpu = load_model("qwen3-30b-a3b"), gpu_compute("H100")
    flex = dict(QWEN_H100, ep_dispatcher="deepep", ep_flex_backend="hybridep")
    none = stage_compute(m, make_layout(**flex), gpu, cover_s)
    lay = make_layout(**flex, recompute="selective", recompute_modules=("moe",))
    got = (stage_compute(m, lay, gpu, cover_s).backward_s - none.backward_s) / 48
    ops = [op for op in block_ops(m, lay, "E") if op.module in MOE_MODULE and op.passes != "backward"]
    host = sum(host_launch_s(op, gpu, precision=lay.precision) for op in ops)
    assert host < sum(gpu.kernels.launch_host_s * kernels_launched(op, lay.precision) for op in ops)  # in_call
    gpu_s = sum(op_time_s(op, gpu, lay.precision) for op in ops)
    call, sync = (4.253 - 3.109) / 6144, gpu.kernels.sync_s
    assert got == pytest.approx(_replay_wait_s(m, lay, gpu, call, cover_s), rel=1e-3)
    assert got >= (sync + max(call, host + 2 * call - gpu_s - cover_s)) * (1 - 1e-3)
    assert (got > (sync + call) * 1.001) == (cover_s == 0.0)  # the data keeps 186.2 us (4 digits)


def _early_stopped_replay_wait_s(model, lay, gpu, call_s, cover_s):
    """A Qwen3-MoE layer's replay under ``recompute_early_stop``, simulated kernel by kernel as
    :func:`_replay_wait_s`: from the sync, its round trip, the dispatch call, the MoE block's ops after the sync up
    to its residual add (left out), no combine call (PyTorch's non-reentrant checkpoint stops after the
    un-permutation's saved ``row_id_map``; ``FusedCombine`` saves nothing: findings section 238), then the layer's
    attention block and the MoE block's ops up to the sync."""
    def seq(kind):
        ops = [op for op in block_ops(model, lay, kind) if op.passes != "backward"]
        return ops, [(host_launch_s(op, gpu, precision=lay.precision),
                      op_time_s(op, gpu, lay.precision, cudnn=lay.cudnn_version),  # attnh71: the layout's cuDNN
                      kernels_launched(op, lay.precision)) for op in ops]
    moe_ops, moe = seq("E")
    at = next(i for i, op in enumerate(moe_ops) if op.name == SYNC_OP)
    assert moe_ops[-1].name == "residual"
    line = [(gpu.kernels.sync_s, 0.0, 1), (call_s, cover_s / 2, 1), *moe[at:-1], *seq("*")[1], *moe[:at]]
    host = done = busy = 0.0
    for h, g, n in line:
        for _ in range(int(n)):
            host += h / n
            done = max(done, host) + g / n
        busy += g
    return done - busy


@pytest.mark.parametrize("cover_s", [0.0, 2e-4])
def test_an_early_stopped_replay_waits_without_its_combine_call(cover_s):
    """rev63 (amnano58's leftover, findings section 238): under ``recompute_early_stop`` the step drops the replay's
    combine all-to-all from the EP traffic, and the host's replayed line drops its call too: each fully recomputed
    Qwen3-30B-A3B layer's backward waits the replay that ends at the un-permutation, not the forward's stretch (which
    calls the combine and launches the residual add). At the top of the host's published 5-20 us a launch, where
    the replay is host-bound without all-to-all time (0.2 ms of it leaves the GPU ahead: both lines wait the round
    trip and the dispatch call). Every kernel priced as a call, as the Nano test above (the C++-launched kernels'
    cheaper price leaves this replay GPU-bound)."""
    m, gpu = load_model("qwen3-30b-a3b"), gpu_compute("H100", overrides={"launch": every_kernel_a_call(2e-5)})
    none = stage_compute(m, make_layout(**QWEN_H100), gpu, cover_s)
    lay = make_layout(**QWEN_H100, recompute="full", recompute_early_stop=True)
    got = (stage_compute(m, lay, gpu, cover_s).backward_s - none.backward_s) / 48
    want = _early_stopped_replay_wait_s(m, lay, gpu, gpu.kernels.launch_host_s, cover_s)
    assert got == pytest.approx(want, rel=1e-9)
    whole = _synced_layer_wait_s([block_time(m, lay, gpu, "*"), block_time(m, lay, gpu, "E")], 1, cover_s)
    if cover_s == 0:
        assert whole - got > 3e-6  # not the forward's stretch: 63.3 against 60.0 us
    # tidy121 (section 443): ``moe`` in recompute_modules checkpoints nothing of its own in a fully recomputed layer
    # (Megatron-Core gates the MoELayer's checkpoint on selective granularity, NVIDIA/Megatron-LM@d98e8a64
    # megatron/core/transformer/moe/moe_layer.py lines 248-251), so the early-stopped replay is the same line
    both = make_layout(**QWEN_H100, recompute="full", recompute_early_stop=True, recompute_modules=("moe",))
    assert (stage_compute(m, both, gpu, cover_s).backward_s - none.backward_s) / 48 == pytest.approx(got, rel=1e-12)


def test_a_fully_recomputed_layer_without_a_sync_replays_its_host_launches():
    """rev63: full recomputation replays each layer's forward inside the backward pass, where the host runs ahead
    as across the forward (no sync: a padded router). Its launches and GPU time join the backward's balance, so a
    host-bound Qwen3-30B-A3B (capacity factor 1, eager, at the top of the host's published 5-20 us a launch) pays
    the replay at the host's pace: per micro-batch 48 x (the attention and MoE blocks' forward launches and the two
    all-to-all calls), not the replay's 48.7 ms of GPU time, which the step counted before with no host term (it
    passed the host-bound forward, 94.2 ms, at half its price). GPU-bound (1 us a launch), the replay adds its GPU
    time only."""
    m = load_model("qwen3-30b-a3b")
    kw = dict(QWEN_H100, seq_len=2048, moe_capacity_factor=1.0)
    for host_s, bound in ((2e-5, "host"), (1e-6, "gpu")):
        gpu = gpu_compute("H100", overrides={"launch": every_kernel_a_call(host_s)})  # every kernel a call, as above
        none = stage_compute(m, make_layout(**kw), gpu)
        lay = make_layout(**kw, recompute="full")
        full = stage_compute(m, lay, gpu)
        attn, moe = block_time(m, lay, gpu, "*"), block_time(m, lay, gpu, "E")
        added = full.backward_s + full.recompute_s - none.backward_s
        if bound == "host":
            assert added == pytest.approx(48 * (attn.host_s + moe.host_s + moe.calls_host_s.forward_s), rel=1e-9)
            assert added > 1.5 * full.recompute_s
        else:
            assert added == pytest.approx(full.recompute_s, rel=1e-9)
