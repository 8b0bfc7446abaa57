"""walk41: ``--layout`` given a word that is neither a layout file nor ``key=value`` pairs (``tp8`` for ``tp=8``)
is one line naming what was given and what is allowed, on one site and across sites, with or without
``--search`` (it had been ``error: --layout: no such layout file``, the value dropped, nothing allowed named)."""

import pytest

from conftest import run_cli

ONE = ("train", "dgx-h100-superpod", "--model", "llama3-8b", "--gpus", "64", "--global-batch", "64")
REGION = ("train", "two-site-h100", "--model", "llama3-8b", "--global-batch", "64")
LINE = ("error: tp8: no such layout file, and no key=value pairs; give a layout file (.toml) or pairs such as "
        "tp=8,pp=16,dp=64,global_batch=2048\n")


@pytest.mark.parametrize("argv", [ONE + ("--tp", "8"), ONE + ("--search",), REGION, REGION + ("--search",)],
                         ids=["one-site", "search", "region", "region-search"])
def test_a_word_that_is_no_file_and_no_pairs_is_named(argv, tmp_path):
    proc = run_cli(*argv, "--layout", "tp8", cwd=tmp_path)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr == LINE


def test_a_missing_toml_file_and_pairs_keep_their_messages(tmp_path):
    proc = run_cli(*ONE, "--tp", "8", "--layout", "none.toml", cwd=tmp_path)
    assert proc.returncode == 2 and proc.stderr == "error: none.toml: no such layout file\n"
    proc = run_cli(*ONE, "--layout", "tp=8", cwd=tmp_path)
    assert proc.returncode == 0 and "tp=8 cp=1 pp=1" in proc.stdout


@pytest.mark.parametrize("argv", [("plan", "dgx-h100-superpod", "--model", "llama3-8b", "--no-collectives"),
                                  ("report", "dgx-h100-superpod", "--train", "llama3-8b")], ids=["plan", "report"])
def test_plan_and_report_read_a_layout_by_the_same_rule(argv, tmp_path):
    """``topo plan`` and ``topo report`` read ``--layout`` through ``layout_fields`` too (``parse_layout`` had its own
    file-or-pairs rule and took ``tp8`` for malformed pairs); report's pairs error no longer repeats ``layout:``."""
    proc = run_cli(*argv, "--layout", "tp8", cwd=tmp_path)
    assert proc.returncode == 2 and proc.stderr == LINE
    proc = run_cli(*argv, "--layout", "tp8,pp=2", cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr == ("error: --layout: cannot read 'tp8'; write key=value pairs such as "
                           "tp=8,pp=16,dp=64,global_batch=2048\n")
    assert not any(tmp_path.iterdir())  # no report written


def test_a_search_document_gives_the_models_size_as_a_single_layouts_does(tmp_path):
    """walk41: ``--search --json`` gave the model's weights nowhere (a single layout's document has them); once, at
    the top: Qwen3-30B-A3B, 30.53B weights, 3.35B a token (the text's ``model`` line; its model card, huggingface.co/
    Qwen/Qwen3-30B-A3B, gives 30.5B and 3.3B activated)."""
    import json

    argv = ("train", "dgx-h100-superpod", "--model", "qwen3-30b-a3b", "--gpus", "16", "--global-batch", "64")
    one = json.loads(run_cli(*argv, "--ep", "16", "--json", cwd=tmp_path, check=True).stdout)
    doc = json.loads(run_cli(*argv, "--search", "--top", "1", "--json", cwd=tmp_path, check=True).stdout)
    assert doc["model_params"] == one["model_params"] and doc["model_active_params"] == one["model_active_params"]
    assert round(doc["model_params"] / 1e9, 2) == 30.53 and round(doc["model_active_params"] / 1e9, 2) == 3.35
