"""``--overlap tp=on`` at tp 1 says it does nothing (walk43, docs/calibration-findings.md section 440): there are no TP
collectives to hide, and Megatron-LM turns sequence parallelism off at tp 1, then asserts "Tensor parallel
communication/GEMM overlap can happen only when sequence parallelism is enabled" (NVIDIA/Megatron-LM@000c4ac2
megatron/training/arguments.py, ``validate_args``). The flag was accepted without a word."""

from __future__ import annotations

import topo
from topo.training.model import load_model
from topo.training.parallel import make_layout
from topo.training.step import estimate_step
from topo.training.tp_overlap import userbuffers_off_note


def test_tp1_overlap_is_noted_and_changes_nothing():
    m = load_model("llama3-8b")
    on, off = (make_layout(tp=1, dp=8, global_batch=8, overlap_tp=flag) for flag in (True, False))
    assert "no effect at tp 1" in userbuffers_off_note(on, m)
    assert userbuffers_off_note(off, m) is None
    fabric = topo.build_fabric(topo.load_spec("dgx-h100-superpod"))
    r_on, r_off = estimate_step(fabric, m, on), estimate_step(fabric, m, off)
    assert r_on.step_time_s == r_off.step_time_s
    assert any("no effect at tp 1" in n for n in r_on.notes) and not any("no effect at tp 1" in n for n in r_off.notes)
