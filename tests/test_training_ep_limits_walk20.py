"""Expert parallelism past what a stage holds, and a busiest-rank load past what one EP rank can receive: one
``error:`` line with what is allowed (walk20, docs/calibration-findings.md, the walk of 2026-12-06d).

The load bound is counting: a token's top-k experts are distinct, a rank holds E / ep of them, so a token sends it
at most min(k, E / ep) rows against k / ep on average; the busiest rank carries at most ep min(k, E / ep) / k x the
mean. DeepSeek-V3 (256 experts, top-8: its model file): ep 8 -> 8 (every token's 8 copies on one rank), ep 64 -> 32
(4 local experts). Before this check ``moe_imbalance=100`` at ep 8 priced a 135 s step.
"""

from __future__ import annotations

from importlib.resources import files

import pytest

from conftest import run_cli
from topo.errors import TopoError
from topo.training.model import load_model
from topo.training.parallel import check_layout, make_layout

DSV3 = load_model("deepseek-v3-671b")


@pytest.mark.parametrize("ep, most", [(8, 8), (64, 32)])
def test_a_load_past_one_rank_s_share_is_refused(ep, most):
    check_layout(DSV3, make_layout(dp=64, ep=ep, etp=1, global_batch=64, moe_imbalance=most))  # the bound: allowed
    with pytest.raises(TopoError, match=f"allowed: 1 to {most}$") as exc:
        check_layout(DSV3, make_layout(dp=64, ep=ep, etp=1, global_batch=64, moe_imbalance=most + 0.5))
    assert exc.value.key == "moe_imbalance"


def test_one_local_expert_bounds_the_load_at_ep_over_k(tmp_path):
    """16 experts, top-2 (Mixtral 8x7B's file with 16 experts), ep 16: one expert a rank, a token sends it at most
    one of its two rows: 16 x 1 / 2 = 8."""
    text = (files("topo") / "data" / "models" / "mixtral-8x7b.toml").read_text()
    (tmp_path / "m16.toml").write_text(text.replace("\nexperts = 8\n", "\nexperts = 16\n"))
    coarse = load_model(str(tmp_path / "m16.toml"))
    assert coarse.moe.experts == 16
    with pytest.raises(TopoError, match=r"min\(top-k 2, 1 local expert\) .* allowed: 1 to 8$"):
        check_layout(coarse, make_layout(dp=16, ep=16, etp=1, global_batch=16, moe_imbalance=8.5))


def test_ep_past_the_stage_s_ranks_lists_what_fits():
    p = run_cli("train", "dgx-h100-superpod", "--model", "deepseek-v3-671b", "--gpus", "64", "--dp", "64",
                "--ep", "128", "--global-batch", "64")
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr.strip() == ("error: --ep: ep x etp = 128 x 1 does not divide the tp x cp x dp = 64 ranks of a "
                                "pipeline stage (experts are laid out over them); allowed at etp 1, the divisors of the "
                                "256 experts that do: ep 1, 2, 4, 8, 16, 32, 64")


def test_ep_list_says_it_keeps_only_the_experts_divisors():
    """walk35: 576 GB200 at pp 4 leave 144 ranks a stage; 48, 72 and 144 divide them but not Qwen3-235B's 128
    experts, so the list stops at 16 and the message says why (a user read 'allowed: 1..16' as a bug)."""
    p = run_cli("train", "gb200-nvl72-superpod", "--model", "qwen3-235b-a22b", "--gpus", "576", "--pp", "4",
                "--dp", "144", "--ep", "64", "--etp", "1", "--global-batch", "1152")
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr.strip() == ("error: --ep: ep x etp = 64 x 1 does not divide the tp x cp x dp = 144 ranks of a "
                                "pipeline stage (experts are laid out over them); allowed at etp 1, the divisors of the "
                                "128 experts that do: ep 1, 2, 4, 8, 16")
