"""The size and count columns as nccl-tests runs and prints them, per collective.

Source: NVIDIA/nccl-tests@a0b82b2260cf5152b9f8c061bbf7eaf0ba096432, src/common.cu ``setupArgs`` (lines 900-912:
``count = size / wordSize``, then ``GetCollByteCount``) and line 938 (size column ``max(sendBytes,
expectedBytes)``, count column ``nbytes / wordSize``, the parameter count); src/all_gather.cu lines 10-17,
src/reduce_scatter.cu 10-17, src/alltoall.cu 18-24, src/gather.cu 10-16, src/scatter.cu 10-16 (``base = (count /
nranks) & ~(16 / eltSize - 1)`` a rank, size ``base x nranks``); src/all_reduce.cu 34-40 and broadcast, reduce,
sendrecv (the whole count); each ``GetBw`` (src/all_gather.cu 38-44: ``algBw = count x typesize x nranks / sec``,
``busBw = algBw (n-1)/n``; src/all_reduce.cu 59-65: ``count x typesize / sec``, ``2(n-1)/n``).
"""

import json
from pathlib import Path

import pytest

from conftest import run_cli
from topo import build_fabric, load_spec
from topo.calibrate.parse import parse_file
from topo.engine.collectives import nccl_tests_count
from topo.engine.estimate import estimate

LOGS = Path(__file__).parent / "data" / "nccl_logs"


@pytest.mark.parametrize("collective, size, word, ranks, expected", [
    # 1 GiB of floats over 16 ranks (section 177's example): 2^28 floats, 2^24 a rank
    ("all_gather", 2**30, 4, 16, (2**30, 2**24)),
    ("reduce_scatter", 2**30, 4, 16, (2**30, 2**24)),
    ("all_reduce", 2**30, 4, 16, (2**30, 2**28)),
    ("broadcast", 2**30, 4, 16, (2**30, 2**28)),
    ("reduce", 2**30, 4, 16, (2**30, 2**28)),
    # 1e6 B over 24 ranks: 250,000 floats, 10,416 a rank (a multiple of 4 floats), 10,416 x 24 x 4 = 999,936 B
    ("all_gather", 10**6, 4, 24, (999_936, 10_416)),
    # 100 B of int8 over 3 ranks: 33 a rank, & ~15 = 32, 32 x 3 = 96 B
    ("alltoall", 100, 1, 3, (96, 32)),
    # 1000 B of doubles over 3 ranks: 125 doubles, 41 a rank, & ~1 = 40, 40 x 3 x 8 = 960 B
    ("reduce_scatter", 1000, 8, 3, (960, 40)),
    # 4096 B of bfloat16 over 6 ranks: 2048 elements, 341 a rank, & ~7 = 336, 336 x 6 x 2 = 4032 B
    ("gather", 4096, 2, 6, (4032, 336)),
    # 255 B of floats over 16 ranks: 63 floats, 3 a rank, & ~3 = 0: nccl-tests prints size 0, count 0
    ("scatter", 255, 4, 16, (0, 0)),
    ("all_gather", 128, 4, 16, (0, 0)),
    ("all_gather", 256, 4, 16, (256, 4)),  # 16 bytes a rank, the smallest that runs
    # the whole count, rounded down to whole elements (section 177 item 1)
    ("broadcast", 6, 4, 8, (4, 1)),
    ("sendrecv", 3, 1, 2, (3, 3)),
    ("all_reduce", 1000, 8, 3, (1000, 125)),
])
def test_size_and_count_as_nccl_tests_prints_them(collective, size, word, ranks, expected):
    assert nccl_tests_count(collective, size, word, ranks) == expected


@pytest.fixture(scope="module")
def superpod():
    return build_fabric(load_spec("dgx-h100-superpod"))


@pytest.mark.parametrize("collective, ranks, size, run, count, factor", [
    ("all_gather", 16, 2**30, 2**30, 2**24, 15 / 16),
    ("reduce_scatter", 24, 10**6, 999_936, 10_416, 23 / 24),
    ("alltoall", 16, 10**6, 999_936, 15_624, 15 / 16),  # 250,000 / 16 = 15,625 floats a rank, & ~3 = 15,624
    ("all_reduce", 16, 10**6, 10**6, 250_000, 2 * 15 / 16),
])
def test_estimate_runs_the_size_nccl_tests_runs(superpod, collective, ranks, size, run, count, factor):
    r = estimate(superpod, collective, [size], gpus=ranks, datatype="float").results[0]
    assert (r.size_bytes, r.count, r.type) == (run, count, "float")
    assert r.algbw_Bps == pytest.approx(run / r.time_s, rel=1e-12)  # count x typesize x nranks / sec
    assert r.busbw_Bps == pytest.approx(r.algbw_Bps * factor, rel=1e-12)
    plain = estimate(superpod, collective, [run], gpus=ranks).results[0]
    assert r.time_s == plain.time_s  # the trimmed size is what is timed


