"""`topo estimate` from the real command line."""

import json

import numpy as np
import pytest

from conftest import run_cli
from topo import build_fabric, load_spec
from topo.engine.estimate import estimate, size_sweep


def test_table_like_nccl_tests():
    proc = run_cli("estimate", "dgx-h100-superpod", "-c", "all_reduce", "-g", "16", "-b", "8", "-e", "16G", "-f", "2",
                   check=True)
    rows = [line.split() for line in proc.stdout.splitlines() if not line.startswith("#")]
    assert len(rows) == 32  # 8 B .. 16 GiB by factors of 2
    assert [int(r[0]) for r in rows] == size_sweep(8, "16G", 2)
    assert rows[0][1:5] == ["2", "float", "sum", "-1"]  # count, type, redop, root as nccl-tests prints them
    header = [line for line in proc.stdout.splitlines() if line.startswith("#") and "busbw" in line][0]
    for col in ("size", "count", "type", "redop", "root", "time", "algbw", "busbw", "algorithm"):
        assert col in header
    assert proc.stderr == ""


def test_json_equals_library():
    proc = run_cli("estimate", "dgx-h100-superpod", "-c", "all-gather", "--gpus", "64", "--size", "1GiB", "--json",
                   check=True)
    doc = json.loads(proc.stdout)
    lib = estimate(build_fabric(load_spec("dgx-h100-superpod")), "all_gather", "1GiB", gpus=64).to_dict()
    assert doc == json.loads(json.dumps(lib))
    assert doc["collective"] == "all_gather" and doc["num_ranks"] == 64
    r = doc["results"][0]
    assert {"size_bytes", "time_s", "algbw_Bps", "busbw_Bps", "algorithm", "bottleneck"} <= set(r)


def test_default_runs_with_no_arguments_on_the_100k_cluster():
    proc = run_cli("estimate", "--size", "1G", "--json", check=True)
    doc = json.loads(proc.stdout)
    assert doc["spec"] == "h100-100k" and doc["num_ranks"] == 100352


