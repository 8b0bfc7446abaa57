"""uncert48: a step's interval is its group's on its GPU's generation where that generation has at least
``generation_min_runs`` out-of-family runs (step_uncertainty.toml), else its group's across generations; the signed
median shows which way the model leans there and never moves the prediction."""

import json
import sys
import tomllib
from pathlib import Path

import pytest

from conftest import run_cli

ROOT = Path(__file__).resolve().parents[1]
TOML = ROOT / "topo" / "data" / "compute" / "step_uncertainty.toml"


def _writer():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import training_accuracy
    return training_accuracy.uncertainty_text


def test_fit_writes_a_generation_row_only_from_the_minimum_runs():
    """Synthetic table, minimum 10: Hopper's ten errors get a row, Ampere's three do not (the group's across
    generations stands for them). Closed forms: |e| of Hopper are 0.01..0.10; numpy's linear p50 is at rank 4.5,
    (0.05 + 0.06) / 2, its p90 at rank 8.1, 0.09 + 0.1 x 0.01; the signed median of -0.01..-0.10 is -0.055."""
    text = TOML.read_text(encoding="utf-8")
    assert tomllib.loads(text)["generation_min_runs"] == 10
    hopper = [-0.01 * k for k in range(1, 11)]
    ampere = [0.20, 0.30, 0.40]
    out = tomllib.loads(_writer()(text, {"moe_fine": {"all": hopper + ampere, "ampere": ampere, "hopper": hopper}}))
    assert out["moe_fine"]["hopper"] == {"runs": 10, "p50": 0.055, "p90": 0.091, "median": -0.055}
    assert "ampere" not in out["moe_fine"] and out["moe_fine"]["runs"] == 13
    assert out["moe_fine"]["median"] == -0.04  # 13 signed errors: the 7th smallest, -0.04
    nine = hopper[:9]
    out = tomllib.loads(_writer()(text, {"moe_fine": {"all": nine, "hopper": nine}}))
    assert "hopper" not in out["moe_fine"]


def test_step_interval_takes_the_generation_row_and_falls_back_to_the_group(monkeypatch):
    from topo.training import uncertainty
    from topo.training.model import load_model
    table = {"source": "out of family: x", "moe_fine": {"runs": 20, "p50": 0.1, "p90": 0.2, "median": -0.05,
                                                        "hopper": {"runs": 12, "p50": 0.09, "p90": 0.25,
                                                                   "median": -0.088}}}
    monkeypatch.setattr(uncertainty, "_table", lambda: table)
    m = load_model("qwen3-30b-a3b")
    h = uncertainty.step_interval(m, "fp8", 1.0, "hopper")
    assert (h["generation"], h["runs"], h["p90"], h["median"]) == ("hopper", 12, 0.25, -0.088)
    assert h["low_s"] == pytest.approx(1 / 1.25) and h["high_s"] == pytest.approx(1 / 0.75)  # the bias is not applied
    b = uncertainty.step_interval(m, "fp8", 1.0, "blackwell")
    assert (b["generation"], b["runs"], b["p90"], b["basis"]) == ("all", 20, 0.2, "out of family: x")


def test_an_h100_and_a_gb200_moe_layout_get_their_generations_intervals():
    data = tomllib.loads(TOML.read_text(encoding="utf-8"))
    layout = ["--model", "qwen3-30b-a3b", "--gpus", "64", "--global-batch", "256", "--tp", "1", "--dp", "64",
              "--ep", "64", "--precision", "fp8"]
    got = {}
    for spec, gen in (("dgx-h100-superpod", "hopper"), ("gb200-nvl72-superpod", "blackwell")):
        js = json.loads(run_cli("train", spec, *layout, "--json", check=True).stdout)
        u, row = js["uncertainty"], data["moe_fine"][gen]
        assert u["group"] == "moe_fine" and u["generation"] == gen and u["basis"] == data["source"]
        assert (u["runs"], u["p50"], u["p90"], u["median"]) == (row["runs"], row["p50"], row["p90"], row["median"])
        assert u["low_s"] == pytest.approx(js["step_time_s"] / (1 + row["p90"]))
        text = run_cli("train", spec, *layout, check=True).stdout
        (line,) = [ln for ln in text.splitlines() if ln.startswith("uncertainty ")]
        assert f"on {row['runs']} published {gen.capitalize()} runs of fine-grained MoE models" in line
        assert f"nine in ten within {row['p90']:.0%}; median error {row['median']:+.1%}" in line
        got[gen] = u["p90"]
    assert got["hopper"] != got["blackwell"]


def test_a_group_without_generation_rows_says_all_generations():
    """Hybrid Mamba-2 / attention has fewer published runs than the minimum on any generation."""
    data = tomllib.loads(TOML.read_text(encoding="utf-8"))
    assert not any(isinstance(v, dict) for v in data["hybrid_ssm"].values())
    out = run_cli("train", "dgx-h100-superpod", "--model", "nemotron-h-56b", "--gpus", "8", "--tp", "8",
                  "--global-batch", "8", check=True).stdout
    assert f"on {data['hybrid_ssm']['runs']} published runs (all GPU generations) of hybrid" in out
