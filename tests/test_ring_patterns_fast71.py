"""Issue 23's 100k search: :func:`topo.engine.algorithms.ring.run_patterns` groups the rings that split alike over
NVLink domains without sorting the rows when every ring splits alike (``np.unique`` over two 50,176-rank rows took
~0.4 s, ~450 times a search). The answer must be the one the sort gives: checked where the shortcut could be wrong,
rings alike but one (first or last), against closed forms of their runs."""

import numpy as np
import pytest

from topo.engine.algorithms.ring import run_patterns


def _kinds(groups, d):
    """run_patterns' answer as plain lists, the kinds in the rows' order (the order its callers read them in does
    not matter: each writes its own rows, or takes a minimum)."""
    return sorted((r.tolist(), s.tolist(), n.tolist()) for r, s, n in run_patterns(np.asarray(groups), d))


def test_rings_alike_are_one_kind_with_every_row():
    """Four 16-rank rings on 8-GPU domains, each over two whole domains: one kind, rows 0-3, runs of 8 at 0 and 8."""
    groups = np.arange(64).reshape(4, 16)
    assert _kinds(groups, 8) == [([0, 1, 2, 3], [0, 8], [8, 8])]


@pytest.mark.parametrize("odd", [0, 3])
def test_rings_alike_but_one_are_two_kinds(odd):
    """Four 16-rank rings alike but ring ``odd`` (the first or the last), which starts 4 GPUs into a domain (4 + 8 +
    4): two kinds, the odd ring alone with its own runs. Comparing all rows to the first (or none but the first) is
    what the shortcut must do (seen failing with the last row left out of the comparison)."""
    groups = np.arange(64).reshape(4, 16)
    groups[odd] = np.arange(100, 116)
    rest = [i for i in range(4) if i != odd]
    assert _kinds(groups, 8) == sorted([(rest, [0, 8], [8, 8]), ([odd], [0, 4, 12], [4, 8, 4])])


def test_walk30s_rings_on_72_gpu_racks_stay_two_kinds():
    """walk30's case: 96-rank rings on 72-GPU racks, the first 72 + 24, the second 48 + 48."""
    groups = np.arange(192).reshape(2, 96)
    assert _kinds(groups, 72) == sorted([([0], [0, 72], [72, 24]), ([1], [0, 48], [48, 48])])
