"""ms55: what walk19 left of regions of several sites: a missing site spec's error, each span's DCI figure for 95%
of one site, the region plan's storage sized for the region's job."""

import dataclasses
import json
import math

import numpy as np
import pytest

from conftest import run_cli

from topo.fabric.region import build_region
from topo.plan.region import plan_region
from topo.spec.load import bundled_regions, bundled_specs
from topo.training.model import load_model
from topo.training.multisite import SPAN_RULE, _border_kept, estimate_across_sites
from topo.training.parallel import make_layout



def _replica_params(model, tp):
    """One replica's parameters summed over its TP ranks: each rank holds every norm whole (two a layer and the
    final one, ``h`` each; Megatron-Core's TENorm and TE LayerNormLinear weights are not split over TP), so
    ``(tp - 1) x (2 L + 1) h`` more than the model's count (mla78, findings 365)."""
    return model.total_params + (tp - 1) * (2 * model.layers + 1) * model.hidden

def test_missing_site_spec_lists_only_one_site_specs(tmp_path):
    """walk19: a missing site spec's error offered the bundled regions (two-site-h100, ...) as a site's spec, which
    nested regions refuse; it lists the specs of one fabric alone, and suggests none of the regions."""
    body = ('name = "x"\n[[sites]]\nname = "a"\nspec = "SPEC"\n[[sites]]\nname = "b"\nspec = "dgx-h100-superpod"\n'
            '[interconnect]\ndistance_km = 10\n')
    for spec in ("nosuch.toml", "two-site-h10"):
        (tmp_path / "r.toml").write_text(body.replace("SPEC", spec))
        p = run_cli("describe", str(tmp_path / "r.toml"))
        assert p.returncode == 2 and p.stderr.count("\n") == 1, p.stderr
        listed = p.stderr.split("bundled: ")[1].strip().split(", ")
        assert listed == bundled_specs() and bundled_regions(), p.stderr
        assert not any(r in p.stderr for r in bundled_regions()), p.stderr
    p = run_cli("describe", "no-such-spec")  # outside a region, the regions are specs to name
    assert all(r in p.stderr for r in bundled_regions()), p.stderr


TRI = """name = "tri"
[[sites]]
name = "ash"
spec = "dgx-h100-superpod"
set = ["cluster.num_units=4"]
[[sites]]
name = "bel"
spec = "dgx-h100-superpod"
set = ["cluster.num_units=2"]
[[sites]]
name = "cor"
spec = "dgx-h100-superpod"
set = ["cluster.num_units=1"]
[interconnect]
distance_km = 40
waves = 16
equipment_latency = "20 us"
[[interconnect.spans]]
sites = ["bel", "cor"]
distance_km = 300
[[interconnect.spans]]
sites = ["ash", "cor"]
distance_km = 300
waves = 8
"""


LINE = TRI.replace('distance_km = 40', 'topology = "line"\ndistance_km = 40').split("[[interconnect.spans]]")[0] + \
    '[[interconnect.spans]]\nsites = ["ash", "bel"]\n[[interconnect.spans]]\nsites = ["bel", "cor"]\n' + \
    'distance_km = 300\nwaves = 8\n'


def _region_job(tmp_path_factory, name: str, text: str):
    """The region ``text`` written to a file of its own and Llama 3 8B tp 8 dp 96 across its sites, an outer
    synchronisation every 10 steps, equal shares (32 replicas a site, 768 GPUs; share72: the pins below are the
    equal split's, by-size the default since regshare71): (region, job)."""
    path = tmp_path_factory.mktemp(name) / f"{name}.toml"
    path.write_text(text)
    region = build_region(str(path))
    job = estimate_across_sites(region, load_model("llama3-8b"), make_layout(tp=8, dp=96, global_batch=288),
                                outer_every=10, shares="equal")
    return region, job


@pytest.fixture(scope="module")
def line(tmp_path_factory):
    """The same three sites on a line of unequal spans, ash-bel 40 km x 16 waves, bel-cor 300 km x 8 (one path a
    pair: the split is the routes), Llama 3 8B tp 8, an outer synchronisation every 10 steps."""
    return _region_job(tmp_path_factory, "line", LINE)


