"""HybridEP's static per-rank budget (Megatron-Core's ``moe_expert_rank_capacity_factor``), what lets Megatron-Bridge's
full-iteration MXFP8 MoE recipes (26.06 on) graph a dropless MoE block.

The source's rule (NVIDIA/Megatron-LM@d98e8a64 ``megatron/core/transformer/moe/token_dispatcher.py``
``_HybridEPManager.setup_metadata``): ``budget = int(tokens x top-k x factor)`` rows per expert rank, ``tokens`` the
rank's own tokens entering the block; HybridEP sizes its receive buffer to it on the host (no device-to-host count,
docs/user-guide/features/paged_stash.md: "sync-free"), moves and computes the rows actually routed (the fused
grouped MLP takes the device-side ``tokens_per_expert``, experts.py ``_fused_forward``), and drops the rows beyond
the budget (``over_budget``; the runner then reruns the step unpadded: not priced). Megatron-Bridge sets 1.5
(v0.5.0 scripts/performance/configs/qwen/qwen3_llm_pretrain.py:53 ``set_full_iter_cg_configs``; deepseek_llm_pretrain.py:59;
gpt_oss_llm_pretrain.py:50)."""

import pytest

from conftest import run_cli
import topo
from topo.training.model import load_model
from topo.training.operators import busiest_rank_load, expert_rows, host_syncs
from topo.training.parallel import make_layout
from topo.training.step import estimate_step


@pytest.fixture(scope="module")
def qwen():
    return load_model("qwen3-30b-a3b")  # 128 experts, top-8 (arXiv 2505.09388)


def _lay(**kw):
    base = dict(ep=8, dp=8, etp=1, micro_batch=1, global_batch=64, seq_len=4096, precision="fp8",
                ep_dispatcher="deepep", ep_flex_backend="hybridep")
    return make_layout(**{**base, **kw})


def test_the_busiest_rank_holds_at_most_the_budget(qwen):
    # one rank's 4,096 tokens x top-8 = 32,768 routed rows; 8 ranks receive 32,768 on average (etp 1).
    # budget at factor 1.5: int(4,096 x 8 x 1.5) = 49,152 rows = 1.5 x the mean, so a load of 2.0 is cut to 1.5
    tokens, k = 4096, 8
    budget = int(tokens * k * 1.5)
    lay = _lay(moe_imbalance=2.0, moe_expert_rank_capacity_factor=1.5)
    assert busiest_rank_load(qwen, lay) == pytest.approx(budget / (tokens * k))
    local = 128 // 8
    assert expert_rows(qwen, lay) * local == pytest.approx(budget)
    # a load under the budget is the routed load itself (no padding rows are computed)
    assert busiest_rank_load(qwen, _lay(moe_imbalance=1.2, moe_expert_rank_capacity_factor=1.5)) == 1.2
    assert busiest_rank_load(qwen, _lay(moe_imbalance=2.0)) == 2.0


@pytest.fixture(scope="module")
def gb200():
    return topo.build_fabric(topo.load_spec("gb200-nvl72-superpod", ["cluster.num_units=1"]))


def test_the_budget_removes_the_host_sync_without_a_graph():
    assert host_syncs(_lay()) and not host_syncs(_lay(moe_expert_rank_capacity_factor=1.5))


def test_full_iteration_without_a_budget_is_noted(qwen, gb200):
    note = "full_iteration with dropless routing"
    bare = estimate_step(gb200, qwen, _lay(cuda_graph_scope=("full_iteration",)))
    assert any(note in n for n in bare.notes)
    padded = estimate_step(gb200, qwen, _lay(cuda_graph_scope=("full_iteration",),
                                                 moe_expert_rank_capacity_factor=1.5))
    assert not any(note in n for n in padded.notes)


MOE = ["train", "gb200-nvl72-superpod", "--model", "qwen3-30b-a3b", "--ep", "8", "--dp", "8", "--global-batch", "64"]


@pytest.mark.parametrize("pair, line", [
    ("moe_expert_rank_capacity_factor=1.5",
     "error: --layout: moe_expert_rank_capacity_factor: 1.5 is HybridEP's static rank budget, got dispatcher "
     "alltoall; allowed with it: none (or set ep_dispatcher=deepep, ep_flex_backend=hybridep)"),
    ("ep_dispatcher=deepep,ep_flex_backend=hybridep,moe_capacity_factor=1.0,moe_expert_rank_capacity_factor=1.5",
     "error: --layout: moe_expert_rank_capacity_factor: 1.5 budgets dropless routing, but moe_capacity_factor 1.0 "
     "pads every expert already; allowed with it: none"),
])
def test_a_budget_that_cannot_apply_is_one_line(pair, line):
    r = run_cli(*MOE, "--layout", pair)
    assert r.returncode == 2 and r.stderr.strip() == line and "Traceback" not in r.stderr


