"""``topo train REGION --search`` (issue 31): one site's share searched, its best layouts timed across the sites
and ranked again by that step."""

import json

import pytest

from conftest import run_cli
from topo.fabric.region import build_region
from topo.training.model import load_model
from topo.training.multisite import estimate_across_sites
from topo.training.multisite_search import search_across_sites
from topo.training.parallel import ParallelLayout
from topo.training.search import search_layouts


@pytest.fixture(scope="module")
def two():
    return build_region("two-site-h100")


def test_the_best_layouts_of_a_site_s_share_are_ranked_by_their_step_across_sites(two):
    model = load_model("llama3-8b")
    res = search_across_sites(two, model, 768, top=4, contention=False)
    # the same share searched on one site's fabric: 1,536 GPUs, 384 sequences
    alone = search_layouts(two.fabrics[0], model, 1536, 384, top=4, contention=False)
    assert sorted(r.one_site_step_s for r in res.ranked) == sorted(r.step_time_s for r in alone.ranked)
    steps = [res.step_time_s(r) for r in res.ranked]
    assert steps == sorted(steps) and len(steps) == 4
    for r in res.ranked:  # each as estimate_across_sites times the whole job's layout on its own
        site = ParallelLayout.model_validate({k: v for k, v in r.one_site["layout"].items()
                                              if k in ParallelLayout.model_fields})
        lay = site.model_copy(update={"dp": site.dp * 2, "global_batch": 768})
        again = estimate_across_sites(two, model, lay, contention=False)
        assert res.step_time_s(r) == pytest.approx(again.strategies[0].step_time_s, rel=1e-12)
        assert r.gpus == lay.gpus and r.throughput_vs_one_site == again.throughput_vs_one_site


def test_cli_train_search_across_sites_json_and_errors():
    out = run_cli("train", "two-site-h100", "--model", "llama3-8b", "--search", "--global-batch", "768", "--top", "2",
                  "--no-contention", "--json", check=True)
    doc = json.loads(out.stdout)
    assert doc["num_sites"] == 2 and len(doc["ranked"]) == 2 and doc["search"]["evaluated"] >= 2
    assert doc["ranked"][0]["step_time_s"] <= doc["ranked"][1]["step_time_s"]
    bad = run_cli("train", "two-site-h100", "--model", "llama3-8b", "--search", "--global-batch", "767")
    assert bad.returncode == 2 and "--global-batch: 767 sequences do not split over the 2 sites" in bad.stderr
    bad = run_cli("train", "two-site-h100", "--model", "llama3-8b", "--search", "--global-batch", "768", "--gpus",
                  "5000")
    assert bad.returncode == 2 and "--gpus: 5,000 GPUs do not split over the 2 sites" in bad.stderr


def test_cli_search_across_sites_narrows_its_choices_as_on_one_site():
    out = run_cli("train", "two-site-h100", "--model", "llama3-8b", "--search", "--global-batch", "768", "--top", "2",
                  "--recompute", "full", "--micro-batch", "2", "--no-contention", "--json", check=True)
    layouts = [r["one_site"]["layout"] for r in json.loads(out.stdout)["ranked"]]
    assert layouts and all(L["recompute"] == "full" and L["micro_batch"] == 2 for L in layouts)


@pytest.mark.parametrize("where", ["dgx-h100-superpod", "two-site-h100"])
def test_a_size_the_search_chooses_is_refused_not_ignored(where):
    """walk2: ``--search --tp 3`` ranked tp 4 layouts as if --tp were not given (on one site and across sites); the
    search chooses the sizes, so a size given beside it is one error line, nothing on stdout."""
    bad = run_cli("train", where, "--model", "llama3-8b", "--search", "--global-batch", "768", "--tp", "3",
                  "--vpp", "2")
    lines = bad.stderr.strip().splitlines()
    assert bad.returncode == 2 and len(lines) == 1 and bad.stdout == "", bad.stderr
    assert lines[0] == ("error: --search: the search chooses tp, cp, pp, dp, ep and vpp itself; drop --tp, --vpp "
                        "(or --search, to evaluate that layout)")


def test_the_search_across_sites_says_what_the_one_site_search_said(tmp_path):
    """walk23: two buildings of 8 GB200 NVL72 racks each; the share (576 GPUs, every GPU of each rack) and its batch
    (512 sequences, a greatest common factor of 64) force a multiple of 9 on tp x cp x pp. The one-site search says
    both (its placement note, ``common_factor_note``); across sites the table said neither, nor the interval."""
    region = tmp_path / "two-buildings.toml"
    region.write_text('name = "two-buildings"\n'
                      '[[sites]]\nname = "a"\nspec = "gb200-nvl72-superpod"\nset = ["cluster.num_units=8"]\n'
                      '[[sites]]\nname = "b"\nspec = "gb200-nvl72-superpod"\nset = ["cluster.num_units=8"]\n'
                      '[interconnect]\ndistance_km = 40\nwaves = 16\n')
    res = search_across_sites(build_region(str(region)), load_model("llama3-8b"), 1024, top=1, contention=False)
    alone = search_layouts(build_region(str(region)).fabrics[0], load_model("llama3-8b"), 576, 512, top=1,
                           contention=False)
    assert res.notes == alone.notes and any("multiple of 9" in n for n in res.notes)
    assert any("every GPU of the 72-GPU NVLink domains" in n for n in res.notes)
    # tidy122: the CLI's fill is 64 of each rack (512 a site); --gpus keeps the premise, every GPU of each site
    out = run_cli("train", str(region), "--model", "llama3-8b", "--search", "--global-batch", "1024", "--top", "1",
                  "--no-contention", "--gpus", "1152", check=True).stdout
    assert "note: one site's share: dp divides both the 576 GPUs and the batch of 512" in out
    assert "uncertainty " in out and " of #1's one-site step: on " in out
    doc = json.loads(run_cli("train", str(region), "--model", "llama3-8b", "--search", "--global-batch", "1024",
                             "--top", "1", "--no-contention", "--gpus", "1152", "--json", check=True).stdout)
    assert doc["notes"] == res.notes
