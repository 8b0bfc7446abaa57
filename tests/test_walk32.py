"""walk32's fixes, from a performance engineer's walk checking topo against their own nccl-tests logs.

The logs are rendered as nccl-tests prints them (tests/nccl_text.py: the current layout of
NVIDIA/nccl-tests src/common.cu, size and count as '%12li' whole numbers).
"""

from __future__ import annotations

import pytest

from conftest import run_cli
from nccl_text import render
from topo.calibrate.compare import BW_MIN_BYTES, compare_run
from topo.calibrate.parse import parse_file, parse_text
from topo.calibrate.setup import setup_from_run
from topo.engine.estimate import estimate

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


def _faster_log(tmp_path, small: float, large: float):
    """A 2-node H100 all-reduce log: the model's own times divided by ``small`` below 64 MiB, ``large`` above."""
    run = parse_text(render("all_reduce", ["a", "b"], 8, "NVIDIA H100 80GB HBM3", SIZES, [1.0] * len(SIZES)))[0]
    setup = setup_from_run(run)
    times = [r.time_s / (small if s < BW_MIN_BYTES else large)
             for s, r in zip(SIZES, estimate(setup.fabric, "all_reduce", SIZES, gpus=16).results)]
    log = tmp_path / "faster.log"
    log.write_text(render("all_reduce", ["a", "b"], 8, "NVIDIA H100 80GB HBM3", SIZES, times))
    return log


def test_a_faster_band_below_the_headline_sizes_is_named(tmp_path):
    """walk32: a run 2.2x faster than the model at small sizes and 1.2x at >= 64 MiB: every size beats the model
    by more than 15%, one band from 1 KiB to 1 GiB, which reaches the headline's sizes, so the verdict named only
    the headline's 1.2x and never the small sizes' 2.2x (the question 'is the small-message latency right?'). The
    band below the headline's sizes is now named, with its own median (2.20x: the model's times / 2.2)."""
    run = parse_file(_faster_log(tmp_path, 2.2, 1.2))[0]
    res = compare_run(run, setup_from_run(run))
    assert res.headline_efficiency == pytest.approx(1.2, abs=2e-3)
    assert res.ahead["min_bytes"] == 2**10 and res.ahead["max_bytes"] == 2**25
    assert res.ahead["median_efficiency"] == pytest.approx(2.2, abs=5e-3)
    assert res.verdict.startswith("this run is 1.20x faster than the model at sizes >= 64 MiB (their median)")
    assert "; at 1 KiB-32 MiB the run is 2.20x faster than the model (" in res.verdict
    assert res.verdict.count("calibrate the profile on this log") == 1


def test_a_run_faster_only_at_the_headline_sizes_names_no_band(tmp_path):
    """The same log with the small sizes at the model's time: the headline says it all, no band is named."""
    run = parse_file(_faster_log(tmp_path, 1.0, 1.2))[0]
    res = compare_run(run, setup_from_run(run))
    assert res.ahead is None and "the run is" not in res.verdict.split(";", 1)[-1]


@pytest.mark.parametrize("cut", [80, 58, 75])  # a terminal's 80 columns; inside a time ('28' + '3.9'); in #wrong
def test_a_row_wrapped_over_two_lines_is_read_as_one(tmp_path, cut):
    """walk32: a log pasted from an 80-column terminal splits a row over two lines; the row was left out ('8 values
    where the table's rows have 13'). Joined as the terminal split it (no character lost), it is the row."""
    lines = _lines()
    i = next(i for i, line in enumerate(lines) if line.split()[:1] == [str(2**20)])
    whole = parse_text("\n".join(lines) + "\n")[0]
    lines[i:i + 1] = [lines[i][:cut], lines[i][cut:]]
    run = parse_text("\n".join(lines) + "\n")[0]
    assert [(r.size_bytes, r.time_s, r.busbw_GBps) for r in run.rows] == \
        [(r.size_bytes, r.time_s, r.busbw_GBps) for r in whole.rows]
    assert run.notes == [f"a row (size {2**20} B) wrapped over two lines: read as one"]


def test_a_row_cut_short_before_a_whole_row_is_not_joined_to_it():
    """A row cut short (a garbled paste) followed by a whole row: joined they are not a row of the table's
    width, so the cut row is left out with its note and the next row is read."""
    lines = _lines()
    i = next(i for i, line in enumerate(lines) if line.split()[:1] == [str(2**20)])
    lines[i] = lines[i][:60]
    run = parse_text("\n".join(lines) + "\n")[0]
    assert 2**20 not in [r.size_bytes for r in run.rows] and 2**21 in [r.size_bytes for r in run.rows]
    assert run.notes[0].startswith(f"a row (size {2**20} B) cannot be read: ")
