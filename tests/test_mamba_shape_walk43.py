"""A model file's ``[mamba]`` table whose sizes disagree is one error line, never a silently different mixer
(walk43, docs/calibration-findings.md section 440). Megatron-Core's ``MambaMixer.__init__``
(NVIDIA/Megatron-LM@00bebb45 megatron/core/ssm/mamba_mixer.py) asserts "d_inner must be evenly divisible by
headdim" where ``mamba_num_heads`` is unset, sets ``d_inner = nheads x headdim`` where it is set, asserts "nheads
must be evenly divisible by ngroups", and under FP8 that ``2 d_inner + 2 ngroups d_state + nheads`` is a multiple
of 16. Before, topo floored the heads (6,144 / 100 -> 61 heads beside a 6,144-wide d_inner), ignored an ``expand``
the heads contradicted, and priced 96 heads in 5 groups and a 13,400-wide FP8 in_proj."""

from __future__ import annotations

import pytest

from topo.errors import TopoError
from topo.training.model import load_model, model_from_dict
from topo.training.parallel import check_layout, make_layout


def _model(**mamba):
    """A 4-layer hybrid of hidden 3,072 (two Mamba-2 layers), its ``[mamba]`` table as given."""
    return model_from_dict({"name": "lab", "source": "test", "layers": 4, "hidden": 3072, "ffn_hidden": 8192,
                            "heads": 24, "kv_heads": 4, "vocab": 32000, "seq_len": 4096, "mlp": "relu2",
                            "layer_pattern": "M-M*", "mamba": {"d_state": 128, "groups": 8, **mamba}}, "lab.toml")


def _refused(**mamba) -> str:
    with pytest.raises(TopoError) as exc:
        _model(**mamba)
    assert exc.value.source == "lab.toml"
    return exc.value.message


def test_a_head_size_that_does_not_divide_d_inner_is_refused():
    # expand 2 x hidden 3,072 = 6,144 = 61 x 100 + 44: Megatron-Core asserts; topo took 61 heads
    msg = _refused(head_dim=100)
    assert msg.startswith("mamba.head_dim: 100 does not divide d_inner = expand x hidden = 2 x 3072 = 6144")
    assert "allowed: a divisor of 6144" in msg
    assert _model(head_dim=96).mamba_heads == 6144 // 96  # 64 heads: divides


def test_num_heads_sets_d_inner_and_a_contradicting_expand_is_refused():
    # mamba_num_heads given: d_inner = nheads x headdim (Megatron-Core), expand unused; 96 x 64 = 6,144
    m = _model(num_heads=80, head_dim=64)
    assert (m.mamba_heads, m.mamba_inner) == (80, 80 * 64)
    assert _model(num_heads=96, head_dim=64, expand=2).mamba_inner == 2 * 3072  # agreeing: kept
    msg = _refused(num_heads=96, head_dim=64, expand=3)
    assert msg.startswith("mamba.expand: 3 gives d_inner = 3 x hidden 3072 = 9216, but num_heads x head_dim = "
                          "96 x 64 = 6144")


def test_groups_must_hold_whole_heads():
    msg = _refused(num_heads=96, head_dim=64, groups=5)
    assert msg == ("mamba.groups: 5 does not divide the 96 Mamba-2 heads (each group holds whole heads); allowed: "
                   "a divisor of 96")
    assert _model(num_heads=96, head_dim=64, groups=6).mamba_heads % 6 == 0


def test_fp8_needs_an_in_proj_width_of_a_multiple_of_16():
    # 88 heads of 64: 2 x 5,632 + 2 x 8 x 128 + 88 = 13,400 = 16 x 837 + 8
    m = _model(num_heads=88, head_dim=64)
    assert 2 * m.mamba_inner + 2 * 8 * 128 + m.mamba_heads == 13400
    check_layout(m, make_layout(global_batch=8, precision="bf16"))
    with pytest.raises(TopoError) as exc:
        check_layout(m, make_layout(global_batch=8, precision="fp8"))
    assert exc.value.key == "precision" and "= 13400, to be a multiple of 16" in exc.value.message
    # Nemotron 3 Nano's published FP8 runs: 2 x 4,096 + 2 x 8 x 128 + 64 = 10,304 = 16 x 644
    nano = load_model("nemotron-3-nano-30b-a3b")
    check_layout(nano, make_layout(global_batch=8, precision="fp8"))
    assert m.mamba_in_proj_width == 13400 and nano.mamba_in_proj_width == 10304


def test_nvfp4_does_not_need_the_fp8_in_proj_width():
    """Megatron-Core asserts the width under ``config.fp8`` only (NVIDIA/Megatron-LM@d98e8a64
    megatron/core/ssm/mamba_mixer.py lines 253-257); its NVFP4 recipe is an fp4 option, exclusive of fp8, so the
    13,400-wide in_proj runs under NVFP4 (rev106 Left 1)."""
    m = _model(num_heads=88, head_dim=64)
    lay = make_layout(global_batch=8, precision="fp8", fp8_recipe="nvfp4")
    check_layout(m, lay)


def test_tp_against_the_attention_heads_says_what_is_allowed():
    m = _model(num_heads=96, head_dim=64)
    with pytest.raises(TopoError) as exc:
        check_layout(m, make_layout(tp=16, global_batch=8))
    assert exc.value.key == "tp"
    assert exc.value.message == "16 does not divide the 24 attention heads; allowed: a divisor of 24"
