"""Full recomputation under PyTorch's non-reentrant checkpoint stops at a layer's last saved tensor.

``torch.utils.checkpoint`` with ``use_reentrant=False`` "stops recomputation as soon as all needed intermediate
activations have been recomputed" (``early_stop``, default True; pytorch/pytorch@0008d771
``torch/utils/checkpoint.py``), and ``checkpoint_wrapper`` defaults to ``CheckpointImpl.NO_REENTRANT``
(``torch/distributed/algorithms/_checkpoint/checkpoint_wrapper.py``). NeMo AutoModel's MoE models wrap each decoder
layer whole (NVIDIA-NeMo/Automodel@08a48f76 ``nemo_automodel/components/moe/parallelizer.py`` ``apply_ac``): the
layer's last op, its residual add, saves nothing and is not replayed; an MoE block's DeepEP combine
(``components/moe/megatron/fused_a2a.py`` ``FusedCombine``: only ``ctx.handle``, no ``save_for_backward``) comes
after the un-permutation's saved ``row_id_map`` (NVIDIA/TransformerEngine v2.12 ``pytorch/permutation.py``
``_moe_unpermute_mask_map``), so the replay dispatches again but does not combine."""

import pytest
from conftest import every_kernel_a_call

from conftest import run_cli
from topo.training.gpus import gpu_compute
from topo.training.kernels import memory_s
from topo.training.model import load_model
from topo.training.operators import stage_compute
from topo.training.parallel import make_layout
from topo.training.step import _is_ep_a2a, step_traffic

# the AutoModel Nemotron 3 Nano benchmark (Automodel@08a48f76 examples/benchmark/configs/nemotron_nano_v3_te_deepep.yaml):
# 8 H100, FSDP 8, EP 8, local batch 4 of 4,096 tokens, global batch 512 (16 micro-batches), full recomputation
NANO = dict(tp=1, ep=8, dp=8, micro_batch=4, global_batch=512, seq_len=4096, recompute="full", dp_sharding="fsdp",
            ep_dispatcher="deepep")


def _residual_s(gpu, tokens: float, hidden: int) -> float:
    """One residual add's forward: two bf16 reads and one write per element (6 B), one kernel's launch gap."""
    return memory_s(gpu.kernels, 6 * tokens * hidden) + gpu.kernels.launch_gpu_s


def _ep_calls(model, lay) -> float:
    return sum(t["calls"] for t in step_traffic(model, lay) if _is_ep_a2a(t))


def test_a_hybrid_layer_replays_all_but_its_residual_add():
    """Nano's 52 layers are one block each: the replay drops 52 residual adds per micro-batch, nothing else."""
    nano, gpu = load_model("nemotron-3-nano-30b-a3b"), gpu_compute("H100")
    whole = stage_compute(nano, make_layout(**NANO), gpu)
    stop = stage_compute(nano, make_layout(**NANO, recompute_early_stop=True), gpu)
    assert nano.layers == 52
    assert whole.recompute_s - stop.recompute_s == pytest.approx(52 * _residual_s(gpu, 4 * 4096, nano.hidden))
    assert (stop.forward_s, stop.backward_s) == pytest.approx((whole.forward_s, whole.backward_s))


def test_a_transformer_layer_replays_its_attention_residual():
    """Qwen3-30B-A3B's layers are attention then MoE: the attention block's add feeds the MoE block's norm, which
    saves its input, so only the MoE block's add (one per layer, 48) is left out."""
    qwen, gpu = load_model("qwen3-30b-a3b"), gpu_compute("H100")
    kw = dict(NANO, global_batch=512)
    whole = stage_compute(qwen, make_layout(**kw), gpu)
    stop = stage_compute(qwen, make_layout(**kw, recompute_early_stop=True), gpu)
    assert whole.recompute_s - stop.recompute_s == pytest.approx(48 * _residual_s(gpu, 4 * 4096, qwen.hidden))


def test_the_replay_dispatches_again_but_does_not_combine():
    """Per MoE layer and micro-batch: dispatch, combine, their gradients and the replay's dispatch, 5 all-to-alls
    (6 when the whole layer is replayed); Nano has 23 MoE layers, 16 micro-batches."""
    nano = load_model("nemotron-3-nano-30b-a3b")
    assert _ep_calls(nano, make_layout(**NANO)) == pytest.approx(16 * 23 * 6)
    assert _ep_calls(nano, make_layout(**NANO, recompute_early_stop=True)) == pytest.approx(16 * 23 * 5)


def test_early_stop_changes_nothing_without_full_recomputation():
    """Selective recomputation of Megatron-Core's ``moe`` module replays the combine inside its own checkpoint;
    without recomputation there is no replay."""
    nano, gpu = load_model("nemotron-3-nano-30b-a3b"), gpu_compute("H100")
    for kw in (dict(recompute="none"), dict(recompute="none", recompute_modules=("moe",))):
        base = dict(NANO, **kw)
        plain, flagged = make_layout(**base), make_layout(**base, recompute_early_stop=True)
        assert _ep_calls(nano, flagged) == _ep_calls(nano, plain)
        assert stage_compute(nano, flagged, gpu).recompute_s == stage_compute(nano, plain, gpu).recompute_s


