"""regions75 (section 352, item 1): the optimizer's gradient norm across the sites.

Megatron-Core's gradient clipping (NVIDIA/Megatron-LM@d98e8a64ddf34856e74b24714e3bedb2f5a39553,
megatron/core/optimizer/optimizer.py ``clip_grad_norm`` lines 374-388, run when ``clip_grad > 0``, line 830, default
1.0 in optimizer_config.py line 374) all-reduces one FP32 element (clip_grads.py ``get_grad_norm_fp32`` lines 55-139,
``torch.zeros(1, dtype=torch.float)`` line 108) over the optimizer's ``grad_stats_parallel_group``: with the
distributed optimizer ``intra_dist_opt_group`` (optimizer/__init__.py lines 671-674), one optimizer instance's ranks
(parallel_state.py lines 1562-1576). So with one instance over the job (NCCL's flat cross-DC ring) it spans the sites
once a step, before the optimizer's step, exposed; with one instance a site (the hierarchical reduction) it stays
inside each site; DDP's is the model-parallel group (lines 680-682), inside a replica.

Region: two DGX H100 SUs 40 km apart (tests/small_regions.py): one hop ``L`` one way, the hierarchical phase's latency
``2 L`` at ``K = 2``; four bytes there and back over the chained roots is ``2 L`` (a 4-byte bandwidth part of
4 B / 50 GB/s = 0.08 ns, within the tolerance).
"""

import pytest

from small_regions import region_file, two_sites
from topo.fabric.region import build_region
from topo.training import dp_across
from topo.training.model import load_model
from topo.training.multisite import estimate_across_sites
from topo.training.parallel import make_layout
from topo.units import format_time

TEXT = two_sites("gn75", "two SUs", "dgx-h100-superpod", 1)
FLAT = '[nccl]\ndp_reduction = "flat_ring"\n'


def _dp(tmp_path_factory, nccl: str, **layout):
    region = build_region(region_file(tmp_path_factory, TEXT + nccl, "gn75"))
    job = estimate_across_sites(region, load_model("llama3-8b"),
                                make_layout(tp=8, dp=4, global_batch=8, seq_len=4096, **layout))
    return job.strategies[0], job.assumptions


def test_the_flat_ring_says_the_norm_there_and_back(tmp_path_factory):
    """The form's line names the norm's crossing, 2 L (40 km x 4.9 us/km + 50 us, and the ways up and down, a way)."""
    h, _ = _dp(tmp_path_factory, "")
    hop = h.latency_s / 2
    assert hop == pytest.approx(40 * 4.9e-6 + 50e-6, abs=2e-6)
    _, said = _dp(tmp_path_factory, FLAT)
    line = next(a for a in said if a.startswith("dp across sites: the gradients cross"))
    assert f"the gradient norm's all-reduce {format_time(2 * hop)}" in line, line


def test_the_norm_adds_its_seconds_to_the_step_exposed(tmp_path_factory, monkeypatch):
    """The same job with the norm's crossing priced at 0: the step is shorter by exactly 2 L (the optimizer's step
    waits for the norm), and the flat ring's DCI time by the same."""
    s, _ = _dp(tmp_path_factory, FLAT)
    h, _ = _dp(tmp_path_factory, "")
    monkeypatch.setattr(dp_across, "small_all_reduce_dci_s", lambda *a, **k: 0.0)
    z, _ = _dp(tmp_path_factory, FLAT)
    assert s.step_time_s - z.step_time_s == pytest.approx(h.latency_s, rel=1e-6)
    assert s.dci_time_s - z.dci_time_s == pytest.approx(h.latency_s, rel=1e-6)


@pytest.mark.parametrize("nccl, layout", [("", {}), (FLAT, {"dp_sharding": "none"})])
def test_no_norm_crosses_with_one_instance_a_site_or_with_ddp(tmp_path_factory, monkeypatch, nccl, layout):
    """Hierarchical (one optimizer instance a site: the norm inside the instance) and DDP (the model-parallel group):
    pricing the norm at 0 changes nothing."""
    s, said = _dp(tmp_path_factory, nccl, **layout)
    monkeypatch.setattr(dp_across, "small_all_reduce_dci_s", lambda *a, **k: 0.0)
    z, _ = _dp(tmp_path_factory, nccl, **layout)
    assert s.step_time_s == z.step_time_s and s.dci_time_s == z.dci_time_s
    assert not any("gradient norm" in a for a in said if "dp_sharding" in layout)  # DDP's ring says none


def test_the_dci_for_95pct_counts_the_norm(tmp_path_factory, monkeypatch):
    """rev75: the budget the flat ring's phase may take for 95% of one site is what the exposed tail leaves, the
    norm's crossing included (``E = T_s (1/0.95 - 1) - amax - norm``), so pricing the norm at 0 asks less DCI
    (a mutation leaving the norm out of ``E`` passed)."""
    region = build_region(region_file(tmp_path_factory, TEXT + FLAT, "gn75"))

    def need():  # a batch long enough that 95% is reachable (8 sequences a step leave no budget: inf either way)
        job = estimate_across_sites(region, load_model("llama3-8b"),
                                    make_layout(tp=8, dp=4, global_batch=512, seq_len=4096))
        return job.strategies[0].dci_total_Bps_for_95pct

    s = need()
    monkeypatch.setattr(dp_across, "small_all_reduce_dci_s", lambda *a, **k: 0.0)
    assert 0 < need() < s < float("inf")