@pytest.fixture(scope="module")
def tri(tmp_path_factory):
    """Three unequal sites (1,024 / 512 / 256 GPUs) on a mesh of unequal spans: 16 / 16 / 8 waves of 800 Gb/s, 40 /
    300 / 300 km (every pair's lowest-latency route its direct span), Llama 3 8B tp 8 over 768 GPUs."""
    return _region_job(tmp_path_factory, "tri", TRI)


def test_each_span_s_dci_for_95_percent_is_its_own_bytes_over_the_time_left(line):
    """walk19: with spans of unequal capacity "DCI for 95%" was the busiest span's, the others scaled with it (the
    min-max split shares bytes by capacity), and said so nowhere. Closed form (outer synchronisation every H = 10
    steps): the hierarchical all-reduce's ring sends 2(K-1)/K V = 4/3 V from each site to the next (cor to ash
    through bel: each span carries 4/3 V each way); V is one replica's fp32 gradients, 4 B x Llama 3 8B's parameters (8.03e9, Meta's model card); the
    budget for 95% of one site is H x T1 (1/0.95 - 1) less the phase's latency, 2(K-1) x the slowest hop. Every
    span then needs 4/3 V over that time, whatever its waves (16 and 8): the total is twice it. The figure before
    (one for every span, the busiest's bytes) read as "every span in proportion" would give ash-bel twice bel-cor."""
    region, job = line
    model = load_model("llama3-8b")
    assert model.total_params == pytest.approx(8.03e9, rel=2e-3)
    outer = next(s for s in job.strategies if s.strategy == "outer")
    X = 4 / 3 * 4 * _replica_params(model, 8)
    hop_s = float(np.max(region.cross_site_latency_s(*_ring_gpus(region))))  # cor-bel-ash: 340 km, 2 x 20 us
    assert hop_s == pytest.approx(340 * 4.897e-6 + 40e-6, rel=0.01)
    t = 10 * job.one_site_step_s * (1 / 0.95 - 1) - 4 * hop_s
    assert outer.dci_Bps_for_95pct_by_span == pytest.approx(dict.fromkeys(region.span_names(), X / t), rel=1e-6)
    assert outer.dci_total_Bps_for_95pct == pytest.approx(2 * X / t, rel=1e-6)
    assert outer.dci_Bps_for_95pct == pytest.approx(X / t, rel=1e-6)


def _ring_gpus(region):
    """A GPU of each site and one of the next site (the ring's transfers), as cross_site_latency_s takes them."""
    first = region.gpu_offset[:-1]
    return first, np.roll(first, -1)


def test_the_spans_at_their_figures_keep_95_percent(tri):
    """Each span set to its own figure (its waves scaled to it) keeps the dp step at 95% of one site or a little
    more."""
    region, job = tri
    dp = next(s for s in job.strategies if s.strategy == "dp")
    need = np.array([dp.dci_Bps_for_95pct_by_span[n] for n in region.span_names()])
    spans = {**region.spans, "waves": need / region.spans["wave_rate_Bps"]}
    again = estimate_across_sites(dataclasses.replace(region, spans=spans, _cache={}), load_model("llama3-8b"),
                                  make_layout(tp=8, dp=96, global_batch=288), shares="equal")
    assert again.throughput_vs_one_site == pytest.approx(0.95, abs=2e-3)
    assert again.throughput_vs_one_site >= 0.95 - 1e-9


def test_the_spans_at_their_figures_keep_95_percent_with_by_size_shares(tri):
    """share72: the same with the sites' replicas by their size (55 / 27 / 14 of the job's 96), the default."""
    region, _ = tri
    lay = make_layout(tp=8, dp=96, global_batch=288)
    job = estimate_across_sites(region, load_model("llama3-8b"), lay)
    assert job.site_dp == {"ash": 55, "bel": 27, "cor": 14}
    dp = next(s for s in job.strategies if s.strategy == "dp")
    need = np.array([dp.dci_Bps_for_95pct_by_span[n] for n in region.span_names()])
    spans = {**region.spans, "waves": need / region.spans["wave_rate_Bps"]}
    again = estimate_across_sites(dataclasses.replace(region, spans=spans, _cache={}), load_model("llama3-8b"), lay)
    assert again.throughput_vs_one_site == pytest.approx(0.95, abs=2e-3)
    assert again.throughput_vs_one_site >= 0.95 - 1e-9


