"""The layout search (issue 20, part 2): progress on a terminal, the lazy re-ranking with the traffic mix."""

import os
import pty
import subprocess
import sys

import pytest

import topo
from conftest import ROOT
from topo.training.model import load_model
from topo.training.parallel import ParallelLayout
from topo.training.search import search_layouts
from topo.training.step import estimate_step


@pytest.fixture(scope="module")
def fabric():
    return topo.build_fabric(topo.load_spec("dgx-h100-superpod", ["cluster.num_units=1"]))


def test_search_progress_on_a_terminal():
    """On a TTY the search draws its progress on stderr (it crashed on the unknown total) and ends the line."""
    master, slave = pty.openpty()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "topo", "train", "dgx-h100-superpod", "--set",
                             "cluster.num_units=1", "--model", "llama3-8b", "--gpus", "64", "--global-batch", "64",
                             "--search", "--top", "2"], stdout=subprocess.PIPE, stderr=slave, cwd=ROOT, env=env)
    os.close(slave)
    out, _ = proc.communicate(timeout=300)
    err = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:
            break
        if not chunk:
            break
        err += chunk
    os.close(master)
    assert proc.returncode == 0, err.decode(errors="replace")
    text = err.decode(errors="replace")
    assert "layouts evaluated" in text and "Traceback" not in text and text.endswith("\n")
    assert b"step" in out.lower()


def test_mixed_ranking_equals_mixing_every_kept_layout(fabric):
    """Re-evaluating only until the next layout alone cannot enter the top gives the ranking of mixing all kept."""
    m = load_model("llama3-8b")
    kw = dict(top=3, keep=12, rank_orders=("tp-cp-ep-dp-pp", "tp-cp-ep-pp-dp"))
    lazy = search_layouts(fabric, m, 64, 64, **kw)
    alone = search_layouts(fabric, m, 64, 64, contention=False, **{**kw, "top": 12})
    every = sorted((topo_step(fabric, m, r) for r in alone.ranked),
                   key=lambda r: (round(r.step_time_s, 9), r.memory_per_gpu_bytes))[:3]
    assert [r.step_time_s for r in lazy.ranked] == pytest.approx([r.step_time_s for r in every], rel=1e-12)
    # every mixed step is at least its time alone (the argument that makes stopping early exact)
    for r in alone.ranked:
        assert topo_step(fabric, m, r).step_time_s >= r.step_time_s - 1e-12


def topo_step(fabric, model, r):
    fields = set(ParallelLayout.model_fields)
    lay = ParallelLayout(**{k: v for k, v in r.layout.items() if k in fields and k != "etp"})
    return estimate_step(fabric, model, lay, contention=True)
