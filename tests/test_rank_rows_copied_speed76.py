"""Issue 23's 100k search: :func:`.operators.rank_computes_at` shares its stages' rows (kept in ``blocks`` across
layouts, and one row for the stages alike of a layout) and copies a row once per pipeline rank, not once per stage
(speed76). Each rank's :class:`~.operators.StageCompute` must still hold its own dicts: a caller that changes one
rank's must change no other rank's, nor the rows a later layout reads from ``blocks``."""

from __future__ import annotations

from dataclasses import fields

import numpy as np
import pytest

import topo
from topo.training.gpus import gpu_compute
from topo.training.model import load_model
from topo.training.operators import StageCompute, rank_computes_at
from topo.training.parallel import ParallelLayout


@pytest.fixture(scope="module")
def dsv3():
    spec = topo.load_spec("h100-100k")
    return load_model("deepseek-v3-671b"), gpu_compute(spec.gpu, None, host_cpu=spec.host_cpu[0])


def _equal(a: StageCompute, b: StageCompute) -> bool:
    return all(np.array_equal(getattr(a, f.name), getattr(b, f.name)) if f.name == "stage_s"
               else getattr(a, f.name) == getattr(b, f.name) for f in fields(StageCompute))


def _spoil(sc: StageCompute) -> None:
    sc.by_module_s["spoiled"] = 1.0
    sc.blocks["spoiled"] = 1
    for pairs in sc.tp_pairs.values():
        pairs.append(("spoiled", 1))


@pytest.mark.parametrize("vpp", [1, 2])
def test_each_rank_holds_its_own_dicts(dsv3, vpp):
    """pp 4 of 8 and 16 layers a rank (vpp 2: two stages a rank, the middle ones alike): every rank's dicts changed
    after a first call with one ``blocks`` dict, a second call on it (and the other ranks of the first) price as a
    call without sharing does."""
    model, gpu = dsv3
    lay = ParallelLayout(tp=2, pp=4, vpp=vpp, dp=16, ep=8, global_batch=256, gpus_per_domain_used=8)
    fresh = rank_computes_at(model, lay, gpu, (np.inf, 0.0))
    blocks: dict = {}
    first = rank_computes_at(model, lay, gpu, (np.inf, 0.0), blocks)
    for ranks, alone in zip(first, fresh):
        _spoil(ranks[0])  # the busiest rank's only: the others keep their own dicts
        assert all(_equal(a, b) for a, b in zip(ranks[1:], alone[1:]))
    again = rank_computes_at(model, lay, gpu, (np.inf, 0.0), blocks)
    assert all(_equal(a, b) for x, y in zip(again, fresh) for a, b in zip(x, y))
