"""walk42: a size that fills whole racks but not whole pods names the nearest sizes that do, in the spec's own count.

A 100,000-GPU GB300 NVL72 building: 100,000 GPUs are told "nearest: 99,936 or 100,008" (whole racks of 18 trays);
at 100,008 GPUs the fabric's 1,389 racks do not fill whole pods of 18 racks, and the error gave no size in GPUs.
A pod is 18 racks x 72 GPUs = 1,296 GPUs (topologies/gb300-nvl72-superpod.toml: 18 trays of 4 GPUs per rack, and
the Q3400's 144 ports take 18 racks' leaves), so the nearest whole pods are 77 and 78: 99,792 and 101,088 GPUs.
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
