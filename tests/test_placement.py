"""Placement: which GPUs and in which rank order, checked on small fabrics against what each kind promises."""

import numpy as np
import pytest

from small_fabrics import small_fabric
from topo import TopoError
from topo.engine.placement import place


@pytest.fixture
def f():
    return small_fabric("rail_optimized-3")  # 32 GPUs, 4 per server and domain, 2 pods


def test_packed_takes_the_first_gpus(f):
    p = place(f, 12)
    assert p.groups.tolist() == [list(range(12))]
    assert p.num_ranks == 12 and p.num_groups == 1
    assert p.num_domains == 3 and p.ranks_per_domain() == 4
    assert place(f).gpus.tolist() == list(range(f.num_gpus))


def test_one_per_server(f):
    L = f.layout
    p = place(f, 5, kind="one_per_server", rail=2)
    assert p.gpus.tolist() == [s * L.gpus_per_server + 2 for s in range(5)]
    assert np.unique(f.gpu_server(p.gpus)).size == 5
    assert np.all(f.nic_rail(f.gpu_nic(p.gpus)) == 2)
    assert p.ranks_per_domain() == 1


def test_spread_pods_takes_the_same_number_from_every_pod(f):
    pods = f.nodes["pod"][: f.num_gpus]
    p = place(f, 8, kind="spread_pods")
    counts = np.bincount(pods[p.gpus], minlength=f.layout.num_pods)
    assert counts.tolist() == [4, 4]
    per_pod = f.num_gpus // f.layout.num_pods
    assert p.gpus.tolist() == [0, 1, 2, 3, per_pod, per_pod + 1, per_pod + 2, per_pod + 3]


def test_strided_and_blocked_groups(f):
    s = place(f, 16, groups=4)
    assert s.groups.tolist() == [[0, 4, 8, 12], [1, 5, 9, 13], [2, 6, 10, 14], [3, 7, 11, 15]]
    assert s.ranks_per_domain() == 1 and s.num_domains == 4
    b = place(f, 16, groups=4, group_layout="blocked")
    assert b.groups.tolist() == [list(range(i * 4, i * 4 + 4)) for i in range(4)]
    assert b.num_domains == 1
    for p in (s, b):
        assert np.array_equal(np.sort(p.gpus), np.arange(16))


def test_list_order(f):
    p = place(f, gpus=[9, 1, 5])
    assert p.kind == "list" and p.groups.tolist() == [[1, 5, 9]]
    assert place(f, gpus=[9, 1, 5], order="given").groups.tolist() == [[9, 1, 5]]


def test_ranks_per_domain_uneven(f):
    assert place(f, gpus=[0, 1, 4]).ranks_per_domain() is None
    assert place(f, gpus=[0, 4, 1, 5], order="given").ranks_per_domain() is None  # a domain's ranks not adjacent


@pytest.mark.parametrize("kw, key, words", [
    ({"num_gpus": 0}, "gpus", ">= 1"),
    ({"num_gpus": 33}, "gpus", "has 32"),
    ({"num_gpus": 9, "kind": "one_per_server"}, "gpus", "8"),
    ({"num_gpus": 2, "kind": "one_per_server", "rail": 4}, "rail", "0 to 3"),
    ({"num_gpus": 5, "kind": "spread_pods"}, "gpus", "multiple of 2"),
    ({"kind": "everywhere"}, "placement", "packed"),
    ({"gpus": [0, 32]}, "ranks", "32"),
    ({"gpus": [1, 1]}, "ranks", "twice"),
    ({"gpus": []}, "ranks", "empty"),
    ({"num_gpus": 6, "groups": 4}, "groups", "4 equal"),
    ({"num_gpus": 4, "groups": 0}, "groups", ">= 1"),
    ({"num_gpus": 4, "groups": 2, "group_layout": "diagonal"}, "group_layout", "strided"),
])
def test_bad_requests_are_clean_errors(f, kw, key, words):
    with pytest.raises(TopoError) as e:
        place(f, **kw)
    assert e.value.key == key
    assert words in e.value.message
