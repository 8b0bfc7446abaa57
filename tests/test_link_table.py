"""Link-load tables name their nodes as the fabric does, without a Python string per link end
(topo/engine/result.py NodeNames, LinkTable.frame).

The reference is :meth:`topo.fabric.Fabric.node_names`, one f-string per node (``gpu12``, ``nvswitch1``,
``nic3.5``: server 3's NIC 5, ``leaf7``). At 100k GPUs (h100-100k: 415,744 links, 218,432 nodes) a named frame took
0.51-0.60 s CPU against 0.15-0.18 s with ids only; it now takes 0.16 s once the fabric's names are built (0.39 s the
first time), measured with time.process_time (see the report of issue 23).
"""

import dataclasses

import numpy as np
import pytest

from topo import build_fabric, load_spec
from topo.engine.estimate import estimate
from topo.engine.result import LinkTable, NodeNames


@pytest.fixture(scope="module", params=["dgx-h100-superpod", "gb200-nvl72-superpod"])
def fabric(request):
    return build_fabric(load_spec(request.param))


def test_names_are_the_fabrics(fabric):
    names = NodeNames.of(fabric)
    ids = np.arange(fabric.num_nodes)
    got = names(ids)
    assert list(got) == fabric.node_names(ids)
    assert got.dtype == np.dtype(f"<U{max(len(x) for x in fabric.node_names(ids))}")  # as wide as the longest
    some = np.random.default_rng(1).integers(0, fabric.num_nodes, 500)  # any order, repeats
    assert list(names(some)) == fabric.node_names(some)
    assert any(x.startswith("nic") and "." in x for x in got)


def test_frame_names_every_link_end_as_the_fabric_does(fabric):
    table = LinkTable.of(fabric)
    b = np.arange(2 * table.src.size, dtype=float)
    frame = table.frame(b, 2.0)
    ids = dataclasses.replace(table, names=None).frame(b, 2.0)
    assert list(frame["src"].astype(str)) == fabric.node_names(frame["src_id"].to_numpy())
    assert list(frame["dst"].astype(str)) == fabric.node_names(frame["dst_id"].to_numpy())
    assert (frame["src"].cat.codes.to_numpy() == frame["src_id"].to_numpy()).all()  # codes are the node ids
    assert frame.drop(columns=["src", "dst"]).equals(ids.drop(columns=["src", "dst"]))
    assert (ids["src"].to_numpy() == frame["src_id"].to_numpy()).all()
    assert table.frame(b, 2.0).equals(frame)  # again: the kept names give the same frame


def test_names_are_built_once_per_fabric_shape(fabric):
    # a training step asks for many link tables of one fabric: the named categories are kept, not rebuilt
    a = LinkTable.of(fabric).names.categories(fabric.num_nodes)
    b = LinkTable.of(fabric).names.categories(fabric.num_nodes)
    assert a is b and len(a.categories) == fabric.num_nodes


def test_estimate_link_loads_keep_their_names():
    f = build_fabric(load_spec("dgx-h100-superpod"))
    frame = estimate(f, "all_reduce", 2**30, gpus=64).link_loads(2**30)
    busy = frame[frame["bytes"] > 0]
    assert set(busy["src"].astype(str)) <= set(f.node_names())
    assert list(busy["src"].astype(str)) == f.node_names(busy["src_id"].to_numpy())
