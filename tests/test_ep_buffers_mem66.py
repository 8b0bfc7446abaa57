"""mem66: DeepEP's RDMA buffer as NVSHMEM's symmetric heap maps it, and HybridEP's RDMA coordinator buffers when the
EP group spans NVLink domains (topo.training.ep_buffers), each figure from the source's own formula:
NVIDIA/nvshmem@2d7d25f0 (3.5.x; the same lines at 3.3.8 and 3.4.5), deepseek-ai/DeepEP@94a9f8f6 (hybrid-ep branch)."""

from topo.training.ep_buffers import deepep_hint_bytes, ep_buffer_bytes, hybridep_rdma_bytes, nvshmem_heap_bytes
from topo.training.model import load_model
from topo.training.parallel import make_layout

MiB = 2**20
GRANULE = 2**29  # deep_ep/buffer.py:119 NVSHMEM_CUMEM_GRANULARITY = 2 ** 29


def _nvshmem_own(npes):
    """NVSHMEM's heapextra (mem_heap.cpp:207-209): G_BUF_SIZE 8 MiB + the psync pool of DeepEP's 7 teams
    (team_internal.cpp:613-645: SYNC_SIZE 27648 -> 2 x 2 x 27648 + 524288 / 8 + 10 x 27648 + 2 x 27648 longs, plus
    2 x 2 x 2048 / 8 + 1 longs per PE) + G_COALESCING_BUF_SIZE 2 MiB + 24 x 512 B."""
    per_team = 4 * 27648 + 524288 // 8 + 10 * 27648 + 2 * 27648 + (1024 + 1) * npes
    return 8 * MiB + 7 * per_team * 8 + 2 * MiB + 24 * 512


def test_deepseek_v3_rdma_buffer_shares_the_first_granule_with_nvshmem():
    # 64 ranks: 8 NVSHMEM PEs (DeepEP's RDMA ranks). NVSHMEM's own ~39 MB maps one 512 MiB granule at init
    # (mem_heap.cpp:1730); the 367,550,720 B buffer + its 128 B alignment fits in the rest, so nothing more maps.
    rdma = deepep_hint_bytes(7168 * 2, 64)[1]
    assert rdma == 367550720 and _nvshmem_own(8) + rdma + 128 <= GRANULE
    assert nvshmem_heap_bytes(rdma, 8) == GRANULE


def test_a_buffer_past_the_first_granule_maps_its_own_granules():
    # mem_heap.cpp:1823: a malloc the mapped heap cannot hold maps round_up(size + alignment, granularity) more.
    free = GRANULE - _nvshmem_own(8) - 128
    assert nvshmem_heap_bytes(free, 8) == GRANULE
    assert nvshmem_heap_bytes(free + 1, 8) == 2 * GRANULE
    # DeepEP's 160-rank hint at hidden 7168 (866,371,200 B): one granule for NVSHMEM, two for the buffer
    rdma = deepep_hint_bytes(7168 * 2, 160)[1]
    assert rdma == 866371200 and nvshmem_heap_bytes(rdma, 20) == 3 * GRANULE


def test_no_rdma_buffer_no_nvshmem_heap():
    # Up to 8 ranks DeepEP allocates no RDMA buffer and never initialises NVSHMEM (csrc/deep_ep.cpp:341)
    assert deepep_hint_bytes(2048 * 2, 8)[1] == 0 and nvshmem_heap_bytes(0, 1) == 0


def test_hybridep_rdma_buffers_by_hand():
    # DeepSeek-V3 at EP 64 over 8 H100 servers: T = 4,096 tokens a rank, N = 8 domains, H = 7168, P = 4 experts x 8
    # ranks. internode_doca.cu:383-432 (dispatch) and :557-592 (combine), bf16 tokens, fp32 probs, H/128 float scales.
    T, N, H, P = 4096, 8, 7168, 32
    dispatch = (T * H * 2 + T * P * N * 4 + T * (H // 128) * 4
                + T * (N - 1) * H * 2 + T * (N - 1) * P * 4 + T * (N - 1) * (H // 128) * 4)
    combine = 2 * T * (N - 1) * H * 2 + 2 * T * (N - 1) * P * 4
    assert hybridep_rdma_bytes(T, N, H, P) == dispatch + combine == 1314390016
    assert hybridep_rdma_bytes(T, 1, H, P) == 0.0


def test_hybridep_counts_rdma_only_across_domains():
    m = load_model("deepseek-v3-671b")
    lay = make_layout(global_batch=64, dp=64, ep=64, pp=1, ep_dispatcher="deepep", ep_flex_backend="hybridep",
                      seq_len=4096)
    one_rack, servers = ep_buffer_bytes(m, lay, 72), ep_buffer_bytes(m, lay, 8)
    tokens = 4096 * 64
    assert one_rack == tokens * 7168 * 2 + tokens * 4 * 64 * 4 + tokens * (7168 // 128) * 4  # NVLink part alone
    nvlink8 = tokens * 7168 * 2 + tokens * 4 * 8 * 4 + tokens * (7168 // 128) * 4
    assert servers - nvlink8 == 1314390016
