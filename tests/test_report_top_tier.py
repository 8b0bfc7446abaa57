"""The report's comparison table carries figures the tier above the pods bounds (walk18, fab53 left item 3): two
designs that differ only in that tier's oversubscription have the same NIC-bound cluster all_reduce, so without
these columns every busbw of the table was equal."""

import re

import pytest

from conftest import spec_dict, tier
from topo import spec_from_dict
from topo.report import build_reports, build_spec_report, render_page


def rail_4k(spine_oversubscription: int):
    """4,096 H100 rail-optimized in pods of 4 scalable units (1,024 GPUs), 3 tiers of 64-port 400G switches: the
    shape of walk18's 32k designs, smaller."""
    fabric = {"kind": "rail_optimized", "servers_per_unit": 32, "units_per_pod": 4,
              "tiers": [tier("leaf", oversubscription=1), tier("spine", oversubscription=spine_oversubscription),
                        tier("core")]}
    return spec_from_dict(spec_dict(name=f"rail4k-{spine_oversubscription}to1", cluster={"num_gpus": 4096},
                                    fabric=fabric))


@pytest.fixture(scope="module")
def reports():
    return build_reports([rail_4k(2), rail_4k(1)], sizes=("1G", "1G", 2), extra_algorithms=[])


def comparison_rows(page):
    start = page.index('<section id="comparison">')
    table = page[start:page.index("</table>", start)]
    return [re.findall(r"<td[^>]*>(.*?)</td>", row) for row in table.split("<tr>")[2:]]


def test_designs_differing_above_the_pod_differ_in_the_table(reports):
    a, b = comparison_rows(render_page(reports))
    # the cluster's and the pod's all_reduce are bound at the NICs: equal (the columns walk18 saw)
    assert a[6:9] == b[6:9]
    # the all_reduce across the cores (communicators of one GPU per pod) and the all-to-all over every GPU are not
    assert a[9] != b[9] and a[10] != b[10]
    assert "bound by spine-core" in a[9] and "bound by nic-leaf" in b[9] and "4 pods of 1,024 GPUs" in a[9]
    assert "bound by spine-core" in a[10] and "bound by nic-leaf" in b[10]


def test_a_2_to_1_spine_halves_the_all_reduce_across_the_pods(reports):
    # closed form: each GPU's 400 Gb/s NIC (50 GB/s) has 25 GB/s of spine-core capacity above it at 2:1 and 50 GB/s
    # at 1:1; a ring whose every edge crosses the cores runs at half the busbw (latency is negligible at 1 GiB)
    a, b = (r.top_tier for r in reports)
    assert a.all_reduce_busbw_GBps == pytest.approx(b.all_reduce_busbw_GBps / 2, rel=0.01)
    assert a.alltoall_busbw_GBps < b.alltoall_busbw_GBps
    assert a.bisection_bandwidth_per_gpu_Bps == pytest.approx(25e9) and b.bisection_bandwidth_per_gpu_Bps == pytest.approx(50e9)


def test_a_fabric_without_a_tier_above_the_pods_shows_dashes():
    two_tier = build_spec_report(spec_from_dict(spec_dict()), sizes=("1G", "1G", 2), extra_algorithms=[])
    assert two_tier.top_tier.all_reduce_busbw_GBps is None
    row = comparison_rows(render_page([two_tier, two_tier]))[0]
    assert row[9:] == ["-", "-"]


def test_a_report_of_one_spec_leaves_the_top_tier_out():
    """The figures across the top tier are the comparison table's (about 2 s on h100-100k, an all-to-all over every
    GPU): a report of one spec has no comparison, so it does not compute them; two specs do (the fixture)."""
    (one,) = build_reports([rail_4k(2)], sizes=("1G", "1G", 2), extra_algorithms=[])
    assert one.top_tier is None
    assert '<section id="comparison">' not in render_page([one])
