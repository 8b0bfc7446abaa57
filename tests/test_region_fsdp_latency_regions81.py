"""regions81 (section 378, item 2): FSDP's crossing pays its ring's latency in every micro-batch.

PyTorch FSDP reduce-scatters (and, with ``reshard_after_forward``, gathers) each unit in every micro-batch's
backward outside ``no_sync`` (pytorch/pytorch@3ade90a6aaa939cd6238e314c321b9f920db1471
torch/distributed/fsdp/_runtime_utils.py ``_post_backward_hook``, ``_pre_backward_hook``), so its crossing of the
sites is ``m`` collectives a step, each a ring of its own: each pays the ring's hops once. Closed form: the phase's
latency is ``m x steps x hop`` (``steps`` one collective's: ``2(K-1)`` for the hierarchical form, ``2(D-1)`` for the
flat ring; ``hop`` one crossing, up from a GPU to the DCI, the route, down again: the span's ``40 km x 4.9 us + 50
us`` and each site's NIC and tiers up to the attach tier), its bandwidth time the same as in one collective; an edge
bucket pays one collective's latency. ZeRO-1 (its buckets reduce once, after the last backward) keeps one pass.
"""

import pytest

from small_regions import loss_crossing_s, region_file, spy_dp_crossing, two_sites
from topo.fabric.region import build_region
from topo.training.model import load_model
from topo.training.multisite import dp_window_s, estimate_across_sites
from topo.training.parallel import make_layout

MODEL = load_model("llama3-8b")
FLAT = '[nccl]\ndp_reduction = "flat_ring"\n'


def _region(tmp_path_factory, nccl: str):
    text = two_sites("lat81", "two SUs", "dgx-h100-superpod", 1).replace("waves = 16", "waves = 1") + nccl
    return build_region(region_file(tmp_path_factory, text, "lat81"))


@pytest.fixture(scope="module")
def regions(tmp_path_factory):
    return {"hierarchical": _region(tmp_path_factory, FLAT.replace("flat_ring", "hierarchical")),  # regions82: set
            "flat_ring": _region(tmp_path_factory, FLAT)}


def _hop_s(region) -> float:
    """One crossing, one way: up from a GPU to the DCI at one site, the span (distance x per-km + equipment), down
    at the other."""
    span = 40 * 4.9e-6 + 50e-6
    return region.up_latency_s(0) + span + region.up_latency_s(1)


def _run(region, monkeypatch, sharding: str, batch: int):
    seen = spy_dp_crossing(monkeypatch)
    lay = make_layout(tp=8, dp=4, global_batch=batch, micro_batch=8, seq_len=4096, dp_sharding=sharding)
    return estimate_across_sites(region, MODEL, lay), seen


@pytest.mark.parametrize("form, ring_steps", [("hierarchical", 2), ("flat_ring", 6)])
@pytest.mark.parametrize("sharding, batch, passes", [("fsdp", 64, 2), ("fsdp", 128, 4), ("zero1", 128, 1)])
def test_every_micro_batch_s_collective_pays_the_ring_s_latency(regions, monkeypatch, form, ring_steps, sharding,
                                                                batch, passes):
    """The phase's latency is ``passes x ring_steps x hop`` (two sites: the hierarchical ring's ``2(K-1) = 2``
    steps; the flat ring over 4 replicas' ``2(D-1) = 6``)."""
    job, seen = _run(regions[form], monkeypatch, sharding, batch)
    cross = seen["cross"]
    assert cross.name == form and cross.passes == passes and cross.steps == ring_steps
    assert cross.phase.latency_s == pytest.approx(passes * ring_steps * _hop_s(regions[form]), rel=1e-9)
    assert job.strategies[0].latency_s == pytest.approx(cross.phase.latency_s, rel=1e-12)


@pytest.mark.parametrize("batch", [64, 128])
def test_fsdp_exposes_every_pass_s_latency_beyond_the_backwards(regions, monkeypatch, batch):
    """The hierarchical form's phase (bandwidth plus every pass's latency) exposes what outlasts every backward's
    window, and the logged loss's crossing: ``m x 2 x hop + bandwidth - w + loss``."""
    region = regions["hierarchical"]
    job, seen = _run(region, monkeypatch, "fsdp", batch)
    one, lay, cross = seen["one"], seen["lay"], seen["cross"]
    w = dp_window_s(one, lay)
    D = lay.microbatches * 2 * _hop_s(region) + cross.phase.bandwidth_s
    assert 0 < w < D
    assert job.strategies[0].exposed_s == pytest.approx(D - w + loss_crossing_s(region, job), rel=1e-9)
