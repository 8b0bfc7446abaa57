"""Data parallelism's overlap rule: the gradient reduction hides behind the last micro-batch's backward except its
last bucket (Megatron-LM's 40M-parameter buckets), which can only start when the backward ends."""

import pytest

import topo
from topo.training.comm import CommEngine
from topo.training.mapping import map_layout
from topo.training.model import load_model
from topo.training.parallel import make_layout
from topo.training.step import estimate_step


@pytest.fixture(scope="module")
def pod():
    return topo.build_fabric(topo.load_spec("dgx-h100-superpod"))


def test_the_last_gradient_bucket_stays_exposed_when_the_rest_hides(pod):
    # llama3-8b, tp 4 x dp 256: the 4 GB gradient all-reduce (~90 ms) fits inside the last backward; what is left
    # exposed is the all-reduce of the last bucket alone, 40M parameters x 2 bytes on the same 4 groups of 256
    m = load_model("llama3-8b")
    # bf16 gradients (grad_bytes=2: the 4 GB this test is about; Megatron's default keeps fp32 main_grad, 8 GB)
    lay = make_layout(tp=4, dp=256, global_batch=2048, dp_sharding="none", grad_bytes=2.0)
    engine = CommEngine(pod)
    r = estimate_step(pod, m, lay, engine=engine)
    (dp,) = [c for c in r.comm if c.dim == "dp"]
    groups = map_layout(lay, pod.spec.gpus_per_domain, pod.layout.num_gpus).groups("dp")
    last = engine.time("all_reduce", groups, lay.dp_bucket_params * lay.grad_bytes).time_s
    assert dp.collective == "all_reduce" and dp.time_s > 10 * last
    assert dp.exposed_s == pytest.approx(last, rel=1e-12) and r.breakdown_s["dp"] == pytest.approx(last, rel=1e-12)
    # without overlap the whole reduction is exposed
    off = estimate_step(pod, m, make_layout(tp=4, dp=256, global_batch=2048, dp_sharding="none", overlap_dp=False,
                                            grad_bytes=2.0), engine=engine)
    assert off.breakdown_s["dp"] == pytest.approx(dp.time_s, rel=1e-12)
