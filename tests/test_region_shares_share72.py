"""share72 (regshare71's Left): a region's by-size split capped at what each site holds, and the DCI phase's NICs
term of a share smaller than its site. Region: 256 + 768 DGX H100 (one and three SUs), 40 km apart."""

import pytest

from conftest import run_cli
from small_regions import built_region, region_file, two_sites
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
