"""Per-tensor delayed FP8 scaling as Transformer Engine runs it under Megatron-Core: the amax reduction of every
model chunk's forward and backward (topo/training/fp8_amax.py, kernels.toml [fp8_amax]) and TE 2.0-2.6's scale
inverse kernel before each cast (kernels.toml [launch] fp8_delayed_scale_inverse_kernels), counted from
NVIDIA/TransformerEngine@bee4649c (the TE NeMo 25.04 pins: pytorch/fp8.py reduce_and_update_fp8_tensors,
module/base.py line 503, csrc/extensions/quantizer.cpp line 112) and Megatron-Core core_v0.12.0
(docs/calibration-findings.md section 150)."""

import csv
import sys
from pathlib import Path

import pytest

import topo
from topo.errors import TopoError
from topo.training.comm import CommEngine
from topo.training.fp8_amax import AMAX_GROUP, AMAX_PHASE, amax_reduced, amax_reductions, fp8_amax_table
from topo.training.gpus import gpu_compute
from topo.training.kernels import quantize_kernels
from topo.training.mapping import map_layout
from topo.training.model import load_model
from topo.training.operators import Op, kernels_launched, op_time_s
from topo.training.parallel import check_layout, make_layout
from topo.training.step import estimate_step

ROOT = Path(__file__).resolve().parents[1]
_DELAYED = dict(precision="fp8", fp8_recipe="delayed")


def _benchmark():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import training_accuracy
    return training_accuracy


def test_the_tables_counts_are_te_2_2s():
    """TE@bee4649c base.py line 503: ``num_gemms * 3`` FP8 tensors forward, ``* 2`` backward, each amax an FP32;
    reduce_and_update_fp8_tensors: torch.cat and the fused update beside the all-reduce. Create_tensor's
    at::reciprocal(scale) and the cast: 2 kernels a delayed-scaling quantisation."""
    t = fp8_amax_table()
    assert (list(t["amaxes_per_gemm"]), t["amax_bytes"], t["kernels_per_reduction"]) == ([3, 2], 4, 2)
    assert quantize_kernels()["delayed_scale_inverse"] == 2 and quantize_kernels()["cast"] == 1


def test_reductions_per_step_by_closed_form():
    """Llama 3 8B (32 layers, each an attention block, QKV and proj, and an MLP block, fc1 and fc2: 4 linear GEMMs)
    at PP4 VP2, 16 micro-batches: a rank holds 8 layers in 2 chunks, so 2 x 16 = 32 reductions each way a step, of 4 x 3 x 32 = 384 bytes forward and
    4 x 2 x 32 = 256 backward. Without PP one chunk; without the flag none."""
    m = load_model("llama3-8b")
    lay = make_layout(tp=1, pp=4, vpp=2, dp=2, global_batch=32, fp8_amax_reduction=True, **_DELAYED)
    assert lay.microbatches == 16
    counts = {"*": 8, "-": 8}
    assert amax_reductions(m, lay, counts) == [(384.0, 32.0), (256.0, 32.0)]
    flat = make_layout(tp=1, dp=8, global_batch=32, fp8_amax_reduction=True, **_DELAYED)
    assert [n for _, n in amax_reductions(m, flat, counts)] == [4.0, 4.0]
    assert amax_reductions(m, lay.model_copy(update={"fp8_amax_reduction": False}), counts) == []