def test_the_cli_says_when_early_stop_has_nothing_to_stop():
    """``topo train`` names the field on its framework-options line, ``no effect`` without full recomputation; a
    value that is not a boolean is one line naming the key, exit 2."""
    base = ["train", "dgx-h100-superpod", "--model", "llama3-8b", "--tp", "8", "--dp", "4", "--global-batch", "16",
            "--layout", "recompute_early_stop=true"]
    lines = [ln for ln in run_cli(*base, check=True).stdout.splitlines() if ln.startswith("framework options: ")]
    assert lines == ["framework options: recompute_early_stop true (no effect: recompute is not full) (layout fields)"]
    lines = [ln for ln in run_cli(*base, "--recompute", "full", check=True).stdout.splitlines()
             if ln.startswith("framework options: ")]
    assert lines == ["framework options: recompute_early_stop true (layout fields)"]
    bad = run_cli(*base[:-1], "recompute_early_stop=yes")
    assert bad.returncode == 2
    assert bad.stderr.strip() == "error: --layout: recompute_early_stop: must be true or false, got 'yes'"


def test_only_the_recomputed_layers_stop_early():
    """rev63: with ``recompute_num_layers`` (Megatron's ``block`` method; here 12 of Qwen3-30B-A3B's 48 layers on one
    stage) only those layers replay, so only their 12 residual adds are left out, and only their 12 combines:
    per micro-batch 48 x 4 + 12 x 2 - 12 all-to-alls. The early stop was untested with fewer recomputed layers than
    the stage holds (dropping every layer's add passed every test)."""
    qwen, gpu = load_model("qwen3-30b-a3b"), gpu_compute("H100")
    kw = dict(NANO, recompute_num_layers=12)
    whole = stage_compute(qwen, make_layout(**kw), gpu)
    stop = stage_compute(qwen, make_layout(**kw, recompute_early_stop=True), gpu)
    assert whole.recompute_s - stop.recompute_s == pytest.approx(12 * _residual_s(gpu, 4 * 4096, qwen.hidden))
    assert _ep_calls(qwen, make_layout(**kw, recompute_early_stop=True)) == pytest.approx(16 * (48 * 4 + 12 * 2 - 12))


def test_an_unsynced_early_stopped_replay_launches_no_residual_add_and_no_combine():
    """cover64 (tidy59's leftover 2): without a sync (a padded router) a fully recomputed layer's replay joins the
    backward's host balance (rev63), and under ``recompute_early_stop`` it ends before the layer's last residual
    add and the MoE block's combine (the same replay ``early_stopped_s`` and ``step._Traffic.stopped`` price):
    host-bound, Qwen3-30B-A3B's 48 layers launch per micro-batch 48 residual adds and 48 combine calls fewer (one
    launch each for the all-to-all dispatcher, ``launch_host_s``: 20 us, the top of the host's published 5-20 us),
    exactly; GPU-bound (1 us a launch) the replay adds its GPU time, early-stopped, only."""
    m = load_model("qwen3-30b-a3b")
    kw = dict(tp=1, ep=8, dp=8, micro_batch=1, global_batch=64, seq_len=2048, etp=1, moe_imbalance=1.0,
              moe_capacity_factor=1.0, recompute="full")
    for host_s in (2e-5, 1e-6):
        gpu = gpu_compute("H100", overrides={"launch": {"host_s": host_s}})
        none = stage_compute(m, make_layout(**{**kw, "recompute": "none"}), gpu)
        whole = stage_compute(m, make_layout(**kw), gpu)
        stop = stage_compute(m, make_layout(**kw, recompute_early_stop=True), gpu)
        added_whole = whole.backward_s + whole.recompute_s - none.backward_s
        added_stop = stop.backward_s + stop.recompute_s - none.backward_s
        if host_s > 1e-5:
            assert added_whole - added_stop == pytest.approx(48 * (host_s + host_s), rel=1e-9)
        else:
            assert added_stop == pytest.approx(stop.recompute_s, rel=1e-9)
            assert stop.recompute_s < whole.recompute_s


def test_a_synced_early_stopped_replay_with_moe_listed_is_the_plain_early_stopped_one():
    """tidy121 (section 443; it replaces tidy65's nested-checkpoint case): under ``recompute = "full"`` a ``moe`` in
    ``recompute_modules`` checkpoints nothing of its own (Megatron-Core reads the modules only under selective
    granularity: NVIDIA/Megatron-LM@d98e8a64 ``megatron/core/transformer/moe/moe_layer.py`` lines 248-251), so the
    synced early-stopped replay of Qwen3-30B-A3B's layer (dropless, host-bound at 20 us a launch, every kernel
    priced as a call) ends before the combine whether or not ``moe`` is listed: the same host terms."""
    from topo.training.model import Block
    from topo.training.operators import _unit_host_terms, block_time
    m = load_model("qwen3-30b-a3b")
    gpu = gpu_compute("H100", overrides={"launch": every_kernel_a_call(2e-5)})
    kw = dict(tp=1, ep=8, dp=8, micro_batch=1, global_batch=64, seq_len=2048, etp=1, moe_imbalance=1.0,
              recompute="full", recompute_early_stop=True)
    layer = next(u for u in m.blocks if Block.MOE in u)
    assert layer[-1] == Block.MOE  # the MoE block ends the layer

    def terms(**extra):
        lay = make_layout(**kw, **extra)
        return _unit_host_terms(lay, layer, False, lambda k, bf16: block_time(m, lay, gpu, k), True, 1e-3)

    listed, plain = terms(recompute_modules=("moe",)), terms()
    assert listed == plain and plain[7] != plain[5]  # the early-stopped line, not the forward's
