"""The range ``topo estimate`` reports around a time (issue 33): the 10th-90th percentile of the model's
leave-one-setup-out errors per size regime (topo/data/accuracy/collective_interval.toml, printed by
benchmarks/accuracy.py), applied as measured = model / (1 + error)."""

import json

import pytest

import topo
from conftest import run_cli
from topo.engine.estimate import estimate
from topo.engine.interval import load_regimes, regime_of, regimes, time_range_s
from topo.errors import TopoError


@pytest.fixture(scope="module")
def pod():
    return topo.build_fabric(topo.load_spec("dgx-h100-superpod"))


def test_the_bundled_file_is_the_accuracy_runs_percentiles():
    rs = regimes()
    assert [r.name for r in rs] == ["latency", "middle", "bandwidth"]
    assert rs[0].max_bytes == 64 * 2**10 and rs[1].max_bytes == 64 * 2**20 - 1  # accuracy.py's regimes
    for r in rs:
        assert -1 < r.error_p10 <= r.error_p90 and r.sizes > 0
    # the model is weakest (widest) at small sizes and is too fast there more often than too slow
    width = [(1 + r.error_p90) / (1 + r.error_p10) for r in rs]
    assert width[0] > width[2] and rs[0].error_p10 < 0
    assert [r.in_table for r in rs] == [True, True, False]


def test_an_estimate_carries_the_range_of_its_regime(pod):
    res = estimate(pod, "all_reduce", [8, 2**20, 2**33], gpus=16).results
    for x in res:
        r = regime_of(x.size_bytes)
        assert x.time_low_s == pytest.approx(x.time_s / (1 + r.error_p90), rel=1e-12)
        assert x.time_high_s == pytest.approx(x.time_s / (1 + r.error_p10), rel=1e-12)
        assert x.time_low_s <= x.time_high_s
    lo, hi = res[0].time_low_s / res[0].time_s, res[0].time_high_s / res[0].time_s
    assert time_range_s(8, 1.0) == pytest.approx((lo, hi))
    # a profile that is not a bundled one (calibrated, ideal) is not what the errors describe: no range
    ideal = estimate(pod, "all_reduce", [8], gpus=16, profile="ideal").results[0]
    assert ideal.time_low_s is None and ideal.time_high_s is None


def test_the_cli_prints_the_range_where_the_model_is_weaker(pod):
    p = run_cli("estimate", "dgx-h100-superpod", "-g", "16", "-b", "8", "-e", "8G", "-f", "1073741824", check=True)
    rows = [line for line in p.stdout.splitlines() if not line.startswith("#")]
    small, big = rows
    lo, hi = (float(v) for v in small.split()[-1].split("-"))
    t = float(small.split()[5])
    r = regimes()[0]
    assert lo == pytest.approx(t / (1 + r.error_p90), abs=0.06) and hi == pytest.approx(t / (1 + r.error_p10), abs=0.06)
    assert big.split()[-1] == "-" and "# range(us): where 80% of measured times fell" in p.stdout
    doc = json.loads(run_cli("estimate", "dgx-h100-superpod", "-g", "16", "--size", "8", "--json", check=True).stdout)
    x = doc["results"][0]
    assert x["time_low_s"] < x["time_s"] < x["time_high_s"]


def test_a_malformed_interval_file_is_one_clear_error(tmp_path):
    bad = tmp_path / "i.toml"
    bad.write_text('[[regime]]\nname = "x"\nmax_bytes = 10\nerror_p10 = 0.5\nerror_p90 = -0.5\nsizes = 3\n')
    with pytest.raises(TopoError, match=r"regime\[0\]: error_p10 0.5 and error_p90 -0.5"):
        load_regimes(bad)
    bad.write_text('[[regime]]\nname = "x"\n')
    with pytest.raises(TopoError, match=r"regime\[0\]: needs name, max_bytes"):
        load_regimes(bad)
