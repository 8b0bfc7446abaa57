"""regions75 (section 352, item 2): hybrid sharding's flat cross-DC ring is its replicate group's all-reduce.

With hybrid sharding (``dp_shard`` below ``dp``) the gradients are reduce-scattered over the shard group and each
rank's shard is all-reduced over the replicate group, ``dp / dp_shard`` ranks (the one-site step's ``dpr`` item;
pytorch/pytorch@3ade90a6aaa939cd6238e314c321b9f920db1471 torch/distributed/fsdp/_runtime_utils.py
``_post_backward_hook``: ``default_hooks.allreduce_hook(state=state._inter_node_state, grad=new_sharded_grad)`` after
the shard group's reduce-scatter). With the shard groups inside the sites, NCCL's flat cross-DC ring is that
all-reduce: a ring of ``D_r = D / dp_shard`` ranks carries ``2(D_r-1)/D_r`` of one replica's gradients ``V`` across
each boundary (``dp_shard`` times the groups, each its shard ``V / dp_shard``) in ``2(D_r-1)`` crossings, not
``2(D-1)/D V`` in ``2(D-1)`` as a ring over every replica would.

Job: Llama 3 8B, tp 8, dp 8 (4 a site on two DGX H100 SUs), dp_shard 2: ``D = 8``, ``D_r = 4``.
"""

import pytest

from small_regions import region_file, two_sites
from topo.fabric.region import build_region
from topo.training.model import load_model
from topo.training.multisite import estimate_across_sites
from topo.training.parallel import make_layout

TEXT = two_sites("hs75", "two SUs", "dgx-h100-superpod", 1)


def _dp(tmp_path_factory, form, sharding):
    region = build_region(region_file(tmp_path_factory, TEXT + f'[nccl]\ndp_reduction = "{form}"\n', "hs75"))
    job = estimate_across_sites(region, load_model("llama3-8b"),
                                make_layout(tp=8, dp=8, global_batch=16, seq_len=4096, dp_sharding=sharding,
                                            dp_shard=2))
    return job.strategies[0], job.assumptions


@pytest.mark.parametrize("sharding", ["zero1", "fsdp"])
def test_the_hybrid_ring_is_the_replicate_groups(tmp_path_factory, sharding):
    h, _ = _dp(tmp_path_factory, "hierarchical", sharding)
    V = h.dci_bytes_per_step  # 2(K-1)/K V = V at K = 2
    s, said = _dp(tmp_path_factory, "flat_ring", sharding)
    assert s.dci_bytes_per_step == pytest.approx(2 * 3 / 4 * V, rel=1e-12)  # D_r = 4: 1.5 V, not 2 x 7/8 V
    line = next(a for a in said if a.startswith("dp across sites: the gradients cross"))
    assert "flat cross-DC ring over 4 replicas" in line and "6 crossings" in line, line


def test_the_hybrid_rings_window_counts_every_shard_groups_channels(tmp_path_factory, monkeypatch):
    """rev75: ``dp_shard`` rings run side by side, each with a replica's GPUs' channels, so the flat ring's window
    (``window_s``'s in-flight channels) is ``tp x dp_shard x channels`` = 8 x 2 x 16 (was left untested: a mutation
    passing ``tp`` alone passed)."""
    from topo.engine.region_estimate import region_channels
    from topo.training import dp_across
    seen = []
    real = dp_across.window_s
    monkeypatch.setattr(dp_across, "window_s", lambda *a: seen.append(a[2]) or real(*a))
    region = build_region(region_file(tmp_path_factory, TEXT + '[nccl]\ndp_reduction = "flat_ring"\n', "hs75"))
    estimate_across_sites(region, load_model("llama3-8b"),
                          make_layout(tp=8, dp=8, global_batch=16, seq_len=4096, dp_sharding="zero1", dp_shard=2))
    assert seen and set(seen) == {8 * 2 * region_channels(region)}
