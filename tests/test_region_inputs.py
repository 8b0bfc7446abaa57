"""Bad input to a region of several sites, as a new user types it: one `error:` line naming the key (and the --set
that gave the value), exit 2, no traceback; and what describe says of a cut DCI is true (found walking the README
on a fresh install, round 2)."""

import json
import os
import re
from pathlib import Path

import pytest

from conftest import run_cli

TOPOLOGIES = Path(__file__).resolve().parent.parent / "topologies"


def one_error(*argv):
    proc = run_cli(*argv)
    assert proc.returncode == 2, (argv, proc.returncode, proc.stderr)
    assert proc.stderr.startswith("error: ") and proc.stderr.count("\n") == 1, proc.stderr
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr
    return proc.stderr


@pytest.mark.parametrize("size,what", [("0", "positive number of bytes"), ("1XB", "expected a size such as")])
def test_a_bad_size_across_sites_is_the_size_flags_error(size, what):
    # was: "internal error (UnitError ...)", exit 1: the region path parsed sizes without the estimate's checks
    err = one_error("estimate", "two-site-h100", "--size", size)
    assert err.startswith("error: --size: ") and what in err and repr(size) in err


def test_the_library_takes_sizes_across_sites_as_estimate_does():
    from topo.engine.region_estimate import estimate_region
    from topo.errors import TopoError
    from topo.fabric.region import build_region

    region = build_region("two-site-h100")
    by_text = estimate_region(region, "all_reduce", "1GiB").results[0]
    assert by_text.size_bytes == 2 ** 30
    assert by_text.time_s == estimate_region(region, "all_reduce", [2 ** 30]).results[0].time_s
    with pytest.raises(TopoError) as exc:
        estimate_region(region, "all_reduce", ["0"])
    assert exc.value.key == "sizes"


@pytest.mark.parametrize("part", ["dci:0-0", "dci:east-east"])
def test_a_span_from_a_site_to_itself_says_so(part):
    # was: "no such sites in 'dci:0-0'", though both ends name a site that exists
    err = one_error("describe", "two-site-h100", "--fail", part)
    assert "--fail" in err and "names site east at both ends" in err and "dci:east-west" in err


def test_a_cut_dci_is_not_called_the_farthest_route_across_it():
    out = run_cli("describe", "two-site-h100", "--fail", "dci:east-west", check=True).stdout
    farthest = next(line for line in out.splitlines() if line.startswith("farthest GPUs"))
    # the 520 ns left is a route inside one site: it was printed as "one way across the DCI"
    assert "across the DCI" not in farthest and "still work" in farthest
    assert "cut apart" in out
    whole = run_cli("describe", "two-site-h100", check=True).stdout
    assert "4.951 ms one way across the DCI" in whole  # 1,000 km x 4.9 us/km + 50 us + each site's 260 ns up and down


def test_a_region_where_one_fabric_is_needed_names_what_needs_it():
    # estimate takes a region, but not with --traffic: the message said "describe and estimate take it"
    err = one_error("estimate", "two-site-h100", "--traffic", "3d-parallel")
    assert "a traffic mix" in err and "describe and estimate take it" not in err


def test_the_library_refuses_a_region_as_a_spec_with_a_typed_error_that_names_no_command():
    # small50 (fix49's section 158 left it): load_spec listed the commands that take a region; the CLI words that
    from topo.errors import RegionNotSpec
    from topo.spec.load import load_spec
    with pytest.raises(RegionNotSpec) as err:
        load_spec("two-site-h100")
    assert err.value.message == "is a region of several sites ([[sites]]) where one fabric's spec is expected: " \
                                "name one of its sites' specs"
    assert not re.search(r"\b(describe|estimate|train|plan|report|export|sweep|compare|calibrate)\b", err.value.message)
    err = one_error("compare", "nccl1453-h100-allreduce", "--spec", "two-site-h100")
    assert re.match(r"error: \S*two-site-h100(\.toml)?: is a region of several sites", err), err
    assert "(describe, estimate, train, plan, report, export and sweep take a region alone; compare, calibrate" in err


@pytest.mark.parametrize("nested, shown", [("inner.toml", r"\S*inner\.toml"), ("three-site-chain",
                                                                             r"(bundled spec |\S*)three-site-chain(\.toml)?")])
