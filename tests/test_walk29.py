"""walk29's fixes (a frontier lab's three GB200 NVL72 sites of 32k, 32k and 16k GPUs, 50, 400 and 1,000 km apart,
training a DeepSeek-V3-class MoE and a 400B dense model across them): a region's global batch refused with one
site's unit, so the value the error offered was refused in turn."""

import json
import shlex

import pytest

from conftest import run_cli
from small_regions import region_file, two_sites


@pytest.fixture(scope="module")
def region(tmp_path_factory):
    """Two sites of one DGX H100 scalable unit (256 GPUs) each."""
    return region_file(tmp_path_factory, two_sites("walk29", "two SUs", "dgx-h100-superpod", 1), "walk29")


def test_a_regions_interleaved_batch_is_refused_with_the_whole_jobs_unit(region):
    """walk29: `topo train REGION --tp 8 --pp 8 --vpp 4 --global-batch 1512` on three sites said "allowed: a
    multiple of 2,016 (nearest: 2,016)", one site's unit (its dp 252 x pp 8), and 2,016 was then refused as not
    splitting over the sites. The whole job's --global-batch is checked in the whole job's figures: here dp 16
    (8 a site) x pp 4 = 64 (Megatron-Core's interleaved 1F1B: micro-batches a multiple of pp), and 64 runs."""
    job = ("train", region, "--model", "llama3-8b", "--tp", "8", "--pp", "4", "--vpp", "2")
    err = run_cli(*job, "--global-batch", "32").stderr
    assert "allowed: a multiple of 64 (nearest: 64)" in err, err
    ok = run_cli(*job, "--global-batch", "64", check=True).stdout
    assert "throughput_vs_one_site" in ok


def test_a_regions_mfu_is_given_across_the_sites_as_model_flop_over_the_regions_gpus():
    """walk29: `topo train REGION` printed one site's share's MFU alone (DeepSeek-V3 on three sites: "MFU 2.6%"
    with a step of 4.471 s, against 4.879 s across the sites), and the lab asked for the MFU across the sites. Each
    way across now has its MFU: the job's model FLOP per step (every site's share's) over every GPU's peak for the
    step across the sites, as 6N x tokens gives it by hand, in the table and in --json."""
    job = ("train", "two-site-h100", "--model", "llama3-70b", "--tp", "8", "--pp", "4", "--global-batch", "768")
    d = json.loads(run_cli(*job, "--json", check=True).stdout)
    one = d["one_site"]
    for s in d["strategies"]:
        by_hand = one["model_flop_per_step"] * d["num_sites"] / (d["gpus"] * s["step_time_s"]
                                                                 * one["peak_flop_per_s_per_gpu"])
        assert s["mfu"] == pytest.approx(by_hand, rel=1e-9)
        assert s["mfu"] < one["mfu"]
    text = run_cli(*job, check=True).stdout
    row = next(line for line in text.splitlines() if line.startswith("dp "))
    assert f"{d['strategies'][0]['mfu']:.1%}" in row.split()


def test_a_region_searchs_first_row_line_names_the_region_and_keeps_the_commands_options(region):
    """walk29: a region's search printed "#1 across sites: topo train REGION --model deepseek-v3-671b
    --global-batch 12096 --tp 4 ...": a placeholder for the region and no --seq 4096, so the line run as printed
    stepped another job than the row (walk28 fixed one site's "#1's breakdown" alike). It now starts with the
    region and every option of the command a row does not set; run as printed it gives the row's step across the
    sites."""
    out = run_cli("train", region, "--model", "llama3-8b", "--global-batch", "64", "--seq", "2048", "--search",
                  "--top", "1", check=True).stdout
    row = next(line for line in out.splitlines() if line.startswith("1 "))
    line = next(line for line in out.splitlines() if line.startswith("#1 across sites: topo train "))
    flags = shlex.split(line.removeprefix("#1 across sites: topo train "))
    assert flags[0] == region and "REGION" not in flags
    assert flags[flags.index("--seq") + 1] == "2048" and "--search" not in flags and "--top" not in flags
    again = run_cli("train", *flags, check=True).stdout
    dp_row = next(x for x in again.splitlines() if x.startswith("dp "))
    assert " ".join(dp_row.split()[1:3]) in row  # the step across the sites


def test_a_region_of_unequal_sites_says_how_many_gpus_the_job_leaves_idle(tmp_path_factory):
    """walk29: on 32,256 + 32,256 + 16,128 GB200 the job ran the smallest site's share on every site, 48,384 GPUs,
    and said only "sites of different sizes ... every site runs the same share": the 32,256 GPUs of the two larger
    sites that run nothing went unsaid. Here 256 + 512 DGX H100: the job runs 256 a site, so 256 of the region's
    768 sit idle, all in west."""
    path = region_file(tmp_path_factory, two_sites("walk29b", "1 and 2 SUs", "dgx-h100-superpod", 1, 2), "walk29b")
    out = run_cli("train", path, "--model", "llama3-8b", "--tp", "8", "--global-batch", "64", "--shares", "equal",
                  check=True).stdout  # regshare71: by size (the default) both sites run replicas
    line = next(x for x in out.splitlines() if x.startswith("assumed: sites of different sizes"))
    assert line.endswith("256 of the region's 768 GPUs run no part of it (west 256)"), line
