"""The planner's catalog: every value sourced, every price with a low and a high end (each sourced), overrides from a
spec, a plan file or an option, and bad values reported as one line with file and key."""

import tomllib

import pytest

import topo
from topo.errors import TopoError
from topo.plan import load_catalog, plan
from topo.plan.catalog import KINDS, catalog_dir
from conftest import run_cli, spec_dict


def _values(obj, prefix=""):
    if isinstance(obj, dict) and "value" in obj:
        yield prefix, obj
    elif isinstance(obj, dict):
        for k, v in obj.items():
            yield from _values(v, f"{prefix}.{k}" if prefix else k)


def test_every_catalog_value_has_a_source_and_a_status_and_every_price_a_sourced_range():
    n, prices = 0, set()
    for kind in KINDS:
        data = tomllib.loads((catalog_dir() / f"{kind}.toml").read_text())
        assert data.pop("version")
        for key, v in _values(data):
            n += 1
            assert set(v) == {"value", "source", "status"}, (kind, key)
            assert v["source"].strip(), (kind, key)
            assert v["status"] in ("published", "secondary", "derived", "assumption"), (kind, key)
            if kind != "price_ranges" and (key.endswith("_usd") or "_usd_" in key):
                prices.add(f"{kind}.{key}")
    assert n > 60
    rows = {r["key"]: r for r in load_catalog().prices()}
    assert set(rows) == prices and len(prices) > 40  # every price of every file has a range
    for key, r in rows.items():
        assert r["low"] <= r["expected"] <= r["high"], key
        for end in ("low", "high"):
            assert r[f"{end}_source"].strip() and r[f"{end}_status"], (key, end)
    # published where a published price or spread exists (issue 22): the build cost per MW, electricity by state
    for key in ("facility.capex_usd_per_W", "facility.electricity_usd_per_kWh"):
        assert rows[key]["low_status"] == rows[key]["high_status"] == "published", key
    assert rows["facility.capex_usd_per_W"]["expected_status"] == "published"


def test_overrides_replace_values_and_say_where_from():
    cat = load_catalog([("my.toml", {"facility": {"pue": 1.4}, "switches": {"QM9700": {"price_usd": 40000}}})])
    assert cat.facility.pue.value == 1.4
    assert cat.facility.pue.status == "override" and cat.facility.pue.source == "my.toml: plan.facility.pue"
    assert cat.switches["QM9700"].price_usd.value == 40000
    assert cat.switches["QM9700"].power_W.value == 747  # the rest of the item stays


def test_spec_plan_table_set_and_plan_file_override(tmp_path):
    base = topo.load_spec("dgx-h100-superpod", ["plan.facility.pue=1.5"])
    r = plan(base, collectives=False)
    assert r.power.pue == 1.5
    f = tmp_path / "p.toml"
    f.write_text("[facility]\npue = 1.1\n")
    assert plan(base, plan_file=f, collectives=False).power.pue == 1.1  # the plan file comes after the spec
    assert plan(base, plan_file=f, pue=1.2, collectives=False).power.pue == 1.2  # an option comes last


@pytest.mark.parametrize("layer, key, fragment", [
    ({"facility": {"pue": 0.9}}, "plan.facility.pue", "must be >= 1, got 0.9"),
    ({"switches": {"QM9700": {"price_usd": -5}}}, "plan.switches.QM9700.price_usd", "must be >= 0, got -5"),
    ({"facility": {"puee": 1.2}}, "plan.facility.puee", "unknown key 'puee'; allowed: pue, electricity_usd_per_kWh, "
     "load_factor, frontend_fraction, server_average_fraction, capex_usd_per_W, capex_basis, redundancy, ups_module_W, generator_W; "
     "did you mean 'pue'?"),
    # an unknown key in an item, a nested table or a value table says what is allowed there too
    ({"switches": {"QM9700": {"bogus": 1}}}, "plan.switches.QM9700.bogus",
     "unknown key 'bogus'; allowed: ports, port_rate_Gbps, ports_per_cage, power_W, power_with_optics_W, "
     "price_usd, rack_units"),
    ({"reliability": {"checkpoint": {"modee": "async"}}}, "plan.reliability.checkpoint.modee",
     "allowed: bytes_per_param, detection_s, restart_s, mode, "),
    ({"switches": {"QM9700": {"price_usd": {"value": 1, "source": "q", "status": "override", "date": 1}}}},
     "plan.switches.QM9700.price_usd.date", "unknown key 'date'; allowed: value, source, status"),
    ({"facilty": {}}, "plan.facilty", "did you mean 'facility'"),
    ({"switches": {"X1": {"ports": 8}}}, "plan.switches.X1.port_rate_Gbps", "required"),
    ({"workload": {"mfu": 1.5}}, "plan.workload.mfu", "must be <= 1"),
    ({"floor": {"short_reach": "fibre"}}, "plan.floor.short_reach", "must be one of transceivers, aoc, got 'fibre'"),
    ({"facility": {"pue": "high"}}, "plan.facility.pue", "must be a number or a table"),
])
def test_bad_override_is_one_error_with_origin_and_key(layer, key, fragment):
    with pytest.raises(TopoError) as e:
        load_catalog([("my.toml", layer)])
    assert e.value.source == "my.toml" and e.value.key == key and fragment in e.value.message


def test_bad_catalog_file_names_the_file(tmp_path):
    for kind in KINDS:
        (tmp_path / f"{kind}.toml").write_text((catalog_dir() / f"{kind}.toml").read_text())
    text = (tmp_path / "cooling.toml").read_text().replace("pue = { value = 1.58", "pue = { value = 0.8")
    (tmp_path / "cooling.toml").write_text(text)
    with pytest.raises(TopoError) as e:
        load_catalog(directory=tmp_path)
    assert e.value.source.endswith("cooling.toml") and e.value.key == "air.pue"


def test_cli_bad_input_is_one_line_with_file_and_key(tmp_path):
    p = run_cli("plan", "dgx-h100-superpod", "--set", "plan.switches.QM9700.price_usd=-1", "--no-collectives")
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr == ("error: topologies/dgx-h100-superpod.toml (--set plan.switches.QM9700.price_usd=-1):"
                        " plan.switches.QM9700.price_usd: must be >= 0, got -1\n")
    p = run_cli("plan", "dgx-h100-superpod", "--pue", "0.8", "--no-collectives")
    assert p.returncode == 2 and p.stderr == "error: --pue: plan.facility.pue: must be >= 1, got 0.8\n"


def test_cli_rack_that_cannot_hold_a_server(tmp_path):
    p = run_cli("plan", "dgx-h100-superpod", "--set", "plan.floor.rack_power_W=8000", "--no-collectives")
    assert p.returncode == 2
    assert p.stderr.count("\n") == 1
    assert "plan.floor.rack_power_W: a rack of 8,000 W cannot hold one server of 10,200 W" in p.stderr
    # the same limit met by the catalog's own value: the user's input is named, with the plan key to set, and the
    # catalog file the value came from (issue 23: the error pointed into the package's catalog file)
    d = spec_dict()
    for t in d["fabric"]["tiers"]:
        t["model"] = "QM9700"
    with pytest.raises(TopoError) as e:
        plan(topo.spec_from_dict(d), layers=[("x", {"servers": {"HGX H100": {"non_gpu_power_per_gpu_W": 5000}}})],
             collectives=False)
    assert e.value.key == "plan.floor.rack_power_W" and not e.value.source.endswith("floor.toml")
    assert "the catalog's value, from" in e.value.message and "floor.toml" in e.value.message
