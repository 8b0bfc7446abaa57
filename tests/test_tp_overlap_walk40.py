"""walk40 (docs/calibration-findings.md section 416): what a user deciding on TP overlap saw wrong.

1. ``overlap_tp`` without sequence parallelism hid every TP all-reduce behind the micro-batch (Llama 3 70B TP8 on
   16 H100: the 2.943 s of forward all-reduces exposed 0 s). No framework runs it: Megatron-LM refuses
   ``--tp-comm-overlap`` without sequence parallelism (NVIDIA/Megatron-LM@d98e8a64 megatron/training/arguments.py
   line 1442) and Megatron-Bridge turns it off (NVIDIA-NeMo/Megatron-Bridge@067f987d
   src/megatron/bridge/training/comm_overlap.py lines 442-448). Now priced as without it, with a note.
2. The step said what TP exposed, not why: a note names the blocking collectives and the hidden ones.
3. ``--overlap tp=on`` refused with NVFP4 was blamed on ``--layout: overlap_tp``.
"""

import subprocess
import sys
from pathlib import Path

import pytest

import topo
from topo.training.model import load_model
from topo.training.parallel import make_layout
from topo.training.step import estimate_step
from topo.training.tp_overlap import tp_exposed_note, tp_overlap_on, userbuffers_off_note

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def fabric():
    return topo.build_fabric(topo.load_spec("dgx-h100-superpod"))


def _lay(**kw):
    return make_layout(**{"tp": 8, "pp": 2, "dp": 1, "global_batch": 8, "seq_len": 4096, **kw})


def _tp_rows(r):
    return [c for c in r.comm if c.dim == "tp"]


def test_overlap_tp_without_sequence_parallelism_prices_as_off(fabric):
    m = load_model("llama3-8b")
    off = estimate_step(fabric, m, _lay(sequence_parallel=False))
    on = estimate_step(fabric, m, _lay(sequence_parallel=False, overlap_tp=True))
    assert not tp_overlap_on(_lay(sequence_parallel=False, overlap_tp=True), m)
    assert on.breakdown_s["tp"] == pytest.approx(off.breakdown_s["tp"])
    assert on.step_time_s == pytest.approx(off.step_time_s)
    # the layers' forward all-reduces block the compute stream: exposed whole (was 0 under overlap_tp)
    fwd = [c for c in _tp_rows(on) if c.phase == "forward" and c.collective == "all_reduce" and not c.what]
    assert fwd and all(c.time_s > 0 and c.exposed_s == pytest.approx(c.time_s) for c in fwd)
    assert any("userbuffers need sequence parallelism" in n for n in on.notes)
    assert not any("userbuffers need sequence parallelism" in n for n in off.notes)
    # with sequence parallelism overlap_tp still takes effect
    assert tp_overlap_on(_lay(overlap_tp=True), m)


def test_the_why_note():
    dense, mla = load_model("llama3-8b"), load_model("deepseek-v3-671b")
    sp = tp_exposed_note(_lay(), dense)
    assert "output-gradient gather" in sp and "overlap_tp=true runs them through userbuffers" in sp
    assert tp_exposed_note(_lay(overlap_tp=True), dense) is None  # userbuffers run them
    assert tp_exposed_note(_lay(tp=1, dp=8), dense) is None
    nosp = tp_exposed_note(_lay(sequence_parallel=False), dense)
    assert "forward all-reduce blocks" in nosp and "needs sequence parallelism" in nosp
    # no remedy offered where none exists: an MLA model (no userbuffers), NVFP4 (refused)
    assert "userbuffers beside" not in tp_exposed_note(_lay(ep=8, dp=8, global_batch=64), mla)
    fp4 = _lay(precision="fp8", fp8_recipe="nvfp4")
    assert "overlap_tp" not in tp_exposed_note(fp4, dense)
    assert userbuffers_off_note(_lay(overlap_tp=True), dense) is None


def test_overlap_flag_refused_with_nvfp4_names_the_flag():
    out = subprocess.run([sys.executable, "-m", "topo", "train", "gb200-nvl72-superpod", "--model", "llama3-8b",
                          "--tp", "2", "--global-batch", "2048", "--precision", "fp8", "--layout",
                          'fp8_recipe="nvfp4"', "--overlap", "tp=on"], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert out.stderr.startswith("error: --overlap: overlap_tp: true runs TP collectives through userbuffers")
    assert len(out.stderr.strip().splitlines()) == 1