def test_sizes_of_nothing_a_rank_are_left_out_with_a_note(superpod):
    r = estimate(superpod, "all_gather", [128, 256, 4096], gpus=16, datatype="float")
    assert [(x.size_bytes, x.count) for x in r.results] == [(256, 4), (4096, 64)]
    assert any(n.startswith("sizes 128 bytes left out: nccl-tests runs all_gather over 16 ranks") for n in r.notes)


def test_a_real_log_round_trips(superpod):
    """gcp_a4xmax_allgather_collapsed.txt (tests/data/nccl_logs/SOURCES.md): all_gather over 8 ranks, first row
    ``4096 128 float none -1 28.51 ...``: 4096 B = 1024 floats, 128 a rank. Estimating the same collective at the
    log's sizes over 8 ranks prints the same size and count columns, row for row."""
    run = parse_file(LOGS / "gcp_a4xmax_allgather_collapsed.txt")[0]
    assert run.nranks == 8 and (run.rows[0].size_bytes, run.rows[0].count) == (4096, 128)
    r = estimate(superpod, "all_gather", [x.size_bytes for x in run.rows], gpus=8, datatype="float")
    assert [(x.size_bytes, x.count) for x in r.results] == [(x.size_bytes, x.count) for x in run.rows]
    assert not any("trimmed" in n or "left out" in n for n in r.notes)


def test_cli_prints_the_count_a_rank_and_refuses_a_sweep_of_nothing():
    doc = json.loads(run_cli("estimate", "dgx-h100-superpod", "-g", "16", "-c", "all_gather", "--size", "1GiB",
                             "--json", check=True).stdout)
    assert [(x["size_bytes"], x["count"]) for x in doc["results"]] == [(2**30, 2**24)]
    text = run_cli("estimate", "dgx-h100-superpod", "-g", "16", "-c", "all_gather", "--size", "1GiB", check=True).stdout
    assert "  1073741824      16777216     float" in text
    proc = run_cli("estimate", "dgx-h100-superpod", "-g", "16", "-c", "all_gather", "-b", "8", "-e", "128")
    assert proc.returncode == 2 and proc.stdout == "" and proc.stderr.count("\n") == 1
    assert proc.stderr.startswith("error: -e: 128 B and below: nccl-tests runs all_gather over 16 ranks as whole 16 "
                                  "bytes a rank")


@pytest.mark.parametrize("collective, ranks, size, count", [
    # rev55's example: 1,000 B of all_gather over 24 ranks; nccl-tests runs 768 B (count 8 a rank): 1,000 B is
    # no run of nccl-tests, so no count multiplies back to it
    ("all_gather", 24, 1000, None),
    ("reduce_scatter", 24, 999_936, 10_416),  # a size nccl-tests runs: 10,416 x 24 x 4 B
    ("all_reduce", 16, 1002, None),  # 250.5 floats
    ("all_reduce", 16, 1000, 250),
])
def test_the_library_without_a_datatype_prints_a_count_only_for_the_size_it_timed(superpod, collective, ranks,
                                                                                   size, count):
    """``estimate()`` without ``datatype`` times the size as given; its count column is nccl-tests' count of that
    very size (count x ranks x 4 = size for per-rank collectives, count x 4 = size otherwise), None where
    nccl-tests never runs it (rev55, section 184: it printed count 8 for 1,000 B)."""
    r = estimate(superpod, collective, [size], gpus=ranks).results[0]
    assert (r.size_bytes, r.count) == (size, count)
    if count is not None:
        per = ranks if collective in ("all_gather", "reduce_scatter") else 1
        assert r.count * per * 4 == r.size_bytes
    assert json.loads(json.dumps(estimate(superpod, collective, [size], gpus=ranks).to_dict()))["results"][0][
        "count"] == count
