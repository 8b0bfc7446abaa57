"""share72 (regshare71's Left): a region's by-size split capped at what each site holds, and the DCI phase's NICs
term of a share smaller than its site. Region: 256 + 768 DGX H100 (one and three SUs), 40 km apart."""

import pytest

from conftest import run_cli
from small_regions import built_region, loss_crossing_s, region_file, two_sites
from topo.training.model import load_model
from topo.training.multisite import estimate_across_sites, site_shares
from topo.training.parallel import make_layout

TEXT = two_sites("rs72", "1 and 3 SUs", "dgx-h100-superpod", 1, 3)


@pytest.fixture(scope="module")
def region(tmp_path_factory):
    return built_region(tmp_path_factory, TEXT, "rs72")


def test_the_by_size_split_never_puts_a_site_over_what_it_holds(region):
    """TP 8 x PP 3 = 24 GPUs a replica: east's 256 GPUs hold 10 (256 / 24 = 10.67), west's 768 hold 32, the
    region 42. By size, 42 replicas are 42 x 256 / 1,024 = 10.5 east and 31.5 west: the largest remainders (a tie,
    the first site) gave east 11 (264 GPUs, refused); capped, east 10 and the remainder to west, 32. Under the caps
    the proportional split is kept (dp 40: 10 + 30); beyond the region's 42 the split is uncapped and refused naming
    a site."""
    lay = make_layout(tp=8, pp=3, dp=42, global_batch=84)
    assert site_shares(region, lay) == (10, 32)
    assert site_shares(region, lay.model_copy(update={"dp": 40, "global_batch": 80})) == (10, 30)
    assert site_shares(region, lay.model_copy(update={"dp": 7, "global_batch": 84})) == (2, 5)  # 1.75 + 5.25
    job = estimate_across_sites(region, load_model("llama3-8b"), lay)
    assert job.site_dp == {"east": 10, "west": 32} and job.gpus == 42 * 24 and job.idle_gpus == 1024 - 42 * 24
    over = make_layout(tp=8, pp=3, dp=43, global_batch=86)
    assert sum(site_shares(region, over)) == 43
    with pytest.raises(Exception, match="the site has"):
        estimate_across_sites(region, load_model("llama3-8b"), over)


def test_the_cli_fills_the_sites_without_a_share_over_its_site(tmp_path_factory):
    """`topo train REGION --tp 8 --pp 3 --global-batch 84`, dp left out: the most replicas the sites hold, 42,
    runs (east 10, west 32; on main east's share was 11 replicas, 264 GPUs, and the job was refused)."""
    path = region_file(tmp_path_factory, TEXT, "rs72")
    p = run_cli("train", path, "--model", "llama3-8b", "--tp", "8", "--pp", "3", "--global-batch", "84")
    assert p.returncode == 0, p.stderr
    assert "(east dp 10, west dp 32)" in p.stdout and "16 of the region's 1,024 GPUs run no part of it (east 16)" \
        in p.stdout


SMALL = two_sites("rs72n", "1 and 2 SUs", "dgx-h100-superpod", 1, 2) + '[nccl]\ndp_reduction = "hierarchical"\n'
# regions82: the hierarchical form set (auto takes the flat ring at dp 96, its step the shorter)


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    return built_region(tmp_path_factory, SMALL, "rs72n")


def test_a_share_smaller_than_its_site_crosses_through_its_own_gpus_nics(small):
    """The hierarchical reduction's cross-site all-reduce: each GPU of a site's share all-reduces its own shard of
    the site's reduced replica through its own NIC, so a site's 2(K-1)/K V (K = 2: V, one replica's fp32
    gradients) crosses through the share's NICs, not the site's. DGX H100: one 400 Gb/s ConnectX-7 a GPU, 50 GB/s
    (../shared/data/hardware.md, DGX H100 RA). Equal shares of 2 replicas of TP 8 a site, 16 GPUs: V / (16 x 50
    GB/s) = 40.1 ms, above the span's V / 1.6 TB/s (16 waves of 800 Gb/s, 20.1 ms), so the NICs bind; main spread V
    over a site's 256 (east) NICs, V / 12.8 TB/s, and the span bound it. By size (dp 3: east 1 replica, 8 GPUs) east's
    8 NICs bind, V / (8 x 50 GB/s)."""
    model = load_model("llama3-8b")
    for shares, dp, nics in (("equal", 4, 16), ("by-size", 3, 8)):
        job = estimate_across_sites(small, model, make_layout(tp=8, dp=dp, global_batch=2 * dp, seq_len=4096),
                                    shares=shares)
        assert min(job.site_gpus.values()) == nics
        s = job.strategies[0]
        V = s.dci_bytes_per_step
        assert V == pytest.approx(4 * 8.03e9, rel=0.005)  # Llama 3 8B's parameters, Meta's model card
        assert s.bottleneck == "nic"
        loss = loss_crossing_s(small, job)  # regions76: the logged loss's all-reduce, in the DCI time
        assert s.dci_time_s == pytest.approx(s.latency_s + V / (nics * 50e9) + loss, rel=1e-12)
        assert s.dci_Bps_for_95pct == float("inf")  # the share's NICs alone take longer than the budget
    whole = estimate_across_sites(small, model, make_layout(tp=8, dp=96, global_batch=96, seq_len=4096))
    s = whole.strategies[0]  # every GPU of both sites: the span binds, V / 1.6 TB/s
    assert s.bottleneck == "dci:east-west"
    assert s.dci_time_s == pytest.approx(s.latency_s + s.dci_bytes_per_step / 1.6e12 + loss_crossing_s(small, whole),
                                         rel=1e-12)
