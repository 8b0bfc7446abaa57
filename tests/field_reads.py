"""A layout that notes which of its fields are read: what a cache keyed without a field must never read (the
dispatcher fields outside the MoE block, fast63's block times and fast64's shared step traffic, the block cache's
keys, fast69's kept stage rows and fast71's kept waited rows). One recorder, and the DeepSeek-V3 on H100 job and
stage-row comparison the stage-row tests price, for test_training_comm_keyed_fast63,
test_training_search_speed_fast64, test_training_block_cache, test_search_shared_rows_fast69 and
test_search_waited_rows_fast71. Each test clears :data:`READ` before the call it records."""

from dataclasses import fields

import numpy as np

import topo
from topo.training.gpus import gpu_compute
from topo.training.model import load_model
from topo.training.operators import StageCompute, block_time
from topo.training.parallel import ParallelLayout

FIELDS = frozenset(ParallelLayout.model_fields)
READ: set = set()


class Recorded(ParallelLayout):
    """A :class:`ParallelLayout` that adds the name of every model field read of it (and of its copies:
    ``model_copy`` keeps the class) to :data:`READ`."""

    def __getattribute__(self, name):
        if name in FIELDS:
            READ.add(name)
        return super().__getattribute__(name)


def recorded(lay: ParallelLayout, **changes) -> Recorded:
    """A :class:`Recorded` copy of ``lay``: the fields ``lay`` was given, then ``changes`` (read without recording)."""
    return Recorded(**{**{k: getattr(lay, k) for k in lay.model_fields_set}, **changes})


def h100_gpu():
    """The compute of the bundled ``h100-100k`` spec's GPU with its first host CPU, as the recorded calls price it."""
    spec = topo.load_spec("h100-100k")
    return gpu_compute(spec.gpu, None, host_cpu=spec.host_cpu[0])


def deepseek_v3_on_h100():
    """DeepSeek-V3 (671B) and :func:`h100_gpu`: the job the stage-row tests price (their module-scoped ``dsv3``
    fixture)."""
    return load_model("deepseek-v3-671b"), h100_gpu()


# the stage-row tests' DeepSeek-V3 layout: 128 GPUs, EP 8 inside the DP x TP ranks, 8 GPUs a domain used
DSV3_LAYOUT = dict(tp=2, pp=4, dp=16, ep=8, global_batch=256, gpus_per_domain_used=8)


def recompute_pairs(module: str) -> list:
    """``(field, a, b)``: two sets of layout fields alike but for one recomputation field (the recomputation, its
    layers, its early stop, its modules: ``b``'s selective set adds ``module``), for the stage-row tests' keys."""
    return [("recompute", dict(recompute="none"), dict(recompute="full")),
            ("recompute_num_layers", dict(recompute="full"), dict(recompute="full", recompute_num_layers=1)),
            ("recompute_early_stop", dict(recompute="full", recompute_early_stop=True),
             dict(recompute="full", recompute_early_stop=False)),
            ("recompute_modules", dict(recompute="selective", recompute_modules=["core_attn"]),
             dict(recompute="selective", recompute_modules=["core_attn", module]))]


def other_pp_layouts() -> list:
    """:data:`DSV3_LAYOUT` at pp 2, 4 and 8 (dp 128 / pp) in two rank orders: layouts whose stages hold the same
    units, that the kept stage rows serve."""
    return [ParallelLayout(**{**DSV3_LAYOUT, "pp": pp, "dp": 128 // pp, "rank_order": ro})
            for pp in (2, 4, 8) for ro in ("tp-cp-ep-dp-pp", "tp-cp-ep-pp-dp")]


def kept_block_times(model, lay: ParallelLayout, gpu):
    """The ``bt(kind, bf16=False)`` that :func:`.operators._stage_base` and :func:`.operators._host_waits_s` are
    given: each block's :func:`.operators.block_time` on ``lay`` (on a BF16 copy of it where ``bf16``), priced on the
    plain ``lay`` (never a recorder) and kept."""
    times: dict = {}

    def bt(kind, bf16=False):
        if (kind, bf16) not in times:
            on = lay.model_copy(update={"precision": "bf16"}) if bf16 else lay
            times[(kind, bf16)] = block_time(model, on, gpu, kind)
        return times[(kind, bf16)]
    return bt


def _equal(a: StageCompute, b: StageCompute) -> bool:
    return all(np.array_equal(getattr(a, f.name), getattr(b, f.name)) if f.name == "stage_s"
               else getattr(a, f.name) == getattr(b, f.name) for f in fields(StageCompute))


def same_rows(x: list, y: list) -> bool:
    """Whether two lists of ranks' stage rows (as :func:`.operators.rank_computes_at` gives them) are equal field by
    field, the per-stage arrays element by element."""
    return len(x) == len(y) and all(len(p) == len(q) and all(map(_equal, p, q)) for p, q in zip(x, y))
