"""tidy70's fixes (walk29's and goodput69's leftovers, sections 302 and 294): each one rule in one place."""

import json

import pytest

from conftest import run_cli


def _step(*flags):
    return json.loads(run_cli("train", "dgx-h100-superpod", "--model", "llama3-8b", "--tp", "1", "--pp", "8",
                              "--dp", "1", *flags, "--json", check=True).stdout)


def test_a_large_pipeline_bubble_is_noted_with_the_steps_own_share():
    """walk29 Left 5: pp 8 with 2 micro-batches a replica printed a bubble of 72% and an MFU of 2.6% without a
    word. The note uses the step's own bubble (``step.bubble_s``: (pp - 1) / vpp micro-batch times) against its
    compute; GPipe (Huang et al. 2019, arXiv 1811.06965 sec. 2.3) found the bubble negligible from 4 micro-batches
    a stage (M >= 4K), where (K - 1) / M < 1/4 of the compute. Here 7 micro-batch times idle against 2 of compute:
    noted with the step's share; at 32 micro-batches (7 / 32 < 1/4) no note."""
    d = _step("--global-batch", "2")
    b = d["breakdown_s"]
    assert b["bubble"] / b["compute"] == pytest.approx(7 / 2, rel=0.02)  # no exposed TP/CP/EP on pp alone
    note = next(n for n in d["notes"] if n.startswith("pipeline bubble"))
    assert f"{b['bubble'] / d['step_time_s']:.0%} of the step" in note, note
    assert "--global-batch" in note and "--search" in note, note
    assert "28 micro-batches" in note, note  # 4 x (pp - 1) / vpp
    text = run_cli("train", "dgx-h100-superpod", "--model", "llama3-8b", "--tp", "1", "--pp", "8", "--dp", "1",
                   "--global-batch", "2", check=True).stdout
    assert "note: pipeline bubble" in text
    quiet = _step("--global-batch", "32")
    assert not [n for n in quiet["notes"] if n.startswith("pipeline bubble")], quiet["notes"]
