"""The nccl-tests log parser on real logs posted in public issues (tests/data/nccl_logs/SOURCES.md cites each)."""

from __future__ import annotations

from pathlib import Path

import pytest

from topo.calibrate.parse import parse_file, parse_text
from topo.errors import TopoError

from conftest import run_cli

LOGS = Path(__file__).parent / "data" / "nccl_logs"


def one(name, **kw):
    runs = parse_file(LOGS / name, **kw)
    assert len(runs) == 1
    return runs[0]


def test_current_layout_with_rank_lines_on_two_hosts():
    r = one("ncclt214_sendrecv_a40.txt")  # nccl-tests issue #214
    assert (r.nthread, r.ngpus, r.min_bytes, r.max_bytes, r.warmup_iters, r.iters) == (1, 1, 256, 1073741824, 5, 20)
    assert r.nranks == 2 and r.nranks_from == "rank lines"
    assert r.hosts == ["gpu23", "gpu24"] and r.gpus_per_host == 1 and r.gpu_name == "NVIDIA A40"
    assert [x.size_bytes for x in r.rows] == [256, 512, 1024, 2048, 4096]
    first = r.rows[0]  # "256  64  float  sum  -1  34.24  0.01  0.01  0  33.65  0.01  0.01  N/A"
    assert (first.count, first.type, first.redop, first.root) == (64, "float", "sum", -1)
    assert first.time_s == pytest.approx(34.24e-6) and first.inplace_time_s == pytest.approx(33.65e-6)
    assert first.wrong == 0 and first.inplace_wrong is None
    assert r.rows[-1].time_s == pytest.approx(30.74e-6)
    assert not r.failed_validation


def test_old_broadcast_layout_with_version_and_settings():
    r = one("ncclt82_broadcast_v100.txt")  # nccl-tests issue #82
    assert r.binary == "broadcast_perf" and r.collective == "broadcast" and r.collective_from == "binary"
    assert r.nccl_version == "2.9.6"
    assert r.env == {"NCCL_ALGO": "Ring", "NCCL_PROTO": "Simple", "NCCL_MAX_NCHANNELS": "2",
                     "NCCL_MIN_NCHANNELS": "2", "NCCL_IB_DISABLE": "1"}
    assert r.nranks == 2 and r.hosts == ["v100-gpu-1", "v100-gpu-5"]
    (row,) = r.rows
    assert (row.size_bytes, row.root, row.redop) == (8, 0, None)
    assert row.time_s == pytest.approx(45.82e-6) and row.inplace_time_s == pytest.approx(38.17e-6)
    assert not r.wrong_is_count  # the old 'error' column


def test_launcher_tags_inside_rows_and_inferred_rank_count():
    r = one("nccl1453_h100_allreduce_tagged.txt")  # NVIDIA/nccl issue #1453, first post
    assert len(r.rows) == 10
    assert r.rows[0].size_bytes == 1048576 and r.rows[0].time_s == pytest.approx(1626.5e-6)
    assert r.rows[-1].size_bytes == 536870912 and r.rows[-1].time_s == pytest.approx(193909e-6)
    assert r.rows[-1].inplace_busbw_GBps == 5.33
    # busbw / algbw = 2(n-1)/n: all-reduce on 24 ranks ...
    assert r.collective == "all_reduce" and r.nranks == 24 and r.nranks_from.startswith("inferred")


def test_info_lines_of_the_same_issue_say_24_ranks_ring_simple_16_channels():
    # ... which the NCCL_DEBUG=INFO lines of the same issue confirm ("rank 0 nranks 24")
    r = one("nccl1453_h100_info_header.txt", require_rows=False)
    assert r.nranks == 24 and r.nranks_from == "NCCL INFO"
    assert r.channels == 16
    assert r.tuning == [{"size_bytes": 8589934592, "collective": None, "algorithm": "ring", "protocol": "Simple",
                         "time_us": 86069.96875}]
    with pytest.raises(TopoError, match="not an nccl-tests log"):
        parse_file(LOGS / "nccl1453_h100_info_header.txt")


def test_bare_old_table_without_redop_or_root():
    r = one("msccl48_alltoall_16gpu.txt")  # microsoft/msccl issue #48
    assert len(r.rows) == 7 and r.rows[0].redop is None and r.rows[0].root is None
    assert r.rows[-1].size_bytes == 67108864 and r.rows[-1].time_s == pytest.approx(29605e-6)
    assert r.rows[0].inplace_wrong == 1.0 and r.rows[0].wrong == 0.0
    # all-gather and all-to-all share busbw = algbw (n-1)/n: the collective stays unknown, and the rounding of
    # 2.27 / 2.13 GB/s cannot tell 15 from 16 or 17 ranks; the count per rank can (see below)
    assert r.collective is None and r.nranks_from != "inferred (busbw / algbw)"


