"""rev68: the review of the session's second merges (plan68, walk27, regsearch67, tidy68, fast67, the lead's), each
fix with a test seen failing before it."""

import json

from conftest import run_cli
from small_regions import two_sites


def _err(*args):
    p = run_cli("plan", *args, "--no-collectives")
    assert p.returncode == 2 and p.stdout == "" and p.stderr.count("\n") == 1 and "Traceback" not in p.stderr
    return p.stderr.removeprefix("error: ").rstrip("\n")


def test_a_regions_plan_refuses_tokens_by_what_times_them():
    # plan68: `topo plan two-site-h100 --tokens 1T` said "allowed: --tokens with --model M and --layout L", and
    # --model on a region was refused in turn: a loop. plan79: a region's plan takes them, so the way is no loop.
    msg = _err("two-site-h100", "--tokens", "1T")
    assert msg.startswith("--tokens: the time to train is that of a named job's step") and "--model M" in msg, msg
    p = run_cli("plan", "two-site-h100", "--model", "llama3-70b", "--layout", "tp=8,pp=4,global_batch=576", "--tokens",
                "1T", "--no-collectives")
    assert p.returncode == 0 and "time to train 1T tokens" in p.stdout, p.stderr


def test_side_by_side_power_fits_name_their_design():
    # plan68: `topo plan A B --it-power 5MW` printed two "note: sized to 5.00 MW ..." lines naming neither design
    p = run_cli("plan", "dgx-h100-superpod", "gb200-nvl72-superpod", "--it-power", "5MW", "--no-collectives")
    assert p.returncode == 0, p.stderr
    fits = [line for line in p.stdout.splitlines() if "sized to 5.00 MW of IT power" in line]
    assert [line.split(": sized to")[0] for line in fits] == ["note: dgx-h100-superpod", "note: gb200-nvl72-superpod"]


def test_a_region_searchs_notes_of_two_failed_sites_name_each_site(tmp_path):
    # tidy68 named the site of a failed site's notes; with a part failed on each site (east's leaf3, west's leaf0)
    # every note, west's leaf0 too, was said as "one site's share (east's)", and --json's notes_sites was ["east"]
    path = tmp_path / "one-su.toml"
    path.write_text(two_sites("one-su", "two sites of one DGX H100 SU", "dgx-h100-superpod", 1))
    args = ("train", str(path), "--model", "llama3-8b", "--global-batch", "256", "--search", "--top", "1",
            "--fail", "1:leaf0", "--fail", "0:leaf3")
    lines = run_cli(*args, check=True).stdout.splitlines()
    said = {line.split("): with failures: ")[1].split(" ")[0]: line.split(" (")[1].split("'s)")[0]
            for line in lines if "): with failures: " in line}
    assert said == {"leaf3": "east", "leaf0": "west"}, lines
    got = json.loads(run_cli(*args, "--json", check=True).stdout)
    assert got["notes_sites"] == ["east"] and not any("leaf0" in n for n in got["notes"])
    assert [x["sites"] for x in got["other_notes"]] == [["west"]]
    assert got["other_notes"][0]["notes"][0].startswith("with failures: leaf0")
