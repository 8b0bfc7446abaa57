"""Planning Blackwell and 800G clusters from the bundled catalog, and errors that point at the user's input
(issue 23)."""

from __future__ import annotations

import pytest

from conftest import run_cli, spec_dict, tier
from topo.errors import TopoError
from topo.plan import load_catalog, plan
from topo.spec import spec_from_dict


def b200_800g(model="Q3400", radix=144, technology="infiniband_xdr") -> dict:
    """1,024 B200 in 128 HGX B200 servers with eight 800G NICs, two tiers of 800G switches."""
    return spec_dict(name="b200-800g", gpu="B200", server={"nics": 8, "nic_rate": "800 Gb/s"},
                     cluster={"num_units": 4},
                     fabric={"kind": "rail_optimized", "technology": technology, "servers_per_unit": 32,
                             "tiers": [tier("leaf", radix, "800 Gb/s", oversubscription=1, model=model),
                                       tier("spine", radix, "800 Gb/s", model=model)]})


def test_the_catalog_holds_blackwell_800g_and_1600g_parts_with_sources():
    cat = load_catalog()
    for name in ("B200", "GB300"):
        assert name in cat.gpus
    assert cat.server_for("B200")[0] == "HGX B200" and cat.server_for("GB300")[0] == "GB300 NVL72 compute tray"
    assert {"Q3400", "SN5600 (64 x 800G)"} <= set(cat.switches)
    rates = {(t.rate_Gbps.value, int(t.ports.value)) for t in cat.transceivers.values()}
    assert {(800.0, 1), (800.0, 2), (1600.0, 1)} <= rates  # 800G at a NIC, 1.6T twin-port at a switch, 1.6T port
    for kind in ("gpus", "servers", "switches", "transceivers"):
        for name, item in getattr(cat, kind).items():
            for key, v in item.model_dump().items():
                if isinstance(v, dict) and "value" in v:
                    assert v["source"].strip() and v["status"], (kind, name, key)


def test_a_b200_800g_infiniband_spec_plans_without_editing_the_catalog():
    r = plan(spec_from_dict(b200_800g()), collectives=False)
    assert r.gpu == "B200" and r.server_model == "HGX B200"
    switches = {(s.tier, s.model): s.count for s in r.bom.switches}
    assert switches == {("leaf", "Q3400"): 32, ("spine", "Q3400"): 8}  # 1,024 NICs / 32 down ports per leaf...
    at = {t.at: t.type for t in r.bom.transceivers}
    assert at["nic"].startswith("800G-") and at["leaf"].startswith("2x800G-")
    # 14.3 kW servers do not fit the default 45 kW rack four at a time: as many as fit, said in a note
    assert r.floor.servers_per_rack == 3
    assert any("3 HGX B200 servers of 14,300 W per rack" in n for n in r.notes)
    assert r.power.it_power_W > 1024 * 1000  # the GPUs alone draw 1 MW


def test_a_b200_spectrum_x_800g_ethernet_spec_plans():
    r = plan(spec_from_dict(b200_800g("SN5600 (64 x 800G)", 64, "roce")), collectives=False)
    assert {s.model for s in r.bom.switches} == {"SN5600 (64 x 800G)"}
    assert all(t.type.startswith("800G-") for t in r.bom.transceivers)  # one 800G port per cage, switch side too


def test_a_gb300_nvl72_spec_plans_as_racks_of_trays():
    proc = run_cli("plan", "gb200-nvl72-superpod", "--set", "gpu=GB300", "--no-collectives", "--json", check=True)
    import json

    doc = json.loads(proc.stdout)
    assert doc["gpu"] == "GB300" and doc["server_model"] == "GB300 NVL72 compute tray"
    assert doc["floor"]["servers_per_rack"] == 18


def test_a_gpu_missing_from_the_catalog_is_not_called_a_typo_of_another_product():
    cat = load_catalog()
    without = cat.model_copy(update={"gpus": {k: v for k, v in cat.gpus.items() if k != "B200"}})
    with pytest.raises(TopoError) as exc:
        without.gpu("B200")
    assert "did you mean" not in exc.value.message and "add it under plan.gpus" in exc.value.message
    with pytest.raises(TopoError, match="did you mean 'H100'"):
        cat.gpu("H10")  # a typo still gets its hint


def test_an_error_about_a_catalog_default_points_at_the_users_input(tmp_path):
    """A B200 too hot for the default rack: the error names the user's spec and the plan key to set, not a file
    inside the package."""
    spec = tmp_path / "b200.toml"
    spec.write_text(_toml(b200_800g()))
    p = run_cli("plan", "b200.toml", "--set", "plan.gpus.B200.tdp_W=100000", "--no-collectives", cwd=tmp_path)
    assert p.returncode == 2 and p.stderr.count("\n") == 1, p.stderr
    assert p.stderr.startswith("error: b200.toml: plan.floor.rack_power_W: a rack of 45,000 W cannot hold one server "
                               "of 806,300 W"), p.stderr
    assert "topo/data/catalog" not in p.stderr.split("(the catalog's value")[0]
    assert "set plan.floor.rack_power_W to change it" in p.stderr


def _toml(d: dict, prefix: str = "") -> str:
    """A spec dict as TOML (tables and arrays of tables; enough for the specs here)."""
    import json

    lines, tables = [], []
    for k, v in d.items():
        if isinstance(v, dict):
            tables.append((k, v))
        elif isinstance(v, list) and v and isinstance(v[0], dict):
            tables.append((k, v))
        else:
            lines.append(f"{k} = {json.dumps(v)}")
    out = "\n".join(lines) + "\n"
    for k, v in tables:
        name = f"{prefix}{k}"
        if isinstance(v, list):
            for item in v:
                out += f"[[{name}]]\n" + _toml(item, name + ".")
        else:
            out += f"[{name}]\n" + _toml(v, name + ".")
    return out