def test_the_step_exposes_every_reduction():
    """On four DGX H100 nodes (Llama 3 8B, TP2 PP2 VP2 DP8): the step's ``fp8_amax`` line is its 2 x 8 micro-batches
    x 2 chunks calls x (the all-reduce over the tensor x data x context group, 16 ranks over 2 nodes, alone on the
    fabric + 2 launch gaps), to rounding; the comm table shows the all-reduce under ``fp8_amax`` with its group, not
    under dp; and the step is longer than without by that line plus what it adds to the bubble, (p - 1) / v of its
    per-micro-batch share (it runs inside each micro-batch's forward and backward)."""
    fab = topo.build_fabric(topo.load_spec("dgx-h100-superpod", []))
    m = load_model("llama3-8b")
    kw = dict(tp=2, pp=2, vpp=2, dp=8, global_batch=64, sequence_parallel=True, **_DELAYED)
    on = estimate_step(fab, m, make_layout(fp8_amax_reduction=True, **kw), contention=False)
    off = estimate_step(fab, m, make_layout(fp8_amax_reduction=False, **kw), contention=False)
    lay = make_layout(fp8_amax_reduction=True, **kw)
    groups = map_layout(lay, fab.spec.gpus_per_domain, fab.layout.num_gpus).groups(AMAX_GROUP)
    assert groups.shape == (2, 16)
    eng, gap = CommEngine(fab), gpu_compute("H100").kernels.launch_gpu_s
    calls = amax_reductions(m, lay, {"*": 16, "-": 16})
    reduce_s = sum(n * eng.time("all_reduce", groups, size).time_s for size, n in calls)
    want = reduce_s + sum(n for _, n in calls) * 2 * gap
    got = [c for c in on.comm if c.phase == AMAX_PHASE]
    assert len(got) == 1 and got[0].dim == AMAX_PHASE and got[0].group_size == 16
    assert got[0].exposed_s == pytest.approx(reduce_s, rel=1e-9) and got[0].calls_per_step == 2 * 8 * 2
    assert on.breakdown_s["fp8_amax"] == pytest.approx(want, rel=1e-9)
    assert on.breakdown_s["dp"] == pytest.approx(off.breakdown_s["dp"], rel=1e-9)
    assert on.breakdown_s["bubble"] - off.breakdown_s["bubble"] == pytest.approx(want * (2 - 1) / 2 / 8, rel=1e-6)
    assert on.step_time_s - off.step_time_s == pytest.approx(want * (1 + 1 / 16), rel=1e-6)
    assert not [c for c in off.comm if c.phase == AMAX_PHASE] and off.breakdown_s["fp8_amax"] == 0.0


def test_a_one_rank_group_reduces_nothing_but_runs_its_kernels():
    """TE@bee4649c fp8.py line 355: no all-reduce when the autocast's group has one rank (here TP1 DP1 CP1, PP8),
    while torch.cat and the fused update still run: no collective in the comm table and nothing on the dp line; the
    ``fp8_amax`` line is the calls' 2 launch gaps each."""
    fab = topo.build_fabric(topo.load_spec("dgx-h100-superpod", []))
    m = load_model("llama3-8b")
    lay = make_layout(tp=1, pp=8, dp=1, global_batch=16, **_DELAYED)
    r = estimate_step(fab, m, lay, contention=False)
    assert not [c for c in r.comm if c.phase == AMAX_PHASE or c.dim == "dp"] and r.breakdown_s["dp"] == 0.0
    calls = sum(n for _, n in amax_reductions(m, lay, {"*": 4, "-": 4}))
    assert calls == 2 * 16
    assert r.breakdown_s["fp8_amax"] == pytest.approx(calls * 2 * gpu_compute("H100").kernels.launch_gpu_s, rel=1e-9)


@pytest.mark.parametrize("recipe, on", [("delayed", True), ("current", False), ("blockwise", False), (None, True)])
def test_the_default_follows_the_recipe(recipe, on):
    """TE's DelayedScaling reduces amaxes by default (transformer_engine/common/recipe/__init__.py ``reduce_amax:
    bool = True`` at v1.5 to v2.18); current and block-wise scaling keep no amax history (fp8.py line 339: the buffer
    is delayed scaling's only); an unset recipe is Megatron-Core's default, delayed (arguments.py ``--fp8-recipe``
    ``default='delayed'`` at core_v0.12.0, TransformerConfig.fp8_recipe at Megatron-LM@d98e8a64; amax53), unless
    current scaling's amax pass says current. A layout's own setting wins."""
    lay = make_layout(tp=1, dp=8, global_batch=8, precision="fp8", fp8_recipe=recipe)
    if recipe is None:
        assert amax_reduced(lay.model_copy(update={"fp8_amax_pass": True})) is False
    assert lay.fp8_amax_reduction is None and amax_reduced(lay) is on
    assert amax_reduced(lay.model_copy(update={"fp8_amax_reduction": False})) is False
    assert amax_reduced(make_layout(tp=1, dp=8, global_batch=8)) is False  # bf16


