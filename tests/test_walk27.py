"""walk27's fixes (a reliability lead on failures and goodput on Meta's 24,576-H100 Llama 3 cluster)."""

import json

import pytest

from conftest import run_cli
from topo.sweep import sweep

_LAYOUT = "tp=8,dp=128,global_batch=1024"


def test_a_sweeps_plan_after_train_gives_topo_plan_models_figures():
    """A study computing train then plan prices each point as `topo plan SPEC --model M --layout L` does: the
    step's MFU, its precision and the model's parameters (the checkpoint, and the storage sized to write it).
    walk27: the sweep's plan took the MFU alone, so a bf16 step's MFU multiplied the catalog's default fp8 peak
    (effective FLOP twice topo plan's: 1.48e26 against 7.39e25 for Llama 3 405B on meta-llama3-24k) on storage
    sized for the Chinchilla-sized model ($1.639B of capex against $1.594B)."""
    df = sweep({"spec": "dgx-h100-superpod", "compute": ["train", "plan"],
                "axes": {"model": "llama3-8b", "layout": _LAYOUT}}, scheduler="serial")
    assert df["error"].isna().all()
    cli = json.loads(run_cli("plan", "dgx-h100-superpod", "--model", "llama3-8b", "--layout", _LAYOUT,
                             "--no-collectives", "--json", check=True).stdout)
    assert df["effective_flop"].iat[0] == pytest.approx(cli["reliability"]["effective_flop"], rel=1e-12)
    for k in ("goodput", "capex_usd", "it_power_W"):
        assert df[k].iat[0] == pytest.approx(cli[k], rel=1e-12), k
