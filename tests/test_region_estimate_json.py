"""``topo estimate REGION``: one site's names in its JSON, and nccl-tests' size and count over every GPU (ms52).

nccl-tests' rule (NVIDIA/nccl-tests@a0b82b2260cf, src/common.cu ``setupArgs`` lines 900-912, src/all_gather.cu
lines 10-17): all_gather and reduce_scatter run ``base = (size / word / nranks) & ~(16 / word - 1)`` elements a
rank and print ``base`` as the count, ``base x nranks x word`` as the size; all_reduce the whole ``size / word``.
"""

import json

import pytest

from conftest import run_cli
from topo.engine.collectives import nccl_tests_count
from topo.engine.region_estimate import estimate_region
from topo.fabric.region import build_region

RANKS = 2 * 1536  # two-site-h100: two DGX H100 SuperPODs of 192 servers x 8 GPUs


@pytest.fixture(scope="module")
def two_sites():
    return build_region("two-site-h100")


def test_region_json_uses_one_sites_names():
    """One site says ``results`` (a row per size) and ``candidate_time_s`` (each algorithm's time per size); the
    region said ``rows`` and ``candidates`` (per row) for the same things. Its rows now carry one site's keys of the
    same meaning (``count``, ``type`` too), with ``phases`` and ``span_bytes`` beside."""
    args = ("--size", "1GiB", "--json")
    region = json.loads(run_cli("estimate", "two-site-h100", *args, check=True).stdout)
    site = json.loads(run_cli("estimate", "dgx-h100-superpod", "-g", "16", *args, check=True).stdout)
    assert "rows" not in region and "candidates" not in region
    shared = {"size_bytes", "count", "type", "time_s", "algbw_Bps", "busbw_Bps", "algorithm", "latency_s",
              "bandwidth_s", "bottleneck"}
    assert shared <= set(site["results"][0]) and shared <= set(region["results"][0])
    assert set(region["results"][0]) - shared == {"phases", "span_bytes", "bottleneck_name"}
    (row,) = region["results"]
    assert (row["size_bytes"], row["count"], row["type"]) == (2**30, 2**28, "float")  # all_reduce: the whole count
    assert set(region["candidate_time_s"]) == {"hierarchical", "hierarchical_pipelined", "ring", "tree"}
    assert all(isinstance(v, list) and len(v) == 1 for v in region["candidate_time_s"].values())
    assert region["candidate_time_s"][row["algorithm"]] == [row["time_s"]]
    assert row["time_s"] == min(v[0] for v in region["candidate_time_s"].values())


def test_candidate_time_s_has_a_time_per_size_in_order(two_sites):
    r = estimate_region(two_sites, "all_reduce", [2**20, 2**30])
    doc = r.to_dict()
    assert [x["size_bytes"] for x in doc["results"]] == [2**20, 2**30]
    for name, times in doc["candidate_time_s"].items():
        assert times == [x.candidates[name] for x in r.results]


@pytest.mark.parametrize("collective, size, run, count", [
    # 10^6 B of floats over 3,072 ranks: 250,000 floats, 81 a rank, & ~3 = 80: 80 x 3,072 x 4 = 983,040 B
    ("all_gather", 10**6, 983_040, 80),
    ("reduce_scatter", 10**6, 983_040, 80),
    ("all_reduce", 10**6, 10**6, 250_000),
])
def test_across_sites_sizes_are_those_nccl_tests_runs_over_every_gpu(two_sites, collective, size, run, count):
    assert nccl_tests_count(collective, size, 4, RANKS) == (run, count)
    r = estimate_region(two_sites, collective, [size], datatype="float")
    (x,) = r.results
    assert (x.size_bytes, x.count, x.type) == (run, count, "float")
    assert x.algbw_Bps == pytest.approx(run / x.time_s, rel=1e-12)
    assert x.time_s == estimate_region(two_sites, collective, [run]).results[0].time_s  # the trimmed size is timed
    assert any(n.startswith("sizes trimmed as nccl-tests runs") for n in r.notes) == (run != size)


def test_without_a_datatype_a_region_row_counts_only_a_size_nccl_tests_runs(two_sites):
    assert estimate_region(two_sites, "all_gather", [10**6]).results[0].count is None
    assert estimate_region(two_sites, "all_gather", [983_040]).results[0].count == 80


def test_cli_across_sites_trims_and_refuses_a_sweep_of_nothing():
    doc = json.loads(run_cli("estimate", "two-site-h100", "-c", "all_gather", "--size", "1000000", "--json",
                             check=True).stdout)
    assert [(x["size_bytes"], x["count"]) for x in doc["results"]] == [(983_040, 80)]
    assert any("1,000,000 -> 983,040 bytes" in n for n in doc["notes"])
    proc = run_cli("estimate", "two-site-h100", "-c", "all_gather", "-b", "8", "-e", "32K")
    assert proc.returncode == 2 and proc.stdout == "" and proc.stderr.count("\n") == 1
    assert proc.stderr.startswith("error: -e: 32 KiB and below: nccl-tests runs all_gather over 3072 ranks as whole "
                                  "16 bytes a rank"), proc.stderr


def test_a_rows_bottleneck_has_one_sites_shape(two_sites):
    """Sections 188 / 192 left a region row's ``bottleneck`` a name (``dci:east-west``) where one site's is a table;
    both are now the table of :class:`topo.engine.result.Bottleneck`, the name beside it (``bottleneck_name``).

    The DCI span's figures are closed forms of two-site-h100's DCI (16 waves of 800G, 100 GB/s each way): the
    hierarchical all_reduce's cross-site ring sends 2 (K-1)/K S = S = 1 GiB each way over the one span, i.e.
    1 GiB / 16 a wave, busy S / 1.6e12 B/s over the row's time."""
    args = ("--size", "1GiB", "--json")
    site = json.loads(run_cli("estimate", "dgx-h100-superpod", "-g", "16", *args, check=True).stdout)
    one = site["results"][0]["bottleneck"]
    for algorithm in ("tree", "hierarchical", "ring"):
        doc = json.loads(run_cli("estimate", "two-site-h100", "-a", algorithm, *args, check=True).stdout)
        (row,) = doc["results"]
        assert isinstance(row["bottleneck"], dict) and set(row["bottleneck"]) == set(one), algorithm
        # each figure given has one site's type (bytes whole, as the JSON contract has them)
        assert all(type(v) is type(one[k]) for k, v in row["bottleneck"].items() if v is not None), algorithm
        assert row["bottleneck_name"] in {p["bound"] for p in row["phases"].values() if isinstance(p, dict)}
    r = estimate_region(two_sites, "all_reduce", [2**30], "tree").results[0]  # bound in a site: the site's link
    assert r.bottleneck_name == "east:nic1.0->leaf0"
    assert (r.bottleneck.src, r.bottleneck.dst, str(r.bottleneck.level)) == ("east:nic1.0", "east:leaf0", "nic-leaf")
    h = estimate_region(two_sites, "all_reduce", [2**30], "hierarchical").results[0]
    b = h.bottleneck
    assert h.bottleneck_name == "dci:east-west"
    assert (b.src, b.dst, b.level, b.num_links) == ("east", "west", "dci", 16)
    assert b.bytes == pytest.approx(2**30 / 16)
    assert b.utilization == pytest.approx(2**30 / (16 * 100e9) / h.time_s)
    assert b.bound == ("latency" if h.latency_s > h.bandwidth_s else "bandwidth")