def test_a_delayed_cast_launches_its_scale_inverse_first():
    """TE 2.0-2.6: one more kernel per quantisation of a linear GEMM's input (forward X, backward dY), per expert
    of a grouped GEMM on the per-expert cast path; its GPU gap charged in op_time_s."""
    gpu = gpu_compute("GB200")
    M, N, K = 8192.0, 4096.0, 4096.0
    qkv = Op("qkv", "attention", "gemm", 2 * M * N * K, 0.0, M, N, K, 1.0, True)
    for b in (False, True):
        gemms = 2 if b else 1
        assert kernels_launched(qkv, "fp8", b) == gemms + 1
        assert kernels_launched(qkv, "fp8", b, scale_kernel=True) == gemms + 2
        assert kernels_launched(qkv, "bf16", b, scale_kernel=True) == gemms
        gap = gpu.kernels.launch_gpu_s
        extra = op_time_s(qkv, gpu, "fp8", b, fp8_recipe="delayed", scale_kernel=True) - op_time_s(
            qkv, gpu, "fp8", b, fp8_recipe="delayed")
        assert extra == pytest.approx(gap, rel=1e-9)
    experts = 4.0
    fc1 = Op("fc1", "moe", "gemm", 2 * M * N * K * experts, 0.0, M, N, K, experts, True, grouped=True,
             launches=experts)
    assert kernels_launched(fc1, "fp8", False, scale_kernel=True) == experts + 2 * experts


@pytest.mark.parametrize("key", ["fp8_amax_reduction", "fp8_scale_inverse_kernel", "tp_only_amax_red"])
def test_delayed_settings_need_the_delayed_recipe(key):
    """Delayed or unset (Megatron-Core's default, amax53); current scaling (or its amax pass) and BF16 refused, but
    fp8_amax_reduction true with current scaling (rev57a: TE's TP all-reduce under sequence parallelism, what a
    current-scaling step's JSON layout says ran)."""
    m = load_model("llama3-8b")
    check_layout(m, make_layout(tp=8, global_batch=8, **{key: True}, **_DELAYED), gpus=8)
    check_layout(m, make_layout(tp=8, global_batch=8, precision="fp8", **{key: True}), gpus=8)
    current = (dict(precision="fp8", fp8_recipe="current"), dict(precision="fp8", fp8_amax_pass=True))
    for bad in (*(current if key != "fp8_amax_reduction" else ()), dict(), dict(precision="fp8", fp8_recipe="blockwise")):
        with pytest.raises(TopoError) as e:
            check_layout(m, make_layout(tp=8, global_batch=8, **{key: True}, **bad), gpus=8)
        assert e.value.key == key and "fp8_recipe delayed" in str(e.value)
    if key == "fp8_amax_reduction":
        for ok in current:
            check_layout(m, make_layout(tp=8, global_batch=8, **{key: True}, **ok), gpus=8)