def test_a_budget_below_one_is_one_line():
    r = run_cli(*MOE, "--layout", "ep_dispatcher=deepep,moe_expert_rank_capacity_factor=0.5")
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and "moe_expert_rank_capacity_factor" in lines[0]
    assert "0.5" in lines[0] and "Traceback" not in r.stderr


def test_a_sync_free_host_bound_step_is_no_slower_than_the_synced_one(qwen, gb200):
    """Without a graph, Qwen3-30B on 8 GB200 is host-bound (Grace launches slower than the GPU runs). The synced
    dropless layer lets its forward all-to-alls run while the host launches on; a sync-free one (the rank budget)
    runs ahead of the GPU across the whole pass, so the same all-to-alls cover its launches too. Before, the
    sync-free branch compared the host with compute alone and then added the all-to-alls again (pad47's finding):
    6.244 s against the synced 6.143 s."""
    synced = estimate_step(gb200, qwen, _lay())
    free = estimate_step(gb200, qwen, _lay(moe_expert_rank_capacity_factor=1.5))
    assert free.compute_by_module_s.get("host", 0.0) > 0  # host-bound: the GPU waits for launches
    assert free.step_time_s <= synced.step_time_s


@pytest.mark.parametrize("etp, why", [
    (1, "nor does Megatron-Core's flex dispatcher run at ep x etp = 1"),
    (2, "Megatron-Core's flex dispatcher runs over the etp group at etp 2; topo does not model its buffer there"),
])
def test_a_budget_without_an_expert_parallel_group_is_one_line(etp, why):
    """rev47: at ep 1 topo prices no HybridEP exchange whose receive buffer the budget sizes, yet the budget removed
    the host sync (Qwen3-30B on 8 H100: 6.938 -> 6.882 s); it is refused instead. rev48 (b): the refusal is topo's
    limit, not Megatron's: with etp > 1 Megatron-Core's flex dispatcher runs over the etp group (its
    MoEFlexTokenDispatcher needs only tp x ep > 1, its tp the experts' TP group), and the line says so."""
    r = run_cli("train", "gb200-nvl72-superpod", "--model", "qwen3-30b-a3b", "--ep", "1", "--dp", "8",
                "--global-batch", "64", "--layout",
                f"etp={etp},ep_dispatcher=deepep,ep_flex_backend=hybridep,moe_expert_rank_capacity_factor=1.5")
    assert r.returncode == 2 and r.stderr.strip() == (
        "error: --layout: moe_expert_rank_capacity_factor: 1.5 budgets each expert rank's HybridEP receive buffer, "
        f"but at ep 1 topo prices no expert-parallel exchange ({why}); allowed with ep 1: none")


def test_the_flex_dispatcher_without_an_expert_group_is_one_line():
    """rev48: Megatron-Core's MoEFlexTokenDispatcher asserts ``tp_size * ep_size > 1`` ("Flex token dispatcher
    requires TPxEP > 1", megatron/core/transformer/moe/token_dispatcher.py, every release with the flex dispatcher;
    its tp is the experts' TP group), yet topo priced deepep at ep 1, etp 1 (Qwen3-30B on 8 H100, dp 8: 6.938 s
    against the all-to-all dispatcher's 6.931 s). At etp 2 the dispatcher has a group and runs."""
    r = run_cli("train", "dgx-h100-superpod", "--model", "qwen3-30b-a3b", "--gpus", "8", "--layout",
                "dp=8,ep=1,global_batch=64,ep_dispatcher=deepep,ep_flex_backend=hybridep")
    assert r.returncode == 2 and r.stderr.strip() == (
        "error: --layout: ep_dispatcher: deepep is Megatron-Core's flex dispatcher, which needs ep x etp > 1 "
        "('Flex token dispatcher requires TPxEP > 1'), got ep 1, etp 1; allowed with them: alltoall")
    run_cli("train", "dgx-h100-superpod", "--model", "qwen3-30b-a3b", "--gpus", "8", "--layout",
            "tp=2,etp=2,dp=4,ep=1,global_batch=64,ep_dispatcher=deepep", check=True)
    # a dense model keeps the options line's 'no effect' mark (test_training_cli_options.py)
    run_cli("train", "dgx-h100-superpod", "--model", "llama3-8b", "--gpus", "8", "--layout",
            "dp=8,global_batch=8,ep_dispatcher=deepep", check=True)
