"""A JAX mesh's expert axis shards weights as MaxText's logical axis rules do (walk21).

AI-Hypercomputer/maxtext@e591f30c ``src/maxtext/configs/base.yml`` ``logical_axis_rules``: a dense weight's
``embed`` dimension is split over ``['fsdp', 'context', 'context_usp_ulysses', 'expert']``; an expert weight's
``exp`` dimension over ``expert`` and its ``embed_moe`` dimension over ``['fsdp', 'context', 'context_usp_ulysses']``.
Neither rule names ``data``: beside a data axis both are replicated across it. So every weight is sharded over
fsdp x expert (x context) ranks, and topo had sharded the dense weights over fsdp alone (replicating them over the
expert axis) and the experts over the data axis too.
"""

import numpy as np
import pytest

import topo
from conftest import run_cli
from topo.training.jax_mesh import MAXTEXT_STATE, layout_from_mesh
from topo.training.mapping import map_layout
from topo.training.model import load_model
from topo.training.parallel import check_layout, make_layout
from topo.training.step import estimate_step, step_traffic


@pytest.mark.parametrize("mesh, want", [
    ("ici_fsdp=8,ici_expert=8,dcn_data=4", dict(dp=256, ep=8, dp_sharding="zero3", dp_shard=64, expert_dp_shard=8)),
    ("ici_fsdp=8,ici_expert=8", dict(dp=64, ep=8, dp_sharding="zero3")),
    ("ici_expert=8,dcn_data=8", dict(dp=64, ep=8, dp_sharding="zero3", dp_shard=8, expert_dp_shard=1)),
    ("ici_context=2,ici_fsdp=2,ici_expert=4,dcn_data=2", dict(dp=16, ep=4, dp_sharding="zero3", dp_shard=8,
                                                             expert_dp_shard=4)),
])
def test_the_expert_axis_shards_dense_weights_and_the_data_axis_shards_no_expert(mesh, want):
    got = layout_from_mesh(mesh)
    assert {k: got.get(k) for k in want} == want and ("dp_shard" in got) == ("dp_shard" in want)
    assert ("expert_dp_shard" in got) == ("expert_dp_shard" in want)


def _mesh_layout(mesh: str, **extra):
    return make_layout(**layout_from_mesh(mesh), **MAXTEXT_STATE, global_batch=32, **extra)


def test_every_weight_is_sharded_over_fsdp_x_expert_ranks():
    """Mixtral 8x7B on 16 GPUs, ici_fsdp=2, ici_expert=4, dcn_data=2: MaxText keeps 4 bytes a parameter of every
    weight over fsdp x expert = 8 ranks (its 16 bytes of state over the same 8). Before: the dense weights over
    the 2 fsdp ranks and the experts over ep 4 x their 4 replicas, 16."""
    f = topo.build_fabric(topo.load_spec("dgx-h100-superpod"))
    m = load_model("mixtral-8x7b")
    lay = _mesh_layout("ici_fsdp=2,ici_expert=4,dcn_data=2")
    check_layout(m, lay, gpus=16)
    r = estimate_step(f, m, lay)
    assert r.memory.weights_bytes == pytest.approx(4 * m.total_params / 8, rel=1e-6)
    assert r.memory.optimizer_bytes == pytest.approx(8 * m.total_params / 8, rel=1e-6)


def test_the_experts_reduce_in_their_shard_group_and_all_reduce_across_the_data_axis():
    """Their groups as MaxText's device order lays them (expert fastest, then fsdp, then data: GPU e + 4 f + 8 d):
    an expert's shard group is its fsdp ranks {0, 4}, its replicas across data {0, 8}; one step reduce-scatters
    every local expert's fp32 gradient in the group and all-reduces half of it (the shard) across the replicas."""
    m = load_model("mixtral-8x7b")
    lay = _mesh_layout("ici_fsdp=2,ici_expert=4,dcn_data=2")
    g = map_layout(lay, 8, 1024)
    assert np.array_equal(g.groups("edps")[0], [0, 4]) and np.array_equal(g.groups("edpr")[0], [0, 8])
    t = {(x["collective"], x["groups"]): x["size_bytes"] * x["calls"] / lay.microbatches
         for x in step_traffic(m, lay) if x["dim"] == "dp"}
    local_experts = m.moe.experts // 4 * m.num_moe_layers * m.expert_params
    assert t[("reduce_scatter", "edps")] == pytest.approx(4 * local_experts, rel=1e-6)
    assert t[("all_reduce", "edpr")] == pytest.approx(4 * local_experts / 2, rel=1e-6)
    assert ("reduce_scatter", "edp") not in t


def test_the_header_says_where_the_experts_state_is_sharded():
    out = run_cli("train", "dgx-h100-superpod", "--model", "mixtral-8x7b", "--gpus", "16", "--global-batch", "32",
                  "--jax-mesh", "ici_fsdp=2,ici_expert=4,dcn_data=2").stdout
    assert "zero3 over groups of 8 (hybrid), experts' state over groups of 2" in out


