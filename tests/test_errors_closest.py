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
