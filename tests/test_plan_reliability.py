"""Failures and goodput: Llama 3's failure table, SemiAnalysis' optical-link figures, Young's interval."""

import math

import pytest

from topo.plan import plan
from topo.plan.renewal import optimum_work_s
from topo.plan.reliability import (SECONDS_PER_YEAR, first_failure_s, interruption_rate_per_gpu_h, lost_fraction,
                                   young_interval_s)


def _lines(reference):
    return (reference / "planner.md").read_text().splitlines()


def test_first_link_failure_after_26_28_minutes(reference):
    # planner.md line 26: 5-year MTTF per link, 100,000 links -> 26.28 min; twin-port 4 years / 50,000 -> 42.05
    line = _lines(reference)[25]
    assert "26.28 minutes" in line and "42.05 minutes" in line
    assert first_failure_s(5 * SECONDS_PER_YEAR, 100_000) / 60 == pytest.approx(26.28, rel=1e-12)
    assert first_failure_s(4 * SECONDS_PER_YEAR, 50_000) / 60 == pytest.approx(42.048, rel=1e-12)  # 42.05
    # the plan's optics: every module of the bill of materials, each with its catalog MTTF
    r = plan(collectives=False)
    rate = sum(t.count / (t.mttf_years * SECONDS_PER_YEAR) for t in r.bom.transceivers)
    assert r.reliability.optical_modules == r.bom.num_transceivers
    assert r.reliability.first_optical_failure_s == pytest.approx(1 / rate, rel=1e-12)


def test_one_interruption_every_30_minutes_at_100k_gpus(reference):
    # planner.md lines 50, 56-57: 419 unexpected interruptions in 54 days on 16,384 H100 -> ~30 min at 100,000
    lines = _lines(reference)
    assert "419 unexpected" in lines[49] and "every ~30 minutes" in lines[56]
    r = plan(collectives=False)
    causes = r.reliability.interruptions_per_day_by_cause
    assert sum(causes.values()) == pytest.approx(r.reliability.interruptions_per_day)
    # the catalog's causes add up to Table 5's 419
    per_gpu_h = interruption_rate_per_gpu_h({"all": 419}, 16_384, 54)["all"]
    assert r.reliability.interruptions_per_day == pytest.approx(per_gpu_h * r.num_gpus * 24, rel=1e-12)
    assert 1 / (per_gpu_h * 100_000) * 60 == pytest.approx(30.4, abs=0.1)
    assert r.reliability.mtbf_s / 60 == pytest.approx(30.4 * 100_000 / r.num_gpus, abs=0.1)


def test_checkpoint_and_young_interval_closed_forms():
    r = plan(layers=[("t", {"workload": {"params": 1.8e12}, "storage": {"sizing": "per_gpu"}})],
             collectives=False).reliability
    # 1.8e12 parameters x 14 bytes (planner.md lines 25, 61) written by Llama 3's servers per GPU (30,628 at 100k),
    # each its 2 TB/s / 7,500 (line 64), read back at each its 7 TB/s / 7,500 (ms52: the storage's rates, no other)
    assert r.checkpoint_bytes == pytest.approx(1.8e12 * 14)
    assert r.checkpoint_write_s == r.checkpoint_stall_s == pytest.approx(1.8e12 * 14 / (30_628 * 2e12 / 7500),
                                                                          rel=1e-3)
    assert r.reload_s == pytest.approx(1.8e12 * 14 / (30_628 * 7e12 / 7500), rel=1e-3)
    assert r.young_interval_s == pytest.approx(math.sqrt(2 * r.checkpoint_write_s * r.mtbf_s))
    per_failure = r.detection_s + r.restart_s + r.reload_s
    assert (r.detection_s, r.restart_s) == (120, 480)
    # the first-order form, kept beside the renewal model's goodput (tests/test_plan_renewal.py)
    assert 1 - r.goodput_first_order == pytest.approx(r.checkpoint_write_s / r.young_interval_s
                                                      + r.young_interval_s / (2 * r.mtbf_s) + per_failure / r.mtbf_s)
    assert r.lost_fraction == pytest.approx(1 - r.goodput)
    assert r.checkpoint_interval_s < r.young_interval_s  # the renewal optimum checkpoints a little more often
    # Young's interval minimises the first two terms
    t0 = young_interval_s(10, 1000)
    assert lost_fraction(t0, 10, 0, 1000) < lost_fraction(0.8 * t0, 10, 0, 1000)
    assert lost_fraction(t0, 10, 0, 1000) < lost_fraction(1.25 * t0, 10, 0, 1000)


