"""ux107 (docs/calibration-findings.md section 419): four things walk40 (section 416, Left 1-4) left in
``topo train``'s TP output.

1. The MoE router's tokens-per-expert all-reduce printed unlabelled: Megatron-Core's
   ``get_tokens_per_expert_and_token_count`` reduces ``routing_map.sum(dim=0)`` (NVIDIA/Megatron-LM@d98e8a64dd
   megatron/core/transformer/moe/moe_utils.py), now ``router: tokens per expert``.
2. The vocabulary-parallel loss's collectives carried one label: each now says what it reduces, as the source at
   ``cross_entropy.toml``'s ``tp_source`` names it (Megatron-Core's fused loss, NVIDIA/Megatron-LM@7094270c
   megatron/core/fusions/fused_cross_entropy.py lines 94 and 112: ``logits_max`` (MAX), then
   ``torch.cat((predicted_logits, sum_exp_logits))`` (SUM); the unfused one, tensor_parallel/cross_entropy.py
   lines 130, 148, 154: the three apart; Transformer Engine's, NVIDIA/TransformerEngine@d0067d0da
   transformer_engine/pytorch/triton/cross_entropy.py lines 47, 82-85 and common/triton/cross_entropy.py 56-82: one
   all-gather of each shard's max ``m``, sum of exponentials ``d`` and target logit ``X_y``).
3. ``--overlap`` takes a comma-separated list (``tp=on,dp=off``) as well as the flag repeated.
4. Where userbuffers TP overlap costs more than it hides (walk40: Llama 3 405B MXFP8 TP2 on GB200), a note says so
   from the same step priced without ``overlap_tp``; ``--json`` carries both steps' terms (``tp_overlap_trade``).
"""

import json

import pytest

import topo
import topo.training.cross_entropy as ce
from conftest import run_cli
from topo.training.model import load_model
from topo.training.parallel import make_layout
from topo.training.step import ROUTER_PHASE, ROUTER_WHAT, estimate_step, step_traffic
from topo.training.tp_overlap_trade import tp_overlap_trade

FP32_BYTES = 4
GB200 = ("gb200-nvl72-superpod", "--model", "llama3-405b", "--gpus", "512", "--tp", "2", "--pp", "8", "--vpp", "2",
         "--global-batch", "256", "--seq", "8192", "--precision", "fp8", "--recompute", "full", "--layout",
         "fp8_recipe=mxfp8")


@pytest.fixture(scope="module")
def gb200():
    return topo.build_fabric(topo.load_spec("gb200-nvl72-superpod"))


def _ds_tp2(**kw):
    """Section 416 Left 1's DeepSeek-V3 layout (TP2, sequence parallel, EP64)."""
    return make_layout(**{"tp": 2, "pp": 4, "vpp": 4, "dp": 32, "ep": 64, "etp": 1, "global_batch": 4096,
                          "precision": "fp8", **kw})


def test_every_tp_row_of_a_sequence_parallel_step_is_labelled_apart(gb200):
    """Left 1 and 2 together: DeepSeek-V3 TP2 (router aux loss, MTP, fused loss) has no TP row without a label and
    no two TP rows of one collective and pass with the same one."""
    r = estimate_step(gb200, load_model("deepseek-v3-671b"), _ds_tp2(), check=False)
    rows = [(c.collective, c.phase, c.what) for c in r.comm if c.dim == "tp"]
    assert all(w for _, _, w in rows)
    assert len(set(rows)) == len(rows)
    (router,) = [c for c in r.comm if c.what == ROUTER_WHAT]
    assert (router.dim, router.collective, router.size_bytes) == ("tp", "all_reduce", 256 * 8)  # int64 counts


def test_the_router_item_carries_its_label():
    ds = load_model("deepseek-v3-671b")
    items = [it for it in step_traffic(ds, _ds_tp2()) if it["phase"] == ROUTER_PHASE]
    assert [it.get("what") for it in items] == [ROUTER_WHAT] == ["router: tokens per expert"]


@pytest.mark.parametrize("impl, expected", [
    # Megatron-Core's fused loss: the max (MAX), then the target logit and the sum of exponentials in one call
    ("fused", [("all_reduce", 1, "max logit"), ("all_reduce", 2, "target logit and sum of exponentials")]),
    # the unfused one: three calls of one value a token
    ("megatron_unfused", [("all_reduce", 1, "max logit"), ("all_reduce", 1, "target logit"),
                          ("all_reduce", 1, "sum of exponentials")]),
    # Transformer Engine's: one all-gather of three values a token from each of the tp ranks
    ("te", [("all_gather", 3, "max logit, sum of exponentials and target logit")]),
    ("torch_bf16", []),
])
def test_each_loss_collective_says_what_it_reduces(impl, expected):
    m, tp, mb, seq = load_model("llama3-8b"), 4, 2, 8192
    lay = make_layout(tp=tp, dp=1, global_batch=2, micro_batch=mb, seq_len=seq, cross_entropy=impl)
    items = [it for it in step_traffic(m, lay) if it.get("what", "").startswith("head: loss, ")]
    got = [(it["collective"], it["size_bytes"], it["what"]) for it in items]
    assert got == [(c, mb * seq * v * FP32_BYTES * (tp if c == "all_gather" else 1), f"head: loss, {w}")
                   for c, v, w in expected]


def test_a_loss_entry_with_labels_not_one_a_call_is_refused(monkeypatch):
    bad = {"fused": {**ce._table()["fused"], "tp_carries": ["max logit"]}}
    monkeypatch.setattr(ce, "_table", lambda: bad)
    with pytest.raises(ValueError, match=r"\[impl.fused\]: tp_carries has 1 entries, tp_values_per_token 2"):
        ce.cross_entropy_tp("fused")