@pytest.mark.parametrize("args, line", [
    (["-c", "allreduce3"], "error: --collective: unknown collective 'allreduce3'; allowed: all_reduce, all_gather, "
                           "reduce_scatter, alltoall, broadcast, reduce, gather, scatter, sendrecv, pipeline "
                           "(hyphens accepted)"),
    (["-d", "float7"], "error: -d: unknown data type 'float7'; allowed: int8, uint8, int32, uint32, int64, uint64, "
                       "half, float, double, bfloat16, f8e4m3, f8e5m2"),
    (["-o", "xor"], "error: -o: unknown reduction op 'xor'; allowed: sum, prod, max, min, avg, mulsum"),
    (["-a", "fastest"], "error: --algorithm: unknown algorithm 'fastest' for all_reduce; allowed: auto, ring, tree, "
                        "nvls, nvls_tree, sharp, halving_doubling, recursive_doubling, hierarchical"),
    (["--size", "-1"], "error: --size: a size must be a positive number of bytes, got '-1' (the sign is wrong)"),
    (["--size", "-1G"], "error: --size: a size must be a positive number of bytes, got '-1G' (the sign is wrong)"),
    (["-b", "-1G"], "error: -b: a size must be a positive number of bytes, got '-1G' (the sign is wrong)"),
    (["--size", "9999999999999999999999"], "error: --size: a size is at most 1,125,899,906,842,624 bytes (1 PiB, "
                                           "far beyond any GPU's memory), got '9999999999999999999999'"),
    (["-b", "1M", "-e", "16G", "-f", "1.000001"], "error: -f: 1,048,576 to 17,179,869,184 bytes by factors of "
     "1.000001 is 9,704,066 sizes; at most 10,000: use a factor of at least 1.000971 or a narrower range"),
    (["-b", "1", "-f", "1.000001"], "error: -f: 1 to 17,179,869,184 bytes by factors of 1.000001 is 23,567,016 "
                                    "sizes; at most 10,000: use a factor of at least 1.00236 or a narrower range"),
    # tidy11: -f inf stepped past every size after the first and ran one size, silently (1e400 reads as inf)
    (["-f", "inf"], "error: -f: must be a finite number > 1, got 'inf'"),
    (["-f", "1e400"], "error: -f: must be a finite number > 1, got '1e400'"),
    (["-f", "nan"], "error: -f: must be a finite number > 1, got 'nan'"),
    (["-f", "1"], "error: -f: must be a finite number > 1, got '1'"),
    (["-f", "two"], "error: -f: must be a finite number > 1, got 'two'"),
    (["--set", "server.nic_rate=-400 Gb/s"], "error: topologies/dgx-h100-superpod.toml (--set server.nic_rate=-400 "
     "Gb/s): server.nic_rate: a bandwidth must be positive, got '-400 Gb/s' (the sign is wrong)"),
    (["--size", "0"], "error: --size: a size must be a positive number of bytes, got '0'"),
    # walk16: "1Gb" ran 1e9 bytes, the gigabyte, where topo reads "Gb" as gigabits everywhere else (400 Gb/s)
    (["--size", "1Gb"], "error: --size: a size is in bytes, and 'Gb' counts bits (as in '400 Gb/s'), got '1Gb'; "
                        "allowed: 1GB, 1GiB or nccl-tests' 1G"),
    (["-e", "64Mib"], "error: -e: a size is in bytes, and 'Mib' counts bits (as in '400 Gb/s'), got '64Mib'; "
                      "allowed: 64MB, 64MiB or nccl-tests' 64M"),
    (["-g", "2000"], "error: --gpus: 2,000 GPUs asked, but the fabric has 1,024"),
    (["-g", "many"], "error: --gpus: must be a whole number, got 'many'"),
    (["--ranks", "0-7,9999"], "error: --ranks: GPU id 9999 does not exist; this fabric has GPUs 0 to 1023"),
    (["--ranks", "7-3"], "error: --ranks: range '7-3' runs backwards"),
    (["-g", "8", "-a", "sharp"], "error: --algorithm: sharp cannot run here: nothing to reduce in the network: the "
                                 "ranks share one NVLink domain"),
    # walk15: one rank blamed the algorithm ("--algorithm: no algorithm can run all_reduce here: ring: a ring needs
    # at least 2 ranks; tree: ...", or "--algorithm: tree cannot run here"): the rank count is what was asked
    (["-g", "1", "-a", "tree"], "error: --gpus: all_reduce needs at least 2 ranks, got 1; allowed: 2 GPUs or more"),
    (["-g", "1"], "error: --gpus: all_reduce needs at least 2 ranks, got 1; allowed: 2 GPUs or more"),
    (["-c", "alltoall", "-g", "1"], "error: --gpus: alltoall needs at least 2 ranks, got 1; allowed: 2 GPUs or more"),
    (["--ranks", "3"], "error: --ranks: all_reduce needs at least 2 ranks, got 1; allowed: 2 GPUs or more"),
    (["-g", "16", "--groups", "16"], "error: --groups: all_reduce needs at least 2 ranks a group: 16 GPUs in 16 "
                                     "groups leave 1; allowed: at most 8 groups"),
    (["--set", "gpu=A100", "-g", "8", "-a", "nvls"], "error: --algorithm: nvls cannot run here: A100 NVSwitches "
                                                     "cannot reduce in the switch (no NVLS)"),
    # walk13: the sizes were raw bytes only (-b 16G -e 8: "8 is below the smallest 17179869184")
    (["-b", "1G", "-e", "1M"], "error: -e: the largest size 1 MiB (1,048,576 B) is below the smallest 1 GiB "
                               "(1,073,741,824 B); allowed: a largest size at or above the smallest (nccl-tests runs "
                               "no size then)"),
    (["--size", "1G", "-b", "8"], "error: --size: give either --size or -b/-e, not both"),
    # flags that were silently ignored (issue 19 walk-through: --placement beside --ranks modelled the list alone)
    (["--ranks", "0-7,64-71", "--placement", "one_per_server"],
     "error: --placement: one_per_server chooses which GPUs run; --ranks lists them: give one, not both"),
    (["--ranks", "0-7", "--rail", "2"], "error: --rail: picks the GPU of each server for --placement "
                                        "one_per_server; --ranks lists the GPUs: give one, not both"),
    (["-g", "16", "--rail", "3"], "error: --rail: picks the GPU of each server for --placement one_per_server, and "
                                  "the placement is packed (the default): add --placement one_per_server or leave "
                                  "--rail out"),
    (["-g", "16", "--rank-order", "given"], "error: --rank-order: orders the GPUs --ranks lists; without --ranks "
                                            "there is nothing to order"),
])
def test_bad_input_one_line_exit_2(args, line):
    proc = run_cli("estimate", "dgx-h100-superpod", *args)
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == ""
    assert proc.stderr.splitlines() == [line]


