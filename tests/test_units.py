import pytest

from topo.units import (UnitError, format_bandwidth, format_rate, format_size, parse_bandwidth_Bps,
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
