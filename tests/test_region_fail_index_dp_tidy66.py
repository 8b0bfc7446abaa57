"""rev65's minor Left (tidy66): a site's part takes the site's index as a span's ends do (``1:leaf0`` as
``dci:0-1``: one rule, ``fabric.region._site_of``); a job larger than its fabric is named by the flag that sized it
(``--dp``, not ``--gpus`` the user never gave); a region's share given neither dp nor ``--gpus`` fills each site's
GPUs past its skipped domains, as one site's job does (``training.mapping.job_gpus``); the public names other modules
import are in their module's ``__all__``.

The region: two sites of 2 DGX H100 scalable units, 512 GPUs each (tests/test_region_site_failures_regfail65.py)."""

import json

import pytest

from conftest import run_cli

from topo.errors import TopoError
from topo.fabric.region import build_region
from topo.training import mapping, multisite
from test_region_site_failures_regfail65 import REGION


@pytest.fixture(scope="module")
def path(tmp_path_factory):
    p = tmp_path_factory.mktemp("tidy66") / "two-su.toml"
    p.write_text(REGION)
    return p


def test_a_site_part_by_index_is_the_part_by_name(path):
    region = build_region(path)
    by_index, by_name = region.with_failures("1:leaf0"), region.with_failures("west:leaf0")
    assert [f.failures for f in by_index.fabrics] == [f.failures for f in by_name.fabrics] == [(), ("leaf0",)]
    assert region.with_failures("0:spine0").fabrics[0].failures == ("spine0",)
    with pytest.raises(TopoError) as bad:
        region.with_failures("2:leaf0")
    assert bad.value.message.startswith("no site '2'; ") and "sites: east, west, or 0 to 1)" in bad.value.message


def test_a_job_too_large_is_named_by_the_flag_that_sized_it(path):
    job = ["--model", "llama3-8b", "--tp", "8", "--global-batch", "512", "--skip-domains", "0"]
    # tidy72 (skip72's Left 1): a region's line names the site that is short, its share and what its placement
    # holds; the placement's words after them are tidy66's, and still named by the flag that sized the job
    tail = ("site east: its share of the job (64 replicas; its placement holds 63) needs GPUs 0 to 519, but the "
            "fabric has 512; grow the spec's [cluster] (e.g. --set cluster.num_units=N: topo describe says what a "
            "unit holds) or give the job fewer GPUs\n")
    p = run_cli("train", str(path), *job, "--dp", "128")
    assert p.returncode == 2 and p.stderr == "error: --dp: " + tail, p.stderr
    p = run_cli("train", str(path), *job, "--gpus", "1024")
    assert p.returncode == 2 and p.stderr == "error: --gpus: " + tail, p.stderr
    p = run_cli("train", "dgx-h100-superpod", *job, "--dp", "128")  # one site: was "layout: gpus: ..."
    assert p.returncode == 2 and p.stderr.startswith("error: --dp: the job needs GPUs 0 to 1,031"), p.stderr


def test_a_region_share_fills_each_site_past_its_skipped_domain(path):
    """504 of each site's 512 GPUs past domain 0: dp 63 a site, 126 over the two (was refused: GPUs 0 to 519)."""
    doc = json.loads(run_cli("train", str(path), "--model", "llama3-8b", "--tp", "8", "--global-batch", "504",
                             "--skip-domains", "0", "--json", check=True).stdout)
    assert doc["gpus"] == 1008 and doc["one_site"]["layout"]["dp"] == 63
    assert doc["one_site"]["layout"]["skip_domains"] == [0]


def test_public_names_other_modules_import_are_in_all():
    assert {"default_placement", "refuse_failed_gpus", "spare_domains_text", "free_gpus", "FEWER_GPUS"} <= \
        set(mapping.__all__)
    assert {"share_fabric", "site_failure"} <= set(multisite.__all__)
    assert all(hasattr(mapping, n) for n in mapping.__all__) and all(hasattr(multisite, n) for n in multisite.__all__)
