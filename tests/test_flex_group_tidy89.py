"""HybridEP's buffer and its routing-map all-gather run over one group, Megatron-Core's ``tp_ep`` (``ep x etp``
ranks): issue 29, findings section 390.

``MoEFlexTokenDispatcher`` builds its HybridEP manager over ``self.tp_ep_group`` with ``num_experts = tp_size x
num_moe_experts`` (NVIDIA/Megatron-LM@d98e8a64 ``megatron/core/transformer/moe/token_dispatcher.py`` lines
1845-1850; ``tp_size`` is the expert-TP size, lines 86-89) and expands each rank's routing map to one column per
local expert of every group rank (``_initialize_metadata``, lines 1906-1911); ``fused_a2a.py``'s
``init_hybrid_ep_buffer`` builds the buffer over that group (lines 340-347), whose ``allgather_routing_map``
gathers ``group_size`` maps of ``experts_per_rank x ranks_per_node x nodes`` columns (deepseek-ai/DeepEP@94a9f8f6
``csrc/hybrid_ep/executor/executor.cu`` lines 23-44). The buffer's NVLink ranks and so its experts' probabilities
and its RDMA part are of that group too (``csrc/hybrid_ep/buffer/intranode.cu``, ``internode_doca.cu``).
"""

import pytest

import topo
from topo.training.ep_buffers import _value, ep_buffer_bytes, hybridep_rdma_bytes
from topo.training.mapping import FLEX_GROUP, first_group_offsets, map_layout
from topo.training.model import load_model
from topo.training.parallel import make_layout
from topo.training.step import estimate_step

TOKENS = 4096 // 2  # a rank's tokens: 4,096 over TP 2 (sequence parallel)


@pytest.fixture(scope="module")
def qwen():
    return load_model("qwen3-30b-a3b")  # hidden 2,048, 128 experts


def _lay(**kw):
    """TP2, EP4 x ETP2 over 8 GPUs (one expert-DP replica), the flex dispatcher's HybridEP backend."""
    return make_layout(tp=2, ep=4, etp=2, dp=4, global_batch=64, seq_len=4096, ep_dispatcher="deepep", **kw)


def test_the_routing_map_is_gathered_over_ep_x_etp(qwen):
    """A rank's map is 2,048 tokens x (128 experts x etp 2) bools; the 8 ranks' maps are gathered, once per MoE
    layer forward: 48 layers x 16 micro-batches (64 / dp 4)."""
    fabric = topo.build_fabric(topo.load_spec("dgx-h100-superpod", ["cluster.num_units=1"]))
    gathers = [c for c in estimate_step(fabric, qwen, _lay(), contention=False).comm
               if c.dim == "ep" and c.collective == "all_gather" and c.group_size == 4 * 2]
    (ag,) = gathers
    assert ag.size_bytes == TOKENS * 128 * 2 * (4 * 2)
    assert ag.calls_per_step == 16 * 48


def test_an_ep_group_of_one_still_gathers_over_its_etp_ranks(qwen):
    """EP 1 x ETP 2: the flex group has 2 ranks (HybridEP asserts nothing on EP), each map 128 x 2 columns."""
    fabric = topo.build_fabric(topo.load_spec("gb200-nvl72-superpod"))
    lay = make_layout(tp=2, ep=1, etp=2, dp=4, global_batch=64, seq_len=4096, ep_dispatcher="deepep")
    sizes = [c.size_bytes for c in estimate_step(fabric, qwen, lay, contention=False).comm
             if c.dim == "ep" and c.collective == "all_gather" and c.group_size == 2]
    assert TOKENS * 128 * 2 * 2 in sizes


def test_the_flex_group_is_an_expert_replicas_ep_x_etp_ranks():
    """Megatron-Core folds a stage's ranks as [edp, ep, etp], etp fastest: the flex group of EP4 x ETP2 over TP2 x
    DP8 is 8 consecutive ranks, two groups in 16 GPUs, the union of its four EP groups' members."""
    lay = make_layout(tp=2, ep=4, etp=2, dp=8, global_batch=64, seq_len=4096, ep_dispatcher="deepep")
    mp = map_layout(lay, 8, 16)
    groups = mp.groups(FLEX_GROUP)
    assert groups.shape == (2, 8)
    assert first_group_offsets(lay, FLEX_GROUP) == list(range(8))
    ep = mp.groups("ep")
    for g in groups:
        assert sorted(g) == sorted(x for row in ep if set(row) <= set(g) for x in row)


def _buffer(qwen, node_ranks, nodes):
    """HybridEP's buffer by hand (ep_buffers' module doc): tokens x group ranks of bf16 hidden, fp32 probabilities
    over the domain's experts (32 a rank x its group ranks in the domain), a float scale per 128 hidden, and the
    RDMA part across domains."""
    tokens, h = TOKENS * 8, qwen.hidden
    domain_experts = 128 // 4 * node_ranks
    return (tokens * h * 2 + tokens * domain_experts * 4 + tokens * (h // _value("hybridep_scale_block")) * 4
            + hybridep_rdma_bytes(TOKENS, nodes, h, domain_experts))


def test_the_buffer_reaches_the_groups_nvlink_ranks(qwen):
    """In a domain of 8 the group's 8 ranks are all on NVLink (no RDMA part); in domains of 4, 4 ranks each side
    of 2 domains."""
    assert ep_buffer_bytes(qwen, _lay(), 8) == pytest.approx(_buffer(qwen, 8, 1))
    assert hybridep_rdma_bytes(TOKENS, 1, qwen.hidden, 256) == 0.0
    assert ep_buffer_bytes(qwen, _lay(), 4) == pytest.approx(_buffer(qwen, 4, 2))
