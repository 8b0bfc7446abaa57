"""The host CPU's time per framework op (topo/data/compute/host_cpu.toml, topo.training.host_cpu): an eager step's
host time per kernel is kernels.toml's [launch] host_s on DGX H100's Xeon Platinum 8480C, times the GPU's host
CPU's factor."""

import tomllib

import pytest

from topo.resources import data_dir
from topo.training.gpus import _tables, gpu_compute
from topo.training.host_cpu import host_cpu, host_time_factor
from topo.training.model import load_model
from topo.training.operators import block_time, stage_compute
from topo.training.parallel import make_layout

TABLE = tomllib.loads(data_dir("compute", "host_cpu.toml").read_text(encoding="utf-8"))
KERNELS = tomllib.loads(data_dir("compute", "kernels.toml").read_text(encoding="utf-8"))


def test_grace_factor_is_the_published_linear_forward_ratio():
    """NVIDIA/TransformerEngine issue #2053: one torch.nn.Linear forward (BF16, hidden 2048, 8,192 tokens) costs
    the host 37.08 us on GB200 and 13.48 us on DGX H100 (Xeon Platinum 8480C); GH200 33.17 us."""
    assert host_time_factor("grace") == pytest.approx(37.08 / 13.48, abs=0.005)
    lo, hi = TABLE["cpu"]["grace"]["time_factor_range"]
    assert lo == pytest.approx(33.17 / 13.48, abs=0.005) and hi == pytest.approx(37.08 / 13.48, abs=0.005)


def test_xeon_8570_factor_is_the_boost_clock_ratio():
    """DGX H100 datasheet: 8480C max boost 3.8 GHz; DGX B200 datasheet: 8570 max boost 4.0 GHz."""
    assert host_time_factor("xeon_8570") == pytest.approx(3.8 / 4.0)
    assert host_time_factor(TABLE["reference"]) == 1.0


def test_every_factor_stays_in_its_range_and_has_a_source():
    for name, row in TABLE["cpu"].items():
        lo, hi = row["time_factor_range"]
        assert lo <= host_time_factor(name) <= hi, name  # Grace's computed from host_calls.toml
        assert row["status"] in ("published", "secondary", "fitted", "assumption") and row["source"], name


def test_every_catalog_gpu_has_a_host_cpu():
    for gpu in _tables():
        assert host_cpu(gpu) in TABLE["cpu"], gpu
    with pytest.raises(KeyError, match="host_cpu.toml: gpu: no host CPU for 'X9'"):
        host_cpu("X9")


def test_launch_host_time_is_the_reference_time_times_the_factor():
    host_s = KERNELS["launch"]["host_s"]
    for gpu, cpu in (("H100", "xeon_8480c"), ("B200", "xeon_8570"), ("GB200", "grace"), ("GB300", "grace")):
        k = gpu_compute(gpu).kernels
        assert k.host_cpu == cpu
        assert k.launch_host_s == pytest.approx(host_s * host_time_factor(cpu))
    # a fit's override is the reference CPU's time, scaled the same way
    assert gpu_compute("GB200", overrides={"launch": {"host_s": 1e-5}}).kernels.launch_host_s == pytest.approx(
        1e-5 * 37.08 / 13.48, rel=1e-3)


def test_a_host_bound_moe_layer_waits_longer_on_grace():
    """A dropless MoE layer lasts at least its host's forward launches (operators._host_waits_s): with the
    launches far slower than the GPU, GB200's host wait over B200's is the CPUs' factor ratio."""
    qwen = load_model("qwen3-30b-a3b")
    lay = make_layout(ep=8, dp=8, global_batch=64, seq_len=4096, etp=1)
    over = {"launch": {"host_s": 1e-3}}
    gb, b = gpu_compute("GB200", overrides=over), gpu_compute("B200", overrides=over)
    ratio = host_time_factor("grace") / host_time_factor("xeon_8570")
    assert block_time(qwen, lay, gb, "E").host_s == pytest.approx(ratio * block_time(qwen, lay, b, "E").host_s)
    wait_gb, wait_b = (stage_compute(qwen, lay, g).by_module_s["host"] for g in (gb, b))
    assert wait_gb > 2.5 * wait_b
