"""The host's time per call kind (topo/data/compute/host_calls.toml, topo.training.host_calls): the published
figures per call, and host_cpu.toml's Grace factor read off them."""

import tomllib

import pytest

from topo.resources import data_dir
from topo.training.host_calls import call_host_s, host_call_table
from topo.fabric.server_cpu import host_cpu_table
from topo.training.host_cpu import host_time_factor, reference_host_cpu



def test_linear_forward_figures_are_te_2053s():
    """NVIDIA/TransformerEngine issue #2053 (2025-08-11), CPU runtime per Linear forward (BF16, hidden 2048, 8,192
    tokens): GB200 torch 37.08 / TE 99.66 us, DGX H100 (8480C) torch 13.48 us."""
    assert call_host_s("torch_linear_forward", "xeon_8480c") == pytest.approx(13.48e-6)
    assert call_host_s("torch_linear_forward", "grace") == pytest.approx(37.08e-6)
    assert call_host_s("te_linear_forward", "grace") == pytest.approx(99.66e-6)


def test_grace_factor_is_the_torch_call_ratio_of_this_table():
    """host_cpu.toml's Grace factor and its range are the torch.nn.Linear forward's GB200 and GH200 over DGX H100
    figures of this table (one measurement, two files: they must not drift apart)."""
    torch = host_call_table()["call"]["torch_linear_forward"]
    ref = call_host_s("torch_linear_forward", reference_host_cpu())
    assert host_time_factor("grace") == pytest.approx(call_host_s("torch_linear_forward", "grace") / ref, abs=0.005)
    lo, hi = host_cpu_table()["cpu"]["grace"]["time_factor_range"]
    assert lo == pytest.approx(torch["host_s_gh200"] / ref, abs=0.005)
    assert hi == pytest.approx(torch["host_s"]["grace"] / ref, abs=0.005)


def test_grace_factor_is_read_from_this_table_not_written_twice():
    """rev56: host_calls.toml was read by tests only while host_cpu.toml wrote Grace's 2.75 again. The factor is now
    TE #2053's torch.nn.Linear forward, GB200 37.08 us over DGX H100 (8480C) 13.48 us, computed from this table:
    host_cpu.toml names the call kind and holds no number of its own."""
    with open(data_dir("compute", "host_cpu.toml"), "rb") as f:
        grace = tomllib.load(f)["cpu"]["grace"]
    assert "time_factor" not in grace and grace["time_factor_call"] == "torch_linear_forward"
    assert host_time_factor("grace") == pytest.approx(37.08 / 13.48, rel=1e-9)


def test_te_extra_on_grace_is_the_published_difference():
    """TE #2053: 99.66 - 37.08 = 62.58 us a TE Linear forward over torch's on GB200 (its release band: until TE
    #2126's 2026-01-03 'nearly the same', a qualitative row)."""
    te = host_call_table()["call"]["te_linear_forward"]
    assert call_host_s("te_linear_forward", "grace") - call_host_s("torch_linear_forward", "grace") == pytest.approx(
        62.58e-6)
    assert te["extra_gone_by"] == "2026-01-03" and te["extra_gone_status"] == "qualitative"


def test_no_figure_is_made_up_for_a_host_without_one():
    """#2053's DGX H100 TE row is not in any stored copy: an x86 TE call is refused, in one line."""
    with pytest.raises(KeyError, match="te_linear_forward.*xeon_8480c.*no published figure"):
        call_host_s("te_linear_forward", "xeon_8480c")
    with pytest.raises(KeyError, match="'nope'.*not in host_calls.toml"):
        call_host_s("nope", "grace")


def test_every_call_kind_has_a_status_and_a_source():
    for kind, row in host_call_table()["call"].items():
        assert row["status"] in ("published", "qualitative") and row["source"] and row["what"], kind
        if row["status"] == "published":
            assert row["host_s"] and all(v > 0 for v in row["host_s"].values()), kind
