"""buf59: the flex dispatcher's DeepEP / HybridEP buffer counts against a GPU's memory (topo.training.ep_buffers),
each figure from the source's own formula: deepseek-ai/DeepEP@94a9f8f6 (hybrid-ep branch) and
NVIDIA/Megatron-LM@d98e8a64dd megatron/core/transformer/moe/fused_a2a.py."""

import json
from dataclasses import replace

import pytest
from conftest import run_cli

from topo.training.ep_buffers import deepep_hint_bytes, ep_buffer_bytes, hybridep_rdma_bytes
from topo.training.memory import memory_per_gpu
from topo.training.model import load_model
from topo.training.parallel import make_layout

MiB = 2**20
H = 7168 * 2  # DeepSeek-V3's hidden in bf16: Megatron's get_hidden_bytes, hidden x max(element size, 2)
# csrc/config.hpp get_nvl_buffer_size_hint, per buffered token: the hidden, SourceMeta (2 ints, internode.cu),
# kNumMaxTopK 128 int64 indices and 128 float weights, kNumMaxScales 128 floats
TOKEN = H + 8 + 128 * 8 + 128 * 4 + 128 * 4


def _up128(n):
    return -(-n // 128) * 128


def test_deepep_hint_at_8_ranks_by_hand():
    # 8 ranks: one NVLink group (NUM_MAX_NVL_PEERS 8), no RDMA ("Legacy mode"). Buffer.num_sms 20 -> 10 channels;
    # dispatch config 8 = Config(20, 6, 256, 6, 128), combine Config(20, 4, 256, 6, 128): both 256 NVL recv tokens.
    nvl = 10 * 8 * (2 * 1 + 3) * 4 + 10 * 8 * 256 * TOKEN
    assert _up128(nvl) == 335709824
    assert deepep_hint_bytes(H, 8) == (335709824, 0)


def test_deepep_hint_at_64_ranks_by_hand():
    # 64 ranks: 8 RDMA ranks of 8. Dispatch config 64 = Config(20, 20, 288, 28, 128): 288 NVL recv tokens, RDMA recv
    # 128 rounded up to a multiple of 28 = 140 (Config's align_up); combine Config(20, 1, 288, 20, 128): 140 too.
    nvl = 10 * 8 * (2 * 8 + 3) * 4 + 10 * 8 * 288 * TOKEN
    rdma = 10 * 8 * (8 * 2 + 2) * 2 * 4 + 10 * 8 * 140 * (TOKEN + 16) * 2  # + int4 per token, both directions
    assert deepep_hint_bytes(H, 64) == (_up128(nvl), _up128(rdma)) == (377677824, 367550720)


def test_deepep_ep_size_outside_its_config_map_is_one_line():
    with pytest.raises(ValueError, match=r"ep: 48 ranks has no DeepEP dispatch config; allowed: 2, 4, 8"):
        deepep_hint_bytes(H, 48)


def test_flex_dispatcher_buffer_in_the_memory():
    m = load_model("deepseek-v3-671b")
    lay = make_layout(global_batch=64, dp=64, ep=64, pp=1, ep_dispatcher="deepep", ep_flex_backend="deepep",
                      seq_len=4096)
    nvl, rdma = 377677824, 367550720
    # mem66: the 367,550,720 B RDMA buffer sits in NVSHMEM's heap, which maps it with NVSHMEM's own ~39 MB in one
    # 512 MiB granule (tests/test_ep_buffers_mem66.py); + DeepEP's NUM_WORKSPACE_BYTES
    assert rdma < 512 * MiB
    assert ep_buffer_bytes(m, lay, 8) == nvl + 512 * MiB + 32 * MiB
    # HybridEP: max_num_of_tokens = the first dispatch's 4,096 tokens x 64 ranks; bf16 hidden, fp32 probabilities
    # of the 8 NVLink ranks' 4 experts each, a float per 128 hidden elements (csrc/hybrid_ep/buffer/intranode.cu)
    hyb = lay.model_copy(update=dict(ep_flex_backend="hybridep"))
    tokens = 4096 * 64
    nvlink = tokens * H + tokens * 4 * 8 * 4 + tokens * (7168 // 128) * 4
    # mem66: 64 ranks over 8-GPU domains span 8 of them: + the RDMA coordinator's buffers (hand form in
    # tests/test_ep_buffers_mem66.py); on one 72-GPU domain none
    assert ep_buffer_bytes(m, hyb, 8) == nvlink + hybridep_rdma_bytes(4096, 8, 7168, 4 * 8)
    assert ep_buffer_bytes(m, hyb, 72) == tokens * H + tokens * 4 * 64 * 4 + tokens * (7168 // 128) * 4
    mem = memory_per_gpu(m, hyb, 80e9, gpus_per_domain=8)
    assert mem.ep_buffers_bytes == ep_buffer_bytes(m, hyb, 8)
    assert mem.to_dict()["ep_buffers_bytes"] == round(mem.ep_buffers_bytes)
    a2a = hyb.model_copy(update=dict(ep_dispatcher="alltoall"))
    assert ep_buffer_bytes(m, a2a, 8) == 0.0
    assert mem.total_bytes == pytest.approx(replace(mem, ep_buffers_bytes=0.0).total_bytes + mem.ep_buffers_bytes,
                                            rel=1e-12)
    assert memory_per_gpu(m, a2a, 80e9, gpus_per_domain=8).ep_buffers_bytes == 0.0


QWEN = ["train", "dgx-h100-superpod", "--model", "qwen3-30b-a3b", "--tp", "1", "--global-batch", "96"]


def test_cli_shows_the_buffer_and_names_an_ep_size_deepep_has_no_config_for():
    out = run_cli(*QWEN, "--gpus", "8", "--dp", "8", "--ep", "8", "--json", "--layout",
                  "ep_dispatcher=deepep,ep_flex_backend=deepep", check=True).stdout
    # hidden 2048 bf16 at 8 ranks: 10 channels x 8 ranks x 256 tokens x (4,096 + 8 + 1,024 + 512 + 512 B) + the
    # 5 x 4 B counters per channel and rank, rounded to 128 B; + the 32 MiB workspace
    nvl = _up128(10 * 8 * 5 * 4 + 10 * 8 * 256 * (4096 + 8 + 1024 + 512 + 512))
    assert json.loads(out)["memory"]["ep_buffers_bytes"] == nvl + 32 * MiB
    bad = run_cli(*QWEN, "--gpus", "48", "--dp", "48", "--ep", "48", "--layout",
                  "ep_dispatcher=deepep,ep_flex_backend=deepep")
    assert bad.returncode != 0 and "Traceback" not in bad.stderr
    assert "--ep: 48 (x etp 1) ranks have no DeepEP config" in bad.stderr
    assert "ep x etp in 2, 4, 8, 16, 24, 32, 64, 128, 144, 160" in bad.stderr
