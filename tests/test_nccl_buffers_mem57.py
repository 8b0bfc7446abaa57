"""mem57: NCCL's per-communicator buffers count against a GPU's memory (topo.training.nccl_buffers), from NCCL's
own sizes (NVIDIA/nccl v2.30.7-1, master 5067397c) and NVIDIA/nccl#1685's measurement on 8 H100."""

import math

import pytest

import topo
from topo.training.comm import CommEngine
from topo.training.gpus import gpu_compute
from topo.training.mapping import first_group_offsets, first_group_reach, map_layout
from topo.training.memory import memory_per_gpu
from topo.training.model import load_model
from topo.training.nccl_buffers import (_p2p_channels_per_peer, communicators, nccl_buffer_bytes,
                                        nccl_constants)
from topo.training.parallel import ParallelLayout, make_layout
from topo.training.search import _keys, _Search
from topo.training.step import estimate_step

MiB = 2**20
# src/init.cc: DEFAULT_LL_BUFFSIZE 8 lines x 512 threads x 8 steps x 16 B, DEFAULT_LL128_BUFFSIZE 120 x 640 x 8 x
# 8 B, DEFAULT_BUFFSIZE 4 MiB; src/transport/p2p.cc: all three on the receiver (no P2P read off compute capability
# 8.0), ALIGN_SIZE'd to CUDA_IPC_MIN 2 MiB (src/include/comm.h); the sender its ncclSendMem in one 2 MiB granule.
# NVIDIA/nccl#1685's NCCL_DEBUG_SUBSYS=ALLOC lists exactly these two sizes, 10485760 and 2097152.
RECV = math.ceil((8 * 512 * 8 * 16 + 120 * 640 * 8 * 8 + 4 * MiB) / (2 * MiB)) * 2 * MiB
CONN = RECV + 2 * MiB
RING = 16 * CONN  # 16 collective channels (topo/data/profiles/nccl/2.30.7.toml; NVIDIA/nccl#1453's logs)
SHARED = 2 * 16 * 16 * 128 * 1024  # net.cc: two pools of p2pnChannels x NCCL_SHARED_STEPS x 128 KiB chunks


def _moe(**kw):
    base = dict(global_batch=64, tp=1, dp=8, ep=8, etp=1)
    return make_layout(**{**base, **kw})


def test_a_connection_is_ncclS_three_protocol_buffers_and_the_senderS_granule():
    assert RECV == 10485760 and CONN == 12582912
    dense = make_layout(global_batch=16, tp=8, dp=2)
    assert [c[:2] for c in communicators(dense, moe=False)] == [("tp", "ring"), ("dpcp", "ring")]
    assert nccl_buffer_bytes(dense, False, 8) == 2 * RING


def test_an_all_to_all_inside_one_server_is_nccl_1685S_channels():
    """NVIDIA/nccl#1685: one all-to-all over 8 H100 of one server connects 32 channels to each of 7 peers; nvidia-smi
    less PyTorch's memory rose from 1.06 to 4.34 GB (3.28 GB). topo: 7 x 32 x 12 MiB = 2.82 GB, the connections'
    buffers; the rest (NCCL's per-channel device structures, its proxy) is not counted."""
    ep = nccl_buffer_bytes(_moe(), True, 8) - nccl_buffer_bytes(_moe(ep_dispatcher="deepep"), True, 8)
    assert ep == 7 * 32 * CONN
    assert 0.8 * 3.28e9 < ep < 3.28e9


def test_an_all_to_all_across_servers_shares_the_network_pools():
    """EP 64 over 8-GPU servers: NCCL's 4 channels per network peer (one 50 GB/s NIC: ceil(50 / 14)) halve once
    (4 x ceil(64 / 8) > 16 p2p channels): 2 per peer over NVLink to the 7 in the server, and the shared pools."""
    lay = _moe(dp=64, ep=64)
    ep = nccl_buffer_bytes(lay, True, 8) - nccl_buffer_bytes(lay.model_copy(update={"ep_dispatcher": "deepep"}),
                                                             True, 8)
    assert ep == SHARED + 7 * 2 * CONN
    # no domain size given: no NVLink peer counted, the pools only (the least NCCL holds)
    assert nccl_buffer_bytes(lay, True, None) - nccl_buffer_bytes(
        lay.model_copy(update={"ep_dispatcher": "deepep"}), True, None) == SHARED



