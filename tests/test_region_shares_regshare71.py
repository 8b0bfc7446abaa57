"""regshare71 (walk29's Left 1): a region of sites of different sizes ran every site at the smallest site's share
(32k + 32k + 16k GB200 trained as 3 x 16,128, 32,256 GPUs idle). Each site now runs replicas of the job in
proportion to its GPUs (``--shares by-size``, the default; ``equal`` the old split): the same layout and
micro-batches a replica, so the global batch splits as the replicas do, and the DCI carries one replica's
gradients (a site's replicas reduce inside it first). Region: 256 + 512 DGX H100 (one and two SUs), 40 km apart."""

import json

import pytest

from conftest import run_cli
from small_regions import built_region, region_file, two_sites
from topo.training.model import load_model
from topo.training.multisite import estimate_across_sites, site_shares
from topo.training.parallel import make_layout

TEXT = two_sites("rs71", "1 and 2 SUs", "dgx-h100-superpod", 1, 2)
SEQ = 4096


@pytest.fixture(scope="module")
def region(tmp_path_factory):
    return built_region(tmp_path_factory, TEXT, "rs71")


@pytest.fixture(scope="module")
def path(tmp_path_factory):
    return region_file(tmp_path_factory, TEXT, "rs71")


@pytest.fixture(scope="module")
def by_size(region):
    """Llama 3 8B TP 8, 96 replicas (every GPU of both sites): east 32, west 64, global batch 96 (one sequence a
    replica)."""
    lay = make_layout(tp=8, dp=96, global_batch=96, seq_len=SEQ)
    return estimate_across_sites(region, load_model("llama3-8b"), lay)


def test_each_site_runs_replicas_by_its_size_and_the_tokens_are_the_whole_batch(region, by_size):
    """Tokens per step = global batch x sequence = 96 x 4,096 (every site's share: 32 + 64 sequences); the GPUs
    8 x 96 = 768, none idle. On main every site ran dp 48 and east's 256 GPUs could not hold 384."""
    assert site_shares(region, make_layout(tp=8, dp=96, global_batch=96)) == (32, 64)
    assert by_size.site_dp == {"east": 32, "west": 64}
    assert by_size.site_gpus == {"east": 256, "west": 512}
    assert by_size.gpus == 768 and by_size.idle_gpus == 0
    assert by_size.tokens_per_step == 96 * SEQ
    assert by_size.shares == "by-size"
    assert not any(s.strategy == "pp" for s in by_size.strategies)
    assert any("pp across sites: not timed, the sites run unequal shares" in a for a in by_size.assumptions)


def test_the_dci_carries_one_replicas_gradients_whatever_the_split(region, by_size):
    """The hierarchical reduction (reduce-scatter inside each site, all-reduce of the site's reduced replica across,
    all-gather inside) sends 2(K-1)/K x V on each span and direction, V one replica's fp32 gradients, whatever the
    sites' replica counts: K = 2, so V = 4 B x 8.03e9 (Llama 3 8B's parameters, Meta's model card,
    https://huggingface.co/meta-llama/Meta-Llama-3-8B) on the busiest span, the same as equal shares' (dp 32 a
    site)."""
    equal = estimate_across_sites(region, load_model("llama3-8b"),
                                  make_layout(tp=8, dp=64, global_batch=64, seq_len=SEQ), shares="equal")
    dp, dp_eq = by_size.strategies[0], equal.strategies[0]
    assert dp.dci_bytes_per_step == pytest.approx(dp_eq.dci_bytes_per_step, rel=1e-12)
    assert dp.dci_bytes_per_step == pytest.approx(2 * (2 - 1) / 2 * 4 * 8.03e9, rel=0.005)


def test_the_mfu_across_unequal_sites_is_the_jobs_model_flop_over_every_gpu(by_size):
    """MFU = the job's model FLOP per step (the slowest share's x the job's replicas over its own, the same FLOP a
    replica) / (768 GPUs x the step across x the peak); the same per GPU as the share's, so the share's MFU x vs one
    site."""
    one = by_size.one_site
    share_dp = by_size.site_dp[by_size.slowest_site]
    for s in by_size.strategies:
        flop = one["model_flop_per_step"] * 96 / share_dp
        assert by_size.mfu(s) == pytest.approx(flop / (768 * s.step_time_s * one["peak_flop_per_s_per_gpu"]),
                                               rel=1e-9)


def test_the_cli_fills_both_sites_by_size_and_equal_keeps_the_smallest_share(path):
    """`topo train REGION` with dp left out: by size the most replicas the sites hold that the global batch splits
    into (96 of 96), said in text and --json; `--shares equal` the old split (32 a site, west's 256 idle)."""
    job = ("train", path, "--model", "llama3-8b", "--tp", "8", "--global-batch", "96")
    d = json.loads(run_cli(*job, "--json", check=True).stdout)
    assert d["site_dp"] == {"east": 32, "west": 64} and d["gpus"] == 768 and d["idle_gpus"] == 0
    assert d["tokens_per_step"] == 96 * 8192  # the CLI takes the model's own sequence, 8,192
    text = run_cli(*job, check=True).stdout
    assert "in proportion to its GPUs (east dp 32, west dp 64)" in text and "all 768 GPUs of the region run it" in text
    eq = json.loads(run_cli(*job, "--global-batch", "64", "--shares", "equal", "--json", check=True).stdout)
    assert eq["site_dp"] == {"east": 32, "west": 32} and eq["idle_gpus"] == 256 and eq["shares"] == "equal"
