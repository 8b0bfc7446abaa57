"""DeepEP V1's four calls a layer, each at its own kind's traced host time, where the host line issues it.

deepseek-ai/profile-data@4496024 ``train.json`` (PyTorch Profiler, NVIDIA H800, rank 0 of EP64), DeepEP's C++
entries less the dispatch's busy-wait on the received counts, medians over its 4 MoE layers
(``host_calls.toml [call.deepep_v1_call]``, docs/calibration-findings.md sections 244 and 256): the forward
dispatch 245 us (``get_dispatch_layout`` 56 + ``dispatch`` 189), the forward combine 67 us, the dispatch's
backward (a combine) 54 us, the combine's backward (a cached dispatch) 88 us. H100's host is the reference CPU
(``host_cpu.toml``: factor 1), so the figures reach the line as traced."""

import pytest
from conftest import every_kernel_a_call

from topo.training.gpus import gpu_compute
from topo.training.model import load_model
from topo.training.operators import block_ops, block_time, stage_compute
from topo.training.parallel import make_layout

DISPATCH_F, COMBINE_F, DISPATCH_B, COMBINE_B = 245e-6, 67e-6, 54e-6, 88e-6  # the trace's medians


@pytest.fixture(scope="module")
def qwen():
    return load_model("qwen3-30b-a3b")  # 48 layers of attention + MoE (128 experts, 16 a GPU at ep 8)


def _v1(**upd):
    return make_layout(ep=8, dp=8, global_batch=64, seq_len=4096, etp=1, ep_dispatcher="deepep",
                       ep_flex_backend="deepep", **upd)


def test_a_gpu_bound_dropless_layer_waits_for_the_round_trip_and_the_forward_dispatch_call(qwen):
    """GPU-bound (0.1 us a launch), a dropless layer's GPU drains at the sync and idles for its round trip, the
    forward dispatch call (the host makes it only once the sync has returned) and the permutation's first launch;
    the forward combine runs on the host while the experts run on the GPU, and the backward's calls are hidden:
    the step's host wait is 48 x (sync_s + 245 us + 0.1 us), not the four calls' mean (113.5 us)."""
    host_s = 1e-7
    g = gpu_compute("H100", overrides={"launch": {"host_s": host_s}})
    wait = stage_compute(qwen, _v1(), g).by_module_s.get("host", 0.0)
    assert g.kernels.sync_s > 0
    assert wait == pytest.approx(qwen.layers * (g.kernels.sync_s + DISPATCH_F + host_s), rel=1e-9)


def test_a_host_bound_layer_pays_the_forwards_two_calls_forward_and_the_backwards_two_backward(qwen):
    """Host-bound (1 ms a launch, every kernel's GPU time shorter): a synced layer lasts its round trip, every
    forward launch, the forward dispatch and combine calls (245 + 67 = 312 us) and the GPU time of the last
    kernel before the sync (operators._synced_layer_wait_s' flow line); the backward lasts its launches and the
    backward's two calls (54 + 88 = 142 us) a layer. The ends (embedding, loss) run unsynced, bound by the larger
    of their GPU and host time. With the mean put back each pass would see 227 us."""
    g = gpu_compute("H100", overrides={"launch": every_kernel_a_call(1e-3)})  # the test counts launches
    lay = _v1()
    st = stage_compute(qwen, lay, g)
    bt = {k: block_time(qwen, lay, g, k) for k in ("*", "E", "embedding", "logits")}
    L, e = qwen.layers, bt["E"]
    launches = sum(op.launches for k in "*E" for op in block_ops(qwen, lay, k) if op.passes != "backward")
    assert bt["*"].host_s + e.host_s == pytest.approx(launches * 1e-3)
    h_last, g_last, n_last = e.launch_seq[e.sync_at - 1]
    assert h_last > g_last
    ends_gpu = bt["embedding"].forward_s + bt["logits"].forward_s
    ends_host = bt["embedding"].host_s + bt["logits"].host_s
    layer = g.kernels.sync_s + launches * 1e-3 + DISPATCH_F + COMBINE_F + g_last / n_last
    assert st.forward_s == pytest.approx(L * layer + max(ends_gpu, ends_host), rel=1e-9)
    host_b = sum(n * bt[k].host_backward_s for k, n in (("*", L), ("E", L), ("embedding", 1), ("logits", 1)))
    gpu_b = sum(n * bt[k].backward_s for k, n in (("*", L), ("E", L), ("embedding", 1), ("logits", 1)))
    assert host_b > gpu_b
    assert st.backward_s == pytest.approx(host_b + L * (DISPATCH_B + COMBINE_B), rel=1e-9)


def test_a_recomputed_moe_module_replays_a_fresh_forward_dispatch(qwen):
    """Recomputing ``moe`` replays the router, its sync and a dispatch without a handle (Megatron-Core's
    ``fused_dispatch`` calls ``get_dispatch_layout`` and ``dispatch`` again): GPU-bound, the replay's line waits
    for the round trip and the forward dispatch call once more a layer (and the permutation's first launch)."""
    host_s = 1e-7
    g = gpu_compute("H100", overrides={"launch": {"host_s": host_s}})
    base = stage_compute(qwen, _v1(), g).by_module_s.get("host", 0.0)
    rec = stage_compute(qwen, _v1(recompute="selective", recompute_modules=("moe",)), g).by_module_s.get("host", 0.0)
    assert rec - base == pytest.approx(qwen.layers * (g.kernels.sync_s + DISPATCH_F + host_s), rel=1e-6)
