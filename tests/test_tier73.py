"""The top tier sized by the links it carries (tier73): a top-tier switch hosts several of its planes' switches
when each plane leaves it few ports (walk31's switch cliff, docs/calibration-findings.md section 330)."""

from __future__ import annotations

import numpy as np
import pytest

from topo import build_fabric, estimate, load_spec


def _gb200(racks: int):
    return build_fabric(load_spec("gb200-nvl72-superpod", [f"cluster.num_units={racks}"]))


@pytest.fixture(scope="module")
def gb912():
    return _gb200(912)


def test_896_racks_keep_one_plane_switch_per_super_spine():
    # 896 racks = 112 pods of 8 (one pod = 18 spines x 4 rails... every spine 32 down / 32 up at 1:1): islands of
    # 28 pods, 4 islands; a core has 28 uplinks, its plane 4 cores: 2 super-spines x 14 links each = 56 ports,
    # 2,304 cores / 4 islands = 576 planes x 2 = 1,152 super-spines, each hosting one (no room for a second 56).
    top = _gb200(896).layout.tiers[-1]
    assert (top.num_switches, top.down_ports, top.logical_per_switch) == (1152, 56, 1)


def test_912_racks_size_the_super_spine_by_its_links(gb912):
    # 912 racks = 114 pods = 6 islands of 19 (the most pods under a 64-port core that divides 114): a core has
    # 19 uplinks (prime), so a plane of 6 cores gives each of its 19 super-spines 6 x 1 link. The 3,456 cores
    # / 6 = 576 planes x 19 = 10,944 plane switches; one 64-port switch hosts the most p <= 64 // 6 = 10 that
    # divides 10,944 = 2^6 x 3^2 x 19, p = 9: 1,216 switches of 54 ports (walk31 had 10,944 of 6 ports).
    L = gb912.layout
    top = L.tiers[-1]
    planes = L.tiers[2].num_switches // 6
    assert (planes, top.switches_per_group, top.logical_switches) == (576, 19, 10944)
    assert (top.num_switches, top.down_ports, top.logical_per_switch) == (10944 // 9, 54, 9)
    assert sum(t.num_switches for t in L.tiers) == 3648 + 2052 + 3456 + 1216
    # the graph: every super-spine terminates 54 links, every core's 19 uplinks end on super-spines
    links = gb912.links
    up = gb912.level_slice(gb912.levels[-1])
    ends = np.bincount(links["dst"][up] - gb912.tier_start(3), minlength=top.num_switches)
    assert ends.min() == ends.max() == 54 and ends.size == top.num_switches


def test_dgx_h100_superpod_table4_spines_are_kept():
    # NVIDIA DGX SuperPOD H100 RA (RA-11333-001 V11), Table 4: 1-4 SUs take 4, 8, 16, 16 spines (3 SUs: 16
    # spines of 48 used ports, each leaf 2 links to each, not 12 with uneven links): the equal-links rule within
    # a group, which hosting never undoes (a 2-tier top has one group per rail group)
    # https://docs.nvidia.com/dgx-superpod/reference-architecture-scalable-infrastructure-h100/latest/network-fabrics.html
    got = [build_fabric(load_spec("dgx-h100-superpod", [f"cluster.num_units={n}"])).layout.tiers[-1].num_switches
           for n in (1, 2, 3, 4)]
    assert got == [4, 8, 16, 16]


def test_912_racks_route_every_pair_with_a_super_spine_down(gb912):
    # an all-to-all reaches every GPU pair, across the hosted super-spines, with one of them failed: its 9 x 6
    # links are the ones down, and the engine still routes every flow
    f = gb912.with_failures("super-spine5")
    assert int((~f.link_alive).sum()) == 54
    r = estimate(f, "all_to_all", [2**26], algorithm="direct").results[0]
    assert r.time_s > 0 and np.isfinite(r.time_s)
