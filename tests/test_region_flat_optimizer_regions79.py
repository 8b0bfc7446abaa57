"""regions79 (section 373, item 2): under NCCL's flat cross-DC ring the optimizer step is ``K`` times shorter.

The flat ring is one distributed-optimizer instance over every site's replicas (Megatron-Core's default
``num_distributed_optimizer_instances = 1``, NVIDIA/Megatron-LM@d98e8a64ddf34856e74b24714e3bedb2f5a39553
megatron/core/distributed/distributed_data_parallel_config.py line 34), so each rank's optimizer steps its own
``1 / D`` of the state (megatron/core/optimizer/distrib_optimizer.py ``_build_model_and_main_param_groups``:
``shard_fp32_from_float16_groups``, the rank's own ``param_range``), ``D`` the job's ranks: ``K`` times less than a
site's instance (regions76's ``multisite_memory`` shards the memory the same way). The step's ``optimizer`` line is
linear in the parameters stepped (``OPTIMIZER_STEP_BYTES`` a parameter through HBM), so the share's step saves
``(1 - 1/K)`` of it with ``K`` equal shares; nothing where the state's sharding does not widen (DDP: none to
shard; hybrid sharding: its shard group inside a site). The job's step under the flat ring with the saving is
checked end to end in test_region_flat_ring_gather_regions76 and test_region_fsdp_forward_gather_regions79.
"""

from types import SimpleNamespace

import pytest

from topo.training.model import load_model
from topo.training.multisite import SiteReady, flat_optimizer_saved_s
from topo.training.multisite_memory import job_optimizer_s
from topo.training.parallel import make_layout

MODEL = load_model("llama3-8b")
ONE = SimpleNamespace(breakdown_s={"optimizer": 0.012})  # a share's step's optimizer line


def _share(**kw):
    return make_layout(tp=8, dp=2, global_batch=32, micro_batch=8, seq_len=4096, **kw)


@pytest.mark.parametrize("sharding", ["zero1", "zero2", "fsdp"])
@pytest.mark.parametrize("K", [2, 4])
def test_the_optimizer_step_is_K_times_shorter(sharding, K):
    """``K`` equal shares of 2 replicas: the state over ``2 K`` ranks, the step ``1 / K`` of the share's."""
    share = _share(dp_sharding=sharding)
    assert job_optimizer_s(MODEL, share, 0.012, 2 * K) == pytest.approx(0.012 / K, rel=1e-12)
    assert flat_optimizer_saved_s(MODEL, share, ONE, 2 * K) == pytest.approx(0.012 * (1 - 1 / K), rel=1e-12)


def test_nothing_saved_where_the_sharding_does_not_widen():
    """DDP shards no state; hybrid sharding's shard group (``dp_shard`` 2) stays inside a site either way; the
    share's own replicas (one site) save nothing."""
    assert flat_optimizer_saved_s(MODEL, _share(dp_sharding="none"), ONE, 4) == 0.0
    assert flat_optimizer_saved_s(MODEL, _share(dp_sharding="fsdp", dp_shard=2), ONE, 4) == 0.0
    assert flat_optimizer_saved_s(MODEL, _share(), ONE, 2) == 0.0


def test_site_ready_takes_one_saving_a_site_or_none():
    """One saving a site, or none (no flat ring priced)."""
    assert SiteReady((1.0,), (0.5,), (0.8,), (), (0.1,)).flat_saved_s == (0.1,)
    with pytest.raises(ValueError, match="one flat-ring saving a site"):
        SiteReady((1.0, 2.0), (0.5, 0.5), (0.8, 1.6), (), (0.1,))