def test_detail_names_phases_and_hottest_links():
    proc = run_cli("estimate", "dgx-h100-superpod", "-g", "512", "--size", "1G", "-a", "ring", "--detail", "--json",
                   check=True)
    doc = json.loads(proc.stdout)
    assert doc["phases"][0]["phase"] == "ring" and doc["phases"][0]["repeat"] == 2 * 511
    top = doc["top_links"]
    assert len(top) == 10 and top[0]["utilization"] >= top[-1]["utilization"]
    assert top[0]["level"] == doc["results"][0]["bottleneck"]["level"]
    text = run_cli("estimate", "dgx-h100-superpod", "-g", "512", "--size", "1G", "-a", "ring", "--detail",
                   check=True).stdout
    assert "# most utilized links:" in text and "nic" in text


def _table_rows(stdout):
    return [line for line in stdout.splitlines() if line.strip() and not line.startswith("#")]


def test_rows_are_nccl_tests_rows_with_topo_columns_after_a_hash():
    """nccl-tests prints size count type redop root, then time algbw busbw #wrong out of place and in place
    (src/util.cu writeBenchmarkLinePreamble/Body); topo's own columns follow a '#', one word each."""
    proc = run_cli("estimate", "dgx-h100-superpod", "-g", "16", "-b", "8", "-e", "1G", "-f", "32", check=True)
    head = [line for line in proc.stdout.splitlines() if "#wrong" in line][0]
    assert head.split("  # ")[0].split() == ["#", "size", "count", "type", "redop", "root", "time", "algbw", "busbw",
                                             "#wrong", "time", "algbw", "busbw", "#wrong"]
    for line in _table_rows(proc.stdout):
        nccl, topo_cols = line.split("  # ")
        f = nccl.split()
        assert len(f) == 13 and f[8] == "N/A" and f[12] == "N/A" and f[5:8] == f[9:12]
        # algorithm proto limit util busiest_link range(us): no spaces inside
        assert len(topo_cols.split()) == 6
    assert any(line.startswith("# limit latency:") for line in proc.stdout.splitlines())


def test_topo_reads_its_own_table_as_an_nccl_tests_log(tmp_path):
    from topo.calibrate.parse import parse_text
    proc = run_cli("estimate", "dgx-h100-superpod", "-g", "16", "-b", "8", "-e", "1G", "-f", "32", check=True)
    run = parse_text(proc.stdout)[0]
    lib = estimate(build_fabric(load_spec("dgx-h100-superpod")), "all_reduce", size_sweep(8, "1G", 32), gpus=16)
    assert [r.size_bytes for r in run.rows] == [x.size_bytes for x in lib.results]
    assert [r.time_s for r in run.rows] == pytest.approx([x.time_s for x in lib.results], rel=1e-3)


def test_csv_has_a_header_and_one_line_per_size():
    import csv
    import io
    proc = run_cli("estimate", "dgx-h100-superpod", "-g", "16", "-b", "8", "-e", "1G", "-f", "32", "--csv", check=True)
    rows = list(csv.DictReader(io.StringIO(proc.stdout)))
    assert [int(r["size_bytes"]) for r in rows] == size_sweep(8, "1G", 32)
    assert rows[-1]["time_us"] == rows[-1]["in_place_time_us"] and rows[-1]["wrong"] == ""
    assert {"algorithm", "protocol", "limit", "utilization", "busiest_link"} <= set(rows[0])
    both = run_cli("estimate", "dgx-h100-superpod", "--csv", "--json")
    assert both.returncode == 2 and both.stderr == "error: --csv: give either --json or --csv, not both\n"