def test_cli_says_each_span_s_figure_and_the_rule(tri, tmp_path):
    """The CLI's job (dp left out, equal shares: the smallest site's 32 replicas on every site, as :data:`TRI`'s
    fixture) says each span's figure and the rule, its ``--json`` the library's."""
    (tmp_path / "tri.toml").write_text(TRI)
    args = ["train", str(tmp_path / "tri.toml"), "--model", "llama3-8b", "--tp", "8", "--global-batch", "288",
            "--shares", "equal"]
    text = run_cli(*args, check=True).stdout
    dp = next(s for s in tri[1].strategies if s.strategy == "dp")
    assert "DCI for 95% per span and direction (dp): ash-bel " in text, text
    assert SPAN_RULE in text.replace("\n", " "), text
    doc = json.loads(run_cli(*args, "--json", check=True).stdout)
    got = doc["strategies"][0]
    assert got["dci_Bps_for_95pct_by_span"] == pytest.approx(dp.dci_Bps_for_95pct_by_span)
    assert got["dci_total_Bps_for_95pct"] == pytest.approx(dp.dci_total_Bps_for_95pct)


def test_the_region_plan_sizes_each_site_s_storage_for_the_region_s_job(tmp_path):
    """walk19: each site's storage was sized for a compute-optimal model of its own budget alone (a 1,024-GPU site a
    242B model's whole checkpoint, 423 storage servers). The region trains one job: compute-optimal for every
    site's FLOP together, N = sqrt(sum FLOP / (6 x 20)) (Hoffmann et al. 2022, the plan's own rule), one checkpoint
    of N x 14 B (mixed-precision Adam) written in parallel, each site its GPUs' share (Megatron's distributed
    checkpoint spreads one save over the data-parallel ranks: Megatron-Bridge CheckpointConfig.fully_parallel_save
    = True), and each site the tokens of its own FLOP, FLOP / (6 N): the sites' tokens are the job's 20 N."""
    (tmp_path / "tri.toml").write_text(TRI)
    region = build_region(str(tmp_path / "tri.toml"))
    r = plan_region(region, collectives=False)
    flop = sum(p.compute.flop for p in r.site_plans)
    N = math.sqrt(flop / (6 * 20))
    assert r.job["params"] == pytest.approx(N, rel=1e-12) and r.job["flop"] == pytest.approx(flop, rel=1e-12)
    for p, gpus in zip(r.site_plans, (1024, 512, 256)):
        assert p.storage.checkpoint_bytes == pytest.approx(N * 14 * gpus / 1792, rel=1e-12)
        assert p.storage.dataset_tokens == pytest.approx(p.compute.flop / (6 * N), rel=1e-12)
        assert p.reliability.checkpoint_bytes == pytest.approx(N * 14, rel=1e-12)  # the job's, written in parallel
    assert sum(p.storage.dataset_tokens for p in r.site_plans) == pytest.approx(20 * N, rel=1e-12)
    assert "each site holding and writing its GPUs' share of it" in " ".join(r.notes)


BORDER = TRI.replace('equipment_latency = "20 us"', 'equipment_latency = "20 us"\nattach = "border"\n'
                     'border_oversubscription = 3')


@pytest.fixture(scope="module")
def border(tmp_path_factory):
    """:data:`TRI` through border leaves of oversubscription 3, so that a site's border binds before its spans."""
    return _region_job(tmp_path_factory, "border", BORDER)


