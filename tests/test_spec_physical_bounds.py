"""A single-site spec refuses physically absurd link rates and latencies with one line (walk12, section 127:
`bandwidth_per_gpu = "1e30 GB/s"` and a tier latency of 1e30 s were priced), and every bundled design passes."""

from __future__ import annotations

import pytest

from conftest import run_cli
from topo.fabric.hardware import GPU_MODELS
from topo.spec.load import bundled_regions, bundled_specs, load_spec
from topo.spec.region_load import load_region
from topo.spec.model import MAX_LATENCY_S, max_link_Bps

SPEC = """name = "bounds"
gpu = "H100"
[scale_up]
bandwidth_per_gpu = "{nvlink}"
[server]
nic_latency = "{nic_latency}"
[cluster]
num_gpus = 16
[fabric]
kind = "fat_tree"
[[fabric.tiers]]
name = "leaf"
radix = 64
port_rate = "400 Gb/s"
latency = "{latency}"
"""


def _spec(tmp_path, nvlink="450 GB/s", latency="130 ns", nic_latency="0 s"):
    f = tmp_path / "s.toml"
    f.write_text(SPEC.format(nvlink=nvlink, latency=latency, nic_latency=nic_latency))
    return f


def test_the_bounds_come_from_the_catalog():
    # 10 x the fastest GPU link in topo's catalog: NVLink 5, 900 GB/s a direction (B200 / GB200 / B300)
    assert max(g.nvlink_Bps for g in GPU_MODELS.values()) == 900e9
    assert max_link_Bps() == 10 * 900e9
    assert MAX_LATENCY_S == pytest.approx(200 * 4.9e-6, rel=0.03)  # 200 km of fibre at 4.9 us/km (multisite.md s.4)


@pytest.mark.parametrize("key,kwargs,text", [
    ("scale_up.bandwidth_per_gpu", {"nvlink": "1e30 GB/s"}, "'1e30 GB/s' is faster than any link: allowed up to 9 TB/s"),
    ("scale_up.bandwidth_per_gpu", {"nvlink": "9.01 TB/s"}, "allowed up to 9 TB/s"),
    ("fabric.tiers[0].latency", {"latency": "1e30 s"}, "'1e30 s' is longer than any hop inside a site: allowed up to 1 ms"),
    ("server.nic_latency", {"nic_latency": "1.01 ms"}, "allowed up to 1 ms"),
])
def test_an_absurd_rate_or_latency_is_one_error_line(tmp_path, key, kwargs, text):
    f = _spec(tmp_path, **kwargs)
    proc = run_cli("estimate", str(f), "--size", "1GiB")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    line = proc.stderr.strip()
    assert "\n" not in line and line.startswith(f"error: {f}: {key}: ") and text in line


def test_at_the_bounds_is_accepted(tmp_path):
    f = _spec(tmp_path, nvlink="9 TB/s", latency="1 ms", nic_latency="1 ms")
    proc = run_cli("estimate", str(f), "--size", "1GiB")
    assert proc.returncode == 0, proc.stderr


def test_an_override_is_bounded_too():
    proc = run_cli("estimate", "dgx-h100-superpod", "--set", "server.nic_rate=1e30 Gb/s")
    assert proc.returncode == 2 and "server.nic_rate" in proc.stderr and "allowed up to 9 TB/s" in proc.stderr


@pytest.mark.parametrize("name", bundled_specs())
def test_every_bundled_topology_is_within_the_bounds(name):
    spec = load_spec(name)
    rates = [spec.server.nic_rate_Bps, spec.server.pcie_bandwidth_Bps, spec.nvlink_Bps]
    rates += [r for t in spec.fabric.tiers for r in (t.port_rate_Bps, t.up_port_rate_Bps) if r is not None]
    assert max(rates) <= max_link_Bps()
    lat = [spec.scale_up.latency_s, spec.server.nic_latency_s] + [t.latency_s for t in spec.fabric.tiers]
    assert max(lat) <= MAX_LATENCY_S


@pytest.mark.parametrize("name", bundled_regions())
def test_every_bundled_region_loads_within_the_bounds(name):
    _, sites = load_region(name)
    assert sites and all(s.nvlink_Bps <= max_link_Bps() for s in sites)
