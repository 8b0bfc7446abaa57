"""ubsm105 (docs/calibration-findings.md section 417): userbuffers' MXFP8 all-gathers send the scale-inverses apart.

Transformer Engine's ``fill_userbuffers_buffer_for_all_gather`` copies one usage's MXFP8 data into the userbuffers
buffer and gathers its compact scale-inverses with a synchronous ``torch.distributed.all_gather_into_tensor`` on the
compute stream (NVIDIA/TransformerEngine@d0067d0d transformer_engine/pytorch/module/base.py lines 679-749, the gather at 727): for the
column-parallel input's forward ring exchange, the input gathered again by the bulk ``*_dgrad`` exchange and the
row-parallel output gradient's ring exchange (base.py lines 1725-1744), three a TP block. Each is 1/32 byte an
element of the gathered tensor (one E8M0 scale a 32 elements, kernels.toml ``scale_bytes_per_element``), and
nothing hides it. Per-tensor FP8 gathers no scale; without userbuffers the scales ride in the NCCL gather of the
quantised copy (section 404).
"""

import pytest

import topo
from topo.training.gpus import gpu_compute
from topo.training.model import load_model
from topo.training.operators import stage_compute
from topo.training.parallel import make_layout
from topo.training.step import UB_SCALE_PHASES, estimate_step, stage_tp_blocks, step_traffic

MXFP8_SCALE_BYTES = 1 / 32  # E8M0, one a 32 elements (OCP MX v1.0 sec. 5; TE MXFP8 block size 32)


@pytest.fixture(scope="module")
def fab():
    return topo.build_fabric(topo.load_spec("gb200-nvl72-superpod"))


def _lay(**kw):
    base = dict(tp=2, pp=4, vpp=5, dp=2, global_batch=16, seq_len=8192, precision="fp8", fp8_recipe="mxfp8",
                overlap_tp=True)
    return make_layout(**{**base, **kw})


def _scales(items):
    return [it for it in items if it["dim"] == "tp" and it["phase"] in UB_SCALE_PHASES]


def _data(items, what):
    return next(it for it in items if it["dim"] == "tp" and it["collective"] == "all_gather"
                and it.get("what") == what)


def test_three_scale_gathers_a_block_at_a_32nd_of_the_gathered_tensor():
    m, lay = load_model("llama3-70b"), _lay()
    items = step_traffic(m, lay)
    scales = _scales(items)
    gathered = lay.micro_batch * lay.seq_len * m.hidden  # elements of one gathered activation
    assert len(scales) == 3
    for it, what, phase in zip(scales, ("input", "output gradient", "input again, for wgrad"),
                               ("ub_scales", "ub_scales_backward", "ub_scales_backward")):
        assert it["collective"] == "all_gather" and it["phase"] == phase
        assert it["size_bytes"] == pytest.approx(gathered * MXFP8_SCALE_BYTES)
        assert it["calls"] == _data(items, what)["calls"]  # one with each userbuffers data gather
        assert "pair" not in it and "userbuffers" not in it


@pytest.mark.parametrize("kw", [dict(overlap_tp=False), dict(fp8_recipe="current"), dict(precision="bf16"),
                                dict(tp=1, dp=4)])
def test_none_without_userbuffers_or_mxfp8(kw):
    assert _scales(step_traffic(load_model("llama3-70b"), _lay(**kw))) == []


def test_the_scale_gathers_block_whatever_tp_overlap_hides(fab):
    m, lay = load_model("llama3-70b"), _lay()
    r = estimate_step(fab, m, lay)
    rows = [c for c in r.comm if c.dim == "tp" and "scale-inverses" in c.what]
    assert len(rows) == 3
    for c in rows:
        assert c.exposed_s == pytest.approx(c.time_s) and c.exposed_s > 0
    # the userbuffers data gathers beside them stay hidden behind their GEMMs
    assert all(c.exposed_s < c.time_s for c in r.comm if c.dim == "tp" and c.what == "input")


def test_the_search_bound_stays_below_the_step(fab):
    from topo.training.search import _comm_floor_s
    from topo.training.tp_overlap import tp_overlap_on
    m, lay = load_model("llama3-70b"), _lay()
    sc = stage_compute(m, lay, gpu_compute("GB200"))
    floor, _ = _comm_floor_s(fab.spec, lay, step_traffic(m, lay), sc, tp_overlap=tp_overlap_on(lay, m),
                             tp_blocks=stage_tp_blocks(m, lay))
    assert 0.0 < floor <= estimate_step(fab, m, lay, contention=False).breakdown_s["tp"]
