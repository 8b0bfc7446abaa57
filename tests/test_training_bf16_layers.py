"""FP8 layouts that keep their first and last layers in BF16 (ParallelLayout.num_layers_at_start_in_bf16 /
num_layers_at_end_in_bf16): Megatron-Core's ``first_last_layers_bf16``, whose ``get_fp8_context(config, layer_no)``
gives layer ``layer_no`` no FP8 context when ``layer_no < num_layers_at_start_in_bf16`` or ``layer_no >= num_layers
- num_layers_at_end_in_bf16`` (NVIDIA/Megatron-LM megatron/core/fp8_utils.py; the hybrid stack wraps every layer,
Mamba, attention or MLP, in it: megatron/core/ssm/mamba_block.py @f7a3dcc4). Nemotron-H's precision plugin sets 2
and 2 (nemotron_h_bf16_with_fp8_current_scaling_mixed, NeMo and Megatron-Bridge mixed_precision.py)."""

import pytest
from published_setups import published_setups

from topo.errors import TopoError
from topo.training.gpus import gpu_compute
from topo.training.model import load_model
from topo.training.operators import bf16_layers, block_time, pipeline_units, stage_compute
from topo.training.parallel import check_layout, make_layout


def _layout(**kw):
    base = dict(tp=8, dp=4, micro_batch=1, global_batch=96, seq_len=8192, precision="fp8", flash_attention=True,
                recompute="none")
    return make_layout(**{**base, **kw})


def _fb(t):
    return t.forward_s + t.backward_s


def test_bf16_layers_add_exactly_the_bf16_minus_fp8_time_of_those_layers():
    """Nemotron-H 56B (pattern M-M-...M-) at 2 + 2 BF16 layers: the stage's micro-batch grows by the BF16 minus
    FP8 time of its first two layers (M, -) and its last two (M, -), nothing else."""
    model, gpu = load_model("nemotron-h-56b"), gpu_compute("H100")
    fp8 = _layout()
    mixed = _layout(num_layers_at_start_in_bf16=2, num_layers_at_end_in_bf16=2)
    check_layout(model, mixed)
    bf16 = fp8.model_copy(update={"precision": "bf16"})
    assert model.layer_pattern[:2] == "M-" and model.layer_pattern[-2:] == "M-"
    expected = sum(_fb(block_time(model, bf16, gpu, k)) - _fb(block_time(model, fp8, gpu, k)) for k in "M-M-")
    assert expected > 0
    grown = stage_compute(model, mixed, gpu).microbatch_s - stage_compute(model, fp8, gpu).microbatch_s
    assert grown == pytest.approx(expected, rel=1e-9)


def test_which_layers_are_bf16_follows_megatron_layer_numbers_across_stages():
    """pp 4 over 118 layers: the first stage holds layers 0 and 1, the last stage layers 116 and 117; with 1 + 3
    BF16 layers only layer 0 and layers 115-117 are flagged, wherever their stage is."""
    model = load_model("nemotron-h-56b")
    lay = _layout(tp=8, pp=2, dp=2, num_layers_at_start_in_bf16=1, num_layers_at_end_in_bf16=3)
    flags, units = bf16_layers(model, lay), pipeline_units(model, lay)
    assert [sum(f) for f in flags] == [1, 3]
    layers_of_stage = [[u for u in us if u not in ("embedding", "logits")] for us in units]
    first = [f for u, f in zip(units[0], flags[0]) if u not in ("embedding", "logits")]
    last = [f for u, f in zip(units[-1], flags[-1]) if u not in ("embedding", "logits")]
    assert first[0] and not any(first[1:])
    assert last[-3:] == [True, True, True] and not any(last[:-3])
    assert sum(len(x) for x in layers_of_stage) == model.layers


def test_a_bf16_layout_or_none_leaves_the_step_unchanged():
    """Zero BF16 layers is the plain FP8 layout; a BF16 layout has no FP8 layer to keep in BF16 (and says so)."""
    model, gpu = load_model("nemotron-h-56b"), gpu_compute("H100")
    a = stage_compute(model, _layout(), gpu).microbatch_s
    assert stage_compute(model, _layout(num_layers_at_start_in_bf16=0), gpu).microbatch_s == a
    with pytest.raises(TopoError, match="num_layers_at_start_in_bf16: 2 BF16 layers need precision = fp8"):
        check_layout(model, _layout(precision="bf16", num_layers_at_start_in_bf16=2))


def test_bf16_layers_may_not_cover_the_model():
    model = load_model("nemotron-h-56b")
    with pytest.raises(TopoError, match=r"num_layers_at_start_in_bf16: 60 at the start \+ 58 at the end = 118 BF16 "
                                        r"layers leave none of the model's 118 in FP8; allowed: a sum of 0 to 117"):
        check_layout(model, _layout(num_layers_at_start_in_bf16=60, num_layers_at_end_in_bf16=58))
    with pytest.raises(TopoError, match="num_layers_at_end_in_bf16"):
        _layout(num_layers_at_end_in_bf16=-1)


def test_the_nemotron_h_hold_out_rows_run_the_performance_scripts_plugin():
    """benchmarks/training_accuracy.py gives the Nemotron-H 56B DGX Cloud rows the plugin their performance script
    runs, not the recipe's: NVIDIA/NeMo@7a8f1cc7 scripts/performance/utils.py set_primary_perf_configs (lines
    426-437) replaces nemotron_h_bf16_with_fp8_current_scaling_mixed by bf16_with_fp8_mixed for the parser's default
    --fp8_recipe "ds" (argument_parser.py lines 124-132; NVIDIA/dgxc-benchmarking@1f6d9f40 nemotronh/launch.sh
    passes none) with grad_reduce_in_fp32 False, which the plugin writes over the recipe's DDP config
    (megatron_strategy.py lines 421-423): per-tensor delayed scaling, no BF16 layers, FP8 weights gathered, bf16
    gradient reduction, no TP overlap (no performance mode). The Nemotron 3 Nano rows (Megatron-Bridge performance
    scripts: get_precision_config sets first_last_layers_bf16 False for fp8_cs, bf16_with_mxfp8_mixed never sets
    it) have no BF16 layers either."""
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    rows = {s["run"]: s["lay"] for s in published_setups()}
    h = [lay for run, lay in rows.items() if run.startswith("dgxc2505_h100_nemotronh")]
    nano = [lay for run, lay in rows.items() if "nemotron3_nano" in run]
    assert len(h) == 6 and nano
    assert all((x.num_layers_at_start_in_bf16, x.num_layers_at_end_in_bf16) == (0, 0) for x in h + nano)
    assert all(x.fp8_recipe in (None, "delayed") and not x.fp8_amax_pass for x in h)
    assert all(x.fp8_param_gather and x.grad_reduce_bytes == 2.0 and not x.overlap_tp for x in h)