def test_the_rank_order_sets_which_peers_share_a_server():
    """EP 8 over the data ranks of a stage: with pipeline stages outermost (Megatron's tp-cp-ep-dp-pp) they are one
    server's 8 GPUs; with pp before dp, every second GPU of two servers: 4 channels per network peer (8 ranks, one
    round), 3 of the 7 peers over NVLink, and the pools."""
    inner = _moe(global_batch=64, pp=2)
    strided = inner.model_copy(update={"rank_order": "tp-cp-ep-pp-dp"})
    a2a = {o: nccl_buffer_bytes(o, True, 8) - nccl_buffer_bytes(o.model_copy(update={"ep_dispatcher": "deepep"}),
                                                                True, 8) for o in (inner, strided)}
    assert a2a[inner] == 7 * 32 * CONN and a2a[strided] == SHARED + 3 * 4 * CONN


def test_pipeline_neighbours_across_servers_and_inside_one():
    lay = make_layout(global_batch=64, tp=8, pp=4, dp=2)  # stages on separate servers: the pools only
    assert nccl_buffer_bytes(lay, False, 8) == 2 * RING + SHARED
    small = make_layout(global_batch=64, tp=2, pp=4, dp=1)  # the 4 stages inside one server: 2 NVLink peers
    assert nccl_buffer_bytes(small, False, 8) == RING + 2 * 32 * CONN


def test_memory_per_gpu_adds_them_and_the_search_keys_them():
    m = load_model("mixtral-8x7b")
    lay = _moe(global_batch=64)
    inside = memory_per_gpu(m, lay, 85.5e9, gpus_per_domain=8)
    unknown = memory_per_gpu(m, lay, 85.5e9)
    assert inside.nccl_bytes == nccl_buffer_bytes(lay, True, 8)
    assert inside.total_bytes - unknown.total_bytes == pytest.approx(inside.nccl_bytes - unknown.nccl_bytes)
    assert inside.to_dict()["nccl_bytes"] == int(inside.nccl_bytes)


@pytest.mark.parametrize("fields, order", [
    (dict(tp=1, dp=64, ep=8, etp=1), "tp-cp-ep-dp-pp"),
    (dict(tp=1, dp=64, ep=16, etp=1), "tp-cp-ep-dp-pp"),
    (dict(tp=2, dp=32, ep=8), "tp-cp-ep-dp-pp"),
    (dict(tp=2, dp=16, pp=2, ep=8), "tp-cp-ep-pp-dp"),
    (dict(tp=1, dp=8, pp=8, ep=8, etp=1), "tp-cp-ep-pp-dp"),
])
def test_the_ep_peers_inside_a_server_are_the_mappings(fields, order):
    """The EP ranks nccl_buffers finds in the first GPU's 8-GPU domain are those topo.training.mapping places there
    (Megatron-Core's MoE folding; the cases of tests/test_training_search_ep_floor.py)."""
    lay = ParallelLayout(global_batch=64, micro_batch=1, rank_order=order, **fields)
    inside = sum(1 for o in first_group_offsets(lay, "ep") if o < 8)
    assert inside == map_layout(lay, 8, 64 * lay.pp).members_in_domain("ep")


def test_the_search_fits_each_rank_order_with_its_own_buffers():
    """A search keys memory by the layout's shape, which leaves out the rank order; NCCL's buffers read it. Both
    orders of one shape get memory_per_gpu's own figure (the second by replacing the first's NCCL bytes)."""
    fabric = topo.build_fabric(topo.load_spec("dgx-h100-superpod", ["cluster.num_units=1"]))
    m = load_model("qwen3-30b-a3b")
    gpu = gpu_compute(fabric.spec.gpu, host_cpu=fabric.spec.host_cpu[0])
    s = _Search(fabric, m, CommEngine(fabric), gpu, 5, dict(convention="6n", efficiency=None), None, None)
    for order in ("tp-cp-ep-dp-pp", "tp-cp-ep-pp-dp"):
        lay = ParallelLayout(tp=1, dp=16, pp=2, ep=8, etp=1, global_batch=64, micro_batch=1, rank_order=order)
        _, mem = s.bound_of(lay, _keys(lay))
        own = memory_per_gpu(m, lay, gpu.memory_bytes, generation=gpu.generation, gpus_per_domain=8)
        assert mem == own, order
    assert len({v.nccl_bytes for v in s.mem_cache.values()}) == 2


