"""regpp73 (share72's Left 4): `topo plan REGION --shares ...`. A region's plan times no job (`--model`/`--layout`
are refused there: the MFU depends on the way across the sites), so it has no replicas to split: the flag is one
line naming it, the value and what is allowed (`topo train REGION --shares`), never an unknown-argument error or a
traceback; on one site's spec likewise."""

from conftest import run_cli


def _one_line(p):
    assert p.returncode != 0 and "Traceback" not in p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, p.stderr
    return lines[0]


def test_a_region_plan_refuses_shares_naming_the_flag_and_the_train_way():
    line = _one_line(run_cli("plan", "two-site-h100", "--no-collectives", "--shares", "equal"))
    assert line.startswith("error: --shares: 'equal':") and "without --model times no job" in line
    assert "allowed: --shares by-size|equal with --model M --layout L" in line  # plan79: a region's plan times a job


def test_one_site_plan_refuses_shares_too():
    line = _one_line(run_cli("plan", "dgx-h100-superpod", "--no-collectives", "--shares", "by-size"))
    assert line.startswith("error: --shares: 'by-size':") and "topo train REGION" in line
