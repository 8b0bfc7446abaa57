"""Planning a region (issue 31): the DCI bill per span from its sourced figures, the DCI's share of the cost per
GPU-hour, and a site over its own power limit."""

import csv
import io
import json
import math
import tomllib

import pytest

from conftest import ROOT, run_cli
from topo import TopoError
from topo.fabric.region import build_region
from topo.plan.dci import dci_bill, load_dci_catalog, span_bill
from topo.plan.region import plan_region

DATA = tomllib.loads((ROOT / "topo" / "data" / "dci" / "interconnect.toml").read_text())


def v(section, key):
    return DATA[section][key]["value"]


def test_every_dci_figure_has_a_source_and_a_status():
    for section in ("module", "amplifier", "fibre", "switch", "cage_power_W"):
        for key, x in DATA[section].items():
            assert x["source"] and x["status"] in ("published", "secondary", "fitted", "assumption"), key
    # amplified spans of ~80 km and 64 waves per fibre pair: multisite.md section 4 (secondary)
    assert v("amplifier", "spacing_km") == 80 and v("fibre", "waves_per_pair") == 64


def test_a_1000_km_span_of_16_waves():
    b = span_bill(load_dci_catalog(), "x", 1000.0, 16)
    huts = math.ceil(1000 / v("amplifier", "spacing_km")) - 1  # 12 in-line huts between the two ends
    assert (b.fibre_pairs, b.modules, b.amplifier_huts, b.amplifiers) == (1, 32, huts, huts + 2)
    assert b.power_W == pytest.approx(32 * v("module", "power_W") + (huts + 2) * v("amplifier", "per_pair_power_W")
                                      + huts * v("amplifier", "hut_power_W"))
    assert b.fibre_usd == pytest.approx(1000 * v("fibre", "price_per_pair_km_usd"))
    # 65 waves need a second fibre pair
    assert span_bill(load_dci_catalog(), "x", 50.0, 65).fibre_pairs == 2


def test_dci_cost_over_the_years_and_its_share_per_gpu_hour():
    r = plan_region(build_region("two-site-h100"), collectives=False)
    b = r.dci
    again = dci_bill([("s", 1000.0, 16)], years=r.years, network_life_years=5, electricity_usd_per_kWh=0.0)
    assert again.cost_over_years_usd == pytest.approx(again.equipment_usd * r.years / 5
                                                      + again.fibre_usd * r.years / 20)  # no energy at $0
    # past its life the DCI's equipment is bought again, as the sites' TCO charges (topo.plan.tco: years / life);
    # walk2: it was charged min(years, life) / life, once, while the sites' network was charged twice over 10 years
    ten = dci_bill([("s", 1000.0, 16)], years=10, network_life_years=5, electricity_usd_per_kWh=0.0)
    assert ten.cost_over_years_usd == pytest.approx(ten.equipment_usd * 2 + ten.fibre_usd * 10 / 20)
    assert r.dci_cost_per_gpu_hour_usd == pytest.approx(b.cost_over_years_usd / (r.num_gpus * r.years * 8760))
    assert r.dci_share_of_cost == pytest.approx(b.cost_over_years_usd / r.tco_usd)
    assert r.tco_usd == pytest.approx(sum(s.tco_usd for s in r.sites) + b.cost_over_years_usd)


def test_a_site_over_its_power_limit_is_a_one_line_error():
    region = build_region("region-1m", ["sites[0].power_limit_MW=100"])
    with pytest.raises(TopoError, match=r"site site-0 draws 1\d\d\.\d MW .*over its limit of 100 MW") as err:
        plan_region(region, collectives=False)
    assert err.value.key == "sites[0].power_limit_MW"
    bad = run_cli("plan", "region-1m", "--no-collectives", "--set", "sites[0].power_limit_MW=100")
    assert bad.returncode == 2 and len(bad.stderr.splitlines()) == 1


def test_cli_plan_region_json():
    doc = json.loads(run_cli("plan", "two-site-h100", "--no-collectives", "--json", check=True).stdout)
    assert len(doc["sites"]) == 2 and doc["dci"]["spans"][0]["name"] == "dci:east-west"
    assert 0 < doc["dci_share_of_cost"] < 1


