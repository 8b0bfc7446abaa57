"""DGX B200 takes DGX H100's published HybridEP internode figures (issue 29, findings section 395, diff95).

Both scale out on one single-port ConnectX-7 at 400 Gb/s InfiniBand a GPU, eight GPUs a node behind NVLink (NVIDIA
DGX B200 User Guide, "Introduction to NVIDIA DGX B200 Systems"; data/reference/hardware.md for DGX H100), so a
HybridEP call across B200 nodes crosses the RDMA path whose rates deepseek-ai/DeepEP@94a9f8f6b146 (branch hybrid-ep)
``docs/README_Hybrid-EP.md`` publishes for H100 ("H100 Platform", SM count 16, 64 ranks: dispatch 41.24 GB/s through
the Torch API and 49.97 GB/s the kernel alone, combine 46.57 / 49.77, BF16; algorithm bandwidth over one copy per
token and destination node). Its test (``tests/test_hybrid_ep.py``) routes 4,096 tokens of hidden 7,168 to 8 of 8 x
64 experts drawn uniformly, so a rank sends ``4,096 x E[nodes] x 14,336`` bytes and receives ``4,096 x E[ranks] x
14,336``; the Torch API's time beyond the kernel's is the copy of the received tokens (read and written) and a fixed
part. The fixed part below subtracts that copy at 4 TB/s, half of B200's 8 TB/s HBM: a lower bound on it.
"""

from math import comb

import pytest

import topo
from topo.training.ep_internode import internode_table
from topo.training.model import load_model
from topo.training.parallel import make_layout
from topo.training.step import estimate_step

GB = 1e9
# docs/README_Hybrid-EP.md, H100 Platform, 64 ranks, SM count 16: (Torch API, kernel only) GB/s
DISPATCH, COMBINE = (41.24, 49.97), (46.57, 49.77)


def _expected_distinct(groups: int, per_group: int, topk: int) -> float:
    """Groups hit by ``topk`` distinct experts drawn uniformly from ``groups x per_group`` (closed form)."""
    experts = groups * per_group
    return groups * (1.0 - comb(experts - per_group, topk) / comb(experts, topk))


def _fixed_floor_s(api_GBps: float, kernel_GBps: float) -> float:
    token = 7168 * 2
    rdma = 4096 * _expected_distinct(8, 64, 8) * token  # 8 nodes of 8 ranks x 8 local experts
    received = 4096 * _expected_distinct(64, 8, 8) * token
    return max(0.0, rdma / (api_GBps * GB) - rdma / (kernel_GBps * GB) - 2 * received / 4e12)


def test_b200_reads_h100s_hybridep_internode_figures():
    t = internode_table("B200", 64)
    assert t is not None and t["ranks"] == 64 and t["hidden"] == 7168
    assert t["dispatch"] == pytest.approx((DISPATCH[0] * GB, DISPATCH[1] * GB))
    assert t["combine"] == pytest.approx((COMBINE[0] * GB, COMBINE[1] * GB))
    assert internode_table("B200", 64, backend="deepep") is None  # one hop: H100 has no DeepEP V1 table


@pytest.fixture(scope="module")
def b200():
    return topo.build_fabric(topo.load_spec("dgx-b200-superpod"))


def test_super_b200_ep64_call_is_no_faster_than_the_published_kernel_and_fixed_part(b200):
    """Nemotron 3 Super's B200 MXFP8 rows (benchmarks/training_accuracy.py --command mb260401_b200_nemotron3_super):
    TP1 EP64 over 8 DGX B200, HybridEP, BF16 dispatch at the latent 1,024. Each all-to-all call (dispatch and
    combine alike, forward and backward) lasts at least its bytes at the kernel's published rate plus the published
    call's fixed part, the mean of a dispatch and a combine; the fabric's all-to-all alone (before) gave 2.83 ms."""
    model = load_model("nemotron-3-super-120b-a12b")
    lay = make_layout(tp=1, pp=1, dp=64, ep=64, etp=1, global_batch=512, seq_len=8192, precision="fp8",
                      ep_dispatcher="deepep", fp8_recipe="mxfp8", recompute="selective",
                      recompute_modules=["moe_act", "layernorm"])
    (a2a,) = [c for c in estimate_step(b200, model, lay, contention=False).comm
              if c.dim == "ep" and c.collective == "alltoall"]
    per_call = a2a.time_s / a2a.calls_per_step
    floor = 0.5 * (a2a.size_bytes / (DISPATCH[1] * GB) + _fixed_floor_s(*DISPATCH)
                   + a2a.size_bytes / (COMBINE[1] * GB) + _fixed_floor_s(*COMBINE))
    assert a2a.calls_per_step == 8 * (40 + 2) * 4
    assert per_call >= floor
