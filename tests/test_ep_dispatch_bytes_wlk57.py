"""``ep_dispatch_bytes`` is the forward dispatch's width: 1 (FP8, DeepSeek-V3 report sec. 3.3.2; DeepEP's
``use_fp8``, NVIDIA/Megatron-LM@d98e8a64 megatron/core/transformer/moe/fused_a2a.py ``fp8_dispatch``) or 2 (BF16,
the activations' width). Any other width (walk20 found 3 taken and priced) is one ``error:`` line naming the key,
the value and the two allowed (wlk57, docs/calibration-findings.md)."""

from __future__ import annotations

import pytest

from conftest import run_cli
from topo.errors import TopoError
from topo.training.model import load_model
from topo.training.parallel import check_layout, make_layout

QWEN = load_model("qwen3-235b-a22b")


@pytest.mark.parametrize("width", [1, 2, 1.0, 2.0])
def test_fp8_and_bf16_dispatch_are_taken(width):
    check_layout(QWEN, make_layout(dp=8, ep=8, etp=1, global_batch=8, ep_dispatch_bytes=width))


@pytest.mark.parametrize("width", [3, 4, 1.5, 0.5, 8])
def test_any_other_width_is_refused(width):
    with pytest.raises(TopoError, match=r"allowed: 1 \(FP8 dispatch\) or 2 \(BF16, the default\)$") as exc:
        check_layout(QWEN, make_layout(dp=8, ep=8, etp=1, global_batch=8, ep_dispatch_bytes=width))
    assert exc.value.key == "ep_dispatch_bytes"
    assert f"{width:g} is not a width" in str(exc.value)


def test_the_cli_says_it_in_one_line():
    out = run_cli("train", "--model", "qwen3-235b-a22b", "--gpus", "64", "--ep", "8", "--layout",
                  "global_batch=64,ep_dispatch_bytes=3", "h100-100k")
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert lines == ["error: --layout: ep_dispatch_bytes: 3 is not a width the forward dispatch carries tokens at; "
                     "allowed: 1 (FP8 dispatch) or 2 (BF16, the default)"]
    assert out.stdout == ""
