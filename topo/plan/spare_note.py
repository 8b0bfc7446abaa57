"""The note a plan with a named job gives about hot spares: the whole servers the job leaves idle and how many of them
the failure model's rule holds as spares (``reliability.checkpoint.hot_spare_fraction``,
:func:`topo.plan.reliability.reliability`), or that it leaves none and each hardware failure waits for its repair.
One site's plan and a region's plan (every site's joined, :func:`topo.plan.reliability.joint_reliability`) word it
here alike. A job placed at fewer GPUs than each NVLink domain holds (64 of an NVL72 rack's 72) keeps its spares
inside its domains instead (:func:`domain_spare_note`, spares132)."""

from __future__ import annotations

from ..units import count_noun

__all__ = ["hot_spare_note", "domain_spare_note"]

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


# spares132: no rack-level cause in the failure table and no published rate for one (findings 467)
UNPRICED = ("not priced: the failure table (Llama 3's, on 8-GPU servers) has no rack-level cause and no rate for one is "
            "published")


def domain_spare_note(model: str, job_gpus: int, num_gpus: int, used: int, domain_gpus: int, job_domains: int,
                      spares: int, servers: str, idle_domains: int) -> str:
    """What a job placed at ``used`` of each ``domain_gpus``-GPU NVLink domain keeps as hot spares: the whole servers
    its placement leaves idle inside its domains (:func:`topo.plan.reliability._domain_spares`), and the whole
    domains it leaves for a failure of a whole domain, which the plan does not price.

    Parameters
    ----------
    model : str
        The job's model.
    job_gpus, num_gpus : int
        The job's GPUs and the plan's.
    used, domain_gpus : int
        GPUs the job uses of each NVLink domain, and a domain's.
    job_domains : int
        Domains the job's GPUs are in.
    spares : int
        Idle whole servers inside them, in all.
    servers : str
        What a server holds, after "whole servers" (e.g. "of 4 GPUs").
    idle_domains : int
        Whole domains the job leaves idle.

    Returns
    -------
    str

    Examples
    --------
    >>> domain_spare_note("m", 256, 288, 64, 72, 4, 8, "of 4 GPUs", 0)[:97]
    "m's job holds 256 of the 288 GPUs at 64 of each 72-GPU NVLink domain (4 domains): each domain's 2"
    """
    each = spares // job_domains
    leaves = (f"it leaves {count_noun(idle_domains, 'whole domain')} idle, the spare racks a failure of a whole domain "
              "(its NVLink switch trays, power or cooling) re-places the job on" if idle_domains else
              "it leaves no whole domain idle, so a failure of a whole domain (its NVLink switch trays, power or "
              "cooling) would wait for its repair")
    return (f"{model}'s job holds {job_gpus:,} of the {num_gpus:,} GPUs at {used} of each {domain_gpus}-GPU NVLink "
            f"domain ({count_noun(job_domains, 'domain')}): each domain's {count_noun(each, 'idle whole server')} "
            f"{servers} ({spares:,} in all) are its hot spares for a GPU, NIC or host failure in that domain, the job "
            "re-placed on them (reliability.checkpoint.hot_spare_fraction does not apply: another domain's server is "
            f"off the job's NVLink); {leaves}; {UNPRICED}")
