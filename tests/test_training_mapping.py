"""Layouts onto GPU ids: group matrices in Megatron's rank order, and the bad-layout errors."""

import numpy as np
import pytest

from topo.errors import TopoError
from topo.training.parallel import check_layout, make_layout
from topo.training.mapping import map_layout
from topo.training.model import load_model


def test_megatron_order_group_matrices():
    # tp-cp-ep-dp-pp: TP consecutive, DP strided by tp, PP outermost (one block of tp*dp GPUs per stage)
    lay = make_layout(tp=4, pp=2, dp=4, global_batch=8)
    m = map_layout(lay, 8, 1024)
    assert m.groups("tp").tolist()[:2] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert m.groups("dp").tolist()[0] == [0, 4, 8, 12]
    assert m.groups("pp").tolist()[0] == [0, 16]
    for d in ("tp", "dp", "pp"):
        g = m.groups(d)
        assert np.array_equal(np.sort(g.ravel()), np.arange(32))  # every GPU once per dimension


def test_ep_is_carved_out_of_dp():
    lay = make_layout(tp=2, dp=4, ep=2, global_batch=8)
    m = map_layout(lay, 8, 64)
    assert m.groups("ep").tolist()[0] == [0, 2]
    assert m.groups("edp").tolist()[0] == [0, 4]
    assert m.groups("dp").tolist()[0] == [0, 2, 4, 6]


def test_given_order_and_offset():
    lay = make_layout(tp=2, dp=4, global_batch=8, rank_order="dp-tp-cp-ep-pp", first_gpu=8)
    m = map_layout(lay, 8, 64)
    assert m.groups("dp").tolist()[0] == [8, 9, 10, 11]
    assert m.groups("tp").tolist()[0] == [8, 12]


def test_tp_must_stay_in_a_domain():
    lay = make_layout(tp=8, dp=2, global_batch=8, first_gpu=4)
    with pytest.raises(TopoError) as e:
        map_layout(lay, 8, 64)
    assert e.value.key == "tp" and "tp_across_domains" in e.value.message
    map_layout(make_layout(tp=8, dp=2, global_batch=8, first_gpu=4, tp_across_domains=True), 8, 64)


def test_bad_layouts_are_one_clear_error():
    m = load_model("llama3-405b")
    with pytest.raises(TopoError) as e:
        check_layout(m, make_layout(tp=8, pp=16, dp=64, global_batch=2048), gpus=16384)
    assert e.value.key == "dp" and "8,192" in e.value.message and "16,384" in e.value.message
    with pytest.raises(TopoError) as e:
        check_layout(m, make_layout(tp=16, dp=8, global_batch=64), gpus_per_domain=8)
    assert e.value.key == "tp"
    with pytest.raises(TopoError) as e:
        check_layout(m, make_layout(ep=2, dp=2, global_batch=64))
    assert e.value.key == "ep" and "dense" in e.value.message
    with pytest.raises(TopoError) as e:
        make_layout(tp=0, global_batch=8)
    assert e.value.key == "tp"
