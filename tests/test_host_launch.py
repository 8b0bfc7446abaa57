"""The host's launch floor of single-process runs (nccl-tests -g N; topo.engine.host_launch, issue 33).

Closed forms: with N GPUs launched in turn by one thread, a collective takes max(model, N x host launch); the
host launch is the bundled 3.25 us = 260 us / 80 kernels (cuda.juliagpu.org/dev/usage/graphs/, an RK4 step of 80
kernels launched one by one; /work/shared/data/kernels.md section 6).
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from nccl_text import render
from topo import build_fabric, spec_from_dict
from topo.calibrate.parse import parse_text
from topo.calibrate.setup import node_spec, setup_from_run
from topo.engine.estimate import estimate
from topo.engine.host_launch import host_floor_s
from topo.engine.profiles import profile_for
from topo.errors import TopoError

HOST_LAUNCH_S = 260e-6 / 80  # the published figure the data file holds


def _a100_box():
    return build_fabric(spec_from_dict(node_spec("A100", 8, "200 Gb/s", "infiniband_hdr", 1), source="test"))


def _time(fab, size, **kw):
    return estimate(fab, "all_reduce", [size], gpus=8, **kw).results[0]


def test_the_bundled_host_launch_is_the_published_figure():
    assert profile_for("ampere", "infiniband_hdr").host_launch_per_gpu_s == pytest.approx(HOST_LAUNCH_S)
    assert profile_for("hopper", "infiniband_ndr").nccl_model().host_launch_per_gpu_s == 0.0  # not NCCL's


def test_one_thread_launching_8_gpus_sets_the_floor_at_small_sizes():
    fab = _a100_box()
    one = _time(fab, 1024)
    eight = _time(fab, 1024, gpus_per_process=8)
    assert one.time_s < 8 * HOST_LAUNCH_S  # the GPUs alone are faster than the host's 8 launches (17.6 us)
    assert eight.time_s == pytest.approx(8 * HOST_LAUNCH_S, rel=1e-9)  # 26.0 us
    assert eight.latency_s == pytest.approx(one.latency_s + 8 * HOST_LAUNCH_S - one.time_s, rel=1e-9)


def test_the_floor_leaves_sizes_the_gpus_take_longer_for():
    fab = _a100_box()
    big_one, big_eight = _time(fab, 2**30), _time(fab, 2**30, gpus_per_process=8)
    assert big_eight.time_s == big_one.time_s and big_one.time_s > 8 * HOST_LAUNCH_S
    assert _time(fab, 1024, gpus_per_process=1).time_s == _time(fab, 1024).time_s


def test_the_floor_scales_with_the_gpus_one_thread_launches():
    prof = profile_for("ampere", "infiniband_hdr")
    assert host_floor_s(prof, 1) == 0.0
    assert host_floor_s(prof, 4) == pytest.approx(4 * HOST_LAUNCH_S)
    assert host_floor_s(prof, 8) == pytest.approx(2 * host_floor_s(prof, 4))


def test_a_bad_gpus_per_process_is_refused_by_name():
    with pytest.raises(TopoError) as e:
        _time(_a100_box(), 1024, gpus_per_process=0)
    assert e.value.key == "gpus_per_process" and "got 0" in str(e.value)


def test_the_cli_refuses_a_bad_gpus_per_process_in_one_line():
    r = subprocess.run([sys.executable, "-m", "topo", "estimate", "dgx-h100-256", "--gpus-per-process", "0"],
                       capture_output=True, text=True)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.strip().startswith("error:") and "--gpus-per-process" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_a_log_run_with_g8_is_modelled_with_the_floor():
    text = render("all_reduce", ["a"], 8, "NVIDIA A100-SXM4-80GB", [1024, 2048], [40e-6, 41e-6], ngpus=8)
    setup = setup_from_run(parse_text(text)[0])
    assert setup.gpus_per_process == 8 and any("nGpus 8" in a for a in setup.assumptions)
    one = setup_from_run(parse_text(render("all_reduce", ["a"], 8, "NVIDIA A100-SXM4-80GB", [1024], [40e-6]))[0])
    assert one.gpus_per_process == 1
