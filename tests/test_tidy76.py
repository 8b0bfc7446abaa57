"""tidy76: small defects the last sessions listed (findings section 353), one test per fix."""
import numpy as np
import pytest

import topo
import topo.training.step as step
from nccl_text import render
from topo.calibrate.compare import compare_run
from topo.calibrate.parse import parse_file
from topo.calibrate.setup import setup_from_run
from topo.cli.main import main
from topo.engine.algorithms.ring import nics_per_run
from topo.errors import TopoError
from topo.training.model import Block, load_model
from topo.training.parallel import check_layout, make_layout
from topo.training.step import REPLICATED_GRADS_PHASE, estimate_step, step_traffic

LLAMA70_64 = ["train", "dgx-h100-superpod", "--unset", "cluster.num_units", "--set", "cluster.num_gpus=64", "--set",
              "fabric.servers_per_unit=8", "--model", "llama3-70b", "--tp", "4", "--pp", "8", "--dp", "2",
              "--global-batch", "128", "--seq", "8192"]
SIZES = [2**i for i in range(10, 31)]  # 1 KiB .. 1 GiB


def test_pipeline_overlap_at_vpp_1_is_refused_as_megatron_core_refuses_it(capsys):
    # NVIDIA/Megatron-LM@d98e8a64 megatron/core/pipeline_parallel/schedules.py lines 2181-2184:
    # forward_backward_pipelining_without_interleaving raises ValueError when config.overlap_p2p_comm is set
    m = load_model("llama3-70b")
    with pytest.raises(TopoError) as e:
        check_layout(m, make_layout(tp=4, pp=8, dp=2, global_batch=128, overlap_pp=True), gpus=64)
    assert e.value.key == "overlap_pp" and "vpp > 1" in str(e.value)
    check_layout(m, make_layout(tp=4, pp=8, vpp=5, dp=2, global_batch=128, overlap_pp=True), gpus=64)
    check_layout(m, make_layout(tp=4, pp=8, dp=2, global_batch=128, overlap_pp=True,
                                pipeline_schedule="dualpipe"), gpus=64)  # DeepSeek's own schedule overlaps them
    assert main([*LLAMA70_64, "--overlap", "pp=on"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--overlap" in err and "overlap_pp" in err and "Traceback" not in err


def test_a_run_compared_twice_carries_its_collective_note_once(tmp_path):
    # walk32's note (run_collective): a log naming all_reduce_perf beside -c all_gather; comparing the same parsed
    # run twice (two profiles, or compare then calibrate) appended it twice
    log = tmp_path / "ar.log"
    log.write_text(render("all_reduce", ["a", "b"], 8, "NVIDIA H100 80GB HBM3", SIZES,
                          [1e-4 * (1 + s / 2**24) for s in SIZES]))
    run = parse_file(log)[0]
    setup = setup_from_run(run, spec="dgx-h100-superpod")
    first = compare_run(run, setup, collective="all_gather", several=True)
    second = compare_run(run, setup, collective="all_gather", several=True)
    assert first.notes == second.notes
    assert sum("is for the logs that name none" in n for n in second.notes) == 1


class _Shape:
    """A node shape whose NICs carry the ids given (what :func:`nics_per_run` reads of a shape)."""

    def __init__(self, nics):
        self.nics = np.asarray(nics)

    def nic_of(self, ranks):
        return self.nics[ranks]


def test_nics_per_run_counts_distinct_nics_for_any_ids():
    # two runs of two ranks: NICs {-1} and {0, -2}, then {7} and {3, 9}: 1 and 2 distinct NICs each (by hand)
    ranks, sizes = np.arange(4), np.array([2, 2])
    assert nics_per_run(_Shape([-1, -1, 0, -2]), ranks, sizes).tolist() == [1, 2]
    assert nics_per_run(_Shape([7, 7, 3, 9]), ranks, sizes).tolist() == [1, 2]
    assert nics_per_run(_Shape([-5, -4, -5, -5]), ranks, sizes).tolist() == [2, 1]


def _deployment_line(capsys, *flags) -> str:
    assert main(["plan", "dgx-h100-superpod", *flags, "--no-collectives"]) == 0
    return next(ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("deployment:"))


def test_a_small_clusters_deployment_line_gives_its_own_build_days(capsys):
    # walk33 (section 345): 64 GPUs printed "1 quarter at a pace of 74,846 GPUs per quarter" and nothing of how long
    # its own GPUs take; at the catalog's pace (xAI Colossus, 100,000 GPUs in 122 days) 64 GPUs take
    # 64 / 100,000 x 122 = 0.078 days; the superpod's own GPUs at 100,000 in 200 days: GPUs / 100,000 x 200 days
    small = _deployment_line(capsys, "--unset", "cluster.num_units", "--set", "cluster.num_gpus=64",
                             "--set", "fabric.servers_per_unit=8")
    assert f"its 64 GPUs in {64 / 100_000 * 122:.2g} days" in small and "0.078 days" in small
    assert "a pace published for a 100,000-GPU build" in small
    big = _deployment_line(capsys, "--set", "plan.deployment.ramp_days=200")
    gpus = int(big.split("its ")[1].split(" GPUs")[0].replace(",", ""))
    assert f"its {gpus:,} GPUs in {gpus / 100_000 * 200:,.1f} days" in big


def _replicated(model, lay, stage):
    return [it for it in step_traffic(model, lay, stage) if it["phase"] == REPLICATED_GRADS_PHASE]


def test_sequence_parallel_replicated_gradients_are_all_reduced_over_tp_once_a_step():
    # NVIDIA/Megatron-LM@d98e8a64 megatron/core/distributed/finalize_model_grads.py lines 416-485 (called at line
    # 661): the gradients of parameters marked sequence_parallel summed over the TP group in one flattened buffer
    m = load_model("llama3-70b")  # 80 layers, h 8,192, RMSNorm: a norm of h per block, the final norm on the last stage
    lay = make_layout(tp=4, pp=8, dp=2, global_batch=128, sequence_parallel=True)
    (first,) = _replicated(m, lay, 0)
    assert (first["collective"], first["groups"], first["calls"]) == ("all_reduce", "tp", 1.0)
    assert first["size_bytes"] == 10 * 2 * 8192 * lay.grad_bytes  # 10 layers a stage, two norms each, FP32 main_grad
    (last,) = _replicated(m, lay, 7)
    assert last["size_bytes"] == (10 * 2 + 1) * 8192 * lay.grad_bytes
    assert not _replicated(m, lay.model_copy(update={"sequence_parallel": False}), 0)  # replicated input: equal grads
    # DeepSeek-V3 (MLA, TE's duplicated down projections, transformer/multi_latent_attention.py lines 526-527,
    # 573-574; h 7,168, q_lora 1,536, kv_lora 512, rope 64; 256 experts' router, moe/router.py line 85)
    d = load_model("deepseek-v3-671b")
    lay = make_layout(tp=2, pp=8, dp=8, ep=8, global_batch=64, sequence_parallel=True)
    c = step._stage_counts(d, lay, 0)
    att, blocks = c[Block.ATTENTION], c[Block.ATTENTION] + c[Block.MLP] + c[Block.MOE]
    h = 7168
    mla = (h + 1) * 1536 + h * (512 + 64) + 512
    (dsv3,) = _replicated(d, lay, 0)
    assert dsv3["size_bytes"] == (h * blocks + h * 256 * c[Block.MOE] + att * mla) * lay.grad_bytes


def test_the_replicated_gradients_all_reduce_is_exposed_whole():
    # blocking in finalize_model_grads, after the gradients' data-parallel sync, before the optimizer
    fab = topo.build_fabric(topo.load_spec("dgx-h100-superpod", []))
    lay = make_layout(tp=8, pp=2, dp=4, global_batch=64, sequence_parallel=True, overlap_tp=True)
    r = estimate_step(fab, load_model("llama3-70b"), lay, contention=False)
    (it,) = [c for c in r.comm if c.dim == "tp" and c.calls_per_step == 1 and c.collective == "all_reduce"
             and c.size_bytes == (40 * 2 + 1) * 8192 * lay.grad_bytes]
    assert it.exposed_s == it.time_s > 0
