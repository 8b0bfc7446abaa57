"""out79 (walk35's Left 2): the interval says what its runs span and where a job lies outside them.

step_uncertainty.toml's rows carry their runs' model families, GPU generations, fewest and most GPUs and largest
pp, cp, ep and NVLink domains an expert group spans (written from the runs CSVs by
``benchmarks/training_accuracy.py --fit``, or alone by ``--spans``); ``topo train`` compares the job with them."""

import csv
import json
import sys
import tomllib
from pathlib import Path

import pytest

from conftest import run_cli

ROOT = Path(__file__).resolve().parents[1]
TOML = ROOT / "topo" / "data" / "compute" / "step_uncertainty.toml"
SPAN = {"families": ["nemotron-3-nano"], "generations": ["blackwell", "hopper"], "generation_runs": [4, 3],
        "gpus_min": 8, "gpus_max": 16, "pp_max": 1, "cp_max": 1, "ep_max": 8, "ep_domains_max": 1}
# walk35's invented model (docs/calibration-findings.md section 362), 88 layers of Mamba-2, MoE and attention
HYMOE = """name = "hymoe"
description = "walk35's invented hybrid"
source = ["docs/calibration-findings.md section 362"]
status = "assumption"
layers = 88
hidden = 4096
ffn_hidden = 1792
heads = 32
kv_heads = 2
vocab = 131072
seq_len = 8192
mlp = "swiglu"
layer_pattern = "MEMEM*EMEMEMEMEM*EMEMEMEMEM*EMEMEMEMEM*EMEMEMEMEM*EMEMEMEMEM*EMEMEMEMEM*EMEMEMEMEM*EMEME"
[attention]
head_dim = 128
rope = false
[mamba]
d_state = 128
head_dim = 64
num_heads = 128
groups = 8
conv_kernel = 4
chunk_size = 128
[moe]
experts = 128
active_experts = 6
shared_experts = 1
expert_ffn_hidden = 1792
"""


def _accuracy():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import training_accuracy
    return training_accuracy


def test_the_hybrid_rows_span_is_the_published_csvs_hybrid_runs():
    """The hybrid row's span against data/reference/training_runs_published.csv read here: its rows of a model with
    Mamba layers (training_runs.csv holds Megatron-LM's GPT and Llama 3 only), their num_gpus, pp, cp and ep."""
    from topo.training.model import load_model
    rows = [r for r in csv.DictReader(open(ROOT / "data" / "reference" / "training_runs_published.csv"))
            if load_model(r["model"]).mamba is not None]
    row = tomllib.loads(TOML.read_text(encoding="utf-8"))["hybrid_ssm"]
    assert row["runs"] == len(rows) == sum(row["generation_runs"])
    assert (row["gpus_min"], row["gpus_max"]) == (min(int(r["num_gpus"]) for r in rows),
                                                  max(int(r["num_gpus"]) for r in rows))
    for k in ("pp", "cp", "ep"):
        assert row[f"{k}_max"] == max(int(r[k] or 1) for r in rows)
    # Nemotron 3 Super's H100 card row (super80): EP 32 over four 8-GPU DGX H100 nodes; every Blackwell row keeps its
    # expert group inside one NVL72 rack (EP 64 on 64 of its 72 GPUs) or one 8-GPU node
    assert row["ep_domains_max"] == 4


def test_outside_span_names_each_figure_beyond_the_runs():
    from topo.training.uncertainty import outside_span
    job = {"gpus": 1024, "pp": 2, "cp": 1, "ep": 16, "ep_domains": 2}
    assert outside_span(SPAN, job, "hopper") == {"gpus": 1024, "pp": 2, "ep": 16, "ep_domains": 2}
    assert outside_span(SPAN, {"gpus": 16, "pp": 1, "cp": 1, "ep": 8, "ep_domains": 1}, "blackwell") == {}
    assert outside_span(SPAN, {"gpus": 4, "pp": 1, "cp": 2, "ep": 1, "ep_domains": 1}, "ampere") == \
        {"gpus": 4, "cp": 2, "generation": "ampere"}


