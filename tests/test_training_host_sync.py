"""The GPU's wait for the host between a dropless MoE router's device-to-host syncs (operators._synced_layer_wait_s,
_launch_line_s): the host blocks at the sync until the GPU has run every kernel before it (Megatron-Core's
``cuda_sync_point = "before_ep_alltoall"``, NVIDIA/Megatron-LM@d98e8a64dd token_dispatcher.py), so from there to the
next sync the GPU runs each kernel only once the host has launched it: a two-stage flow line."""

import random

import pytest

from topo.training.gpus import gpu_compute
from topo.training.model import load_model
from topo.training.operators import (SYNC_OP, _launch_line_s, block_ops, block_time, stage_compute)
from topo.training.parallel import make_layout


def _kernel_by_kernel(seq):
    """The flow line simulated one kernel at a time (the closed form per op must equal it)."""
    host = gpu = 0.0
    for h, g, n in seq:
        n = int(n)
        for _ in range(n):
            host += h / n
            gpu = max(gpu, host) + g / n
    return gpu


def test_launch_line_closed_forms():
    # one kernel: launched at h, done at h + g
    assert _launch_line_s([(3.0, 5.0, 1)]) == pytest.approx(8.0)
    # a host-bound op of n kernels: the GPU runs each as it is launched: n a + b
    assert _launch_line_s([(10.0, 1.0, 10)]) == pytest.approx(10.0 + 0.1)
    # a GPU-bound op: the first launch, then the GPU back to back: a + n b
    assert _launch_line_s([(1.0, 10.0, 10)]) == pytest.approx(0.1 + 10.0)
    # host launches that come after long GPU work hide behind it; the same launches first do not
    assert _launch_line_s([(0.1, 10.0, 1), (5.0, 0.5, 5)]) == pytest.approx(10.1 + 0.5)
    assert _launch_line_s([(5.0, 0.5, 5), (0.1, 10.0, 1)]) == pytest.approx(5.1 + 10.0)


def test_launch_line_equals_the_kernel_by_kernel_line():
    rng = random.Random(7)
    for _ in range(50):
        seq = [(rng.uniform(0, 1e-4), rng.uniform(0, 1e-4), rng.randint(1, 12)) for _ in range(rng.randint(1, 15))]
        assert _launch_line_s(seq) == pytest.approx(_kernel_by_kernel(seq), rel=1e-12)


@pytest.fixture(scope="module")
def qwen():
    return load_model("qwen3-30b-a3b")  # hidden 2,048, 128 experts of 768, 8 active (arXiv 2505.09388)


def test_the_sync_is_the_dispatchs_permutation(qwen):
    lay = make_layout(ep=8, dp=8, global_batch=64, seq_len=4096, etp=1)
    g = gpu_compute("H100")
    e = block_time(qwen, lay, g, "E")
    fwd = [op for op in block_ops(qwen, lay, "E") if op.passes != "backward"]
    assert len(e.launch_seq) == len(fwd) and fwd[e.sync_at].name == SYNC_OP
    assert {op.name for op in fwd[:e.sync_at]} >= {"router", "router_topk", "dispatch_dtoh"}
    assert block_time(qwen, lay, g, "*").sync_at == -1


