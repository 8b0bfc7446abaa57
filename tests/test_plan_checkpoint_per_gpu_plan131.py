"""plan131: each GPU's shard of the checkpoint (walk46's Left 3), in the text and ``--json``
(``reliability.checkpoint_per_gpu_bytes``).

The checkpoint (parameters x 14 B, mixed-precision Adam: planner.md line 61) over the interrupting GPUs (the job's,
or every GPU without a job), each writing an equal shard as Megatron's fully_parallel_save spreads one save over the
data-parallel ranks (NVIDIA/Megatron-LM@008e9cdb53e75bbf9733d0089a5c9bf14553ca1c
megatron/core/dist_checkpointing/strategies/fully_parallel.py). Llama 3 (arXiv 2407.21783 sec. 3.3.4, planner.md
line 64) gives 1 MB to 4 GB per GPU; Llama 3 405B on its 16,384 GPUs: 4.0585e11 x 14 / 16,384 = 346.8 MB.
"""

import json

import pytest

from conftest import run_cli
from topo.plan import plan
from topo.plan.reliability import joint_reliability

_LAYOUT = ("tp=8,pp=16,dp=128,vpp=8,seq_len=8192,global_batch=2048,dp_sharding=fsdp_grad_op,"
           "pipeline_embedding=true")
_JOB = ("plan", "meta-llama3-24k", "--model", "llama3-405b", "--layout", _LAYOUT, "--no-collectives")


def test_per_gpu_shard_is_the_checkpoint_over_every_gpu_without_a_job():
    r = plan(layers=[("t", {"workload": {"params": 405e9}})], collectives=False).reliability
    assert r.interruptions_of == "cluster"
    assert r.checkpoint_per_gpu_bytes == pytest.approx(405e9 * 14 / 100_352, rel=1e-12)  # 56.5 MB
    # the async copy to host memory is that shard at the snapshot rate (25 GB/s, reliability.toml): one formula
    a = plan(layers=[("t", {"workload": {"params": 405e9}, "reliability": {"checkpoint": {"mode": "async"}}})],
             collectives=False).reliability
    assert a.checkpoint_stall_s == pytest.approx(a.checkpoint_per_gpu_bytes / 25e9, rel=1e-12)


def test_llama3_405b_writes_347_mb_a_gpu_on_its_16384_gpus():
    doc = json.loads(run_cli(*_JOB, "--json", check=True).stdout)["reliability"]
    assert doc["interrupting_gpus"] == 16_384
    assert doc["checkpoint_per_gpu_bytes"] == round(doc["params"] * 14 / 16_384)  # whole bytes, as every *_bytes
    assert doc["checkpoint_per_gpu_bytes"] == pytest.approx(4.0585e11 * 14 / 16_384, rel=1e-4)  # 346.8 MB
    assert 1e6 <= doc["checkpoint_per_gpu_bytes"] <= 4e9  # Llama 3's per-GPU range
    text = run_cli(*_JOB, check=True).stdout
    assert "346.8 MB per GPU: each of the job's 16,384 GPUs writes an equal shard" in text


def test_a_regions_shard_is_the_checkpoint_over_every_sites_gpus():
    r = plan(layers=[("t", {"workload": {"params": 405e9}})], collectives=False).reliability
    joint = joint_reliability([r, r], [100_352, 100_352], [1.0, 1.0], 0.0)
    assert joint.checkpoint_per_gpu_bytes == pytest.approx(405e9 * 14 / 200_704, rel=1e-12)
