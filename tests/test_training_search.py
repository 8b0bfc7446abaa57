"""The layout search (issue 20, part 2): progress on a terminal, the lazy re-ranking with the traffic mix."""

import os
import pty
import subprocess
import sys
from dataclasses import replace

import numpy as np
import pytest

import topo
from conftest import ROOT
from small_fabrics import small_fabric
from topo.engine.estimate import evaluate
from topo.training.comm import CommEngine
from topo.training.model import load_model
from topo.training.parallel import ParallelLayout, make_layout
from topo.training.search import candidate_layouts, search_layouts
from topo.training.gpus import gpu_compute
from topo.training.mapping import map_layout
from topo.training.operators import stage_compute
from topo.training.step import estimate_step, exposed_routed, routed_ep_cover_s


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


@pytest.mark.parametrize("name", ["rail_optimized-3", "fat_tree-3", "rail_only-3", "rail_optimized-3-os2",
                                  "rail_optimized-4-os2"])
def test_time_of_the_first_block_is_the_time_of_all(name):
    """Groups inside one pod (island), each block a translate of the first: routing the first block's groups
    gives the time of all of them (the fabric's blocks are alike); it is what the engine gives for all."""
    fabric = small_fabric(name)
    n = fabric.layout.num_gpus
    eng = CommEngine(fabric)
    blocks = eng._block_sizes()
    assert blocks, name  # the fabric has blocks above its leaves
    size = blocks[0]
    for width, stride in ((size // 2, 1), (size // 2, 2), (4, size // 4)):
        ids = np.arange(n).reshape(n // size, -1)  # per block
        per = ids.reshape(n // size, size // (width * stride), width, stride).transpose(0, 1, 3, 2)
        G = per.reshape(-1, width)
        part = eng.first_block(G)
        assert part.shape[0] * (n // size) == G.shape[0] and part.max() < size
        for coll, S in (("all_gather", 1 << 26), ("alltoall", 1 << 24), ("all_reduce", 1 << 27)):
            full = evaluate(fabric, coll, ranks=G.ravel(), groups=G.shape[0], group_layout="blocked",
                            rank_order="given")
            assert eng.time(coll, G, S).time_s == pytest.approx(full.time(S)[0], rel=1e-12)
    # a matrix whose groups cross blocks, or blocks that are not translates, is routed whole
    across = np.arange(n).reshape(2, -1).T
    assert eng.first_block(across) is across or np.array_equal(eng.first_block(across), across)
    shuffled = np.arange(n).reshape(-1, 2)
    shuffled[-1] = shuffled[-1][::-1]
    assert eng.first_block(shuffled).shape == shuffled.shape


def test_no_reduction_on_a_fabric_with_failures():
    fabric = small_fabric("rail_optimized-3")
    broken = fabric.with_failures("random:leaf-spine:0.25")
    assert CommEngine(broken)._block_sizes() == [] and CommEngine(fabric)._block_sizes()


def test_rank_orders_that_place_gpus_alike_count_once(fabric):
    """tp-cp-ep-dp-pp and tp-dp-cp-ep-pp differ only in cp (1 here) and ep (no axis): one layout, not two."""
    m = load_model("llama3-8b")
    one = search_layouts(fabric, m, 64, 64, top=50, contention=False, cps=(1,), rank_orders=("tp-cp-ep-dp-pp",))
    two = search_layouts(fabric, m, 64, 64, top=50, contention=False, cps=(1,),
                         rank_orders=("tp-cp-ep-dp-pp", "tp-dp-cp-ep-pp"))
    assert two.considered == one.considered
    assert [r.step_time_s for r in two.ranked] == [r.step_time_s for r in one.ranked]
    # an order that moves a real dimension (pp inside dp) is a layout of its own
    three = search_layouts(fabric, m, 64, 64, top=50, contention=False, cps=(1,),
                           rank_orders=("tp-cp-ep-dp-pp", "tp-cp-ep-pp-dp"))
    assert three.considered > one.considered


def _every_step_time(fabric, m, gpus: int, global_batch: int, **kw) -> list[float]:
    """The step time of every candidate that fits, each evaluated (no bound, no pruning), fastest first."""
    every = []
    for lay, _ in candidate_layouts(m, gpus, global_batch, gpus_per_domain=fabric.spec.gpus_per_domain, **kw):
        if lay is not None:
            r = estimate_step(fabric, m, lay, check=False, contention=False)
            if r.fits:
                every.append(r.step_time_s)
    return sorted(every)


def test_search_top_equals_evaluating_every_candidate(fabric):
    """Bounds, the refinement by routed DP traffic and the passes prune only what cannot enter the top."""
    kw = dict(cps=(1,), micro_batches=(1,), recompute=("none",), vpps=(1, 2))
    from_search = search_layouts(fabric, load_model("llama3-8b"), 64, 64, top=20, keep=20, contention=False, **kw)
    every = _every_step_time(fabric, load_model("llama3-8b"), 64, 64, **kw)
    assert from_search.evaluated < len(every)  # something was pruned
    assert [r.step_time_s for r in from_search.ranked] == pytest.approx(every[:20], rel=1e-12)


@pytest.mark.parametrize("fixed", [
    dict(overlap_tp=True),  # the bound must see the overlap (ignoring it would prune the best)
    dict(overlap_dp=False, overlap_cp=False, cp_comm_type="all_gather"),  # nothing hidden: the bound assumes none
    # block-wise FP8 (fp8blk35): its GEMM time ratio and quantisation bytes are in the bound's compute too (rev42)
    dict(precision="fp8", fp8_recipe="blockwise"),
])
def test_search_with_fixed_fields_equals_evaluating_every_candidate(fabric, fixed):
    """Layout fields held fixed (``topo train --search --layout``, tidy10) keep the bounds lower bounds."""
    m = load_model("llama3-8b")
    kw = dict(cps=(1, 2), micro_batches=(1,), recompute=("none",), vpps=(1, 2), **fixed)
    found = search_layouts(fabric, m, 64, 64, top=5, keep=5, contention=False, **kw)
    every = _every_step_time(fabric, m, 64, 64, **kw)
    assert found.evaluated < len(every)  # the bound pruned some
    assert [r.step_time_s for r in found.ranked] == pytest.approx(every[:5], rel=1e-12)
    for r in found.ranked:
        assert all(r.layout[k] == v for k, v in fixed.items())


def test_dp_exposed_from_routed_collectives_is_the_steps(fabric, monkeypatch):
    """Once a layout's DP groups are routed, the search's refinement is exactly the step's DP term by the overlap
    rule; before, 0. The step adds what the hidden collectives' SMs cost the compute (topo.training.comm_sms),
    which the refinement leaves out: it stays a lower bound."""
    m = load_model("llama3-70b")
    lay = ParallelLayout(tp=8, pp=2, dp=4, global_batch=64, dp_sharding="zero3", recompute="full")
    mapping = map_layout(lay, fabric.spec.gpus_per_domain, fabric.layout.num_gpus)
    sc = stage_compute(m, lay, gpu_compute(fabric.spec.gpu))
    eng = CommEngine(fabric)
    assert exposed_routed(eng, m, lay, mapping, sc)["dp"] == 0.0
    r = estimate_step(fabric, m, lay, engine=eng, contention=False)
    assert r.breakdown_s["dp"] > 0.05
    assert exposed_routed(eng, m, lay, mapping, sc)["dp"] < r.breakdown_s["dp"]
    import topo.training.step as step_module
    monkeypatch.setattr(step_module, "sm_loss_s", lambda hidden_s, full_s, reduced_s: 0.0)
    rule = estimate_step(fabric, m, lay, engine=eng, contention=False)
    assert rule.breakdown_s["dp"] < r.breakdown_s["dp"]
    assert exposed_routed(eng, m, lay, mapping, sc)["dp"] == pytest.approx(rule.breakdown_s["dp"], rel=1e-12)


@pytest.mark.parametrize("overlap", [False, True])
def test_ep_exposed_from_routed_collectives_is_the_steps(fabric, overlap, monkeypatch):
    """Once the expert all-to-alls are routed the refinement is the step's EP term without what the hidden ones
    cost the compute beside them (``step._ep_loss``: it needs the stage's compute on the GPU they leave), so a
    lower bound of it."""
    import topo.training.step as step_module
    m = load_model("qwen3-30b-a3b")
    lay = ParallelLayout(ep=32, dp=32, etp=1, global_batch=64, seq_len=4096, overlap_ep=overlap,
                         ep_dispatch_bytes=1.0)
    mapping = map_layout(lay, fabric.spec.gpus_per_domain, fabric.layout.num_gpus)
    sc = stage_compute(m, lay, gpu_compute(fabric.spec.gpu))
    eng = CommEngine(fabric)
    assert exposed_routed(eng, m, lay, mapping, sc)["ep"] is None
    real = estimate_step(fabric, m, lay, engine=eng, contention=False)
    monkeypatch.setattr(step_module, "_ep_loss", lambda *a: 0.0)
    r = estimate_step(fabric, m, lay, engine=eng, contention=False)
    got = exposed_routed(eng, m, lay, mapping, sc)["ep"]
    assert got == pytest.approx(r.breakdown_s["ep"], rel=1e-12, abs=1e-15)
    assert (got < real.breakdown_s["ep"]) if overlap else got == pytest.approx(real.breakdown_s["ep"], rel=1e-12)
    # with overlap each layer's all-to-alls (an FP8 dispatch beside BF16 ones) hide phase by phase behind the
    # partner micro-batch's attention and MLP (topo.training.ep_overlap), the first forward's and the last
    # backward's exposed whole (no pipeline), as the refinement counts
    from topo.training.ep_overlap import layer_exposed_s, moe_layer_parts
    total = sum(c.time_s for c in r.comm if c.dim == "ep")
    side = 0.0
    if overlap:
        # the tokens' all-to-alls (the two largest) pair with the probs' all-to-all (the dispatch node holds both);
        # the counts' gather runs in the attn node on the compute stream, exposed whole and beside the partner's
        # combine backward (NVIDIA/Megatron-LM@d98e8a64dd models/gpt/fine_grained_callables.py, moe/moe_layer.py)
        fp8, bf16 = sorted((x for x in r.comm if x.collective == "alltoall"), key=lambda x: x.size_bytes)[-2:]
        probs = min((x for x in r.comm if x.collective == "alltoall"), key=lambda x: x.size_bytes)
        counts = next(x for x in r.comm if x.dim == "ep" and x.collective == "all_gather")
        side = counts.exposed_s
        assert side == pytest.approx(counts.time_s, rel=1e-12)
        total = fp8.time_s + bf16.time_s + probs.time_s
        assert fp8.size_bytes == pytest.approx(bf16.size_bytes / 2)  # the 1-byte forward dispatch
        df, c = fp8.time_s / fp8.calls_per_step, bf16.time_s / bf16.calls_per_step
        pr, g = probs.time_s / probs.calls_per_step, counts.time_s / counts.calls_per_step
        n, mb = 48, lay.microbatches  # Qwen3 30B-A3B: 48 MoE layers (config.json)
        parts = moe_layer_parts(m, lay, gpu_compute(fabric.spec.gpu))
        paired = layer_exposed_s(replace(parts, attn_f=parts.attn_f + g), df + pr, c + pr, c, c)
        exposed = n * ((mb - 1) * paired + (df + 3 * c + 2 * pr))
        assert exposed > max(0.0, total - r.breakdown_s["compute"])  # more than one window for the step exposes
    want = exposed + side if overlap else total
    assert r.breakdown_s["ep"] == pytest.approx(want, rel=1e-12, abs=1e-15)
    if not overlap:
        assert r.breakdown_s["ep"] == pytest.approx(total, rel=1e-12) and total > 0.01


def test_layout_keys_separate_what_each_cache_reads():
    """One ``model_dump`` gives the memory, bound and done keys: the bound ignores only the data-parallel sharding
    fields, the done key tells rank orders apart, the memory key does not."""
    from topo.training.search import _keys

    base = dict(tp=2, pp=2, dp=4, global_batch=64, recompute="none", dp_sharding="zero1")
    a = _keys(ParallelLayout(**base, rank_order="tp-cp-ep-dp-pp"))
    assert a == _keys(ParallelLayout(**base, rank_order="tp-cp-ep-dp-pp"))
    order = _keys(ParallelLayout(**base, rank_order="tp-cp-ep-pp-dp"))
    assert order[0] == a[0] and order[1] == a[1] and order[2] != a[2]
    shard = _keys(ParallelLayout(**{**base, "dp_sharding": "zero3"}, rank_order="tp-cp-ep-dp-pp"))
    assert shard[0] != a[0] and shard[1] == a[1] and shard[2] != a[2]
    recompute = _keys(ParallelLayout(**{**base, "recompute": "full"}, rank_order="tp-cp-ep-dp-pp"))
    assert all(x != y for x, y in zip(recompute, a))


@pytest.mark.parametrize("efficiency", [None, 0.5])
def test_ep_overlap_bound_prices_the_layer_on_the_searchs_gpu(efficiency, monkeypatch):
    """The refinement's EP overlap splits each MoE layer's compute on the GPU the search runs (its efficiency and
    the spec's ``server.host_cpu``), so it gives the step's EP term (without the hidden all-to-alls' cost to the
    compute beside them, ``step._ep_loss``, which it leaves out); priced on the catalog GPU (the generation's
    efficiency, not the search's 0.5) the phases' compute shrank and the bound exceeded the step it bounds."""
    import topo.training.step as step_module
    fab = topo.build_fabric(topo.load_spec("dgx-h100-superpod", ["cluster.num_units=1", "server.host_cpu=grace"]))
    m = load_model("qwen3-30b-a3b")
    lay = ParallelLayout(ep=32, dp=32, etp=1, global_batch=64, seq_len=4096, overlap_ep=True, ep_dispatch_bytes=1.0)
    mapping = map_layout(lay, fab.spec.gpus_per_domain, fab.layout.num_gpus)
    gpu = gpu_compute(fab.spec.gpu, efficiency, host_cpu="grace")
    sc = stage_compute(m, lay, gpu)
    eng = CommEngine(fab)
    real = estimate_step(fab, m, lay, engine=eng, contention=False, efficiency=efficiency)
    monkeypatch.setattr(step_module, "_ep_loss", lambda *a: 0.0)
    r = estimate_step(fab, m, lay, engine=eng, contention=False, efficiency=efficiency)
    assert r.host_cpu["name"] == "grace" and 0 < r.breakdown_s["ep"] < real.breakdown_s["ep"]
    want = r.breakdown_s["ep"]
    assert exposed_routed(eng, m, lay, mapping, sc, gpu)["ep"] == pytest.approx(want, rel=1e-12)
    if efficiency is None:  # the default GPU is the spec's, with its host CPU
        assert exposed_routed(eng, m, lay, mapping, sc)["ep"] == pytest.approx(want, rel=1e-12)


def test_a_search_skips_layouts_whose_tp_groups_straddle_nvl72_racks():
    # walk6: `topo train gb200-nvl72-superpod --model llama3-70b --search --global-batch 512` (every GPU: 72 of each
    # rack) stopped at "error: --tp: a TP group of 16 GPUs spans 2 NVLink domains of 72": one candidate's
    # placement failed inside the search instead of the candidate being left out
    import json

    from conftest import run_cli

    fabric = topo.build_fabric(topo.load_spec("gb200-nvl72-superpod"))
    straddles = ParallelLayout(tp=16, pp=4, dp=fabric.num_gpus // 64, global_batch=512, gpus_per_domain_used=72)
    with pytest.raises(topo.TopoError, match="spans 2 NVLink domains of 72"):
        map_layout(straddles, 72, fabric.num_gpus)  # 72 / 16 is not whole: the 5th group takes 8 + 8
    p = run_cli("train", "gb200-nvl72-superpod", "--model", "llama3-70b", "--search", "--global-batch", "512",
                "--top", "3", "--gpus", "2304", "--json")  # tidy122: every GPU by --gpus (the fill is 64 a rack)
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
    assert len(d["ranked"]) == 3 and d["gpus"] == fabric.num_gpus == 2304
    for r in d["ranked"]:
        lay = ParallelLayout(**{k: v for k, v in r["layout"].items() if k not in ("gpus", "microbatches", "edp")})
        assert 72 % lay.tp == 0 and map_layout(lay, 72, fabric.num_gpus).domains_spanned("tp") == 1


def test_dp_refinement_before_tp_is_routed_is_the_least_dp_exposure(fabric, monkeypatch):
    """tp35: the DP windows widen by the NVLink-only exposed TP time (a TP8 group inside a node beside a DP group
    across 4 nodes); with the DP groups routed and TP not, the refinement cannot know that time and takes the
    widest windows: ZeRO-3's least exposure, the first unit's gather and the last unit's reduce-scatter of each
    micro-batch (``m x`` a call each), at or below the step's; once TP is routed, the step's exact DP term."""
    from topo.training.step import step_traffic, traffic_stage

    m = load_model("llama3-70b")
    lay = ParallelLayout(tp=8, pp=2, dp=4, global_batch=64, dp_sharding="zero3", recompute="full")
    mapping = map_layout(lay, fabric.spec.gpus_per_domain, fabric.layout.num_gpus)
    sc = stage_compute(m, lay, gpu_compute(fabric.spec.gpu, host_cpu=fabric.spec.host_cpu[0]))
    eng = CommEngine(fabric)
    dp_items = [it for it in step_traffic(m, lay, traffic_stage(lay, sc)) if it["dim"] == "dp"]
    least = sum(lay.microbatches * eng.time(it["collective"], mapping.groups(it["groups"]), it["size_bytes"]).time_s
                for it in dp_items)  # routes the DP groups only
    early = exposed_routed(eng, m, lay, mapping, sc)
    assert early["tp"] is None and {it["phase"] for it in dp_items} == {"gather_unit", "reduce_unit"}
    assert early["dp"] == pytest.approx(least, rel=1e-12)
    r = estimate_step(fabric, m, lay, engine=eng, contention=False)
    assert r.breakdown_s["tp"] > 0 and early["dp"] < r.breakdown_s["dp"]
    import topo.training.step as step_module
    monkeypatch.setattr(step_module, "sm_loss_s", lambda hidden_s, full_s, reduced_s: 0.0)
    rule = estimate_step(fabric, m, lay, engine=eng, contention=False)
    late = exposed_routed(eng, m, lay, mapping, sc)
    # the routed TP term leaves out what the hidden TP exchanges' SMs cost their GEMMs (step._add_sm_losses,
    # tpsm99), as the DP term leaves out DP's: the step's rule without those charges
    assert late["tp"] == pytest.approx(rule.breakdown_s["tp"], rel=1e-12) and late["tp"] < r.breakdown_s["tp"]
    assert late["dp"] == pytest.approx(rule.breakdown_s["dp"], rel=1e-12) and late["dp"] >= early["dp"]
    # the step's TP (2.0 s over 4 micro-batches) widens the windows past every gather: the least exposure
    monkeypatch.setattr(step_module, "_nvlink_exposed_s", lambda items: 0.0)
    assert exposed_routed(eng, m, lay, mapping, sc)["dp"] > late["dp"]


def _bound_cases():
    # dense with TP inside a node and DP across nodes (ZeRO-1 and ZeRO-3, TP overlap on and off, CP 2 inside or
    # across nodes; Llama 3 70B's TP8 CP2 layouts without recomputation are where the widening moves the DP term
    # most), MoE with EP inside a node and its experts' DP across nodes
    dense = dict(cps=(1, 2), micro_batches=(1, 2), vpps=(1, 2), dp_sharding=("zero1", "zero3"))
    return [("llama3-8b", dense), ("llama3-8b", dict(dense, overlap_tp=True)),
            ("llama3-70b", dict(cps=(1, 2), micro_batches=(1,), vpps=(1, 2), dp_sharding=("zero3",))),
            # every dispatcher (bound62: the refinement reads the step's host waits; seed 35 draws tp4 dp16 ep8
            # zero3 flex/DeepEP, whose refinement was above its step before)
            ("qwen3-30b-a3b", dict(cps=(1,), micro_batches=(1,), vpps=(1,), dp_sharding=("zero1", "zero3"),
                                   etps=(1,))),
            # delayed FP8 scaling: the bound holds the amax reductions' kernel gaps (tidy53), the step those and the
            # all-reduce over tp x dp x cp (docs/calibration-findings.md section 190)
            ("llama3-8b", dict(dense, precision="fp8", fp8_recipe="delayed"))]


@pytest.mark.parametrize("case", _bound_cases(),
                         ids=lambda c: c[0] + ("-tp-overlap" if "overlap_tp" in c[1] else "")
                         + ("-fp8-delayed" if "fp8_recipe" in c[1] else ""))
def test_bound_and_refined_bound_stay_below_the_step_on_random_layouts(fabric, case):
    """The search's bound and its refinement (read after the step routed every group, the tightest it gets) are
    at or below the step (no traffic mix) on 12 layouts drawn at random of 64 GPUs, the NVLink-only exposed TP
    and CP now widening the step's DP windows (tp35; section 74's check, as a test); so are the refinement's DP
    and CP terms (without the widening, Llama 3 70B TP8 CP2 PP4's routed DP was 2.47 s against the step's 1.30)."""
    import random

    from topo.training.mapping import default_placement
    from topo.training.search import _Search, _keys

    name, kw = case
    m = load_model(name)
    gpu = gpu_compute(fabric.spec.gpu, host_cpu=fabric.spec.host_cpu[0])
    s = _Search(fabric, m, CommEngine(fabric), gpu, 5, dict(convention="6n", efficiency=None), None, None)
    every = [lay for lay, _ in candidate_layouts(m, 64, 64, gpus_per_domain=fabric.spec.gpus_per_domain, **kw)
             if lay is not None]
    tight = widened = 0
    for lay in random.Random(35).sample(every, 12):
        lay, _ = default_placement(lay, fabric.spec.gpus_per_domain, fabric.layout.num_gpus)
        keys = _keys(lay)
        bound, _ = s.bound_of(lay, keys)
        if bound is None:
            continue
        r = estimate_step(fabric, m, lay, engine=s.engine, check=False, contention=False)
        refined = s.refined(lay, bound, keys)
        assert bound <= refined <= r.step_time_s * (1 + 1e-12), lay.describe()
        mapping = map_layout(lay, fabric.spec.gpus_per_domain, fabric.layout.num_gpus)
        sc = s.bound_cache[keys[1]][1]
        # a dropless MoE's step waits on the host (the bound's compute does not), which widens every window: the
        # refinement reads the routed terms on the step's own compute (the waits at the step's routed EP cover)
        own = s.waited(lay, sc, keys[1], routed_ep_cover_s(s.engine, m, lay, mapping))
        got = exposed_routed(s.engine, m, lay, mapping, own, gpu)
        wait = r.breakdown_s["compute"] - lay.microbatches * own.microbatch_s
        assert got["cp"] <= r.breakdown_s["cp"] * (1 + 1e-12)
        if wait == pytest.approx(0.0, abs=1e-12):  # the step paced by this stage
            assert got["dp"] <= r.breakdown_s["dp"] * (1 + 1e-12)
        if name.startswith("llama"):
            assert own is sc and wait == pytest.approx(0.0, abs=1e-12)
        tight = max(tight, refined / r.step_time_s)
        widened += r.breakdown_s["tp"] > 0 and any(c.domains_per_group > 1 for c in r.comm if c.dim == "dp")
    assert widened and tight > 0.9  # the widening was exercised, and the refinement stays close


def test_search_with_tp_widening_equals_evaluating_every_candidate(fabric):
    """The best layouts of a search (ZeRO-3 only: every layout's DP windows widen by its TP) are those of
    evaluating every candidate."""
    m = load_model("llama3-8b")
    kw = dict(cps=(1, 2), micro_batches=(1,), recompute=("full",), vpps=(1,), dp_sharding=("zero3",))
    found = search_layouts(fabric, m, 64, 64, top=20, keep=20, contention=False, **kw)
    every = _every_step_time(fabric, m, 64, 64, **kw)
    assert found.evaluated < len(every)
    assert [r.step_time_s for r in found.ranked] == pytest.approx(every[:20], rel=1e-12)


def test_layouts_sharing_a_compute_bound_share_their_compute(fabric):
    """The search caches a compute bound per layout less its data-parallel sharding fields (``_BOUND_DROP``);
    FSDP2's unit copies (misc46, :mod:`topo.training.fsdp2_copies`) run only under ZeRO-3, so the sharding now
    reaches the compute: with a ZeRO-3 layout's bound cached first, its ZeRO-1 twin (Llama 3 8B, 8 H100, FSDP2
    gradients, GBS 64 of 4k) took the ZeRO-3 copies' bound, 3.34 s, against its own step of 3.20 s, and could be
    pruned. Layouts with one bound key have one stage compute, and each bound stays below its step."""
    import math

    from topo.training.mapping import default_placement
    from topo.training.search import _Search, _keys

    m = load_model("llama3-8b")
    gpu = gpu_compute(fabric.spec.gpu, host_cpu=fabric.spec.host_cpu[0])
    base = dict(tp=1, dp=8, global_batch=64, micro_batch=1, seq_len=4096, weight_bytes=2.0, grad_bytes=2.0)
    computes: dict = {}
    for wgrad in ("main_grad", "fsdp2"):
        for sharding in ("zero1", "zero2", "zero3", "fsdp"):
            lay = ParallelLayout(**base, wgrad_output=wgrad, dp_sharding=sharding)
            computes.setdefault(_keys(lay)[1], set()).add(round(stage_compute(m, lay, gpu, math.inf).microbatch_s, 12))
    assert len(computes) == 3 and all(len(c) == 1 for c in computes.values()), computes
    s = _Search(fabric, m, CommEngine(fabric), gpu, 5, dict(convention="6n", efficiency=None), None, None)
    for sharding in ("zero3", "zero1"):  # ZeRO-3's bound cached first
        lay, _ = default_placement(ParallelLayout(**base, wgrad_output="fsdp2", dp_sharding=sharding),
                                   fabric.spec.gpus_per_domain, fabric.layout.num_gpus)
        bound, _ = s.bound_of(lay, _keys(lay))
        step = estimate_step(fabric, m, lay, engine=s.engine, check=False, contention=False).step_time_s
        assert bound <= step * (1 + 1e-12), (sharding, bound, step)


def test_the_bound_holds_the_amax_reductions_kernels(fabric):
    """tidy53: under delayed FP8 scaling the step's ``fp8_amax`` line holds, whatever the group, the launch gaps of
    two kernels (concatenation, fused update) per reduction, 2 reductions (forward, backward) per model chunk and
    micro-batch (TE ``fp8.py`` @bee4649c ``reduce_and_update_fp8_tensors``, section 190); the search's bound holds
    that floor, raised through the bubble as the step's is, and stays at or below the step."""
    from topo.training.fp8_amax import amax_kernels_s, fp8_amax_table
    from topo.training.search import _Search, _keys

    m = load_model("llama3-8b")
    gpu = gpu_compute(fabric.spec.gpu, host_cpu=fabric.spec.host_cpu[0])
    s = _Search(fabric, m, CommEngine(fabric), gpu, 5, dict(convention="6n", efficiency=None), None, None)
    on = ParallelLayout(tp=2, pp=2, vpp=2, dp=16, global_batch=64, precision="fp8", fp8_recipe="delayed")
    off = on.model_copy(update={"fp8_amax_reduction": False})
    gap_s = gpu.kernels.launch_gpu_s
    floor = 2 * on.microbatches * on.vpp * fp8_amax_table()["kernels_per_reduction"] * gap_s
    assert amax_kernels_s(on, gap_s) == pytest.approx(floor, rel=1e-12) and amax_kernels_s(off, gap_s) == 0.0
    b_on, _ = s.bound_of(on, _keys(on))
    b_off, _ = s.bound_of(off, _keys(off))
    assert b_on - b_off >= floor * (1 - 1e-9)  # the line itself, and the bubble's share of it on top
    r = estimate_step(fabric, m, on, engine=s.engine, check=False, contention=False)
    assert r.breakdown_s["fp8_amax"] >= floor and b_on <= s.refined(on, b_on, _keys(on)) <= r.step_time_s


def test_a_layout_left_out_of_the_pool_still_enters_the_mixed_top():
    """walk23: DeepSeek-V3 on 7,168 GB200 (112 NVL72 racks at 64 a rack), FP8, DeepEP, global batch 14,336. Alone,
    ZeRO-3 layouts are fastest (2.41-2.47 s) and filled the pool of max(top + 2, 5) = 6; mixed, their per-layer
    gathers share links and they slow to 2.79 s and more, while TP1 PP2 VPP4 EP64 with gradients sharded (2.671 s
    alone, outside the pool) steps in 2.686 s mixed. The search ranked 2.789 s first; a mix only slows, so the pool
    must hold every layout alone below the top-th mixed time (search.py ``_Search.widen``)."""
    fabric = topo.build_fabric(topo.load_spec("gb200-nvl72-superpod", ["cluster.num_units=112"]))
    model = load_model("deepseek-v3-671b")
    res = search_layouts(fabric, model, 7168, 14336, top=4, precision="fp8", ep_dispatcher="deepep")
    lay = make_layout(tp=1, pp=2, vpp=4, dp=3584, ep=64, global_batch=14336, precision="fp8", ep_dispatcher="deepep",
                      dp_sharding="fsdp_grad_op")
    mixed = estimate_step(fabric, model, lay)
    best = res.ranked[0]
    assert best.step_time_s <= mixed.step_time_s * (1 + 1e-9)
    # the layout walk23 found outside the pool enters the mixed top. (The check was "the best is not ZeRO-3 at
    # micro-batch 2", the pool's best mixed then; since tidy76 prices the TP-replicated gradients' all-reduce,
    # DeepSeek-V3's duplicated MLA down projections, the TP2 ZeRO-3 layout that ranked first pays ~8 ms and
    # ZeRO-3 at micro-batch 2, TP1, is the best mixed: 2.9093 s against 2.9143 s for this one)
    assert any(r.layout["dp_sharding"] == "fsdp_grad_op" and (r.layout["pp"], r.layout["vpp"], r.layout["tp"])
               == (2, 4, 1) and r.step_time_s == pytest.approx(mixed.step_time_s, rel=1e-9) for r in res.ranked)
    assert all(a.step_time_s <= b.step_time_s for a, b in zip(res.ranked, res.ranked[1:]))
