"""XLA's all-reduce combiner (``ParallelLayout.dp_all_reduce_combine_bytes``): a JAX run's data-parallel gradient
all-reduces merged into collectives of up to the threshold, each starting when its last gradient exists, so the
last one, a whole bucket, cannot hide behind the backward.

Sources: openxla/xla ``xla/service/collective_combiner_utils.h`` ``CombineInstructionsByKey`` (post order, greedy,
merged output within the threshold); AI-Hypercomputer/maxtext@efb6d9e4 ``MaxText/configs/a3/llama_2_7b/{1,2,4,8,
16}vm.sh`` (``--xla_gpu_all_reduce_combine_threshold_bytes`` 128 MiB, 64 MiB, 512 MiB, 1 GiB, 1 GiB;
``scan_layers=false``)."""

import math
import sys

import pytest

import topo
from conftest import ROOT, run_cli
from published_setups import published_setups
from topo.training.comm import CommEngine
from topo.training.model import load_model
from topo.training.parallel import bucket_count, dp_bucket_calls, make_layout, xla_all_reduce_calls
from topo.training.step import estimate_step

LLAMA2_7B_PARAMS = 6_738_415_616  # MaxText's count at efb6d9e4 (tests/test_training_runs_maxtext_gcp.py)
A3_CLI = ["train", "dgx-h100-superpod", "--set", "server.nics=4", "--set", "server.nic_rate=200 Gb/s", "--set",
          "fabric.tiers[leaf].port_rate=200 Gb/s", "--set", "fabric.tiers[spine].port_rate=200 Gb/s", "--set",
          "fabric.technology=gcp_tcpx", "--model", "llama2-7b", "--seq", "4096", "--micro-batch", "4",
          "--remat-policy", "minimal_flash"]


def _a3(vms: int, threshold=None):
    """MaxText's A3 Llama 2 7B layout at ``vms`` VMs (dcn_data vms x ici_fsdp 8, 4 sequences a GPU)."""
    kw = {} if threshold is None else {"dp_all_reduce_combine_bytes": threshold}
    return make_layout(dp=8 * vms, dp_shard=8, dp_sharding="zero3", global_batch=32 * vms, micro_batch=4,
                       weight_bytes=4.0, grad_bytes=4.0, optimizer_bytes_per_param=8.0, gather_bytes=2.0, **kw)


def test_buckets_fill_in_order_as_megatron_and_xla_fill_them():
    assert bucket_count(3_369_207_808, 2**30) == 4  # Llama 2 7B's fp32 shard over 8 ranks in 1 GiB buckets
    assert bucket_count(3_369_207_808, 2**29) == 7
    assert bucket_count(3_369_207_808, 2**26) == 51
    assert bucket_count(2**30, 2**30) == 1 and bucket_count(2**30 + 1, 2**30) == 2
    assert bucket_count(0, 2**30) == 1
    # Megatron-Core's DDP buckets are the same count: 8B / 4 TP ranks in 256M-parameter buckets (dp 256)
    lay = make_layout(tp=4, dp=256, global_batch=2048, dp_sharding="none")
    assert dp_bucket_calls(lay, 2.0e9) == math.ceil(2.0e9 / 256_000_000) == 8


@pytest.mark.parametrize("vms, threshold, calls", [(2, 2**26, 51), (4, 2**29, 7), (16, 2**30, 4)])
def test_xla_combines_the_shards_all_reduce_into_threshold_buckets(vms, threshold, calls):
    shard_bytes = LLAMA2_7B_PARAMS * 4 / 8  # fp32 gradients, sharded over the 8 FSDP ranks of a VM
    assert xla_all_reduce_calls(_a3(vms, threshold), 34, shard_bytes) == calls
    assert xla_all_reduce_calls(_a3(vms), 34, shard_bytes) == 34  # no threshold: one a unit, as before


@pytest.fixture(scope="module")
def pod():
    return topo.build_fabric(topo.load_spec("dgx-h100-superpod"))


