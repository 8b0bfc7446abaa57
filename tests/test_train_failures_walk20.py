"""``topo train --fail``: the step and the search say what failed and whose NIC carries a failed NIC's traffic.

walk20 (docs/calibration-findings.md, the walk of 2026-12-06d): a failed leaf slowed DeepSeek-V3's step on 1,024
GB200 from 4.86 s to 6.09 s and neither the text nor ``--json`` said why; ``topo estimate`` names the failure and a
failed NIC's stand-in (:func:`topo.engine.paths.stand_in_notes`), and the step now does too.
"""

from __future__ import annotations

import pytest

import topo
from conftest import run_cli
from topo.training.model import load_model
from topo.training.parallel import make_layout
from topo.training.search import search_layouts
from topo.training.step import estimate_step


@pytest.fixture(scope="module")
def base():
    return topo.build_fabric(topo.load_spec("dgx-h100-superpod"))


def _step(fabric):
    return estimate_step(fabric, load_model("llama3-8b"), make_layout(tp=8, dp=4, global_batch=32))


def test_no_failure_note_without_failures(base):
    assert not [n for n in _step(base).notes if "failures" in n or "failed NIC" in n]


def test_a_failed_nic_is_named_with_its_stand_in(base):
    r = _step(base.with_failures("nic1.2"))
    # a NIC has two links (PCIe and its leaf link): topo.fabric.failures' module doc
    assert f"with failures: nic1.2 (2 of {base.num_links:,} links down; routing avoids them)" in r.notes
    assert any(n.startswith("failed NICs' traffic rerouted") and "nic1.2 -> nic1.3" in n for n in r.notes)
    assert "with failures: nic1.2" in " ".join(r.to_dict()["notes"])  # --json too


def test_a_failed_leaf_is_named(base):
    r = _step(base.with_failures("leaf0"))
    assert any(n.startswith("with failures: leaf0 (") for n in r.notes)


def test_the_search_names_the_failure(base):
    res = search_layouts(base.with_failures("nic1.2"), load_model("llama3-8b"), 32, 32, top=1)
    assert any(n.startswith("with failures: nic1.2") for n in res.notes)


def test_the_plan_says_its_mfu_is_the_installed_fabric_s():
    """``topo plan --model --layout --fail``: the MFU is topo train's step on the fabric as installed (the note on
    failed parts says the network figures are the failed fabric's), and the note says so."""
    args = ("plan", "dgx-h100-superpod", "--model", "qwen3-30b-a3b", "--layout", "dp=64,ep=8,global_batch=256",
            "--no-collectives")
    failed = run_cli(*args, "--fail", "leaf0", check=True).stdout
    whole = run_cli(*args, check=True).stdout
    (line,) = [x for x in failed.splitlines() if x.startswith("note: MFU")]
    assert line.endswith("; the step runs on the fabric as installed, without leaf0 (topo train --fail gives the "
                         "step with them)")
    (same,) = [x for x in whole.splitlines() if x.startswith("note: MFU")]
    assert line.startswith(same) and "without" not in same
