"""`topo plan` runs the library: its --json is the result's to_dict, several specs compare side by side."""

import json

import pytest

from topo.cli.output import _clean
from topo.plan import plan
from conftest import run_cli

REQUIRED = ("it_power_W", "facility_power_W", "energy_per_year_Wh", "energy_cost_per_year_usd", "capex_usd",
            "network_capex_usd", "transceivers", "peak_flop_per_s", "goodput")


def test_json_equals_the_library_result():
    p = run_cli("plan", "dgx-h100-superpod", "--no-collectives", "--mfu", "0.4", "--json", check=True)
    doc = json.loads(p.stdout)
    r = plan("dgx-h100-superpod", layers=[("--mfu", {"workload": {"mfu": 0.4}})], collectives=False)
    lib = json.loads(json.dumps(_clean(r.to_dict())))
    assert doc == lib
    for k in REQUIRED:
        assert k in doc
    assert doc["compute"]["mfu"] == 0.4


def test_default_plan_text_and_collectives():
    p = run_cli("plan", check=True)
    assert "h100-100k: 100,352 x H100" in p.stdout and "goodput" in p.stdout
    assert "across the core (56 pods of 1,792 GPUs): 1 GiB all_reduce, 100,352 GPUs" in p.stdout


def test_three_bundled_100k_designs_side_by_side():
    p = run_cli("plan", "h100-100k", "h100-100k-4tier", "h100-100k-eth51t", "--json", check=True)
    designs = json.loads(p.stdout)["designs"]
    assert [d["name"] for d in designs] == ["h100-100k", "h100-100k-4tier", "h100-100k-eth51t"]
    # like-for-like ~100k: the true 4-tier design has the islands design's 98,304 GPUs (the two others 100,352)
    assert [d["num_gpus"] for d in designs] == [100_352, 98_304, 100_352]
    ar = [d["network"]["all_reduce_s"] for d in designs]
    bis = [d["network"]["bisection_bandwidth_per_gpu_Bps"] for d in designs]
    # 7:1 above the pods: a seventh of the others' bisection per GPU, and the slowest cross-pod all-reduce
    assert bis[0] == pytest.approx(bis[1] / 7) and bis[1] == bis[2]
    assert ar[0] > 3 * max(ar[1:])
    # non-blocking at 100k costs optics: 4 tiers need the most transceivers and network capex
    tx = [d["transceivers"] for d in designs]
    assert tx[1] == max(tx) and designs[1]["network_capex_usd"] == max(d["network_capex_usd"] for d in designs)
    for d in designs:
        assert d["assumptions"] and d["catalog_versions"]
    p = run_cli("plan", "h100-100k", "h100-100k-eth51t", "--no-collectives", check=True)
    assert "network capex" in p.stdout and "h100-100k-eth51t" in p.stdout.splitlines()[0]
    # the new lines sit in the side-by-side table too (issue 22), one value per design
    rows = {line.split("  ")[0]: line for line in p.stdout.splitlines()}
    for label in ("floor area", "cooling", "longest link", "NIC-side optical modules",
                  "first job-stopping optics failure (both ends)", "first NIC-side optics failure",
                  "storage and front-end capex", "TCO", "cost per GPU-hour",
                  "CO2 per year", "interruptions per day"):
        assert label in rows, label
    assert rows["cooling"].split()[1:] == ["rear", "door", "rear", "door"]  # both: 40.8 kW racks


def test_model_needs_a_layout():
    p = run_cli("plan", "--model", "llama3-405b")
    assert p.returncode == 2 and p.stderr.startswith("error: --model: give both a model and a layout")


def test_comparison_frame_has_one_column_per_design():
    from topo.plan import compare_designs

    c = compare_designs(["dgx-h100-superpod", "rail-only-h100-16k"], collectives=False)
    f = c.to_frame()
    assert list(f.columns) == ["dgx-h100-superpod", "rail-only-h100-16k"]
    assert f.loc["transceivers", "dgx-h100-superpod"] == c.plans[0].bom.num_transceivers
    assert c.plans[1].to_frame().loc[0, "capex_usd"] == c.plans[1].capex.capex_usd


def test_side_by_side_has_switches_per_tier_transceivers_per_type_and_what_binds():
    """Issue 19 asks `topo plan` to compare the ~100k designs side by side with their switches per tier and
    transceivers per type, and to show where each one's top-tier collectives bind; the table had only the totals
    and the times. Each breakdown sums to its total; a tier a design lacks is "-"."""
    from topo.cli.plan import render_comparison

    small = plan("dgx-h100-superpod", collectives=False)
    islands = plan("h100-100k-islands")
    rows = {}
    for line in render_comparison([small, islands]).splitlines()[1:]:
        label, *cells = [c for c in line.split("  ") if c]
        rows.setdefault(label.strip(), []).append([c.strip() for c in cells])
    assert rows["leaf"] == [["32 QM9700", "3,072 QM9700"]] and rows["spine"] == [["16 QM9700", "3,072 QM9700"]]
    assert rows["core"] == [["-", "2,048 QM9700"]] and rows["super-spine"] == [["-", "256 QM9700"]]  # tier73: 2 planes a switch
    for r, col in ((small, 0), (islands, 1)):
        per_tier = [int(rows[t.tier][0][col].split()[0].replace(",", "")) for t in r.bom.switches]
        per_type = {t.type for t in r.bom.transceivers}
        assert sum(per_tier) == r.bom.num_switches
        assert sum(int(rows[k][0][col].replace(",", "")) for k in per_type) == r.bom.num_transceivers
    # both top-tier collectives of the islands bind on the 7:1 tier above the islands; none on one pod
    assert rows["bound by"] == [["-", "core-super-spine"], ["-", "core-super-spine"]]
    # walk17: the row read "top-tier all_reduce: GPUs (one per block)" beside 98,304 GPUs, as if one GPU a block
    # took part; every GPU does, in communicators of one GPU per block
    assert rows["top-tier all_reduce: GPUs (communicators of one per block)"] == [["-", "98,304"]]
    assert "top-tier all_reduce: GPUs (one per block)" not in rows


def test_the_checkpoint_line_says_where_the_model_s_size_came_from():
    """walk9: "checkpoint 20 TB (1.43e+12 parameters)" did not say whose parameters; by default they are the
    compute-optimal size for the compute line's FLOP, N = sqrt(FLOP / (6 x 20)) (Hoffmann et al. 2022, Chinchilla,
    arXiv 2203.15556: about 20 tokens per parameter), else plan.workload.params or --model's."""
    doc = json.loads(run_cli("plan", "dgx-h100-superpod", "--no-collectives", "--json", check=True).stdout)
    params = doc["reliability"]["params"]
    assert params == pytest.approx((doc["compute"]["flop"] / (6 * 20)) ** 0.5, rel=1e-9)

    def line(*args):
        text = run_cli("plan", "dgx-h100-superpod", "--no-collectives", *args, check=True).stdout
        (ln,) = [ln for ln in text.splitlines() if ln.strip().startswith("checkpoint ")]
        return ln

    assert (f"({params:.3g} parameters: compute-optimal for the compute line's FLOP, Chinchilla's tokens per "
            "parameter; ") in line()  # then each GPU's shard (plan131)
    assert "(7e+10 parameters: plan.workload.params; " in line("--set", "plan.workload.params=7e10")
    assert line().endswith("; 1 hot-spare server")  # one server's spare (4 SUs of DGX H100), not "1 ... servers"
