"""Review of the session's first wave (rev102, issue 29, findings section 430): what the mutation check found the
tests did not hold for the once-a-step FP8 weight cast (section 424) — its layers kept in BF16, and the step line
as a user meets it in ``topo train`` text and JSON, the timeline and ``topo report --train``'s figures.

Sources: Megatron-Core runs a layer of ``num_layers_at_start_in_bf16`` / ``num_layers_at_end_in_bf16`` outside the
FP8 autocast (NVIDIA/Megatron-LM ``megatron/core/fp8_utils.py`` @f7a3dcc4 ``get_fp8_context``), so Transformer
Engine's linear layers there quantise nothing (NVIDIA/TransformerEngine@bee4649c ``pytorch/module/linear.py`` lines
183-202: the weight workspace is made only under FP8); the cast is once a step, in the first micro-batch's forward
(Megatron-Core core_v0.12.0 ``extensions/transformer_engine.py`` lines 251-255: ``is_first_microbatch``).
"""

import json

import pytest

import topo
from conftest import run_cli
from topo.report.train_figures import step_breakdown_figure, timeline_figure
from topo.training.fp8_weight_cast import weight_cast_params
from topo.training.model import load_model
from topo.training.parallel import make_layout
from topo.training.result import BREAKDOWN_KEYS
from topo.training.step import estimate_step
from topo.units import format_time

# Llama 2 70B at TP 4, PP 4: 20 layers a GPU; a layer's linear weights h (h + 2 kv) + h^2 + 3 h ffn, a quarter a
# TP rank (the closed form of tests/test_training_fp8_weight_cast.py)
H, KV, FFN, TP = 8192, 8 * 128, 28672, 4
LAYER = (H * (H + 2 * KV) + H * H + 3 * H * FFN) / TP

FP8 = ["--layout", "tp=8,pp=4,dp=32,global_batch=256,precision=fp8"]
BF16 = ["--layout", "tp=8,pp=4,dp=32,global_batch=256"]


def test_layers_kept_in_bf16_cast_no_weight():
    """Two layers kept in BF16 at each end: the first and the last stage each cast 18 of their 20 layers' linear
    weights, the two middle stages all 20: the step waits for every stage's cast (76 layers')."""
    lay = make_layout(tp=4, pp=4, dp=4, global_batch=128, seq_len=4096, precision="fp8", sequence_parallel=True,
                      num_layers_at_start_in_bf16=2, num_layers_at_end_in_bf16=2)
    assert weight_cast_params(load_model("llama2-70b"), lay) == pytest.approx((18 + 20 + 20 + 18) * LAYER, rel=1e-9)


@pytest.fixture(scope="module")
def fp8_step():
    """Llama 3 70B, FP8 (delayed scaling, BF16 weights) on H100: the cast runs."""
    fab = topo.build_fabric(topo.load_spec("dgx-h100-superpod"))
    r = estimate_step(fab, load_model("llama3-70b"), make_layout(tp=8, pp=4, dp=32, global_batch=256,
                                                                precision="fp8"))
    assert r.breakdown_s["fp8_weight_cast"] > 0
    return r


def test_the_breakdown_keys_are_the_steps_lines(fp8_step):
    """``BREAKDOWN_KEYS`` (what the report draws) is every line the step adds up."""
    assert tuple(fp8_step.breakdown_s) == BREAKDOWN_KEYS
    assert sum(fp8_step.breakdown_s.values()) == pytest.approx(fp8_step.step_time_s, rel=1e-12)


def test_the_report_draws_the_cast_and_its_bars_add_up_to_the_step(fp8_step):
    fig = step_breakdown_figure([fp8_step])
    bars = {t.name: t.x[0] for t in fig.data}
    assert bars["fp8_weight_cast"] == fp8_step.breakdown_s["fp8_weight_cast"]
    assert sum(bars.values()) == pytest.approx(fp8_step.step_time_s, rel=1e-12)


def test_a_bf16_reports_step_figure_has_no_fp8_bars():
    """A BF16 job's step figure draws neither FP8 line (each 0 there), as ``topo train``'s table shows neither; its
    bars still add up to the step."""
    fab = topo.build_fabric(topo.load_spec("dgx-h100-superpod"))
    r = estimate_step(fab, load_model("llama3-70b"), make_layout(tp=8, pp=4, dp=32, global_batch=256))
    fig = step_breakdown_figure([r])
    names = {t.name for t in fig.data}
    assert names == set(BREAKDOWN_KEYS) - {"fp8_amax", "fp8_weight_cast"}
    assert sum(t.x[0] for t in fig.data) == pytest.approx(r.step_time_s, rel=1e-12)