@pytest.mark.parametrize("args, limit", [
    (["-c", "sendrecv", "-g", "1024", "--size", "1G"], "p2p-channel-cap"),  # not the NIC at 42%
    (["-c", "sendrecv", "-g", "1024", "--size", "1G", "--protocol", "LL"], "p2p-channel-cap"),
    (["-c", "all_reduce", "-g", "16", "--size", "8"], "latency"),
    (["-c", "alltoall", "-g", "1024", "--size", "1M"], "per-peer-latency"),
    (["-c", "all_reduce", "-g", "16", "--size", "1G", "-a", "ring", "--protocol", "LL"], "protocol-cap"),
])
def test_limit_says_what_bounds_the_time(args, limit):
    doc = json.loads(run_cli("estimate", "dgx-h100-superpod", *args, "--json", check=True).stdout)
    assert doc["results"][0]["bottleneck"]["limit"] == limit


def test_control_characters_never_reach_the_terminal():
    esc = "\x1b[31mred\x07\u202e"
    proc = run_cli("describe", "dgx-h100-superpod", "--set", f"description={esc}", check=True)
    assert "\x1b" not in proc.stdout and "\x07" not in proc.stdout and "\u202e" not in proc.stdout
    assert "\\x1b[31mred\\x07\\u202e" in proc.stdout
    bad = run_cli("estimate", "dgx-h100-superpod", "--set", "name=a\tb")
    assert bad.returncode == 2 and "control character U+0009" in bad.stderr and "\t" not in bad.stderr


def test_a_size_beyond_a_gpus_memory_gets_a_note():
    doc = json.loads(run_cli("estimate", "dgx-h100-superpod", "-g", "8", "--size", "100000G", "--json",
                             check=True).stdout)
    # an "80GB" H100 holds 81,559 MiB (what its driver reports): 85.5 GB, 80 GiB
    assert any("more than one H100's 85.5 GB (80 GiB) of memory" in n for n in doc["notes"])
    doc = json.loads(run_cli("estimate", "dgx-h100-superpod", "-g", "8", "--size", "64G", "--json", check=True).stdout)
    assert not any("memory" in n for n in doc["notes"])


def test_sizes_are_exact_integers_and_sweeps_never_repeat_a_size():
    from topo.units import parse_size_bytes
    assert parse_size_bytes("1125899906842623") == 2**50 - 1  # exact, not rounded through a float
    assert parse_size_bytes(2**50) == 2**50
    sizes = size_sweep(1, 64, 1.1)
    assert sizes == sorted(set(sizes)) and sizes[0] == 1


def _keys(doc, out=None):
    out = set() if out is None else out
    if isinstance(doc, dict):
        for k, v in doc.items():
            out.add(k)
            _keys(v, out)
    elif isinstance(doc, list):
        for v in doc:
            _keys(v, out)
    return out


def test_describe_estimate_and_compare_json_share_one_unit_convention(tmp_path):
    """SI base units with the unit in the key: bytes, seconds, B/s (never GB/s or us) in every JSON document."""
    from pathlib import Path
    log = Path(__file__).parent / "data" / "nccl_logs" / "dstack_nebius_h100_allreduce_2n.txt"
    docs = {"describe": json.loads(run_cli("describe", "dgx-h100-superpod", "--json", check=True).stdout),
            "estimate": json.loads(run_cli("estimate", "dgx-h100-superpod", "-g", "16", "--size", "1G", "--json",
                                           check=True).stdout),
            "compare": json.loads(run_cli("compare", str(log), "--gpu", "H100", "--json", check=True).stdout)}
    for name, doc in docs.items():
        keys = _keys(doc)
        bad = sorted(k for k in keys if any(k.endswith(u) for u in ("GBps", "_GB", "_us", "_ms", "_MB", "Gbps")))
        assert not bad, (name, bad)
    r = docs["estimate"]["results"][0]
    assert r["busbw_Bps"] == pytest.approx(r["algbw_Bps"] * 2 * 15 / 16) and r["algbw_Bps"] == pytest.approx(
        r["size_bytes"] / r["time_s"])
    assert {"measured_busbw_Bps", "model_busbw_Bps"} <= set(docs["compare"]["sizes"][0])
    assert "candidate_time_s" in docs["estimate"]


