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
