"""A global batch that does not split into dp x micro_batch (or, interleaved, into pp's micro-batch groups) is one
line that says what is allowed: the multiple and its nearest values (fix49, from a new-user walk: the line had no
"allowed:" part)."""

import pytest

from topo.errors import TopoError
from topo.training.model import load_model
from topo.training.parallel import batch_allowed, check_layout, make_layout


def test_a_batch_that_does_not_split_names_the_multiple_and_its_nearest_values():
    lay = make_layout(tp=8, dp=16, micro_batch=2, global_batch=100, seq_len=4096)
    with pytest.raises(TopoError) as e:
        check_layout(load_model("llama3-70b"), lay)
    assert e.value.key == "global_batch"
    assert e.value.message == ("100 sequences do not split into dp (16) x micro_batch (2) = 32; allowed: a multiple "
                               "of 32 (nearest: 96 or 128)")


def test_an_interleaved_schedule_names_the_multiple_it_needs():
    lay = make_layout(tp=8, pp=4, vpp=2, dp=2, global_batch=12, seq_len=4096)  # 6 micro-batches, pp 4
    with pytest.raises(TopoError) as e:
        check_layout(load_model("llama3-70b"), lay)
    assert e.value.key == "global_batch" and e.value.message.endswith(
        "; allowed: a multiple of 8 (nearest: 8 or 16) (dp x micro_batch x pipeline_flushes x pp)")


@pytest.mark.parametrize("batch,unit,text", [(2320, 48, "nearest: 2,304 or 2,352"), (10, 48, "nearest: 48"),
                                             (49, 48, "nearest: 48 or 96")])
def test_the_nearest_values_are_the_multiples_either_side(batch, unit, text):
    assert batch_allowed(batch, unit) == f"allowed: a multiple of {unit} ({text})"
