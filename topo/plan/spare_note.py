"""The note a plan with a named job gives about hot spares: the whole servers the job leaves idle and how many of them
the failure model's rule holds as spares (``reliability.checkpoint.hot_spare_fraction``,
:func:`topo.plan.reliability.reliability`), or that it leaves none and each hardware failure waits for its repair.
One site's plan and a region's plan (every site's joined, :func:`topo.plan.reliability.joint_reliability`) word it
here alike."""

from __future__ import annotations

from ..units import count_noun

__all__ = ["hot_spare_note"]

WAIT = "each hardware failure waits for its repair (reliability.checkpoint.repair_s, in the restart)"


def hot_spare_note(model: str, job_gpus: int, num_gpus: int, free: int | None, spares: int, servers: str,
                   rule: str) -> str:
    """What a job of ``job_gpus`` of the ``num_gpus`` GPUs leaves for hot spares.

    Parameters
    ----------
    model : str
        The job's model.
    job_gpus, num_gpus : int
        The job's GPUs and the plan's.
    free : int or None
        Whole servers the job leaves idle (0 or None: none).
    spares : int
        Those the failure model's rule holds as hot spares.
    servers : str
        What a server holds, after "whole servers" (e.g. "of 4 GPUs").
    rule : str
        How the rule counted the spares (its key, its figures).

    Returns
    -------
    str

    Examples
    --------
    >>> hot_spare_note("m", 256, 288, 8, 3, "of 4 GPUs", "r")
    "m's job holds 256 of the 288 GPUs and leaves 8 whole servers of 4 GPUs idle; the failure model's rule holds 3 \
of them as hot spares (r)"
    """
    holds = f"{model}'s job holds {job_gpus:,} of the {num_gpus:,} GPUs"
    if not free:
        return f"{holds}: no whole server is left as a hot spare, so {WAIT}; a job a few servers smaller keeps spares"
    tail = f", so {WAIT}" if spares == 0 else ""
    return (f"{holds} and leaves {count_noun(free, 'whole server')} {servers} idle; the failure model's rule holds "
            f"{spares:,} of them as hot spares ({rule}){tail}")
