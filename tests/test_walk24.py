"""walk24's fixes: a region search's table names the dispatcher it chose, and ``--layout`` with no dp beside a
job's flags fills the fabric's GPUs as the flags alone do."""

import json

import pytest

from conftest import run_cli

REGION = """name = "small-two"
[[sites]]
name = "a"
spec = "dgx-h100-superpod"
set = ["cluster.num_units=1"]
[[sites]]
name = "b"
spec = "dgx-h100-superpod"
set = ["cluster.num_units=1"]
[interconnect]
distance_km = 30
"""
NARROW = ("--model", "qwen3-30b-a3b", "--global-batch", "128", "--gpus", "128", "--search", "--top", "3",
          "--micro-batch", "1", "--dp-sharding", "zero1", "--recompute", "none", "--no-contention")


def test_a_region_search_table_names_the_dispatcher_it_chose(tmp_path):
    """walk24: two rows of a region search with the same sizes and different steps read alike (the flex dispatcher on
    DeepEP's and HybridEP's kernels), and a row's sizes trained as given ran the all-to-all, 1.8x slower; the
    table now has the one-site search's dispatcher column, each row's as the --json layout says."""
    path = tmp_path / "small-two.toml"
    path.write_text(REGION)
    text = run_cli("train", str(path), *NARROW, check=True).stdout.splitlines()
    head = next(line for line in text if line.startswith("#  tp"))
    assert head.split()[11] == "dispatcher"  # "dp (job)" is two words
    doc = json.loads(run_cli("train", str(path), *NARROW, "--json", check=True).stdout)
    want = [L["ep_dispatcher"] if L["ep_dispatcher"] != "deepep" else f"deepep/{L['ep_flex_backend']}"
            for L in (r["one_site"]["layout"] for r in doc["ranked"])]
    rows = [line.split() for line in text if line[:1].isdigit() and line.split()[0].isdigit()]
    assert [row[10] for row in rows] == want and len(want) == 3
    held = run_cli("train", str(path), *NARROW, "--layout", "ep_dispatcher=alltoall", check=True).stdout
    assert "dispatcher" not in next(line for line in held.splitlines() if line.startswith("#  tp"))


def test_a_layout_of_framework_options_beside_the_flags_keeps_their_job():
    """walk24: ``--tp 2 --cp 2 --pp 2 --ep 8`` on a fabric's 256 GPUs fills dp (32); adding ``--layout
    ep_dispatcher=deepep`` left dp at 1 and refused the job ("ep x etp = 8 x 2 does not divide the tp x cp x dp =
    4 ranks"); it is now the same job with the flex dispatcher."""
    base = ("train", "dgx-h100-superpod", "--set", "cluster.num_units=1", "--model", "qwen3-30b-a3b", "--tp", "2",
            "--cp", "2", "--pp", "2", "--ep", "8", "--global-batch", "64", "--json")
    flags = json.loads(run_cli(*base, check=True).stdout)
    got = json.loads(run_cli(*base, "--layout", "ep_dispatcher=deepep", check=True).stdout)
    assert (flags["gpus"], flags["layout"]["dp"]) == (256, 32)
    assert (got["gpus"], got["layout"]["dp"], got["layout"]["ep_dispatcher"]) == (256, 32, "deepep")
    same = json.loads(run_cli(*base, "--layout", "ep_dispatcher=alltoall", check=True).stdout)
    assert same["step_time_s"] == flags["step_time_s"]  # the default dispatcher given: the flags' own job


def test_the_goodput_line_says_its_effective_flop_leave_the_hot_spares_out():
    """walk24: ``goodput 96.5% -> 2.74e+24 FLOP effective`` under a compute line of 2.86e+24 FLOP: the FLOP x the
    goodput is 2.76e+24; the rest is the hot-spare servers' GPUs, idle (reliability.py: flop x goodput x
    training / GPUs). The line now says on how many GPUs, and the figure is that product."""
    args = ("plan", "gb200-nvl72-superpod", "--no-collectives")
    doc = json.loads(run_cli(*args, "--json", check=True).stdout)
    doc = doc["plans"][0] if "plans" in doc else doc
    rel, gpus = doc["reliability"], doc["num_gpus"]
    line = next(x for x in run_cli(*args, check=True).stdout.splitlines() if x.startswith("goodput "))
    training = rel["training_gpus"]
    assert 0 < training < gpus  # the bundled catalog holds spares
    assert f"FLOP effective on the {training:,} GPUs not held as hot spares ({gpus - training:,})" in line
    assert rel["effective_flop"] == pytest.approx(doc["compute"]["flop"] * rel["goodput"] * training / gpus, rel=1e-12)


def test_train_says_the_model_s_size():
    """walk24: a model file of one's own (a "60B" hybrid) had its size nowhere in ``topo train``'s output, text or
    --json. Checked against the published sizes: Llama 3 8B, 8.03B (huggingface.co/meta-llama/Meta-Llama-3-8B,
    "8.03B params"); Nemotron 3 Nano 30B-A3B, 31.6B total and 3.6B active with embeddings (its model card,
    huggingface.co/nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16, as topo/data/models/nemotron-3-nano-30b-a3b.toml
    cites it)."""
    text = run_cli("train", "dgx-h100-superpod", "--model", "llama3-8b", "--tp", "8", "--global-batch", "128",
                   check=True).stdout.splitlines()
    assert "model    llama3-8b: 8.03B parameters (embeddings included; 32 layers)" in text
    args = ("train", "dgx-h100-superpod", "--model", "nemotron-3-nano-30b-a3b", "--ep", "8", "--global-batch", "1024")
    doc = json.loads(run_cli(*args, "--json", check=True).stdout)
    assert round(doc["model_params"] / 1e9, 1) == 31.6 and round(doc["model_active_params"] / 1e9, 1) == 3.6
    line = next(x for x in run_cli(*args, check=True).stdout.splitlines() if x.startswith("model "))
    assert line == (f"model    nemotron-3-nano-30b-a3b: {doc['model_params'] / 1e9:.2f}B parameters, "
                    f"{doc['model_active_params'] / 1e9:.2f}B active a token (embeddings included; 52 layers)")


def test_the_gb200_spec_says_its_unit_is_a_rack():
    """walk24: the description's "SUs of 8 racks (576 GPUs)" read as the unit; ``--set cluster.num_units=16`` for
    16 SUs (9,216 GPUs) gave 16 racks, 1,152 GPUs. The description now says what ``cluster.num_units`` counts, and
    it does: 16 racks of 72."""
    listed = next(x for x in run_cli("list", check=True).stdout.splitlines() if x.startswith("gb200-nvl72-superpod"))
    assert "(cluster.num_units counts racks)" in listed
    doc = json.loads(run_cli("describe", "gb200-nvl72-superpod", "--set", "cluster.num_units=16", "--json",
                             check=True).stdout)
    assert doc["num_gpus"] == 16 * 72
