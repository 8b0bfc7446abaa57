"""The DCI's switch ports in ``topo plan REGION`` (topo/plan/dci_ports.py): a coherent pluggable a wave, each in a
cage of at least the wave's rate on an Ethernet switch that powers it; border switches where the attach tier cannot
host them or the DCI attaches through border leaves. Port counts by hand against the module doc's closed forms.

Figures: two-site-h100 is 16 waves x 800 Gb/s a span (100 GB/s a wave), DGX H100 sites of 6 units (32 spines x 64
ports of 400 Gb/s = 50 GB/s, 512 idle: walk12), InfiniBand NDR. NVIDIA's SN5600 powers 18 W a cage (NVIDIA SN5000
docs, 'Data Interfaces'), its cage 2 x 400G; the DCI catalog's coherent module draws 24 W (800ZR's '20-24W').
"""

import math
import tomllib

import pytest

from conftest import ROOT, run_cli
from topo.fabric.region import build_region
from topo.plan.region import plan_region

DCI = tomllib.loads((ROOT / "topo" / "data" / "dci" / "interconnect.toml").read_text())
ROCE_SN5600 = 'sites[{i}].set=["cluster.num_units={u}","fabric.technology=\\"roce\\"","fabric.tiers[leaf].model=' \
              '\\"SN5600\\"","fabric.tiers[spine].model=\\"SN5600\\""]'


def _plan(*sets):
    return plan_region(build_region("two-site-h100", list(sets)), collectives=False)


def _module(p, site=0, tier="spine"):
    return next(m for m in p.site_plans[site].bom.transceivers if m.at == tier)


def _spans_usd(p):
    return sum(b.equipment_usd for b in p.dci.spans)


def test_infiniband_spines_host_no_coherent_pluggable_a_dci_switch_does():
    """QM9700 spines are InfiniBand; a ZR module carries an Ethernet client. Each site: 16 waves on 16 ports of the
    DCI switch (64 x 800G), 1.6 TB/s down on ceil(1.6e12 / 100e9) = 16 more, ceil(32 / 64) = 1 switch; its links
    land on 1.6e12 / 50e9 = 32 spine ports (of 512 idle), a twin-port 2 x 400G module serving two link ends, so
    2 x ceil(32 / 2) = 32 modules."""
    p = _plan()
    sw = DCI["switch"]
    for s in p.dci.site_ports:
        assert (s["waves"], s["hosted_at"], s["border_up_ports"], s["border_down_ports"]) == (16, "border", 16, 16)
        assert (s["border_switches"], s["ports_needed"], s["ports_idle"], s["ports_missing"]) == (1, 32, 512, 0)
        assert "InfiniBand" in s["why_border"]
    mod = _module(p)
    each_usd = sw["price_usd"]["value"] + 32 * mod.price_usd_each
    assert p.dci.equipment_usd == pytest.approx(_spans_usd(p) + 2 * each_usd)
    each_W = sw["power_W"]["value"] + 32 * mod.power_W_each
    assert p.dci.power_W == pytest.approx(sum(b.power_W for b in p.dci.spans) + 2 * each_W)
    assert sum("its 16 coherent pluggables (one a wave) sit on border switches, not its spine" in n
               and "InfiniBand" in n for n in p.notes) == 2


