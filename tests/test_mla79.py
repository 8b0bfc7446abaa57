"""Megatron-Core builds an MLA model without userbuffers (issue 29, findings section 372, mla79).

``TELinear.__init__`` sets ``self.config.tp_comm_overlap = False`` for a buffer name other than ``qkv``, ``proj``,
``fc1``, ``fc2`` (NVIDIA/Megatron-LM@d98e8a64 ``megatron/core/extensions/transformer_engine.py`` lines 1176-1187),
on the config every layer shares (``transformer_block.py`` lines 347-350); MLA's first down projection
(``q_down_proj``, ``multi_latent_attention.py`` line 537) is such a linear, so the model's TP linears built after it
have no userbuffers. topo prices an MLA model's TP collectives under ``overlap_tp`` as without it
(:func:`topo.training.tp_overlap.userbuffers_built`), but for the one ``linear_proj`` a pipeline rank built before
that down projection (``multi_latent_attention.py`` line 221), which keeps its userbuffers (small29, section 380:
:func:`topo.training.tp_overlap.first_proj_userbuffers`).
"""

import pytest

import topo
from topo.training.model import load_model
from topo.training.operators import block_ops
from topo.training.parallel import make_layout
from topo.training.step import estimate_step, step_traffic, tp_ring_steps
from topo.training.tp_overlap import pass_margins, userbuffers_built, userbuffers_on

STAGE = 4  # a middle stage of PP 8: layers only


def _layout(**kw):
    return make_layout(**{"tp": 2, "pp": 8, "dp": 8, "ep": 8, "global_batch": 64, "seq_len": 4096, **kw})


@pytest.fixture(scope="module")
def fabric():
    return topo.build_fabric(topo.load_spec("dgx-h100-superpod", []))


def test_an_mla_model_is_built_without_userbuffers_a_gqa_one_with():
    """The rule reads the attention kind: DeepSeek-V3 (MLA) no, Llama 3 70B (GQA) yes; so the ring, the userbuffers
    switch and the operators' communicators (every TP GEMM of an MLA block and of its shared experts) follow."""
    ds, llama = load_model("deepseek-v3-671b"), load_model("llama3-70b")
    lay = _layout(overlap_tp=True, tp_overlap_config="te_default")
    assert not userbuffers_built(ds) and userbuffers_built(llama)
    assert not userbuffers_on(lay, ds) and userbuffers_on(lay, llama)
    assert tp_ring_steps(lay, ds) == 1 and tp_ring_steps(lay, llama) == 2
    for kind in ("*", "E"):
        ops = block_ops(ds, lay, kind)
        assert all(op.tp_overlap == "" and pass_margins(op, lay) == {} for op in ops)
    # the GQA model's output projection keeps its communicator and te_default's 16-SM margin on fc1's dgrad, wgrad
    fc1 = {op.name: op for op in block_ops(llama, lay, "-")}["fc1"]
    assert fc1.tp_overlap == "ag" and pass_margins(fc1, lay) == {"dgrad": 16, "wgrad": 16}


def _ub(traffic):
    return {it["collective"]: it for it in traffic if it.get("userbuffers")}