def test_which_published_rows_run_them():
    """Every FP8 row whose note says delayed scaling runs TE's amax reduction but MaxText's (Flax keeps its amax
    history inside the jitted step); the scale inverse kernel only where the container's TE is 2.0-2.6 and known:
    NeMo 25.04's (NeMo v2.3.0 requirements/manifest.json: TE@bee4649c, 2.2.0.dev0). The runs CSVs' columns (tidy52),
    which test_run_recipe_columns.py checks reach the layouts."""
    red, inv = set(), set()
    for f in ("training_runs_published.csv", "training_runs_holdout.csv"):
        for r in csv.DictReader(open(ROOT / "data/reference" / f)):
            delayed = r.get("precision") == "fp8" and "delayed scaling" in (r.get("note") or "").lower()
            # the runs CSVs' columns (tidy52: were rules of training_accuracy.py), explicit on every delayed row
            # though the layout's default now follows the recipe (amax52): 0 on MaxText's
            want = ("0" if r["run_id"].startswith("maxtext_") else "1") if delayed else ""
            if r["run_id"] == "deepseekv3_h800_2048":  # tile/block scaling by an online max, no amax
                want = "0"  # history (arXiv:2412.19437v2 sec. 3.3.2; amax53: an unset recipe runs delayed)
            assert r["fp8_amax_reduction"] == want, r["run_id"]
            if r["fp8_amax_reduction"] == "1":
                red.add(r["run_id"])
            if r["fp8_scale_inverse_kernel"] == "1":
                assert r["fp8_amax_reduction"] == "1", r["run_id"]
                # NeMo 25.04 (TE 2.2.0.dev0), or runs57's NeMo 25.07.01 row (NeMo 2.4.0's TE 2.5, its note)
                assert "NeMo 25.04" in r["software"] or "NeMo 25.07.01" in r["software"], r["run_id"]
                inv.add(r["run_id"])
    assert {"nemo2504dgxc_gb200_llama4_maverick_fp8_512", "nemo2504dgxc_gb200_grok1_fp8_128",
            "nemo2502dgxc_h100_llama31_8b_fp8_8", "mlperf41_h100_gpt3_175b_256"} <= red
    assert "nemo2504dgxc_gb200_llama4_maverick_fp8_512" in inv and "nemo2502dgxc_h100_llama31_8b_fp8_8" not in inv
    assert "maxtext_a4_llama31_70b_fp8_256" not in red
    assert len(red) == 52 and len(inv) == 33  # runs57: DGX Cloud's NeMo 25.07.01 Nemotron-H 56B H100 row


def test_tp_only_amax_red_reduces_over_tensor_x_context():
    """Megatron-Core's ``tp_only_amax_red`` (Megatron-LM@d98e8a64 parallel_state.py get_amax_reduction_group lines
    1877-1900, with_context_parallel=True): the tensor x context group instead of tensor x data x context. TP 8 CP 2
    DP 4 on 64 H100s: the default group is 64 ranks (one of them), tp-only 16 (four, one per data replica); the same
    calls and bytes either way; refused without a reduction to regroup."""
    m = load_model("llama3-70b")
    fab = topo.build_fabric(topo.load_spec("dgx-h100-superpod", []))
    base = make_layout(tp=8, cp=2, dp=4, global_batch=32, precision="fp8", seq_len=8192)
    tp_only = base.model_copy(update={"tp_only_amax_red": True})
    got = {}
    for lay in (base, tp_only):
        r = estimate_step(fab, m, lay, contention=False)
        (c,) = [c for c in r.comm if c.dim == AMAX_PHASE]
        got[lay.tp_only_amax_red] = c
    assert (got[False].group_size, got[False].num_groups) == (64, 1)
    assert (got[True].group_size, got[True].num_groups) == (16, 4)
    assert got[True].calls_per_step == got[False].calls_per_step and got[True].size_bytes == got[False].size_bytes
    for bad in (dict(fp8_recipe="current"), dict(fp8_amax_reduction=False)):
        with pytest.raises(TopoError) as e:
            check_layout(m, make_layout(tp=8, dp=8, global_batch=8, precision="fp8", tp_only_amax_red=True, **bad),
                         gpus=64)
        assert e.value.key == "tp_only_amax_red"
