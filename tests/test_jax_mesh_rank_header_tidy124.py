"""A mesh whose fsdp ranks lie between its stages and its data replicas, said on the header (tidy124, section 454;
tidy123's Left 1).

MaxText's ``mesh_axes`` are ``['diloco', 'data', 'stage', 'fsdp', ...]``, slowest first
(AI-Hypercomputer/maxtext@e591f30c ``src/maxtext/configs/base.yml`` line 531), and ``create_device_mesh``
(``src/maxtext/utils/maxtext_utils.py`` lines 2154-2245) hands the ICI and DCN sizes in that order to
``mesh_utils.create_hybrid_device_mesh``: the fsdp ranks inside the stages, the stages inside the data replicas.
topo's ``dp`` (data x fsdp) is one axis in every rank order, so no order places that: the header says so.
"""

import pytest

from conftest import run_cli
from test_jax_mesh_rank_order_tidy123 import hybrid_groups, topo_groups
from topo.training.jax_mesh import RANK_ORDER_AXES, mesh_rank_order
from topo.training.parallel import make_layout

WORDS = "NOT MaxText's mesh order"


@pytest.mark.parametrize("ici, dcn", [
    ({"fsdp": 8}, {"pipeline": 2, "data": 2}),
    ({"tensor": 2, "fsdp": 4}, {"pipeline": 2, "data": 2}),
])
def test_no_topo_order_gives_maxtexts_groups(ici, dcn):
    """The claim the header makes, in closed form: under every order a mesh may take, topo's pipeline groups are
    not the hybrid mesh's."""
    text = ",".join([f"ici_{a}={n}" for a, n in ici.items()] + [f"dcn_{a}={n}" for a, n in dcn.items()])
    assert mesh_rank_order(text) is None
    size = lambda a: ici.get(a, 1) * dcn.get(a, 1)  # noqa: E731
    want = hybrid_groups(ici, dcn, "pipeline")
    for order in RANK_ORDER_AXES:
        lay = make_layout(tp=size("tensor"), pp=size("pipeline"), dp=size("data") * size("fsdp"), global_batch=64,
                          dp_sharding="zero3", dp_shard=size("fsdp"), rank_order=order)
        assert topo_groups(lay, "pp") != want, order


def _header(text):
    proc = run_cli("train", "dgx-h100-superpod", "--model", "llama3-8b", "--gpus", "32", "--global-batch", "64",
                   "--jax-mesh", text)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.splitlines()[0]


def test_header_says_the_order_is_not_maxtexts():
    line = _header("ici_fsdp=8,dcn_pipeline=2,dcn_data=2")
    assert line.startswith("llama3-8b on dgx-h100-superpod: 32 x H100") and f"rank order tp-cp-ep-dp-pp, {WORDS}" in line


@pytest.mark.parametrize("text", ["ici_tensor=8,dcn_pipeline=2,dcn_data=2",  # placed: tp-cp-ep-pp-dp
                                  "ici_fsdp=8,dcn_fsdp=4"])                   # the default is MaxText's order
def test_header_is_quiet_where_an_order_places_the_mesh(text):
    assert WORDS not in _header(text)
