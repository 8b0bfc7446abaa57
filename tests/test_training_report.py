"""The training report figures draw the results' own numbers; tier loads come from the engine's link loads."""

import pytest

import topo
from conftest import run_cli
from topo.report.train_figures import memory_figure, step_breakdown_figure, tier_loads_figure, train_figures
from topo.training.comm import CommEngine
from topo.training.parallel import make_layout
from topo.training.tier_bytes import tier_bytes
from topo.training.model import load_model
from topo.training.step import estimate_step
from topo.units import format_time


def test_figures_and_tier_loads():
    f = topo.build_fabric(topo.load_spec("dgx-h100-superpod"))
    m = load_model("llama3-8b")
    lay = make_layout(tp=8, pp=2, dp=64, global_batch=256)
    eng = CommEngine(f)
    r = estimate_step(f, m, lay, engine=eng)
    fig = step_breakdown_figure([r])
    assert sum(t.x[0] for t in fig.data) == pytest.approx(r.step_time_s)
    mem = memory_figure([r])
    assert sum(t.x[0] for t in mem.data if t.type == "bar") * 1e9 == pytest.approx(r.memory_per_gpu_bytes)
    loads = tier_bytes(f, m, lay, eng)
    tp = loads[loads["dim"] == "tp"]
    assert set(tp["level"]) == {"nvlink"}  # TP stays inside the NVLink domain
    assert (loads[loads["dim"] == "dp"]["level"] != "nvlink").any()  # DP reaches the network
    assert len(train_figures([r], loads)) == 4 and tier_loads_figure(loads).data


def test_timeline_of_one_stage_adds_up():
    f = topo.build_fabric(topo.load_spec("dgx-h100-superpod"))
    r = estimate_step(f, load_model("llama3-70b"), make_layout(tp=8, pp=4, dp=32, global_batch=256))
    segs = r.timeline
    assert max(sg["end_s"] for sg in segs) == pytest.approx(r.step_time_s)
    compute = sum(sg["end_s"] - sg["start_s"] for sg in segs if sg["lane"] == "compute")
    assert compute == pytest.approx(r.breakdown_s["compute"])
    for lane in ("bubble", "pp", "dp", "optimizer", "tp"):
        exposed = sum(sg["end_s"] - sg["start_s"] for sg in segs if sg["lane"] == lane and sg["exposed"])
        assert exposed == pytest.approx(r.breakdown_s[lane])
    from topo.report.train_figures import timeline_figure
    fig = timeline_figure(r)
    assert {t.y[0] for t in fig.data} >= {"compute", "bubble", "tp", "pp", "dp"}


def test_report_has_the_training_job_section(tmp_path):
    out = tmp_path / "r.html"
    run_cli("report", "dgx-h100-superpod", "--train", "llama3-8b", "--layout", "tp=8,dp=128,global_batch=256",
                "-o", str(out), check=True)
    page = out.read_text()
    assert '<section id="train">' in page and "llama3-8b dgx-h100-superpod" in page and "train-step" in page
    assert "One stage, one step" in page  # the timeline figure
    bad = run_cli("report", "dgx-h100-superpod", "--train", "llama3-8b", "--layout", "tp=8,dp=96,global_batch=256",
                  "-o", str(tmp_path / "x.html"))
    assert bad.returncode == 2 and bad.stderr.startswith("error: --layout: ") and not (tmp_path / "x.html").exists()


def test_report_takes_model_as_train_and_plan_name_it(tmp_path):
    """walk8: `topo report SPEC --model M --layout L`, as `topo train` and `topo plan` take a model, was refused
    ("unrecognized arguments"); --model is --train's other name, the same section."""
    pages = []
    for flag in ("--train", "--model"):
        out = tmp_path / f"{flag[2:]}.html"
        run_cli("report", "dgx-h100-superpod", flag, "llama3-8b", "--layout", "tp=8,dp=16,global_batch=64",
                "-o", str(out), check=True)
        page = out.read_text()
        start = page.index('<section id="train">')
        pages.append(page[start:page.index("</section>", start)])
    assert "llama3-8b dgx-h100-superpod" in pages[0] and pages[0] == pages[1]


def test_report_job_table_has_the_interval_the_host_wait_and_the_placement(tmp_path):
    """walk7: the report's job table gave the step without the interval topo train prints, named the most exposed
    collective as what bounds a step that waits longer for the host's launches (Qwen3-30B FP8 on 64 GB200 at one
    sequence per micro-batch: 1.1 s of host wait), and dropped the NVL72 placement note."""
    import html
    import json
    import re
    base = ["gb200-nvl72-superpod", "--model", "qwen3-30b-a3b", "--gpus", "64", "--global-batch", "256",
            "--tp", "1", "--dp", "64", "--ep", "64", "--precision", "fp8"]
    js = json.loads(run_cli("train", *base, "--json", check=True).stdout)
    out = tmp_path / "job.html"
    run_cli("report", "gb200-nvl72-superpod", "--train", "qwen3-30b-a3b", "--layout",
            "tp=1,dp=64,ep=64,global_batch=256,precision=fp8", "-o", str(out), check=True)
    page = html.unescape(re.sub(r"<script.*?</script>", "", out.read_text(), flags=re.S))
    u, host = js["uncertainty"], js["compute_by_module_s"]["host"]
    assert host > max(c["exposed_s"] for c in js["comm"]) and host > js["breakdown_s"]["bubble"]
    # times as every page and line prints them (topo.units.format_time, rev57b)
    t = format_time
    assert f"{t(js['step_time_s'])} ({t(u['low_s'])} - {t(u['high_s'])})" in page
    assert f"host wait {t(host)} (the host's kernel launches)" in page
    assert "placement: 64 of each 72-GPU NVLink domain" in page
