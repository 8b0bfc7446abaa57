"""skip72: what a job's placement holds on a fabric (``free_gpus`` with the GPUs per domain used), the one count a
region's by-size shares are capped by (``site_capacities``, ``site_shares``)."""

import itertools

import pytest

from small_regions import built_region, two_sites
from topo.training.mapping import _placed_ids, free_gpus
from topo.training.multisite import site_capacities, site_shares
from topo.training.parallel import make_layout


@pytest.mark.parametrize("domains, D, first, used, skip",
                         [c for c in itertools.product([3, 5], [8, 72], [0, 4, 72], [None, 64, 8], [(), (1,)])
                          if (c[3] or c[1]) <= c[1] and (not c[4] or c[2] % c[1] + (c[3] or c[1]) <= c[1])])
def test_free_gpus_is_the_most_the_placement_puts_before_the_fabrics_last_gpu(domains, D, first, used, skip):
    """The count against the placement itself (``_placed_ids``, ranks walked one by one): the largest n whose last
    rank lands on the fabric and off the skipped domains (a skip only where runs stay inside a domain, as the layout
    allows it)."""
    total, u = domains * D, used or D
    n = 0
    while n < total:
        g = int(_placed_ids(n, u, D, first, skip))
        if g >= total or g // D in skip:
            break
        n += 1
    assert free_gpus(total, D, first, skip, used) == n


def test_a_sites_capacity_counts_its_skipped_racks_and_the_gpus_used_of_each(tmp_path_factory):
    """Two NVL72 sites of 16 and 8 racks: 1,152 and 576 GPUs; past rack 3, 15 x 72 and 7 x 72; at 64 of each rack,
    15 x 64 = 960 and 7 x 64 = 448. By size past rack 3 (tp 8 x pp 4 = 32 a replica): 48 replicas split 1,080 : 504
    = 32.73 : 15.27, largest remainder east, so 33 and 15 (west holds 504 // 32 = 15; counted whole, 16 = 512 did
    not fit)."""
    region = built_region(tmp_path_factory, two_sites("cap", "two NVL72 sites", "gb200-nvl72-superpod", 16, 8), "cap")
    assert site_capacities(region) == (1152, 576)
    assert site_capacities(region, 0, (3,)) == (15 * 72, 7 * 72)
    assert site_capacities(region, 0, (3,), 64) == (15 * 64, 7 * 64)
    lay = make_layout(tp=8, pp=4, dp=48, global_batch=144, skip_domains=(3,))
    assert site_shares(region, lay) == (33, 15)
    assert site_shares(region, lay.model_copy(update={"skip_domains": ()})) == (32, 16)
