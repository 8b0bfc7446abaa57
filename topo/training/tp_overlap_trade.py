"""What TP overlap trades in one step: the TP seconds userbuffers hide against what their SM margins cost.

Transformer Engine's userbuffers run each TP exchange beside its GEMM, and a configuration's ``sm_margin`` buffers
launch that GEMM on the SMs the communicator leaves (``set_sm_margin``: :func:`.tp_overlap.pass_margins`). Where the
exchange is short beside its GEMM (TP2 on NVLink 5) the margins can cost more compute than the exchanges hid:
walk40 (findings section 416) found Llama 3 405B MXFP8 TP2 on GB200 slower with ``overlap_tp`` than without.
:func:`tp_overlap_trade` prices the same step without ``overlap_tp`` (one more :func:`.step.estimate_step`, run
only where userbuffers run: a single step's, not a search's) and gives both steps' terms; its
:meth:`TpOverlapTrade.note` says when the overlap costs more than it hides.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from ..units import format_time
from .step import estimate_step
from .tp_overlap import userbuffers_on

__all__ = ["TpOverlapTrade", "tp_overlap_trade"]


@dataclass(frozen=True)
class TpOverlapTrade:
    """One step with userbuffers TP overlap (``overlap_tp``) and the same layout without it.

    Attributes
    ----------
    tp_overlap_config : str
        The layout's userbuffers configuration (whose ``sm_margin`` buffers take SMs from the TP GEMMs).
    step_s, step_without_s : float
        The step with and without ``overlap_tp``.
    tp_s, tp_without_s : float
        The step's exposed TP seconds (``breakdown_s["tp"]``) with and without.
    compute_s, compute_without_s : float
        The busiest pipeline stage's compute (``breakdown_s["compute"]``) with and without: userbuffers' SM
        margins slow the TP GEMMs.
    bubble_s, bubble_without_s : float
        The pipeline's fill and drain (``breakdown_s["bubble"]``), which grows with the stage's time.
    """

    tp_overlap_config: str
    step_s: float
    step_without_s: float
    tp_s: float
    tp_without_s: float
    compute_s: float
    compute_without_s: float
    bubble_s: float
    bubble_without_s: float

    @property
    def costs_more(self) -> bool:
        """Whether the step is slower with the overlap than without it."""
        return self.step_s > self.step_without_s

    def note(self) -> str | None:
        """The step's one-line note when the overlap costs more than it hides; None otherwise. Names layout fields
        (``overlap_tp``, ``tp_overlap_config``), never a command's flag."""
        if not self.costs_more:
            return None
        t = format_time
        return (f"TP overlap costs more than it hides here: the step takes {t(self.step_s)} with overlap_tp=true, "
                f"{t(self.step_without_s)} without; it hides {t(self.tp_without_s - self.tp_s)} of TP (exposed "
                f"{t(self.tp_without_s)} -> {t(self.tp_s)}), but the SMs tp_overlap_config {self.tp_overlap_config} "
                f"takes from the TP GEMMs (its sm_margin buffers) slow them by more: compute "
                f"{t(self.compute_without_s)} -> {t(self.compute_s)}, pipeline bubble {t(self.bubble_without_s)} -> "
                f"{t(self.bubble_s)}")

    def to_dict(self) -> dict:
        """The fields (seconds as ``_s``) and ``costs_more``, as ``--json`` gives them."""
        return {**asdict(self), "costs_more": self.costs_more}


def tp_overlap_trade(fabric, model, lay, result, **step_options) -> TpOverlapTrade | None:
    """The step ``result`` (of ``lay``, with ``overlap_tp``) beside the same layout's step without ``overlap_tp``;
    None where no userbuffers run (:func:`.tp_overlap.userbuffers_on`: not asked for, no sequence parallelism,
    ``tp`` 1, a model built without them), so that nothing is priced twice there.

    Parameters
    ----------
    fabric, model, lay
        As :func:`.step.estimate_step` took them for ``result``.
    result : StepResult
        The step of ``lay``.
    **step_options
        The options ``result`` was estimated with (``convention``, ``efficiency``, ``contention``, ``engine``,
        ``profile``), so that the step without the overlap is priced alike.

    Returns
    -------
    TpOverlapTrade or None
    """
    if not userbuffers_on(lay, model):
        return None
    without = estimate_step(fabric, model, lay.model_copy(update={"overlap_tp": False}), **step_options)
    on, off = result.breakdown_s, without.breakdown_s
    return TpOverlapTrade(tp_overlap_config=lay.tp_overlap_config, step_s=result.step_time_s,
                          step_without_s=without.step_time_s, tp_s=on["tp"], tp_without_s=off["tp"],
                          compute_s=on["compute"], compute_without_s=off["compute"], bubble_s=on["bubble"],
                          bubble_without_s=off["bubble"])
