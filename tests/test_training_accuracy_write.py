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


def test_the_fit_settles_an_even_count_at_one_point():
    """Two runs whose steps scale as 1 / e, one at e = 0.8 and one at 0.9: mean |log error| is flat on [0.8, 0.9]
    (tp35 found the Blackwell FP8 fit sitting on such a flat and jumping end to end on a 0.2-point move), so the
    fitted value depended on the bracket. The smoothed loss has one minimum, the two runs' geometric mean,
    whatever bracket the search starts from."""
    rows = [{"a": 0.8, "step_s": 1.0}, {"a": 0.9, "step_s": 1.0}]
    predict = lambda s, v: s["a"] / v["k"]  # noqa: E731
    fits = [training_accuracy._fit_key(predict, rows, "k", {}, lo, hi) for lo, hi in ((0.5, 1.0), (0.7, 1.2),
                                                                                       (0.3, 0.95))]
    assert fits == [pytest.approx(0.849, abs=1.5e-3)] * 3
