"""The step's note for a communication overlap asked for on a parallel dimension of size 1, which has nothing to
overlap: ``overlap_tp`` at ``tp`` 1 (walk43), ``overlap_pp`` at ``pp`` 1 (tidy121). The step prices both as
without the flag; the note says so, in one wording (:func:`idle_overlap_note`)."""

from __future__ import annotations

__all__ = ["idle_overlap_note", "pp_overlap_idle_note"]


def idle_overlap_note(part: str, dim: str, runs: str, source: str) -> str:
    """The one-line note of an overlap with nothing to overlap.

    Parameters
    ----------
    part : str
        The overlap's name (``TP``, ``PP``).
    dim : str
        The layout's dimension that is 1 (``tp``, ``pp``).
    runs : str
        What the dimension would communicate (``TP collectives``, ``pipeline sends``).
    source : str
        What the framework does with the flag there, cited.

    Returns
    -------
    str
    """
    return f"{part} overlap: no effect at {dim} 1, which runs no {runs} ({source})"


def pp_overlap_idle_note(lay) -> str | None:
    """The note when the layout holds ``overlap_pp`` at ``pp`` 1, else None. Megatron-LM turns ``overlap_p2p_comm``
    off without the interleaved schedule, which needs ``pp > 1`` (NVIDIA/Megatron-LM@d98e8a64
    ``megatron/training/arguments.py`` lines 1000-1018: at ``pp`` 1 without even its warning).

    Parameters
    ----------
    lay : ParallelLayout

    Returns
    -------
    str or None
    """
    if not (lay.overlap_pp and lay.pp == 1):
        return None
    return idle_overlap_note("PP", "pp", "pipeline sends",
                             "Megatron-LM turns overlap_p2p_comm off without the interleaved schedule, which needs "
                             "pp > 1: NVIDIA/Megatron-LM@d98e8a64 megatron/training/arguments.py lines 1000-1018")
