"""The host's time per call kind (topo/data/compute/host_calls.toml, topo.training.host_calls): the published
figures per call, and host_cpu.toml's Grace factor read off them."""

import datetime

import pytest

from topo.training.host_calls import call_host_s, host_call_table, te_linear_extra_host_s
from topo.fabric.server_cpu import host_cpu_table
from topo.training.host_cpu import host_time_factor, reference_host_cpu

BEFORE_FIX = datetime.date(2025, 8, 11)  # TE #2053's date
AFTER_FIX = datetime.date(2026, 1, 3)  # TE #2126: "nearly the same with vanilla torch linear"


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


def test_te_extra_on_grace_before_the_fix_and_none_after():
    """TE #2053: 99.66 - 37.08 = 62.58 us a TE Linear forward over torch's on GB200; TE #2126 (2026-01-03): none."""
    assert te_linear_extra_host_s("grace", BEFORE_FIX) == pytest.approx(62.58e-6)
    assert te_linear_extra_host_s("grace", AFTER_FIX) == 0.0
    assert te_linear_extra_host_s("xeon_8480c", AFTER_FIX) == 0.0


def test_no_figure_is_made_up_for_a_host_without_one():
    """#2053's DGX H100 TE row is not in any stored copy: the x86 extra before the fix is refused, in one line."""
    with pytest.raises(KeyError, match="te_linear_forward.*xeon_8480c.*no published figure"):
        te_linear_extra_host_s("xeon_8480c", BEFORE_FIX)
    with pytest.raises(KeyError, match="'nope'.*not in host_calls.toml"):
        call_host_s("nope", "grace")


def test_every_call_kind_has_a_status_and_a_source():
    for kind, row in host_call_table()["call"].items():
        assert row["status"] in ("published", "qualitative") and row["source"] and row["what"], kind
        if row["status"] == "published":
            assert row["host_s"] and all(v > 0 for v in row["host_s"].values()), kind
