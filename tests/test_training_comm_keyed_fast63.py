"""A group matrix's signature kept by the mapping's key (fast63): a search remaps each layout it refines, so its
group matrices are new objects each time; :meth:`CommEngine.time` takes the mapping's key beside the matrix
(:meth:`topo.training.mapping.Mapping.group_key`) and does not sign a matrix it signed under that key before. The
key must tell apart two mappings whose matrices have the same shape but other groups."""

import numpy as np
import pytest
import topo
from topo.training import mapping as mp
from topo.training.comm import CommEngine
from topo.training.mapping import map_layout
from topo.training.parallel import make_layout

ORDERS = ("tp-cp-ep-dp-pp", "tp-cp-ep-pp-dp")


@pytest.fixture(scope="module")
def fabric():
    return topo.build_fabric(topo.load_spec("dgx-h100-superpod"))


def _mapping(order: str, fresh: bool = True):
    """TP 2, PP 4, DP 16 on 128 GPUs (domains of 8) in rank order ``order``; ``fresh``: built again (not the
    mapping map_layout kept), as a search's refinement meets it."""
    if fresh:
        mp._MAPS.clear()
    lay = make_layout(tp=2, pp=4, dp=16, global_batch=64, rank_order=order)
    return map_layout(lay, 8, 1024)


def test_same_shape_other_groups_do_not_share_a_signature(fabric):
    """The DP groups of the two rank orders have one shape (8 groups of 16) but other members (stride 2 or
    stride 8): routed for the first, the second's time is not known (cached_only None), and asked, it is its own."""
    a, b = _mapping(ORDERS[0]), _mapping(ORDERS[1])
    Ga, Gb = a.groups("dp"), b.groups("dp")
    assert Ga.shape == Gb.shape and not np.array_equal(np.sort(Ga, axis=None), Ga.ravel())  # the premise
    assert CommEngine.signature(CommEngine.canonical(Ga)) != CommEngine.signature(CommEngine.canonical(Gb))
    assert a.group_key("dp") != b.group_key("dp")
    eng = CommEngine(fabric)
    ta = eng.time("all_reduce", Ga, 64e6, key=a.group_key("dp"))
    assert eng.time("all_reduce", Gb.copy(), 64e6, cached_only=True, key=b.group_key("dp")) is None
    tb = eng.time("all_reduce", Gb.copy(), 64e6, key=b.group_key("dp"))
    alone = CommEngine(fabric).time("all_reduce", Gb, 64e6)  # no key: signed from the matrix
    assert tb == alone
    assert eng.engine_calls == 2 and ta.time_s != tb.time_s


def test_a_remapped_layout_is_not_signed_again(fabric, monkeypatch):
    """The same layout mapped again (new matrices, the same key) gets the time routed for the first mapping, with
    no signature taken: the refinement's saving."""
    eng = CommEngine(fabric)
    a = _mapping(ORDERS[0])
    t = eng.time("all_reduce", a.groups("dp"), 64e6, key=a.group_key("dp"))
    floor = eng.time_floor("all_reduce", a.groups("dp"), 64e6, key=a.group_key("dp"))
    signed = []
    monkeypatch.setattr(CommEngine, "signature", staticmethod(lambda g: signed.append(g) or ("never",)))
    again = _mapping(ORDERS[0])
    assert again is not a and again.groups("dp") is not a.groups("dp")
    assert eng.time("all_reduce", again.groups("dp"), 64e6, cached_only=True, key=again.group_key("dp")) is t
    assert eng.time_floor("all_reduce", again.groups("dp"), 64e6, key=again.group_key("dp")) == floor
    assert signed == [] and eng.engine_calls == 1


def test_a_mapping_built_otherwise_has_no_key():
    """A Mapping not from map_layout names no key (its matrices are signed as before)."""
    a = _mapping(ORDERS[0])
    assert a.group_key("dp") is not None
    other = mp.Mapping(grid=a.grid, axes=a.axes, experts=a.experts, gpus_per_domain=8)
    assert other.group_key("dp") is None
