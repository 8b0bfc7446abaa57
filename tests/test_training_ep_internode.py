"""topo's expert all-to-all across DGX H100 nodes under the flex dispatcher (``ep_dispatcher = "deepep"``) against
DeepEP's published internode rates (issue 29: is the inter-node all-to-all what keeps the Qwen3 235B EP overlap
pair and the DeepSeek-V3 EP rows apart? It is not: the rate matches).

deepseek-ai/DeepEP@ebfe47e4 README.md, "Normal kernels with NVLink and RDMA forwarding" (H800, one CX7 400 Gb/s
NIC per GPU, as DGX H100; 4,096 tokens of 7,168, top-8): internode EP16 43 / 43 GB/s, EP32 44 / 47 GB/s, EP64
46 / 45 GB/s (dispatch / combine "bottleneck bandwidth", RDMA). That rate counts one copy per token and distinct
destination node, the token's own node included (tests/test_internode.py: ``num_rdma_token_sent`` over
``rdma_idx``, every node of the token's experts; ``rdma_send_bytes / t``), which is what topo's ``size_bytes`` of
a deepep all-to-all holds (:func:`topo.training.step.ep_copies`): the two are compared as they stand.
Those are the README's figures before deepseek-ai/DeepEP@3b1045d (2025-04-22, after Tencent's #130): EP32 58 / 57,
EP64 51 / 50 GB/s since, faster than topo's fabric; topo times DeepEP V1's call at no less than those kernels
(:mod:`topo.training.ep_internode`, ``internode_deepep``; tests/test_training_ep_internode_call.py).
"""

import pytest

import topo
from topo.training.model import load_model
from topo.training.parallel import make_layout
from topo.training.step import estimate_step

# (EP group, DeepEP's dispatch and combine GB/s)
DEEPEP_INTERNODE_GBPS = {32: (44.0, 47.0), 64: (46.0, 45.0)}


@pytest.fixture(scope="module")
def h100():
    return topo.build_fabric(topo.load_spec("dgx-h100-superpod"))


def _logical_GBps(fabric, model, lay) -> float:
    r = estimate_step(fabric, model, lay, contention=False)
    a2a = next(d for d in r.comm if d.dim == "ep" and d.collective == "alltoall")
    assert a2a.domains_per_group == lay.ep // 8  # the group spans DGX nodes: the scale-out network binds
    return a2a.size_bytes / (a2a.time_s / a2a.calls_per_step) / 1e9


@pytest.mark.parametrize("name, ep, tp, pp, vpp, dp, gbs", [
    # yanring/Megatron-MoE-ModelZoo@798dfb50 best_practice/qwen3/readme.md: TP2 PP8 VPP4 EP32 ETP1, GBS 2048
    ("qwen3-235b-a22b", 32, 2, 8, 4, 16, 2048),
    # the Megatron-Bridge DeepSeek-V3 H100 layout (TP2 PP8 VP4 EP64)
    ("deepseek-v3-671b", 64, 2, 8, 4, 64, 8192),
])
def test_internode_deepep_rate_matches_deepeps_published(h100, name, ep, tp, pp, vpp, dp, gbs):
    lay = make_layout(tp=tp, pp=pp, vpp=vpp, ep=ep, etp=1, dp=dp, global_batch=gbs, seq_len=4096,
                      ep_dispatcher="deepep", pipeline_embedding=False)
    rate = _logical_GBps(h100, load_model(name), lay)
    published = sum(DEEPEP_INTERNODE_GBPS[ep]) / 2
    assert rate == pytest.approx(published, rel=0.12)