def test_llama3_scale_keeps_goodput_above_90_percent(reference):
    # planner.md line 51: effective training time above 90% at 16K H100 (Llama 3 405B)
    assert "effective training time above 90%" in _lines(reference)[50]
    # with Llama 3's storage (2 TB/s write, 7 TB/s read: storage.sizing = "per_gpu"), as the paper had it
    llama3 = [("t", {"workload": {"params": 405e9}, "storage": {"sizing": "per_gpu"}})]
    r = plan("h100-100k", layers=llama3, collectives=False)
    small = plan(__import__("topo").load_spec("h100-100k", ["cluster.num_pods=9"]), layers=llama3,
                 collectives=False)
    assert small.num_gpus == 16_128
    assert small.reliability.goodput > 0.9 > r.reliability.goodput


def test_too_few_hot_spares_add_the_repair_time():
    ok = plan(collectives=False).reliability
    assert ok.spares_enough and ok.restart_s == 480
    short = plan(layers=[("t", {"reliability": {"checkpoint": {"hot_spare_fraction": 0}}})],
                 collectives=False).reliability
    assert not short.spares_enough and short.restart_s == 480 + 14_400
    # a 4-hour repair on every restart against one failure per 30 min: exp(-lambda R) leaves almost nothing
    assert 0 < short.goodput < math.exp(-(120 + 14_880) / short.mtbf_s) < 1e-3
    assert short.training_gpus == plan(collectives=False).num_gpus
    assert ok.training_gpus == plan(collectives=False).num_gpus - ok.hot_spare_servers * 8
    assert ok.effective_flop == pytest.approx(plan(collectives=False).compute.flop * ok.goodput
                                              * ok.training_gpus / 100_352)


def test_goodput_splits_detection_restart_reload_and_catch_up():
    # MegaScale (NSDI'24) and Llama 3 report these apart; each is its own share of the lost time
    r = plan(collectives=False).reliability
    parts = r.lost_fraction_by_part
    assert set(parts) == {"checkpoint_stall", "detection", "restart", "reload", "catch_up"}
    # the recovery's share splits in proportion to its parts' durations
    assert parts["restart"] / parts["detection"] == pytest.approx(r.restart_s / r.detection_s)
    assert parts["reload"] / parts["detection"] == pytest.approx(r.reload_s / r.detection_s)
    # the work redone per failure is the mean of an exponential gap cut at the segment: close to T/2 here
    seg = r.checkpoint_interval_s + r.checkpoint_stall_s
    assert r.catch_up_s == pytest.approx(r.mtbf_s - seg / math.expm1(seg / r.mtbf_s))
    assert r.catch_up_s == pytest.approx(seg / 2, rel=0.05)
    assert r.goodput == pytest.approx(1 - sum(parts.values()))


def test_async_and_in_memory_checkpoints_stall_only_for_the_host_copy():
    sync = plan(collectives=False).reliability
    asy = plan(layers=[("t", {"reliability": {"checkpoint": {"mode": "async"}}})], collectives=False).reliability
    mem = plan(layers=[("t", {"reliability": {"checkpoint": {"mode": "in_memory"}}})],
               collectives=False).reliability
    per_gpu = sync.checkpoint_bytes / 100_352
    # the stall is the copy of each GPU's shard to host memory at 25 GB/s (reliability.toml snapshot_Bps)
    assert asy.checkpoint_stall_s == pytest.approx(per_gpu / 25e9) == mem.checkpoint_stall_s
    # storage is written in the background: the interval is at least the write time
    assert asy.checkpoint_interval_s == pytest.approx(max(sync.checkpoint_write_s,
                                                          optimum_work_s(asy.checkpoint_stall_s, asy.mtbf_s)))
    assert mem.reload_s == pytest.approx(per_gpu / 25e9) and mem.reload_s < sync.reload_s  # from peers' memory
    assert sync.goodput < asy.goodput <= mem.goodput


def test_sensitivity_halves_and_doubles_each_input():
    r = plan(collectives=False).reliability
    rows = {x["input"]: x for x in r.sensitivity}
    assert set(rows) == {"interruption rate", "detection time", "restart time", "checkpoint size"}
    for x in rows.values():
        assert x["goodput_half"] >= r.goodput >= x["goodput_double"]
    # twice the restart time: the interval does not move and the goodput falls by exp(-lambda x restart)
    assert rows["restart time"]["goodput_double"] == pytest.approx(r.goodput * math.exp(-r.restart_s / r.mtbf_s))


