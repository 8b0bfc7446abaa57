"""topo calibrate says which parameters the fit did not move (walk12, docs/calibration-findings.md section 127):
one the logs bound from one side only, one at a bound of its physical range; and it recovers a known network."""

from __future__ import annotations

import csv
import json
from dataclasses import replace

import pytest

from conftest import run_cli
from nccl_text import render
from topo.calibrate.parse import parse_text
from topo.calibrate.setup import setup_from_run
from topo.engine.estimate import estimate
from topo.engine.profile_data import PARAMETERS
from topo.engine.profiles import profile_for, resolve_profile

GPU = "NVIDIA H100 80GB HBM3"
SIZES = [2**i for i in range(3, 35)]  # 8 B .. 16 GiB


def _synthetic(tmp_path, network_efficiency):
    """2 nodes x 8 H100, one 400 Gb/s NIC a node (the network binds), the bundled profile but its network
    efficiency: the times the model gives, written in nccl-tests' format."""
    setup = setup_from_run(parse_text(render("all_reduce", ["a", "b"], 8, GPU, SIZES, [1.0] * len(SIZES)))[0],
                           nics=1)
    truth = replace(profile_for("hopper", "infiniband_ndr"), network_efficiency=network_efficiency)
    times = [r.time_s for r in estimate(setup.fabric, "all_reduce", SIZES, gpus=16, profile=truth).results]
    log = tmp_path / "nic1.txt"
    log.write_text(render("all_reduce", ["a", "b"], 8, GPU, SIZES, times))
    return log, setup


def test_calibrate_recovers_a_known_network_efficiency(tmp_path):
    log, setup = _synthetic(tmp_path, 0.70)
    out = tmp_path / "mine.toml"
    doc = json.loads(run_cli("calibrate", str(log), "--nics", "1", "-o", str(out), "--json", check=True).stdout)
    eff = doc["values"]["network_efficiency"]
    assert eff == pytest.approx(0.70, abs=0.005)
    assert "network_efficiency" not in doc["not_identified"] and doc["at_bound"] == {}
    # the closed form of what was fitted: at 16 GiB the model runs a tree whose one inter-node hop a direction
    # carries the whole message over one 400 Gb/s NIC: t = S / (50 GB/s x network_efficiency x tree Simple
    # efficiency), the latency and pipeline fill < 0.5% of it
    tree_simple = profile_for("hopper", "infiniband_ndr").proto_efficiency["tree"]["Simple"]
    r = estimate(setup.fabric, "all_reduce", 2**34, gpus=16, profile=resolve_profile(out)).results[0]
    assert r.algorithm == "tree"
    assert r.time_s == pytest.approx(2**34 / (50e9 * eff * tree_simple), rel=0.005)


def test_a_network_efficiency_below_its_range_is_reported_at_its_bound(tmp_path):
    lo = PARAMETERS["network_efficiency"].lo
    log, _ = _synthetic(tmp_path, lo * 0.6)  # a network slower than the physical range allows
    proc = run_cli("calibrate", str(log), "--nics", "1", check=True)
    assert f"  network_efficiency = {lo:.4g}\n" in proc.stderr
    assert f"network_efficiency is at the lower bound of its physical range ({lo:.4g})" in proc.stderr


def test_a_parameter_the_fit_left_at_a_kink_is_not_reported_as_fitted(tmp_path, reference):
    # walk12: nccl-tests issue #309's 2-node XE9680 sweep typed out in nccl-tests' format printed
    # 'network_efficiency = 0.94' (the bundled value) as fitted. At the fitted point NVLink binds the NVLSTree above
    # ~0.934: raising the network's efficiency changes no time, lowering it fits worse; the fit never moves it
    rows = [r for r in csv.DictReader((reference / "nccl_tests_measurements.csv").open())
            if r["setup_id"] == "ncclt309_h100_2n_xe9680"]
    log = tmp_path / "x309.txt"
    log.write_text(render("all_reduce", ["a", "b"], 8, GPU, [int(r["size_bytes"]) for r in rows],
                          [float(r["time_us"]) * 1e-6 for r in rows]))
    out = tmp_path / "p.toml"
    proc = run_cli("calibrate", str(log), "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "  network_efficiency = " not in proc.stderr
    assert ("not fitted, kept at the base profile's value: network_efficiency: the fit left it at its start, 0.94: "
            "raising it moves no measured size") in proc.stderr
    shown = json.loads(run_cli("profile", "show", str(out), "--json", check=True).stdout)
    assert shown["parameters"]["network_efficiency"]["fitted"] is False


def test_a_network_efficiency_hidden_behind_a_cap_at_the_start_is_recovered(tmp_path):
    # walk38: 2 hosts x 4 GB300, four 800 Gb/s XDR NICs a host. At the bundled 0.94 the tree's large sizes are bound
    # by NCCL's per-channel protocol cap, so a small step of the network's efficiency moves no time: the fit kept
    # 0.94 and bent the pipeline window to 256 MiB instead, its 8 GiB 67% off. Times the model itself gives at 0.30
    # (so the truth is known) must give back 0.30, and every size
    sizes = [2**i for i in range(3, 35, 2)]
    gpu, kw = "NVIDIA GB300", dict(nics=4, nic_rate="800 Gb/s", network="infiniband_xdr", gpus_per_domain=4)
    setup = setup_from_run(parse_text(render("all_reduce", ["a", "b"], 4, gpu, sizes, [1.0] * len(sizes)))[0], **kw)
    base = profile_for("blackwell", "infiniband_xdr")
    assert estimate(setup.fabric, "all_reduce", 2**33, gpus=8, profile=base).results[0].bottleneck.limit == (
        "protocol-cap")
    truth = replace(base, network_efficiency=0.30)
    times = [r.time_s for r in estimate(setup.fabric, "all_reduce", sizes, gpus=8, profile=truth).results]
    log = tmp_path / "gb300.txt"
    log.write_text(render("all_reduce", ["a", "b"], 4, gpu, sizes, times))
    out = tmp_path / "mine.toml"
    doc = json.loads(run_cli("calibrate", str(log), "--gpus-per-domain", "4", "--nics", "4", "--nic-rate",
                             "800 Gb/s", "--network", "infiniband_xdr", "-o", str(out), "--json", check=True).stdout)
    assert doc["values"]["network_efficiency"] == pytest.approx(0.30, abs=0.005)
    fitted = [r.time_s for r in estimate(setup.fabric, "all_reduce", sizes, gpus=8,
                                         profile=resolve_profile(out)).results]
    assert max(abs(f / t - 1) for f, t in zip(fitted, times)) < 0.01
