"""``topo estimate --size 205.2MiB``: a size ``topo train`` prints to four digits is taken back (walk45 Left 5).

nccl-tests reads ``-b``/``-e``/``-i`` as a double times its unit and keeps ``(size_t)parsed``
(NVIDIA/nccl-tests@a0b82b22 src/common.cu ``parsesize`` lines 227-260, ``-b``/``-e``/``-i`` lines 1217-1240), so
``-b 205.2M`` runs 205.2 x 2**20 = 215,167,795.2 -> 215,167,795 bytes, then ``count = size / 4`` floats. topo
does the same and says so in a note; a size of no bytes, nan, inf or garbage stays refused in one line.
"""

import json
from fractions import Fraction

import pytest

from conftest import run_cli
from topo.units import UnitError, parse_size_bytes, parse_size_fraction

EXACT = Fraction(2052, 10) * 2**20  # 205.2 MiB in bytes: 215,167,795.2
ARGS = ("estimate", "dgx-h100-superpod", "-g", "16", "-c", "all_gather")


def _run(*argv):
    return json.loads(run_cli(*ARGS, "--json", *argv, check=True).stdout)


def test_the_exact_size_keeps_its_fraction_of_a_byte():
    assert parse_size_fraction("205.2MiB") == EXACT == Fraction(1075838976, 5)
    assert parse_size_fraction("205.2 MiB") == EXACT  # as topo train's table prints it


def test_a_whole_size_is_still_required_where_whole_bytes_are_parsed():
    with pytest.raises(UnitError, match=r"got '205.2MiB' = 215,167,795.2 bytes; allowed: 215,167,795 or "
                                        r"215,167,796 bytes"):
        parse_size_bytes("205.2MiB")
    with pytest.raises(UnitError, match="allowed: 1 byte or more"):
        parse_size_bytes("0.5")


def test_size_with_a_fraction_of_a_byte_runs_truncated_as_nccl_tests_does():
    whole = int(EXACT)  # (size_t)parsed
    assert whole == 215_167_795
    frac, exact = _run("--size", "205.2MiB"), _run("--size", str(whole))
    assert [r["size_bytes"] for r in frac["results"]] == [r["size_bytes"] for r in exact["results"]]
    assert frac["results"][0]["time_s"] == exact["results"][0]["time_s"]
    assert any("--size 205.2MiB is 215,167,795.2 bytes, run as 215,167,795" in n for n in frac["notes"])
    assert not any("fraction of a byte" in n for n in exact["notes"])


def test_sweep_bounds_with_a_fraction_of_a_byte_are_truncated_too():
    frac = _run("-b", "1000.5", "-e", "9000.9", "-f", "3")  # nccl-tests: -b 1000, -e 9000: 1000, 3000, 9000 bytes
    whole = _run("-b", "1000", "-e", "9000", "-f", "3")
    assert [r["size_bytes"] for r in frac["results"]] == [r["size_bytes"] for r in whole["results"]]
    assert len(whole["results"]) == 3
    assert sum("fraction of a byte" in n for n in frac["notes"]) == 2  # -b and -e


@pytest.mark.parametrize("size, line", [
    ("-1", "error: --size: a size must be a positive number of bytes, got '-1' (the sign is wrong)"),
    ("0", "error: --size: a size must be a positive number of bytes, got '0'"),
    ("nan", "error: --size: expected a size such as"),
    ("inf", "error: --size: expected a size such as"),
    ("12parsecs", "error: --size: expected a size such as"),
    ("0.5", "error: --size: '0.5' is 0.5 bytes, less than one byte; allowed: 1 byte or more"),
])
def test_sizes_of_no_bytes_stay_refused_in_one_line(size, line):
    proc = run_cli(*ARGS, "--size", size)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.startswith(line) and proc.stderr.count("\n") == 1
