"""What the search shares across its candidates to stay fast (fast62): a shape's memory across the three expert
dispatchers (they differ only in the flex dispatcher's buffer and NCCL's), and a routed collective's time asked again with
``cached_only``."""

import itertools
import math
import random
from dataclasses import replace

import numpy as np
import topo
from topo.training import mapping as mp
from topo.training.comm import CommEngine
from topo.training.ep_buffers import ep_buffer_bytes
from topo.training.memory import memory_per_gpu
from topo.training.gpus import gpu_compute
from topo.training.model import load_model
from topo.training.nccl_buffers import nccl_buffer_bytes
from topo.training.operators import rank_computes, rank_computes_at
from topo.training.search import SKIPPED, _keys, candidate_layouts, expert_dispatchers


def _moe_layouts(model, gpus, dom, n, seed):
    """``n`` random MoE layouts of ``model`` on ``gpus`` GPUs with ep x etp > 1 (the all-to-all dispatcher's: the
    enumeration tries it first)."""
    lays = [lay for lay, _ in itertools.islice(candidate_layouts(model, gpus, gpus, gpus_per_domain=dom), 40000)
            if lay is not None and lay.ep * lay.expert_tp > 1 and lay.ep_dispatcher == "alltoall"]
    return random.Random(seed).sample(lays, min(n, len(lays)))


def test_a_shapes_memory_differs_by_dispatcher_only_in_the_flex_buffer():
    """DeepSeek-V3 on 1,024 H100 (NVLink domains of 8): for random layouts, the memory with each dispatcher is the
    all-to-all's with the flex dispatcher's buffer (:func:`.ep_buffers.ep_buffer_bytes`) and NCCL's buffers (the
    flex dispatcher's EP exchanges open no NCCL channels, :func:`.nccl_buffers.nccl_buffer_bytes`) in their place,
    so the search keys a shape's memory without the dispatcher (``_keys``' first hash) and replaces those two
    fields, as it does across rank orders (NCCL's buffers alone)."""
    model, dom, cap = load_model("deepseek-v3-671b"), 8, 80e9
    checked = 0
    for lay in _moe_layouts(model, 1024, dom, 40, seed=62):
        base = memory_per_gpu(model, lay, cap, generation="hopper", gpus_per_domain=dom)
        for fields in expert_dispatchers(model, {})[1:]:
            try:
                other = lay.model_copy(update=fields)
                buf = ep_buffer_bytes(model, other, dom)
            except ValueError:  # DeepEP has no config for this EP size (check_layout rejects it in a search)
                continue
            got = memory_per_gpu(model, other, cap, generation="hopper", gpus_per_domain=dom)
            nccl = nccl_buffer_bytes(other, True, dom)
            assert got == replace(base, nccl_bytes=nccl, ep_buffers_bytes=buf), (lay.describe(), fields)
            assert _keys(other)[0] == _keys(lay)[0]
            assert _keys(other)[1] != _keys(lay)[1] and _keys(other)[2] != _keys(lay)[2]  # the bound and the
            checked += 1  # layout itself still tell the dispatchers apart
    assert checked >= 30


def test_keys_tell_every_other_shape_field_apart():
    """The memory key drops the dispatcher alone: a layout differing in any other shape field (here the
    micro-batch, recomputation, sharding) has another memory key."""
    model = load_model("deepseek-v3-671b")
    lay = _moe_layouts(model, 1024, 8, 1, seed=1)[0]
    for fields in ({"micro_batch": lay.micro_batch * 2}, {"recompute": "none" if lay.recompute == "full" else "full"},
                   {"dp_sharding": "zero1" if lay.dp_sharding == "zero3" else "zero3"}):
        other = lay.model_copy(update=fields)
        assert _keys(other)[0] != _keys(lay)[0], fields
        assert _keys(other)[2] != _keys(lay)[2], fields