def test_a_failed_rank_is_named_as_failed_not_unreachable():
    proc = run_cli("estimate", "dgx-h100-superpod", "-g", "8", "--size", "1M", "-a", "ring", "--fail", "gpu3")
    assert proc.returncode == 2
    assert proc.stderr == ("error: --fail: GPU 3 itself failed (failures: gpu3) and is a rank of the communicator: "
                           "place the ranks on working GPUs\n")


def test_a_switch_without_uplinks_says_so():
    fails = [x for i in range(8) for x in ("--fail", f"core{i}")]
    out = run_cli("describe", "h100-100k", *fails, check=True).stdout
    assert "spine0: no uplinks left" in out and "inf:1" not in out


def test_messages_name_what_the_user_set():
    p = run_cli("describe", "--set", "cluster.num_servers=10")
    assert p.returncode == 2 and p.stderr.strip().endswith(
        "got num_servers, num_pods: add --unset cluster.num_pods to replace the file's num_pods by the num_servers "
        "you set")
    p = run_cli("describe", "dgx-h100-superpod", "--set", "server.nics=1000")
    assert p.returncode == 2 and p.stderr.startswith(
        "error: topologies/dgx-h100-superpod.toml (with --set server.nics=1000): fabric.tiers[1].radix:")


def test_nics_faster_than_the_technology_get_a_note():
    rates = ["--set", "server.nic_rate=800 Gb/s", "--set", "fabric.tiers[0].port_rate=800 Gb/s",
             "--set", "fabric.tiers[1].port_rate=800 Gb/s"]
    p = run_cli("describe", "dgx-h100-superpod", *rates, check=True)
    assert p.stderr == ("note: the NICs run 800 Gb/s but infiniband_ndr ports run at most 400 Gb/s: the network's "
                        "constants are infiniband_ndr's; infiniband_xdr runs 800 Gb/s ports (fabric.technology)\n")
    ok = run_cli("describe", "dgx-h100-superpod", *rates, "--set", "fabric.technology=infiniband_xdr", check=True)
    assert ok.stderr == ""


def test_failed_parts_are_named_in_the_output():
    """Issue 19 walk-through: ``topo estimate ... --fail rail:0`` printed the same header as without it, and its
    ``--json`` had no trace of the failure, so a saved result could not say what was modelled. The note names the
    parts and the links they take down (leaf3 of dgx-h100-superpod: its 32 NIC links and 32 uplinks)."""
    doc = json.loads(run_cli("estimate", "dgx-h100-superpod", "-g", "64", "--size", "1G", "--fail", "leaf3",
                             "--json", check=True).stdout)
    assert "with failures: leaf3 (64 of 4,096 links down; routing avoids them)" in doc["notes"]
    text = run_cli("estimate", "dgx-h100-superpod", "-g", "64", "--size", "1G", "--fail", "leaf3", "--fail",
                   "rail:1", check=True).stdout
    assert "# note: with failures: leaf3, rail:1 (320 of 4,096 links down; routing avoids them)" in text.splitlines()
    doc = json.loads(run_cli("estimate", "dgx-h100-superpod", "-g", "64", "--size", "1G", "--json",
                             check=True).stdout)
    assert not any("failures" in n for n in doc["notes"])
    doc = json.loads(run_cli("estimate", "meta-llama3-24k", "--traffic", "3d-parallel", "--fail", "ctsw0", "--json",
                             check=True).stdout)
    assert any(n.startswith("with failures: ctsw0 (") for n in doc["notes"])


