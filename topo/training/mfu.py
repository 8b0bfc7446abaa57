"""The MFU a layout reaches on a cluster: what ``topo plan --model M --layout L`` takes from ``topo train``."""

from __future__ import annotations

from ..fabric.builders import build_fabric
from ..errors import TopoError
from .parallel import load_layout
from .model import load_model
from .step import estimate_step

__all__ = ["predict_mfu", "predict_step", "parse_layout"]


def parse_layout(text: str, **overrides):
    """A layout from a TOML file, or from ``key=value`` pairs separated by commas (``tp=8,pp=16,dp=64,
    global_batch=2048``; values read as TOML values): :func:`topo.training.parallel.load_layout`; ``overrides``
    (fields, None: not given) on top. Which of the two ``text`` is, is :func:`~topo.training.parallel.layout_fields`'
    one rule (walk41: a word that is neither, ``tp8``, had been read here as malformed pairs)."""
    return load_layout(text, **overrides)


def predict_step(spec, model: str, layout: str, dp: int | None = None, profile=None):
    """``(step, precision, parameters)``: the :class:`~topo.training.result.StepResult` of ``model`` laid out as
    ``layout`` on the cluster of ``spec`` (:func:`predict_mfu`'s step, its arguments the same); a layout that does
    not fit in GPU memory is an error (key ``layout``)."""
    if not model or not layout:
        raise TopoError("give both a model and a layout (e.g. tp=8,pp=16,dp=64,global_batch=2048)", key="model")
    m = load_model(model)
    lay = parse_layout(layout, dp=dp)
    result = estimate_step(build_fabric(spec), m, lay, profile=profile)
    if not result.fits:
        raise TopoError(f"{model} with this layout does not fit in GPU memory; the MFU of a run that cannot start "
                        "is not a planning figure", key="layout")
    return result, lay.precision, float(m.total_params)


def predict_mfu(spec, model: str, layout: str, dp: int | None = None, profile=None) -> tuple[float, str, float]:
    """``(MFU, precision, parameters)`` of ``model`` laid out as ``layout`` on the cluster of ``spec``: one
    training step through :func:`topo.training.step.estimate_step`; MFU counts 6N + attention (as Llama 3 does)
    against the GPU's peak at the layout's precision. ``dp``: a data-parallel size over the layout's (the
    CLI fills it where the layout gives none; None: the layout's, 1 if it gives none); ``profile``: the cost profile
    of the step's collectives (:func:`~topo.training.step.estimate_step`'s; None: the fabric's own)."""
    result, precision, params = predict_step(spec, model, layout, dp=dp, profile=profile)
    return float(result.mfu), precision, params
