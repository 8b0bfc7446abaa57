"""regions83 (section 391 Left 3): a region job under Megatron-FSDP's optimizer-sharded outer group
(``dp_outer_sharding = "optim"``) crosses the sites with the outer group's reduce-scatter and all-gather once a step,
not hybrid sharding's all-reduce of the shard every micro-batch.

Megatron-FSDP (NVIDIA/Megatron-LM@d98e8a64ddf34856e74b24714e3bedb2f5a39553
megatron/core/distributed/fsdp/src/megatron_fsdp/): ``param_and_grad_buffer.py`` lines 4134-4139 and 4183-4208 (on
its own stream after the shard group's reduce-scatter, ``reduce_scatter_tensor`` of the inner gradient shard over
``outer_fsdp_group``; ``no_shard``: ``all_reduce``), lines 4543-4565 (``all_gather_into_tensor`` of
``inner_dp_wbuf.data_size // outer_fsdp_group.size()`` a rank back into the inner shard, the unit's gather stream
waiting for it); ``megatron_fsdp.py`` lines 765-785 and 883-898 (the outer reduction only on
``is_last_microbatch``), 482-490 (the outer gather only at ``microbatch_count == 0``, before the first forward).

So one replica's crossing bytes are its gradients once at the gradient-reduction dtype (``rb``) and its weights once
at the gather dtype (``wb``): ``RS = AR_no_shard / m`` (``no_shard`` all-reduces ``m x`` the gradients, m
micro-batches), ``AG = RS x wb / rb``; across each of the two sites' boundary the hierarchical form carries
``(K-1)/K (RS + AG)`` in ``2(K-1)`` crossings once (not ``2(K-1)/K x AR`` in ``m x 2(K-1)``), the flat ring over the
replicate group ``(D_r-1)/D_r (RS + AG)``. Job: Llama 3 8B, tp 8, dp 8 (4 a site, two DGX H100 SUs), dp_shard 2,
global batch 16: ``m = 2``, ``D_r = 4``. The DCI: 16 waves of 800 Gb/s (1.6e12 B/s a direction), 40 km x 4.9 us +
50 us a hop (tests/small_regions.py).
"""

import pytest

from small_regions import built_region, two_sites
from topo.engine.region_estimate import region_channels
from topo.errors import TopoError
from topo.training.dp_across import dp_crossings
from topo.training.model import load_model
from topo.training.multisite import dp_passes, estimate_across_sites, replica_dp_bytes
from topo.training.parallel import make_layout

TEXT = two_sites("oo83", "two SUs", "dgx-h100-superpod", 1)
DCI_BPS = 16 * 800e9 / 8  # the mesh's one span, a direction
HOP_S = 40 * 4.9e-6 + 50e-6


def _job(outer, **extra):
    return make_layout(tp=8, dp=8, global_batch=16, seq_len=4096, dp_sharding="fsdp", dp_shard=2,
                       dp_outer_sharding=outer, **extra)


@pytest.fixture(scope="module")
def bytes_():
    model = load_model("llama3-8b")
    return {o: replica_dp_bytes(model, _job(o)) for o in ("no_shard", "optim")}


def test_the_replicas_cross_their_gradients_and_weights_once_a_step(bytes_):
    lay = _job("optim")
    m = lay.microbatches
    assert m == 2
    old, new = bytes_["no_shard"], bytes_["optim"]
    assert new.outer_sharded and not old.outer_sharded
    assert new.all_reduce_bytes == 0.0
    assert new.reduce_scatter_bytes == pytest.approx(old.all_reduce_bytes / m, rel=1e-12)
    assert new.all_gather_bytes == pytest.approx(new.reduce_scatter_bytes * lay.weight_gather_bytes
                                                 / lay.reduce_bytes, rel=1e-12)
    assert new.forward_gather_share == 1.0  # the whole outer gather before the first micro-batch's forward
    assert dp_passes(lay) == 1 and dp_passes(_job("no_shard")) == m


@pytest.fixture(scope="module")
def region(tmp_path_factory):
    return built_region(tmp_path_factory, TEXT, "oo83")


