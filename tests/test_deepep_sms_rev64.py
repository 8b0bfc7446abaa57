"""An odd ``ep_comm_sms`` on DeepEP's kernels (rev64): Megatron-Core's ``set_deepep_num_sms(moe_deepep_num_sms)`` calls
DeepEP's ``Buffer.set_num_sms``, which asserts "The SM count must be even" (deepseek-ai/DeepEP@94a9f8f6
deep_ep/buffer.py: two SMs a channel, ``Config``'s ``num_sms / 2`` channels); topo priced 21 SMs as 10 channels."""

import pytest

from topo.errors import TopoError
from topo.training.model import load_model
from topo.training.parallel import check_layout, make_layout

MODEL = load_model("qwen3-30b-a3b")


def _lay(backend: str, sms: int):
    return make_layout(global_batch=8, dp=8, ep=8, ep_dispatcher="deepep", ep_flex_backend=backend, ep_comm_sms=sms)


def test_an_odd_sm_count_on_deepep_is_one_line():
    with pytest.raises(TopoError) as e:
        check_layout(MODEL, _lay("deepep", 21), gpus=8)
    assert e.value.key == "ep_comm_sms" and "'The SM count must be even'" in e.value.message
    assert "allowed with ep_flex_backend=deepep: an even count, e.g. 22" in e.value.message


@pytest.mark.parametrize("backend, sms", [("deepep", 20), ("deepep", 24), ("hybridep", 21)])
def test_even_counts_and_hybridep_are_accepted(backend, sms):
    check_layout(MODEL, _lay(backend, sms), gpus=8)  # HybridEP takes its own SM count (no set_num_sms)
