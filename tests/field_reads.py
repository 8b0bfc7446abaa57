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