def test_a_gpu_bound_layer_still_waits_for_the_first_launch_after_each_sync(qwen):
    """Qwen3-30B at 4 x 4,096 tokens a micro-batch with the attention and the router in CUDA graphs: each
    eagerly launched expert kernel takes the GPU longer than the host (20 or 50 us a launch), so the host never falls
    behind, yet every sync leaves the GPU idle until the first kernel after it is launched: the dispatch's own
    launch (the host launches the all-to-all only once the sync has returned: Megatron-Core's
    ``before_ep_alltoall`` sync point; HybridEP's ``cudaStreamSynchronize`` in ``metadata_preprocess_core`` before
    ``dispatch_with_permute`` launches its kernel, deepseek-ai/DeepEP@94a9f8f6 hybrid-ep
    ``csrc/hybrid_ep/executor/executor.cu``), then the permutation's first. With the EP overlap's cover at 0 (no
    step here), both are GPU-idle host time: two launches a layer. The bound before (a layer lasts max(host,
    GPU)) gave no wait; a padded router syncs nothing."""
    lay = make_layout(ep=8, dp=8, global_batch=256, seq_len=4096, etp=1, micro_batch=4,
                      cuda_graph_scope=("attn", "moe_router", "moe_preprocess"))
    for host_s in (2e-5, 5e-5):
        g = gpu_compute("H100", overrides={"launch": {"host_s": host_s}})
        bt = {k: block_time(qwen, lay, g, k) for k in "*E"}
        assert bt["*"].host_s + bt["E"].host_s < (bt["*"].forward_s + bt["E"].forward_s) / 2
        assert sum(n * bt[k].host_backward_s for k, n in (("*", 1), ("E", 1))) < bt["E"].backward_s
        wait = stage_compute(qwen, lay, g).by_module_s.get("host", 0.0)
        # each sync: its round trip (the copy lands, the host thread resumes), the dispatch's launch, then the
        # permutation's first launch
        assert bt["E"].sync_s == g.kernels.sync_s > 0 and bt["*"].sync_s == 0.0
        assert bt["E"].calls_host_s == (host_s,) * 4 and bt["*"].calls_host_s == (0.0,) * 4
        assert wait == pytest.approx(qwen.layers * (g.kernels.sync_s + 2 * host_s), rel=1e-6)
        padded = lay.model_copy(update={"moe_capacity_factor": 1.0})
        assert stage_compute(qwen, padded, g).by_module_s.get("host", 0.0) == 0.0


def _block(seq, sync_at=-1, sync_s=0.0):
    from topo.training.operators import BlockTime
    return BlockTime(sum(g for _, g, _ in seq), 0.0, {}, {}, launch_seq=tuple(seq), sync_at=sync_at, sync_s=sync_s)


def test_the_expert_all_to_alls_give_the_host_its_lead():
    """The dispatch runs right after the sync and the combine after the experts: the GPU is busy with them
    while the host launches on, so the wait shrinks by up to their time (the step counts their time apart); an
    infinite cover (the layout search's lower bound) leaves no wait."""
    from topo.training.operators import _synced_layer_wait_s
    # MoE block: router (before the sync), then permute + experts (host-bound: 100 us of launches, 10 us of GPU
    # each), then the residual; an attention block of 50 us GPU, no launches (graphed)
    moe = _block([(0.0, 5e-6, 1), (100e-6, 10e-6, 1), (100e-6, 10e-6, 1), (1e-6, 1e-6, 1)], sync_at=1)
    attn = _block([(0.0, 50e-6, 1)])
    bare = _synced_layer_wait_s([attn, moe], 1)
    # the line: permute launched at 100 us, done 110; experts launched at 200, done 210; the residual (launched
    # at 201) 210 -> 211; attention and router run on: 211 + 50 + 5 = 266 us against 76 us of GPU
    assert bare == pytest.approx(266e-6 - 76e-6)
    # a 120 us cover, a 60 us dispatch (before the permute) and a 60 us combine (before the residual): the
    # dispatch runs 0 -> 60 under the permute's launch, the combine after the experts, 210 -> 270, then the
    # residual, attention and router to 326 us, against 196 us of GPU and all-to-alls: 60 us less wait
    covered = _synced_layer_wait_s([attn, moe], 1, 120e-6)
    assert covered == pytest.approx(bare - 60e-6)
    assert _synced_layer_wait_s([attn, moe], 1, 1.0) == pytest.approx(0.0, abs=1e-12)
    assert _synced_layer_wait_s([attn, moe], 1, float("inf")) == 0.0