def test_the_last_combined_bucket_is_exposed_whole(pod):
    """16 VMs at 1 GiB: 4 all-reduces of the replicas' shards, each a quarter of the gradients; the last one can only
    start when the backward ends, so at least its whole time is exposed, where one a layer exposed a layer's."""
    m = load_model("llama2-7b")
    engine = CommEngine(pod)
    steps = {t: estimate_step(pod, m, _a3(16, t), engine=engine) for t in (None, 2**30)}
    ar = {t: [c for c in r.comm if c.dim == "dp" and c.collective == "all_reduce"] for t, r in steps.items()}
    (per_unit,), (combined,) = ar[None], ar[2**30]
    assert combined.calls_per_step == 4 and per_unit.calls_per_step == m.layers + 2
    assert combined.size_bytes * 4 == pytest.approx(per_unit.size_bytes * per_unit.calls_per_step, rel=1e-9)
    one = combined.time_s / combined.calls_per_step
    assert combined.exposed_s >= one > 4 * per_unit.time_s / per_unit.calls_per_step
    assert combined.exposed_s > 2 * per_unit.exposed_s
    assert steps[2**30].step_time_s > steps[None].step_time_s
    # the reduce-scatter inside the VM and the gathers are untouched by the all-reduce threshold
    for coll in ("reduce_scatter", "all_gather"):
        a, b = ([c for c in r.comm if c.collective == coll] for r in steps.values())
        assert [(c.size_bytes, c.calls_per_step, c.exposed_s) for c in a] == \
               [(c.size_bytes, c.calls_per_step, c.exposed_s) for c in b]


def test_zero0_all_reduce_takes_the_threshold_over_megatrons_buckets(pod):
    m = load_model("llama2-7b")
    lay = make_layout(tp=8, dp=4, global_batch=32, dp_sharding="none", dp_all_reduce_combine_bytes=2**30)
    r = estimate_step(pod, m, lay)
    (ar,) = [c for c in r.comm if c.dim == "dp"]
    total = ar.size_bytes * ar.calls_per_step
    assert ar.calls_per_step == math.ceil(total / 2**30) == 4  # 6.7B / 8 x 4 bytes in 1 GiB buckets
    default = estimate_step(pod, m, make_layout(tp=8, dp=4, global_batch=32, dp_sharding="none"))
    (ar0,) = [c for c in default.comm if c.dim == "dp"]
    assert ar0.calls_per_step == dp_bucket_calls(make_layout(tp=8, dp=4, global_batch=32), total / 4) == 22


def test_maxtext_a3_rows_take_their_scripts_combine_threshold():
    sys.path.insert(0, str(ROOT / "benchmarks"))

    setups = {s["run"]: s["lay"] for s in published_setups() if s["run"].startswith("maxtext_")}
    want = {8: 134_217_728, 16: 67_108_864, 32: 536_870_912, 64: 1_073_741_824, 128: 1_073_741_824}
    for gpus, threshold in want.items():
        assert setups[f"maxtext_a3_llama2_7b_{gpus}"].dp_all_reduce_combine_bytes == threshold
    for rid in ("maxtext_h100_llama2_7b", "maxtext_a4_llama31_70b_fp8_256", "maxtext_a4_llama31_405b_fp8_256"):
        assert setups[rid].dp_all_reduce_combine_bytes is None, rid  # unknown flags, or scanned layers


def test_cli_names_the_threshold_and_says_when_it_changes_nothing():
    mesh = ["--jax-mesh", "dcn_data=2,ici_fsdp=8", "--global-batch", "64"]
    out = run_cli(*A3_CLI, *mesh, "--layout", "dp_all_reduce_combine_bytes=67108864", check=True).stdout
    # a mesh prices XLA's latency-hiding scheduler unless the layout says otherwise (rev54)
    assert "framework options: dp_all_reduce_combine_bytes 67108864, dp_overlap_policy xla_lhs (layout fields)" in out
    out = run_cli(*A3_CLI, "--jax-mesh", "ici_fsdp=8", "--global-batch", "32", "--layout",
                  "dp_all_reduce_combine_bytes=67108864", check=True).stdout
    assert ("framework options: dp_all_reduce_combine_bytes 67108864 (no effect: no hybrid-sharding replicas: "
            "the gradients are reduce-scattered), dp_overlap_policy xla_lhs (layout fields)") in out
    bad = run_cli(*A3_CLI, *mesh, "--layout", "dp_all_reduce_combine_bytes=0")
    assert bad.returncode == 2 and "dp_all_reduce_combine_bytes" in bad.stderr and "Traceback" not in bad.stderr
