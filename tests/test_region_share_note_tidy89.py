"""A region's share carries the does-not-fit note of the memory of the form its job takes, in both directions
(issue 29, findings section 390; regions82 swapped the note only where the share's own step had one).

``_share_as_taken`` is given the share's step and the taken form's memory per GPU; the cases are constructed by
moving the GPU's capacity (``MemoryBreakdown.fits``: total at or under capacity), so each direction is met whatever
form a region's job can take today. The note's wording is ``step.not_fit_note``'s, one place.
"""

from dataclasses import replace

import pytest

import topo
from topo.training.model import load_model
from topo.training.multisite import _share_as_taken
from topo.training.parallel import make_layout
from topo.training.step import estimate_step, not_fit_note


@pytest.fixture(scope="module")
def step():
    fabric = topo.build_fabric(topo.load_spec("dgx-h100-superpod", ["cluster.num_units=1"]))
    lay = make_layout(tp=1, dp=8, global_batch=64, seq_len=4096, dp_sharding="zero3", recompute="full")
    one = estimate_step(fabric, load_model("llama3-8b"), lay, contention=False)
    assert one.memory.fits  # the share's own step fits
    return one


def _short(mem):
    """``mem`` on a GPU of half its total: does not fit, short by half the total."""
    return replace(mem, capacity_bytes=mem.total_bytes / 2)


def _said(result):
    return [n for n in result.notes if n.startswith("does not fit:")]


def test_a_taken_form_that_does_not_fit_says_so_where_the_share_fits(step):
    taken = _short(step.memory)
    got = _share_as_taken(step, taken)
    assert _said(got) == [not_fit_note(taken, step.gpu)]
    assert f"{taken.short_bytes / 1e9:.1f} GB more" in _said(got)[0]
    assert [n for n in got.notes if n not in _said(got)] == step.notes  # the others kept, in order


def test_a_taken_form_that_fits_says_nothing_where_the_share_does_not(step):
    share = replace(step, memory=_short(step.memory), notes=[not_fit_note(_short(step.memory), step.gpu)]
                    + list(step.notes))
    got = _share_as_taken(share, step.memory)
    assert not _said(got) and got.notes == step.notes


def test_neither_fitting_says_the_taken_forms_memory_once_in_the_shares_place(step):
    own, taken = _short(step.memory), replace(step.memory, capacity_bytes=step.memory.total_bytes / 4)
    share = replace(step, memory=own, notes=list(step.notes[:1]) + [not_fit_note(own, step.gpu)] + step.notes[1:])
    got = _share_as_taken(share, taken)
    assert _said(got) == [not_fit_note(taken, step.gpu)] and not_fit_note(own, step.gpu) not in got.notes
    assert got.notes.index(_said(got)[0]) == min(1, len(step.notes))
