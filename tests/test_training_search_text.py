"""`topo train --search`'s text says what a single step's text says of every layout it ranks (walk7): the
interval its model group's out-of-family error puts around a step, where the job's GPUs sit on NVL72 racks (64 of
72, as the step's own note says; --json's ``notes``), and a host-bound layout's largest overhead as the GPU's wait
for the host's launches (inside compute), not a smaller collective."""

import json
import re

import pytest

from conftest import run_cli
from topo.training.search import common_factor_note

SEARCH = ["train", "gb200-nvl72-superpod", "--model", "qwen3-30b-a3b", "--gpus", "64", "--global-batch", "256",
          "--precision", "fp8", "--micro-batch", "1", "--search", "--top", "3"]


def _seconds(value: str, unit: str) -> float:
    return float(value) * {"s": 1.0, "ms": 1e-3, "us": 1e-6}[unit]


def test_search_text_carries_the_interval_the_placement_and_the_host_wait():
    text = run_cli(*SEARCH, check=True).stdout.splitlines()
    js = json.loads(run_cli(*SEARCH, "--json", check=True).stdout)
    first = js["ranked"][0]
    u = first["uncertainty"]
    (line,) = [ln for ln in text if ln.startswith("uncertainty of each step: ")]
    assert f"on {u['runs']} published {u['generation'].capitalize()} runs of fine-grained MoE models" in line
    assert f"half were within {u['p50']:.0%}" in line and f"nine in ten within {u['p90']:.0%}" in line
    # the interval of #1 is its step / (1 + p90) .. step / (1 - p90) (README, "Where the step time comes from")
    assert u["low_s"] == pytest.approx(first["step_time_s"] / (1 + u["p90"]), rel=1e-6)
    lo, hi = line.split("(#1: ")[1].split(")")[0].split(" - ")
    assert _seconds(*lo.split()) == pytest.approx(u["low_s"], rel=2e-3)
    assert _seconds(*hi.split()) == pytest.approx(u["high_s"], rel=2e-3)
    note = ("placement: 64 of each 72-GPU NVLink domain, as production recipes run NVL72 racks (power-of-two "
            "TP/EP/DP groups inside a rack); {} 72 fills the domains")
    # the library's note names the layout field, the CLI's line the flag (fix49, from a new-user walk)
    assert "note: " + note.format("--gpus-per-domain-used") in text
    assert js["notes"] == [note.format("gpus_per_domain_used =")]
    # eager Qwen3-30B at one sample per micro-batch on Grace: the GPU waits for launches longer than any collective
    host = first["compute_by_module_s"]["host"]
    assert host > max(first["breakdown_s"][k] for k in ("tp", "cp", "pp", "dp", "ep", "bubble"))
    row1 = next(ln for ln in text if ln.startswith("1 "))
    assert "host wait" in row1
    assert _seconds(*row1.split("host wait ")[1].split()[:2]) == pytest.approx(host, rel=2e-3)


def test_no_placement_note_where_domains_hold_a_power_of_two():
    js = json.loads(run_cli("train", "dgx-h100-superpod", "--set", "cluster.num_units=1", "--model", "llama3-8b",
                            "--gpus", "64", "--global-batch", "64", "--search", "--top", "2", "--no-contention",
                            "--json", check=True).stdout)
    assert js["notes"] == [] and js["ranked"]


def test_no_dividing_layout_names_the_factor_the_gpus_and_batch_do_not_share():
    """walk9: DeepSeek-V3 on 224 NVL72 racks (16,128 = 2^8 x 63 GPUs) with a batch of 8,192 said only that no layout
    satisfies the divisibility rules. dp divides the GPUs and the batch (global_batch % (dp x micro_batch) == 0), so
    dp <= gcd(16,128, 8,192) = 256 and tp x cp x pp is a multiple of 16,128 / 256 = 63: pp 63 exceeds the 61 layers,
    7 and 9 divide none of its 128 heads. The error now says that arithmetic, in one line."""
    bad = run_cli("train", "gb200-nvl72-superpod", "--set", "cluster.num_units=224", "--model", "deepseek-v3-671b",
                  "--search", "--global-batch", "8192", "--gpus", "16128")  # tidy122: every GPU (the fill: 64 a rack)
    lines = bad.stderr.strip().splitlines()
    assert bad.returncode == 2 and len(lines) == 1 and bad.stdout == "", bad.stderr
    assert lines[0].startswith("error: --gpus: no layout of deepseek-v3-671b on 16,128 GPUs with a global batch of "
                               "8,192 satisfies the divisibility rules")
    # 8,192 GPUs: the most at or below 16,128 that leave tp x cp x pp a factor dividing 8 (place61: 14,336 = 7 x
    # 2,048 leaves 7, which the note says too; 8,192 divides the batch)
    assert lines[0].endswith("; dp divides both the 16,128 GPUs and the batch of 8,192 (their greatest common factor "
                             "is 256), so tp x cp x pp is a multiple of 63; 8,192 GPUs would leave no such factor: "
                             "choose a GPU count or a global batch with more factors in common")