def test_the_sync_round_trip_opens_the_stretch():
    """The device-to-host sync's round trip (kernels.toml [launch] sync_s) is host time before the first launch
    after the sync, the GPU idle: a host-bound stretch is that much longer, a GPU-bound one too (nothing is queued
    to hide it). The value: 26.11 us for a device-to-host round trip less 9.02 us for a kernel launch on one
    bare-metal x86 host (jingyaogong/minimind PR #837) and (58 - 19) / 2 us a sync removed on a B200 host
    (unslothai/unsloth-zoo PR #1248): 17.1-19.5 us, taken as 20 us; no Grace figure, every host alike."""
    from topo.training.operators import _synced_layer_wait_s
    seq = [(0.0, 5e-6, 1), (100e-6, 10e-6, 1), (100e-6, 10e-6, 1), (1e-6, 1e-6, 1)]
    attn = _block([(0.0, 50e-6, 1)])
    bare = _synced_layer_wait_s([attn, _block(seq, sync_at=1)], 1)
    synced = _synced_layer_wait_s([attn, _block(seq, sync_at=1, sync_s=30e-6)], 1)
    assert synced == pytest.approx(bare + 30e-6)  # the line 30 -> 140 -> 240 -> 241 -> 296 us, 76 us of GPU
    gpu_bound = [(0.0, 5e-6, 1), (1e-6, 500e-6, 1)]
    assert _synced_layer_wait_s([_block(gpu_bound, sync_at=1, sync_s=30e-6)], 0) == pytest.approx(31e-6)
    assert _synced_layer_wait_s([_block(gpu_bound, sync_at=1, sync_s=30e-6)], 0, float("inf")) == 0.0
    for gpu, cpu in (("H100", None), ("B200", None), ("GB200", None), ("H100", "grace")):
        s = gpu_compute(gpu, host_cpu=cpu).kernels.sync_s
        assert 26.11e-6 - 9.02e-6 <= s <= 20e-6 and s == gpu_compute("H100").kernels.sync_s


def test_the_step_covers_with_the_forward_dispatch_and_combine():
    """estimate_step hands stage_compute one forward dispatch and one combine per MoE layer (each alone on the
    fabric: step._ep_cover_s); with the EP all-to-alls overlapped with another micro-batch, none; under a
    full-iteration CUDA graph none either: the graph captures every kernel, the host launches nothing to cover."""
    from types import SimpleNamespace as NS

    from topo.training.step import _ep_cover_s
    a2a = {"dim": "ep", "collective": "alltoall", "elem_bytes": 2.0}
    fp8 = {"dim": "ep", "collective": "alltoall", "elem_bytes": 1.0}
    probs = {"dim": "ep", "collective": "alltoall", "elem_bytes": 4.0, "pair": "ep_probs"}
    lay = NS(overlap_ep=False, ep=8, ep_dispatcher="alltoall", cuda_graph_scope=())
    assert _ep_cover_s(lay, [(a2a, NS(time_s=3e-4)), (probs, NS(time_s=1e-5))]) == pytest.approx(6e-4)
    assert _ep_cover_s(lay, [(fp8, NS(time_s=2e-4)), (a2a, NS(time_s=3e-4))]) == pytest.approx(5e-4)
    assert _ep_cover_s(NS(overlap_ep=True, pipeline_schedule="dualpipe", cuda_graph_scope=()),
                       [(a2a, NS(time_s=3e-4))]) == 0.0
    assert _ep_cover_s(lay, []) == 0.0
    graphed = NS(overlap_ep=False, ep=8, ep_dispatcher="alltoall", cuda_graph_scope=("full_iteration",))
    assert _ep_cover_s(graphed, [(a2a, NS(time_s=3e-4))]) == 0.0