def test_the_crossing_bytes_and_time(region, bytes_):
    V = bytes_["optim"]
    K, D_r = 2, 4
    forms = dp_crossings(region, V, D_r, 8 * 2, region_channels(region))
    h, r = forms["hierarchical"], forms["flat_ring"]
    X = (K - 1) / K * (V.reduce_scatter_bytes + V.all_gather_bytes)
    assert h.nbytes == pytest.approx(X, rel=1e-12)
    assert h.phase.bandwidth_s == pytest.approx(X / DCI_BPS, rel=1e-9)
    assert h.gather_bytes == pytest.approx((K - 1) / K * V.all_gather_bytes, rel=1e-12) and h.gather_steps == K - 1
    assert h.norm_s > 0  # the optimizer's shards span the sites: the gradient norm's all-reduce crosses
    assert r.nbytes == pytest.approx((D_r - 1) / D_r * (V.reduce_scatter_bytes + V.all_gather_bytes), rel=1e-12)
    old = dp_crossings(region, bytes_["no_shard"], D_r, 8 * 2, region_channels(region))["hierarchical"]
    assert old.nbytes == pytest.approx(2 * (K - 1) / K * bytes_["no_shard"].all_reduce_bytes, rel=1e-12)
    assert old.norm_s == 0.0 and old.gather_bytes == 0.0


def test_the_jobs_step_prices_it(tmp_path_factory):
    region = built_region(tmp_path_factory, TEXT + '[nccl]\ndp_reduction = "hierarchical"\n', "oo83h")
    model = load_model("llama3-8b")
    job = estimate_across_sites(region, model, _job("optim"))
    old = estimate_across_sites(region, model, _job("no_shard"))
    lat, m = job.strategies[0].latency_s, _job("optim").microbatches
    # 2(K-1) crossings once a step (a hop: 40 km x 4.9 us + 50 us, and the sites' own sub-microsecond part), where
    # no_shard's all-reduce crosses in each of the m micro-batches
    assert lat == pytest.approx(2 * HOP_S, rel=1e-2) and old.strategies[0].latency_s == pytest.approx(m * lat)
    V = replica_dp_bytes(model, _job("optim"))
    assert job.strategies[0].dci_bytes_per_step == pytest.approx(0.5 * (V.reduce_scatter_bytes + V.all_gather_bytes),
                                                                 rel=1e-12)
    line = next(a for a in job.assumptions if a.startswith("dp across sites: the gradients cross"))
    assert "optimizer-sharded outer group once a step" in line, line


def test_experts_sharded_over_their_whole_group_are_refused(tmp_path_factory):
    region = built_region(tmp_path_factory, TEXT, "oo83m")
    lay = make_layout(tp=8, dp=8, ep=4, global_batch=16, seq_len=4096, dp_sharding="fsdp", dp_shard=2,
                      dp_outer_sharding="optim")
    with pytest.raises(TopoError) as e:
        estimate_across_sites(region, load_model("mixtral-8x7b"), lay)
    assert e.value.key == "dp_outer_sharding" and "expert_dp_shard None with expert_dp" in str(e.value)


def test_the_hierarchical_form_holds_and_steps_the_optimizer_over_the_job(tmp_path_factory):
    """Under ``optim`` the optimizer state is sharded over every data-parallel rank whatever the instances
    (param_and_grad_buffer.py lines 2423-2425 at the commit above): in the hierarchical form too its memory is the
    job's ``dp`` = 8 ranks' shard (ZeRO-3's), not the shard group's 2, and its optimizer step the job's."""
    region = built_region(tmp_path_factory, TEXT + '[nccl]\ndp_reduction = "hierarchical"\n', "oo83o")
    model = load_model("llama3-8b")
    new, old = (estimate_across_sites(region, model, _job(o)) for o in ("optim", "no_shard"))
    assert new.memory["optimizer_bytes"] == pytest.approx(old.memory["optimizer_bytes"] * 2 / 8, rel=1e-12)
    assert new.memory_sharding.startswith("the optimizer state sharded over 8 data x context ranks, the gradients "
                                          "and weights over 2 ("), new.memory_sharding
    assert new.strategies[0].step_time_s < old.strategies[0].step_time_s


def test_the_hierarchical_forms_step_takes_the_jobs_optimizer(tmp_path_factory, monkeypatch):
    """The step's optimizer over the job (:func:`~topo.training.multisite.flat_optimizer_saved_s` applied, as the
    flat ring's) in the hierarchical form under ``optim``, the share's under ``no_shard`` (a spy on the rule)."""
    from topo.training import multisite
    seen = []
    real = multisite._dp_steps_s
    monkeypatch.setattr(multisite, "_dp_steps_s", lambda ready, one, saved, flat, g: seen.append(flat) or
                        real(ready, one, saved, flat, g))
    region = built_region(tmp_path_factory, TEXT + '[nccl]\ndp_reduction = "hierarchical"\n', "oo83s")
    for outer, want in (("optim", {True}), ("no_shard", {True, False})):  # no_shard: the flat ring's True alone
        seen.clear()
        estimate_across_sites(region, load_model("llama3-8b"), _job(outer))
        assert set(seen) == want, outer
