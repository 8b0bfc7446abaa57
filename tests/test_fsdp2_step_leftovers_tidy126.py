"""tidy126: what ``fsdp_pipeline_sync = "step"`` (section 457) left priced per micro-batch.

1. FSDP2's compute-stream copies. Under PyTorch pipelining a stage module that is an ``FSDPModule`` runs every
   backward with gradient sync and resharding off and reduces after the last (pytorch/pytorch@01386103
   ``torch/distributed/pipelining/stage.py`` ``backward_maybe_with_nosync``, ``_post_backward``). With
   ``reshard_after_forward`` off the units stay unsharded from the run's first forward to its reduction, so each
   unit's all-gather copy-out runs once a run (pytorch/pytorch@010ae4a89516fa3be548ab16dff711414ec12d0b
   ``torch/distributed/fsdp/_fully_shard/_fsdp_param_group.py`` ``unshard``, ``wait_for_unshard``). Each
   unsynced backward instead casts (the run's first: ``FSDPParam.to_accumulated_grad_if_needed``,
   ``.to(reduce_dtype)``) or adds (the others: ``accumulate_unsharded_grad_if_needed``, ``+=``) the new bf16
   gradient into the unsharded fp32 accumulator (``FSDPParamGroup.post_backward``), and the run's one
   ``foreach_reduce`` ``chunk_cat`` copies that fp32 accumulator into the reduce-scatter buffer (``_fsdp_collectives.py``
   at the same commit).
2. The cross-site window: the one-site step exposes the reduce-scatters after the stage's last backward whole, so a
   job across sites leaves its cross-site phase none of that backward either.
"""

import pytest

from small_regions import loss_crossing_s, region_file, spy_dp_crossing, two_sites
from topo.fabric.region import build_region
from topo.training.gpus import gpu_compute
from topo.training.kernels import memory_s
from topo.training.model import load_model
from topo.training.multisite import dp_window_s, estimate_across_sites, loss_fill_s
from topo.training.operators import block_ops, block_time, wgrad_kw
from topo.training.parallel import make_layout

H100 = gpu_compute("H100")
TORCHTITAN = dict(tp=8, pp=2, dp=4, global_batch=64, micro_batch=1, dp_sharding="zero3", wgrad_output="fsdp2",
                  weight_bytes=4.0, gather_bytes=2.0, grad_reduce_bytes=4.0, optimizer_bytes_per_param=8.0,
                  fsdp_reshard_after_forward=False)  # torchtitan's: fp32 params gathered in bf16, fp32 reduce


def _lay(**kw):
    return make_layout(**{**TORCHTITAN, **kw})


def _gemm(model, lay):
    """A weight-gradient GEMM of the MLP block (FSDP2's gradient kernels follow each one)."""
    return next(o for o in block_ops(model, lay, "-") if o.kind == "gemm" and o.weights)


@pytest.mark.parametrize("flushes, reduce_bytes, want", [
    # m = 64 / (4 x 1) = 16 micro-batches; r runs; G = 2 (bf16 gradient), R the reduce dtype's bytes
    (1, 4.0, (1 * (2 + 4 + 2 * 4) + 15 * (2 + 2 * 4)) / 16),  # 10.25: one cast + chunk_cat, 15 adds
    (2, 4.0, (2 * (2 + 4 + 2 * 4) + 14 * (2 + 2 * 4)) / 16),  # 10.5
    (1, 2.0, (1 * (0 + 2 * 2) + 15 * (2 + 2 * 2)) / 16),  # bf16 reduce: no cast, autograd's in-place adds
])
def test_each_backward_accumulates_and_the_run_copies_in_once(flushes, reduce_bytes, want):
    """Bytes per weight-gradient element FSDP2's compute-stream gradient kernels move, a mean per micro-batch:
    per micro-batch ``chunk_cat`` reads the bf16 gradient and writes the reduce dtype (2 + R); once a run, the
    first backward's cast (2 + R, none where R = 2), each other backward's add into the accumulator (2 + R read, R
    written) and one ``chunk_cat`` from the accumulator (R + R)."""
    model = load_model("llama3-8b")
    per_mb = _lay(pipeline_flushes=flushes, grad_reduce_bytes=reduce_bytes)
    once = _lay(pipeline_flushes=flushes, grad_reduce_bytes=reduce_bytes, fsdp_pipeline_sync="step")
    assert wgrad_kw(per_mb, _gemm(model, per_mb))["grad_copy_bytes"] == 2.0 + reduce_bytes
    assert wgrad_kw(once, _gemm(model, once))["grad_copy_bytes"] == pytest.approx(want, rel=1e-12)


