"""walk9: ``topo train REGION --layout L`` (walk8 found it refused: "not --layout yet"), so the fields only a layout
sets (``fp8_recipe``, ``ep_dispatcher``, ...) reach a job across sites as they reach one on one site."""

import json

from conftest import run_cli

BASE = ("train", "two-site-h100", "--model", "llama3-8b", "--no-contention", "--json")


def _run(*args):
    return json.loads(run_cli(*BASE, *args, check=True).stdout)


def test_a_layout_gives_the_same_job_as_the_same_flags():
    by_flags = _run("--tp", "8", "--dp", "384", "--global-batch", "768", "--recompute", "full")
    by_layout = _run("--layout", "tp=8,dp=384,global_batch=768,recompute=full")
    assert by_layout["one_site"]["layout"] == by_flags["one_site"]["layout"]
    assert by_layout["strategies"] == by_flags["strategies"]
    # dp left out fills the region's 3,072 GPUs, as the flags do: 3,072 / tp 8 = 384, 192 per site
    filled = _run("--layout", "tp=8,global_batch=768,recompute=full")
    assert filled["gpus"] == 3072 and filled["one_site"]["layout"]["dp"] == 192
    assert filled["strategies"] == by_flags["strategies"]


def test_flags_win_over_the_layout_and_a_layout_only_field_is_taken():
    flags_win = _run("--layout", "tp=8,global_batch=768", "--global-batch", "384")
    assert flags_win["one_site"]["layout"]["global_batch"] == 192  # 384 over the 2 sites
    plain = _run("--layout", "tp=8,global_batch=768", "--precision", "fp8")
    blockwise = _run("--layout", "tp=8,global_batch=768,fp8_recipe=blockwise", "--precision", "fp8")
    assert blockwise["one_site"]["layout"]["fp8_recipe"] == "blockwise"
    assert plain["one_site"]["layout"]["fp8_recipe"] is None
    assert blockwise["one_site_step_s"] != plain["one_site_step_s"]  # the recipe changes the step it times


def test_a_layout_s_bad_field_is_one_line_naming_it(tmp_path):
    def bad(*args):
        proc = run_cli("train", "two-site-h100", "--model", "llama3-8b", *args)
        lines = proc.stderr.strip().splitlines()
        assert proc.returncode == 2 and len(lines) == 1 and proc.stdout == "", proc.stderr
        return lines[0]

    assert bad("--layout", "tp=-1,global_batch=768") == "error: --layout: tp: must be >= 1, got -1"
    assert bad("--layout", "tpp=8,global_batch=768").startswith("error: --layout: tpp: unknown key 'tpp'; allowed: tp")
    path = tmp_path / "job.toml"
    path.write_text('tp = 8\nglobal_batch = 768\nrecompute = "some"\n')
    assert bad("--layout", str(path)).startswith(f"error: {path}: recompute: must be one of 'none', 'selective'")
    assert bad("--layout", "tp=8").startswith("error: --global-batch: is required")
    assert bad("--layout", str(tmp_path / "missing.toml"), "--global-batch", "768") == \
        f"error: {tmp_path / 'missing.toml'}: no such layout file"
    assert bad("--layout", str(tmp_path), "--global-batch", "768").startswith(f"error: {tmp_path}: is not a regular")


def test_search_across_sites_holds_the_layout_s_fields():
    doc = _run("--search", "--top", "2", "--layout", "recompute=full,global_batch=768")
    layouts = [r["one_site"]["layout"] for r in doc["ranked"]]
    assert doc["global_batch"] == 768 and layouts and all(L["recompute"] == "full" for L in layouts)
    proc = run_cli("train", "two-site-h100", "--model", "llama3-8b", "--search", "--layout", "tp=8,global_batch=768")
    assert proc.returncode == 2 and proc.stderr.startswith("error: --layout: tp: 8 is a size, and --search picks")


def test_a_library_error_about_a_layout_field_names_the_layout():
    """The sites' own rule (global_batch over dp x micro_batch) about a batch the layout gave named --global-batch, a
    flag the user never typed; it names --layout, and the flag when the flag gave it."""
    proc = run_cli("train", "two-site-h100", "--model", "llama3-8b", "--layout", "tp=8,global_batch=500")
    assert proc.returncode == 2 and proc.stderr.startswith("error: --layout: global_batch: 500 sequences do not split")
    proc = run_cli("train", "two-site-h100", "--model", "llama3-8b", "--layout", "tp=8", "--global-batch", "500")
    assert proc.returncode == 2 and proc.stderr.startswith("error: --global-batch: 500 sequences do not split")
