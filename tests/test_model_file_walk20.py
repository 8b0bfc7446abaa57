"""A model file missing several keys names them all in its one error line (walk20: a file of ``name`` alone took
seven runs, one missing key a run). The keys are ModelSpec's required fields (topo/training/model.py)."""

from __future__ import annotations

import pytest

from topo.errors import TopoError
from topo.training.model import model_from_dict


def test_every_missing_key_is_named():
    with pytest.raises(TopoError) as exc:
        model_from_dict({"name": "x"}, "x.toml")
    assert exc.value.key == "source"
    assert exc.value.message == ("is required but missing (also missing: layers, hidden, ffn_hidden, heads, vocab, "
                                 "seq_len)")


def test_one_missing_key_says_only_it():
    with pytest.raises(TopoError) as exc:
        model_from_dict({"name": "x", "source": "s", "layers": 2, "hidden": 64, "ffn_hidden": 256, "heads": 4,
                         "vocab": 100}, "x.toml")
    assert exc.value.key == "seq_len" and exc.value.message == "is required but missing"


def test_an_unknown_key_still_comes_first():
    """A misspelt key explains a missing one (the spec loader's order): the unknown key is the line's subject."""
    with pytest.raises(TopoError) as exc:
        model_from_dict({"name": "x", "source": "s", "layer": 2}, "x.toml")
    assert exc.value.key == "layer" and exc.value.message.startswith("unknown key 'layer'")
