"""A spec names its host CPU (issue 29): ``[server] host_cpu`` is a key of topo/data/compute/host_cpu.toml ``[cpu]``.

The CPU sets the host's time per launched op in ``topo train`` (its ``time_factor``: TransformerEngine issue #2053
for Grace, the datasheets' boost clocks for the Xeons, see the data file) and its vendor sets ``cpu_vendor``, which
NCCL's CPU-dependent terms read (NVIDIA/nccl src/graph/tuning.cc getNetOverhead: 2 us per step on AMD x86, 1 us
elsewhere). Without one, the GPU's catalog server's CPU is used, and the outputs say which and why.
"""

import json
import subprocess
import sys
import tomllib

import pytest

import topo
from topo.calibrate.setup import node_spec
from topo.engine.profiles import fabric_profile
from topo.errors import TopoError
from topo.fabric.server_cpu import CPU_VENDORS, host_cpu_table, server_cpu_vendor
from topo.resources import data_dir
from topo.training.host_cpu import host_time_factor
from topo.training.model import load_model
from topo.training.parallel import make_layout
from topo.training.step import estimate_step

TABLE = tomllib.loads(data_dir("compute", "host_cpu.toml").read_text(encoding="utf-8"))
FACTOR = {name: host_time_factor(name) for name in TABLE["cpu"]}  # Grace's from host_calls.toml
TRAIN = ["train", "dgx-h100-superpod", "--model", "qwen3-30b-a3b", "--gpus", "64", "--ep", "8", "--dp", "64",
         "--global-batch", "512"]


def _spec_dict(gpu="B200", host_cpu=None, cpu_vendor=None):
    d = node_spec(gpu, 8, "400 Gb/s", "infiniband_ndr", 2)
    if host_cpu is not None:
        d["server"]["host_cpu"] = host_cpu
    if cpu_vendor is not None:
        d["server"]["cpu_vendor"] = cpu_vendor
    return d


def _topo(*args):
    return subprocess.run([sys.executable, "-m", "topo", *args], capture_output=True, text=True)


def test_every_named_cpu_has_a_vendor_and_each_gpus_default_agrees_with_the_server_catalog():
    for name, row in TABLE["cpu"].items():
        assert row["vendor"] in CPU_VENDORS, name
    for gpu, cpu in TABLE["gpu"].items():  # DGX A100: EPYC 7742 (AMD), DGX H100: Xeon 8480C, NVL72: Grace (Arm)
        assert TABLE["cpu"][cpu]["vendor"] == server_cpu_vendor(gpu), gpu


def test_a_named_cpu_sets_the_vendor_and_nccls_net_overhead():
    spec = topo.spec_from_dict(_spec_dict("H100", "epyc_7742"))
    assert spec.cpu_vendor == "amd" and spec.host_cpu == ("epyc_7742", "spec")
    assert fabric_profile(topo.build_fabric(spec)).net_overhead_s == pytest.approx(2e-6)  # getNetOverhead, AMD
    default = topo.spec_from_dict(_spec_dict("H100"))
    assert default.cpu_vendor == "intel" and default.host_cpu == ("xeon_8480c", "gpu default")
    assert fabric_profile(topo.build_fabric(default)).net_overhead_s == pytest.approx(1e-6)
    assert topo.spec_from_dict(_spec_dict("B200", "grace")).cpu_vendor == "arm"
    # the same vendor given twice is no conflict
    assert topo.spec_from_dict(_spec_dict("H100", "epyc_7742", "amd")).cpu_vendor == "amd"


def test_a_named_cpu_scales_the_steps_host_time_by_the_tables_factor():
    """A host-bound MoE step (kernels.toml's host_s raised to 10 ms per launch): each dropless MoE layer's GPU waits
    h - g for the host's launches (h: host time, g: GPU time), so the waits on CPUs a and b keep at least their
    factors' ratio, (f_a h - g) / (f_b h - g) >= f_a / f_b, and reach it as h >> g."""
    qwen = load_model("qwen3-30b-a3b")
    lay = make_layout(ep=8, dp=8, global_batch=64, seq_len=4096, etp=1)
    over = {"launch": {"host_s": 1e-2}}
    runs = {}
    for cpu in (None, "grace", "xeon_8480c"):
        fabric = topo.build_fabric(topo.spec_from_dict(_spec_dict("B200", cpu)))
        runs[cpu] = estimate_step(fabric, qwen, lay, kernel_overrides=over, contention=False)
    assert runs[None].host_cpu == {"name": "xeon_8570", "source": "gpu default", "time_factor": FACTOR["xeon_8570"],
                                   "reference": host_cpu_table()["reference"]}
    assert runs["grace"].host_cpu == {"name": "grace", "source": "spec", "time_factor": FACTOR["grace"],
                                      "reference": "xeon_8480c"}  # the file's reference (DGX H100's CPU)
    wait = {cpu: r.compute_by_module_s["host"] for cpu, r in runs.items()}
    for cpu in ("grace", "xeon_8480c"):
        ratio = FACTOR[cpu] / FACTOR["xeon_8570"]  # 37.08 / 13.48 / 0.95 for Grace; 1 / 0.95 for the 8480C
        assert ratio <= wait[cpu] / wait[None] <= ratio * 1.005, cpu