def test_detail_tells_parallel_cables_apart():
    """Issue 19 walk-through: on h100-100k-islands each core has 7 cables to one 4th-tier switch, and --detail's
    ten hottest links read 'core0 -> super-spine0' five times over. Each row now says which cable it is, with the
    number ``--fail a-b#k`` takes for that cable."""
    from topo.cli.estimate import _cable
    from topo.fabric.failures import failed_links

    fabric = build_fabric(load_spec("h100-100k-islands"))
    from topo.fabric.failures import node_id

    u, v = node_id(fabric, "core0"), node_id(fabric, "super-spine0")
    for k in (0, 3, 6):
        link = int(np.flatnonzero(failed_links(fabric, [f"core0-super-spine0#{k}"]))[0])
        assert _cable(fabric, link, u, v) == (k, 7) and _cable(fabric, link, v, u) == (k, 7)
    leaf_nic = int(np.flatnonzero(failed_links(fabric, ["nic0.0-leaf0"]))[0])
    assert _cable(fabric, leaf_nic, node_id(fabric, "nic0.0"), node_id(fabric, "leaf0")) == (0, 1)
    doc = json.loads(run_cli("estimate", "h100-100k-islands", "--groups", "24576", "--size", "1GiB", "--detail",
                             "--json", check=True).stdout)
    top = doc["top_links"]
    assert {t["cables"] for t in top} == {7}
    ups = [(t["src"], t["dst"], t["cable"]) for t in top if t["direction"] == "up"]
    assert len(set(ups)) == len(ups) == 5  # five distinct cables, not one cable five times
    text = run_cli("estimate", "h100-100k-islands", "--groups", "24576", "--size", "1GiB", "--detail",
                   check=True).stdout
    assert "#   core0 -> super-spine0 #0 of 7 cables (core-super-spine, up): 94% of line rate" in text


def test_the_busiest_links_utilization_is_explained_by_what_bounds_the_time():
    # tidy11: a 1 GiB all-reduce over GB200 NVL72 racks (NVLSTree) named "gpu0->nvswitch0 (nvlink)" at 27% of line
    # rate as its limit, which reads as a saturated link; the time is the link's line rate times the profile's
    # NVLink efficiency, NVLSTree's protocol efficiency and the pipeline fill (the first min(S, W) bytes at half
    # speed, W the profile's window x the schedule's window_scale: g / reference ranks x (1 + tree depth),
    # topo.engine.algorithms.nvls.window_scale); their product with the bandwidth part's share is the utilization
    from topo.engine.profiles import profile_for

    S = 2**30
    prof = profile_for("blackwell", "infiniband_ndr")  # the spec's profile (gpu/blackwell.toml, network files)
    x = json.loads(run_cli("estimate", "gb200-nvl72-superpod", "--size", "1GiB", "--json", check=True).stdout)
    r = x["results"][0]
    b = r["bottleneck"]
    assert (r["algorithm"], r["protocol"], b["level"], b["limit"]) == ("nvls_tree", "Simple", "nvlink", "link+protocol")
    domains, g = 32, 72  # 2,304 GPUs in 32 racks of 72: a double binary tree of depth log2(32) = 5 across them
    window = prof.pipeline_window_bytes * g / prof.reference_ranks_per_domain * (1 + 5)
    assert b["class_efficiency"] == prof.nvlink_efficiency
    assert b["protocol_efficiency"] == prof.efficiency("nvls_tree", "Simple", domains)
    assert b["fill_bytes"] == pytest.approx(min(S, window))
    assert b["fill_share"] == pytest.approx(S / (S + min(S, window)))
    assert b["bandwidth_share"] == pytest.approx(r["bandwidth_s"] / r["time_s"])
    # 900 GB/s per direction per GPU: NVIDIA GB200 NVL72 (NVLink 5, 1.8 TB/s bidirectional per GPU)
    assert b["utilization"] == pytest.approx(b["bytes"] / (900e9 * r["time_s"]), rel=1e-9)
    product = b["class_efficiency"] * b["protocol_efficiency"] * b["fill_share"] * b["bandwidth_share"]
    assert product == pytest.approx(b["utilization"], rel=1e-9) and b["other_share"] == pytest.approx(1, rel=1e-9)
    text = run_cli("estimate", "gb200-nvl72-superpod", "--size", "1GiB", check=True).stdout.splitlines()
    line = next(ln for ln in text if ln.startswith("# util "))
    assert line == (f"# util {b['utilization']:.0%} at 1 GiB = {b['class_efficiency']:.1%} of gpu0->nvswitch0's "
                    f"line rate usable (NVLink efficiency, the profile's) x {b['protocol_efficiency']:.1%} carried by "
                    f"nvls_tree Simple (its protocol efficiency) x {b['fill_share']:.1%} steady (985.5 MiB of 1 GiB go "
                    f"at half speed while NCCL's buffers fill) x {b['bandwidth_share']:.1%} of the time in the "
                    "bandwidth part: these factors bound the time, not a saturated link"), line


