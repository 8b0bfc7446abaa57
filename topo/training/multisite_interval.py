"""The interval of a step across a region's sites: each part at its own model's stated error.

The step across the sites the data-parallel or the pipeline way is the slowest share's step on its own fabric plus
what the cross-site phase exposes (:class:`~topo.training.multisite.AcrossSites`: ``step_time_s = T_s + exposed_s``;
the pipeline's, its fill's and drain's crossings and the bandwidth time its compute does not hide). The two parts come
from two models, each with its own out-of-sample error:

    the share's step  T_s      the step model's out-of-family error of the job's group (step_uncertainty.toml,
                               :func:`topo.training.uncertainty.step_interval`: ``T_s / (1 + p90)`` to
                               ``T_s / (1 - p90)``); it was scored on one site's runs, so it bounds that part only
    the DCI's exposed time     a network estimate: topo's collective model's held-out error at the size of the
                               collective's call (collective_interval.toml, :func:`topo.engine.interval.time_range_s`;
                               the dp way's gradient bucket, the pp way's one rank's stage send, regions83:
                               ``exposed / (1 + e90)`` to ``exposed / (1 + e10)``), the one stated error of topo's
                               network times

    low  = T_s / (1 + p90) + exposed / (1 + e90)
    high = T_s / (1 - p90) + exposed / (1 + e10)

The ends are added end to end (both parts at their low end, both at their high), the wider reading: a slower share
also hides more of the cross-site phase behind its backward (the pipeline's behind its compute), so the high end is
an upper bound. The two bands are not of one coverage -- the step's holds nine in ten of the group's unseen runs, the collective's eight in ten of
the held-out sizes -- and the collective's was measured inside sites, not over a DCI span: said with the figures.
"""

from __future__ import annotations

from ..engine.interval import regime_of, time_range_s

__all__ = ["NO_INTERVAL_NOTE", "across_sites_interval"]

# tidy94: what a job across the sites the outer way says in the interval's place (findings 369 Left 2); regions83:
# the pp way has its band (one rank's stage send is its call)
NO_INTERVAL_NOTE = ("no interval on the step across the sites the {across} way (nor days at its ends): the band is "
                    "built for the data-parallel and pipeline ways, whose crossings are made of a gradient bucket and "
                    "of one rank's stage send, each at the collective model's error for its call size; the "
                    "{across} way's crossing (each replica's whole gradients every few inner steps) has no source for "
                    "how it is split into calls, so no call size to take that error at; the share's own step's "
                    "interval bounds one_site_step_s")


def across_sites_interval(share_uncertainty: dict, share_step_s: float, exposed_s: float,
                          call_bytes: float) -> dict:
    """The interval of a step across the sites (see the module doc), or ``{}`` where the share's step has none.

    Parameters
    ----------
    share_uncertainty : dict
        The slowest share's step's interval (:func:`topo.training.uncertainty.step_interval`: ``p90``).
    share_step_s : float
        That share's step on its own fabric, ``T_s``.
    exposed_s : float
        What the cross-site phase adds to it (:attr:`~topo.training.multisite.AcrossSites.exposed_s`).
    call_bytes : float
        The size of the cross-site collective's call, for its regime: the data-parallel gradient bucket, or (pp) one
        rank's send of a micro-batch's activations (:func:`~topo.training.multisite.pp_send_bytes`).

    Returns
    -------
    dict
        ``low_s``, ``high_s`` (the step across the sites at its ends), ``bounds`` ("step_time_s"), the parts'
        ends (``share_low_s``/``share_high_s``, ``dci_low_s``/``dci_high_s``), ``p90`` and the collective's
        ``regime`` with its ``error_p10_fraction`` / ``error_p90_fraction`` (the regime's error_p10 / error_p90).

    >>> d = across_sites_interval({"p90": 0.2}, 2.0, 0.5, 4e8)   # bandwidth regime: e10 -0.2627, e90 0.0637
    >>> round(d["low_s"], 4), round(d["high_s"], 4)   # 2 / 1.2 + 0.5 / 1.0637, 2 / 0.8 + 0.5 / 0.7373
    (2.1367, 3.1782)
    """
    if "p90" not in share_uncertainty:
        return {}
    p90 = float(share_uncertainty["p90"])
    share = (share_step_s / (1 + p90), share_step_s / (1 - p90) if p90 < 1 else float("inf"))
    dci = time_range_s(int(call_bytes), exposed_s)
    r = regime_of(int(call_bytes))
    return {"low_s": share[0] + dci[0], "high_s": share[1] + dci[1], "bounds": "step_time_s",
            "share_low_s": share[0], "share_high_s": share[1], "dci_low_s": dci[0], "dci_high_s": dci[1],
            "p90": p90, "regime": r.name, "error_p10_fraction": r.error_p10, "error_p90_fraction": r.error_p90,
            "call_bytes": int(call_bytes)}
