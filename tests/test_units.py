import pytest

from topo.units import (UnitError, format_bandwidth, format_rate, format_size, format_time, parse_bandwidth_Bps,
                        parse_size_bytes, parse_time_s)


@pytest.mark.parametrize("text, expected", [
    ("8", 8), (8, 8), ("64K", 65536), ("1M", 2**20), ("16G", 16 * 2**30),  # nccl-tests: binary suffixes
    ("1GiB", 2**30), ("1GB", 10**9), ("512MB", 512 * 10**6), ("4KiB", 4096), ("1.5K", 1536), ("2 MiB", 2 * 2**20),
    # walk17: the limit's own message names 1 PiB, which was refused as not a size
    ("1PiB", 2**50), ("1P", 2**50), ("1PB", 10**15),
])
def test_parse_size(text, expected):
    assert parse_size_bytes(text) == expected


@pytest.mark.parametrize("bad", ["-1", "0", "abc", "1.5", "12Q", "", True, -4, "2PiB"])
def test_parse_size_rejects(bad):
    with pytest.raises(UnitError):
        parse_size_bytes(bad)


@pytest.mark.parametrize("text, expected", [
    ("400 Gb/s", 50e9), ("400Gbps", 50e9), ("450 GB/s", 450e9), ("1.8 TB/s", 1.8e12), ("100 Gbit/s", 12.5e9),
    ("3.2 Tb/s", 400e9),
])
def test_parse_bandwidth(text, expected):
    assert parse_bandwidth_Bps(text) == pytest.approx(expected)


@pytest.mark.parametrize("bad", ["400", 400, "400 G", "fast", "-1 GB/s", "0 Gb/s"])
def test_parse_bandwidth_rejects(bad):
    with pytest.raises(UnitError):
        parse_bandwidth_Bps(bad)


@pytest.mark.parametrize("text, expected", [("500 ns", 5e-7), ("1.5 us", 1.5e-6), ("2 ms", 2e-3), ("0 ns", 0.0),
                                            ("1 s", 1.0)])
def test_parse_time(text, expected):
    assert parse_time_s(text) == pytest.approx(expected)


@pytest.mark.parametrize("bad", ["5", 5, "-1 us", "1 hour"])
def test_parse_time_rejects(bad):
    with pytest.raises(UnitError):
        parse_time_s(bad)


def test_formatting():
    assert format_size(2**30) == "1 GiB"
    assert format_size(2**50) == "1 PiB"  # the size limit, as its message names it
    assert format_bandwidth(50e9) == "50 GB/s"
    assert format_rate(50e9) == "400 Gb/s"


def test_a_time_has_one_format_in_tables_and_prose():
    """Section 192 left times in prose dropping trailing zeros (``3.8 s`` in a note, ``3.800 s`` in the table above
    it): :func:`format_time` keeps 4 significant digits everywhere; only a spec's own value (the spec reference's
    defaults) is written short."""
    assert [format_time(x) for x in (3.8, 4.04e-3, 1e-6, 9.1e-7, 0.0)] == ["3.800 s", "4.040 ms", "1.000 us",
                                                                          "910.0 ns", "0 s"]
    assert format_time(1.3e-7, zeros=False) == "130 ns"


def test_prose_does_not_format_seconds_by_hand():
    """No f-string prints a time in seconds, ms or us with its own format (``{t:.3g} s``, ``{t * 1e3:.2f} ms``): the
    prose and tables go through format_time, and so do the wall-clock durations of topo's own run (``wrote ... in``,
    ``evaluated in``, a sweep's and a calibration's time: rev58's review). Left out: echoes of a log's own figures
    (calibrate/parse.py), timeouts a user gave, a spec's latency limit, fixed-unit table columns (a number without a
    unit) and a sweep's progress bar's time left (``42 s``, ``40 min``: a rough estimate, to the second at most)."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[1] / "topo"
    hand = re.compile(r"\{[^{}]*:[,.0-9]*[fg]\} ?(s|ms|us|ns)\b")
    allowed = {"calibrate/parse.py", "sweep/scheduler.py", "report/browser.py", "spec/reference.py", "spec/model.py"}
    allowed_lines = {("cli/sweep.py", 'return f"{seconds:.0f} s"')}  # the progress bar's time left
    found = [f"{p.relative_to(root)}:{i}" for p in root.rglob("*.py") if str(p.relative_to(root)) not in allowed
             for i, line in enumerate(p.read_text().splitlines(), 1)
             if hand.search(line) and (str(p.relative_to(root)), line.strip()) not in allowed_lines]
    assert found == []
