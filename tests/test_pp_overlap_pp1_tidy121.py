"""``--overlap pp=on`` at pp 1 says it does nothing (tidy121, docs/calibration-findings.md section 443; walk43's
section 440, Left 2), in the wording of walk43's tp 1 note (``topo.training.overlap_idle.idle_overlap_note``): there
are no pipeline sends to hide, and Megatron-LM turns ``overlap_p2p_comm`` off without the interleaved schedule,
which needs pp > 1 (NVIDIA/Megatron-LM@d98e8a64 megatron/training/arguments.py lines 1000-1018). The flag was
accepted without a word."""

from __future__ import annotations

from conftest import run_cli

import topo
from topo.training.model import load_model
from topo.training.parallel import make_layout
from topo.training.step import estimate_step

NOTE = "PP overlap: no effect at pp 1, which runs no pipeline sends"


def test_pp1_overlap_is_noted_and_changes_nothing():
    m = load_model("llama3-8b")
    fabric = topo.build_fabric(topo.load_spec("dgx-h100-superpod"))
    on, off = (estimate_step(fabric, m, make_layout(tp=1, dp=8, global_batch=8, overlap_pp=flag))
               for flag in (True, False))
    assert on.step_time_s == off.step_time_s
    assert any(n.startswith(NOTE) for n in on.notes) and not any(NOTE in n for n in off.notes)


def test_an_interleaved_pipeline_gets_no_note():
    m = load_model("llama3-8b")
    fabric = topo.build_fabric(topo.load_spec("dgx-h100-superpod"))
    r = estimate_step(fabric, m, make_layout(tp=1, pp=2, vpp=2, dp=4, global_batch=8, overlap_pp=True))
    assert not any(NOTE in n for n in r.notes)


def test_the_cli_says_it_and_tp1s_note_keeps_its_words():
    out = run_cli("train", "dgx-h100-superpod", "--model", "llama3-8b", "--gpus", "8", "--tp", "1", "--dp", "8",
                  "--global-batch", "8", "--overlap", "pp=on,tp=on", check=True).stdout
    assert f"note: {NOTE} (Megatron-LM turns overlap_p2p_comm off" in out
    assert "note: TP overlap: no effect at tp 1, which runs no TP collectives (Megatron-LM turns sequence " in out
