"""``benchmarks/layout_pairs.py``: the pair table of issue 29 (how topo prices one layout against another for the
same model, release, GPU and precision). Closed forms: a pair's error is ``(1 + e_B) / (1 + e_A) - 1`` of its
rows' errors, so a factor common to both rows (a fitted GEMM fraction) leaves it unmoved."""

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import layout_pairs as lp  # noqa: E402

FSDP = (1, 1, 1, 1, 1, 2, "zero3")
PP4 = (2, 1, 4, 5, 1, 1, "zero1")


def _row(run, sh, measured, topo, recipe="current", lofo=None, holdout=False, system="DGX-GB200",
         model="llama3-70b", precision="fp8"):
    return dict(run=run, model=model, system=system, precision=precision, recipe=recipe, shape=sh,
                measured_s=measured, topo_s=topo, lofo_s=lofo, holdout=holdout)


def test_a_pair_error_is_the_quotient_of_its_rows_errors():
    a = _row("mb260401_gb200_llama3_70b", FSDP, 7.758, 7.698, lofo=7.89)
    b = _row("mb260401_gb200_llama3_70b_tp2", PP4, 8.828, 9.014, lofo=9.23)
    (p,) = lp.layout_pairs([a, b])
    e_a, e_b = 7.698 / 7.758 - 1, 9.014 / 8.828 - 1
    assert p["measured"] == pytest.approx(8.828 / 7.758)
    assert p["topo"] == pytest.approx(9.014 / 7.698)
    assert p["error"] == pytest.approx((1 + e_b) / (1 + e_a) - 1)
    assert p["error_lofo"] == pytest.approx((9.23 / 7.89) / (8.828 / 7.758) - 1)
    # a factor on both rows' predictions (a refitted GEMM fraction) leaves the pair's error unmoved
    (q,) = lp.layout_pairs([dict(a, topo_s=a["topo_s"] * 1.1), dict(b, topo_s=b["topo_s"] * 1.1)])
    assert q["error"] == pytest.approx(p["error"])


def test_pairs_stay_inside_model_release_system_and_recipe():
    rows = [_row("mb2602_gb200_llama3_70b", FSDP, 8.1, 7.7),
            _row("mb2604_gb200_llama3_70b_x", PP4, 8.6, 9.0),  # another release
            _row("mb2602_h100_llama3_70b", PP4, 20.2, 20.7, system="DGX-H100"),  # another system
            _row("mb2602_gb200_llama3_70b_mxfp8", PP4, 9.07, 9.01, recipe="mxfp8"),  # another recipe
            _row("mb2602_gb200_llama31_405b", PP4, 62.0, 62.2, model="llama3-405b")]  # another model
    assert lp.layout_pairs(rows) == []
    (p,) = lp.layout_pairs(rows, cross_recipe=True)  # FSDP CS against PP4 MXFP8, one release and system
    assert (p["a"]["run"], p["b"]["run"]) == ("mb2602_gb200_llama3_70b", "mb2602_gb200_llama3_70b_mxfp8")


def test_scale_pairs_are_not_layout_pairs_and_a_holdout_row_marks_its_pair():
    rows = [_row("nemo2504dgxc_gb200_a_128", PP4, 1.48, 1.45), _row("nemo2504dgxc_gb200_a_256", PP4, 1.52, 1.44),
            _row("nemo2504dgxc_gb200_a_fsdp", FSDP, 1.30, 1.30, holdout=True)]
    pairs = lp.layout_pairs(rows)
    assert len(pairs) == 2 and all(p["holdout"] for p in pairs)  # the two PP4 rows differ only in scale
    assert "0 fitted pairs" not in lp.summary(pairs) and "2 hold-out pairs" in lp.summary(pairs)


def test_a_layout_shape_ignores_scale_only():
    from topo.training.parallel import make_layout

    a = make_layout(tp=2, pp=4, vpp=5, dp=8, global_batch=256, seq_len=8192, micro_batch=1)
    b = make_layout(tp=2, pp=4, vpp=5, dp=16, global_batch=512, seq_len=8192, micro_batch=1)
    c = make_layout(tp=2, pp=4, vpp=5, dp=8, global_batch=256, seq_len=8192, micro_batch=2)
    assert lp.shape(a) == lp.shape(b) != lp.shape(c)
    assert lp.release("mb260401_gb300_llama3_70b_mxfp8") == "mb260401"