def test_an_unknown_cpu_is_one_line_naming_file_key_value_and_the_allowed_names():
    with pytest.raises(TopoError, match="server.host_cpu.*'epyc_9654'.*host_cpu.toml.*allowed: xeon_8480c"):
        topo.spec_from_dict(_spec_dict("H100", "epyc_9654"))
    for cmd in (["describe", "dgx-h100-superpod"], TRAIN):
        r = _topo(*cmd, "--set", "server.host_cpu=epyc_9654")
        assert r.returncode == 2 and "Traceback" not in r.stderr
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1, r.stderr
        line = lines[0]
        assert line.startswith("error: ") and "dgx-h100-superpod.toml" in line and "server.host_cpu" in line
        assert "'epyc_9654'" in line and "topo/data/compute/host_cpu.toml" in line
        assert "allowed: " + ", ".join(TABLE["cpu"]) in line


def test_a_vendor_that_contradicts_the_named_cpu_is_an_error():
    with pytest.raises(TopoError, match=r"server.host_cpu: 'grace' is an arm CPU but server.cpu_vendor is 'amd'"):
        topo.spec_from_dict(_spec_dict("GB200", "grace", "amd"))
    r = _topo("describe", "dgx-h100-superpod", "--set", "server.host_cpu=grace", "--set", "server.cpu_vendor=intel")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
    assert "allowed: drop cpu_vendor (host_cpu sets it) or a host CPU by intel: xeon_8480c, xeon_8570" in r.stderr


def test_describe_shows_the_host_cpu_and_where_it_came_from():
    out = _topo("describe", "dgx-h100-superpod").stdout
    assert "host CPU  xeon_8480c (intel; the GPU's default, topo/data/compute/host_cpu.toml)" in out
    out = _topo("describe", "dgx-h100-superpod", "--set", "server.host_cpu=epyc_7742").stdout
    assert "host CPU  epyc_7742 (amd; server.host_cpu, topo/data/compute/host_cpu.toml)" in out
    d = json.loads(_topo("describe", "dgx-h100-superpod", "--set", "server.host_cpu=epyc_7742", "--json").stdout)
    assert (d["host_cpu"], d["host_cpu_source"], d["cpu_vendor"]) == ("epyc_7742", "spec", "amd")


def test_train_says_which_cpu_and_prices_its_host_time():
    r = _topo(*TRAIN, "--set", "server.host_cpu=grace")
    assert r.returncode == 0, r.stderr
    assert "host CPU grace (server.host_cpu): 2.75 x the reference xeon_8480c's host time per launched op" in r.stdout
    d = json.loads(_topo(*TRAIN, "--json").stdout)
    assert d["host_cpu"] == {"name": "xeon_8480c", "source": "gpu default", "time_factor": 1.0,
                             "reference": host_cpu_table()["reference"]}
    grace = json.loads(_topo(*TRAIN, "--set", "server.host_cpu=grace", "--json").stdout)
    assert grace["host_cpu"]["source"] == "spec"
    # this MBS-1 eager layer sits near the 8480C's host threshold (tens of ms of waits a step at most, with the
    # host's launch time at the top of its 5-20 us range); Grace's 2.75 x per-op time makes the host, not the GPU,
    # set most of it (0.74 s a step once the experts' 16 GEMMs a pass are one call and 15 GEMMs from C++:
    # operators.launch_calls)
    assert d["compute_by_module_s"].get("host", 0.0) < 0.1
    assert grace["compute_by_module_s"]["host"] > 20 * d["compute_by_module_s"].get("host", 0.0)
    assert grace["compute_by_module_s"]["host"] > 0.5
