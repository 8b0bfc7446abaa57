"""The note a plan with a named job gives about hot spares: the whole servers the job leaves idle and how many of them
the failure model's rule holds as spares (``reliability.checkpoint.hot_spare_fraction``,
:func:`topo.plan.reliability.reliability`), or that it leaves none and each hardware failure waits for its repair.
One site's plan and a region's plan (every site's joined, :func:`topo.plan.reliability.joint_reliability`) word it
here alike. A job placed at fewer GPUs than each NVLink domain holds (64 of an NVL72 rack's 72) keeps its spares
inside its domains instead (:func:`domain_spare_note`, spares132); :func:`job_spare_note` picks the note, for one site
and a region alike (plan134)."""

from __future__ import annotations

from ..units import count_noun

__all__ = ["hot_spare_note", "domain_spare_note", "full_domain_note", "job_spare_note"]

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


def domain_spare_note(model: str, job_gpus: int, num_gpus: int, used: int, domain_gpus: int, rel,
                      servers: str) -> str:
    """What a job placed at ``used`` of each ``domain_gpus``-GPU NVLink domain keeps as hot spares: the whole servers
    its placement leaves idle inside its domains (:func:`topo.plan.reliability._domain_spares`), whether they cover
    the repairs expected in its fullest domain (each domain's spares serve only it: plan134; which domains bind when
    they do not), and the whole domains it leaves for a failure of a whole domain, which the plan does not price.
    One site's plan and a region's (its sites' joined) word it here.

    Parameters
    ----------
    model : str
        The job's model.
    job_gpus, num_gpus : int
        The job's GPUs and the plan's.
    used, domain_gpus : int
        GPUs the job uses of each NVLink domain, and a domain's.
    rel : Reliability
        The plan's (``hot_spares_of`` "domains"): its ``job_domains``, ``hot_spare_servers``,
        :attr:`~topo.plan.reliability.Reliability.spares_per_domain`, ``idle_domains``, ``spares_enough`` and
        ``servers_in_repair_per_domain``.
    servers : str
        What a server holds, after "whole servers" (e.g. "of 4 GPUs").

    Returns
    -------
    str
    """
    each, domains = rel.spares_per_domain, rel.job_domains
    leaves = (f"it leaves {count_noun(rel.idle_domains, 'whole domain')} idle, the spare racks a failure of a whole "
              "domain (its NVLink switch trays, power or cooling) re-places the job on" if rel.idle_domains else
              "it leaves no whole domain idle, so a failure of a whole domain (its NVLink switch trays, power or "
              "cooling) would wait for its repair")
    return (f"{model}'s job holds {job_gpus:,} of the {num_gpus:,} GPUs at {used} of each {domain_gpus}-GPU NVLink "
            f"domain ({count_noun(domains, 'domain')}): each domain's {count_noun(each, 'idle whole server')} "
            f"{servers} ({rel.hot_spare_servers:,} in all) are its hot spares for a GPU, NIC or host failure in that "
            "domain, the job re-placed on them (reliability.checkpoint.hot_spare_fraction does not apply: another "
            f"domain's server is off the job's NVLink){_binding(rel, used, job_gpus)}; {leaves}; {UNPRICED}")


def _binding(rel, used: int, job_gpus: int) -> str:
    """Which of the job's domains its spares fall short in, where they do: the full ones (``used`` of the job's GPUs
    each; a partial last domain holds fewer and keeps at least as many idle), each expecting more servers in repair
    at once than it has idle (plan134); "" where they cover it."""
    if rel.spares_enough:
        return ""
    full = job_gpus // used
    which = f"each of its {count_noun(full, 'full domain')}" if full else "its one domain"
    return (f"; too few: {which} ({min(used, job_gpus)} of the job's GPUs) expects "
            f"{rel.servers_in_repair_per_domain:.3g} servers in repair at once (the gpu, nic and host rates x those "
            f"GPUs x reliability.checkpoint.repair_s), more than its {rel.spares_per_domain}, so {WAIT}")


def full_domain_note(domain_gpus: int, job_domains: int, idle_domains: int) -> str:
    """What a job that fills its ``domain_gpus``-GPU NVLink domains (72 of an NVL72 rack's 72) keeps inside them:
    no idle server, so a failed server drops its domain below what the job uses and the job needs a whole idle
    domain; the fraction rule's count stands (spares132 Left 1, plan134)."""
    idle = (f"one of the {count_noun(idle_domains, 'whole domain')} it leaves idle" if idle_domains else
            "a whole idle domain, and it leaves none")
    return (f"; it fills each of its {count_noun(job_domains, 'NVLink domain')} ({domain_gpus} of {domain_gpus} "
            f"GPUs): no idle server inside them, so a failed server leaves its domain short and the job re-places "
            f"on {idle}; the count above is reliability.checkpoint.hot_spare_fraction's, kept")


def job_spare_note(model: str, job_gpus: int, num_gpus: int, rel, used: int | None, domain_gpus: int | None,
                   gpus_per_server: int, rule: str) -> str:
    """The hot-spare note of a named job, one site's or a region's (its sites' joined): inside its NVLink domains
    (:func:`domain_spare_note`) where its placement leaves idle servers there, else the fraction rule's
    (:func:`hot_spare_note`), with :func:`full_domain_note` where the placement fills multi-server domains.

    Parameters
    ----------
    model : str
    job_gpus, num_gpus : int
        The job's GPUs and the plan's.
    rel : Reliability
        The plan's.
    used, domain_gpus : int or None
        The job's GPUs of each NVLink domain and a domain's (None: not known).
    gpus_per_server : int
    rule : str
        How the fraction rule counted the spares (its key, its figures).

    Returns
    -------
    str
    """
    servers = f"of {gpus_per_server} GPUs"
    if rel.hot_spares_of == "domains":
        return domain_spare_note(model, job_gpus, num_gpus, used, domain_gpus, rel, servers)
    note = hot_spare_note(model, job_gpus, num_gpus, rel.free_servers, rel.hot_spare_servers, servers, rule)
    fills = used is not None and used == domain_gpus and domain_gpus > gpus_per_server and rel.job_domains
    return note + (full_domain_note(domain_gpus, rel.job_domains, rel.idle_domains) if fills else "")
