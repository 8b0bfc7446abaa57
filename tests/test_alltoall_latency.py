"""An all-to-all loaded from counts takes its latency from the longest path of rank 0 to the others; it routes one
destination of each kind of path (topo.engine.allpairs: the same levels crossed, hence the same latency, every
link of a level having one latency). The answer must be the longest path over every destination, routed one by
one, on every small fabric kind and depth (tests/small_fabrics.py), with PXN on and off and hashed ECMP."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from small_fabrics import SPECS
from topo import build_fabric, spec_from_dict
from topo.engine.allpairs import AllPairsMethod, alltoall_method, route_all_pairs
from topo.engine.route import Router
from topo.engine.schedule import AllPairs, Transfers
from topo.errors import TopoError


def _with_latencies(name):
    """The small fabric with a distinct latency per switch tier, NIC and NVSwitch (so every level crossed counts)."""
    d = copy.deepcopy(SPECS[name])
    for i, t in enumerate(d["fabric"]["tiers"]):
        t["latency"] = f"{100 + 37 * i} ns"
    d["server"]["nic_latency"] = "450 ns"
    d.setdefault("scale_up", {})["latency"] = "90 ns"
    return build_fabric(spec_from_dict(d))


@pytest.mark.parametrize("name", sorted(SPECS))
@pytest.mark.parametrize("pxn", [None, False])
def test_longest_path_of_the_counted_alltoall(name, pxn):
    f = _with_latencies(name)
    router = Router(f, pxn=pxn)
    n = f.num_gpus
    checked = 0
    for groups in (np.arange(n)[None, :], np.arange(n)[::-1].reshape(2, -1), np.roll(np.arange(n), 3)[None, :]):
        a = AllPairs(groups, 1.0 / groups.shape[1])
        assert alltoall_method(router, a) is AllPairsMethod.COUNTS
        try:
            got = route_all_pairs(router, a).latency_s.max()
        except TopoError:  # rail-only without PXN: some pairs cannot meet
            continue
        src = int(groups[0, 0])
        dst = groups[0, 1:]
        every = router.route_transfers(Transfers(np.full(dst.size, src), dst, 1.0, split_nics=True))
        assert got == pytest.approx(float(every.latency_s.max()), rel=1e-12)
        assert got > 0
        checked += 1
    assert checked or (name.startswith("rail_only") and pxn is False)
