"""regpp73 (regtree71's Left 1, share72's Left 2): a pipeline stage boundary that crosses sites sends through the
NICs of the boundary stage's ranks, one NIC a rank pair (Megatron-Core's p2p send / receive to the next pipeline
rank, NVIDIA/Megatron-LM@2fd6e2b7 megatron/core/pipeline_parallel/p2p_communication.py), not through every NIC of
a site's share. Region: two DGX H100 SUs (256 GPUs each) 40 km apart on 16 x 800 Gb/s (1.6 TB/s a direction)."""

import pytest

from small_regions import built_region, two_sites
from topo.training.model import load_model
from topo.training.multisite import estimate_across_sites, pp_boundary_ranks
from topo.training.parallel import make_layout
from topo.training.step import step_traffic

TEXT = two_sites("rpp73", "two SUs", "dgx-h100-superpod", 1)
NIC_Bps = 50e9  # one 400 Gb/s ConnectX-7 a GPU on DGX H100 (../shared/data/hardware.md, DGX H100 RA)


@pytest.fixture(scope="module")
def region(tmp_path_factory):
    return built_region(tmp_path_factory, TEXT, "rpp73")


def test_a_stage_boundary_crosses_through_its_ranks_nics(region):
    """Llama 3 8B, TP 8 x PP 8 x DP 2 (the job), stages split 4 + 4 at the sites: the boundary stage has tp x dp =
    16 ranks, each sending m micro-batches of its activations (seq x mb x hidden x 2 B / tp with sequence
    parallelism: 4096 x 1 x 4096 x 2 / 8 = 4 MiB) through its own NIC, and receiving their gradients back. A site
    sends and receives m x 16 x 4 MiB; over 16 NICs that is m x 4 MiB / 50 GB/s, twice the span's m x 16 x 4 MiB /
    1.6 TB/s: the NICs bind. Main spread them over the share's 64 GPUs' NICs (a quarter of that time) and the span
    bound."""
    model = load_model("llama3-8b")
    lay = make_layout(tp=8, pp=8, dp=2, global_batch=16, seq_len=4096)
    job = estimate_across_sites(region, model, lay, across="pp")
    s = next(x for x in job.strategies if x.strategy == "pp")
    share = lay.model_copy(update={"dp": 1, "global_batch": 8})
    assert pp_boundary_ranks(share, 2) == 16 == lay.tp * lay.dp
    send = sum(it["size_bytes"] for it in step_traffic(model, share) if it["dim"] == "pp")
    assert send == 4096 * 4096 * 2 / 8
    m = share.microbatches
    assert s.bottleneck == "nic"
    assert s.dci_bytes_per_step == pytest.approx(m * 16 * send, rel=1e-12)
    assert s.dci_time_s - s.latency_s == pytest.approx(m * send / NIC_Bps, rel=1e-12)


def test_a_stage_of_every_gpu_of_the_site_is_span_bound(region):
    """TP 8 x PP 2 x DP 32: the boundary stage is every GPU of its site (256 ranks, 256 NICs, 12.8 TB/s), so the
    span binds, m x 256 x 4 MiB / 1.6 TB/s, as before."""
    model = load_model("llama3-8b")
    lay = make_layout(tp=8, pp=2, dp=32, global_batch=64, seq_len=4096)
    job = estimate_across_sites(region, model, lay, across="pp")
    s = next(x for x in job.strategies if x.strategy == "pp")
    m = lay.microbatches
    send = 4096 * 4096 * 2 / 8
    assert s.bottleneck.startswith("dci:east-west")
    assert s.dci_time_s - s.latency_s == pytest.approx(m * 256 * send / 1.6e12, rel=1e-12)
