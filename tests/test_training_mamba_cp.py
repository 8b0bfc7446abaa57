"""Mamba-2 under context parallelism: Megatron-Core's all-to-all CP (NVIDIA/Megatron-LM@00caa53a
megatron/core/ssm/mamba_context_parallel.py): before the convolution and the SSD each rank trades its s / cp tokens
of all its heads for all s tokens of 1 / cp of them, one all-to-all each for z, x, B, C and dt (pre_conv_ssm; B and
C repeated cp / groups times when a rank holds fewer groups than cp), and the output goes back in one more
(post_conv_ssm); the backward sends their gradients. The all-to-alls block the mixer: no attention hides them."""

from pathlib import Path

import pytest

import topo
from topo.training.model import load_model
from topo.training.parallel import make_layout
from topo.training.step import estimate_step, mamba_cp_alltoalls, step_traffic

ROOT_MODELS = Path(topo.__file__).parent / "data" / "models"


def _lay(cp, **kw):
    base = dict(tp=8, cp=cp, dp=4, micro_batch=1, global_batch=64, seq_len=65536, precision="fp8",
                flash_attention=True, recompute="none", overlap_tp=True)
    return make_layout(**{**base, **kw})


def test_each_rank_sends_its_tokens_local_channels_per_tensor():
    """Nemotron-H 56B (256 Mamba heads of 64, 8 groups of state 256) at TP8: a rank holds 2,048 channels of z, x
    and the output, 1 group of B and C and 32 heads of dt. At CP2 and 64k tokens it sends 32,768 tokens x 2,048 x
    2 bytes for each of z, x, y; its one group repeated twice, 32,768 x 2 x 256 x 2 for B and for C; 32,768 x 32 x
    2 for dt. At CP4 the groups repeat 4 times over 16,384 tokens: the same B/C bytes."""
    h = load_model("nemotron-h-56b")
    assert h.mamba_inner == 256 * 64 and h.mamba.groups == 8 and h.mamba.d_state == 256
    assert mamba_cp_alltoalls(h, _lay(2)) == [(32768 * 2048 * 2, 3), (32768 * 2 * 256 * 2, 2), (32768 * 32 * 2, 1)]
    zx, bc, dt = mamba_cp_alltoalls(h, _lay(4))
    assert zx[0] == 16384 * 2048 * 2 and bc[0] == 16384 * 4 * 256 * 2 and dt[0] == 16384 * 32 * 2


def test_calls_are_six_per_mamba_layer_and_pass_and_none_without_cp():
    """16 micro-batches x 54 Mamba layers x (forward + backward) x 6 all-to-alls; full recomputation sends the
    forward's again (Megatron-Core recomputes a Mamba-2 layer only whole: no ``mamba`` module, tidy122); CP1 sends
    none."""
    h = load_model("nemotron-h-56b")
    assert h.layer_pattern.count("M") == 54

    def calls(lay):
        return sum(t["calls"] for t in step_traffic(h, lay) if t["collective"] == "alltoall" and t["dim"] == "cp")
    assert _lay(2).microbatches == 16
    assert calls(_lay(2)) == 16 * 54 * 2 * 6
    assert calls(_lay(2, recompute="full")) == 16 * 54 * 3 * 6
    assert calls(_lay(1)) == 0


def test_mamba_all_to_alls_are_exposed_even_with_cp_overlap():
    """The step's exposed CP is at least the Mamba all-to-alls' whole time (overlap_cp hides only the attention's
    K/V exchange behind the attention)."""
    h = load_model("nemotron-h-56b")
    fab = topo.build_fabric(topo.load_spec("dgx-h100-superpod", []))
    r = estimate_step(fab, h, _lay(2, overlap_cp=True))
    a2a = sum(c.time_s for c in r.comm if c.dim == "cp" and c.collective == "alltoall")
    assert a2a > 0
    assert r.breakdown_s["cp"] >= a2a * (1 - 1e-9)


def test_a_chunk_longer_than_the_sequence_is_one_line(tmp_path, capsys):
    """walk21 (findings section 232): a model file's ``chunk_size = 100000`` priced a 1,501 s Nemotron-H step without
    a word; a sequence shorter than one Mamba-2 chunk is now refused, naming the layout's key, both values and what is
    allowed (``check_layout``); a chunk equal to the sequence still runs."""
    from topo.cli.main import main
    from topo.errors import TopoError
    from topo.training.parallel import check_layout
    text = (ROOT_MODELS / "nemotron-h-56b.toml").read_text()
    assert "chunk_size = 128" in text
    bad = tmp_path / "nh.toml"
    bad.write_text(text.replace("chunk_size = 128", "chunk_size = 100000"))
    assert main(["train", "dgx-h100-superpod", "--model", str(bad), "--gpus", "64", "--tp", "8", "--dp", "8",
                 "--global-batch", "64"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.splitlines()) == 1, err
    assert "seq_len: 8192 tokens is shorter than one Mamba-2 chunk of 100000" in err and "chunk_size up to 8192" in err
    model = load_model("nemotron-h-56b")
    check_layout(model, make_layout(tp=8, dp=8, global_batch=64, seq_len=128))  # one whole chunk: runs
    with pytest.raises(TopoError, match="127 tokens is shorter than one Mamba-2 chunk of 128"):
        check_layout(model, make_layout(tp=8, dp=8, global_batch=64, seq_len=127))
