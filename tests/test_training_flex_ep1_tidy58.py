"""tidy58: the flex dispatcher at ep 1 and etp > 1 calls its dispatch and combine over the experts' TP group.

NVIDIA/Megatron-LM@44151194 ``megatron/core/transformer/moe/token_dispatcher.py`` ``MoEFlexTokenDispatcher``: both
DeepEP's and HybridEP's managers are built over ``tp_ep_group`` with ``tp_size x`` the experts, so at ep 1 they still
exchange tokens among the ``etp`` ranks. topo had priced no host for those calls (``call_host_s`` needed ep > 1) and,
HybridEP's permutation being launched inside its calls, no host for the permutation either (rev62, section 239)."""

import pytest

from topo.training.gpus import gpu_compute
from topo.training.model import load_model
from topo.training.operators import Block, block_time, ep_call_host_s, ep_calls
from topo.training.parallel import check_layout, make_layout

ETP2 = dict(tp=1, dp=8, ep=1, etp=2, micro_batch=1, global_batch=64, seq_len=4096)


def test_hybridep_at_ep_1_calls_at_the_measured_price():
    m, gpu = load_model("qwen3-30b-a3b"), gpu_compute("H100")
    lay = make_layout(**ETP2, ep_dispatcher="deepep", ep_flex_backend="hybridep")
    check_layout(m, lay, gpus=8)
    assert ep_calls(lay)
    # host_calls.toml [call.hybridep_dispatch_with_permute]: (4.253 - 3.109) s / 6,144 calls on DGX H100
    assert block_time(m, lay, gpu, Block.MOE).call_host_s == pytest.approx((4.253 - 3.109) / 6144, rel=1e-3)
    assert ep_call_host_s(lay, gpu) == block_time(m, lay, gpu, Block.MOE).call_host_s


def test_the_all_to_all_dispatcher_at_ep_1_calls_no_all_to_all():
    """Megatron's all-to-all over an EP group of one rank returns its input: no call."""
    m, gpu = load_model("qwen3-30b-a3b"), gpu_compute("H100")
    lay = make_layout(**ETP2)
    assert not ep_calls(lay) and block_time(m, lay, gpu, Block.MOE).call_host_s == 0.0
    assert ep_calls(make_layout(**{**ETP2, "etp": 1, "ep": 8}))
