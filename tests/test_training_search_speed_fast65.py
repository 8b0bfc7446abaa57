"""Issue 23's 100k search (fast65): what the hot path now keeps gives what it gave.

``operators.bf16_layers`` keeps each stage's BF16 flags by the placement (``operators.pipeline_key``) and the
BF16 layer counts; ``step.pace_stages`` keeps its stages by the placement and those flags (the search's NVLS check
asked both ~27k times for a few hundred placements); ``operators.rank_computes_at`` shares each unit's host-wait
terms across a layout's stages at one cover; ``operators.block_time_key`` reads the layout's fields without
``model_dump``; ``memory.bf16_kept_params`` is kept with the stage's other parameters (``memory._stage_rows``)."""

import math

import pytest

from topo.training.gpus import gpu_compute
from topo.training.grad_hooks import ddp_hooks_run
from topo.training.memory import bf16_kept_params
from topo.training.model import load_model
from topo.training.fsdp2_copies import copies_units
from topo.training.operators import (END_UNITS, BLOCK_TIME_UNREAD, DISPATCHER_FIELDS, _stage_row, bf16_layers, block_time,
                                     block_time_key, layer_numbers, pipeline_units, rank_computes_at,
                                     rank_stages)
from topo.training.parallel import make_layout
from topo.training.search import candidate_layouts, expert_dispatchers
from topo.training.unit_params import unit_bf16_params
from topo.training.step import _stage_key, pace_stages


def _fp8(**kw):
    return make_layout(tp=2, pp=4, dp=8, ep=8, global_batch=512, precision="fp8", **kw)


def _flags_afresh(model, lay):
    start, end, n = lay.num_layers_at_start_in_bf16, lay.num_layers_at_end_in_bf16, model.layers
    on = lay.precision == "fp8" and (start or end)
    return [[bool(on) and isinstance(i, int) and (i < start or i >= n - end) for i in units]
            for units in layer_numbers(model, lay)]


def _pace_afresh(model, lay):
    stages, flags, seen = pipeline_units(model, lay), _flags_afresh(model, lay), {}
    for i in range(len(stages)):
        seen.setdefault(_stage_key(stages, flags, i), i)
    return list(seen.values())


def test_bf16_flags_kept_apart_by_the_counts_and_the_precision():
    """One placement under five BF16 settings, asked in turn: each gets its own flags (a key that dropped the
    start or end count, or the precision, would hand the first one's to the next), equal to those computed afresh.
    Closed form (Megatron-Core's ``get_fp8_context``: ``layer_no >= num_layers - num_layers_at_end_in_bf16``):
    DeepSeek-V3's 61 layers over pp 4 hold 16/15/15/15 (layers 0-15, 16-30, 31-45, 46-60), so the last 20
    (41-60) are 5 on stage 2 and 15 on stage 3; the first 3 are stage 0's."""
    model = load_model("deepseek-v3-671b")
    lays = [_fp8(), _fp8(num_layers_at_end_in_bf16=20), _fp8(num_layers_at_start_in_bf16=3),
            _fp8(num_layers_at_start_in_bf16=3, num_layers_at_end_in_bf16=20),
            make_layout(tp=2, pp=4, dp=8, ep=8, global_batch=512, num_layers_at_end_in_bf16=20)]
    got = [bf16_layers(model, lay) for lay in lays]
    for lay, flags in zip(lays, got):
        assert flags == _flags_afresh(model, lay)
    assert [[sum(s) for s in f] for f in got] == [[0, 0, 0, 0], [0, 0, 5, 15], [3, 0, 0, 0], [3, 0, 5, 15],
                                                  [0, 0, 0, 0]]


def test_bf16_flags_are_the_callers_own():
    """A caller that edits the flags it got does not change what the next caller gets."""
    model, lay = load_model("deepseek-v3-671b"), _fp8(num_layers_at_end_in_bf16=20)
    first = bf16_layers(model, lay)
    first[2][:] = [True] * len(first[2])
    first.append([True])
    assert bf16_layers(model, lay) == _flags_afresh(model, lay)


def test_pace_stages_kept_apart_by_the_flags():
    """Stages 1 and 2 hold 15 MoE layers each: alike (one pace stage) in FP8 throughout, apart once the last 20
    layers run in BF16 (5 of stage 2's); asked in that order the second must not get the first's [0, 1, 3]. Each
    equals the stages found afresh; a caller's edit does not reach the next caller."""
    model = load_model("deepseek-v3-671b")
    plain, tail = _fp8(), _fp8(num_layers_at_end_in_bf16=20)
    assert pace_stages(model, plain) == [0, 1, 3] == _pace_afresh(model, plain)
    assert pace_stages(model, tail) == [0, 1, 2, 3] == _pace_afresh(model, tail)
    pace_stages(model, tail).append(9)
    assert pace_stages(model, tail) == [0, 1, 2, 3]