def test_the_gathered_weights_are_copied_out_once_a_run():
    """The MLP block's copy-out (``split_with_sizes_copy``: the bf16 gathered weights read and written) and its
    copy-in and ``chunk_cat`` launches run once a run: 1/16 of the per-micro-batch way each micro-batch, the
    saving ``memory_s(15/16 of the bytes)`` and 15/16 of the launch gaps (the MLP carries half its layer's unit)."""
    model = load_model("llama3-8b")
    per_mb, once = _lay(), _lay(fsdp_pipeline_sync="step")
    m, km = per_mb.microbatches, H100.kernels
    a = {o.name: o for o in block_ops(model, per_mb, "-") if o.module == "fsdp"}
    b = {o.name: o for o in block_ops(model, once, "-") if o.module == "fsdp"}
    h, f = 4096, 14336
    mlp = 3 * h * f / 8 + h  # w1, w2, w3 over tp 8, the norm whole
    assert a["fsdp_copy_out"].bytes == pytest.approx(2 * 2 * mlp, rel=1e-12)
    for name in ("fsdp_copy_out", "fsdp_copy_in", "fsdp_copy_out_bwd"):
        assert b[name].bytes == pytest.approx(a[name].bytes / m, rel=1e-12)
        assert b[name].launches == pytest.approx(a[name].launches / m, rel=1e-12)
    assert a["fsdp_copy_out"].launches == a["fsdp_copy_out_bwd"].launches == 0.5  # copy-out; chunk_cat
    ta, tb = block_time(model, per_mb, H100, "-"), block_time(model, once, H100, "-")
    saved = (m - 1) / m
    assert ta.forward_s - tb.forward_s == pytest.approx(memory_s(km, 4 * mlp * saved) + 0.5 * saved * km.launch_gpu_s,
                                                        rel=1e-9)
    # backward: the chunk_cat's launches once a run, the gradient kernels' bytes of the three weight GEMMs
    # (3 h f / tp elements) at 10.25 bytes an element instead of 6
    grads = 3 * h * f / 8
    assert tb.backward_s - ta.backward_s == pytest.approx(
        memory_s(km, (10.25 - 6.0) * grads) - 0.5 * saved * km.launch_gpu_s, rel=1e-9)


def test_the_default_way_is_unchanged():
    """Per micro-batch (NeMo AutoModel's way, and pp 1) every micro-batch gathers and reduces: the copies are the
    unit's whole, the gradient's ``chunk_cat`` 2 + R."""
    model = load_model("llama3-8b")
    lay = _lay(pp=1, dp=8, global_batch=64)
    ops = {o.name: o for o in block_ops(model, lay, "-") if o.module == "fsdp"}
    assert ops["fsdp_copy_out"].launches == 0.5 and ops["fsdp_copy_out_bwd"].launches == 0.5
    assert wgrad_kw(lay, _gemm(model, lay))["grad_copy_bytes"] == 6.0


@pytest.fixture(scope="module")
def region(tmp_path_factory):
    """Two DGX H100 SUs 40 km apart on one 800 Gb/s wave (regions80's)."""
    text = two_sites("t126", "two SUs", "dgx-h100-superpod", 1).replace("waves = 16", "waves = 1")
    return build_region(region_file(tmp_path_factory, text, "t126"))


def test_a_step_job_across_sites_leaves_its_crossing_no_backward(region, monkeypatch):
    """The torchtitan layout over two sites (each site's share dp 2, 16 micro-batches). Per micro-batch, the share's
    in-site reduce-scatters hide behind the backwards and leave the cross-site phase a window ``w > 0`` of them
    (regions80). Under ``step`` the one-site step exposes them whole (after the stage's last backward), and by the
    same rule (``ParallelLayout.dp_reduce_behind_backward``) the cross-site phase gets no backward: ``w = 0``, the
    hierarchical phase exposed whole after the share's step, and the logged loss's crossing beyond the last
    stage's fill (``loss_fill_s``). It took the last micro-batch's backward before (rev108, Left 1)."""
    model = load_model("llama3-8b")
    for sync in ("microbatch", "step"):
        seen = spy_dp_crossing(monkeypatch)
        job = estimate_across_sites(region, model, _lay(fsdp_pipeline_sync=sync))
        one, lay, cross = seen["one"], seen["lay"], seen["cross"]
        assert lay.dp == 2 and lay.microbatches == 16
        rs = next(c for c in one.comm if c.dim == "dp" and c.collective == "reduce_scatter")
        if sync == "microbatch":
            assert rs.exposed_s < rs.time_s and dp_window_s(one, lay) > 0
            continue
        assert rs.exposed_s == pytest.approx(rs.time_s, rel=1e-12)  # the one-site rule
        assert dp_window_s(one, lay) == 0.0  # the same rule across the sites
        assert cross.name == "hierarchical" and cross.gather_phase.time_s == 0.0
        loss = max(0.0, loss_crossing_s(region, job) - loss_fill_s(lay, one.breakdown_s["compute"]))
        assert job.strategies[0].strategy == "dp"
        assert job.strategies[0].exposed_s == pytest.approx(cross.phase.time_s + loss, rel=1e-9)