def test_mpirun_output_tags():
    r = one("tutel172_alltoall_tagged.txt")  # microsoft/Tutel issue #172
    assert [x.size_bytes for x in r.rows] == [1024 * 2**i for i in range(7)]
    assert r.rows[0].time_s == pytest.approx(28.52e-6)


def test_srun_label_prefix_on_every_line():
    # aws-samples/awsome-distributed-training micro-benchmarks/nccl-tests README: srun -l puts "0: " before each line
    r = one("awsome_p4de_allreduce_2n.txt")
    assert [x.size_bytes for x in r.rows] == [8 * 2**i for i in range(29)]  # 8 B .. 2 GiB
    assert r.rows[0].time_s == pytest.approx(164.3e-6) and r.rows[0].inplace_time_s == pytest.approx(163.3e-6)
    assert r.rows[-1].time_s == pytest.approx(51406e-6) and r.rows[-1].busbw_GBps == 78.33
    assert r.collective == "all_reduce" and r.nranks == 16  # busbw / algbw = 2(n-1)/n


def test_skypilot_worker_prefix_before_mpirun_tags():
    # skypilot-org/skypilot examples/gcp_gpu_direct_tcpx/README.md: "(head, rank=0, pid=3808) [1,0]<stdout>:" lines
    r = one("skypilot_a3ultra_allgather_2n.txt")
    assert r.nranks == 16 and r.nranks_from == "rank lines" and r.gpu_name == "NVIDIA H200"
    assert r.hosts == ["nc-d87e1263-head", "nc-d87e1263-worker1"]
    assert [x.size_bytes for x in r.rows] == [1024 * 2**i for i in range(24)]  # 1 KiB .. 8 GiB
    assert r.rows[0].time_s == pytest.approx(28.39e-6) and r.rows[0].redop == "none"
    assert r.rows[-1].time_s == pytest.approx(24724e-6) and r.rows[-1].inplace_busbw_GBps == 332.58


def test_newest_header_library_version_and_binary():
    r = one("spark103_allreduce_gb10.txt")  # NVIDIA/dgx-spark-playbooks PR #103
    assert r.nccl_tests_version == "2.20.0" and r.nccl_version == "2.31.2"  # nccl-library=23102
    assert r.binary == "all_reduce_perf" and r.collective == "all_reduce"
    assert len(r.rows) == 4 and r.rows[-1].busbw_GBps == 0.96


def test_two_runs_in_one_file_are_two_runs():
    text = (LOGS / "spark103_allreduce_gb10.txt").read_text() + "\n" + (LOGS / "ncclt214_sendrecv_a40.txt").read_text()
    runs = parse_text(text, "both.txt")
    assert [len(r.rows) for r in runs] == [4, 5]
    assert runs[0].collective == "all_reduce" and runs[1].hosts == ["gpu23", "gpu24"]


@pytest.mark.parametrize("content", [b"", b"hello world\nno table here\n", b"\x00\x01\x02binary",
                                     b"# nThread 1 nGpus 8 minBytes 8 maxBytes 128 step: 2(factor)\n"])
def test_a_file_that_is_not_a_log_is_one_clean_error(tmp_path, content):
    f = tmp_path / "x.txt"
    f.write_bytes(content)
    with pytest.raises(TopoError) as exc:
        parse_file(f)
    assert exc.value.source == str(f)
    expected = "the log is empty" if not content else "not an nccl-tests log"  # tidy75: an empty file says so
    assert expected in exc.value.message or "no result rows" in exc.value.message


def test_missing_file():
    with pytest.raises(TopoError, match="no such log file"):
        parse_file(LOGS / "nope.txt")


def test_rank_lines_cut_short_do_not_set_the_rank_count():
    # Review finding: NVIDIA/nccl-tests issue #322 ran `mpirun -np 1024` (nThread 1 nGpus 1) but the excerpt lists
    # rank lines 0-15 only: the run was modelled on 16 ranks (2 hosts), silently. busbw/algbw of its 16 GiB row
    # (367.29 / 183.83 = 1.998 = 2(n-1)/n, n ~ 990) says the same as -np: far more than 16 ranks.
    r = one("ncclt322_h100_1024_roce_ring.txt")
    assert r.launcher_processes == 1024 and r.nranks == 1024 and r.nranks_from.startswith("launcher")
    assert not r.rank_lines_complete and r.nranks_at_least == 16 and r.gpus_per_host is None
    # without the command line, the ratio alone cannot pin 1024 (rounding leaves ~990 +- 53): no count, not 16
    text = (LOGS / "ncclt322_h100_1024_roce_ring.txt").read_text()
    r = parse_text(text.replace("-np 1024", ""), "x.txt")[0]
    assert r.launcher_processes is None and r.nranks is None and not r.rank_lines_complete