def test_the_site_table_says_what_its_tco_is():
    """walk9: a site's TCO beside its capex read as a mistake (a GB200 site: capex $1.137B, TCO $1.134B over 5 years);
    the line under the table says it is the depreciation the years charge (a facility over 20 years) + the running
    costs, and per GPU-hour is TCO / GPU-hours (8,760 h a year), which the JSON's figures satisfy."""
    text = run_cli("plan", "two-site-h100", "--no-collectives", check=True).stdout
    assert ("TCO: over 5 years, the depreciation those years charge (each asset class over its own life, "
            "topo/data/catalog/economics.toml: the facility's is longer, so a TCO can be below the capex)") in text
    doc = json.loads(run_cli("plan", "two-site-h100", "--no-collectives", "--json", check=True).stdout)
    for site in doc["sites"]:
        hours = site["num_gpus"] * doc["years"] * 8760
        assert site["cost_per_gpu_hour_usd"] == pytest.approx(site["tco_usd"] / hours, rel=1e-9)


def test_a_span_beyond_a_zr_module_s_reach_is_said():
    """walk9: two-site-h100's 1,000 km span is billed as 800ZR-class pluggables (24 W, 64 per fibre pair) with 12
    amplifier huts, and nothing said that 800ZR is specified for 80-120 km (OIF 800ZR IA) and 400ZR for up to 120 km
    (multisite.md s.4, secondary): a note now names each span beyond ``module.reach_km``; a quote of the reach (a
    long-haul transponder's) lifts it."""
    assert v("module", "reach_km") == 120
    note = ("note: dci:east-west (1,000 km) is beyond a ZR module's 120 km single-span reach (module.reach_km in "
            "topo/data/dci/interconnect.toml: OIF 400ZR and 800ZR, with their sources)")

    def text(*args):
        return run_cli("plan", "two-site-h100", "--no-collectives", *args, check=True).stdout

    assert note in text()
    assert "reach" not in text("--set", "interconnect.distance_km=120")  # 120 km: within it
    assert "single-span reach" not in text("--set", "plan.dci.module.reach_km=1500")


def test_notes_cite_no_file_a_user_does_not_have():
    """walk16: two notes of ``topo plan REGION`` cited "multisite.md s.6" and "s.4", a notes file outside the
    repository and the wheel; the spec reference cited it for the fibre's 4.9 us/km. They now name the data file
    whose figures carry their sources (topo/data/dci/interconnect.toml) or the source itself."""
    out = run_cli("plan", "two-site-h100", "--no-collectives", check=True).stdout
    assert "multisite.md" not in out
    assert ("note: DCI prices were not found (no published price of a ZR module, amplifier, hut, mux or fibre pair): "
            "placeholders with status 'assumption' in topo/data/dci/interconnect.toml") in out
    reference = (ROOT / "docs" / "spec-reference.md").read_text()
    assert "multisite.md" not in reference


def test_one_big_site_beside_the_region():
    r = plan_region(build_region("two-site-h100"), one_site=True, collectives=False)
    o = r.one_site
    # 3,072 DGX H100 GPUs do not fit the SuperPOD's two tiers of 64-port switches (2,048 at most): a third tier
    assert o["num_gpus"] == r.num_gpus == 3072 and o["tiers"] == 3
    assert o["cost_per_gpu_hour_usd"] > 0 and o["facility_power_W"] > 0
    bad = run_cli("plan", "dgx-h100-superpod", "--one-site", "--no-collectives")
    assert bad.returncode == 2 and "--one-site: applies to a region" in bad.stderr


def test_a_quoted_dci_price_replaces_the_placeholder_in_the_bill():
    # --set plan.dci.module.price_usd: 2 x 16 modules on two-site-h100's one span, each 8,000 instead of the
    # placeholder; the bill's equipment moves by 32 x the difference and the figure says where it came from
    base = plan_region(build_region("two-site-h100"), collectives=False)
    quoted = plan_region(build_region("two-site-h100", ["plan.dci.module.price_usd=8000"]), collectives=False)
    assert quoted.dci.equipment_usd - base.dci.equipment_usd == pytest.approx(32 * (8000 - v("module", "price_usd")))
    value, source, status = quoted.dci.sources["module.price_usd"]
    assert value == 8000 and status == "override" and "--set plan.dci.module.price_usd=8000" in source
    assert any("module.price_usd = 8000" in n for n in quoted.notes)
    # a figure of another section, and the hut count it drives (1,000 km at 100 km spacing: 9 in-line huts)
    far = plan_region(build_region("two-site-h100", ["plan.dci.amplifier.spacing_km=100"]), collectives=False)
    assert far.dci.spans[0].amplifier_huts == 9 and base.dci.spans[0].amplifier_huts == 12


