"""``--dp-shard N`` without ``--dp-sharding`` keeps Megatron's meaning (hybrid ZeRO-1: the optimizer state sharded
over groups of N, Megatron-Core's ``num_distributed_optimizer_instances = dp / N``, NVIDIA/Megatron-LM@d98e8a64
megatron/core/parallel_state.py lines 927-929: ``intra_partial_data_parallel_size = dp x cp //
num_distributed_optimizer_instances``), and the header and ``--help`` say so and how to ask for FSDP's HSDP, which
a torchtitan user means by it (walk45, section 453 Left 4)."""

from conftest import run_cli

ARGS = ("train", "dgx-h100-superpod", "--model", "llama3-8b", "--gpus", "64", "--dp", "64", "--dp-shard", "16",
        "--global-batch", "64")


def _header(*extra):
    proc = run_cli(*ARGS, *extra, check=True)
    return next(line for line in proc.stdout.splitlines() if line.startswith("llama3-8b on "))


def test_dp_shard_alone_says_it_shards_the_optimizer_state_and_names_fsdp():
    head = _header()
    instances = 64 // 16  # dp / dp_shard
    assert (f"zero1 over groups of 16 (hybrid: the optimizer state sharded in each, {instances} replicas, "
            f"Megatron-Core's num_distributed_optimizer_instances {instances}; not FSDP, which is --dp-sharding "
            "zero3)") in head


def test_zero2_names_what_it_shards_and_fsdp_says_nothing_more():
    assert "zero2 over groups of 16 (hybrid: the optimizer state and gradients sharded in each, 4 replicas; not FSDP" \
        in _header("--dp-sharding", "zero2")
    assert "zero3 over groups of 16 (hybrid)," in _header("--dp-sharding", "zero3")


def test_help_says_what_dp_shard_alone_does():
    text = " ".join(run_cli("train", "--help", check=True).stdout.split())
    assert "Alone (zero1) that is the optimizer state only, Megatron-Core's num_distributed_optimizer_instances = " \
           "dp / N, not FSDP; for FSDP's HSDP (torchtitan's data_parallel_shard_degree) give --dp-sharding zero3 " \
           "too" in text
