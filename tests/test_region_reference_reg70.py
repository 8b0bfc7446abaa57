"""reg70: the reference of a region's ``throughput_vs_one_site`` and of its DCI for 95% is the slowest share's step
(max_i T_i, what the job steps at in lockstep over a free DCI), whatever site paces the step.

rev67's Left (section 285): the ``dp`` row took the pacing site's own step as "one site", and the pacing site moves
with the DCI. On small_regions.MIXED_SITES (east's NVLink at 400 GB/s: the slowest share; west's 100 Gb/s NICs: the
last site ready), at the DCI the dp row named for 95% west paced, and the row read 94.2% (T_west / T) where 95% was
asked. Each way's row is the job's step (the same at every site), at or above every share's."""

import json

import pytest

from conftest import run_cli
from small_regions import mixed_region, mixed_region_file
from topo.training.model import load_model
from topo.training.multisite import TARGET_FRACTION, estimate_across_sites
from topo.training.parallel import make_layout

FAST_GBPS = 12800.0  # 16 x 800 Gb/s in one wave: the DCI nearly free


def _row(m, way):
    return next(s for s in m.strategies if s.strategy == way)


@pytest.mark.parametrize("way, job", [
    ("dp", dict(tp=8, dp=128, global_batch=1024, micro_batch=8)),
    ("outer", dict(tp=8, dp=128, global_batch=1024, micro_batch=8)),
    ("pp", dict(tp=8, pp=2, dp=64, global_batch=1024, micro_batch=4)),
])
def test_at_the_named_dci_each_way_reads_the_asked_95pct(tmp_path, way, job):
    """At the DCI a way names for 95% (its largest span's: one span here), that way's row reads 95.0% against the
    slowest share's step, its step is that step / 0.95, and the need it names there is the same DCI (stable)."""
    model, lay = load_model("llama3-8b"), make_layout(**job)
    fast = estimate_across_sites(mixed_region(tmp_path, FAST_GBPS), model, lay, across=way, outer_every=10)
    need_Bps = _row(fast, way).dci_Bps_for_95pct
    at = estimate_across_sites(mixed_region(tmp_path, need_Bps * 8 / 1e9), model, lay, across=way, outer_every=10)
    slowest = max(at.site_step_s.values())
    assert at.throughput_vs_one_site == pytest.approx(TARGET_FRACTION, rel=1e-9)
    assert _row(at, way).step_time_s == pytest.approx(slowest / TARGET_FRACTION, rel=1e-9)
    assert _row(at, way).dci_Bps_for_95pct == pytest.approx(need_Bps, rel=1e-9)
    assert at.one_site_step_s == slowest and at.site_step_s[at.slowest_site] == slowest


def test_the_reference_holds_where_the_pacing_site_is_not_the_slowest_share(tmp_path):
    """At dp's named DCI west (the faster share, ready last) paces and east is the slowest share: the ratio is east's
    step over the job's, every row's step at or above both shares', its exposed part past east's step."""
    model, lay = load_model("llama3-8b"), make_layout(tp=8, dp=128, global_batch=1024, micro_batch=8)
    fast = estimate_across_sites(mixed_region(tmp_path, FAST_GBPS), model, lay, outer_every=10)
    at = estimate_across_sites(mixed_region(tmp_path, _row(fast, "dp").dci_Bps_for_95pct * 8 / 1e9), model, lay,
                               outer_every=10)
    T_east, T_west = at.site_step_s["east"], at.site_step_s["west"]
    assert at.pacing_site == "west" and T_east > T_west
    for s in at.strategies:
        assert s.step_time_s >= T_east
        assert s.throughput_vs_one_site == pytest.approx(T_east / s.step_time_s, rel=1e-12)
        assert s.exposed_s == pytest.approx(s.step_time_s - T_east, rel=1e-12)
    assert "east's share's, the slowest" in at.notes[-1] and "west's paces" in at.notes[-1]


def test_the_command_reads_95pct_at_the_dci_it_named(tmp_path):
    """``topo train REGION`` at the DCI its dp row named: ``--json``'s throughput_vs_one_site is 0.95 and its
    one_site_step_s the slowest site's; the text's first line names that site and its table reads 95.0%."""
    flags = ["--model", "llama3-8b", "--tp", "8", "--dp", "128", "--global-batch", "1024", "--micro-batch", "8"]
    fast = json.loads(run_cli("train", mixed_region_file(tmp_path, FAST_GBPS), *flags, "--json").stdout)
    rate = fast["strategies"][0]["dci_Bps_for_95pct"] * 8 / 1e9
    at = run_cli("train", mixed_region_file(tmp_path, rate), *flags, "--json")
    doc = json.loads(at.stdout)
    assert doc["throughput_vs_one_site"] == pytest.approx(0.95, rel=1e-9)
    assert doc["one_site_step_s"] == doc["site_step_s"]["east"] > doc["site_step_s"]["west"]
    text = run_cli("train", mixed_region_file(tmp_path, rate), *flags).stdout
    assert "east's, the slowest site's) steps in" in text and "throughput_vs_one_site (dp): 95.0%" in text
