"""mem56: what a training process holds besides its tensors counts against the GPU (walk20: `topo train --search`
ranked layouts at 97-99% of a GB200's memory first), and a layout that does not fit says so on its first line."""

import json

import pytest

from conftest import run_cli
from topo.training.memory import memory_per_gpu, process_reserve_bytes
from topo.training.model import load_model
from topo.training.parallel import make_layout

# NVIDIA/nccl#1685: 1.06 GB per H100 outside PyTorch's allocator (CUDA context + NCCL setup) before the first
# all-to-all; PyTorch CublasHandlePool.cpp getChosenWorkspaceSize: 4096 * 8 * 1024 bytes on Hopper and Blackwell
RESERVE = 1.06e9 + 4096 * 8 * 1024


def test_the_reserve_is_the_cited_figures_sum():
    assert process_reserve_bytes() == pytest.approx(RESERVE, rel=1e-12)


def test_every_layout_counts_the_reserve_and_a_layout_inside_it_does_not_fit():
    m = load_model("llama3-8b")
    lay = make_layout(tp=8, dp=2, global_batch=16)
    mem = memory_per_gpu(m, lay, 85.5e9)
    tensors = (mem.weights_bytes + mem.gradients_bytes + mem.optimizer_bytes + mem.activations_bytes
               + mem.buffers_bytes)
    # mem57: NCCL's buffers of its TP and DP rings besides (16 channels x 12 MiB each, tests/test_nccl_buffers_mem57.py)
    nccl = 2 * 16 * 12 * 2**20
    assert mem.reserved_bytes == pytest.approx(RESERVE) and mem.nccl_bytes == nccl
    assert mem.total_bytes == pytest.approx(tensors + RESERVE + nccl)
    # a GPU with room for the tensors but not for the process's own: does not fit, short by what is missing
    tight = memory_per_gpu(m, lay, tensors + nccl + RESERVE / 2)
    assert not tight.fits and tight.short_bytes == pytest.approx(RESERVE / 2)
    assert memory_per_gpu(m, lay, tensors + nccl + RESERVE).fits


def test_the_json_and_the_memory_line_show_the_reserve():
    base = ("train", "dgx-h100-superpod", "--model", "llama3-8b", "--tp", "8", "--dp", "2", "--global-batch", "16")
    d = json.loads(run_cli(*base, "--json", check=True).stdout)
    assert d["memory"]["reserved_bytes"] == int(RESERVE) and d["fits"] is True
    text = run_cli(*base, check=True).stdout
    assert "runtime 1.1 GB" in text and "DOES NOT FIT" not in text


def test_a_layout_that_does_not_fit_leads_with_it():
    """walk20: --dp-sharding none for a large model printed its step time and MFU first; the DOES NOT FIT sat on the
    memory line. Llama 3 70B at tp 1, unsharded: 70.6e9 x 18 B = 1,270 GB of state alone, far past 85.5 GB (1455.2 GB with the DP ring's NCCL buffers, mem57; 1455.5 GB with the NVLS buffer of
    its 8-rank DP all-reduce, which topo runs as NVLS: 268,435,456 B, nvlsbuf60; 1455.6 GB with Llama 3's vocabulary of
    128,256, Meta's config.json, tidy74: 2 x 256 x 8,192 more weights at 18 B)."""
    args = ("train", "dgx-h100-superpod", "--model", "llama3-70b", "--tp", "1", "--dp", "8", "--global-batch", "16",
            "--dp-sharding", "none")
    lines = run_cli(*args, check=True).stdout.splitlines()
    assert lines[0].startswith("DOES NOT FIT: 1455.6 GB per GPU (stage 0), 1370.1 GB more than the H100's 85.5 GB")
    assert lines[1].startswith("llama3-70b on ") and lines[2].startswith("step time")
    d = json.loads(run_cli(*args, "--json", check=True).stdout)
    assert d["fits"] is False and d["memory"]["short_bytes"] == pytest.approx(1370.1e9, abs=0.06e9)
