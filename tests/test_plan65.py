"""plan65: `topo plan` and `topo report` with several designs and one `--layout` give each design its own dp and its
own step (walk24's "Left" 2: dp had to be given and fitted one design only; without it every design ran dp 1, and
`plan` took the first design's MFU for all). The rule is topo train's: a layout without dp fills the fabric's GPUs
(dp = GPUs / (tp x cp x pp)), at 64 of each NVL72 rack's 72 GPUs (tidy122, section 445)."""

import json
import re

import pytest

from conftest import run_cli
from topo.units import format_time

# two bundled designs of different sizes: 1,024 H100 (dp 1,024 / 16 = 64) and 2,304 GB200, of which the job fills
# 32 racks x 64 = 2,048 (dp 2,048 / 16 = 128; tidy122: the production placement)
DESIGNS = ("dgx-h100-superpod", "gb200-nvl72-superpod")
LAYOUT = "tp=8,pp=2,global_batch=2304"  # 2,304 sequences split into dp 64 and dp 128 alike


def _train(spec: str) -> dict:
    return json.loads(run_cli("train", spec, "--model", "llama3-8b", "--layout", LAYOUT, "--json",
                              check=True).stdout)


def test_plan_runs_each_design_s_own_step_with_dp_filled_from_its_gpus():
    doc = json.loads(run_cli("plan", *DESIGNS, "--no-collectives", "--model", "llama3-8b", "--layout", LAYOUT,
                             "--json", check=True).stdout)
    for design, spec in zip(doc["designs"], DESIGNS):
        train = _train(spec)  # topo train fills dp from the fabric (walk24, be34cf2d): the same rule
        assert (train["gpus"], train["layout"]["dp"]) == ({"dgx-h100-superpod": 1024,
                                                            "gb200-nvl72-superpod": 2048}[spec],
                                                           {"dgx-h100-superpod": 64,
                                                            "gb200-nvl72-superpod": 128}[spec])
        assert design["compute"]["mfu"] == pytest.approx(train["mfu"], rel=1e-12)
        dp = train["layout"]["dp"]
        assert any(f"on {spec}, a job of {train['gpus']:,} of its {design['num_gpus']:,} GPUs (dp {dp} fills its GPUs: "
                   "the layout gives none)" in n for n in design["notes"])
    assert doc["designs"][0]["compute"]["mfu"] != doc["designs"][1]["compute"]["mfu"]
    text = run_cli("plan", *DESIGNS, "--no-collectives", "--model", "llama3-8b", "--layout", LAYOUT,
                   check=True).stdout.splitlines()
    (row,) = [ln for ln in text if ln.startswith("MFU (compute budget)")]
    assert row.split()[-2:] == [f"{d['compute']['mfu']:.3g}" for d in doc["designs"]]
    assert sum(ln.startswith("note: MFU ") for ln in text) == 2  # one note per design, none says "the first only"
    assert not any("runs on the first" in ln for ln in text)


@pytest.mark.parametrize("command", ["plan", "report"])
def test_a_layout_one_design_cannot_take_is_refused_naming_the_design_and_the_flag(command, tmp_path):
    extra = (["--no-collectives", "--model"] if command == "plan" else ["-o", str(tmp_path / "r.html"), "--train"])
    # dp 144 fits the 2,304 GB200 only (walk24: "error: layout: gpus: ... the fabric has 2,304", no SPEC, no flag)
    p = run_cli(command, *DESIGNS, *extra, "llama3-8b", "--layout", "tp=8,pp=2,dp=144,global_batch=2304")
    assert p.returncode == 2 and p.stderr.count("\n") == 1, p.stderr
    assert p.stderr.startswith("error: --layout: gpus: the job needs GPUs 0 to 2,303, but the fabric has 1,024")
    assert "(on dgx-h100-superpod); leave dp out of the layout and each design fills its own GPUs" in p.stderr
    # tp x pp = 24 divides 2,304 but not 1,024: dp cannot be filled on the H100 design
    p = run_cli(command, *DESIGNS, *extra, "llama3-8b", "--layout", "tp=8,pp=3,global_batch=2304")
    assert p.returncode == 2 and p.stderr.count("\n") == 1, p.stderr
    assert p.stderr.startswith("error: --layout: dp: not given, and tp x cp x pp = 24 does not divide the 1,024 "
                               "GPUs of dgx-h100-superpod; allowed: tp, cp, pp whose product divides 1,024, or dp=N "
                               "in the layout")
    assert not (tmp_path / "r.html").exists()


