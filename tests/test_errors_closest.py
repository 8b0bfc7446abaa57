"""Every "did you mean" of topo's errors goes through one rule (:func:`topo.errors.closest`): a name that differs
from an allowed one only in case is that name (walk23, section 248: ``[MoE]`` for ``[moe]`` got no suggestion)."""

import tomllib

import pytest

from topo.errors import TopoError, closest
from topo.training.model import model_from_dict, models_dir


def test_a_case_only_difference_is_the_allowed_name():
    assert closest("MoE", ["moe", "model", "mamba"]) == ["moe"]
    assert closest("HIDDEN", ["hidden", "heads"]) == ["hidden"]


def test_a_typo_is_still_matched_and_nothing_close_is_nothing():
    assert closest("hiddne", ["hidden", "heads"]) == ["hidden"]
    assert closest("zzz", ["hidden", "heads"]) == []
    assert closest("Hiddne", ["hidden", "heads"]) == ["hidden"]  # case and a typo together


def test_a_model_files_section_in_the_wrong_case_is_named():
    data = tomllib.loads((models_dir() / "deepseek-v3-671b.toml").read_text())
    assert "moe" in data
    data["MoE"] = data.pop("moe")
    with pytest.raises(TopoError) as err:
        model_from_dict(data, "my-model.toml")
    assert "did you mean 'moe'?" in str(err.value)
    assert "my-model.toml" in str(err.value)


def test_a_name_whose_every_word_an_allowed_name_holds_is_that_name():
    """walk41: a newcomer's short names for the bundled model and spec (the words of the file's name, without its
    sizes) are named back to them: ``nemotron3-nano`` had been taken for ``nemotron-nano-9b-v2``, ``gb200`` got
    nothing. A one-word name keeps difflib's rule (``nic`` for ``nics``, errors.key_hint's doctest)."""
    from conftest import run_cli

    proc = run_cli("train", "dgx-h100-superpod", "--model", "nemotron3-nano", "--gpus", "8")
    assert proc.returncode == 2 and "did you mean 'nemotron-3-nano-30b-a3b'?" in proc.stderr, proc.stderr
    proc = run_cli("describe", "gb200")
    assert proc.returncode == 2 and "did you mean 'gb200-nvl72-superpod'?" in proc.stderr, proc.stderr
    assert closest("deepseek-v3", ["deepseek-v3-671b", "kimi-k2"]) == ["deepseek-v3-671b"]
    assert closest("nic", ["nics", "nic_rate"]) == ["nics"]