def test_a_factor_of_seven_is_said_too():
    """walk23: 7,168 GB200 (112 racks at 64) with a batch of 2,048 share 1,024, so tp x cp x pp is a multiple of 7:
    the search forced pp 7 on 2 micro-batches (MFU 3.1%) and the note, silent at a factor of 8 or less, said
    nothing. Silent now only when the factor divides 8; 4,096 GPUs (the most at or below 7,168 whose factor does:
    4,096 / gcd(4,096, 2,048) = 2; 6,144 leaves 3, 5,120 leaves 5) is the count it names."""
    assert common_factor_note(7168, 2048) == (
        "dp divides both the 7,168 GPUs and the batch of 2,048 (their greatest common factor is 1,024), so tp x cp x "
        "pp is a multiple of 7; 4,096 GPUs would leave it a multiple of 2")
    assert common_factor_note(6144, 2048).endswith("multiple of 3; 4,096 GPUs would leave it a multiple of 2")
    assert common_factor_note(16384, 2048) == common_factor_note(8192, 8192) == ""  # factors 8 and 1


def test_a_search_that_finds_layouts_says_the_factor_too():
    """The same arithmetic when layouts exist but every one carries the odd factor: Qwen3-30B-A3B on 72 GB200 with a
    batch of 64 (gcd 8, so tp x cp x pp is a multiple of 9); a note, in the text and --json's notes."""
    args = ["train", "gb200-nvl72-superpod", "--model", "qwen3-30b-a3b", "--gpus", "72", "--global-batch", "64",
            "--search", "--top", "1", "--no-contention"]
    note = ("dp divides both the 72 GPUs and the batch of 64 (their greatest common factor is 8), so tp x cp x pp is "
            "a multiple of 9; 64 GPUs would leave no such factor")
    js = json.loads(run_cli(*args, "--json", check=True).stdout)
    assert note in js["notes"] and all(r["layout"]["tp"] * r["layout"]["cp"] * r["layout"]["pp"] % 9 == 0
                                       for r in js["ranked"])
    assert f"note: {note}" in run_cli(*args, check=True).stdout


def test_the_search_table_s_times_keep_their_four_digits():
    """walk17: the table read ``3.8 s`` under ``3.776 s`` and ``3.39 s`` beside ``3.412 s`` (format_time dropped
    trailing zeros); every time of a column, and the interval's two ends, now carry 4 significant digits."""
    text = run_cli("train", "dgx-h100-superpod", "--model", "llama3-70b", "--gpus", "1024", "--global-batch", "512",
                   "--search", "--top", "3", check=True).stdout.splitlines()  # the README's search
    rows = [ln for ln in text if re.match(r"\s*\d+ ", ln)]
    # #3's step, 4.136 s since the refit of the session of 2026-12-07h (the norms' backward at TE's rate; 4.133 s
    # since the refit of the session of 2026-12-07g, 4.134 s since the refit after tpsm99 (4.137 s at tpsm99: the layers' backward TP exchanges beside
    # their own GEMMs, their NCCL SMs charged: TP4 PP2 VPP4 third; 3.854 s since the session of 2026-12-07a, attnh71, and the refit; 3.892 s at
    # 322e6f69, 3.800 s before ce57's loss pricing)); four digits: tests/test_units.py's format_time
    assert " 4.136 s " in rows[2]
    times = [t for ln in rows for t in re.findall(r"(\d[\d.]*) (?:s|ms|us)\b", ln)]
    line = next(ln for ln in text if ln.startswith("uncertainty of each step: "))
    times += re.findall(r"(\d[\d.]*) (?:s|ms|us)\b", line.split("(#1: ")[1])
    assert len(times) >= 3 * len(rows) + 2
    assert all(len(t.replace(".", "").lstrip("0")) == 4 or len(t.split(".")[0]) >= 4 for t in times), times
