"""Megatron-Core's ``overlap_param_gather_with_optimizer_step`` (ogpos133, findings 469).

NVIDIA/Megatron-LM@14346b65a2d0790e451919858f7771078105c5f0: the first model chunk gets its own optimizer
(``megatron/core/optimizer/__init__.py`` lines 1056-1062), stepped first; ``ChainedOptimizer._step`` dispatches its
weights' all-gather right after that step (``optimizer.py`` lines 1667-1675), so it runs behind the later chunks' and
the experts' optimizer steps; the next forward's pre-hook waits for it and dispatches no next bucket
(``distributed_data_parallel.py`` lines 443-475); chunk 0 is not bucketed (``megatron/training/training.py`` lines
1954-1964). Megatron-Bridge's performance scripts set it for dp, pp, vp > 1 (v0.1.0rc4 ``run_script.py`` lines
189-193; from v0.3.0 ``utils/overrides.py`` lines 430-434 except ``fp8_mx`` / ``nvfp4``)."""

import csv
from pathlib import Path

import pytest

import topo
from benchmarks.run_recipe_columns import layout_column_kw
from topo.errors import TopoError
from topo.training.comm import CommEngine
from topo.training.dp_overlap import interleaved_gather_exposed_s
from topo.training.model import load_model
from topo.training.parallel import check_layout, dp_bucket_calls, make_layout
import topo.training.step as step_mod
from topo.training.step import estimate_step, gather_lead_s
from topo.training.gpus import gpu_compute

_LAY = dict(tp=4, pp=4, vpp=4, dp=16, global_batch=1024, dp_sharding="zero1")
COL = "overlap_param_gather_with_optimizer_step"


def test_a_lead_hides_chunk_zeros_gather_in_closed_form():
    # one bucket of 2 s, chunk forward 1 s, 2 chunks, group 1: without a lead chunk 0 waits its whole 2 s, chunk 1
    # (dispatched at the start, queued behind it) ends at 4 s and its forward starts at 3 s: 1 s more
    assert interleaved_gather_exposed_s(2.0, 2.0, 1, 2, 1, 1.0) == pytest.approx(3.0)
    # a 1.5 s lead: chunk 0 ends 0.5 s in, chunk 1 at 2.5 s, its forward starts at 1.5 s: 0.5 + 1.0
    assert interleaved_gather_exposed_s(2.0, 2.0, 1, 2, 1, 1.0, 1.5) == pytest.approx(1.5)
    # a lead longer than chunk 0's gather: it waits nothing; chunk 1 starts at 0 and ends at 2 s, forward at 1 s
    assert interleaved_gather_exposed_s(2.0, 2.0, 1, 2, 1, 1.0, 5.0) == pytest.approx(1.0)
    # lead 0 is the rule it was: chunk 0's 4 buckets of 0.25 s beyond its 0.5 s forward (0.5), then chunk 1
    # (queued, ends at 1 + 1 = 2 s) beyond its forward's start at 0.5 + 0.5 = 1 s (1.0)
    assert interleaved_gather_exposed_s(1.0, 0.25, 4, 2, 1, 0.5, 0.0) == pytest.approx(0.5 + 1.0)


def test_every_chunk_is_one_collective():
    lay = make_layout(**_LAY, **{COL: True})
    assert dp_bucket_calls(lay, 4e9) == 4  # vpp chunks, chunk 0 not bucketed
    assert dp_bucket_calls(make_layout(**_LAY), 4e9) > 4


@pytest.mark.parametrize("extra, words", [
    ({"vpp": 1}, "needs vpp > 1"),
    ({"dp_sharding": "none"}, "distributed optimizer"),
    ({"overlap_param_gather": False}, "--overlap-param-gather"),
])
def test_where_megatron_does_not_run_it_is_refused(extra, words):
    lay = make_layout(**{**_LAY, **extra}, **{COL: True})
    with pytest.raises(TopoError, match=COL) as err:
        check_layout(load_model("llama3-70b"), lay)
    assert words in str(err.value) and "\n" not in str(err.value)


@pytest.fixture(scope="module")
def pair():
    pod = topo.build_fabric(topo.load_spec("dgx-h100-superpod"))
    m, engine = load_model("llama3-70b"), CommEngine(pod)
    out = {}
    for on in (False, True):
        lay = make_layout(**_LAY, **{COL: on})
        out[on] = (lay, estimate_step(pod, m, lay, engine=engine))
    return m, out


def _gather(r):
    (c,) = [c for c in r.comm if c.dim == "dp" and c.collective == "all_gather"]
    return c


def test_the_gather_hides_behind_the_later_optimizers_steps(pair, monkeypatch):
    m, out = pair
    (lay_off, off), (lay_on, on) = out[False], out[True]
    assert gather_lead_s(m, lay_off, None) == 0.0
    # the window: the busiest stage's optimizer over 3 of its 4 chunks (a dense model), the step's own rate
    lead = gather_lead_s(m, lay_on, gpu_compute("h100"))
    assert lead == pytest.approx(on.breakdown_s["optimizer"] * 3 / 4, rel=1e-9)
    assert _gather(on).calls_per_step == 4 < _gather(off).calls_per_step
    assert on.breakdown_s["optimizer"] == off.breakdown_s["optimizer"]  # the step runs every optimizer still
    # without the window (the dispatch at the step's start) chunk 0's whole gather waits: the window hides up to its
    # length of it
    pod = topo.build_fabric(topo.load_spec("dgx-h100-superpod"))
    monkeypatch.setattr(step_mod, "gather_lead_s", lambda *a: 0.0)
    no_lead = estimate_step(pod, m, lay_on, engine=CommEngine(pod))
    hidden = _gather(no_lead).exposed_s - _gather(on).exposed_s
    assert 0.0 < hidden <= lead * (1 + 1e-9)


def _rows():
    root = Path(__file__).resolve().parents[1] / "data" / "reference"
    out = {}
    for name in ("training_runs_published.csv", "training_runs_holdout.csv"):
        with open(root / name, newline="", encoding="utf-8") as f:
            out.update({r["run_id"]: r for r in csv.DictReader(f)})
    return out


def test_the_column_from_each_recipe_at_its_pin():
    rows = _rows()
    on = {k for k, r in rows.items() if r[COL] == "1"}
    assert len(on) == 37 and "mbvc_h100_deepseekv3" in on
    assert layout_column_kw(rows["mbvc_h100_deepseekv3"])[COL] is True
    for k in on:  # Megatron-Bridge performance runs, interleaved, more than one replica
        r = rows[k]
        assert k.startswith(("mb", "together2602_")) and int(float(r["vpp"])) > 1 and int(r["pp"]) > 1
        assert int(r["num_gpus"]) // (int(r["tp"]) * int(r["pp"]) * int(r["cp"])) > 1
        if not k.startswith(("mb2509_", "mb2511_")):  # from v0.3.0 not for fp8_mx / nvfp4
            assert r["fp8_recipe"] not in ("mxfp8", "nvfp4"), k
    # 25.11 (v0.2.0) sets it for every precision; the MXFP8 rows whose function also turned the gather off stay off
    assert rows["mb2511_gb200_deepseekv3_bf16"][COL] == "1"
    assert rows["mb2511_b200_llama31_405b_mxfp8"][COL] == ""
    # from v0.3.0 MXFP8 / NVFP4 keep it off; the perf_recipes fp8mx functions do not call the enabler
    assert rows["mb2602_gb200_deepseekv3"][COL] == rows["mb2608_gb200_deepseekv3"][COL] == ""
    assert rows["mb2602_gb200_llama31_405b"][COL] == "1"
