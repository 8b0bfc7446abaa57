"""regdp73 (walk31's Left 2, section 330): the bytes the ``dp`` way sends across the sites are the one-site step's
data-parallel collectives, as the run's optimizer sends them, for each sharding.

- Hierarchical (NeMo's multi-DC run: NVIDIA/NeMo@aed13ee8 examples/llm/pretrain/multi_datacenter.py,
  ``num_distributed_optimizer_instances=2``, ``grad_reduce_in_fp32=True``; NVIDIA/Megatron-LM core_v0.11.0
  megatron/core/distributed/param_and_grad_buffer.py lines 333-353: the shard of ``grad_data`` all-reduced across the
  instances; lines 191-205: the parameters all-gathered over the intra-instance group): ``2(K-1)/K`` of one replica's
  gradients at the reduction dtype, whatever the sharding (the gather stays inside a site); FSDP reduces every
  micro-batch in the one-site step (``m`` times).
- Flat ring over the job's ``D`` replicas (one instance, NCCL's cross-dc ring crossing each boundary once a channel,
  NVIDIA/nccl cross-dc 18a07ee src/graph/connect.cc lines 143-158): a ring all-reduce carries ``2(D-1)/D`` of its
  bytes across a boundary, a ring reduce-scatter or all-gather ``(D-1)/D`` (one ``1/D`` chunk a step, ``D - 1``
  steps). DDP: ``2(D-1)/D G``; ZeRO-1: ``(D-1)/D (G + W)``, ``W`` the parameters at 2 B (BF16), or with
  ``fp8_param_gather`` 1 B but the embedding and output layer at 2 B (Megatron-Core keeps them BF16); FSDP
  (``fsdp_reshard_after_forward``: gathered before forward and backward) ``(D-1)/D m (G + 2 W)``, kept from the
  forward ``(D-1)/D m (G + W)``.

G = 4 B x Llama 3 8B's parameters (Meta's model card: 8.03B; fp32 gradient reduction), the vocabulary 128,256
(Meta's config.json, tidy74) x hidden 4,096 for each of the embedding and the (untied) output layer, and the final
norm's 4,096 (topo/data/models/llama3-8b.toml). Region: two
DGX H100 SUs 40 km apart (K = 2); TP 8, dp 4 (D = 4), global batch 8, micro-batch 1: m = 2 a replica.
"""

import pytest

from small_regions import region_file, two_sites
from topo.fabric.region import build_region
from topo.training.model import load_model
from topo.training.multisite import estimate_across_sites
from topo.training.parallel import make_layout

TEXT = two_sites("rdb73", "two SUs", "dgx-h100-superpod", 1)
BASE = dict(tp=8, dp=4, global_batch=8, seq_len=4096)
EMBED_AND_HEAD = 2 * 128_256 * 4_096 + 8 * 4_096 + 8 * 32 * 2 * 4_096  # the final norm and the 32 layers' two norms
# too, whole on each of the replica's 8 TP ranks (mla78: Megatron's norms are not split over TP): what stays BF16
# under fp8_param_gather (memory.bf16_kept_params, small29)
D, M = 4, 2


@pytest.fixture(scope="module")
def regions(tmp_path_factory):
    return {form: build_region(region_file(tmp_path_factory, TEXT + f'[nccl]\ndp_reduction = "{form}"\n',
                                           f"rdb73{form}"))
            for form in ("hierarchical", "flat_ring")}


def _bytes(regions, form, **kw):
    job = estimate_across_sites(regions[form], load_model("llama3-8b"), make_layout(**BASE, **kw))
    return job.strategies[0].dci_bytes_per_step


@pytest.fixture(scope="module")
def grads(regions):
    """G, the hierarchical crossing of plain DDP (2(K-1)/K G = G at K = 2)."""
    g = _bytes(regions, "hierarchical", dp_sharding="none")
    assert g == pytest.approx(4 * 8.03e9, rel=0.005)
    return g


@pytest.mark.parametrize("kw, times", [(dict(dp_sharding="none"), 1), (dict(dp_sharding="zero1"), 1),
                                       (dict(dp_sharding="zero1", precision="fp8", fp8_param_gather=True), 1),
                                       (dict(dp_sharding="fsdp"), M)])
def test_the_hierarchical_form_carries_the_gradients_alone(regions, grads, kw, times):
    assert _bytes(regions, "hierarchical", **kw) == pytest.approx(times * grads, rel=1e-9)


def test_ddp_flat_ring_is_the_all_reduce(regions, grads):
    assert _bytes(regions, "flat_ring", dp_sharding="none") == pytest.approx(2 * (D - 1) / D * grads, rel=1e-9)


def test_distributed_optimizer_flat_ring_is_reduce_scatter_and_bf16_gather(regions, grads):
    W = grads / 4 * 2
    assert _bytes(regions, "flat_ring", dp_sharding="zero1") == pytest.approx((D - 1) / D * (grads + W), rel=1e-9)


@pytest.mark.parametrize("pp", [1, 2])
def test_fp8_param_gather_gathers_the_layers_at_one_byte(regions, grads, pp):
    """At pp 2 the embedding sits on the first stage and the head and final norm on the last: each stage's gather
    at its own bytes a parameter, the sum the same."""
    W = grads / 4 + EMBED_AND_HEAD  # P x 1 B, the embedding and head's parameters once more (2 B)
    fp8 = dict(dp_sharding="zero1", precision="fp8", fp8_param_gather=True, pp=pp)
    assert _bytes(regions, "hierarchical", **fp8) == pytest.approx(grads, rel=1e-9)
    assert _bytes(regions, "flat_ring", **fp8) == pytest.approx((D - 1) / D * (grads + W), rel=1e-9)


@pytest.mark.parametrize("reshard, passes", [(True, 2), (False, 1)])
def test_fsdp_flat_ring_carries_every_unit_gather_and_reduce_scatter(regions, grads, reshard, passes):
    """Gathered before the forward and again before the backward, or once when kept (``fsdp_reshard_after_forward``
    false); reduce-scattered after each backward; every micro-batch."""
    W = grads / 4 * 2
    got = _bytes(regions, "flat_ring", dp_sharding="fsdp", fsdp_reshard_after_forward=reshard)
    assert got == pytest.approx((D - 1) / D * M * (grads + passes * W), rel=1e-9)
