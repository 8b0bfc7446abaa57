"""``topo train --json``'s ``uncertainty`` says where its p50 and p90 come from (walk11: the text line said "models
whose family the fit never saw", the JSON only gave the figures)."""

import json

from conftest import run_cli


def test_json_uncertainty_names_its_out_of_family_basis():
    out = run_cli("train", "dgx-h100-superpod", "--model", "nemotron-h-56b", "--gpus", "8", "--tp", "8",
                  "--global-batch", "8", "--json", check=True).stdout
    u = json.loads(out)["uncertainty"]
    assert u["group"] == "hybrid_ssm" and u["runs"] > 0
    assert u["basis"].startswith("out of family: ") and "without any run of its model family" in u["basis"]
    assert u["low_s"] < json.loads(out)["step_time_s"] < u["high_s"]


def _uncertainty_toml() -> tuple[str, dict]:
    import tomllib
    from pathlib import Path
    path = Path(__file__).resolve().parents[1] / "topo" / "data" / "compute" / "step_uncertainty.toml"
    text = path.read_text(encoding="utf-8")
    return text, tomllib.loads(text)


def test_the_basis_is_step_uncertainty_tomls_source_one_place():
    """rev47 (section 118 b): the basis was a Python sentence beside the data file's ``source``; now it is read from
    the file, so the two cannot drift apart."""
    from topo.training.model import load_model
    from topo.training.uncertainty import step_interval
    _, data = _uncertainty_toml()
    assert data["status"] == "derived" and data["source"].startswith("out of family: ")
    u = step_interval(load_model("llama3-8b"), "bf16", 1.0)
    assert u["basis"] == data["source"]


def test_fit_rewrites_the_groups_and_keeps_the_header_with_its_source():
    """``--fit`` writes each group's p50 / p90 from the errors and keeps the file's ``status`` and ``source`` as they
    stand (the sentence lives in the TOML only): percentiles by hand, numpy's linear interpolation."""
    import sys
    import tomllib
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    import training_accuracy
    text, data = _uncertainty_toml()
    out = tomllib.loads(training_accuracy.uncertainty_text(text, {"dense_bf16": {"all": [0.01, -0.02, 0.03, -0.10]},
                                                                    "moe_fine": {"all": []}}))
    assert out["source"] == data["source"] and out["status"] == data["status"]
    assert out["generation_min_runs"] == data["generation_min_runs"]
    # p50 of |e| = (0.02 + 0.03) / 2; p90: 0.03 + 0.7 x 0.07; signed median (-0.02 + 0.01) / 2 = -0.005
    assert out["dense_bf16"] == {"runs": 4, "p50": 0.025, "p90": 0.079, "median": -0.005}
    assert "moe_fine" not in out and "hybrid_ssm" not in out
