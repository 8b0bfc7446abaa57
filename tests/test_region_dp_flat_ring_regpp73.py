"""regpp73 (sections 310/315's Left 4): the dp way's gradients cross the sites by the hierarchical reduction or by
NCCL's flat cross-DC ring, the faster unless the region's ``[nccl] dp_reduction`` names one.

Flat ring (NVIDIA/nccl branch ``cross-dc`` commit 18a07eeebe485ae00755615ced44739d20970560, PR #1659,
src/graph/connect.cc ``connectRings`` lines 143-158: ring channel ``c`` leaves each DC from one node and enters the next
at one node): every data-parallel group's ring over the job's ``D`` replicas carries, with the distributed optimizer
(ZeRO-1, the layout's default), ``(D-1)/D`` of its gradients' reduce-scatter and of its parameters' all-gather across
each site boundary, so ``(D-1)/D (V + W)`` together (``V`` one replica's fp32 gradients, ``W`` its bf16 parameters,
``V / 2``; regdp73), in ``2(D-1)`` steps that each cross;
each group's 16 channels (topo/data/profiles/nccl/2.30.7.toml [channels]) cross through a rank each
(``NCCL_SCATTER_XDC=1``; with 0 the group's one rank on one node, lines 94-105), at most the share's NICs, and hold one
NCCL_BUFFSIZE buffer each a round trip (topo/data/dci/nccl_window.toml). DGX H100: one 400 Gb/s ConnectX-7 a GPU,
50 GB/s (../shared/data/hardware.md, DGX H100 RA). Region: two DGX H100 SUs 40 km apart on 16 x 800 Gb/s.
"""

import pytest

from conftest import run_cli
from small_regions import loss_crossing_s, region_file, two_sites
from topo.engine.region_estimate import nccl_buffer_bytes
from topo.fabric.region import build_region
from topo.training.model import load_model
from topo.training.multisite import estimate_across_sites
from topo.training.parallel import make_layout

TEXT = two_sites("rfr73", "two SUs", "dgx-h100-superpod", 1)
NIC_Bps = 50e9
LAY = make_layout(tp=8, dp=4, global_batch=8, seq_len=4096)  # 2 replicas a site, 16 GPUs a share; D = 4, G = 8


def _dp(tmp_path_factory, nccl: str):
    region = build_region(region_file(tmp_path_factory, TEXT + nccl, "rfr73"))
    job = estimate_across_sites(region, load_model("llama3-8b"), LAY)
    return job.strategies[0], job.assumptions, loss_crossing_s(region, job)


def test_auto_takes_the_hierarchical_reduction_and_says_both(tmp_path_factory):
    s, said, loss = _dp(tmp_path_factory, "")
    V = s.dci_bytes_per_step
    assert V == pytest.approx(4 * 8.03e9, rel=0.005)  # Llama 3 8B's fp32 gradients (Meta's model card)
    hop = s.latency_s / 2
    assert s.dci_time_s == pytest.approx(2 * hop + V / (16 * NIC_Bps) + loss, rel=1e-12)  # + the loss's (regions76)
    line = next(a for a in said if a.startswith("dp across sites: the gradients cross"))
    assert "by the hierarchical reduction (the faster)" in line and "flat cross-DC ring over 4 replicas" in line


@pytest.mark.parametrize("scatter, nics", [("", 16), ("scatter_xdc = false\n", 8)])
def test_the_flat_ring_carries_d_minus_1_over_d_v_plus_w_in_2_d_minus_1_crossings(tmp_path_factory, scatter, nics):
    """D = 4: 0.75 x 1.5 V a boundary over 6 crossings; NICs min(G x 16, 16) = 16, or G = 8 without scattering; the
    window 2 hop x 1.125 V / (8 x 16 x 4 MiB)."""
    h, _, _ = _dp(tmp_path_factory, "")
    V, hop = h.dci_bytes_per_step, h.latency_s / 2
    s, said, loss = _dp(tmp_path_factory, f'[nccl]\n{scatter}dp_reduction = "flat_ring"\n')
    X = 3 / 4 * (V + V / 2)
    assert s.dci_bytes_per_step == pytest.approx(X, rel=1e-12)
    window = 2 * hop * X / (8 * 16 * nccl_buffer_bytes())
    norm = 2 * hop  # regions75: the gradient norm's FP32 all-reduce, there and back (tests/test_region_grad_norm_regions75.py)
    assert s.dci_time_s == pytest.approx(6 * hop + max(X / (nics * NIC_Bps), window) + norm + loss,
                                          rel=1e-6)
    assert s.step_time_s > h.step_time_s
    assert any("by NCCL's flat cross-DC ring (as the region's nccl.dp_reduction sets)" in a for a in said)


def test_a_bad_reduction_is_one_line(tmp_path_factory):
    path = region_file(tmp_path_factory, TEXT + '[nccl]\ndp_reduction = "tree"\n', "rfr73")
    p = run_cli("train", path, "--model", "llama3-8b", "--tp", "8", "--global-batch", "8")
    assert p.returncode != 0 and "Traceback" not in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1 and "nccl.dp_reduction" in p.stderr, p.stderr
