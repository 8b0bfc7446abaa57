"""Expert tensor parallelism in the all-to-all dispatcher's permutations (task etp45), closed forms from
Megatron-Core's source at the NeMo 25.04 release (NVIDIA/Megatron-LM@d580efc6 core_v0.12.0
megatron/core/transformer/moe/token_dispatcher.py ``MoEAlltoAllTokenDispatcher.token_permutation`` /
``token_unpermutation``): permutation 1 permutes the rank's own tokens before the EP all-to-all (not the
ETP-gathered ones); permutation 2 (after the ETP all-gather) runs only ``if self.num_local_experts > 1``."""

import pytest

from topo.training.model import load_model
from topo.training.operators import block_ops
from topo.training.parallel import make_layout

BF16 = 2  # bytes per activation element


@pytest.fixture(scope="module")
def grok():
    return load_model("grok-1-314b")  # 8 experts, top-2, hidden 6,144 (xai-org/grok-1 run.py)


def _permute_bytes(model, **upd):
    lay = make_layout(**{"tp": 4, "dp": 32, "ep": 8, "etp": 4, "global_batch": 256, "seq_len": 8192,
                         "moe_capacity_factor": 1.0, **upd})
    return {op.name: op for op in block_ops(model, lay, "E")}["permute"].bytes


def test_one_local_expert_etp4_permutes_only_the_ranks_own_tokens(grok):
    """Grok-1 at TP4 / ETP4 / EP8 (the DGXC GB200 recipe, NVIDIA/dgxc-benchmarking@1f6d9f40 grok1): one expert a
    rank, so no sort; the rank's own 8,192 / 4 = 2,048 tokens, read once and written as 2 x 2,048 routed copies
    (capacity 2,048 x 2 / 8 = 512 a expert x 8 experts: get_capacity), and the reverse."""
    t_in, h = 8192 / 4, 6144
    own_rows = 512 * 8
    assert _permute_bytes(grok) == pytest.approx(2 * BF16 * h * (t_in + own_rows))


def test_several_local_experts_sort_the_etp_gathered_rows(grok):
    """EP 2 (4 local experts): permutation 2 sorts every row this rank holds after the ETP all-gather, ETP x its
    own routed rows (4 x 4,096), read and written each way, on top of permutation 1's own rows."""
    t_in, h = 8192 / 4, 6144
    own_rows = 512 * 8
    gathered_rows = 4 * own_rows
    expect = 2 * BF16 * h * (t_in + own_rows) + 4 * BF16 * h * gathered_rows
    assert _permute_bytes(grok, ep=2, dp=32) == pytest.approx(expect)