def test_cached_only_answers_a_routed_collective_with_its_time():
    """Once routed, ``cached_only`` answers with the time :meth:`CommEngine.time` gave (the same object: a search
    asks it thousands of times and no longer re-reads the curve), and before routing still None."""
    f = topo.build_fabric(topo.load_spec("dgx-h100-superpod"))
    eng = CommEngine(f)
    M = np.arange(64).reshape(-1, 8)
    assert eng.time("all_gather", M, 2e6, cached_only=True) is None
    t = eng.time("all_gather", M, 2e6)
    calls = eng.engine_calls
    assert eng.time("all_gather", M, 2e6, cached_only=True) is t
    assert eng.time("all_gather", M.copy(), 2e6, cached_only=True) == t
    assert eng.engine_calls == calls


def test_spans_kept_after_the_mapping_is_dropped_are_the_groups_own():
    """DeepSeek-V3's layouts on 1,024 H100 mapped in turn (more than :data:`.mapping.MAPS_KEPT`, so each is built
    again when asked again): every dimension's span and members per domain, read again from the kept scalars, equal
    those of its group matrix built afresh (``_widest_span``, ``_fewest_members_in_domain``)."""
    model, dom = load_model("deepseek-v3-671b"), 8
    lays = _moe_layouts(model, 1024, dom, 24, seed=7)
    dims = ("tp", "cp", "dp", "pp", "ep", "etp", "edp")
    first = {id(lay): [mp.map_layout(lay, dom, 1024).domains_spanned(d) for d in dims] for lay in lays}
    assert len({mp._map_key(lay, dom, 1024) for lay in lays}) > mp.MAPS_KEPT
    for lay in lays:
        m = mp.map_layout(lay, dom, 1024)
        fresh = mp._map(lay, dom, 1024)
        assert [m.domains_spanned(d) for d in dims] == first[id(lay)] == [
            mp._widest_span(fresh.groups(d), dom) for d in dims]
        assert [m.members_in_domain(d) for d in dims] == [
            mp._fewest_members_in_domain(fresh.groups(d), dom) for d in dims]


def test_later_passes_build_only_the_places_wanted():
    """``candidate_layouts``' ``wanted`` (the search's later passes, by each candidate's place in the first walk):
    the same places hold the same layouts, and a place not wanted is yielded unbuilt as ``SKIPPED``, so the
    places of one walk and the next agree."""
    model = load_model("qwen3-30b-a3b")
    every = list(candidate_layouts(model, 64, 64, gpus_per_domain=8))
    some = list(candidate_layouts(model, 64, 64, gpus_per_domain=8, wanted=lambda i: i % 3 == 0))
    assert len(some) == len(every) > 100
    for i, ((lay, why), (got, got_why)) in enumerate(zip(every, some)):
        if i % 3 == 0:
            assert (got, got_why) == (lay, why)
        elif lay is not None:
            assert (got, got_why) == (None, SKIPPED)
    assert sum(got_why == SKIPPED for _, got_why in some) > 50


def _fields(sc):
    return (sc.busiest, list(sc.stage_s), sc.forward_s, sc.backward_s, sc.recompute_s, sc.by_module_s, sc.blocks)


def test_ranks_priced_at_several_covers_are_each_covers_own():
    """``rank_computes_at`` prices a layout's rows once and reads the host's waits per cover (the search's bound
    takes covers inf and 0 together): each cover's ranks equal ``rank_computes`` at that cover alone, for random
    dropless Qwen3-30B-A3B layouts on 64 H100 (their waits differ by cover: checked)."""
    model, gpu = load_model("qwen3-30b-a3b"), gpu_compute("H100")
    covers, differ = (math.inf, 0.0, 2e-3), 0
    for lay in _moe_layouts(model, 64, 8, 12, seed=3):
        together = rank_computes_at(model, lay, gpu, covers, {})
        for c, got in zip(covers, together):
            alone = rank_computes(model, lay, gpu, c)
            assert [_fields(r) for r in got] == [_fields(r) for r in alone], (lay.describe(), c)
        differ += together[0][0].forward_s != together[1][0].forward_s
    assert differ >= 6
