"""The host work Transformer Engine's ``GroupedLinear`` does for each local expert outside its launches.

Counted from source (``topo/data/compute/te_grouped_linear_host.toml``: NVIDIA/TransformerEngine v2.12 5671fd36,
v2.14 f031cf87, v2.16 4220403e, ``pytorch/module/grouped_linear.py``, ``csrc/extensions/cast.cpp`` ``split_quantize``,
``csrc/extensions/gemm.cpp`` ``te_general_grouped_gemm``, ``csrc/quantizer.cpp`` ``create_tensor``) and priced
by pytorch/pytorch issue #41383 (ngimel, 2020-07-14: a simple op ~2 us from Python, ~1 us through the C++ API),
times the host CPU's factor; the pure-Python calls are counted and not priced.
"""

import tomllib

import pytest

from topo.resources import data_dir
from topo.training.grouped_gemm import expert_host_ops

TABLE = tomllib.loads((data_dir("compute") / "te_grouped_linear_host.toml").read_text(encoding="utf-8"))


def test_the_counts_from_source():
    """Each expert's work by kind, as the table's comments list it at v2.14 (lines for v2.12 and v2.16 alongside):
    BF16 forward: torch.split's view (grouped_linear.py 162) and the output's at::from_blob (gemm.cpp 494); per-tensor
    FP8: split_quantize's create_tensor (three at::empty: data, transpose, scale_inv) for the split's view; MXFP8: four
    at::from_blob of the bulk allocation. Backward adds clear_tensor_data's swap and get_dummy_wgrad's detach (one
    more swap for MXFP8's two column-wise buffers)."""
    per = TABLE["per_expert"]
    assert per["bf16"] == {"forward": [0, 2, 8], "backward": [2, 2, 11]}
    assert per["fp8_per_tensor"] == {"forward": [0, 1 + 3, 21], "backward": [1 + 1, 1 + 3, 17]}
    assert per["fp8_block"] == {"forward": [0, 1 + 4, 22], "backward": [2 + 1, 1 + 4, 18]}
    assert per["status"] == "counted from source"
    assert all(pin in TABLE["lines"][v] for v, pin in (("v2.12", "5671fd36"), ("v2.14", "f031cf87"),
                                                       ("v2.16", "4220403e")))
    assert expert_host_ops("multi_stream", "fp8_block", backward=True) == (3.0, 5.0, 18.0)
    assert expert_host_ops("fused_mlp", "fp8_block") == (0.0, 0.0, 0.0)
    assert expert_host_ops("", "bf16") == (0.0, 0.0, 0.0)
