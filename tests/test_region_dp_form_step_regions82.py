"""regions82 (section 378's Left 2): ``nccl.dp_reduction = "auto"`` compares what the job pays in each form, its step,
not the two crossings' own seconds.

Megatron GPT 1.7B (Megatron-LM's paper, topo/data/models/megatron-gpt-1.7b.toml) on two sites of one GPU each (dp 1 a
site, ``D = K = 2``), ZeRO-3, full recompute, 4 micro-batches a replica, both forms fitting. The crossings carry the
same bytes (the hierarchical form ``2(K-1)/K`` of the FP32 reduce-scatters, the ring ``(D-1)/D`` of them and of the
BF16 gathers, twice a unit: equal at ``D = K = 2``) in the same hops, and the ring adds the gradient norm's FP32
all-reduce across the sites (NVIDIA/Megatron-LM@d98e8a64ddf34856e74b24714e3bedb2f5a39553
megatron/core/optimizer/clip_grads.py lines 55-139), one hop there and one back: the hierarchical crossing is the
faster, and auto took it. The job's step orders them the other way: under the flat ring each GPU's optimizer steps
half the state (one instance over the job, distrib_optimizer.py ``_build_model_and_main_param_groups``), and the
forward's share of the gathers (FSDP gathers each unit before its forward and before its backward,
pytorch/pytorch@3ade90a6aaa939cd6238e314c321b9f920db1471 torch/distributed/fsdp/_runtime_utils.py
``_pre_forward_unshard``, ``_pre_backward_hook``) crosses behind the forward's window, ``(1 - b)`` of the compute
(``b`` the backward's share, :data:`topo.training.multisite.BACKWARD_SHARE`). With both parts of each crossing past
their windows, ``T_hier - T_ring = o / 2 + (1 - b) C - norm``, ``o`` the share's optimizer step and ``C`` its compute.
"""

import pytest

from small_regions import built_region, two_sites
from topo.training.model import load_model
from topo.training.multisite import BACKWARD_SHARE, estimate_across_sites
from topo.training.parallel import make_layout
from topo.units import format_time

MODEL = load_model("megatron-gpt-1.7b")
TEXT = two_sites("step82", "two SUs", "dgx-h100-superpod", 1)
FORM = '[nccl]\ndp_reduction = "{}"\n'
LAY = make_layout(tp=1, pp=1, dp=2, global_batch=8, seq_len=2048, dp_sharding="zero3", recompute="full")
PASSES = 4  # micro-batches a replica: global batch 8 over dp 2 at micro-batch 1


@pytest.fixture(scope="module")
def jobs(tmp_path_factory):
    return {form: estimate_across_sites(built_region(tmp_path_factory, TEXT + FORM.format(form), f"step82-{form}"),
                                        MODEL, LAY) for form in ("auto", "hierarchical", "flat_ring")}


def test_the_crossings_and_the_steps_order_the_forms_apart(jobs):
    """The ring's crossing is the hierarchical one plus the norm's two hops (same bytes); its step is shorter by
    ``o / 2 + (1 - b) C - norm``."""
    hier, ring = jobs["hierarchical"].strategies[0], jobs["flat_ring"].strategies[0]
    assert ring.dci_bytes_per_step == pytest.approx(hier.dci_bytes_per_step, rel=1e-12)
    hop = hier.latency_s / (2 * PASSES)  # the hierarchical phase: 2(K - 1) hops in each of the passes
    norm = 2 * hop
    assert ring.dci_time_s - hier.dci_time_s == pytest.approx(norm, rel=1e-6)
    share = jobs["hierarchical"].one_site["breakdown_s"]
    gap = share["optimizer"] / 2 + (1 - BACKWARD_SHARE) * share["compute"] - norm
    assert hier.step_time_s - ring.step_time_s == pytest.approx(gap, rel=1e-6)
    assert gap > 0


def test_auto_takes_the_shorter_step(jobs):
    """Auto runs the flat ring's job (both forms fit, so not for memory), and its line gives both steps."""
    auto, ring = jobs["auto"], jobs["flat_ring"]
    assert jobs["hierarchical"].fits and ring.fits
    assert auto.dp_reduction == "flat_ring" and not auto.dp_reduction_by_memory
    assert auto.step_time_s == pytest.approx(ring.step_time_s, rel=1e-12)
    line = next(a for a in auto.assumptions if a.startswith("dp across sites: the gradients cross"))
    assert "by NCCL's flat cross-DC ring (the faster)" in line
    assert (f"the job's step {format_time(jobs['hierarchical'].step_time_s)} by the hierarchical reduction, "
            f"{format_time(ring.step_time_s)} by the flat ring (what auto compares)") in line