def test_optics_from_the_parts_replace_the_tables_network_row(reference):
    # reliability.toml optics = "parts": Llama 3's 'network switch or cable' row (35 in 54 days on 16,384 GPUs)
    # is replaced by the modules on GPU links at their MTTF, both ends: 100,352 x 400G-SR4 at the NICs (5 years:
    # 55.0 a day) and 50,176 x 2x400G-SR8 on the leaves' down ports (4 years: 34.4 a day)
    table = plan(collectives=False).reliability
    parts = plan(layers=[("t", {"reliability": {"optics": "parts"}})], collectives=False).reliability
    per_day = 100_352 / (5 * 365) + 50_176 / (4 * 365)
    assert table.optics_in_interruptions == "table" and "network" in table.interruptions_per_day_by_cause
    assert "network" not in parts.interruptions_per_day_by_cause
    assert parts.interruptions_per_day_by_cause["optics (NIC-side modules)"] == pytest.approx(per_day)
    assert parts.interruptions_per_day == pytest.approx(table.interruptions_per_day - table.table_network_per_day
                                                        + per_day)
    # shown inside the all-cause MTBF: the table's MTBF with its network row replaced by the modules
    assert table.mtbf_optics_as_parts_s == pytest.approx(parts.mtbf_s)
    assert table.mtbf_optics_as_parts_s < table.first_job_optics_failure_s < table.mtbf_s
    # the reconciliation: Llama 3's row implies 16,384 x 54 x 24 / 35 h = 69.3 years per GPU link
    assert table.table_network_mttf_years_per_gpu_link == pytest.approx(16_384 * 54 * 24 / 35 / 8_760)
    assert table.table_network_per_day == pytest.approx(35 / 54 * 100_352 / 16_384)


def test_job_stopping_optics_count_both_ends_of_every_gpu_link():
    # issue 32: a failed twin-port module at the leaf drops two GPUs as a NIC-side one does
    r = plan(collectives=False)
    leaf = [t for t in r.bom.transceivers if t.at == "leaf"]
    assert sum(t.on_gpu_links for t in leaf) == 100_352 // 2  # 2x400G modules on the leaves' 100,352 down ports
    assert sum(t.count for t in leaf) == 100_352  # and as many again on their uplinks, which are routed around
    rel = r.reliability
    assert rel.job_optical_modules == 100_352 + 50_176 and rel.nic_optical_modules == 100_352
    per_s = (100_352 / 5 + 50_176 / 4) / SECONDS_PER_YEAR
    assert rel.first_job_optics_failure_s == pytest.approx(1 / per_s)
    assert rel.first_nic_optics_failure_s / 60 == pytest.approx(5 * SECONDS_PER_YEAR / 100_352 / 60)  # 26.19 min


def test_no_failures_at_all_is_an_error():
    from topo.errors import TopoError

    zero = {"causes": {k: 0 for k in ("gpu", "network", "nic", "host", "software")}}
    with pytest.raises(TopoError, match="every failure rate is 0"):
        plan(layers=[("t", {"reliability": zero})], collectives=False)


def test_checkpointed_model_follows_the_cluster_or_the_plan():
    # no params given: the compute-optimal model for the cluster's budget, sqrt(FLOP / (6 x 20)) (Chinchilla)
    small = plan("dgx-h100-superpod", collectives=False)
    assert small.reliability.params == pytest.approx(math.sqrt(small.compute.flop / 120))
    assert small.reliability.params < 0.3e12  # not a 1.8T model on 1,024 GPUs (issue 22: 25.2 TB everywhere)
    big = plan(collectives=False)
    assert big.reliability.params == pytest.approx(math.sqrt(big.compute.flop / 120))
    assert "compute-optimal" in big.reliability.params_source
    given = plan(layers=[("t", {"workload": {"params": 405e9}})], collectives=False).reliability
    assert given.params == 405e9 and given.checkpoint_bytes == 405e9 * 14


def test_a_model_beyond_the_clusters_memory_gets_a_note():
    # 1.8e12 parameters x 14 B = 25.2 TB against 16 GPUs x 80 GB = 1.28 TB of HBM
    import topo

    small = topo.load_spec("dgx-h100-superpod", ["cluster.num_units=1", "fabric.servers_per_unit=2"])
    r = plan(small, layers=[("t", {"workload": {"params": 1.8e12}})], collectives=False)
    assert any("more than the cluster's HBM (1.3 TB)" in n for n in r.notes)
    assert not [n for n in plan(small, collectives=False).notes if "HBM" in n]  # the default model fits