def test_deepseek_v3_tp2_exposes_its_tp_collectives_as_without_overlap_but_the_first_proj(fabric):
    """DeepSeek-V3 at TP 2 with SP: overlap_tp changes nothing but the rank's first MLA layer's ``linear_proj``,
    whose forward reduce-scatter now hides behind the micro-batches' compute and its backward all-gather of the
    output gradient behind its dgrad GEMM (without userbuffers Transformer Engine gathers it synchronously:
    step.GRAD_GATHER_PHASE): the step's exposed TP seconds are the non-userbuffers path's less those two
    collectives' seconds (no ring, no other hiding), and the note says why in one line."""
    m = load_model("deepseek-v3-671b")
    on, off = _layout(overlap_tp=True), _layout(overlap_tp=False)
    r_on = estimate_step(fabric, m, on, check=False, contention=False)
    r_off = estimate_step(fabric, m, off, check=False, contention=False)
    (rs,) = [c for c in r_on.comm if c.dim == "tp" and c.what.startswith("output, the first MLA layer")]
    assert rs.exposed_s == 0.0 < rs.time_s
    assert r_on.breakdown_s["tp"] > 0
    (ag,) = [c for c in r_on.comm if c.dim == "tp" and c.what.startswith("output gradient, the first MLA layer")]
    assert ag.exposed_s == 0.0 < ag.time_s
    (ag_off,) = [c for c in r_off.comm if c.dim == "tp" and c.what == "output gradient"]
    assert ag_off.exposed_s == pytest.approx(ag_off.time_s)  # blocking without userbuffers
    assert r_on.breakdown_s["tp"] == pytest.approx(r_off.breakdown_s["tp"] - rs.time_s - ag.time_s, rel=1e-9)
    notes = [n for n in r_on.notes if n.startswith("TP overlap off")]
    assert len(notes) == 1 and "MLA" in notes[0] and "linear_proj" in notes[0] and "\n" not in notes[0]
    assert not any(n.startswith("TP overlap off") for n in r_off.notes)


def test_the_first_proj_is_one_layer_a_rank_in_the_same_calls():
    """The rank's first MLA layer's output projection is one of its TP blocks: with overlap_tp its forward
    reduce-scatter and its output gradient's all-gather are ``m`` calls each (one a micro-batch; no full
    recomputation here) taken out of the ``output`` / ``output gradient`` items, whose calls with overlap_tp off
    they add up to; none without sequence parallelism or with overlap_tp off, and none for a GQA model (all of its
    linears keep userbuffers)."""
    m = load_model("deepseek-v3-671b")
    on, off = _layout(overlap_tp=True), _layout(overlap_tp=False)
    t_on, t_off = step_traffic(m, on, STAGE), step_traffic(m, off, STAGE)
    ub = _ub(t_on)
    assert set(ub) == {"reduce_scatter", "all_gather"}
    assert ub["reduce_scatter"]["calls"] == ub["all_gather"]["calls"] == on.microbatches
    for coll, what in (("reduce_scatter", "output"), ("all_gather", "output gradient")):
        rest = [it["calls"] for it in t_on if it["collective"] == coll and it.get("what") == what]
        (whole,) = [it["calls"] for it in t_off if it["collective"] == coll and it.get("what") == what]
        assert rest[0] + ub[coll]["calls"] == whole
    assert not _ub(t_off) and not _ub(step_traffic(m, _layout(overlap_tp=True, sequence_parallel=False), STAGE))
    assert not _ub(step_traffic(load_model("llama3-70b"), _layout(overlap_tp=True, ep=1), STAGE))


def test_fp8_gathers_stay_bf16_without_userbuffers():
    """Only a userbuffers GEMM quantises its input before the all-gather (1 B an element); without, every TP
    gather of an FP8 DeepSeek-V3 step is 2 B an element, the same bytes as with overlap_tp off, but the first
    ``linear_proj``'s output-gradient gather (userbuffers: 1 B)."""
    m = load_model("deepseek-v3-671b")

    def tp_bytes(lay):
        return sorted((it.get("what", ""), it["size_bytes"], it["calls"]) for it in step_traffic(m, lay, STAGE)
                      if it["dim"] == "tp" and not it.get("userbuffers"))
    on = _layout(precision="fp8", overlap_tp=True)
    ub = _ub(step_traffic(m, on, STAGE))
    assert ub["all_gather"]["elem_bytes"] == 1.0 and ub["reduce_scatter"]["elem_bytes"] == 2.0
    assert ub["all_gather"]["size_bytes"] == ub["reduce_scatter"]["size_bytes"] / 2
    # the other items: the same sizes; their calls less the first proj's
    got = {w: (b, c) for w, b, c in tp_bytes(on)}
    want = {w: (b, c) for w, b, c in tp_bytes(_layout(precision="fp8", overlap_tp=False))}
    assert got.keys() == want.keys()
    for w in got:
        assert got[w][0] == want[w][0], w
        assert got[w][1] == want[w][1] - (on.microbatches if w in ("output", "output gradient") else 0), w