def test_the_95_percent_rule_reads_the_border_from_the_regions_one_formula(border):
    """rev58's review: the DCI-for-95% rule computed a site's border (its spans' capacity over the border
    oversubscription) apart from :meth:`Region.border_Bps`; it now asks that method with the trial capacities.

    Closed form on the three unequal sites (spans ash-bel, ash-cor, bel-cor at trial capacities 1, 3, 0.5 GB/s;
    oversubscription 3): the borders are ash (1 + 3) / 3 = 4/3, bel (1 + 0.5) / 3 = 1/2, cor (3 + 0.5) / 3 = 7/6
    GB/s. Transfers ash->bel 4 GB, bel->cor 1, cor->ash 2, ash->cor 3: the larger of each site's sent and received
    bytes is 7 (ash), 4 (bel), 4 (cor) GB; in t = 0.5 s they need 10.5, 16 and 48/7 times the trial borders, so every
    span is scaled by the largest, 16. With 0.7 GB ash->bel and bel->cor in 2 s no border binds (0.525, 1.4, 0.6 s):
    the capacities stay. The job's figures were those of the rule before (63409f7e, same region and job) to 1e-12
    when the rule changed; the step model's loss pricing (ce57) and refit since moved them (dp 3215.9 -> 3219.5,
    outer 253.48 -> 253.70 GB/s), and the session of 2026-12-06e's (NCCL buffers, HybridEP calls, loss bytes, refit:
    dp 3219.5 -> 3209.1, outer 253.70 -> 253.05 GB/s), and the session of 2026-12-07a's (hostpy70's host prices,
    attnh71's Hopper attention at its cuDNN, the refits hopper_bf16 0.925 -> 0.914 -> 0.915: dp 3209.1 -> 3278.8,
    outer 253.05 -> 257.36 GB/s), and the session of 2026-12-07b's (the embedding's dense weight gradient, each stage's
    heads' collectives and the embedding group's all-reduce, Llama 3's 128,256-token vocabulary, the refit hopper_bf16
    0.915 -> 0.917: dp 3278.8 -> 3242.2, outer 257.36 -> 255.12 GB/s), and tidy76's (2026-12-07c: the TP-replicated
    gradients' all-reduce, the embedding group's padded vocabulary: dp 3242.19 -> 3241.92, outer 255.119 -> 255.103
    GB/s), and regions76's (2026-12-07c: the logged loss's all-reduce across the sites, 3.4 ms exposed at pp 1, out of
    the 95% budget: dp 3241.9 -> 3917.0 GB/s; with the loss priced at 0 the pin before to 1e-12), and mla78's (every
    norm whole on each TP rank, so each rank's gradients hold them: dp 3916.98 -> 3917.74, outer 255.103 -> 255.155
    GB/s), and the session of 2026-12-07f's (TP as Transformer Engine runs it without userbuffers: the row-parallel
    output gradient's gather blocking, each backward exchange beside its own GEMM with its SMs charged, the gathered
    operands cast on the shard, and the refit: dp 3917.74 -> 3568.55, outer 255.155 -> 239.869 GB/s; the session of
    2026-12-07g's SC21 artifact, FP8 weight cast, TE version and refit: 3567.24, 239.810 GB/s; the session of
    2026-12-07h's norm backward at TE's published rate and refit: 3567.02, 239.800 GB/s): the pins below are the
    step model's at the refit of that session, update them with the model."""
    region, job = border
    each = np.array([1e9, 3e9, 0.5e9])
    assert region.span_names() == ["dci:ash-bel", "dci:ash-cor", "dci:bel-cor"]
    assert [region.border_Bps(s, span_Bps=each) for s in range(3)] == pytest.approx([4e9 / 3, 0.5e9, 3.5e9 / 3])
    assert [region.border_Bps(s, span_Bps=region.span_bandwidth_Bps) for s in range(3)] == \
        [region.border_Bps(s) for s in range(3)] == pytest.approx([2.4e12 / 3, 3.2e12 / 3, 2.4e12 / 3])
    got = _border_kept(region, [0, 1, 2, 0], [1, 2, 0, 2], np.array([4e9, 1e9, 2e9, 3e9]), each, 0.5)
    assert got == pytest.approx(16 * each, rel=1e-12)
    assert _border_kept(region, [0, 1], [1, 2], 0.7e9, each, 2.0) == pytest.approx(each, rel=1e-12)
    before = {"dp": 3567020411382.3184, "outer": 239799618064.41534}  # every span's, the border binding
    for s in job.strategies:
        if s.strategy in before:
            assert s.dci_Bps_for_95pct_by_span == pytest.approx(dict.fromkeys(region.span_names(), before[s.strategy]),
                                                                rel=1e-12)