def test_an_expert_shard_group_that_does_not_divide_the_replicas_is_refused():
    m = load_model("mixtral-8x7b")
    with pytest.raises(topo.errors.TopoError) as e:
        check_layout(m, make_layout(dp=16, ep=4, global_batch=32, dp_sharding="zero3", expert_dp_shard=3), gpus=16)
    assert e.value.key == "expert_dp_shard" and "3 does not divide the experts' replicas (tp x cp x dp / (etp x ep)) 4" in str(e.value)


def test_a_mesh_that_does_not_multiply_to_the_gpus_names_its_sizes():
    """walk21: the line spoke of tp x cp x pp x dp, which a JAX user did not write."""
    r = run_cli("train", "dgx-h100-superpod", "--model", "llama3-8b", "--gpus", "32", "--global-batch", "64",
                "--jax-mesh", "ici_fsdp=8,dcn_data=3", check=False)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr
    assert ("error: --jax-mesh: ici_fsdp=8,dcn_data=3 multiplies to 8 x 3 = 24 GPUs, not the 32 of --gpus; "
            "allowed: ici_* and dcn_* sizes whose product is 32") in r.stderr


def test_the_data_axis_shards_no_expert_without_an_expert_axis_too():
    """rev62: ``embed_moe`` names fsdp and context, not data, with or without an expert axis (MaxText@e591f30c
    base.yml), so Mixtral 8x7B on ici_fsdp=8,dcn_data=4 (32 GPUs, no EP) keeps every weight, its experts too, over
    the 8 fsdp ranks: 4 bytes a parameter / 8. topo had set the experts' shard group only beside an expert axis and
    sharded them over all 32 replicas (the dense part / 8 + the experts / 32)."""
    assert layout_from_mesh("ici_fsdp=8,dcn_data=4", moe=True)["expert_dp_shard"] == 8
    assert "expert_dp_shard" not in layout_from_mesh("ici_fsdp=8,dcn_data=4")  # a dense model: no such field
    m = load_model("mixtral-8x7b")
    lay = make_layout(**layout_from_mesh("ici_fsdp=8,dcn_data=4", moe=True), **MAXTEXT_STATE, global_batch=32)
    check_layout(m, lay, gpus=32)
    r = estimate_step(topo.build_fabric(topo.load_spec("dgx-h100-superpod")), m, lay)
    assert r.memory.weights_bytes == pytest.approx(4 * m.total_params / 8, rel=1e-6)
    out = run_cli("train", "dgx-h100-superpod", "--model", "mixtral-8x7b", "--gpus", "32", "--global-batch", "32",
                  "--jax-mesh", "ici_fsdp=8,dcn_data=4").stdout
    assert "zero3 over groups of 8 (hybrid), experts' state over groups of 8" in out
    dense = run_cli("train", "dgx-h100-superpod", "--model", "llama3-8b", "--gpus", "32", "--global-batch", "32",
                    "--jax-mesh", "ici_fsdp=8,dcn_data=4")
    assert dense.returncode == 0 and "experts' state" not in dense.stdout


@pytest.mark.parametrize("mesh, want", [
    ("ici_context=2,dcn_data=4", dict(cp=2, dp=4, dp_sharding="zero3", dp_shard=1)),
    ("ici_context=4", dict(cp=4, dp=1, dp_sharding="zero3")),
])
def test_a_context_axis_alone_shards_the_weights_over_its_ranks(mesh, want):
    """tidy58: MaxText's ``embed`` (and ``embed_moe``) rules name ``context`` (maxtext@e591f30c base.yml), so a
    context axis without fsdp or expert still shards every weight over the context ranks, replicated over data.
    Llama 3 8B, ici_context=2, dcn_data=4 (8 GPUs): 4 bytes a parameter over 2 ranks, 8 of Adam over the same 2.
    Before: ``dp_sharding none``, every weight whole on every GPU."""
    got = layout_from_mesh(mesh)
    assert {k: got.get(k) for k in want} == want and ("dp_shard" in got) == ("dp_shard" in want)


def test_a_context_axis_alone_keeps_a_context_share_of_the_weights():
    """The memory side of the test above, once (it ran for each parametrized mesh on the same mesh)."""
    f = topo.build_fabric(topo.load_spec("dgx-h100-superpod"))
    m = load_model("llama3-8b")
    lay = _mesh_layout("ici_context=2,dcn_data=4")
    check_layout(m, lay, gpus=8)
    r = estimate_step(f, m, lay)
    assert r.memory.weights_bytes == pytest.approx(4 * m.total_params / 2, rel=1e-6)
    assert r.memory.optimizer_bytes == pytest.approx(8 * m.total_params / 2, rel=1e-6)
    moe = layout_from_mesh("ici_context=2,dcn_data=4", moe=True)
    assert moe["expert_dp_shard"] == 2  # 'embed_moe' over context: an expert's shard group is the 2 context ranks
