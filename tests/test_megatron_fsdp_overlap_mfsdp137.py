"""mfsdp137 (issue 29, findings 473): Megatron-FSDP forcing ``overlap_grad_reduce`` on.

- Megatron-FSDP sets ``overlap_grad_reduce`` True whenever it shards the gradients (``optim_grads`` and
  ``optim_grads_params``) and ``overlap_param_gather`` True when it shards the weights, whatever the config says
  (NVIDIA/Megatron-LM@d98e8a64ddf34856e74b24714e3bedb2f5a39553
  megatron/core/distributed/fsdp/src/megatron_fsdp/megatron_fsdp.py lines 327-337; the same at core_v0.14.0 lines
  259-270), and Megatron-Core 0.13's ``custom_fsdp`` asserts both (``fully_sharded_data_parallel.py`` lines
  196-204). ``overlap_dp = false`` on a layout that names Megatron-FSDP sharding the gradients
  (``dp_outer_sharding = "optim"``, which Megatron-FSDP runs only with ``optim_grads_params``; ``wgrad_output =
  "copied"`` under ZeRO-2/3) is a run it never makes, refused in one line. FSDP2's and a layout naming no framework
  keep ``overlap_dp = false`` exposing the collectives.
"""

import pytest

from conftest import run_cli
from topo.errors import TopoError
from topo.training.model import load_model
from topo.training.parallel import check_layout, make_layout

FSDP = dict(tp=8, dp=4, global_batch=256, micro_batch=32, seq_len=8192)
TRAIN = ("train", "dgx-h100-superpod", "--model", "llama3-8b", "--tp", "8", "--dp", "4", "--global-batch", "256")


def _check(**kw):
    check_layout(load_model("llama3-8b"), make_layout(**FSDP, **kw))


def test_the_cli_refuses_overlap_off_under_the_outer_optimizer_group():
    r = run_cli(*TRAIN, "--overlap", "dp=off", "--layout", 'dp_sharding="fsdp",dp_shard=2,dp_outer_sharding="optim"')
    assert r.returncode == 2 and "Traceback" not in r.stderr
    (line,) = r.stderr.strip().splitlines()
    assert line.startswith("error: --overlap: overlap_dp: false with dp_outer_sharding optim, which is Megatron-FSDP")
    assert "overlap_grad_reduce" in line and line.endswith("allowed with it: true")


@pytest.mark.parametrize("sharding", ["zero2", "zero3", "fsdp"])
def test_copied_gradients_under_sharded_gradients_are_megatron_fsdp(sharding):
    with pytest.raises(TopoError) as exc:
        _check(dp_sharding=sharding, wgrad_output="copied", overlap_dp=False)
    assert exc.value.key == "overlap_dp"
    assert f"wgrad_output copied under dp_sharding {sharding}" in str(exc.value)


@pytest.mark.parametrize("kw", [
    dict(dp_sharding="zero3", wgrad_output="fsdp2"),  # FSDP2 runs its collectives unoverlapped without prefetch
    dict(dp_sharding="zero3"),  # no framework named
    dict(dp_sharding="zero1", wgrad_output="copied"),  # Megatron-FSDP's "optim": the reduction is delayed, not forced
    dict(dp_sharding="fsdp", dp_shard=2),  # hybrid, replicas not optimizer-sharded: no field names Megatron-FSDP
], ids=["fsdp2", "unnamed", "mfsdp_optim", "hsdp_no_shard"])
def test_other_layouts_keep_overlap_off(kw):
    _check(**kw, overlap_dp=False)


def test_overlapped_megatron_fsdp_is_allowed():
    _check(dp_sharding="fsdp", dp_shard=2, dp_outer_sharding="optim", wgrad_output="copied")