def test_the_ports_follow_the_waves_not_the_capacity_over_the_tiers_rate():
    """rev49's point: ceil(1.6 TB/s / 400 Gb/s) = 32 ports was the capacity at the spine's rate; a pluggable a wave
    takes one port of its own rate. At 32 waves of 400 Gb/s (the same 1.6 TB/s) the DCI switch takes 32 ports up
    (a 400G wave in an 800G port), 16 down: still 1 switch; at 8 waves of 1.6 Tb/s, 2 ports a wave = 16 up."""
    a = _plan("interconnect.waves=32", 'interconnect.wave_rate="400 Gb/s"').dci.site_ports[0]
    assert (a["border_up_ports"], a["border_down_ports"], a["border_switches"]) == (32, 16, 1)
    b = _plan("interconnect.waves=8", 'interconnect.wave_rate="1600 Gb/s"').dci.site_ports[0]
    assert (b["border_up_ports"], b["border_down_ports"], b["border_switches"]) == (16, 16, 1)
    assert b["notes"] == ["a wave of 1600 Gb/s is faster than a DCI switch, 64 x 800G cage (800 Gb/s): counted as 2 "
                          "cages a wave; quote a switch with cages of the wave's rate (plan.dci.switch.port_rate_Gbps)"]
    c = _plan("interconnect.waves=64").dci.site_ports[0]  # 64 up + 64 down = 128 ports: 2 switches
    assert (c["border_up_ports"], c["border_down_ports"], c["border_switches"], c["ports_needed"]) == (64, 64, 2, 128)


def test_an_ethernet_spine_whose_cage_powers_18_w_cannot_host_a_24_w_module():
    """SN5600's cage (2 x 400G = 800G, fast enough) powers 18 W (NVIDIA SN5000 docs), below the module's 24 W: the
    waves go to the DCI switch, and the note says why. A 15 W module (400ZR's '15W specified', multisite.md s.4)
    fits: the spine hosts the waves, a cage (2 ports) each: 16 x 2 = 32 of its 512 idle ports, nothing added."""
    hot = _plan(ROCE_SN5600.format(i=0, u=6)).dci.site_ports[0]
    assert hot["hosted_at"] == "border" and "18 W" in hot["why_border"] and "24 W" in hot["why_border"]
    cool = _plan(ROCE_SN5600.format(i=0, u=6), "plan.dci.module.power_W=15")
    east = cool.dci.site_ports[0]
    assert (east["hosted_at"], east["ports_needed"], east["ports_idle"], east["border_switches"]) == (
        "spine", 32, 512, 0)
    assert east["items"] == [] and not any(n.startswith("site east") for n in cool.notes)
    # 32 waves of 400 Gb/s, the same 1.6 TB/s: a 400ZR module still fills a whole 2 x 400G cage, 32 x 2 = 64 ports
    # (not 1.6 TB/s / 400 Gb/s = 32)
    slow = _plan(ROCE_SN5600.format(i=0, u=6), "plan.dci.module.power_W=15", "interconnect.waves=32",
                 'interconnect.wave_rate="400 Gb/s"').dci.site_ports[0]
    assert (slow["hosted_at"], slow["waves"], slow["ports_needed"]) == ("spine", 32, 64)


def test_a_full_ethernet_spine_grows_by_switches_of_its_model_for_the_missing_cages():
    """4 units fill the 16 spines x 64 ports: the 32 ports the 16 pluggables need (a 2 x 400G cage each) are all
    missing. The top tier grows (plan59; walk22's leftover: a border switch of the spine's model, half its ports
    into the site, landed those links on spine ports that were not there, unpriced): ceil(32 / 64) = 1 more SN5600
    in the spine, the pluggables in its cages, the links from the leaves spread over 17 spines (16 x 64 = 1,024
    leaf uplinks + 32 DCI ports <= 17 x 64 = 1,088), priced and powered as the site's bill prices a spine."""
    p = _plan(ROCE_SN5600.format(i=0, u=4), "plan.dci.module.power_W=15")
    east = p.dci.site_ports[0]
    assert (east["hosted_at"], east["ports_needed"], east["ports_idle"], east["ports_missing"]) == ("spine", 32, 0, 32)
    assert (east["tier_added"], east["border_switches"]) == (1, 0)
    sw = next(s for s in p.site_plans[0].bom.switches if s.tier == "spine")
    assert [(i["count"], i["power_W_each"], i["price_usd_each"]) for i in east["items"]] == [
        (1, sw.power_W_each, sw.price_usd_each)]
    assert any(n.startswith("site east: its 16 coherent pluggables take 32 spine ports") and "the spine has 0 idle, "
               "32 short: the DCI's bill adds 1 spine switch of the site's model (SN5600" in n for n in p.notes)