def test_a_region_as_a_site_of_another_is_one_line_naming_both_files_and_the_key(tmp_path, nested, shown):
    # small50 left it: "error: outer.toml: sites[0] (east): is a region of several sites ... where one fabric's
    # spec is expected" named neither the key nor the nested region's file
    text = (TOPOLOGIES / "two-site-h100.toml").read_text()
    (tmp_path / "inner.toml").write_text(text)
    outer = tmp_path / "outer.toml"
    outer.write_text(text.replace('spec = "dgx-h100-superpod"\nset = ["cluster.num_units=6"]', f'spec = "{nested}"', 1))
    for argv in (["describe", str(outer)], ["estimate", str(outer), "--size", "1G"]):
        err = one_error(*argv)
        assert re.match(rf"error: \S*outer\.toml: sites\[0\]\.spec: '{nested}' \(site east\) is a region of several "
                        rf"sites \(\[\[sites\]\], {shown}\), and a site is one fabric; allowed: one fabric's spec file "
                        r"or bundled name \(e\.g\. dgx-h100-superpod\) or an inline \[sites\.fabric\] table", err), err


def test_a_sites_bad_spec_file_is_named_where_its_line_or_key_is(tmp_path):
    # smallb51's walk: "outer.toml: sites[0] (east): invalid TOML: ... (at line 2, column 8)" and "...: cluster.
    # num_units: must be >= 1, got -3" pointed at the region's file, where neither that line nor that key is
    text = (TOPOLOGIES / "two-site-h100.toml").read_text()
    site = (TOPOLOGIES / "dgx-h100-superpod.toml").read_text()
    (tmp_path / "broken.toml").write_text('name = "x"\n[[sites]\n')
    (tmp_path / "negative.toml").write_text(site.replace("num_units = 4", "num_units = -3", 1))
    os.mkfifo(tmp_path / "pipe")
    for spec, rest in (("broken.toml", r"broken\.toml: invalid TOML: .* \(at line 2, column 8\)"),
                       ("negative.toml", r"negative\.toml: cluster\.num_units: must be >= 1, got -3"),
                       ("pipe", r"pipe: is not a regular file \(a named pipe\)")):
        outer = tmp_path / "outer.toml"
        outer.write_text(text.replace('spec = "dgx-h100-superpod"\nset = ["cluster.num_units=6"]', f'spec = "{spec}"', 1))
        err = one_error("describe", str(outer))
        assert re.match(rf"error: \S*outer\.toml: sites\[0\] \(east\): \S*{rest}", err), err
    outer.write_text(text.replace('spec = "dgx-h100-superpod"', 'spec = ""', 1))  # was "is a directory"
    assert re.match(r"error: \S*outer\.toml: sites\[0\]\.spec: .*got ''$", one_error("describe", str(outer)))


def test_a_region_report_over_a_sites_spec_file_says_it_is_an_input(tmp_path):
    # smallb51's walk: report said "exists and was not written by topo ... or use --force" (the early check knew
    # the region file only), and --force then said "is an input"; export said "is an input" at once
    (tmp_path / "east.toml").write_text((TOPOLOGIES / "dgx-h100-superpod.toml").read_text())
    outer = tmp_path / "outer.toml"
    outer.write_text((TOPOLOGIES / "two-site-h100.toml").read_text().replace(
        'spec = "dgx-h100-superpod"\nset = ["cluster.num_units=6"]', 'spec = "east.toml"', 1))
    for cmd in ("report", "export"):
        err = one_error(cmd, str(outer), "-o", str(tmp_path / "east.toml"))
        assert re.match(r"error: \S*east\.toml: -o: is an input \(\S*east\.toml\); refusing to write over it", err), err


def test_an_unknown_reduction_op_across_sites_is_refused_as_on_one_site():
    # smallb51's walk: `estimate two-site-h100 -o x` ran (exit 0); one site says the line below
    line = "error: -o: unknown reduction op 'x'; allowed: sum, prod, max, min, avg, mulsum\n"
    assert one_error("estimate", "two-site-h100", "--size", "1G", "-o", "x") == line
    assert one_error("estimate", "dgx-h100-superpod", "-g", "16", "--size", "1G", "-o", "x") == line


def test_a_hub_under_another_topology_is_one_line_naming_the_file():
    err = one_error("describe", "two-site-h100", "--set", "interconnect.hub=east")
    # walk16: the override is named, as the region's other rules name theirs
    assert re.match(r"error: \S*two-site-h100(\.toml)? \(--set interconnect\.hub=east\): interconnect\.hub: 'east' is read with topology \"hub\" only, "
                    r"got topology \"mesh\"; allowed: no hub, or topology = \"hub\"$", err), err


def test_a_region_report_names_the_flag_it_does_not_take():
    err = one_error("report", "two-site-h100", "--train", "llama3-8b", "--layout", "tp=8,dp=384,global_batch=384")
    assert err.startswith("error: --train: ")  # was keyed --plan, a flag not given


