"""regions81 (section 378, item 3): ``nccl.dp_reduction = "auto"`` takes the faster form in which the job fits.

NCCL's flat cross-DC ring runs one distributed-optimizer instance over the job, its ZeRO state sharded over every
site's data-parallel ranks; the hierarchical form one a site (NVIDIA/Megatron-LM@d98e8a64ddf34856e74b24714e3bedb2f5a39553
megatron/core/distributed/distributed_data_parallel_config.py line 34, ``num_distributed_optimizer_instances``). A
job that does not fit in GPU memory does not run whatever its speed, so auto takes the faster of the forms it fits
in, and says so. Closed form: Llama 3 70B (``N`` parameters) at TP 8, dp 4 over two sites (2 replicas a site) on one
800 Gb/s wave, ZeRO-2: the optimizer state (Adam's FP32 main weights and moments, 12 bytes a parameter) and the FP32
gradients (4) sharded, ``16 N / (8 x 2)`` a GPU with a site's instance (does not fit an H100's 80 GiB), ``16 N / (8 x
4)`` under the flat ring (fits), ``16 N / 32`` less; the hierarchical form's step is the shorter (the ring's crossing
carries the parameters' gather too), so auto took the hierarchical form and the job did not fit. regions82: the job
was section 370's (Llama 3 8B, ZeRO-3, one GPU a site), whose flat ring now wins on its step (auto compares the steps,
``test_region_dp_form_step_regions82.py``), so it no longer tells the memory rule.
"""

import pytest

from small_regions import built_region, two_sites
from topo.training.model import load_model
from topo.training.multisite import estimate_across_sites
from topo.training.parallel import make_layout

MODEL = load_model("llama3-70b")
TEXT = two_sites("form81", "two SUs", "dgx-h100-superpod", 2).replace("waves = 16", "waves = 1")
FORM = '[nccl]\ndp_reduction = "{}"\n'
LAY = make_layout(tp=8, pp=1, dp=4, global_batch=64, seq_len=4096, dp_sharding="zero2")


@pytest.fixture(scope="module")
def jobs(tmp_path_factory):
    return {form: estimate_across_sites(built_region(tmp_path_factory, TEXT + FORM.format(form), f"form81-{form}"),
                                        MODEL, LAY) for form in ("auto", "hierarchical", "flat_ring")}


def test_auto_takes_the_form_the_job_fits_in(jobs):
    """Auto runs the flat ring's job (its step, memory and fit), not the hierarchical form's, which steps faster
    but does not fit: ``16 N / 32`` more a GPU."""
    auto, ring, hier = jobs["auto"], jobs["flat_ring"], jobs["hierarchical"]
    assert not hier.fits and ring.fits and hier.step_time_s < ring.step_time_s
    assert hier.memory["total_bytes"] - ring.memory["total_bytes"] == pytest.approx(16 * MODEL.total_params / 32,
                                                                                    rel=1e-3)
    assert auto.fits and auto.dp_reduction == "flat_ring" and auto.dp_reduction_by_memory
    assert auto.memory == ring.memory and auto.step_time_s == pytest.approx(ring.step_time_s, rel=1e-12)


def test_auto_says_so_in_one_line_and_in_json(jobs):
    """One note names both forms and why; ``--json`` carries the form and ``dp_reduction_by_memory``."""
    auto = jobs["auto"]
    said = [n for n in auto.notes if "does not fit in GPU memory in that form" in n]
    assert len(said) == 1 and "NCCL's flat cross-DC ring" in said[0] and "hierarchical reduction" in said[0]
    d = auto.to_dict()
    assert d["dp_reduction"] == "flat_ring" and d["dp_reduction_by_memory"] is True


@pytest.mark.parametrize("form", ["hierarchical", "flat_ring"])
def test_a_form_the_region_sets_is_kept(jobs, form):
    """``nccl.dp_reduction`` set: that form, fitting or not, and no memory note."""
    job = jobs[form]
    assert job.dp_reduction == form and not job.dp_reduction_by_memory
    assert not any("does not fit in GPU memory in that form" in n for n in job.notes)
