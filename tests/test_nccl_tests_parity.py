"""``topo estimate`` as nccl-tests' scripts call it (issue 30, item 6 and ecosystem): the closing
``# Avg bus bandwidth`` line CI scripts grep, ``-n``/``-w``/``-r``/``-i`` and ``-c 0|1`` (nccl-tests' --check) beside
``-c NAME``, and flags that used to be silently ignored: ``--traffic ... --csv``, ``--hash-seed`` with ideal ECMP."""

import csv
import io
import json

import pytest

from topo.calibrate.parse import parse_text
from topo.cli.main import main

BASE = ["estimate", "dgx-h100-superpod", "-g", "16"]


def _out(capsys, *args, code=0, base=BASE):
    assert main([*base, *args]) == code
    return capsys.readouterr()


def test_avg_bus_bandwidth_closes_the_table_and_reads_back(capsys):
    text = _out(capsys, "-b", "1M", "-e", "64M").out
    doc = json.loads(_out(capsys, "-b", "1M", "-e", "64M", "--json").out)
    busbw = [x["busbw_Bps"] / 1e9 for x in doc["results"]]
    avg_line = [line for line in text.splitlines() if line.startswith("# Avg bus bandwidth")]
    # nccl-tests (src/common.cu) prints the mean busbw over the sizes with %g
    assert avg_line == [f"# Avg bus bandwidth    : {sum(busbw) / len(busbw):g}"]
    run = parse_text(text)[0]  # topo's own nccl-tests parser reads it as it reads a real run's
    assert run.avg_busbw_GBps == pytest.approx(sum(busbw) / len(busbw), rel=1e-5) and not run.looks_cut_short


def test_minus_i_steps_by_bytes_as_nccl_tests(capsys):
    doc = json.loads(_out(capsys, "-b", "1M", "-e", "4M", "-i", "1M", "--json").out)
    assert [x["size_bytes"] for x in doc["results"]] == [1 << 20, 2 << 20, 3 << 20, 4 << 20]
    assert main([*BASE, "-b", "1M", "-e", "4M", "-i", "1M", "-f", "2"]) == 2
    assert "error: -i: give either -f (a factor) or -i (bytes) between sizes" in capsys.readouterr().err


def test_c_is_a_collective_or_nccl_tests_check(capsys):
    by_name = json.loads(_out(capsys, "-c", "alltoall", "--size", "1M", "--json").out)
    assert by_name["collective"] == "alltoall"
    long = json.loads(_out(capsys, "--collective", "alltoall", "--size", "1M", "--json").out)
    assert long["results"] == by_name["results"]
    checked = json.loads(_out(capsys, "-c", "1", "--size", "1M", "-n", "20", "-w", "5", "-r", "0", "--json").out)
    assert checked["collective"] == "all_reduce"  # -c 1 is --check, not a collective
    assert any("--check 1" in n for n in checked["notes"]) and any("-n/-w" in n for n in checked["notes"])
    err = _out(capsys, "-c", "alltoall", "--collective", "alltoall", code=2).err
    assert err.startswith("error: -c: -c NAME names the collective, as --collective; give it once")
    assert _out(capsys, "-r", "3", "-c", "broadcast", code=2).err.startswith("error: -r: topo times root 0")
    assert _out(capsys, "-n", "0", code=2).err.strip() == "error: -n: must be 1 or more, got '0'"
    assert _out(capsys, "--check", "2", code=2).err.startswith("error: --check: must be 0 or 1")


def test_traffic_csv_is_csv(capsys, tmp_path):
    f = tmp_path / "mix.toml"
    f.write_text('[[member]]\nname = "tp"\ncollective = "all_reduce"\nsize = "64MiB"\ngpus = 64\n'
                 '[[member]]\nname = "ep"\ncollective = "alltoall"\nsize = "16MiB"\ngpus = 64\n')
    mix = ["estimate", "dgx-h100-superpod", "--traffic", str(f)]
    out = _out(capsys, "--csv", base=mix).out  # before: --csv was ignored, the text table printed
    rows = list(csv.DictReader(io.StringIO(out)))
    doc = json.loads(_out(capsys, "--json", base=mix).out)
    assert [r["member"] for r in rows] == [m["name"] for m in doc["members"]]
    assert float(rows[0]["slowdown"]) == pytest.approx(doc["members"][0]["slowdown"], rel=1e-5)


def test_hash_seed_with_ideal_ecmp_is_refused(capsys):
    err = _out(capsys, "--hash-seed", "3", code=2).err
    assert err.startswith("error: --hash-seed: draws other ECMP hash collisions, and ECMP is 'ideal' here")
    assert _out(capsys, "--hash-seed", "3", "--ecmp", "hash", "--size", "1M").err == ""
