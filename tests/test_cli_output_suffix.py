"""``topo.cli.output_suffix.check_output_suffix``: an output name whose suffix says another format is one clear
line, also for a format with no suffix of its own in the table (once a StopIteration traceback)."""

import pytest

from topo.cli.output_suffix import check_output_suffix
from topo.errors import TopoError

SUFFIXES = {".graphml": "graphml", ".json": "json"}


def test_a_mismatched_suffix_names_the_format_and_the_right_name():
    with pytest.raises(TopoError, match=r"a \.json name, but --format graphml \(the default\) writes graphml; "
                       r"add --format json, or name it g\.graphml"):
        check_output_suffix("g.json", "graphml", SUFFIXES, default="graphml")


def test_a_format_with_no_listed_suffix_is_one_clear_line():
    with pytest.raises(TopoError, match=r"a \.json name, but --format dot writes dot; add --format json, or give it "
                       r"another suffix than \.json"):
        check_output_suffix("g.json", "dot", SUFFIXES, default="graphml")


@pytest.mark.parametrize("out", ("g.graphml", "g.txt", "g", "-"))
def test_a_matching_unknown_or_missing_suffix_or_stdout_is_accepted(out):
    check_output_suffix(out, "graphml", SUFFIXES, default="graphml")
