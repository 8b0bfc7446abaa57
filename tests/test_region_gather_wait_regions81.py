"""regions81 (section 378, item 1): under NCCL's flat cross-DC ring the parameters' gather waits for every site's
optimizer.

One distributed-optimizer instance over the job (the flat ring): each rank steps its own shard, then the ring
gathers the updated parameters over every site's ranks (NVIDIA/Megatron-LM@d98e8a64ddf34856e74b24714e3bedb2f5a39553
megatron/core/distributed/param_and_grad_buffer.py ``start_param_sync``), so the gather, and the next forward it
feeds, starts at the slowest site's optimizer end. Closed form, two unlike sites: A (step ``T``, optimizer ``o``)
and B (its forwards and backwards ``delta`` shorter, its optimizer ``Delta`` longer: step ``T + Delta - delta``,
optimizer ``o + Delta``). A waits ``Delta`` for B's optimizer, B waits none, so the job steps at A's step plus
``Delta`` plus what the crossing exposes at A: the alike sites' step (both ``(T, o)``) plus ``Delta``, where
without the wait it would be ``Delta - delta``. The hierarchical form (each site gathers inside its own instance)
and DDP (no gather crosses) wait for none.
"""

import pytest

from small_regions import region_file, two_sites
from topo.fabric.region import build_region
from topo.training import multisite
from topo.training.model import load_model
from topo.training.multisite import SiteReady, dp_gather_window_s, dp_window_s, estimate_across_sites, gather_waits_s
from topo.training.parallel import make_layout

MODEL = load_model("llama3-8b")
DELTA_S, delta_S = 0.2, 0.1


@pytest.fixture(scope="module")
def region(tmp_path_factory):
    text = two_sites("gw81", "two SUs", "dgx-h100-superpod", 1).replace("waves = 16", "waves = 1")
    return build_region(region_file(tmp_path_factory, text, "gw81"))


def _dp_call(region, monkeypatch, sharding: str) -> tuple:
    """The arguments ``estimate_across_sites`` hands ``multisite._dp`` for a job of ``sharding``."""
    calls, real = [], multisite._dp

    def spy(*a, **k):
        calls.append(a)
        return real(*a, **k)

    monkeypatch.setattr(multisite, "_dp", spy)
    lay = make_layout(tp=8, dp=4, global_batch=64, micro_batch=8, seq_len=4096, dp_sharding=sharding)
    estimate_across_sites(region, MODEL, lay)
    monkeypatch.setattr(multisite, "_dp", real)
    return calls[0]


def _step_s(args, steps, optimizers, forms=None) -> float:
    """The job's step with two sites of ``steps`` and ``optimizers``, every other figure the share's own."""
    region, one, lay, V, all_forms, amax_s, _, site_gpus, loss_s, saved = args
    c = one.breakdown_s["compute"]
    ready = SiteReady(steps, (dp_window_s(one, lay),) * 2, (c, c), (dp_gather_window_s(one, lay),) * 2,
                      (saved, saved), optimizers)
    return multisite._dp(region, one, lay, V, forms or all_forms, amax_s, ready, site_gpus, loss_s,
                         saved).step_time_s


def _alike_and_unlike(args, forms=None) -> tuple[float, float]:
    one = args[1]
    T, o = one.step_time_s, one.breakdown_s["optimizer"]
    alike = _step_s(args, (T, T), (o, o), forms)
    unlike = _step_s(args, (T, T + DELTA_S - delta_S), (o, o + DELTA_S), forms)
    return alike, unlike


@pytest.mark.parametrize("sharding", ["zero1", "fsdp"])
def test_the_flat_ring_s_gather_starts_at_the_slowest_optimizer(region, monkeypatch, sharding):
    """The job's step with unlike sites is the alike sites' plus ``Delta``, A's wait for B's optimizer."""
    args = _dp_call(region, monkeypatch, sharding)
    forms = args[4]
    assert forms["flat_ring"].gather_phase.time_s > 0
    alike, unlike = _alike_and_unlike(args, {"flat_ring": forms["flat_ring"]})
    assert unlike - alike == pytest.approx(DELTA_S, rel=1e-9)


@pytest.mark.parametrize("sharding, form", [("zero1", "hierarchical"), ("none", "flat_ring")])
def test_no_gather_across_the_sites_no_wait(region, monkeypatch, sharding, form):
    """Each site's own optimizer instance (hierarchical) or no gather crossing (DDP, dp_sharding none): the unlike job steps at B's
    longer step, ``Delta - delta`` past the alike sites'."""
    args = _dp_call(region, monkeypatch, sharding)
    forms = args[4]
    assert forms[form].gather_phase.time_s == 0.0
    alike, unlike = _alike_and_unlike(args, {form: forms[form]})
    assert unlike - alike == pytest.approx(DELTA_S - delta_S, rel=1e-9)


def test_each_site_waits_for_the_last_optimizer():
    """``max_j (o_j - saved_j) - (o_i - saved_i)``: the site whose optimizer ends last waits none."""
    assert gather_waits_s((0.3, 0.1, 0.25), (0.1, 0.0, 0.0)) == pytest.approx((0.05, 0.15, 0.0), abs=1e-15)
