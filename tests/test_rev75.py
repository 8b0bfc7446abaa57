"""rev75: tests for behaviours this session's branches added that a mutation of the code left passing (findings
section 364): each test below failed with the mutation named in its docstring."""

import numpy as np
import pytest

import topo
from topo.engine.algorithms.across_sites import Phase
from topo.fabric.region import build_region
from topo.training import step
from topo.training.dp_across import DpCrossing, pick_dp_crossing
from topo.training.gpus import gpu_compute
from topo.training.model import Block, load_model
from topo.training.operators import rank_computes_at
from topo.training.parallel import ParallelLayout, check_layout, make_layout
from topo.training.unit_params import tp_replicated_params


def test_auto_picks_the_form_faster_with_its_gradient_norm():
    """regions75: ``auto`` compares each form's phase and its gradient norm's crossing (``DpCrossing.time_s``); a
    flat ring 0.1 s faster in its phase but paying a 0.2 s norm loses to the hierarchical reduction. Mutation
    ``key=f.phase.time_s`` picked the ring."""
    region = build_region("two-site-h100")
    assert region.spec.nccl.dp_reduction == "auto"
    h = DpCrossing("hierarchical", Phase(0.0, 1.0, "x"), np.zeros(2), 1.0, 2, None, 0.0)
    r = DpCrossing("flat_ring", Phase(0.0, 0.9, "x"), np.zeros(2), 1.0, 2, None, 0.0, norm_s=0.2)
    assert pick_dp_crossing(region, {"hierarchical": h, "flat_ring": r}) is h
    assert pick_dp_crossing(region, {"hierarchical": h, "flat_ring": DpCrossing(
        "flat_ring", Phase(0.0, 0.9, "x"), np.zeros(2), 1.0, 2, None, 0.0, norm_s=0.05)}).name == "flat_ring"


def test_overlap_pp_at_pp_1_is_not_refused():
    """tidy76's refusal is Megatron-Core's non-interleaved pipeline schedule's (schedules.py@d98e8a64 lines
    2181-2184); pp 1 runs forward_backward_no_pipelining, which has no such check, and no p2p to overlap. Mutation
    dropping ``pp > 1`` refused it."""
    check_layout(load_model("llama3-8b"), make_layout(tp=8, dp=2, global_batch=16, overlap_pp=True), gpus=16)


def test_build_days_is_the_inverse_of_the_pace():
    """tidy76: ``gpus / pace x days a quarter``; at xAI Colossus' 100,000 GPUs in 122 days, 64 GPUs take
    64 x 122 / 100,000 days (the quarter's length cancels). Mutation ``x 91`` for the quarter's days passed the
    CLI test (its 2-significant-figure print)."""
    from topo.plan.phasing import build_days, ramp_gpus_per_quarter
    assert build_days(64, ramp_gpus_per_quarter(100_000, 122)) == pytest.approx(64 * 122 / 100_000, rel=1e-12)


def test_a_cluster_larger_than_the_paced_build_is_not_called_smaller(capsys):
    """tidy76's 'a pace published for a N-GPU build' is said only of a cluster below N. Mutation always saying it
    passed."""
    from topo.cli.main import main
    assert main(["plan", "dgx-h100-superpod", "--set", "plan.deployment.ramp_gpus=100", "--no-collectives"]) == 0
    line = next(ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("deployment:"))
    assert "its " in line and "a pace published for" not in line, line


def _counts(model, lay, stage):
    return step._stage_counts(model, lay, stage)


def test_replicated_params_count_mamba_blocks_and_mtp_norms():
    """tidy76's ``tp_replicated_params`` under sequence parallelism: a norm of ``h`` per block, Mamba's included
    as tidy76's docstring gives it (every block's norm, Mamba's
    included), the final norm on the output stage, and an MTP depth's three norms; the sources are tidy76's (its
    docstring), these closed forms are its rule. Mutations dropping Block.MAMBA and 3h -> 2h
    passed."""
    m = load_model("nemotron-h-56b")
    lay = make_layout(tp=2, pp=2, dp=4, global_batch=64, sequence_parallel=True)
    c = _counts(m, lay, 0)
    assert c.get(Block.MAMBA, 0) > 0
    blocks = sum(c.get(k, 0) for k in (Block.ATTENTION, Block.MLP, Block.MOE, Block.MAMBA))
    assert tp_replicated_params(m, c, True) == m.hidden * blocks
    d = load_model("deepseek-v3-671b")
    c = {"mtp_head": 1}
    assert tp_replicated_params(d, c, True) == 3 * d.hidden


def test_qk_norms_are_replicated_with_or_without_sequence_parallelism():
    """tidy76: without MLA, ``qk_layernorm``'s query and key norms, ``head_dim`` each a layer, are summed over TP
    (finalize_model_grads.py@d98e8a64 lines 416-485). Mutation 2 -> 1 passed."""
    m = load_model("llama3-8b")
    m = m.model_copy(update={"attention": m.attention.model_copy(update={"qk_norm": True})})
    assert tp_replicated_params(m, {Block.ATTENTION: 5}, False) == 5 * 2 * m.head_dim


def test_a_shared_blocks_dict_prices_bf16_moe_layers_as_a_fresh_call():
    """speed76 seeds the MoE block key of the layout as it is; an FP8 layout's MoE layers kept in BF16 must still
    be timed on the BF16 layout. Mutation seeding the BF16 MoE key with the FP8 one passed speed76's tests (its
    layout BF16 throughout)."""
    spec = topo.load_spec("h100-100k")
    model, gpu = load_model("deepseek-v3-671b"), gpu_compute(spec.gpu, None, host_cpu=spec.host_cpu[0])
    lay = ParallelLayout(tp=2, pp=4, dp=16, ep=8, global_batch=256, gpus_per_domain_used=8, precision="fp8",
                         num_layers_at_end_in_bf16=4)
    fresh = rank_computes_at(model, lay, gpu, (np.inf, 0.0))
    shared = rank_computes_at(model, lay, gpu, (np.inf, 0.0), {})
    assert [[r.by_module_s for r in x] for x in shared] == [[r.by_module_s for r in x] for x in fresh]
