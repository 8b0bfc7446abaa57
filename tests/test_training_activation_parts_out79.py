"""out79 (walk35's Left 3): the activations of the memory line by what holds them, summing to its figure.

Closed forms (topo/training/memory.py's module doc, Korthikanti et al. 2022 generalised; bytes of one micro-batch
on one GPU, s b h = tokens x hidden, tp 1, FP8 linear inputs of 1 byte, no dropout):
- Mamba-2: its norm's input 2 and in_proj's FP8 input 1, in_proj's output z x B C dt and the scan's output in BF16,
  ``2 (2 d_in + 2 G N + H + d_in) / h``, and out_proj's FP8 input ``d_in / h`` (mamba_ssm ssd_combined.py@e9594ce1;
  in_proj and out_proj are Transformer Engine linears, section 412, as block_activation_bytes cites);
- MoE (SwiGLU, top-k of E): norm 2 + its FP8 input 1, ``(k + shared) (2 x 2 + 1) f / h`` and k FP8 dispatched inputs;
- attention (GQA, flash): norm 2 + input 1, then Q 2, K and V 4 kv / h, the projection's input 1;
- the logits: 4 bytes x s b x vocab (FP32).
"""

import json

import pytest

from conftest import run_cli
from test_training_interval_span_out79 import HYMOE


def _gb200(tmp_path, *extra):
    model = tmp_path / "hymoe.toml"
    model.write_text(HYMOE)
    return ["train", "gb200-nvl72-superpod", "--model", str(model), "--gpus", "576", "--global-batch", "1152",
            "--precision", "fp8", "--tp", "1", "--pp", "1", "--dp", "576", "--ep", "16", "--micro-batch", "2",
            "--dp-sharding", "zero2", *extra]


def test_walk35s_gb200_activations_by_kind_are_their_closed_forms(tmp_path):
    """walk35's GB200 8k #1 (133.7 GB of activations then, 125.7 GB with Mamba's linears' FP8 inputs): 40 Mamba-2, 40 MoE and 8 attention layers at 16,384
    tokens a GPU, and the logits."""
    m = json.loads(run_cli(*_gb200(tmp_path), "--json", check=True).stdout)["memory"]
    sbh = 8192 * 2 * 4096
    d_in, gn, heads = 128 * 64, 2 * 8 * 128, 128
    mamba = 40 * sbh * (3 + (2 * (2 * d_in + gn + heads + d_in) + d_in) / 4096)
    moe = 40 * sbh * (3 + (6 + 1) * 5 * 1792 / 4096 + 6)
    attention = 8 * sbh * (3 + 2 + 4 * 2 * 128 / 4096 + 1)
    logits = 4 * 8192 * 2 * 131072
    parts = m["activations_by_kind_bytes"]
    assert set(parts) == {"attention", "moe", "mamba", "logits"}  # pp 1: one micro-batch in flight
    for k, v in (("mamba", mamba), ("moe", moe), ("attention", attention), ("logits", logits)):
        assert parts[k] == pytest.approx(v, abs=1), k
    assert sum(parts.values()) == m["activations_bytes"]  # to the byte


def test_a_pipelines_further_micro_batches_are_their_own_part(tmp_path):
    """pp 2 x vpp 4, 1,152 / 288 = 4 micro-batches: rank 0 holds min(m v, 2 (p - 1) + (v - 1) p + 1) = min(16, 9)
    = 9 chunks in flight (Megatron-Core's warm-up, ParallelLayout.warmup_chunks), each a vpp-th of one
    micro-batch's layers: 9 / 4 micro-batches' worth, so the further ones are 5 / 9 of the total."""
    args = _gb200(tmp_path)
    args[args.index("--pp") + 1], args[args.index("--dp") + 1] = "2", "288"
    args[args.index("--micro-batch") + 1] = "1"
    m = json.loads(run_cli(*args, "--vpp", "4", "--json", check=True).stdout)["memory"]
    parts = m["activations_by_kind_bytes"]
    assert m["stage"] == 0 and "logits" not in parts  # the loss is on the last stage
    assert parts["pipeline_in_flight"] == pytest.approx(m["activations_bytes"] * 5 / 9, abs=2)
    assert sum(parts.values()) == m["activations_bytes"]


def test_the_memory_flag_prints_the_parts_and_is_refused_with_search(tmp_path):
    text = run_cli(*_gb200(tmp_path), "--memory", check=True).stdout
    lines = text.splitlines()
    i = next(n for n, ln in enumerate(lines) if ln.startswith("activations per GPU on pipeline rank 0"))
    table = lines[i + 1:i + 7]
    assert [ln.split()[0] for ln in table[1:]] == ["attention", "MoE", "Mamba-2", "embedding", "activations"]
    # walk35's 133.7 GB less Mamba's FP8 in_proj / out_proj inputs (section 412): 40 x s b h x (1 + d_in / h) bytes
    assert table[-1].split()[-3:] == ["125.7", "GB", "100.0%"]
    bad = run_cli(*_gb200(tmp_path), "--memory", "--search")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "--memory" in bad.stderr
    assert "Traceback" not in bad.stderr
