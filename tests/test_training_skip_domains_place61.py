"""A job placed around a failed rack (walk23's leftover 1, place61): ``skip_domains`` passes over NVLink domains, as a
scheduler places a job on the healthy racks; ``--first-gpu`` moved the whole job."""

import json

import numpy as np

from conftest import run_cli
from topo.training.mapping import map_layout
from topo.training.parallel import ParallelLayout

JOB = ["train", "gb200-nvl72-superpod", "--model", "qwen3-30b-a3b", "--gpus", "128", "--global-batch", "128",
       "--ep", "128", "--layout", "ep_dispatcher=deepep", "--json"]


def test_the_ranks_pass_over_the_skipped_domains():
    """EP 64 x DP 3 (192 ranks) at 64 of each 72-GPU domain, domain 1 skipped: ranks 0-63 on GPUs 0-63 (domain 0),
    64-127 on 144-207 (domain 2, past the skipped 72-143), 128-191 on 216-279 (domain 3); each EP group is one
    domain's 64 GPUs, none in domain 1. From first GPU 72 (domain 1) with domain 2 skipped: 72-135, 216-279."""
    lay = ParallelLayout(dp=192, ep=64, gpus_per_domain_used=64, skip_domains=(1,), global_batch=192)
    m = map_layout(lay, 72, 72 * 4)
    ids = m.grid.ravel()
    assert ids.tolist() == list(range(0, 64)) + list(range(144, 208)) + list(range(216, 280))
    ep = m.groups("ep")
    assert sorted(np.unique(ep // 72, axis=0).tolist()) == [[0] * 64, [2] * 64, [3] * 64]
    # tidy65: domain 0, below the first GPU's, was listed here too and skipped nothing; such a skip is now refused
    # (tests/test_search_bound_skip_tidy65.py)
    moved = map_layout(ParallelLayout(dp=128, ep=64, gpus_per_domain_used=64, first_gpu=72, skip_domains=(2,),
                                      global_batch=128), 72, 72 * 4).grid.ravel()
    assert moved.tolist() == list(range(72, 136)) + list(range(216, 280))


def test_a_failed_rack_is_left_out_and_the_step_is_the_same_job_on_the_other_racks():
    """Qwen3-30B-A3B, 128 GB200 at 64 a rack (EP 128 over two racks, the flex dispatcher) on three NVL72 racks with
    rack 1's NVLink switch failed: refused, and the line now offers --skip-domains [1]; skipping it, the job runs on
    racks 0 and 2, whose leaves and spines are those of racks 0 and 1 of a two-rack fabric (one scalable unit,
    rail-optimized: every rack alike), so the step equals that job's to the last bit."""
    bad = run_cli(*JOB[:-1], "--set", "cluster.num_units=3", "--fail", "nvswitch1")
    assert bad.returncode == 2 and "allowed: --skip-domains [1] (the job on the other domains, 64 of each), or " \
        in bad.stderr, bad.stderr
    skipped = json.loads(run_cli(*JOB, "--set", "cluster.num_units=3", "--fail", "nvswitch1", "--skip-domains", "[1]",
                                 check=True).stdout)
    two = json.loads(run_cli(*JOB, "--set", "cluster.num_units=2", check=True).stdout)
    assert skipped["step_time_s"] == two["step_time_s"] and skipped["breakdown_s"] == two["breakdown_s"]
    assert skipped["layout"]["skip_domains"] == [1]


def test_a_bad_skip_list_is_one_line():
    out = run_cli(*JOB, "--skip-domains", "one")
    assert out.returncode == 2 and out.stderr == ("error: --skip-domains: must be NVLink domain indices (whole numbers "
                                                  ">= 0, comma-separated, e.g. 5 or 5,17), got 'one'\n")


def test_a_domain_the_fabric_does_not_have_is_one_line():
    """A skipped domain past the fabric's last skips nothing: a typo, refused (the bundled superpod has 32 NVL72
    racks, indices 0-31), not a job silently placed as without it."""
    out = run_cli(*JOB, "--skip-domains", "999")
    assert out.returncode == 2 and out.stderr == ("error: --skip-domains: 999: the fabric has 32 NVLink domains; "
                                                  "allowed: domain indices 0 to 31\n")
    assert run_cli(*JOB, "--skip-domains", "31").returncode == 0
