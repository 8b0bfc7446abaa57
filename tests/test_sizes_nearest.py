"""The nearest sizes a size refusal names, in the spec's own count (walk42, findings 435; tidy118, findings 436).

A 100,000-GPU GB300 NVL72 building (topologies/gb300-nvl72-superpod.toml: racks of 18 trays of 4 GPUs, Q3400 leaf
and spine of 144 ports, fabric.grow_tiers): 25,000 trays do not fill whole racks of 18; 1,389 racks would be more
than one spine group holds (18 racks), so grow_tiers adds a core and the racks must fill whole pods of 18 racks =
1,296 GPUs. The nearest whole pods are 77 and 78: 99,792 and 101,088 GPUs. The unit refusal names them first (one
try is enough, tidy118), and the pod refusal names the same two at a size that fills whole racks only (100,008 GPUs,
walk42: it had given no size), both by one rule (clos._nearest).
"""

from __future__ import annotations

import pytest

from conftest import run_cli

POD_GPUS = 18 * 72


@pytest.mark.parametrize("key,value,what,per", [("num_gpus", 100_008, "GPUs", 1), ("num_servers", 25_002, "servers", 4)])
def test_the_pod_error_names_the_nearest_whole_pods(key, value, what, per):
    proc = run_cli("describe", "gb300-nvl72-superpod", "--set", f"cluster.{key}={value}", "--unset",
                   "cluster.num_units")
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    lo, hi = 77 * POD_GPUS // per, 78 * POD_GPUS // per
    assert "do not fill whole pods of 18" in proc.stderr
    assert proc.stderr.rstrip().endswith(f"(nearest: {lo:,} or {hi:,} {what})"), proc.stderr
    for n in (lo, hi):  # each size named builds
        run_cli("describe", "gb300-nvl72-superpod", "--set", f"cluster.{key}={n}", "--unset", "cluster.num_units",
                check=True)


def test_a_count_of_units_gets_no_nearest():
    proc = run_cli("describe", "gb300-nvl72-superpod", "--set", "cluster.num_units=1389")
    assert proc.returncode == 2 and "use a multiple of 18 units" in proc.stderr and "nearest" not in proc.stderr


@pytest.mark.parametrize("key,value,what,per", [("num_gpus", 100_000, "GPUs", 1), ("num_servers", 25_000, "servers", 4)])
def test_the_unit_refusal_names_sizes_that_fill_whole_pods(key, value, what, per):
    proc = run_cli("describe", "gb300-nvl72-superpod", "--set", f"cluster.{key}={value}", "--unset",
                   "cluster.num_units")
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert "do not fill whole scalable units of 18 servers" in proc.stderr
    lo, hi = 77 * POD_GPUS // per, 78 * POD_GPUS // per
    assert f"also fill whole pods of 18 scalable units come in steps of {POD_GPUS // per:,} {what}" in proc.stderr
    assert proc.stderr.rstrip().endswith(f"; nearest: {lo:,} or {hi:,} {what})"), proc.stderr
    # the pod refusal at the old suggestion (100,008 GPUs: whole racks only) names the same two sizes
    old = run_cli("describe", "gb300-nvl72-superpod", "--set", f"cluster.{key}={100_008 // per}", "--unset",
                  "cluster.num_units")
    assert old.returncode == 2 and old.stderr.rstrip().endswith(f"(nearest: {lo:,} or {hi:,} {what})")


def test_within_one_spine_group_no_pod_rule():
    """Under 18 racks the spine is the top tier and joins them all: the nearest stays whole racks (72 GPUs)."""
    proc = run_cli("describe", "gb300-nvl72-superpod", "--set", "cluster.num_gpus=1000", "--unset",
                   "cluster.num_units")
    assert proc.returncode == 2 and proc.stderr.rstrip().endswith("(nearest: 936 or 1,008 GPUs)"), proc.stderr
    run_cli("describe", "gb300-nvl72-superpod", "--set", "cluster.num_gpus=1008", "--unset", "cluster.num_units",
            check=True)
