"""Fixed-unit output (topo.units.in_unit / format_in): the one place the plan's lines, notes and tables convert
bytes to PB/TB, watts to MW/kW, Wh to TWh, kg to Mt, FLOP/s to EFLOP/s. Checked against the definitions (SI
prefixes: GB = 1e9, as topo/units.py states) and, through `topo plan`, against closed forms of the printed
figures."""

import re

import numpy as np
import pytest

from topo.units import format_in, format_usd, in_unit
from conftest import run_cli


@pytest.mark.parametrize("value, unit, expected", [
    (2.5e15, "PB", 2.5), (31.3e12, "TB", 31.3), (80e9, "GB", 80.0), (80 * 2**30, "GiB", 80.0),
    (50e9, "Gb/s", 400.0),  # 400 Gb/s = 50 GB/s (8 bits a byte)
    (165.19e6, "MW", 165.19), (40.8e3, "kW", 40.8), (1.447e12, "TWh", 1.447), (0.53e9, "Mt", 0.53),
    (99.2e18, "EFLOP/s", 99.2), (5400.0, "h", 1.5), (90.0, "min", 1.5), (1.8605e9, "million L", 1860.5),
    (530e6, "kt", 530.0), (97.9e6, "$M", 97.9), (1.044e12, "TB/s", 1.044), (450e9, "GB/s", 450.0),
    (5.6e6, "MB", 5.6), (64e3, "kB", 64.0), (42e3, "km", 42.0),
    (989e12, "TFLOP/s", 989.0), (2.5 * 86400, "days", 2.5),  # topo train's MFU peak and time to train (rev38)
])
def test_in_unit_by_definition(value, unit, expected):
    assert in_unit(value, unit) == pytest.approx(expected, rel=1e-12)


def test_in_unit_on_arrays_and_unknown_units():
    assert np.allclose(in_unit(np.array([1e6, 2.5e6]), "MW"), [1.0, 2.5])
    with pytest.raises(ValueError, match="unknown unit 'EB'"):
        in_unit(1.0, "EB")


def test_format_in_and_usd_in_millions():
    assert format_in(3.36e14, "PB") == "0.336 PB" and format_in(2.5e15, "PB", ",.1f") == "2.5 PB"
    assert format_in(1.2e6, "kW", ",.0f") == "1,200 kW"
    assert format_usd(250e3, smallest="M") == "$0.2M" and format_usd(70.6e6, smallest="M") == "$70.6M"
    with pytest.raises(ValueError):
        format_usd(1.0, smallest="k")


def _num(pattern, text):
    m = re.search(pattern, text)
    assert m, pattern
    return float(m.group(1).replace(",", ""))


@pytest.fixture(scope="module")
def plan_text():
    return run_cli("plan", "--no-collectives", check=True).stdout


def test_plan_storage_and_checkpoint_lines(plan_text):
    # the checkpoint is 14 bytes a parameter (mixed-precision Adam: 2 bf16 weights + 4 fp32 master + 8 fp32
    # moments; reliability.toml); printed in TB next to its parameter count
    ckpt_TB = _num(r"checkpoint ([\d.,]+) TB \(", plan_text)
    params = _num(r"TB \(([\d.e+]+) parameters[):]", plan_text)
    assert ckpt_TB == pytest.approx(params * 14 / 1e12, rel=0.01)
    # the storage line in PB and TB: needs = kept checkpoints + the dataset
    needs_PB = _num(r"needs ([\d.,]+) PB \(", plan_text)
    kept = _num(r"\((\d+) checkpoints of", plan_text)
    each_TB = _num(r"checkpoints of ([\d.,]+) TB", plan_text)
    data_PB = _num(r"dataset ([\d.,]+) PB", plan_text)
    assert each_TB == ckpt_TB
    assert needs_PB == pytest.approx(kept * each_TB / 1000 + data_PB, rel=0.005)


def test_plan_energy_co2_water_and_peak(plan_text):
    avg_MW = _num(r"facility average \(servers at [\d.]+% of nameplate, x PUE [\d.]+\)\s+([\d.,]+) MW", plan_text)
    TWh = _num(r"energy per year \(facility average\)\s+([\d.,]+) TWh", plan_text)
    assert TWh == pytest.approx(avg_MW * 8760 / 1e6, rel=0.001)  # a 365-day year of the average draw
    kg_per_kWh = _num(r"CO2 per year \(([\d.]+) kg/kWh\)", plan_text)
    Mt = _num(r"kg/kWh\)\s+([\d.,]+) Mt", plan_text)
    assert Mt == pytest.approx(TWh * kg_per_kWh, rel=0.002)  # 1 TWh = 1e9 kWh; 1e9 kg = 1 Mt
    pue, wue = _num(r"facility \(PUE ([\d.]+)", plan_text), _num(r"\(WUE ([\d.]+) L/kWh", plan_text)
    water = _num(r"L/kWh of IT energy\) \*?\s+([\d.,]+) million L", plan_text)
    assert water == pytest.approx(TWh / pue * 1e9 * wue / 1e6, rel=0.002)  # WUE on IT energy = facility / PUE
    # 100,352 H100 at 989 / 1,979 TFLOP/s dense bf16 / fp8 (NVIDIA H100 SXM datasheet)
    assert _num(r"peak bf16 ([\d.,]+) EFLOP/s", plan_text) == pytest.approx(100_352 * 989e12 / 1e18, abs=0.05)
    assert _num(r"fp8 ([\d.,]+) EFLOP/s", plan_text) == pytest.approx(100_352 * 1979e12 / 1e18, abs=0.05)
    # a rack's load of its limit, in kW: 4 DGX H100 at 10.2 kW each (NVIDIA DGX H100 datasheet)
    assert "(40.8 of 45 kW" in plan_text


def test_the_average_power_line_is_labelled_the_facilitys(plan_text):
    """The plan's average power is the facility's (the IT power at the servers' average draw x PUE,
    topo.plan.power.power_breakdown), and its label says so and names the PUE (walk42, findings 435 Left 4); the JSON
    key keeps its name, ``power.average_facility_power_W``."""
    import json
    d = json.loads(run_cli("plan", "--no-collectives", "--json", check=True).stdout)["power"]
    pue = _num(r"facility \(PUE ([\d.]+)", plan_text)
    m = re.search(r"^facility average \(servers at [\d.]+% of nameplate, x PUE ([\d.]+)\)\s+([\d.,]+) MW", plan_text, re.M)
    assert m and float(m.group(1)) == pue == d["pue"]
    assert float(m.group(2).replace(",", "")) == pytest.approx(d["average_it_power_W"] * pue / 1e6, abs=0.006)
    assert d["average_facility_power_W"] == pytest.approx(d["average_it_power_W"] * d["pue"], rel=1e-12)
    assert f"{m.group(2)} MW of facility power; the UPS" in plan_text  # the PUE note names it the same


def test_side_by_side_rows_use_the_same_units(plan_text):
    both = run_cli("plan", "h100-100k", "h100-100k-eth51t", "--no-collectives", check=True).stdout
    rows = {line.split("  ")[0]: line.split("  ")[-1].strip() for line in both.splitlines()}
    provides = _num(r"provides ([\d.,]+) PB", plan_text)
    assert re.search(rf"^storage capacity\s+{provides:g} PB\s", both, re.M)
    Mt = re.search(r"kg/kWh\)\s+([\d.,]+ Mt)", plan_text).group(1)
    assert re.search(rf"^CO2 per year\s+{re.escape(Mt)}\s", both, re.M), rows.get("CO2 per year")
