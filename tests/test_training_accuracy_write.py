"""``benchmarks/training_accuracy.py --fit`` writes each fitted value into its own table of ``kernels.toml``, also
when a key before it in that table holds brackets (``[launch]``'s ``gpu_s_by_generation = { hopper = [...] }``):
an earlier regex stopped at the first ``[`` and left ``host_s`` unwritten without a word."""

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import training_accuracy  # noqa: E402

KERNELS = (ROOT / "topo" / "data" / "compute" / "kernels.toml").read_text()


def _value(text: str, table: str, key: str) -> str:
    import tomllib
    return tomllib.loads(text)[table][key]


def test_host_s_is_written_past_a_bracketed_value_in_launch():
    assert "gpu_s_by_generation = {" in KERNELS.split("\n[launch]\n")[1].split("\nhost_s = ")[0]
    out = training_accuracy._set_in_table(KERNELS, "launch", "host_s", "1.23e-05")
    assert _value(out, "launch", "host_s") == pytest.approx(1.23e-05)
    assert out.count("\n") == KERNELS.count("\n")  # one value replaced, nothing else


def test_a_training_fraction_is_written_in_its_table_only():
    out = training_accuracy._set_in_table(KERNELS, "training", "hopper_fp8", "0.999")
    assert _value(out, "training", "hopper_fp8") == pytest.approx(0.999)
    assert _value(out, "launch", "host_s") == _value(KERNELS, "launch", "host_s")


def test_a_key_missing_from_its_table_is_an_error_not_a_silent_skip():
    with pytest.raises(KeyError):
        training_accuracy._set_in_table(KERNELS, "training", "host_s", "1e-05")
