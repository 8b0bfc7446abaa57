"""A unit written into a plan value (``45kW`` where the key says ``_W``) is one line that names the key's unit: the
catalog's keys carry their unit in their name (common.md's standard), and a new user writes units as the spec's
bandwidths allow (round 2's walk)."""

import pytest

from conftest import run_cli


@pytest.mark.parametrize("setting,unit", [
    ("plan.floor.rack_power_W=45kW", "W"),
    ("plan.facility.capex_usd_per_W=$11", "USD per W"),
    ("plan.facility.electricity_usd_per_kWh=7.8c", "USD per kWh"),
    ("plan.switches.QM9700.price_usd=25k", "USD"),
])
def test_a_unit_written_into_a_plan_value_names_the_keys_unit(setting, unit):
    proc = run_cli("plan", "dgx-h100-superpod", "--no-collectives", "--set", setting)
    key, value = setting.split("=")
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert f"(--set {setting}): {key}: must be a number in {unit} (the unit its name ends with" in proc.stderr
    assert f"got {value!r}" in proc.stderr


def test_a_word_where_a_unitless_number_goes_keeps_the_plain_message():
    proc = run_cli("plan", "dgx-h100-superpod", "--no-collectives", "--set", "plan.floor.servers_per_rack=four")
    assert proc.returncode == 2 and "plan.floor.servers_per_rack: must be a number or a table" in proc.stderr