def test_errors_found_with_the_built_sites_name_the_set_that_caused_them():
    err = one_error("describe", "two-site-h100", "--set", "interconnect.attach_tier=core")
    assert "(--set interconnect.attach_tier=core): interconnect.attach_tier: site east has no tier 'core'" in err
    assert "allowed: leaf, spine" in err
    err = one_error("plan", "two-site-h100", "--no-collectives", "--set", "sites[0].power_limit_MW=1")
    # its nameplate facility power at its cooling type's PUE (issue 32: 2.8 MW at the old flat 1.281)
    assert "(--set sites[0].power_limit_MW=1): sites[0].power_limit_MW: site east draws " in err
    assert re.search(r"draws (\d+\.\d) MW \(facility, PUE [\d.]+\), over its limit of 1 MW", err)


def test_a_layout_flag_that_is_not_a_boolean_says_true_or_false():
    err = one_error("train", "dgx-h100-superpod", "--model", "llama3-8b", "--layout",
                    "tp=8,dp=128,global_batch=256,moe_grouped_gemm=maybe")
    assert err == "error: --layout: moe_grouped_gemm: must be true or false, got 'maybe'\n"


def test_train_across_sites_refuses_a_dp_it_would_have_rounded_down():
    # tp 8 x pp 5 = 40 into 3,072 GPUs: the region path took dp = 76 and ran 3,040 GPUs without a word
    err = one_error("train", "two-site-h100", "--model", "nemotron4-340b", "--tp", "8", "--pp", "5",
                    "--global-batch", "2280")
    # walk34: alike sites fill dp on each site's GPUs (every site runs the same share), so the line names a site's
    assert err.startswith("error: --pp: 5 makes tp x cp x pp = 40, which does not divide the 1,536 GPUs of each site")
    err = one_error("train", "dgx-h100-superpod", "--model", "llama3-8b", "--tp", "8", "--pp", "3",
                    "--global-batch", "256")  # the single-fabric rule, the same line (was keyed 'dp', no flag)
    assert err.startswith("error: --pp: 3 makes tp x cp x pp = 24, which does not divide the 1,024 GPUs")


def test_a_size_that_does_not_divide_the_gpus_names_its_own_flag():
    # walk11: --tp 3 on 64 GPUs was blamed on --dp, which the user never gave
    err = one_error("train", "dgx-h100-superpod", "--model", "llama3-8b", "--tp", "3", "--gpus", "64",
                    "--global-batch", "64")
    assert err.startswith("error: --tp: 3 makes tp x cp x pp = 3, which does not divide the 64 GPUs")
    # each size divides 64, their product does not: the last one given
    err = one_error("train", "dgx-h100-superpod", "--model", "llama3-8b", "--tp", "8", "--pp", "16", "--gpus",
                    "64", "--global-batch", "64")
    assert err.startswith("error: --pp: 16 makes tp x cp x pp = 128, which does not divide the 64 GPUs")


def test_train_across_sites_names_the_flag_of_a_layout_it_cannot_split():
    err = one_error("train", "two-site-h100", "--model", "nemotron4-340b", "--tp", "8", "--pp", "1",
                    "--global-batch", "2304", "--across", "pp")
    assert err == "error: --pp: pipeline stages across 2 sites need pp a multiple of 2, got 1\n"


def test_train_across_sites_takes_a_layout():
    """walk8: the README's region section did not say that --layout (and so fp8_recipe) is not taken across sites;
    walk9: it is taken now (tests/test_region_train_layout.py), its fields reaching the step as on one site."""
    import json

    proc = run_cli("train", "two-site-h100", "--model", "llama3-8b", "--tp", "8", "--global-batch", "768",
                   "--precision", "fp8", "--layout", "fp8_recipe=delayed", "--no-contention", "--json", check=True)
    assert json.loads(proc.stdout)["one_site"]["layout"]["fp8_recipe"] == "delayed"


@pytest.mark.parametrize("compute", ["plan", "describe"])
def test_a_region_study_that_computes_what_a_region_does_not_is_one_line_before_it_runs(compute):
    # was: an error row at every point, exit 1, after running them
    from topo.errors import TopoError
    from topo.sweep import study_from_dict

    with pytest.raises(TopoError) as exc:
        study_from_dict({"spec": "two-site-h100", "compute": ["estimate", compute],
                         "axes": {"interconnect.waves": [4, 16], "size": "1GiB"}})
    assert exc.value.key == "compute"
    assert f"{compute} is not computed over a region (two-site-h100)" in exc.value.message


