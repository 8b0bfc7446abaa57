"""2021 Megatron-LM's ``--fp16`` per-step work (sc21left113, issue 29, findings 428): PyTorch's own gradient
accumulation into ``param.grad`` (``wgrad_output = "autograd"``) and the fp16 optimizer's copy into fp32 main
gradients and unscale / inf check (``loss_scaling``).

Sources: pytorch/pytorch v1.8.0 ``torch/csrc/autograd/functions/accumulate_grad.h`` (the first gradient stolen,
later ones ``variable_grad += new_grad`` in place); NVIDIA/Megatron-LM@a8d172b3 ``megatron/optimizer/optimizer.py``
lines 283-339 (``zero_grad(set_to_none=True)``, ``model_param.grad.float()``,
``torch._amp_foreach_non_finite_check_and_unscale_``); @de7dc40f88 ``examples/sc21/CONFIG.sh`` line 54 ``--fp16``.
"""

import sys

import pytest

from conftest import ROOT

import topo
from topo.errors import TopoError
from topo.training.gpus import gpu_compute
from topo.training.kernels import memory_s
from topo.training.memory import stage_params
from topo.training.model import load_model
from topo.training.operators import _gemm_shapes, block_ops, block_time_key, op_time_s, wgrad_kw
from topo.training.parallel import make_layout
from topo.training.step import estimate_step

sys.path.insert(0, str(ROOT / "benchmarks"))
from training_accuracy import _paper_setups  # noqa: E402


@pytest.fixture(scope="module")
def a100():
    return gpu_compute("A100")


@pytest.fixture(scope="module")
def h100_fabric():
    return topo.build_fabric(topo.load_spec("dgx-h100-superpod"))


def _lay(**kw):
    base = dict(tp=8, dp=16, global_batch=64, grad_bytes=2, wgrad_output="autograd")
    return make_layout(**{**base, **kw})


@pytest.mark.parametrize("mb, m", [(1, 4), (4, 1)])
def test_autograd_adds_each_micro_batch_but_the_first(a100, mb, m):
    """The weight-gradient GEMM writes a new 2-byte gradient; on m - 1 of m micro-batches an add reads it (2) and
    reads and writes ``param.grad`` (2 + 2): (2 + 2 x 2) (m - 1) / m bytes an element more than a gradient
    written once (4.5 at m = 4, 0 at m = 1: the first gradient is stolen, no copy)."""
    lay = _lay(micro_batch=mb)
    assert lay.microbatches == m
    model = load_model("llama3-8b")
    op = next(o for o in block_ops(model, lay, "-") if o.name == "fc1")
    M, N, K = _gemm_shapes(op)["wgrad"]
    kw = dict(backward=True)
    got = op_time_s(op, a100, "bf16", **kw, **wgrad_kw(lay, op))
    once = op_time_s(op, a100, "bf16", **kw, grad_bytes=2.0, grad_once=True)
    want = memory_s(a100.kernels, (2 + 2 * 2) * (m - 1) / m * M * N * op.groups)
    assert got - once == pytest.approx(want, rel=1e-9)
    if m > 1:
        assert want > 0


def test_fp16_optimizer_bytes(h100_fabric):
    """2021's fp16 optimizer over ``param.grad``: 34 (fused Adam, its buffer zeroed) - 4 (set_to_none: no zeroing)
    + 2 + 4 (``param.grad.float()``: fp16 read, fp32 written) + 8 (unscale and inf check: fp32 read and written)
    = 44 bytes a parameter; the default layout's 34."""
    m, gpu = load_model("llama3-8b"), gpu_compute("H100")
    for lay, per in ((make_layout(tp=8, dp=16, global_batch=64), 34.0),
                     (_lay(loss_scaling=True), 34.0 - 4 + (2 + 4) + (4 + 4)),
                     (_lay(), 34.0 - 4 + (2 + 4)),
                     (make_layout(tp=8, dp=16, global_batch=64, loss_scaling=True), 34.0 + 8)):
        r = estimate_step(h100_fabric, m, lay)
        dense, _, _ = stage_params(m, lay)[0]
        assert r.breakdown_s["optimizer"] == pytest.approx(memory_s(gpu.kernels, dense / 16 * per), rel=1e-9)


def test_block_key_reads_the_micro_batches_under_autograd():
    """The add's share depends on m (global batch / (dp x micro-batch)), which the block cache must key."""
    assert block_time_key(_lay(global_batch=64)) != block_time_key(_lay(global_batch=128))
    plain = dict(tp=8, dp=16, grad_bytes=2)
    assert block_time_key(make_layout(global_batch=64, **plain)) == block_time_key(make_layout(global_batch=128, **plain))


def test_sc21_rows_run_2021s_fp16_path():
    rows = [s for s in _paper_setups() if s["run"].startswith("megatron_")]
    assert len(rows) == 10
    for s in rows:
        assert s["lay"].wgrad_output == "autograd" and s["lay"].loss_scaling is True, s["run"]


def test_bad_values_one_line():
    for kw in (dict(loss_scaling="maybe"), dict(wgrad_output="autograd2")):
        with pytest.raises(TopoError) as e:
            make_layout(tp=1, dp=1, global_batch=1, **kw)
        msg = str(e.value)
        assert "\n" not in msg and next(iter(kw)) in msg