def test_an_all_to_all_over_an_nvl72_rack_is_one_nccl_node():
    """nvlsbuf60: NCCL's node is the NVLink domain (an NVL72 rack's MNNVL clique), not its 4-GPU hosts: NVIDIA/nccl
    v2.30.7-1 src/init.cc counts nNodes from the ring graph's first ranks once the clique's topology is fused and
    takes nNvlDomains = nNodes (initNvlDomainInfo); src/graph/paths.cc ncclTopoComputeP2pChannels halves only "in
    the case of >1 NVLD". 64 GPUs of one rack: nNodes 1, so 32 channels a peer (min(p2pnChannels, 64)), 63 peers, no
    network pool; across two racks (32 + 32) the halving applies: 2 a peer to the 31 NVLink peers, plus the pools."""
    lay = _moe(dp=64, ep=64)
    a2a = nccl_buffer_bytes(lay, True, 72) - nccl_buffer_bytes(
        lay.model_copy(update={"ep_dispatcher": "deepep"}), True, 72)
    assert a2a == 63 * 32 * CONN
    two = nccl_buffer_bytes(lay, True, 32) - nccl_buffer_bytes(
        lay.model_copy(update={"ep_dispatcher": "deepep"}), True, 32)
    assert two == nccl_constants()["network_p2p_shared_bytes"] + 31 * 2 * CONN


def test_nvlink_channels_per_peer_are_capped_at_the_p2p_channels_as_nccl_does():
    """tidy58: NVIDIA/nccl v2.30.7-1 src/graph/paths.cc: ncclTopoGetNchannels asks 2 x (path bandwidth / one
    link's) for an NVLink peer, 2 x 18 links = 36, which ncclTopoComputeP2pChannels rounds up to 64 (pow2Up); on one
    node (NVLink domain) it takes min(p2pnChannels, 64): NVIDIA/nccl#1685's 32 a pair on 8 H100. Across nodes it halves while
    per peer x ceil(ranks / 8) > p2pnChannels (16): 64 ranks -> 2, 8 ranks -> 16 (the cap's level)."""
    asked = 2 ** math.ceil(math.log2(2 * 18))
    assert nccl_constants()["nvlink_p2p_channels_per_peer"] == asked == 64
    assert _p2p_channels_per_peer(True, False, 8) == min(32, asked) == 32
    assert _p2p_channels_per_peer(True, True, 64) == 2
    assert _p2p_channels_per_peer(True, True, 8) == 16
    assert _p2p_channels_per_peer(False, True, 64) == 2  # 4 network channels, halved once per doubling past 16



@pytest.mark.parametrize("order", ["tp-cp-ep-dp-pp", "tp-dp-cp-pp", "dp-tp-cp-pp", "cp-tp-dp-pp", "tp-cp-ep-pp-dp",
                                   "pp-dp-cp-tp"])
def test_first_group_offsets_are_the_mappings_groups(order):
    """tidy58: nccl_buffers reads a group's members from mapping.first_group_offsets, the rule map_layout lays the
    groups by (one place). Before, nccl_buffers re-derived them and read a stage's ranks for the EP fold in the rank
    order: with dp before cp (tp-dp-cp-pp) its EP group was ranks 0-3 where map_layout's is 0, 1, 8, 9 (the fold
    reads TP, then CP, then DP)."""
    lay = ParallelLayout(tp=2, cp=2, dp=4, pp=2, ep=4, etp=1, global_batch=64, micro_batch=1, rank_order=order,
                         tp_across_domains=True)
    g = map_layout(lay, 8, 1024)
    for group in ("tp", "cp", "dp", "pp", "ep"):
        ids = sorted(int(x) for x in g.groups(group)[0])
        assert first_group_offsets(lay, group) == [x - ids[0] for x in ids], group
        for dom in (1, 2, 4, 8, 72):  # the cached reach the buffers read (a search's hot path) is the same rule
            offsets = [x - ids[0] for x in ids]
            assert first_group_reach(lay, group, dom) == (sum(1 for o in offsets if o < dom), offsets[-1]), group


def test_the_step_counts_an_nvl72_rack_as_one_nccl_node():
    """nvlsbuf60: the step's memory takes NCCL's node as the NVLink domain (one rule with the NCCL profile and the
    NVLS buffers): EP 64 inside one GB200 NVL72 rack holds 63 peers x 32 channels, not the halved 2 its 4-GPU hosts
    gave before (src/graph/paths.cc ncclTopoComputeP2pChannels: 'In the case of >1 NVLD')."""
    fabric = topo.build_fabric(topo.load_spec("gb200-nvl72-superpod", ["cluster.num_units=1"]))
    m = load_model("qwen3-30b-a3b")
    lay = ParallelLayout(tp=1, dp=64, pp=1, ep=64, etp=1, global_batch=64, micro_batch=1)
    mem = estimate_step(fabric, m, lay, contention=False).memory
    assert mem.nccl_bytes == nccl_buffer_bytes(lay, True, 72)
    flex = lay.model_copy(update={"ep_dispatcher": "deepep"})
    assert mem.nccl_bytes - nccl_buffer_bytes(flex, True, 72) == 63 * 32 * CONN