@pytest.mark.parametrize("setting, key, message", [
    ("plan.dci.module.prise_usd=1", "plan.dci.module.prise_usd", "no DCI figure 'prise_usd' in module; allowed: "
                                                                 "power_W, price_usd"),
    ("plan.dci.modules.price_usd=1", "plan.dci.modules", "no DCI section 'modules'; allowed: module, amplifier"),
    ("plan.dci.module.price_usd=-5", "plan.dci.module.price_usd", "must be >= 0, got -5"),
    ("plan.dci.fibre.waves_per_pair=0", "plan.dci.fibre.waves_per_pair", "must be > 0, got 0"),
])
def test_bad_dci_quotes_are_one_line_errors(setting, key, message):
    out = run_cli("plan", "two-site-h100", "--no-collectives", "--set", setting)
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "Traceback" not in out.stderr
    assert f"(--set {setting}): {key}: {message}" in out.stderr


def test_a_regions_bill_of_materials_as_csv(tmp_path):
    # tidy13: --bom-csv was refused for a region; it writes every site's lines (the single-site plan's columns) and
    # every DCI span's: 1,000 km of 16 waves (two-site-h100) is 2 x 16 coherent modules, ceil(1000 / 80) - 1 = 12
    # in-line huts, ceil(16 / 64) = 1 fibre pair with a mux at each end and 12 + 2 amplifiers, each at the sourced
    # figure of topo/data/dci/interconnect.toml
    p = run_cli("plan", "two-site-h100", "--no-collectives", "--bom-csv", "bom.csv", cwd=tmp_path, check=True)
    assert "wrote bom.csv" in p.stderr and p.stdout.startswith("two-site-h100:")
    text = (tmp_path / "bom.csv").read_text()
    assert text.startswith("design,kind,where,item,length_class,count,power_W_each,price_usd_each,price_usd,length_m,"
                           "written_by\n")
    rows = list(csv.DictReader(io.StringIO(text)))
    assert all(x["written_by"].startswith("written by topo") for x in rows)
    r = plan_region(build_region("two-site-h100"), collectives=False)
    for site, sp in zip(("east", "west"), r.site_plans):
        mine = [x for x in rows if x["design"] == site]
        assert sum(int(x["count"]) for x in mine if x["kind"] == "switch") == sp.bom.num_switches
        assert sum(float(x["price_usd"]) for x in mine) == pytest.approx(
            sum(sp.capex.parts()[k] for k in ("switches", "optics", "cables")), rel=1e-6)
    every = [x for x in rows if x["kind"] == "dci"]
    dci = {x["item"]: x for x in every if x["where"].startswith("dci:")}
    assert {k: int(x["count"]) for k, x in dci.items()} == {"coherent module": 32, "line amplifier": 14,
                                                            "amplifier hut": 12, "mux": 2, "fibre pair": 1}
    # each site's DCI switch for its 16 waves and its 32 links onto the spine (tests/test_region_dci_ports.py)
    ports = sorted((x["where"], x["item"], int(x["count"])) for x in every if not x["where"].startswith("dci:"))
    assert ports == [(f"{s}:spine", item, n) for s in ("east", "west") for item, n in
                     (("2x400G-SR8 (border switch to spine)", 32), ("DCI border switch (DCI switch, 64 x 800G)", 1))]
    assert float(dci["coherent module"]["price_usd_each"]) == v("module", "price_usd")
    assert float(dci["fibre pair"]["price_usd"]) == pytest.approx(1000 * v("fibre", "price_per_pair_km_usd"))
    assert dci["fibre pair"]["length_m"] == "1000000.0" and dci["fibre pair"]["where"] == "dci:east-west"
    assert sum(float(x["price_usd"]) for x in every) == pytest.approx(r.dci.equipment_usd + r.dci.fibre_usd)
    assert sum(int(x["count"]) * float(x["power_W_each"]) for x in every) == pytest.approx(r.dci.power_W)
    p = run_cli("plan", "two-site-h100", "--no-collectives", "--bom-csv", "-", cwd=tmp_path, check=True)
    assert p.stdout == text  # '-': the CSV alone on stdout


def test_a_regions_csv_never_over_an_input_nor_partial(tmp_path):
    region = (ROOT / "topologies" / "two-site-h100.toml").read_text().replace('spec = "dgx-h100-superpod"',
                                                                              'spec = "site.toml"')
    (tmp_path / "r.toml").write_text(region)
    (tmp_path / "site.toml").write_text((ROOT / "topologies" / "dgx-h100-superpod.toml").read_text())
    for target in ("r.toml", "site.toml"):  # the region file, and its sites' spec beside it
        p = run_cli("plan", "r.toml", "--no-collectives", "--bom-csv", target, "--force", cwd=tmp_path)
        assert p.returncode == 2 and "is an input" in p.stderr and len(p.stderr.splitlines()) == 1, p.stderr
    assert (tmp_path / "r.toml").read_text() == region
    (tmp_path / "mine.csv").write_text("keep me\n")
    p = run_cli("plan", "r.toml", "--no-collectives", "--bom-csv", "mine.csv", cwd=tmp_path)
    assert p.returncode == 2 and "was not written by topo" in p.stderr
    assert (tmp_path / "mine.csv").read_text() == "keep me\n"
    p = run_cli("plan", "r.toml", "--pue", "0.8", "--bom-csv", "bom.csv", cwd=tmp_path)  # the plan fails: no file
    assert p.returncode == 2 and not (tmp_path / "bom.csv").exists()
    p = run_cli("plan", "r.toml", "--json", "--bom-csv", "-", cwd=tmp_path)
    assert p.returncode == 2 and "--json and --bom-csv - both print on stdout" in p.stderr


