"""Three rules the library wrote twice or thrice, each now in one place (dup76, duplicates over topo/): the reading of
a dotted ``--set`` key (:func:`topo.spec.load._key_segments`, for ``apply_overrides`` and ``check_override_key``),
the naming of the ``--set`` and ``--fail`` a fabric or a region was built with (:mod:`topo.cli.common`), and the
self-contained page around a report's, a region's and a sweep's body (:func:`topo.report.html.html_page`)."""

import re

import pytest

from conftest import run_cli
from topo.errors import TopoError
from topo.spec.load import apply_overrides, check_override_key, override_label

UNREADABLE = "cannot read the key 'fabric.tiers[1'; write it as a dotted path such as fabric.tiers[1].oversubscription"


def test_both_readers_of_a_key_refuse_an_unreadable_one_alike():
    """An unclosed bracket: the same sentence from the spec check and from the override, the override's naming it."""
    with pytest.raises(TopoError) as checked:
        check_override_key("fabric.tiers[1")
    assert checked.value.message == UNREADABLE and checked.value.source is None
    with pytest.raises(TopoError) as applied:
        apply_overrides({}, ["fabric.tiers[1=3"])
    assert applied.value.message == UNREADABLE and applied.value.source == override_label("fabric.tiers[1=3")


def test_a_bracketed_segment_is_a_list_item_a_dotted_number_an_index_only_when_applied():
    """``[spine]`` is a list item to the check (the tier's keys are checked next); ``.1`` is a key name to it, an
    index to the override (``a.b.1.c`` sets ``a.b[1].c``)."""
    with pytest.raises(TopoError, match=r"unknown key 'radx' in fabric\.tiers\[0\]; .*did you mean 'radix'"):
        check_override_key("fabric.tiers[spine].radx")
    with pytest.raises(TopoError, match=r"unknown key '1' in fabric\.tiers;"):
        check_override_key("fabric.tiers.1.radix")
    data, paths = apply_overrides({"a": {"b": [0, {"c": 1}]}}, ["a.b.1.c=4"])
    assert data == {"a": {"b": [0, {"c": 4}]}} and paths == {"a.b[1].c": "a.b.1.c=4"}


def test_the_check_reads_no_further_than_a_free_table():
    """``plan`` is a free table: the check stops there, before the unreadable segment after it (the override, which
    reads the whole key, refuses it). A reading that took the whole key first would refuse it in the check too."""
    assert check_override_key("plan.switches.x[") is None
    with pytest.raises(TopoError, match=re.escape("cannot read the key 'plan.switches.x['")):
        apply_overrides({}, ["plan.switches.x[=2"])


def test_a_part_a_region_cannot_fail_names_the_region(tmp_path):
    """``--fail`` on a region names it, as on a fabric (tests/test_failures.py): one rule for both."""
    p = run_cli("describe", "two-site-h100", "--fail", "dci:east-nowhere", cwd=tmp_path)
    assert p.returncode == 2 and p.stderr == ("error: --fail: no such sites in 'dci:east-nowhere'; sites: east, west "
                                              "(or 0 to 1) (on two-site-h100)\n"), p.stderr


def test_the_region_page_has_the_head_of_the_other_pages():
    """The region's page was written with its own head, without the viewport line the report's and the sweep's
    have (a phone drew it at desktop width, shrunk); it now has their head, to the byte."""
    from topo.fabric.region import build_region
    from topo.fabric.region_inventory import region_inventory
    from topo.report.html import _Figures, html_page
    from topo.report.region import render_region_page

    region = build_region("two-site-h100")
    page = render_region_page(region, region_inventory(region), None)
    head = html_page("topo report: two-site-h100", [], _Figures()).split("<body>", 1)[0]
    assert page.startswith(head + "<body><header>")
    assert '<meta name="viewport" content="width=device-width, initial-scale=1">' in head
