"""Per-plan assumptions (only those a plan uses), placeholder marks, and --set overrides named by their --set
(issue 32)."""

from conftest import run_cli
from topo.plan import plan
from topo.plan.catalog import load_catalog


def test_a_plan_lists_only_the_assumptions_it_uses():
    # issue 32: every plan listed the whole catalog's 135 assumptions, 82 of 136 unused on the SuperPOD
    everything = load_catalog().assumptions()
    r = plan("dgx-h100-superpod", collectives=False)
    keys = {a["key"] for a in r.assumptions}
    assert len(keys) < len(everything) / 2
    assert not [k for k in keys if k.startswith("servers.HGX H100.")]  # a DGX H100 plan
    assert not [k for k in keys if k.startswith("switches.") and not k.startswith("switches.QM9700.")]
    # what it does use stays: its own server's price, its modules' price placeholders, the floor
    assert "transceivers.2x400G-SR8.price_usd" in keys and "floor.rack_width_m" in keys
    big = plan(collectives=False)
    assert "servers.HGX H100.nic_module_ports" in {a["key"] for a in big.assumptions}


def test_lines_resting_on_placeholders_are_marked():
    out = run_cli("plan", "dgx-h100-superpod", "--no-collectives", check=True).stdout
    line = next(x for x in out.splitlines() if x.startswith("at nic") and "2x400G-SR8" in x)
    assert line.endswith(" *")  # its price is a placeholder (transceivers.toml, status assumption)
    switch = next(x for x in out.splitlines() if x.startswith("leaf") and "QM9700" in x)
    assert not switch.endswith("*")  # FS.com's street price: secondary, not a placeholder
    assert "a figure marked * rests on a placeholder" in out


def test_a_set_override_is_attributed_to_the_set():
    # issue 32: an override given with --set was attributed to the spec file
    import topo

    spec = topo.load_spec("dgx-h100-superpod", ["plan.facility.pue=1.4"])
    r = plan(spec, collectives=False)
    row = next(a for a in r.assumptions if a["key"] == "facility.pue")
    assert row["status"] == "override" and "(--set plan.facility.pue=1.4)" in row["source"]
    assert r.power.pue == 1.4