@pytest.mark.parametrize("flags, key", [(["--layout", "tp=8,pp=8"], "--layout"),
                                        (["--model", "llama3-70b"], "--model")])
def test_a_regions_plan_says_a_job_needs_its_model_and_layout(flags, key):
    # tidy13, then plan79: a region's plan times a job across its sites (data parallel across them, the layout its
    # goodput's reload assumes) with both --model and --layout; one alone is one line naming what it lacks
    p = run_cli("plan", "two-site-h100", "--no-collectives", *flags)
    assert p.returncode == 2 and len(p.stderr.splitlines()) == 1 and p.stdout == ""
    assert p.stderr.startswith(f"error: {key}: times a job across the region's sites, which needs its model and its "
                               "layout"), p.stderr
    assert f"allowed: {key} with --{'model M' if key == '--layout' else 'layout L'}" in p.stderr


def test_describe_and_plan_count_a_tiers_idle_ports_in_one_place():
    """The idle ports describe shows and those the plan gives the DCI are one formula (TierPlan.idle_ports: radix
    less the ports used down and up, every switch): two-site-h100's 6-unit sites have 32 spines of 64 ports, 48 used
    down: 32 x 16 = 512 idle (walk12's figure); at 4 units the 16 spines' 64 ports are all used."""
    from topo.fabric.inventory import inventory

    for overrides, idle in (((), 512), (['sites[0].set=["cluster.num_units=4"]'], 0)):
        r = build_region("two-site-h100", list(overrides))
        spine = r.fabrics[0].layout.tiers[int(r.attach_tier[0])]
        assert spine.idle_ports == idle == (spine.radix - spine.down_ports - spine.up_ports) * spine.num_switches
        assert inventory(r.fabrics[0]).tiers[spine.index].ports_idle == idle
        assert plan_region(r, collectives=False).dci.site_ports[0]["ports_idle"] == idle


def test_one_site_that_cannot_be_built_says_what_the_region_can_set(tmp_path):
    """walk16 (section 178): `plan my-three-sites.toml --one-site` (README's region: 2 + 4 + 4 units) said "set
    fabric.units_per_pod", which no flag of a region plan reaches. The line now says the one site is the first
    site's design and how the region reaches its keys (its spec, or sites[0].set, whose own overrides the example
    keeps); that example, with fabric.units_per_pod=2 for KEY=VALUE, builds it (10 units in pods of 2)."""
    region = tmp_path / "my-three-sites.toml"
    region.write_text('name = "my-three-sites"\n'
                      '[[sites]]\nname = "east"\nspec = "dgx-h100-superpod"\nset = ["cluster.num_units=2"]\n'
                      '[[sites]]\nname = "west"\nspec = "dgx-h100-superpod"\n'
                      '[[sites]]\nname = "north"\nspec = "dgx-h100-superpod"\n'
                      '[interconnect]\ntopology = "ring"\ndistance_km = 100\nwaves = 16\n')
    out = run_cli("plan", str(region), "--one-site", "--no-collectives", check=True).stdout
    lines = out.splitlines()
    k = next(i for i, ln in enumerate(lines) if ln.startswith("as one site"))
    assert "10 scalable units do not fill whole pods of 4" in lines[k]
    assert ("the one site is the first site's design (east: 'dgx-h100-superpod') with all 2,560 GPUs: a fabric key "
            "it names is set in that spec or in the region's sites[0].set list") in lines[k + 1]
    example = "sites[0].set=[\"cluster.num_units=2\", \"KEY=VALUE\"]"
    assert f"e.g. --set '{example}'" in lines[k + 1]
    fixed = run_cli("plan", str(region), "--one-site", "--no-collectives", "--set",
                    example.replace("KEY=VALUE", "fabric.units_per_pod=2"), check=True).stdout
    assert "as one site                  2,560 GPUs in 3 tiers" in fixed