def test_a_single_rank_line_of_rank_127_is_not_a_one_rank_run():
    # Review finding: OCI's GB200 two-rack log (oci-hpc-oke README) keeps one rank line, "Rank 127 ... device 3":
    # it was read as 1 rank on 1 host with 1 GPU ("no algorithm can run all_reduce here: a ring needs at least 2
    # ranks"). Rank 127 means at least 128 ranks, and busbw/algbw of the 32 GiB row, 683.57 / 344.48 = 1.98436 =
    # 2(n-1)/n, gives n = 127.9 +- 0.5: 128 is the one count at or above 128.
    r = one("ocioke_gb200_2racks_allreduce.txt")
    assert r.nranks_at_least == 128 and not r.rank_lines_complete and r.gpus_per_host is None
    assert r.nranks == 128 and r.nranks_from.startswith("inferred")


def test_count_per_rank_gives_the_rank_count_of_gather_like_tables():
    # Review finding: microsoft/msccl issue #48's all-to-all table (no header, no binary name) needed --ranks 16:
    # busbw/algbw = 1.72 / 1.83 at 1 MiB leaves n = 17 +- 5. nccl-tests prints all-gather and all-to-all counts
    # per rank: 1048576 B / (16384 x 4 B) = 16 (as GCP's all-gather, 4096 / (128 x 4) = 8 on its 8 ranks).
    r = one("msccl48_alltoall_16gpu.txt")
    assert r.nranks == 16 and r.nranks_from.startswith("inferred (size / count per rank")
    assert r.collective is None and r.collective_candidates[:2] == ["all_gather", "alltoall"]
    r = one("tutel172_alltoall_tagged.txt")  # 1024 B / (32 x 4 B) = 8, as busbw/algbw says too
    assert r.nranks == 8
    r = one("a3ultra_gib_allgather_2n.txt")  # rank lines: 16, and the table says all-gather or all-to-all
    assert r.nranks == 16 and r.nranks_from == "rank lines" and r.collective_candidates == ["all_gather", "alltoall"]


def _in_ms(text: str) -> str:
    """The log with every row's out-of-place and in-place times divided by 1,000 (times converted to ms), the
    algbw and busbw columns left as nccl-tests printed them."""
    out = []
    for line in text.splitlines():
        p = line.split()
        if len(p) == 13 and p[0].isdigit():
            p[5], p[9] = f"{float(p[5]) / 1e3:.5f}", f"{float(p[9]) / 1e3:.5f}"
            line = "  ".join(p)
        out.append(line)
    return "\n".join(out) + "\n"


def test_a_time_column_in_ms_is_refused_not_read_as_1000x_faster(tmp_path):
    # Walk finding (walk18): a log whose time column was converted to ms ("(ms)" in its units line, or not) was read
    # as microseconds: topo compare said "this run is 808.52x faster than the model" (busbw 310,689 GB/s on two
    # H100 servers) and topo calibrate wrote a profile 40,954% off. nccl-tests computes algbw = size / time from
    # the time it prints (src/common.cu); dstack's Nebius log: 134217728 B / 759.58 us = 176.70 GB/s, as printed.
    r = one("dstack_nebius_h100_allreduce_2n.txt")
    big = max(r.rows, key=lambda x: x.size_bytes)
    assert big.size_bytes / big.time_s / 1e9 == pytest.approx(big.algbw_GBps, rel=0.005)
    text = (LOGS / "dstack_nebius_h100_allreduce_2n.txt").read_text()
    with pytest.raises(TopoError, match=r"the time column does not give the algbw column: .* \(1,000x its algbw") as e:
        parse_text(_in_ms(text), "ms.txt")
    assert "ms.txt" in str(e.value) and "-C 1 (CPU time)" in str(e.value) and "\n" not in str(e.value)
    log = tmp_path / "ms.log"
    log.write_text(_in_ms(text).replace("(us)", "(ms)"))
    out = tmp_path / "p.toml"
    p = run_cli("calibrate", str(log), "--gpu", "H100", "-o", str(out))
    assert p.returncode == 2 and p.stderr.startswith("error: ") and p.stderr.count("\n") == 1, p.stderr
    assert not out.exists()


@pytest.mark.parametrize("name", sorted(p.name for p in LOGS.glob("*.txt") if "info_header" not in p.name))
def test_every_real_log_passes_the_time_column_check(name):
    assert parse_file(LOGS / name)  # the check raises where the columns disagree
