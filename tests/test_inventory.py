import pytest

from conftest import spec_dict, tier
from topo import build_fabric, inventory, load_spec, spec_from_dict


def test_non_blocking_bisection_is_half_the_nics():
    inv = inventory(build_fabric(load_spec("dgx-h100-superpod")))
    # 1,024 NICs x 50 GB/s / 2
    assert inv.bisection_bandwidth_Bps == pytest.approx(1024 * 50e9 / 2)
    assert inv.bisection_bandwidth_per_gpu_Bps == pytest.approx(50e9)
    assert inv.largest_nonblocking_group == "cluster"


def test_bisection_follows_the_thinnest_tier():
    inv = inventory(build_fabric(load_spec()))
    # 7:1 above the pods: cross-pod capacity is 1/7 of the NIC capacity
    assert inv.bisection_bandwidth_Bps == pytest.approx(inv.num_nics * 50e9 / 7 / 2)
    assert inv.largest_nonblocking_gpus == 1792
    # oversubscribed leaves: the non-blocking group is a unit
    d = spec_dict(tiers=[tier("leaf", oversubscription=3), tier("spine")], cluster={"num_units": 4})
    inv = inventory(build_fabric(spec_from_dict(d)))
    assert inv.bisection_bandwidth_Bps == pytest.approx(inv.num_nics * 50e9 / 3 / 2)
    assert inv.largest_nonblocking_group == "scalable unit"
    assert inv.largest_nonblocking_gpus == 48 * 8


def test_single_pod_ignores_the_core_uplinks():
    # With one pod, no balanced cut crosses the spine uplinks.
    inv = inventory(build_fabric(load_spec(None, ["cluster.num_pods=1"])))
    assert inv.bisection_bandwidth_Bps == pytest.approx(inv.num_nics * 50e9 / 2)


def test_json_keys_and_power():
    inv = inventory(build_fabric(load_spec()))
    d = inv.to_dict()
    for key in ("num_gpus", "num_servers", "tiers", "bisection_bandwidth_Bps"):
        assert key in d
    for t in d["tiers"]:
        for key in ("name", "num_switches", "down_capacity_Bps", "up_capacity_Bps", "oversubscription"):
            assert key in t
    assert d["tiers"][-1]["oversubscription"] is None
    assert inv.switch_power_W == pytest.approx(747 * inv.num_switches)
    assert list(inv.to_frame()["name"]) == ["leaf", "spine", "core"]


def test_rail_only_says_what_its_figures_assume():
    inv = inventory(build_fabric(load_spec("rail-only-h100-16k")))
    assert any("rail-only" in n and "NVLink" in n for n in inv.notes)
    assert inventory(build_fabric(load_spec("dgx-h100-superpod"))).notes == []
