"""rev71: the double binary tree over domains of unequal runs joined every concurrent group by the first group's
runs (tree.py read ``groups[0]``, the read walk30 fixed in ring.py): on 72-GPU racks the second of two 96-rank
groups (48 + 48) was chained as 72 + 24, so its "intra-domain" chain crossed racks."""

import topo
from topo.engine.algorithms.ring import channels_for
from topo.engine.algorithms.tree import tree_flows
from topo.engine.placement import place
from topo.engine.schedule import NodeShape


def test_concurrent_trees_that_split_unlike_over_racks_cross_racks_only_between_heads():
    """Two 96-rank groups on three GB200 NVL72 racks (72 + 24 and 48 + 48): each group spans two racks, so each
    of the two trees of each channel has one head-to-head edge across racks (a tree over D = 2 domains has D - 1
    edges) and every chain edge stays inside its rack: 2 trees x C channels x 2 groups x 1 crossing flows (the
    first group's runs gave 190 at C = 24, the second group's chain crossing racks)."""
    fabric = topo.build_fabric(topo.load_spec("gb200-nvl72-superpod", overrides=["cluster.num_units=3"]))
    shape = NodeShape.of(fabric)
    placement = place(fabric, 192, groups=2, group_layout="blocked")
    assert placement.ranks_per_domain() is None  # the uneven path
    C = channels_for(shape, placement.groups)
    (src, dst, _), g, D, depth = tree_flows(placement, C, shape)
    assert (g, D, depth) == (72, 2, 1)
    cross = (src // 72) != (dst // 72)
    assert int(cross.sum()) == 2 * C * 2 * 1
    for group in placement.groups:  # every flow stays within its own group
        mine = set(group.tolist())
        inside = [int(s) in mine for s in src]
        assert all((int(d) in mine) == i for d, i in zip(dst, inside))