def test_a_study_whose_spec_is_not_toml_is_one_line(tmp_path):
    # was: "internal error (TOMLDecodeError ...)", exit 1
    (tmp_path / "bad.toml").write_text('name = "x"\n[[sites]\n')
    (tmp_path / "s.toml").write_text('spec = "bad.toml"\ncompute = ["estimate"]\n[axes]\nsize = "1GiB"\n')
    proc = run_cli("sweep", "s.toml", "--scheduler", "serial", "-o", "s.parquet", cwd=tmp_path)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "internal error" not in proc.stderr
    assert proc.stderr.startswith("error: s.toml: spec: bad.toml: invalid TOML in spec 'bad.toml': Expected")


def test_a_cut_region_names_the_groups_of_sites_each_side(tmp_path):
    # walk9: `cut apart` joined a pair's names with '-', so with alike sites (NAME-0, NAME-1, ...) a ring cut twice
    # printed "s-0-s-1, s-0-s-2, s-1-s-3, s-2-s-3": no telling the sites apart. Four sites on a ring, spans 0-1
    # and 2-3 failed: s-0 and s-3 still reach each other over span 3-0, s-1 and s-2 over span 1-2
    region = tmp_path / "ring4.toml"
    region.write_text('name = "ring4"\n[[sites]]\nname = "s"\nspec = "dgx-h100-superpod"\n'
                      'set = ["cluster.num_units=1"]\ncount = 4\n'
                      '[interconnect]\ntopology = "ring"\ndistance_km = 50\nwaves = 4\nwave_rate = "800 Gb/s"\n')
    argv = ("describe", str(region), "--fail", "dci:s-0-s-1", "--fail", "dci:s-2-s-3")
    out = run_cli(*argv, check=True).stdout
    line = next(x for x in out.splitlines() if x.startswith("cut apart"))
    assert line.endswith("no working DCI route joins these groups of sites: group 1: sites s-0, s-3; "
                         "group 2: sites s-1, s-2"), line
    doc = json.loads(run_cli(*argv, "--json", check=True).stdout)
    assert doc["cut_groups"] == [["s-0", "s-3"], ["s-1", "s-2"]]
    assert doc["cut_apart"] == [["s-0", "s-1"], ["s-0", "s-2"], ["s-1", "s-3"], ["s-2", "s-3"]]
    whole = json.loads(run_cli("describe", str(region), "--fail", "dci:s-0-s-1", "--json", check=True).stdout)
    assert whole["cut_apart"] == [] and whole["cut_groups"] == []  # a ring cut once still joins every site


@pytest.mark.parametrize("sites,message", [
    ("sites = []\n", "sites: a region joins at least 2 sites, got an empty list ([]); allowed: two or more [[sites]] "
                      "entries (or one with count >= 2)"),
    ("", "sites: is required but missing"),
])
def test_a_region_file_without_sites_says_sites_are_missing(tmp_path, sites, message):
    """An empty site list was pydantic's "list should have at least 1 item after validation, not 0" (and a region
    needs 2); a file with an [interconnect] but no [[sites]] was read as one fabric ("unknown key 'interconnect'")."""
    (tmp_path / "r.toml").write_text(f'name = "r"\n{sites}[interconnect]\ndistance_km = 50\n')
    err = one_error("describe", str(tmp_path / "r.toml"))
    assert err.startswith(f"error: {tmp_path / 'r.toml'}: ") and message in err, err


@pytest.mark.parametrize("value,got", [("[]", "an empty list ([])"),
                                       ('[{name="a",spec="dgx-h100-superpod"}]', "one site ('a')")])
def test_set_sites_to_fewer_than_two_names_the_key_the_value_and_what_is_allowed(value, got):
    """smallb51 (section 177) left `describe two-site-h100 --set sites=[]`: "a region joins at least 2 sites, got
    0", naming no key. The line names the override, the key ``sites``, the value and what is allowed."""
    err = one_error("describe", "two-site-h100", "--set", f"sites={value}")
    assert err.rstrip().endswith(f"(--set sites={value}): sites: a region joins at least 2 sites, got {got}; allowed: two or "
                        "more [[sites]] entries (or one with count >= 2)"), err