def test_the_search_bound_stays_under_the_step_where_the_host_waits():
    """The layout search prunes on a bound that must not exceed any layout's step (rev39). Host-bound fine MoE on
    GB200 (Qwen3 30B-A3B, Grace's slower launches): the bound takes no sync-to-sync wait (``math.inf`` cover), and
    stays under every evaluated step; the wait without the expert all-to-alls' cover (``stage_compute``'s default)
    would not: there it exceeds the step of layouts whose all-to-alls give the host its lead, so a bound built on
    it could prune the best layout."""
    import topo
    from topo.training.comm import CommEngine
    from topo.training.search import _bound, _comm_floor_s, _keys, _Search, candidate_layouts
    from topo.training.tp_overlap import tp_overlap_on
    from topo.training.step import estimate_step, step_traffic

    fab = topo.build_fabric(topo.load_spec("gb200-nvl72-superpod", ["cluster.num_units=1"]))
    m = load_model("qwen3-30b-a3b")
    gpu = gpu_compute(fab.spec.gpu, host_cpu=fab.spec.host_cpu[0])
    eng = CommEngine(fab)
    s = _Search(fab, m, eng, gpu, 5, dict(convention="6n", efficiency=None), None, None)
    kw = dict(cps=(1,), micro_batches=(2,), recompute=("none",), vpps=(1,), dp_sharding=("zero1",))
    n = over_without_cover = 0
    for lay, _ in candidate_layouts(m, 64, 64, gpus_per_domain=fab.spec.gpus_per_domain, **kw):
        bound = s.bound_of(lay, _keys(lay))[0] if lay is not None else None
        if bound is None:
            continue
        r = estimate_step(fab, m, lay, engine=eng, check=False, contention=False)
        if not r.fits:
            continue
        n += 1
        assert bound <= r.step_time_s * (1 + 1e-12), lay.describe()
        sc = stage_compute(m, lay, gpu)  # the wait with no cover: the step's own wait is smaller
        tp_f, ep_f = _comm_floor_s(fab.spec, lay, step_traffic(m, lay), sc, tp_overlap=tp_overlap_on(lay, m))
        over_without_cover += _bound(lay, sc, tp_f, ep_f) > r.step_time_s * (1 + 1e-12)
    assert n >= 20
    assert over_without_cover >= 1  # the case is one where the cover matters


def test_the_backward_all_to_alls_cover_the_hosts_backward_launches(qwen):
    """The backward has no sync: the combine's gradient is dispatched and the dispatch's combined with the forward's
    handle and token count (NVIDIA/Megatron-LM@44151194 ``fused_a2a.py`` ``HybridEPCombine.backward`` /
    ``HybridEPDispatch.backward``; ``token_dispatcher.py`` ``_HybridEPManager.combine``), so without EP overlap its
    two all-to-alls run on the compute stream while the host launches on, as the forward's do. A host-bound
    backward then lasts its launches with the all-to-alls inside: its compute (the all-to-alls counted apart, under
    ``ep``) is the launches less one cover a MoE layer, and its wait that much shorter; a cover longer than the
    host's excess leaves no backward wait; a GPU-bound backward does not move. The host calls the backward's pair
    as it calls the forward's, one launch each (``calls_host_s``), so its launches include those two."""
    lay = make_layout(ep=8, dp=8, global_batch=64, seq_len=4096, etp=1)  # 48 layers of attention + MoE

    def sc(host, cover):
        return stage_compute(qwen, lay, gpu_compute("H100", overrides={"launch": {"host_s": host}}), cover)

    g = gpu_compute("H100", overrides={"launch": {"host_s": 1e-3}})
    bt = {k: block_time(qwen, lay, g, k) for k in ("*", "E", "embedding", "logits")}
    L = qwen.layers
    gpu_b = sum(n * bt[k].backward_s for k, n in (("*", L), ("E", L), ("embedding", 1), ("logits", 1)))
    host_b = sum(n * bt[k].host_backward_s for k, n in (("*", L), ("E", L), ("embedding", 1), ("logits", 1)))
    assert bt["E"].calls_host_s == pytest.approx([1e-3] * 4)  # H100's x86 host: factor 1 (host_cpu.toml)
    host_b += L * bt["E"].calls_host_s.backward_s  # and the backward's dispatch and combine, one host call each
    bare, covered = sc(1e-3, 0.0), sc(1e-3, 1e-3)
    assert host_b > gpu_b + L * 1e-3  # host-bound even with the cover
    assert bare.backward_s == pytest.approx(host_b)
    assert covered.backward_s == pytest.approx(host_b - L * 1e-3)  # 48 layers x 1 ms of all-to-alls inside
    big = (host_b - gpu_b) / L * 1.01  # more than the host's excess a layer
    assert sc(1e-3, big).backward_s == pytest.approx(gpu_b)
    fast_bare, fast_covered = sc(1e-9, 0.0), sc(1e-9, 1e-3)
    assert fast_covered.backward_s == fast_bare.backward_s  # GPU-bound: nothing to cover
