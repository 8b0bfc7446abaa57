"""Test helper: every fitting layout of a small layout search with its bound, its refinement and its step, the
search's own engine left empty so that nothing the refinement reads is routed (bound56's and dpf56's floors)."""

from topo.training.comm import CommEngine
from topo.training.gpus import gpu_compute
from topo.training.mapping import default_placement
from topo.training.search import _keys, _Search, candidate_layouts
from topo.training.step import estimate_step


def bounded_layouts(fabric, model, gpus: int, **kw):
    """Yield ``(search, layout, keys, bound, refined, step result)`` for each placed layout of
    :func:`topo.training.search.candidate_layouts` (global batch = ``gpus``, options ``kw``) that has a bound and
    fits; the step routes on an engine of its own."""
    gpu = gpu_compute(fabric.spec.gpu, host_cpu=fabric.spec.host_cpu[0])
    s = _Search(fabric, model, CommEngine(fabric), gpu, 5, dict(convention="6n", efficiency=None), None, None)
    steps = CommEngine(fabric)
    for lay, _ in candidate_layouts(model, gpus, gpus, gpus_per_domain=fabric.spec.gpus_per_domain, **kw):
        if lay is None:
            continue
        lay, _ = default_placement(lay, fabric.spec.gpus_per_domain, fabric.layout.num_gpus)
        keys = _keys(lay)
        bound, _ = s.bound_of(lay, keys)
        if bound is None:
            continue
        r = estimate_step(fabric, model, lay, engine=steps, check=False, contention=False)
        if r.fits:
            yield s, lay, keys, bound, s.refined(lay, bound, keys), r