def test_no_utilization_line_where_latency_bounds_the_time():
    text = run_cli("estimate", "dgx-h100-superpod", "-g", "16", "--size", "8", check=True).stdout
    assert "limit latency" in text and "# util " not in text


def test_a_link_idle_in_other_phases_is_said_so_in_the_utilization_line():
    # hierarchical runs phases one after the other: the busiest link of the longest phase idles in the others, so
    # the four factors alone would overstate its utilization; the line names the rest instead of a false product
    x = json.loads(run_cli("estimate", "dgx-h100-superpod", "--size", "1G", "-a", "hierarchical", "--json",
                           check=True).stdout)
    b = x["results"][0]["bottleneck"]
    product = b["class_efficiency"] * b["protocol_efficiency"] * b["fill_share"] * b["bandwidth_share"]
    assert b["utilization"] < 0.9 * product and b["other_share"] == pytest.approx(b["utilization"] / product)
    line = next(ln for ln in run_cli("estimate", "dgx-h100-superpod", "--size", "1G", "-a", "hierarchical",
                                     check=True).stdout.splitlines() if ln.startswith("# util "))
    assert f"x {b['utilization'] / product:.1%} (phases or flows where another link binds)" in line, line


# nccl-tests (NVIDIA/nccl-tests@a0b82b22 src/common.cu setupArgs): count = size / wordSize(type), in integers, and
# the run and the size column are count x wordSize bytes; a count of 0 is a collective of nothing (refused here).
@pytest.mark.parametrize("argv, line", [
    (["--size", "3"], "error: --size: 3 bytes is less than one float (4 bytes): nccl-tests rounds the count down "
                      "(size / 4) to 0 elements, a collective of nothing; allowed: 4 bytes or more for -d float"),
    (["-b", "1", "-e", "64"], "error: -b: 1 byte is less than one float (4 bytes)"),
    (["--size", "7", "-d", "double"], "error: --size: 7 bytes is less than one double (8 bytes)"),
])
def test_a_size_below_one_element_is_refused_in_one_line(argv, line):
    proc = run_cli("estimate", "dgx-h100-superpod", "-g", "16", *argv)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.startswith(line) and proc.stderr.count("\n") == 1


def test_a_size_is_rounded_down_to_whole_elements_as_nccl_tests_runs_it():
    def run(*argv):
        return json.loads(run_cli("estimate", "dgx-h100-superpod", "-g", "16", "--json", *argv, check=True).stdout)

    six, four = run("--size", "6"), run("--size", "4")
    assert [(r["size_bytes"], r["count"]) for r in six["results"]] == [(4, 1)]  # 6 // 4 = 1 float, 4 bytes run
    assert six["results"][0]["time_s"] == four["results"][0]["time_s"]
    assert any("6 -> 4 bytes" in n and "nccl-tests" in n for n in six["notes"])
    assert not any("rounded" in n for n in four["notes"])
    byte = run("--size", "3", "-d", "int8")["results"][0]
    assert (byte["size_bytes"], byte["count"], byte["type"]) == (3, 3, "int8")
    sweep = run("-b", "6", "-e", "24", "-f", "3")["results"]  # nccl-tests' sweep 6, 18 runs 4 and 16 bytes
    assert [(r["size_bytes"], r["count"]) for r in sweep] == [(4, 1), (16, 4)]