def test_border_leaves_are_priced_from_the_spec_s_leaf_and_the_oversubscription():
    """attach = "border" with SN5600 leaves hosting the waves (15 W modules): a wave takes a cage (2 ports) up,
    16 x 2 = 32; at 2:1 oversubscription 1.6 / 2 = 0.8 TB/s goes down on 0.8e12 / 50e9 = 16 leaf ports: 48 ports,
    ceil(48 / 64) = 1 border leaf of the leaf's model, priced from the site's bill; 16 spine ports, modules
    2 x ceil(16 / 2) = 16. The InfiniBand site west gets the DCI switch: 16 up, ceil(0.8e12 / 100e9) = 8 down."""
    p = _plan(ROCE_SN5600.format(i=0, u=6), "plan.dci.module.power_W=15", 'interconnect.attach="border"',
              "interconnect.border_oversubscription=2")
    east, west = p.dci.site_ports
    assert (east["hosted_at"], east["border_model"], east["border_up_ports"], east["border_down_ports"]) == (
        "border", "SN5600", 32, 16)
    assert (east["border_switches"], east["ports_needed"], east["why_border"]) == (1, 16, "")
    leaf = next(s for s in p.site_plans[0].bom.switches if s.tier == "leaf")
    mod = _module(p)
    assert [(i["count"], i["price_usd_each"]) for i in east["items"]] == [
        (1, leaf.price_usd_each), (2 * math.ceil(16 / (mod.links // mod.count)), mod.price_usd_each)]
    assert (west["border_model"], west["border_up_ports"], west["border_down_ports"], west["ports_needed"]) == (
        "DCI switch, 64 x 800G", 16, 8, 16)
    assert any("sit on border switches (attach = border)" in n for n in p.notes)


def test_border_links_a_full_top_tier_cannot_take_grow_it_priced():
    """4 units leave no idle spine port (16 QM9700 x 64 ports, all to the leaves): the DCI switch's 1.6 TB/s / 50
    GB/s = 32 links find none. walk22 found them said, "not priced"; the spine now grows by ceil(32 / 64) = 1
    QM9700 at the site's bill's price and power, in the DCI's equipment and power (hand count below)."""
    p = _plan('sites[0].set=["cluster.num_units=4"]')
    east, west = p.dci.site_ports
    assert (east["ports_needed"], east["ports_idle"], east["ports_missing"], east["tier_added"]) == (32, 0, 32, 1)
    assert west["tier_added"] == 0 and west["ports_missing"] == 0
    spine = next(s for s in p.site_plans[0].bom.switches if s.tier == "spine")
    grown = east["items"][-1]
    assert (grown["count"], grown["power_W_each"], grown["price_usd_each"]) == (
        1, spine.power_W_each, spine.price_usd_each)
    # the DCI's bill: the spans', a DCI switch and 32 modules at each site, and the one spine added at east
    sw, mod = DCI["switch"], _module(p)
    assert p.dci.equipment_usd == pytest.approx(_spans_usd(p) + 2 * (sw["price_usd"]["value"] + 32 * mod.price_usd_each)
                                                + spine.price_usd_each)
    assert p.dci.power_W == pytest.approx(sum(b.power_W for b in p.dci.spans)
                                          + 2 * (sw["power_W"]["value"] + 32 * mod.power_W_each) + spine.power_W_each)
    assert any(n.startswith("site east:") and "the spine has 0 idle, 32 short: the DCI's bill adds 1 spine switch "
               "of the site's model (QM9700" in n for n in p.notes)
    assert not any("not priced" in n for n in p.notes)


def test_a_full_tier_below_the_top_is_refused_naming_the_site_and_the_key():
    """A tier below the top has up ports: it cannot grow for the DCI without ports above it. The DCI attached at
    east's leaves (4 units: 32 down + 32 up of each QM9700's 64, none idle): one line naming the site and
    interconnect.attach_tier."""
    from topo.errors import TopoError
    with pytest.raises(TopoError) as err:
        _plan('sites[0].set=["cluster.num_units=4"]', 'interconnect.attach_tier="leaf"')
    assert err.value.key == "interconnect.attach_tier" and err.value.message.startswith("site east: the DCI needs")
    assert "\n" not in err.value.message


def test_the_dci_switch_is_a_quotable_figure():
    p = run_cli("plan", "two-site-h100", "--no-collectives", "--set", "plan.dci.switch.price_usd=80000", "--json")
    assert p.returncode == 0, p.stderr
    import json
    d = json.loads(p.stdout)
    assert d["dci"]["site_ports"][0]["items"][0]["price_usd_each"] == 80000
    assert d["dci"]["sources"]["switch.price_usd"][2] == "override"
    bad = run_cli("plan", "two-site-h100", "--no-collectives", "--set", "plan.dci.switch.radix=64")
    assert bad.returncode == 2 and len(bad.stderr.splitlines()) == 1
    assert "no DCI figure 'radix' in switch; allowed: port_rate_Gbps, ports, ports_per_cage, power_W, price_usd" in bad.stderr


def test_the_dci_switch_s_ports_per_cage_come_from_its_data():
    """small50: the DCI switch's cage was taken as one port (``ppc = 1`` in code). Its data now says so, sourced
    (NVIDIA SN5000 docs: SN5600 64 x 800GbE, one port an OSFP cage), and a quote is read: 32 waves of 400 Gb/s on a
    switch quoted as 128 x 400G in twin-port cages (2 x 400G a cage) take one cage, 2 ports, a wave: 64 up, and
    ceil(1.6 TB/s / 50 GB/s) = 32 down, ceil(96 / 128) = 1 switch (one port a cage would count 32 up)."""
    assert DCI["switch"]["ports_per_cage"]["value"] == 1 and DCI["switch"]["ports_per_cage"]["status"] == "published"
    quote = ["interconnect.waves=32", 'interconnect.wave_rate="400 Gb/s"', "plan.dci.switch.port_rate_Gbps=400",
             "plan.dci.switch.ports=128"]
    one = _plan(*quote).dci.site_ports[0]
    twin = _plan(*quote, "plan.dci.switch.ports_per_cage=2").dci.site_ports[0]
    assert (one["border_up_ports"], one["border_down_ports"], one["border_switches"]) == (32, 32, 1)
    assert (twin["border_up_ports"], twin["border_down_ports"], twin["border_switches"]) == (64, 32, 1)


def test_a_switch_line_without_ports_per_cage_is_refused_not_taken_as_one():
    """rev51 (section 156): ``_ppc`` gave 1 port a cage for a model the default catalog lacks, silently. The bill's
    switch line now carries its catalog model's ``ports_per_cage`` (the spec's own models included); a line without
    one (a rack-scale system's NVLink trays) is refused in one line naming the model."""
    from topo.errors import TopoError
    from topo.plan.bom import SwitchLine
    from topo.plan.dci_ports import _ppc
    assert _ppc(SwitchLine("spine", "X", 4, 4, 1000.0, 1.0, 4)) == 4
    with pytest.raises(TopoError) as err:
        _ppc(SwitchLine("scale-up (in rack)", "NVLink tray", 9, 9, 1000.0, 1.0))
    assert "'NVLink tray'" in err.value.message and "ports_per_cage" in err.value.message
    p = _plan(ROCE_SN5600.format(i=0, u=6))
    assert {s.model: s.ports_per_cage for s in p.site_plans[0].bom.switches if s.model == "SN5600"} == {"SN5600": 2}
