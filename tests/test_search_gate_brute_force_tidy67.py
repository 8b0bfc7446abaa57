"""The search's bound gate (``_Search.bound_all`` / ``refined_all``: ``bound_of`` and ``refined``, with bound62's
fix for a dropless MoE's host waits) never drops a layout whose step is below what it is gated against (tidy67;
section 254 rested on an argument: every exposed term read on windows at least as wide as the step's, the compute
at most the step's). Brute force on a small job: every candidate layout evaluated on its own (no bound, no
pruning).

The job is bound62's: Qwen3-30B-A3B (a dropless MoE, whose tokens-per-expert sync makes the step wait on the host)
on 64 H100, batch 64, ZeRO-3, no recomputation, micro-batch 1, no CP, VPP or expert TP, every expert dispatcher;
a fabric of one scalable unit, no traffic mix (the step alone, as the bound bounds it)."""

import pytest

import topo
from topo.training.comm import CommEngine
from topo.training.mapping import default_placement
from topo.training.model import load_model
from topo.training.search import _Search, candidate_layouts, search_layouts
from topo.training.step import estimate_step

KW = dict(cps=(1,), micro_batches=(1,), vpps=(1,), dp_sharding=("zero3",), etps=(1,), recompute=("none",))
TOP = 8


@pytest.fixture(scope="module")
def job():
    fabric = topo.build_fabric(topo.load_spec("dgx-h100-superpod", ["cluster.num_units=1"]))
    model = load_model("qwen3-30b-a3b")
    steps = {}  # every candidate's step, keyed by its layout as the search places it
    routed = CommEngine(fabric)  # every layout's collectives routed on it (a search on it refines on them all)
    for lay, _ in candidate_layouts(model, 64, 64, gpus_per_domain=fabric.spec.gpus_per_domain, **KW):
        if lay is not None:
            lay, _ = default_placement(lay, fabric.spec.gpus_per_domain, fabric.layout.num_gpus)
            r = estimate_step(fabric, model, lay, engine=routed, check=False, contention=False)
            if r.fits:
                steps[lay] = r.step_time_s
    return fabric, model, steps, routed


def test_the_ranked_result_is_every_layouts_fastest(job):
    fabric, model, steps, _ = job
    found = search_layouts(fabric, model, 64, 64, top=TOP, keep=TOP, contention=False, **KW)
    assert len(steps) > TOP and found.evaluated < len(steps)  # the gate dropped some: it is exercised
    assert [r.step_time_s for r in found.ranked] == pytest.approx(sorted(steps.values())[:TOP], rel=1e-12)


@pytest.mark.parametrize("warm", [False, True], ids=["fresh engine", "every layout routed"])
def test_every_value_the_gate_compares_is_at_or_below_its_layouts_step(job, monkeypatch, warm):
    """Each bound and refinement the search compares with its threshold, during a real search (its engine shared,
    so the refinement reads the expert all-to-alls and DP collectives other layouts routed: bound62's case), is at
    or below that layout's step: the gate can drop no layout below the best it keeps. The ranked check above
    alone passes with a wrong refinement whose layouts sit far from the top; this one does not. ``warm``: the
    search on the brute force's engine, where every layout's own collectives are routed, so every refinement reads
    them (bound62's 3.736 s against a 3.647 s step was such a refinement)."""
    fabric, model, steps, routed = job
    seen = []
    bound_all, refined_all = _Search.bound_all, _Search.refined_all

    def record_bound(self, lay, keys):
        got = bound_all(self, lay, keys)
        seen.append((lay, got[0]))
        return got

    def record_refined(self, lay, bound, keys, above=float("inf")):
        got = refined_all(self, lay, bound, keys, above)
        seen.append((lay, got))
        return got

    monkeypatch.setattr(_Search, "bound_all", record_bound)
    monkeypatch.setattr(_Search, "refined_all", record_refined)
    search_layouts(fabric, model, 64, 64, top=TOP, keep=TOP, contention=False, engine=routed if warm else None, **KW)
    gated = [(lay, b) for lay, b in seen if b is not None and lay in steps]
    assert len({lay for lay, _ in gated}) > 100  # the gate saw most of the job's layouts
    over = [(lay.describe(), lay.ep_dispatcher, b, steps[lay]) for lay, b in gated if b > steps[lay] * (1 + 1e-12)]
    assert not over, over[:3]
