"""Search: every valid layout of a model on a number of GPUs with a global batch, ranked by step time.

Enumerated: tp (powers of two up to the NVLink domain, dividing the heads), cp (1, 2, 4, 8, 16 where the
sequence splits), pp (divisors of the rest, up to the layers), dp (what remains), ep (MoE: divisors of dp and
the experts), vpp (1, 2, 4 when pp > 1), micro-batch (1, 2, 4), recomputation (none, selective, full), the
sharding modes and the rank orders given (e.g. ``tp-cp-ep-pp-dp`` as well as Megatron's ``tp-cp-ep-dp-pp`` shows
what keeping data parallelism inside a pod buys). A layout that breaks a divisibility rule is skipped; one that does not fit in memory is
counted and dropped before any communication is estimated (memory is closed-form and cheap). The rest are
evaluated with one shared :class:`~topo.training.comm.CommEngine`, whose cache makes layouts that share a group
matrix (all with the same tp, or the same dp groups) cost one engine call between them.
"""

from __future__ import annotations

import itertools
import time

from ..errors import TopoError
from ..fabric.fabric import Fabric
from .comm import CommEngine
from .gpus import gpu_compute
from .parallel import DEFAULT_ORDER, ParallelLayout, check_layout
from .memory import memory_per_gpu
from .model import ModelSpec
from .result import SearchResult
from .step import estimate_step

__all__ = ["search_layouts", "candidate_layouts"]


def _pow2_upto(n: int) -> list[int]:
    out, x = [], 1
    while x <= n:
        out.append(x)
        x *= 2
    return out


def candidate_layouts(model: ModelSpec, gpus: int, global_batch: int, *, gpus_per_domain: int,
                      seq_len: int | None = None, dp_sharding=("zero1", "fsdp_grad_op", "zero3"),
                      recompute=("none", "selective", "full"), micro_batches=(1, 2, 4), vpps=(1, 2, 4),
                      cps=(1, 2, 4, 8, 16), rank_orders=(DEFAULT_ORDER,), **fixed):
    """Yield (ParallelLayout or None, reason) for every combination; None when a divisibility rule fails."""
    seq = seq_len or model.seq_len
    experts = model.moe.experts if model.moe else 1
    for tp in _pow2_upto(min(gpus_per_domain, gpus)):
        for cp in cps:
            if gpus % (tp * cp) or (cp > 1 and seq < 8192 * cp // 2):
                continue
            rest = gpus // (tp * cp)
            for pp in [d for d in range(1, min(rest, model.layers) + 1) if rest % d == 0]:
                dp = rest // pp
                eps = [e for e in _pow2_upto(min(dp, experts)) if dp % e == 0 and experts % e == 0] \
                    if model.moe else [1]
                for ep, vpp, mb, rc, zs, ro in itertools.product(eps, vpps if pp > 1 else (1,), micro_batches,
                                                                 recompute, dp_sharding, rank_orders):
                    if rc == "selective" and fixed.get("flash_attention", True):
                        continue  # fused attention already drops what selective recomputation drops
                    try:
                        lay = ParallelLayout(tp=tp, cp=cp, pp=pp, dp=dp, ep=ep, vpp=vpp, micro_batch=mb,
                                     global_batch=global_batch, seq_len=seq_len, recompute=rc, dp_sharding=zs,
                                     rank_order=ro, **fixed)
                        check_layout(model, lay, gpus=gpus, gpus_per_domain=gpus_per_domain)
                    except (TopoError, ValueError) as exc:
                        yield None, str(exc)
                        continue
                    yield lay, ""


def search_layouts(fabric: Fabric, model: ModelSpec, gpus: int, global_batch: int, *, top: int | None = None,
                   convention: str = "6n", efficiency: float | None = None, engine: CommEngine | None = None,
                   max_layouts: int | None = None, **options) -> SearchResult:
    """Rank every valid layout that fits by step time (fastest first).

    Raises TopoError when no layout is valid, or none fits (saying by how much the closest one misses)."""
    t0 = time.perf_counter()
    spec = fabric.spec
    if gpus > fabric.layout.num_gpus:
        raise TopoError(f"{gpus} GPUs asked, but the fabric has {fabric.layout.num_gpus}", key="gpus")
    cap = gpu_compute(spec.gpu, efficiency).memory_bytes
    engine = engine or CommEngine(fabric)
    considered = invalid = too_big = 0
    fitting: list[ParallelLayout] = []
    closest = None
    for lay, _why in candidate_layouts(model, gpus, global_batch, gpus_per_domain=spec.gpus_per_domain,
                                       **options):
        considered += 1
        if lay is None:
            invalid += 1
            continue
        mem = memory_per_gpu(model, lay, cap)
        if not mem.fits:
            too_big += 1
            if closest is None or mem.total_bytes < closest[0].total_bytes:
                closest = (mem, lay)
            continue
        fitting.append(lay)
    if not fitting:
        if closest is None:
            raise TopoError(f"no layout of {model.name} on {gpus} GPUs with a global batch of {global_batch} "
                            f"satisfies the divisibility rules ({invalid} tried)", key="gpus")
        mem, lay = closest
        raise TopoError(f"{model.name} fits in no layout on {gpus} GPUs: the smallest ({lay.describe()}) needs "
                        f"{mem.total_bytes / 1e9:.1f} GB per GPU, {mem.short_bytes / 1e9:.1f} GB more than the "
                        f"{cap / 1e9:.0f} GB of a {spec.gpu}", key="model")
    if max_layouts is not None:
        fitting = fitting[:max_layouts]
    results = [estimate_step(fabric, model, lay, engine=engine, convention=convention, efficiency=efficiency,
                        check=False) for lay in fitting]
    results.sort(key=lambda r: (round(r.step_time_s, 9), r.memory_per_gpu_bytes))  # ties: less memory first
    return SearchResult(spec=fabric.name, model=model.name, gpus=gpus, global_batch=global_batch,
                        ranked=results[:top] if top else results, considered=considered, rejected_memory=too_big,
                        rejected_invalid=invalid, engine_calls=engine.engine_calls,
                        elapsed_s=time.perf_counter() - t0)