@pytest.mark.parametrize("padded", [None, 1.0])
def test_unit_terms_shared_across_stages_not_across_covers(padded):
    """DeepSeek-V3 on pp 4, 1,024-token sequences (short: the host paces the padded backward), FP8 with its last
    20 layers in BF16, full recomputation of each stage's first 3
    layers: a unit (an MoE layer, BF16 or not) is fully recomputed on one stage's first layers and not further on,
    and its terms differ by cover; dropless (the host syncs) or padded to capacity 1 (no sync: a fully
    recomputed MoE layer's replay is in the backward's balance, one not recomputed adds nothing). Each rank's
    compute at three covers equals its stage priced alone at that cover (no shared terms), bit for bit; a share
    that dropped whether the unit is recomputed, or that one cover's terms served another, would give another
    wait."""
    model, gpu = load_model("deepseek-v3-671b"), gpu_compute("H100")
    lay = make_layout(tp=2, pp=4, dp=8, ep=8, global_batch=512, seq_len=1024, precision="fp8",
                      num_layers_at_end_in_bf16=20, recompute="full", recompute_num_layers=3,
                      moe_capacity_factor=padded)
    units, flags = pipeline_units(model, lay), bf16_layers(model, lay)
    lay_bf16 = lay.model_copy(update={"precision": "bf16"})

    def bt(kind, bf16=False):
        return block_time(model, lay_bf16 if bf16 else lay, gpu, kind)

    covers = (math.inf, 0.0, 2e-4)
    shared = rank_computes_at(model, lay, gpu, covers, {})
    for cover, ranks in zip(covers, shared):
        alone = [_stage_row(lay, u, fl, bt, cover) for u, fl in zip(units, flags)]
        by_stage = {sc.busiest: sc for sc in ranks}
        assert [by_stage[i].forward_s for i in range(4)] == [r[0] for r in alone], cover
        assert [by_stage[i].backward_s for i in range(4)] == [r[1] for r in alone], cover
        assert [by_stage[i].by_module_s for i in range(4)] == [r[5] for r in alone], cover
    # the covers give other forward waits (the check above can fail when one cover's terms serve another)
    assert len({ranks[0].forward_s for ranks in shared}) == 3


def test_block_time_key_is_the_dumped_fields_less_the_unread():
    """The key read from the layout's fields as it holds them equals the one read through ``model_dump`` (the
    previous form), for a sample of the 100k search's layouts with each dispatcher, MoE block or not."""
    model = load_model("deepseek-v3-671b")
    seen = 0
    for i, (shape, _) in enumerate(candidate_layouts(model, 1024, 1024, gpus_per_domain=8)):
        if shape is None or i % 53:
            continue
        for fields in expert_dispatchers(model, {}):
            lay = shape.model_copy(update=fields)
            for moe in (True, False):
                d = lay.model_dump()
                for k in BLOCK_TIME_UNREAD + (() if moe else DISPATCHER_FIELDS):
                    d.pop(k, None)
                dumped = tuple(sorted((k, tuple(v) if isinstance(v, list) else v) for k, v in d.items()))
                m = lay.microbatches if lay.wgrad_output == "autograd" else None  # autograd_add_bytes reads it
                assert block_time_key(lay, moe) == (dumped, copies_units(lay), lay.pp == 1, ddp_hooks_run(lay), m)
            seen += 1
    assert seen > 60


def test_bf16_kept_params_kept_with_the_stage_rows():
    """The parameters outside FP8 linears per pipeline rank equal those summed afresh (``unit_bf16_params`` of each
    unit), under 1F1B (pp 4 and 1) and DualPipe (a rank holds two stages); closed form: DeepSeek-V3's stage 0 over
    tp 2, the embedding 129,280 x 7,168 / 2, then 16 layers' input norm (7,168) and latents' norms (1,536 + 512),
    3 dense MLPs' norm and 13 MoE blocks' norm and router (256 x 7,168), all whole on each TP rank; DualPipe's
    rank 0 holds the last stage's logits and MTP head beside its embedding, which the head shares there, as many
    as 1F1B's last stage's (the head with its own copy of the embedding)."""
    model = load_model("deepseek-v3-671b")
    lays = [make_layout(pp=4, tp=2, dp=8, ep=8, global_batch=512),
            make_layout(pp=4, tp=2, dp=8, ep=8, global_batch=512, pipeline_schedule="dualpipe"),
            make_layout(pp=1, tp=4, dp=8, ep=8, global_batch=512)]
    got = [bf16_kept_params(model, lay) for lay in lays]
    for lay, kept in zip(lays, got):
        stages, fresh = pipeline_units(model, lay), []
        for held in rank_stages(lay):
            units = [u for i in held for u in stages[i]]
            fresh.append(sum(unit_bf16_params(model, lay, u, "embedding" in units) for u in units))
        assert kept == fresh
    h = 7168
    assert got[0][0] == 129280 * h / 2 + 16 * (h + 1536 + 512) + 3 * h + 13 * (256 * h + h)
    ends = [sum(unit_bf16_params(model, lays[i], u, "embedding" in units) for u in units if u in END_UNITS)
            for i, units in ((0, pipeline_units(model, lays[0])[3]),
                             (1, pipeline_units(model, lays[1])[0] + pipeline_units(model, lays[1])[3]))]
    assert ends[0] == ends[1] > 129280 * h / 2
