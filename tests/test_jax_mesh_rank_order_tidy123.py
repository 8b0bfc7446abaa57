"""MaxText's stages inside its data replicas (tidy123, section 448; walk44's Left 2).

MaxText's ``mesh_axes`` list the axes slowest first, ``data, stage, fsdp, ..., tensor, ..., expert``
(AI-Hypercomputer/maxtext@315ebb59 ``MaxText/configs/base.yml``); ``create_device_mesh`` (maxtext@f4f08fa4
``MaxText/maxtext_utils.py``) hands the ICI and DCN sizes in that order to JAX's ``create_hybrid_device_mesh``,
which numbers the granules in the DCN mesh's row-major order and lays each granule's devices as the ICI mesh
(``np.arange(len(granules)).reshape(dcn_mesh_shape)``, ``np.block``). topo's default order ``tp-cp-ep-dp-pp`` puts
the stages outermost; ``tp-cp-ep-pp-dp`` puts them inside the data replicas, as MaxText does.
"""

import json

import numpy as np
import pytest

from conftest import run_cli
from topo.training.jax_mesh import check_mesh_placement, mesh_rank_order
from topo.training.mapping import map_layout
from topo.training.parallel import make_layout

AXES = ("data", "pipeline", "fsdp", "context", "tensor", "expert")  # MaxText's mesh_axes that topo models, slowest first


def hybrid_groups(ici: dict, dcn: dict, axis: str) -> set:
    """The device groups along ``axis`` of a hybrid mesh (closed form of the module doc): a device's id is its
    granule (its DCN indices, row-major in AXES order) x the granule's devices plus its ICI indices (row-major)."""
    i_shape = [ici.get(a, 1) for a in AXES]
    d_shape = [dcn.get(a, 1) for a in AXES]
    ids = np.arange(int(np.prod(i_shape + d_shape))).reshape(d_shape + i_shape)  # granule-major
    n = len(AXES)
    mesh = ids.transpose([k for a in range(n) for k in (a, n + a)])  # each axis: its DCN index outside its ICI one
    mesh = mesh.reshape([i * d for i, d in zip(i_shape, d_shape)])
    k = AXES.index(axis)
    rows = np.moveaxis(mesh, k, -1).reshape(-1, mesh.shape[k])
    return {frozenset(r.tolist()) for r in rows}


def topo_groups(lay, dim: str) -> set:
    return {frozenset(r.tolist()) for r in map_layout(lay, 8, lay.gpus).groups(dim)}


@pytest.mark.parametrize("ici, dcn", [
    ({"tensor": 8}, {"pipeline": 2, "data": 2}),       # two DCN axes: MaxText's stages inside the data replicas
    ({"tensor": 2}, {"pipeline": 4, "data": 2}),
    ({"pipeline": 8}, {"data": 4}),                    # stages inside a VM, data across: the default refused it
])
def test_chosen_order_gives_maxtexts_pipeline_and_data_groups(ici, dcn):
    text = ",".join([f"ici_{a}={n}" for a, n in ici.items()] + [f"dcn_{a}={n}" for a, n in dcn.items()])
    order = check_mesh_placement(text, 8)
    assert order == mesh_rank_order(text) == "tp-cp-ep-pp-dp"
    size = lambda a: ici.get(a, 1) * dcn.get(a, 1)  # noqa: E731
    lay = make_layout(tp=size("tensor"), pp=size("pipeline"), dp=size("data"), global_batch=64, rank_order=order)
    assert topo_groups(lay, "pp") == hybrid_groups(ici, dcn, "pipeline")
    assert topo_groups(lay, "dp") == hybrid_groups(ici, dcn, "data")
    default = make_layout(tp=size("tensor"), pp=size("pipeline"), dp=size("data"), global_batch=64)
    assert topo_groups(default, "pp") != hybrid_groups(ici, dcn, "pipeline")  # what ran before


@pytest.mark.parametrize("text", ["ici_fsdp=8,dcn_fsdp=32", "ici_fsdp=8,dcn_pipeline=4,dcn_fsdp=8",
                                  "ici_data=8,dcn_pipeline=4", "ici_fsdp=8,dcn_data=4"])
def test_meshes_the_default_places_keep_it(text):
    assert check_mesh_placement(text, 8) == mesh_rank_order(text) == "tp-cp-ep-dp-pp"


def test_sharded_ranks_between_stages_and_data_have_no_order_and_are_said():
    """fsdp inside the stages inside data: dp is one axis in every topo order, so none places it."""
    text = "ici_fsdp=8,dcn_pipeline=2,dcn_data=2"
    assert mesh_rank_order(text) is None and check_mesh_placement(text, 8) == "tp-cp-ep-dp-pp"
    proc = run_cli("train", "dgx-h100-superpod", "--model", "llama3-8b", "--gpus", "32", "--global-batch", "64",
                   "--jax-mesh", text)
    assert proc.returncode == 0, proc.stderr
    assert any(line.startswith(f"note: {text}: MaxText lays the fsdp ranks inside the pipeline stages")
               for line in proc.stdout.splitlines())


def _run(*extra):
    proc = run_cli("train", "dgx-h100-superpod", "--model", "llama3-8b", "--gpus", "32", "--global-batch", "64",
                   "--jax-mesh", "ici_tensor=8,dcn_pipeline=2,dcn_data=2", "--json", *extra)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_cli_mesh_chooses_the_order_and_says_so_unless_one_is_given():
    doc = _run()
    assert doc["layout"]["rank_order"] == "tp-cp-ep-pp-dp" and doc["chosen_by"]["rank_order"] == "jax_mesh"
    given = _run("--rank-order", "tp-cp-ep-dp-pp")
    assert given["layout"]["rank_order"] == "tp-cp-ep-dp-pp" and "rank_order" not in given["chosen_by"]
    # one DCN tier: both orders' pipeline and data groups cross the same leaf switches, the step is the same
    assert doc["step_time_s"] == pytest.approx(given["step_time_s"], rel=1e-9)
