"""dp where a job gives none: the GPUs it fills over tp x cp x pp (one site's or each site's of a region), and the
error when that product does not divide them. Library words: the sizes by the layout's keys (``tp``, ``dp``, ``dp=N``);
a command names them by its own flags through the error's fields (:class:`UndividedGpus`), never by rewriting text.
Light on purpose (no step model): ``topo plan`` imports it at start-up (test_startup)."""

from __future__ import annotations

from .errors import TopoError

__all__ = ["UndividedGpus", "data_parallel", "placement_fields"]


class UndividedGpus(TopoError):
    """tp x cp x pp does not divide the GPUs dp was to fill (:func:`data_parallel`). It carries its fields,
    ``key`` (the size at fault, as the caller names it), ``size`` (that size; None for dp), ``known`` (tp x cp x pp),
    ``gpus``, ``where`` (words after "the N GPUs", e.g. a region's "of the smallest site ..."), ``sites``, ``dp_as``
    and ``dp_name`` (how the caller gives and names dp), and builds its one line from them once: a caller words it
    with its own names by :meth:`named`, never by rewriting the text."""

    def __init__(self, *, key: str, size: int | None, known: int, gpus: int, where: str = "",
                 dp_as: str = "dp=N", sites: int = 1, dp_name: str = "dp"):
        self.size, self.known, self.gpus, self.where, self.sites = size, known, gpus, where, sites
        them = f"the {gpus:,} GPUs" + (f" {where}" if where else "")
        # plan78 (walk34 Left 6): on a region N is the whole job's dp and "them" one site's GPUs, which run N / sites
        takes = ("the job then takes tp x cp x pp x N of them" if sites == 1 else
                 f"N a multiple of the {sites} sites; each site then takes tp x cp x pp x N / {sites} of them")
        allowed = f"allowed: tp, cp, pp whose product divides {gpus:,}, or {dp_as} ({takes})"
        if size is None:
            msg = f"not given, and tp x cp x pp = {known:,} does not divide {them}; {allowed}"
        else:
            msg = (f"{size:,} makes tp x cp x pp = {known:,}, which does not divide {them} ({dp_name} not given); "
                   f"{allowed}")
        super().__init__(msg, key=key)

    def named(self, names: dict, dp_as: str, dp_name: str, source=None) -> UndividedGpus:
        """The same refusal in a caller's words: ``names`` maps the layout's keys (``tp``, ``cp``, ``pp``, ``dp``) to
        its own (a flag; a key it lacks stays the layout's), ``dp_as`` / ``dp_name`` how it gives and names dp."""
        out = UndividedGpus(key=names.get(self.key, self.key), size=self.size, known=self.known, gpus=self.gpus,
                            where=self.where, dp_as=dp_as, sites=self.sites, dp_name=dp_name)
        out.source = source
        return out


def data_parallel(known: int, gpus: int, sizes: dict | None = None, where: str = "", dp_as: str = "dp=N",
                  sites: int = 1, dp_name: str = "dp") -> int:
    """dp when it is not given: the GPUs over tp x cp x pp, which must divide them.

    Parameters
    ----------
    known : int
        tp x cp x pp.
    gpus : int
        The GPUs to fill (a region's equal shares: one site's).
    sizes : dict, optional
        name -> size, the sizes an error may name: the first whose size does not divide the GPUs, else the last
        above 1 (only their product does not divide); with none, ``dp_name``.
    where, dp_as, dp_name : str
        Which GPUs (after "the N GPUs"), how dp is given instead and what dp is called (:class:`UndividedGpus`).
    sites : int
        The sites that each run ``gpus`` (the whole job's dp is then ``sites`` times the answer).

    Returns
    -------
    int

    Raises
    ------
    UndividedGpus
        ``known`` does not divide ``gpus``.

    >>> data_parallel(8, 64)
    8
    """
    if not gpus % known:
        return gpus // known
    given = {f: v for f, v in (sizes or {}).items() if v is not None and v > 1}
    odd = [f for f, v in given.items() if gpus % v]
    key = odd[0] if odd else (list(given)[-1] if given else dp_name)
    raise UndividedGpus(key=key, size=given.get(key), known=known, gpus=gpus, where=where, dp_as=dp_as,
                        sites=sites, dp_name=dp_name)


def placement_fields(placement: dict) -> dict:
    """A job's placement fields as given (``first_gpu``, ``skip_domains``, ``gpus_per_domain_used``: a flag's or a
    layout's, None or absent where not given) as the placement counts them: a value of the wrong kind as not given
    (the layout's own checks name it), so ``first_gpu`` 0, no skip, every GPU of each domain."""
    first, skip, used = (placement.get(k) for k in ("first_gpu", "skip_domains", "gpus_per_domain_used"))
    return {"first_gpu": first if _whole(first) else 0,
            "skip_domains": tuple(d for d in skip if _whole(d)) if isinstance(skip, (list, tuple)) else (),
            "gpus_per_domain_used": used if _whole(used) and used > 0 else None}


def _whole(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0