def test_overlap_takes_a_comma_separated_list():
    base = ("train", "dgx-h100-superpod", "--model", "llama3-8b", "--gpus", "16", "--tp", "4", "--global-batch",
            "8", "--json")
    listed = json.loads(run_cli(*base, "--overlap", "tp=on,dp=off", check=True).stdout)
    repeated = json.loads(run_cli(*base, "--overlap", "tp=on", "--overlap", "dp=off", check=True).stdout)
    assert (listed["overlap"], listed["step_time_s"]) == (repeated["overlap"], repeated["step_time_s"])
    assert listed["layout"]["overlap_tp"] is True and listed["layout"]["overlap_dp"] is False
    plain = json.loads(run_cli(*base, check=True).stdout)
    assert plain["layout"]["overlap_tp"] is False and plain["layout"]["overlap_dp"] is True


@pytest.mark.parametrize("value, named", [("tp=on,dp=maybe", "'dp=maybe' in 'tp=on,dp=maybe'"),
                                          ("tp=on,", "'' in 'tp=on,'"), ("tp", "'tp';")])
def test_a_bad_overlap_item_is_one_line_naming_it(value, named):
    out = run_cli("train", "dgx-h100-superpod", "--model", "llama3-8b", "--gpus", "16", "--tp", "4",
                  "--global-batch", "8", "--overlap", value)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert out.stderr.startswith(f"error: --overlap: cannot read {named}")
    assert "DIM=on or DIM=off" in out.stderr and len(out.stderr.strip().splitlines()) == 1


def _gb200_lay(**kw):
    return make_layout(**{"tp": 2, "pp": 8, "vpp": 2, "dp": 32, "global_batch": 256, "seq_len": 8192,
                          "precision": "fp8", "fp8_recipe": "mxfp8", "recompute": "full", **kw})


def test_tp2_overlap_on_gb200_costs_more_than_it_hides(gb200, monkeypatch):
    """walk40's case: TP2's exchanges are short beside their GEMMs on NVLink 5, and te_default's 16-SM margins
    slow six TP GEMM passes by more than the exchanges hid."""
    m = load_model("llama3-405b")
    on = estimate_step(gb200, m, _gb200_lay(overlap_tp=True))
    off = estimate_step(gb200, m, _gb200_lay())
    trade = tp_overlap_trade(gb200, m, _gb200_lay(overlap_tp=True), on)
    assert trade.step_s == on.step_time_s and trade.step_without_s == off.step_time_s
    assert (trade.tp_s, trade.tp_without_s) == (on.breakdown_s["tp"], off.breakdown_s["tp"])
    assert trade.costs_more and trade.tp_without_s > trade.tp_s  # it hides TP, and the step is slower all the same
    # what the compute grew by is the margins' and TE 2.x's copy of each row-parallel layer's FP8 output-gradient
    # shard into the buffer (section 429): with a configuration of none (te_default_v1) and the copy left out, the
    # TP GEMMs run as without overlap; with the copy, slower
    none = estimate_step(gb200, m, _gb200_lay(overlap_tp=True, tp_overlap_config="te_default_v1"))
    assert none.breakdown_s["compute"] > trade.compute_without_s
    monkeypatch.setattr("topo.training.operators.ub_grad_output_copy_bytes", lambda *_: 0.0)
    bare = estimate_step(gb200, m, _gb200_lay(overlap_tp=True, tp_overlap_config="te_default_v1", te_version="2.1"))
    assert bare.breakdown_s["compute"] == pytest.approx(trade.compute_without_s, rel=1e-12)
    assert trade.compute_s > trade.compute_without_s
    note = trade.note()
    assert note.startswith("TP overlap costs more than it hides here") and "overlap_tp=true" in note
    assert "--" not in note and "te_default" in note  # the library names fields, never a flag
    d = trade.to_dict()
    assert d["costs_more"] is True and d["step_without_s"] == off.step_time_s
    assert all(k.endswith("_s") for k in d if k not in ("tp_overlap_config", "costs_more"))


def test_no_note_where_overlap_pays_and_no_trade_without_userbuffers():
    f = topo.build_fabric(topo.load_spec("dgx-h100-superpod"))
    m = load_model("llama3-70b")
    lay = make_layout(tp=8, pp=4, dp=2, global_batch=128, seq_len=8192, overlap_tp=True)
    trade = tp_overlap_trade(f, m, lay, estimate_step(f, m, lay))
    assert not trade.costs_more and trade.note() is None and trade.step_s < trade.step_without_s
    off = lay.model_copy(update={"overlap_tp": False})
    assert tp_overlap_trade(f, m, off, estimate_step(f, m, off)) is None  # not asked for: nothing priced twice
    nosp = lay.model_copy(update={"sequence_parallel": False})
    assert tp_overlap_trade(f, m, nosp, estimate_step(f, m, nosp)) is None  # userbuffers need SP (walk40)


def test_the_cli_prints_the_note_by_its_flag_and_json_carries_the_trade():
    text = run_cli("train", *GB200, "--overlap", "tp=on", check=True).stdout
    (line,) = [ln for ln in text.splitlines() if "costs more than it hides" in ln]
    assert line.startswith("note: TP overlap costs more than it hides here") and "with --overlap tp=on" in line
    d = json.loads(run_cli("train", *GB200, "--overlap", "tp=on", "--json", check=True).stdout)
    t = d["tp_overlap_trade"]
    assert t["costs_more"] is True and t["step_s"] == d["step_time_s"] > t["step_without_s"]
    assert any(n.startswith("TP overlap costs more") for n in d["notes"])
    off = json.loads(run_cli("train", *GB200, "--json", check=True).stdout)
    assert "tp_overlap_trade" not in off and off["step_time_s"] == pytest.approx(t["step_without_s"], rel=1e-12)
