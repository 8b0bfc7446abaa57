"""walk32's fixes, from a performance engineer's walk checking topo against their own nccl-tests logs.

The logs are rendered as nccl-tests prints them (tests/nccl_text.py: the current layout of
NVIDIA/nccl-tests src/common.cu, size and count as '%12li' whole numbers).
"""

from __future__ import annotations

import pytest

from conftest import run_cli
from nccl_text import render
from topo.calibrate.parse import parse_text

SIZES = [2**i for i in range(10, 31)]  # 1 KiB .. 1 GiB


def _lines():
    return render("all_reduce", ["a", "b"], 8, "NVIDIA H100 80GB HBM3", SIZES,
                  [1e-4 * (1 + s / 2**24) for s in SIZES]).splitlines()


def _garbled(column: int, word: str) -> list[str]:
    lines = _lines()
    i = next(i for i, line in enumerate(lines) if line.split()[:1] == [str(2**20)])
    tokens = lines[i].split()
    tokens[column] = word
    lines[i] = " ".join(tokens)
    return lines


@pytest.mark.parametrize("word", ["104857b", "-1", "1O48576"])
def test_a_row_whose_size_is_garbled_is_left_out_with_a_note(word):
    """walk32: a row whose size was not a whole number ('104857b', a size of -1) was left out with no note,
    where a row with a word for its time is named: the user saw a size missing from the table and no reason."""
    run = parse_text("\n".join(_garbled(0, word)) + "\n")[0]
    assert 2**20 not in [r.size_bytes for r in run.rows] and len(run.rows) == len(SIZES) - 1
    assert run.notes == [f"a row (after size {2**19} B) cannot be read: {word!r} where the size (a whole number) "
                         "belongs (garbled): left out"]


def test_a_row_whose_count_is_garbled_is_named_too():
    run = parse_text("\n".join(_garbled(1, "26214x")) + "\n")[0]
    assert run.notes == [f"a row (size {2**20} B) cannot be read: '26214x' where the count (a whole number) "
                         "belongs (garbled): left out"]


def test_compare_prints_the_note(tmp_path):
    log = tmp_path / "bad.log"
    log.write_text("\n".join(_garbled(0, "104857b")) + "\n")
    proc = run_cli("compare", str(log), check=True)
    assert (f"note: a row (after size {2**19} B) cannot be read: '104857b' where the size (a whole number) belongs "
            "(garbled): left out") in proc.stderr