def test_the_timeline_has_the_cast_once_before_the_first_forward(fp8_step):
    """One exposed segment on the ``fp8_weight_cast`` lane, its length the step's line, after the warm-up half of
    the bubble and before the first forward; the segments still end at the step."""
    segs = fp8_step.timeline
    cast = [s for s in segs if s["lane"] == "fp8_weight_cast"]
    assert len(cast) == 1 and cast[0]["exposed"]
    assert cast[0]["end_s"] - cast[0]["start_s"] == pytest.approx(fp8_step.breakdown_s["fp8_weight_cast"], rel=1e-12)
    assert cast[0]["start_s"] == pytest.approx(fp8_step.breakdown_s["bubble"] / 2, rel=1e-12)
    first_forward = min(s["start_s"] for s in segs if s["lane"] == "compute")
    assert first_forward == pytest.approx(cast[0]["end_s"], rel=1e-12)
    assert max(s["end_s"] for s in segs) == pytest.approx(fp8_step.step_time_s, rel=1e-12)
    assert "fp8_weight_cast" in {t.y[0] for t in timeline_figure(fp8_step).data}


def _table_rows(text: str) -> dict:
    """The step's component table of ``topo train``'s text: component -> its time column."""
    lines = text.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.split()[:3] == ["component", "time", "share"])
    rows = {}
    for ln in lines[start + 1:]:
        if not ln.strip() or ln.startswith("components add up"):
            break
        name, rest = ln.split(None, 1)
        rows[name] = rest.rsplit(None, 1)[0].strip()
    return rows


def test_topo_train_text_and_json_show_the_cast_for_fp8_only():
    """FP8: the text has the line at the JSON's figure, and its legend; BF16: no line, no legend (the JSON keeps
    the key at 0, as its contract keeps ``fp8_amax``)."""
    base = ["train", "dgx-h100-superpod", "--model", "llama3-70b"]
    fp8_json = json.loads(run_cli(*base, *FP8, "--json", check=True).stdout)
    fp8_text = run_cli(*base, *FP8, check=True).stdout
    rows = _table_rows(fp8_text)
    assert rows["fp8_weight_cast"] == format_time(fp8_json["breakdown_s"]["fp8_weight_cast"])
    assert "fp8_weight_cast = Transformer Engine's FP8 cast of the BF16 linear weights" in fp8_text
    assert sum(fp8_json["breakdown_s"].values()) == pytest.approx(fp8_json["step_time_s"], rel=1e-12)
    bf16_json = json.loads(run_cli(*base, *BF16, "--json", check=True).stdout)
    bf16_text = run_cli(*base, *BF16, check=True).stdout
    assert bf16_json["breakdown_s"]["fp8_weight_cast"] == 0.0
    assert "fp8_weight_cast" not in _table_rows(bf16_text) and "fp8_weight_cast" not in bf16_text


def test_a_dropless_experts_cast_memsets_even_where_its_mean_count_is_whole_tiles():
    """Section 427: a dropless expert's rows are a run-time token count (``m_sd`` > 0), a multiple of 128 only by
    chance, so its MXFP8 cast zeroes both scale buffers even where the mean count, ``m``, is 16 x 128
    (``mxfp8_weight_swizzle.toml`` ``[cast_memset]``; TE ``quantize_mxfp8.cuh`` ``rows % 128 != 0``); a static count
    of whole tiles memsets nothing."""
    from dataclasses import replace

    from topo.training.operators import block_ops
    from topo.training.weight_swizzle import cast_memsets
    lay = make_layout(ep=8, dp=8, global_batch=64, seq_len=4096, etp=1, precision="fp8", fp8_recipe="mxfp8")
    fc1 = {op.name: op for op in block_ops(load_model("qwen3-30b-a3b"), lay, "E")}["fc1"]
    assert fc1.m_sd > 0 and fc1.k % 128 == 0 and fc1.n % 128 == 0
    whole = replace(fc1, m=2048.0)
    assert cast_memsets(whole, "fp8") == cast_memsets(whole, "fp8", True) == 2
    assert cast_memsets(replace(whole, m_sd=0.0), "fp8") == cast_memsets(replace(whole, m_sd=0.0), "fp8", True) == 0