def _rows(page: str) -> dict:
    """The training section's table: job label -> (step, MFU) cells."""
    cells = re.findall(r'<tr><td class="l">(llama3-8b [^<]+)</td><td>([^<(]+?)(?: \([^<]*\))?</td><td>[^<]*</td>'
                       r'<td>[^<]*</td><td>([\d.]+)%</td>', page)
    return {label: (step, float(mfu)) for label, step, mfu in cells}


def test_report_gives_each_design_its_own_dp_and_step(tmp_path):
    out = tmp_path / "r.html"
    run_cli("report", *DESIGNS, "--train", "llama3-8b", "--layout", LAYOUT, "-o", str(out), check=True)
    rows = _rows(out.read_text())
    assert set(rows) == {"llama3-8b dgx-h100-superpod, tp8 cp1 pp2 dp64 ep1",
                         "llama3-8b gb200-nvl72-superpod, tp8 cp1 pp2 dp128 ep1"}
    for spec in DESIGNS:
        train = _train(spec)
        (step, mfu) = next(v for k, v in rows.items() if f" {spec}, " in k)
        assert step == format_time(train["step_time_s"])
        assert mfu == pytest.approx(100 * train["mfu"], abs=0.05)  # the page prints the MFU to 0.1%


def test_a_report_of_two_designs_with_one_dp_draws_its_bytes_per_tier(tmp_path):
    """plan65 found the page of two designs and a training job never written: both designs' ``nvlink`` rows of
    the bytes per tier under one label ("internal error (ValueError: cannot reindex on an axis with duplicate
    labels)"). Each design's tiers are now their own bars."""
    out = tmp_path / "r.html"
    p = run_cli("report", *DESIGNS, "--train", "llama3-8b", "--layout", "tp=8,pp=2,dp=8,global_batch=64", "-o",
                str(out))
    assert p.returncode == 0, p.stderr
    page = out.read_text()
    assert "dgx-h100-superpod, nvlink" in page and "gb200-nvl72-superpod, nvlink" in page


def test_the_tp_rows_of_train_s_traffic_table_say_what_each_carries():
    """walk24: two TP rows read ``all_gather backward 64 MiB`` alike: the row-parallel layer's output gradient and
    the column-parallel layer's input gathered again for its weight gradient (Transformer Engine's
    ``LayerNormLinear`` backward, step._tp_traffic). Each sequence-parallel row now says what it carries; 8,192
    tokens x 4,096 x 2 B = 64 MiB each (llama3-8b, micro-batch 1)."""
    out = run_cli("train", "dgx-h100-superpod", "--model", "llama3-8b", "--tp", "8", "--global-batch", "256",
                  check=True).stdout.splitlines()
    tp = [re.split(r"\s{2,}", ln[5:].strip())[:2] for ln in out if ln.startswith("tp   ") and " MiB " in ln]
    assert tp == [["all_gather forward (input)", "64 MiB"], ["reduce_scatter forward (output)", "64 MiB"],
                  ["all_gather backward (output gradient)", "64 MiB"],
                  ["all_gather backward (input again, for wgrad)", "64 MiB"],
                  ["reduce_scatter backward (input gradient)", "64 MiB"],
                  # section 341 (stagetp73): the single stage's own heads, each row saying what it carries, at the
                  # same b s h x 2 B = 64 MiB (Megatron-LM@7094270c tensor_parallel/layers.py: the embedding's
                  # reduce-scatter forward and gather backward, lines 241-271; the output layer's input gathered
                  # forward and again for wgrad, its input gradient reduce-scattered, lines 434, 468, 502). The
                  # loss's two all-reduces (T and 2T FP32: 32 and 64 KiB) are not MiB rows.
                  ["reduce_scatter forward (head: embedding output)", "64 MiB"],
                  ["all_gather backward (head: embedding output gradient)", "64 MiB"],
                  ["all_gather forward (head: output layer input)", "64 MiB"],
                  ["all_gather backward (head: output layer input again, for wgrad)", "64 MiB"],
                  ["reduce_scatter backward (head: output layer input gradient)", "64 MiB"],
                  # tidy76: the norms' gradients summed over TP once a step (Megatron-LM@d98e8a64
                  # distributed/finalize_model_grads.py lines 416-485): (32 x 2 + 1) x 4,096 x 4 B = 1.016 MiB
                  ["all_reduce step (replicated gradients)", "1.016 MiB"]]
    doc = json.loads(run_cli("train", "dgx-h100-superpod", "--model", "llama3-8b", "--tp", "8", "--global-batch",
                             "256", "--json", check=True).stdout)
    assert [c["what"] for c in doc["comm"] if c["dim"] == "tp"][2:4] == ["output gradient", "input again, for wgrad"]
