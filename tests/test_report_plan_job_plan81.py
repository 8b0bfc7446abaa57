"""plan81 (report81's Left 1): one site's report page (`topo report SPEC --plan --train M --layout L --tokens N`)
shows its plan's job block, the lines `topo plan SPEC --model M --layout L --tokens N` prints (`topo.cli.plan.
work_lines`: the cost per million tokens, the time to train with the plan's goodput and its interval, the energy
per token and to train, from `PlanResult.time_to_train` / `energy_to_train`), as a region's page does (report81)."""

import html
import re

from conftest import run_cli

JOB = ("dgx-h100-superpod", "--layout", "tp=8,pp=4,dp=4,global_batch=32", "--tokens", "1T")


def test_one_sites_page_shows_the_plans_work_block(tmp_path):
    out = tmp_path / "r.html"
    page = run_cli("report", JOB[0], "--plan", "--train", "llama3-70b", *JOB[1:], "-o", str(out))
    assert page.returncode == 0, page.stderr
    plan = run_cli("plan", JOB[0], "--model", "llama3-70b", *JOB[1:], "--no-collectives")
    assert plan.returncode == 0, plan.stderr
    lines = plan.stdout.splitlines()
    start = next(i for i, x in enumerate(lines) if x.startswith("work "))
    block = lines[start:start + 5]  # work, per million tokens, time to train, energy, what the energy counts
    assert "time to train 1T tokens:" in block[2] and "J per token" in block[3]
    # rev87: the library's heading names no CLI flag (topo report's job is --train's; the text says its command)
    shown = re.search(r'>dgx-h100-superpod: the job</h3><pre[^>]*>(.*?)</pre>', out.read_text(), re.S)
    assert shown is not None
    assert html.unescape(shown.group(1)).splitlines() == block


def test_without_tokens_the_page_shows_the_cost_and_no_time_to_train(tmp_path):
    out = tmp_path / "r.html"
    page = run_cli("report", JOB[0], "--plan", "--train", "llama3-70b", *JOB[1:3], "-o", str(out))
    assert page.returncode == 0, page.stderr
    text = html.unescape(out.read_text())
    assert "per million tokens" in text and "time to train" not in text


def test_tokens_without_the_plans_job_is_refused_in_one_line(tmp_path):
    bad = run_cli("report", JOB[0], "--train", "llama3-70b", *JOB[1:], "-o", str(tmp_path / "r.html"))
    assert bad.returncode == 2 and len(bad.stderr.splitlines()) == 1, bad.stderr
    assert "--tokens" in bad.stderr and "with --plan, --train M and --layout L" in bad.stderr
    assert not (tmp_path / "r.html").exists()
