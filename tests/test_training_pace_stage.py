"""The stage that sets the pipeline's pace, with its own traffic (issue 29: GB200 fine MoE too slow).

A stage's time per micro-batch is its own compute and its own layers' exposed communication. Megatron-Bridge's
DeepSeek-V3 recipe at PP4 VP4 (``Et*4|(t*4|)*14tmL``, NVIDIA-NeMo/Megatron-Bridge v0.3.1
src/megatron/bridge/recipes/deepseek/deepseek_v3.py ``layout_map[(4, 4)]``) gives the last stage 13 layers, the
MTP module's layer and two output heads (the most compute), stages 1 and 2 sixteen MoE layers each. The step used to
charge the last stage's compute with the expert all-to-alls of a 16-MoE-layer stage; it now times every distinct
stage with its own traffic and takes the slowest.
"""

import pytest

import topo
from topo.training.gpus import gpu_compute
from topo.training.model import load_model
from topo.training.operators import Block, pipeline_units, rank_computes, stage_compute
from topo.training.parallel import make_layout
from topo.training.step import estimate_step

DSV3_PP4_VP4 = "Et*4|(t*4|)*14tmL"


def _dsv3_layout():
    # Megatron-Bridge's GB200 DeepSeek-V3 MXFP8 row: TP1 PP4 VP4 EP64, MBS 1, GBS 4,096 on 256 GPUs, HybridEP,
    # Transformer Engine's loss (the row's cross_entropy column)
    return make_layout(pp=4, vpp=4, dp=64, ep=64, etp=1, global_batch=4096, seq_len=4096, micro_batch=1,
                       pipeline_layout=DSV3_PP4_VP4, ep_dispatcher="deepep", precision="fp8", overlap_pp=True,
                       cross_entropy="te")


def _moe_blocks(model, lay, stage):
    return sum(u.count(Block.MOE) for u in pipeline_units(model, lay)[stage] if u not in ("embedding", "logits",
                                                                                          "mtp_head"))


def _ep_calls(result):
    return sum(c.calls_per_step for c in result.comm if c.dim == "ep" and c.collective == "alltoall")


@pytest.fixture(scope="module")
def dsv3():
    return load_model("deepseek-v3-671b")


def test_rank_computes_lists_every_rank_the_busiest_first(dsv3):
    lay = _dsv3_layout()
    gpu = gpu_compute("GB200")
    ranks = rank_computes(dsv3, lay, gpu)
    assert sorted(r.busiest for r in ranks) == [0, 1, 2, 3]
    assert ranks[0].busiest == 3 == stage_compute(dsv3, lay, gpu).busiest  # the loss, MTP and two heads
    assert all(ranks[0].microbatch_s >= r.microbatch_s for r in ranks)
    assert ranks[0].blocks.get(Block.MOE) == 14 and ranks[2].blocks.get(Block.MOE) == 16


def test_on_nvl72_the_last_stage_paces_with_its_own_fourteen_moe_layers(dsv3):
    """In one NVL72 rack the all-to-alls are short: the last stage's compute paces, and its all-to-alls are its
    14 MoE layers' (dispatch and combine, forward and backward: 4 a layer and micro-batch), not stage 1's 16."""
    fab = topo.build_fabric(topo.load_spec("gb200-nvl72-superpod"))
    lay = _dsv3_layout()
    r = estimate_step(fab, dsv3, lay)
    m = lay.microbatches
    assert _moe_blocks(dsv3, lay, 3) == 14 and _moe_blocks(dsv3, lay, 1) == 16
    assert _ep_calls(r) == m * 4 * 14
    assert "logits" in r.compute_by_module_s


def test_when_the_all_to_alls_are_long_a_middle_stage_paces(dsv3):
    """EP64 across eight DGX H100 nodes (InfiniBand all-to-alls): stage 1's 16 MoE layers' exposed all-to-alls
    outweigh the last stage's extra compute, so stage 1 paces: its 16 layers' calls, no output head, and the step
    is no shorter than the last stage's compute alone."""
    fab = topo.build_fabric(topo.load_spec("dgx-h100-superpod"))
    lay = _dsv3_layout()
    r = estimate_step(fab, dsv3, lay)
    m = lay.microbatches
    assert _ep_calls(r) == m * 4 * 16
    assert "logits" not in r.compute_by_module_s
    gpu = gpu_compute(fab.spec.gpu, host_cpu=fab.spec.host_cpu[0])
    assert r.step_time_s > m * stage_compute(dsv3, lay, gpu).microbatch_s


def test_each_paced_stage_pays_the_sm_loss_of_its_own_compute(dsv3):
    """sm34 merged with the per-stage pace (rev40): a stage's hidden DP seconds cost ``hidden x (1 - t / t')`` with
    ``t`` and ``t'`` that stage's own compute on all SMs and on the SMs NCCL's channels leave
    (:func:`topo.training.comm_sms.sm_loss_s`), not the compute-busiest stage's reduced compute. Stage 1 (16 MoE
    layers, no head) and stage 3 (the heads) lose different fractions; pairing stage 1 with stage 3's reduced compute
    would give a loss of the wrong size."""
    from topo.training.comm_sms import nccl_sms, reduced_gpu
    from topo.training.comm import CommEngine
    from topo.training.result import DimensionComm
    from topo.training.step import _add_sm_losses

    fab = topo.build_fabric(topo.load_spec("dgx-h100-superpod"))
    lay, gpu = _dsv3_layout(), gpu_compute("H100")
    held = nccl_sms(16)  # the DGX H100 profile's 16 channels, no NCCL_MIN/MAX_CTAS
    full = {r.busiest: r for r in rank_computes(dsv3, lay, gpu)}
    slow = {r.busiest: r for r in rank_computes(dsv3, lay, reduced_gpu(gpu, held))}
    engine = CommEngine(fab)
    losses = {}
    for stage, sc in full.items():
        comms = [DimensionComm(dim="dp", collective="reduce_scatter", size_bytes=1e9, calls_per_step=1, time_s=1.0,
                               exposed_s=0.0, algorithm="ring", level=None, link=None, utilization=None,
                               num_groups=1, group_size=64, domains_per_group=8)]
        exposed = {k: 0.0 for k in ("tp", "cp", "pp", "dp", "ep")}
        _add_sm_losses(dsv3, lay, gpu, sc, 0.0, engine, comms, exposed)
        losses[stage] = exposed["dp"]
        assert exposed["dp"] == pytest.approx(1.0 - sc.microbatch_s / slow[stage].microbatch_s, rel=1e-9)
        assert comms[0].exposed_s == pytest.approx(exposed["dp"])
    assert 0.0 < losses[1] != pytest.approx(1.0 - full[1].microbatch_s / slow[3].microbatch_s, rel=1e-3)
