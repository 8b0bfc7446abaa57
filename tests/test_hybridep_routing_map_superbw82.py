"""HybridEP all-gathers the bool routing map over the EP group inside one NVLink domain too (issue 29, findings
section 382).

Every forward dispatch (no cached handle) runs ``metadata_preprocessing``, which gathers each rank's routing map,
tokens x experts bytes, into the global map: at deepseek-ai/DeepEP@94a9f8f6 (branch hybrid-ep, PR #682 "Disable
custom allgather by default") with NCCL's ``all_gather_into_tensor`` whatever the group
(``csrc/hybrid_ep/executor/executor.cu`` ``Executor::allgather_routing_map`` lines 39-44;
``deep_ep/hybrid_ep_buffer.py`` line 52, ``enable_custom_allgather: bool = False``), which Megatron-Core does not
set (NVIDIA/Megatron-LM@d98e8a64 ``megatron/core/transformer/moe/fused_a2a.py`` lines 340-347). Each rank receives
``ep - 1`` others' maps; the bytes and the call count are closed forms of the layout, and NVLink5 carries at most
900 GB/s a direction a GPU (data/reference/hardware.md: 1.8 TB/s a GPU, both directions).
"""

import pytest

import topo
from topo.training.model import load_model
from topo.training.parallel import make_layout
from topo.training.step import estimate_step


def _gathers(result):
    return [c for c in result.comm if c.dim == "ep" and c.collective == "all_gather"]


@pytest.fixture(scope="module")
def nvl72():
    return topo.build_fabric(topo.load_spec("gb200-nvl72-superpod"))


@pytest.fixture(scope="module")
def h100():
    return topo.build_fabric(topo.load_spec("dgx-h100-superpod", ["cluster.num_units=1"]))


def _super_layout(**kw):
    """Nemotron 3 Super's GB200 model-card layout (benchmarks/training_accuracy.py --command
    mbvc_gb200_nemotron3_super): TP2 EP64 in one NVL72 rack, 512 x 8,192 tokens, MBS 1."""
    return make_layout(tp=2, pp=1, dp=32, ep=64, etp=1, global_batch=512, seq_len=8192, gpus_per_domain_used=64,
                       ep_dispatcher="deepep", cuda_graph_scope=["attn", "mamba", "moe_router", "moe_preprocess"],
                       **kw)


def test_super_on_one_nvl72_rack_gathers_the_routing_map(nvl72):
    """8,192 / TP2 = 4,096 tokens a rank x 512 experts x 64 ranks, bool: 128 MiB; once per MoE layer forward, 40
    MoE layers and the MTP block's 2, 16 micro-batches; no faster than the 63 others' maps over NVLink5."""
    model = load_model("nemotron-3-super-120b-a12b")
    (ag,) = _gathers(estimate_step(nvl72, model, _super_layout(), contention=False))
    assert ag.size_bytes == pytest.approx(4096 * 512 * 64)
    assert ag.calls_per_step == 16 * (40 + 2)
    assert ag.time_s / ag.calls_per_step >= 63 / 64 * ag.size_bytes / 900e9


def test_one_dgx_h100_node_gathers_too(h100):
    """Qwen3-30B-A3B at EP 8 in one DGX H100 (HybridEP over NVLink only): 4,096 tokens x 128 experts x 8 ranks,
    once per forward of each of 48 MoE layers and 8 micro-batches."""
    model = load_model("qwen3-30b-a3b")
    lay = make_layout(ep=8, dp=8, etp=1, global_batch=64, seq_len=4096, precision="fp8", ep_dispatcher="deepep")
    (ag,) = _gathers(estimate_step(h100, model, lay, contention=False))
    assert ag.size_bytes == pytest.approx(4096 * 128 * 8)
    assert ag.calls_per_step == 8 * 48


def test_deepep_v1_gathers_no_routing_map_in_a_domain(nvl72):
    """DeepSeek's DeepEP counts its tokens per rank locally (``get_dispatch_layout``): no gather. (HybridEP over
    expert TP 2 alone, EP 1, does gather: its group is ``ep x etp``, tests/test_flex_group_tidy89.py.)"""
    model = load_model("nemotron-3-super-120b-a12b")
    assert not _gathers(estimate_step(nvl72, model, _super_layout(ep_flex_backend="deepep"), contention=False))
