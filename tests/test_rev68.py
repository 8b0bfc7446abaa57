"""rev68: the review of the session's second merges (plan68, walk27, regsearch67, tidy68, fast67, the lead's), each
fix with a test seen failing before it."""

from conftest import run_cli


def _err(*args):
    p = run_cli("plan", *args, "--no-collectives")
    assert p.returncode == 2 and p.stdout == "" and p.stderr.count("\n") == 1 and "Traceback" not in p.stderr
    return p.stderr.removeprefix("error: ").rstrip("\n")


def test_a_regions_plan_refuses_tokens_by_what_times_them():
    # plan68: `topo plan two-site-h100 --tokens 1T` said "allowed: --tokens with --model M and --layout L", and
    # --model on a region is refused in turn: a loop. A region's job is timed by topo train REGION --tokens.
    msg = _err("two-site-h100", "--tokens", "1T")
    assert msg.startswith("--tokens: a region's plan times no job") and "topo train REGION" in msg, msg


def test_side_by_side_power_fits_name_their_design():
    # plan68: `topo plan A B --it-power 5MW` printed two "note: sized to 5.00 MW ..." lines naming neither design
    p = run_cli("plan", "dgx-h100-superpod", "gb200-nvl72-superpod", "--it-power", "5MW", "--no-collectives")
    assert p.returncode == 0, p.stderr
    fits = [line for line in p.stdout.splitlines() if "sized to 5.00 MW of IT power" in line]
    assert [line.split(": sized to")[0] for line in fits] == ["note: dgx-h100-superpod", "note: gb200-nvl72-superpod"]
