"""The hold-out rows' settings as their sources ran them (auditho48: every row of
data/reference/training_runs_holdout.csv read against its release's recipe), as benchmarks/training_accuracy.py
turns each row into topo's layout. Each test names the source line it guards."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))


@pytest.fixture(scope="module")
def layouts():
    import training_accuracy
    return {s["run"]: s["lay"] for s in training_accuracy._setups()}


def test_grok1_fp8_rows_gather_their_fp8_weights(layouts):
    """NVIDIA/dgxc-benchmarking@1f6d9f40 grok1: container NeMo 25.04.00 (launch.sh line 13) with NVIDIA/NeMo@6f2c6fda
    (setup.sh line 55), whose FP8 runs take bf16_with_fp8_mixed (scripts/performance/llm/pretrain_grok1_314b.py line
    340), which sets fp8_param_gather (nemo/collections/llm/recipes/precision/mixed_precision.py line 70): the FP8
    rows gather 1-byte weights, the BF16 rows do not."""
    grok = {run: lay for run, lay in layouts.items() if run.startswith("nemo2504dgxc_") and "_grok1_" in run}
    assert len(grok) == 8
    for run, lay in grok.items():
        assert lay.fp8_param_gather == ("_fp8_" in run), run
