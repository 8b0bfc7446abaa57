"""`topo train --search --layout L` (tidy10): a layout of non-size fields is held fixed in every layout the
search tries (as the flags hold theirs; a flag wins over the layout, as without --search); a size field is one
line, exit 2. That the bounds stay lower bounds with fixed fields: tests/test_training_search.py
(test_search_with_fixed_fields_equals_evaluating_every_candidate)."""

import json

from conftest import run_cli

SEARCH = ["train", "dgx-h100-superpod", "--set", "cluster.num_units=1", "--model", "llama3-8b", "--gpus", "64",
          "--search", "--top", "3", "--no-contention"]


def _ranked(*extra):
    p = run_cli(*SEARCH, *extra, "--json", check=True)
    return json.loads(p.stdout)["ranked"]


def _same(a, b):
    return [(r["layout"], r["step_time_s"]) for r in a] == [(r["layout"], r["step_time_s"]) for r in b]


def test_layout_fields_are_held_as_the_flags_hold_them():
    by_layout = _ranked("--global-batch", "64", "--layout", "cp_comm_type=all_gather,recompute=full,overlap_tp=true")
    by_flags = _ranked("--global-batch", "64", "--cp-comm-type", "all_gather", "--recompute", "full",
                       "--overlap", "tp=on")
    assert _same(by_layout, by_flags)
    for r in by_layout:
        L = r["layout"]
        assert (L["cp_comm_type"], L["recompute"], L["overlap_tp"]) == ("all_gather", "full", True)
    default = _ranked("--global-batch", "64")
    assert not _same(default, by_layout)  # the fields changed the search (not dropped)


def test_a_field_without_a_flag_and_the_layouts_global_batch(tmp_path):
    f = tmp_path / "recipe.toml"
    f.write_text('global_batch = 64\npp_scatter_gather = false\nmicro_batch = 2\n')
    ranked = _ranked("--layout", str(f))
    assert ranked and all(r["layout"]["pp_scatter_gather"] is False and r["layout"]["micro_batch"] == 2
                          and r["layout"]["global_batch"] == 64 for r in ranked)
    # a flag wins over the layout's field (as without --search)
    assert all(r["layout"]["micro_batch"] == 1 for r in _ranked("--layout", str(f), "--micro-batch", "1"))
    text = run_cli(*SEARCH, "--layout", str(f), check=True).stdout
    assert [ln for ln in text.splitlines() if ln.startswith("held in every layout")] == [
        "held in every layout (--layout): micro_batch = 2, pp_scatter_gather = false"]


def test_a_size_in_the_layout_is_refused(tmp_path):
    p = run_cli(*SEARCH, "--global-batch", "64", "--layout", "recompute=full,tp=8")
    assert p.returncode == 2 and p.stdout == "" and p.stderr.strip() == (
        "error: --layout: tp: 8 is a size, and --search picks tp, cp, pp, dp, ep and vpp itself; allowed with "
        "--search: a layout of the other fields (recompute, dp_sharding, overlap_*, cp_comm_type, ...), which every "
        "layout it tries then carries; or drop --search to evaluate this layout"), p.stderr
    f = tmp_path / "sizes.toml"
    f.write_text("global_batch = 64\nvpp = 2\n")
    p = run_cli(*SEARCH, "--layout", str(f))
    assert p.returncode == 2 and p.stderr.startswith(f"error: {f}: vpp: 2 is a size, and --search picks"), p.stderr
    p = run_cli(*SEARCH, "--global-batch", "64", "--layout", "overlap_tp=yes")
    assert p.returncode == 2 and p.stderr.strip() == "error: --layout: overlap_tp: must be true or false, got 'yes'"


def test_a_field_no_candidate_can_carry_says_why():
    p = run_cli(*SEARCH, "--global-batch", "64", "--layout", "fp8_param_gather=true")
    assert p.returncode == 2 and "; the most common reason (" in p.stderr
    assert "fp8_param_gather: true gathers FP8 weights, which precision bf16 has none of" in p.stderr
