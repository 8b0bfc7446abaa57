"""tidy69: the second wave's leftovers (plan68, walk27, tidy68), each with a test seen failing before its fix."""

import pytest

from small_regions import two_sites
from topo.fabric.region import build_region
from topo.plan.region import plan_region


@pytest.fixture(scope="module")
def one_su(tmp_path_factory):
    """Two sites (east, west) of one DGX H100 SU each (tests/small_regions.py)."""
    path = tmp_path_factory.mktemp("tidy69") / "one-su.toml"
    path.write_text(two_sites("one-su", "two sites of one DGX H100 SU", "dgx-h100-superpod", 1))
    return str(path)


def test_a_regions_plan_computes_no_sites_collectives(one_su):
    """tidy68 Left: a region's plan shows nothing a site's collectives give (its text and --json are the same with
    --no-collectives, tests/test_tidy68.py), yet it ran each site's top-tier collectives and blast radius; it runs
    none, whatever ``collectives`` it is given."""
    r = plan_region(build_region(one_su), one_site=True, collectives=True)
    for p in r.site_plans:
        assert p.network.all_reduce_s is None and p.network.alltoall_s is None and p.network.profile is None
        assert p.failure_impact == []