def test_a_table_without_spans_gives_the_interval_alone(monkeypatch):
    """A step_uncertainty.toml from before --fit wrote spans: no ``span``, no ``outside``, no line."""
    from topo.cli.train_text import span_line, uncertainty_line
    from topo.training import uncertainty
    from topo.training.model import load_model
    row = {"runs": 7, "p50": 0.123, "p90": 0.157, "median": -0.119}
    monkeypatch.setattr(uncertainty, "_table", lambda: {"source": "x", "hybrid_ssm": row})
    job = {"gpus": 1024, "pp": 2, "cp": 1, "ep": 16, "ep_domains": 2}
    u = uncertainty.step_interval(load_model("nemotron-3-nano-30b-a3b"), "bf16", 1.0, "hopper", job)
    assert "span" not in u and "outside" not in u and u["high_s"] == pytest.approx(1 / (1 - 0.157))
    assert span_line(u) == "" and "\n" not in uncertainty_line(u)
    monkeypatch.setattr(uncertainty, "_table", lambda: {"source": "x", "hybrid_ssm": {**row, **SPAN}})
    u = uncertainty.step_interval(load_model("nemotron-3-nano-30b-a3b"), "bf16", 1.0, "hopper", job)
    assert u["span"] == SPAN and u["outside"] == {"gpus": 1024, "pp": 2, "ep": 16, "ep_domains": 2}


def test_the_writer_adds_spans_and_keeps_the_errors_when_given_none():
    acc = _accuracy()
    text = TOML.read_text(encoding="utf-8")
    spans = {"dense_bf16": {"all": {**SPAN, "families": ["llama3"]}}}
    out = tomllib.loads(acc.uncertainty_text(text, {"dense_bf16": {"all": [0.01, -0.02, 0.03, -0.10]}}, spans))
    assert out["dense_bf16"] == {"runs": 4, "p50": 0.025, "p90": 0.079, "median": -0.005, **SPAN,
                                 "families": ["llama3"]}
    again = tomllib.loads(acc.uncertainty_text(text, None, {}))  # --spans with none: the errors as they stood
    old = tomllib.loads(text)
    assert again["moe_fine"]["hopper"]["p90"] == old["moe_fine"]["hopper"]["p90"]
    assert again["hybrid_ssm"]["runs"] == old["hybrid_ssm"]["runs"] and "families" not in again["hybrid_ssm"]


def test_walk35s_1024_gpu_h100_job_is_said_outside_the_hybrid_runs(tmp_path):
    """walk35's search #1 on 1,024 H100: pp 2, EP 16 over two 8-GPU nodes. Against the 7 Nemotron 3 Nano runs of
    8-16 GPUs at pp 1 and EP 8 inside a node it lay outside in four figures; since the Nemotron 3 Super and Ultra
    runs joined the fit (super80, ultra85: 64-256 GPUs, pp 2, EP 32 over four H100 nodes, EP 64) it lies outside in
    its GPU count alone."""
    model = tmp_path / "hymoe.toml"
    model.write_text(HYMOE)
    args = ["train", "dgx-h100-superpod", "--model", str(model), "--gpus", "1024", "--global-batch", "1024",
            "--precision", "fp8", "--tp", "1", "--pp", "2", "--vpp", "4", "--dp", "512", "--ep", "16"]
    u = json.loads(run_cli(*args, "--json", check=True).stdout)["uncertainty"]
    assert u["outside"] == {"gpus": 1024}
    assert u["span"]["families"] == ["nemotron-3-nano", "nemotron-3-super", "nemotron-3-ultra"]
    text = run_cli(*args, check=True).stdout
    assert ("interval from 11 hybrid Mamba-2 / attention runs (3 families (nemotron-3-nano, nemotron-3-super, "
            "nemotron-3-ultra); 7 Blackwell, 4 Hopper; 8-256 GPUs; pp up to 2; no context parallelism; ep up to 64 "
            "across up to 4 NVLink domains); this job is outside them: 1,024 GPUs\n") in text


def test_a_job_like_the_runs_lies_inside_them():
    args = ["train", "dgx-h100-superpod", "--model", "nemotron-3-nano-30b-a3b", "--gpus", "16", "--tp", "1",
            "--dp", "16", "--ep", "8", "--global-batch", "64"]
    js = json.loads(run_cli(*args, "--json", check=True).stdout)
    assert js["uncertainty"]["outside"] == {}
    assert "; this job lies inside them" in run_cli(*args, check=True).stdout
