"""rev70: a ``[[sites]]`` entry's ``profile`` key of another GPU generation than its site's (a Blackwell profile on
an H100 site) is said as ``--profile`` says it (:func:`topo.cli.estimate_args.profile_mismatch`): reg70's key was
taken with no word, where ``topo train SPEC --profile blackwell+infiniband_ndr`` notes "NVLink and protocol constants
of another generation". The region: reg70's two DGX H100 units 40 km apart (tests/small_regions.py)."""

import pytest

from conftest import run_cli
from small_regions import built_region, two_sites
from topo.cli.region_estimate import region_profile_notes


@pytest.fixture(scope="module")
def region(tmp_path_factory):
    text = two_sites("gen-key", "a Blackwell profile key on an H100 site (a test region)", "dgx-h100-superpod", 1)
    text = text.replace('name = "east"\n', 'name = "east"\nprofile = "blackwell+infiniband_ndr"\n', 1)
    return built_region(tmp_path_factory, text)


def test_a_site_key_of_another_generation_is_noted_with_its_site(region):
    notes = region_profile_notes(region, None)
    assert len(notes) == 1
    assert notes[0].startswith("note: site east's profile key: profile blackwell+infiniband_ndr prices blackwell "
                               "GPUs, but this spec (dgx-h100-superpod) has H100 (hopper)")


def test_the_command_profile_replaces_the_keys_in_the_notes(region):
    """--profile prices every site: its note, once, and no site's key (the key prices nothing then)."""
    assert region_profile_notes(region, "hopper+infiniband_ndr") == []
    notes = region_profile_notes(region, "ampere+infiniband_ndr")
    assert len(notes) == 1 and notes[0].startswith("note: profile ampere+infiniband_ndr prices ampere GPUs")


def test_region_estimate_says_the_note(region):
    out = run_cli("estimate", region.spec.input_path, "-c", "all_reduce", "--size", "1GB", check=True).stderr
    assert "site east's profile key: profile blackwell+infiniband_ndr prices blackwell GPUs" in out
