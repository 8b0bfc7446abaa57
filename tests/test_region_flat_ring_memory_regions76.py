"""regions76 (section 357, item 1): a region's memory per GPU follows the form its gradients cross by.

Megatron-Core's distributed optimizer shards its state over one instance's data x context ranks
(NVIDIA/Megatron-LM@d98e8a64ddf34856e74b24714e3bedb2f5a39553 megatron/core/parallel_state.py lines 927-929:
``intra_partial_data_parallel_size = data_parallel_size * context_parallel_size //
num_distributed_optimizer_instances``; distributed_data_parallel.py lines 283-299: the buffers are sharded over
``intra_dp_cp_group``). NCCL's flat cross-DC ring is the default, one instance over the job (``D`` ranks); the
hierarchical reduction is one instance a site (NeMo's multi-DC run, ``D / K`` ranks).

Closed form, Llama 3 8B (``N`` = its parameters) at TP 8, dp 4 over two sites (``K = 2``): Adam's FP32 main weights
and two moments, 12 bytes a parameter (Rajbhandari et al. 2020), over ``tp x ranks``: ``12 N / (8 x 4)`` with the flat
ring, ``12 N / (8 x 2)`` with the hierarchical form (the norms' few parameters, held whole on each TP rank, within
1e-3). FSDP shards the BF16 weights (2 bytes) and FP32 gradients (4) the same way.
"""

import pytest

from small_regions import region_file, two_sites
from topo.cli.region_train import render_across_sites
from topo.fabric.region import build_region
from topo.training.model import load_model
from topo.training.multisite import estimate_across_sites
from topo.training.parallel import make_layout

TEXT = two_sites("mem76", "two SUs", "dgx-h100-superpod", 1)
FLAT = '[nccl]\ndp_reduction = "flat_ring"\n'
MODEL = load_model("llama3-8b")


def _job(tmp_path_factory, nccl: str, across: str = "dp", **layout):
    region = build_region(region_file(tmp_path_factory, TEXT + nccl, "mem76"))
    return estimate_across_sites(region, MODEL, make_layout(tp=8, dp=4, pp=2 if across == "pp" else 1,
                                                            global_batch=8, seq_len=4096, **layout), across=across)


def test_the_flat_ring_shards_the_optimizer_over_every_site(tmp_path_factory):
    """ZeRO-1: the flat ring's optimizer state is 12 N / (8 x 4), the hierarchical form's 12 N / (8 x 2); the share's
    step (``one_site``) carries its job's (regions82: one memory a job; before, a site's whatever the form); the JSON
    and the text say which."""
    N = MODEL.total_params
    flat, hier = _job(tmp_path_factory, FLAT), _job(tmp_path_factory, "")
    assert flat.memory["optimizer_bytes"] == pytest.approx(12 * N / 32, rel=1e-3)
    assert hier.memory["optimizer_bytes"] == pytest.approx(12 * N / 16, rel=1e-3)
    assert flat.one_site["memory"] == flat.memory and hier.one_site["memory"] == hier.memory
    assert flat.memory["total_bytes"] == pytest.approx(hier.memory["total_bytes"] - 12 * N / 32, rel=1e-3)
    assert "over 4 data x context ranks (one optimizer instance over every site" in flat.to_dict()["memory_sharding"]
    assert "over 2 data x context ranks (one optimizer instance a site" in hier.memory_sharding
    line = next(x for x in render_across_sites(flat).splitlines() if x.startswith("one site's share: memory"))
    assert line.endswith(flat.memory_sharding)


def test_fsdp_shards_weights_and_gradients_over_every_site(tmp_path_factory):
    """FSDP: weights 2 N / 32 and gradients 4 N / 32 with the flat ring, against / 16 with the hierarchical form."""
    N = MODEL.total_params
    flat, hier = (_job(tmp_path_factory, n, dp_sharding="fsdp") for n in (FLAT, ""))
    for key, per_param in (("weights_bytes", 2), ("gradients_bytes", 4), ("optimizer_bytes", 12)):
        assert flat.memory[key] == pytest.approx(per_param * N / 32, rel=1e-3), key
        assert hier.memory[key] == pytest.approx(per_param * N / 16, rel=1e-3), key


@pytest.mark.parametrize("nccl", [FLAT, ""])
def test_pipeline_across_the_sites_shards_over_a_stages_replicas(tmp_path_factory, nccl):
    """Pipeline stages across the sites (pp 2 over two sites): each site holds one stage of all 4 replicas, so that
    stage's data-parallel group, its optimizer instance, is the job's 4 ranks, all inside one site
    (:func:`topo.training.multisite.pp_boundary_ranks`: ``tp x cp x dp`` of the job at the boundary stage), whatever
    the dp form: ``12 N / (tp 8 x pp 2 x 4)``. It was the share's 2 ranks, ``12 N / 32`` (walk39, findings
    section 407: 0.6 GB for 0.3 GB on Llama 3 70B at tp 8 pp 4 over two-site-h100)."""
    job = _job(tmp_path_factory, nccl, across="pp")
    assert job.memory["optimizer_bytes"] == pytest.approx(12 * MODEL.total_params / 64, rel=1e-3)
    assert job.memory == job.one_site["memory"]
    assert "over 4 data x context ranks (data parallelism inside each site: pp across the sites" in job.memory_sharding
