"""The step's traffic mix shares a link max-min fairly (findings section 477): a member held back elsewhere (an
expert-DP ring at its NIC's rate, crossing a GPU's NVLink port for one hop) leaves what it does not use of the port to
the all-to-all beside it, instead of holding an equal share of it unused (x1.96 where x1.11 is the link's).

Closed form (progressive filling, Bertsekas & Gallager, *Data Networks*, 2nd ed., sec. 6.5.2, in the mix's units:
each member's speed against alone, demand ``u`` of a link per unit of speed): two members over-asking one link,
``a + b > 1``, both rise to speed ``1 / (a + b)``, where it saturates; the all-to-all (shorter) then takes
``latency + bw (a + b)``, and the ring, at speed 1 after it, ``alone + bw_ep (a + b - 1)``. Equal shares not passed
on would give the all-to-all ``1 / (2 a)``."""

import numpy as np
import pytest

from topo import build_fabric, load_spec
from topo.engine.options import EstimateOptions as O
from topo.engine.traffic import Member, run_mix
from topo.training import step


@pytest.fixture(scope="module")
def pod():
    return build_fabric(load_spec("dgx-h100-superpod"))


def test_a_nic_bound_ring_leaves_the_nvlink_port_it_does_not_use_to_the_all_to_all(pod):
    # ep: an all-to-all of server 0's 8 GPUs on NVLink; dp_experts: a ring of two GPUs a server over 4 servers
    # (0, 1, 8, 9, ...), its hop 0 -> 1 on NVLink, its pace the NICs' (the EP 32 expert-DP ring of section 477)
    groups = {"e": np.arange(8).reshape(1, 8), "r": np.array([[0, 1, 8, 9, 16, 17, 24, 25]])}
    lead = {"ep": ({"collective": "alltoall", "groups": "e", "size_bytes": 2**30}, None),
            "dp_experts": ({"collective": "all_gather", "groups": "r", "size_bytes": 2**30}, None)}
    slow, sharers = step._run_mix(pod, lead, groups, None)
    assert sharers == {"ep": ("dp_experts",), "dp_experts": ("ep",)}
    # the demands and times alone (independent of the sharing model) from the engine's own mix
    alone = run_mix(pod, [Member(k, it["collective"], it["size_bytes"],
                                 O(ranks=groups[it["groups"]].ravel(), groups=1, group_layout="blocked",
                                   rank_order="given")) for k, (it, _) in lead.items()])
    ep, ring = alone.members
    (port,) = {(c.members["ep"], c.members["dp_experts"]) for c in alone.contested}  # gpu0 <-> nvswitch0 alike
    a, b = port
    assert a + b > 1 and b < 0.2  # over-asked, the ring using little of it
    bw_ep, bw_ring = ep.alone_s - ep.latency_s, ring.alone_s - ring.latency_s
    assert bw_ep * (a + b) < bw_ring  # the all-to-all finishes first
    assert slow["ep"] == pytest.approx((ep.latency_s + bw_ep * (a + b)) / ep.alone_s, rel=1e-6)
    assert slow["dp_experts"] == pytest.approx((ring.alone_s + bw_ep * (a + b - 1)) / ring.alone_s, rel=1e-6)
    equal = (ep.latency_s + bw_ep * 2 * a) / ep.alone_s  # a third / half of the port held unused: x1.96
    assert slow["ep"] < 0.6 * equal
