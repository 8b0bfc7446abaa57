"""Why a tier has idle ports (walk18, findings 193): a 2:1 spine above pods of 4 scalable units is built as 32 down /
16 up on 64-port switches, the same spine count as the non-blocking design, and describe said nothing of the 16,384
empty ports. Every figure below is port arithmetic on the spec (closed forms in the comments)."""

import json

from conftest import run_cli
from topo import build_fabric, inventory, load_spec

# the walk's design A: 32,768 H100, rail-optimized, QM9700 (64 x 400G, ../shared/data/hardware.md), pods of 4
# scalable units of 32 servers, the spine 2:1 above the pod
OVERRIDES = ["cluster.num_pods=", "cluster.num_gpus=32768", "fabric.units_per_pod=4",
             "fabric.tiers[spine].oversubscription=2"]
RAIL_2TO1 = [a for o in OVERRIDES for a in ("--set", o)]


def _why(spec, name):
    return next(t for t in inventory(build_fabric(spec)).tiers if t.name == name)


def test_a_2_to_1_spine_says_why_a_quarter_of_its_ports_are_empty_and_what_would_fill_them():
    spec = load_spec("h100-100k", OVERRIDES)
    spine = _why(spec, "spine")
    # a pod of 4 units = 4 x 8 rail leaves = 32 leaves, one link each: 32 down; 2:1 gives 16 up; 64 - 48 = 16 idle
    assert (spine.down_ports_per_switch, spine.up_ports_per_switch, spine.num_switches) == (32, 16, 1024)
    assert spine.ports_idle == 16 * 1024
    why = spine.ports_idle_why
    assert "16 of 64 ports idle on each of 1,024 switches (16,384 in all)" in why
    assert "32 leaf switches x 1 link = 32 down ports, and 2:1 needs 16 up" in why
    # 5 units: 40 down + 20 up = 60 <= 64 (6 would be 72); 128 units / 5 is not whole
    assert "a pod of 5 scalable units (fabric.units_per_pod = 5) would use 60 of them (40 down + 20 up, 2:1)" in why
    assert "128 scalable units do not fill whole pods of 5" in why
    assert "16 more uplinks would make it 1:1" in why
    assert _why(spec, "leaf").ports_idle_why == ""  # 32 + 32 = 64


def test_the_published_7_to_1_spine_fills_its_radix_and_has_no_note():
    # h100-100k: 56 leaves down, 8 up = 64 (pods of 7 scalable units), the way the published designs fill the radix
    assert _why(load_spec("h100-100k"), "spine").ports_idle_why == ""


def test_fixed_up_ports_keep_their_count_in_a_larger_block():
    # h100-100k-islands' core: 24 pods x 2 links = 48 down, up_ports = 7; 28 pods would be 56 + 7 = 63 at 8:1
    why = _why(load_spec("h100-100k-islands"), "core").ports_idle_why
    assert "up_ports sets 7 up" in why and "(56 down + 7 up, 8:1)" in why


def test_describe_prints_the_reason_and_its_json_carries_it(tmp_path):
    text = run_cli("describe", "h100-100k", *RAIL_2TO1, cwd=tmp_path).stdout
    assert "note: spine: 16 of 64 ports idle" in text
    doc = json.loads(run_cli("describe", "h100-100k", *RAIL_2TO1, "--json", cwd=tmp_path).stdout)
    spine = next(t for t in doc["tiers"] if t["name"] == "spine")
    assert spine["ports_idle"] == 16_384 and "2:1 needs 16 up" in spine["ports_idle_why"]
    assert spine["ports_idle_why"] in doc["notes"]