def test_train_across_sites_says_its_dci_bytes_are_per_direction_on_the_busiest_span():
    """The table's "DCI bytes/step" and "DCI for 95%" columns say what they count, and "per direction" is true:
    with the DCI bound, the DP phase moves those bytes over one span at its per-direction capacity, two-site-h100's
    16 waves x 800 Gb/s = 1.6 TB/s (its region file), plus the phase's latency."""
    args = ("train", "two-site-h100", "--model", "llama3-70b", "--tp", "8", "--pp", "4", "--global-batch", "768")
    text = run_cli(*args, check=True).stdout
    assert "DCI bytes/step: on the busiest span, per direction" in text
    assert "DCI for 95%: the capacity per span and direction" in text
    dp = json.loads(run_cli(*args, "--json", check=True).stdout)["strategies"][0]
    assert dp["strategy"] == "dp" and dp["bottleneck"] == "dci:east-west"
    span_Bps = 16 * 800e9 / 8
    loss = 2 * (1000 * 4.9e-6 + 50e-6 + 4 * 130e-9)  # regions76: the logged loss's all-reduce, there and back
    assert dp["dci_time_s"] == pytest.approx(dp["dci_bytes_per_step"] / span_Bps + dp["latency_s"] + loss, rel=1e-6)


@pytest.mark.parametrize("override,message", [
    # walk12: each was accepted and priced: a span of 1e30 km (4.9e24 s one way, a DCI bill in octillions of
    # dollars), a billion waves (15.6 million fibre pairs, 60 GW of modules), a wave of 1e30 Gb/s
    ("interconnect.distance_km=1e30", "interconnect.distance_km: 1e+30 km is longer than the Earth's "
                                      "circumference (40,075 km)"),
    ("interconnect.waves=1000000000", "interconnect.waves: 1,000,000,000 waves is no cable"),
    ("interconnect.wave_rate=1e30 Gb/s", "interconnect.wave_rate: a wave of '1e30 Gb/s' is more than a whole fibre "
                                         "pair carries"),
])
def test_a_dci_beyond_any_cable_is_one_line(override, message):
    for command in (("describe",), ("estimate", "--size", "1G"), ("plan", "--no-collectives")):
        err = one_error(*command, "two-site-h100", "--set", override)
        assert f"(--set {override}): {message}" in err, err


def test_the_largest_dci_a_cable_allows_is_accepted():
    # the bounds themselves: the Earth's 40,075 km, 152 waves x 10,000 fibre pairs, one wave of 121.6 Tb/s
    out = run_cli("describe", "two-site-h100", "--set", "interconnect.distance_km=40075", "--set",
                  "interconnect.waves=1520000", check=True).stdout
    assert "40,075 km" in out and "196.4 ms" in out  # 40,075 km x 4.9 us/km + 50 us of equipment
    run_cli("describe", "two-site-h100", "--set", "interconnect.wave_rate=121.6 Tb/s", check=True)


def test_describe_notes_a_site_whose_attach_tier_has_no_ports_left_for_the_dci():
    """The DCI attaches at a tier's switches without taking ports from their radix: a site whose attach tier is
    full (dgx-h100-superpod's 4 scalable units: 16 spines x 64 ports, all down, 0 idle) gets a note; two-site-h100's
    6-unit sites keep 512 idle 400G spine ports (25.6 TB/s) for their 1.6 TB/s and get none (walk12)."""
    assert "idle ports" not in run_cli("describe", "two-site-h100", check=True).stdout
    out = run_cli("describe", "two-site-h100", "--set", 'sites[0].set=["cluster.num_units=4"]', check=True).stdout
    assert ("note: site east: its spine switches have 0 B/s of idle ports for its 1.6 TB/s to the DCI (per "
            "direction, as built)") in out and "site west" not in out
    doc = json.loads(run_cli("describe", "two-site-h100", "--json", check=True).stdout)
    assert [s["attach_idle_Bps"] for s in doc["sites"]] == [512 * 400e9 / 8] * 2


def test_describe_and_plan_count_a_failed_spans_ports_alike():
    """fix49: describe's note took the working spans' capacity (0 with the only span failed: no note) while
    ``topo plan`` buys every wave's ports: both read Region.border_Bps(as_built=True)."""
    full = ["--set", 'sites[0].set=["cluster.num_units=4"]', "--fail", "dci:east-west"]
    out = run_cli("describe", "two-site-h100", *full, check=True).stdout
    assert "its spine switches have 0 B/s of idle ports for its 1.6 TB/s to the DCI (per direction, as built)" in out
    doc = json.loads(run_cli("describe", "two-site-h100", *full, "--json", check=True).stdout)
    plan = json.loads(run_cli("plan", "two-site-h100", *full[:2], "--no-collectives", "--json",  # plan: no --fail
                              check=True).stdout)
    ports = {p["site"]: p["dci_Bps"] for p in plan["dci"]["site_ports"]}
    assert [s["dci_Bps"] for s in doc["sites"]] == [0.0, 0.0]  # what the sites can exchange: nothing
    assert {s["name"]: s["dci_as_built_Bps"] for s in doc["sites"]} == ports == {"east": 1.6e12, "west": 1.6e12}
