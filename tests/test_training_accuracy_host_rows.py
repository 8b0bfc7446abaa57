"""``benchmarks/training_accuracy.py --host-rows``: the host launch time at which a run's signed error reaches zero,
read off the errors at :data:`HOST_GRID_S` (hophost49, docs/calibration-findings.md): the runs the host binds in
the model want 18-22 us, inside the published 5-20 us (HolisticTraceAnalysis), the rest 34-45 us, which says the
bound's pull comes from runs the host does not explain. Checked against closed forms: a line through the grid
crosses zero where its equation says."""

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import training_accuracy  # noqa: E402

GRID = training_accuracy.HOST_GRID_S


def test_a_line_through_the_grid_is_zero_where_its_equation_says():
    # err(h) = (h - 27 us) / 10 us: zero at 27 us, between the grid's 20 and 30 us
    errs = [(h - 27e-6) / 1e-5 for h in GRID]
    assert training_accuracy.host_root_s(GRID, errs) == pytest.approx(27e-6)


def test_a_flat_start_then_a_rise_is_zero_on_the_rising_segment():
    # host-bound only above 30 us (flat -8% below, as the Qwen3-235B H100 rows): -8% at 30 us, +8% at 40 us -> 35 us
    errs = [-0.08, -0.08, -0.08, -0.08, 0.08, 0.24, 0.40]
    assert training_accuracy.host_root_s(GRID, errs) == pytest.approx(35e-6)


def test_no_zero_on_the_grid_is_none_not_an_end_point():
    assert training_accuracy.host_root_s(GRID, [0.05] * len(GRID)) is None  # too slow at every host time
    assert training_accuracy.host_root_s(GRID, [-0.05] * len(GRID)) is None  # too fast at every host time
    assert training_accuracy.host_root_s(GRID, [0.0] * len(GRID)) is None  # flat: the host does not bind


def test_the_grid_spans_the_published_range_and_four_times_its_top():
    lo, hi = training_accuracy.HOST_RANGE
    assert GRID[0] == pytest.approx(lo) and GRID[-1] == pytest.approx(4 * hi)
    assert list(GRID) == sorted(GRID) and hi in GRID


def test_a_run_bound_inside_the_published_range_is_told_from_one_bound_only_above_it():
    top = training_accuracy.HOST_RANGE[1]
    inside = [-0.28, -0.27, -0.09, 0.27, 0.65, 1.43, 2.21]  # H100 Qwen3-30B EP8 26.02.01: moves by 19 points by 20 us
    above = [-0.085, -0.084, -0.084, -0.073, -0.008, 0.147, 0.436]  # H100 Qwen3-235B 25.11: 0.1 point by 20 us
    assert training_accuracy.host_binds_within(GRID, inside, top)
    assert not training_accuracy.host_binds_within(GRID, above, top)


def test_the_host_note_gives_the_wanted_time_to_a_tenth_of_a_microsecond_and_names_host_rows():
    # main's fit wanted 20.3 us, which the note printed as "20 us", the bound itself
    note = training_accuracy._host_note(20.3e-6)
    assert "20.3 us" in note and "--host-rows" in note
    assert training_accuracy._host_note(training_accuracy.HOST_RANGE[1]) == ""  # inside the range: no note
