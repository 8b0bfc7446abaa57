"""The host's time per call kind (topo/data/compute/host_calls.toml, topo.training.host_calls): the published
figures per call, and host_cpu.toml's Grace factor read off them."""

import tomllib

import pytest

from topo.resources import data_dir
from topo.training.host_calls import call_host_s, host_call_table
from topo.fabric.server_cpu import host_cpu_table
from topo.training.host_cpu import call_host_on_s, host_time_factor, reference_host_cpu



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
        assert row["status"] in ("published", "secondary", "qualitative") and row["source"] and row["what"], kind
        if row["status"] in ("published", "secondary"):
            assert row["host_s"], kind
            for v in row["host_s"].values():  # one figure, or one a part of the call
                assert all(x > 0 for x in (v.values() if isinstance(v, dict) else [v])), kind


def test_hybridep_call_is_pr_5094s_range_outside_the_preprocessing_per_call():
    """NVIDIA-NeMo/Megatron-Bridge@7ded17dae (PR #5094) SKILL.md, rank-0 Nsight, overlap off: 'HybridEP
    dispatch-with-permute NVTX' 4.253 s, 'metadata-preprocess' 3.109 s, over 48 layers x 64 micro-batches x 2
    dispatch_with_permute calls (the forward dispatch and the combine's backward) = 6,144: 186.2 us a call on DGX
    H100's 8480C. The overlap-on run's (1.767 - 0.670) s / 6,144 = 178.5 us lies within 5%."""
    row = host_call_table()["call"]["hybridep_dispatch_with_permute"]
    assert row["calls"] == 48 * 64 * 2
    assert (row["range_s"], row["metadata_preprocess_s"]) == (4.253, 3.109)
    assert call_host_s("hybridep_dispatch_with_permute", "xeon_8480c") == pytest.approx(
        (4.253 - 3.109) / 6144, rel=1e-3)
    on = (row["range_s_overlap_on"] - row["metadata_preprocess_s_overlap_on"]) / row["calls"]
    assert on == pytest.approx(178.5e-6, rel=1e-3) and abs(on / row["host_s"]["xeon_8480c"] - 1) < 0.05


def test_deepep_v1_call_is_the_traces_figure_per_call_kind():
    """deepseek-ai/profile-data@4496024 train.json: DeepEP's C++ host spans (less notify_dispatch's busy-wait) of
    the forward dispatch, forward combine and their backwards, medians over 4 layers: 245 / 67 / 54 / 88 us, each
    kind its own figure (their mean, 113.5 us, priced every call before). The DualPipe stage ranges around them
    (384 / 181.5 / 160.5 / 274 us) bound them above, and the host CPU is an assumption (DeepSeek names none)."""
    row = host_call_table()["call"]["deepep_v1_call"]
    kinds = ("dispatch_forward", "combine_forward", "dispatch_backward", "combine_backward")
    figures = [call_host_s("deepep_v1_call", "xeon_8480c", k) for k in kinds]
    assert figures == pytest.approx([245e-6, 67e-6, 54e-6, 88e-6])
    assert sum(figures) / 4 == pytest.approx(113.5e-6)
    assert all(row["stage_ranges_s"][k] > v for k, v in zip(kinds, figures))
    assert row["host_cpu_status"] == "assumption"


def test_a_call_timed_by_part_needs_its_part_and_a_one_figure_call_prices_every_part_alike():
    """A kind with figures by part refuses a call without one, or with an unknown one, in one line naming the
    allowed parts; a one-figure kind (HybridEP's) gives its figure for any part."""
    with pytest.raises(KeyError, match="deepep_v1_call.*xeon_8480c.*part None.*allowed: combine_backward"):
        call_host_s("deepep_v1_call", "xeon_8480c")
    with pytest.raises(KeyError, match="part 'nope'.*allowed"):
        call_host_on_s("deepep_v1_call", "grace", "nope")
    assert call_host_s("hybridep_dispatch_with_permute", "xeon_8480c", "combine_forward") == pytest.approx(186.2e-6)
    assert call_host_on_s("deepep_v1_call", "grace", "combine_forward") == pytest.approx(67e-6 * 37.08 / 13.48)


def test_a_call_without_a_figure_on_a_host_is_the_references_times_its_factor():
    """Grace: 186.2 us x 37.08 / 13.48 (TE #2053's torch.nn.Linear ratio); the reference itself unscaled; a
    published figure on the CPU is used as is; an unknown CPU is one line."""
    assert call_host_on_s("hybridep_dispatch_with_permute", "xeon_8480c") == pytest.approx(186.2e-6)
    assert call_host_on_s("hybridep_dispatch_with_permute", "grace") == pytest.approx(186.2e-6 * 37.08 / 13.48)
    assert call_host_on_s("torch_linear_forward", "grace") == pytest.approx(37.08e-6)
    with pytest.raises(KeyError, match="'nope'.*not in host_cpu.toml"):
        call_host_on_s("hybridep_dispatch_with_permute", "nope")

