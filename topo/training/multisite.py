r"""A training job across the sites of a region: how its step compares with the same job on one site.

The one-site baseline is :func:`topo.training.step.estimate_step` of one site's share of the job (the layout with
``dp / K`` and ``global_batch / K`` on one site's fabric): the same work per GPU, so its throughput per GPU is the
job's on one site large enough. Where the sites are unlike (other hardware, failed parts), each times the share on
its own fabric, and "one site" is the slowest share's step, :math:`\max_i T_i`: what the job steps at in lockstep
over a free DCI, so the ratio and the need for 95% weigh what the DCI costs alone, and do not move with it (reg70).
Across ``K`` sites, three ways (each the job's step, the same at every site, and ``throughput_vs_one_site`` =
the slowest share's step / this step):

- ``dp``: data parallelism across sites with the hierarchical reduction (NeMo / Megatron-Core's distributed
  optimizer instances, one per site: reduce-scatter inside, all-reduce of each GPU's shard across, all-gather
  inside). A site sends ``2(K-1)/K V`` over the DCI, ``V`` its GPUs' gradient shards together (one replica's
  gradients at the gradient-reduction dtype, the parameters' gather staying inside the site's instance), or, by
  NCCL's flat cross-DC ring, each of the one-site step's data-parallel collectives over every replica
  (:mod:`.dp_across`, the bytes :func:`replica_dp_bytes`); the cross-site phase is chunked by buckets and overlaps the last backward the way the in-site
  reduction does, in the window the in-site reduction leaves; the last bucket cannot hide.
- ``pp``: pipeline parallelism across sites (DP stays inside each site): ``K - 1`` stage boundaries cross the DCI,
  each carrying every pipeline's activations one way and their gradients back (interleaved stages also wrap from
  the last site to the first); the fill and the drain pay the crossing's latency once per virtual stage; the bytes
  stream behind the compute.
- ``outer``: a low-communication method (DiLoCo, outer synchronisation every ``H`` inner steps): the sites train
  alone; every ``H`` steps the same cross-site all-reduce, not overlapped, its time spread over ``H`` steps.

Each also gives the DCI capacity per span (per direction) the job needs to stay within 95% of one site: at that
capacity, the way's step is the slowest share's / 0.95.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import asdict, dataclass, field, replace

import numpy as np

from ..errors import TopoError
from ..engine.region_estimate import (PROFILE_PRICES, check_region_profile, dci_phase, dci_phase_options,
                                      region_channels, site_exchange_bytes, site_profile, small_all_reduce_dci_s)
from ..fabric.region_split import split_notes
from ..fabric.region import Region
from ..units import format_size, format_time, whole_bytes
from . import ACROSS_SITES
from .dp_across import (DP_REDUCTIONS, LOSS_BYTES, ReplicaBytes, dp_crossings, dp_ranks_per_node, fastest_dp_crossing,
                        hybrid_ring_shard, pick_dp_crossing)
from .fp8_amax import AMAX_GROUP, AMAX_PHASE, amax_group, amax_reductions
from .multisite_interval import NO_INTERVAL_NOTE, across_sites_interval
from .multisite_memory import job_memory, job_optimizer_s, sharding_text, state_layout
from .mapping import EXPERT_DP_GROUPS, default_placement, free_gpus, map_layout, refuse_failed_gpus
from .memory import busiest_stage, bf16_kept_params, stage_params
from .model import ModelSpec
from .parallel import (ParallelLayout, batch_allowed, check_batch, check_model_split, dp_bucket_params,
                       dp_overlapped)
from .result import StepResult
from .step import (behind_window_s, estimate_step, forward_gather_share, gather_bytes_per_param, not_fit_note,
                   stage_block_counts, step_breakdown, step_traffic)

__all__ = ["AcrossSites", "DEFAULT_SHARES", "MultisiteStep", "SHARES", "SiteReady", "check_shares", "site_shares",
           "shares_run", "site_capacities", "dp_window_s",
           "estimate_across_sites", "share_fabric",
           "site_failure", "pp_boundary_ranks", "pp_send_bytes", "replica_dp_bytes", "dp_gather_window_s", "dp_passes", "loss_fill_s",
           "flat_optimizer_saved_s", "over_job",
           "TARGET_FRACTION", "BACKWARD_SHARE", "SPAN_RULE"]

TARGET_FRACTION = 0.95
"""The share of one site's throughput the issue asks the DCI to keep (issue 31: "within 95% of one site")."""
BACKWARD_SHARE = 2.0 / 3.0
"""The backward's share of a micro-batch's compute (backward = 2 x forward, the 6N FLOP split)."""


@dataclass
class AcrossSites:
    strategy: str  # dp, pp, outer
    step_time_s: float
    throughput_vs_one_site: float
    dci_time_s: float  # the cross-site phases alone, per step (outer: per outer synchronisation; dp: with the FP8
    # amax reductions' crossings, :func:`_amax_across_s`)
    exposed_s: float  # what it adds to a step
    dci_bytes_per_step: float  # on the busiest span, per direction (outer: per inner step on average)
    dci_Bps_for_95pct: float  # the largest of dci_Bps_for_95pct_by_span (inf: latency or a GPU's NICs alone are
    # too much)
    bottleneck: str
    outer_every: int | None = None
    latency_s: float = 0.0  # the latency in the cross-site phase (pp: the fill's and the drain's)
    # per span (dci:A-B), per direction, for 95% of one site: each span sized for the bytes it carries
    # (:data:`SPAN_RULE`; one factor for all only where a border needs it), spans that carry nothing 0
    dci_Bps_for_95pct_by_span: dict[str, float] = field(default_factory=dict)
    dci_total_Bps_for_95pct: float = 0.0  # their sum, per direction
    # the end this site's own share gives the way's step across the sites (dp: its step and in-site reduction,
    # :func:`_dp`); the latest paces. Not in ``--json`` (the pacing site's is ``step_time_s``)
    own_end_s: float = 0.0


@dataclass
class MultisiteStep:
    region: str
    model: str
    num_sites: int
    gpus: int
    one_site_step_s: float
    one_site: dict
    strategies: list[AcrossSites] = field(default_factory=list)
    chosen: str = "dp"
    throughput_vs_one_site: float = 0.0
    assumptions: list[str] = field(default_factory=list)
    timeline: list[dict] = field(default_factory=list)  # one stage, one step of the chosen way: one site's, + dci
    notes: list[str] = field(default_factory=list)  # the share's step notes (does not fit, ...), then split_notes
    uncertainty: dict = field(default_factory=dict)  # the share's step's interval (bounds: "one_site_step_s")
    # plan80: the step across the sites' interval (bounds: "step_time_s"), the share's part at the step model's error
    # and the DCI's exposed part at the collective model's (:func:`.multisite_interval.across_sites_interval`); the
    # data-parallel way only ({} otherwise, or where the share's step has none)
    step_interval: dict = field(default_factory=dict)
    tokens_per_step: int = 0  # the whole job's: every site's share of the global batch x the sequence
    fits: bool = True  # the slowest site's share fits in GPU memory
    # regfail65: the sites step in lockstep, each share on its own fabric (its own failed parts); the site whose own
    # end of the chosen way is the latest paces it (the first site among equals). The one-site figures above are the
    # slowest share's (:attr:`slowest_site`, the reference of ``throughput_vs_one_site``; reg70)
    pacing_site: str = ""
    site_step_s: dict[str, float] = field(default_factory=dict)  # each site's share's step on its own fabric
    profile_prices: str = PROFILE_PRICES  # which collectives ``one_site["profile"]`` priced (not the DCI's)
    site_profile: dict[str, str] = field(default_factory=dict)  # the profile each site's share priced with (reg70)
    # regshare71: each site's replicas and the GPUs they use (by-size shares: in proportion to the site's GPUs), the
    # region's GPUs that run none of the job, and how the replicas were split (:data:`SHARES`)
    site_dp: dict[str, int] = field(default_factory=dict)
    site_gpus: dict[str, int] = field(default_factory=dict)
    # plan134: each site's share's placement, the GPUs it uses of each NVLink domain (its step's placed layout's
    # gpus_per_domain_used: 64 of an NVL72 rack's 72), as one site's plan reads its job's (topo.plan.train_time)
    site_gpus_per_domain_used: dict[str, int | None] = field(default_factory=dict)
    idle_gpus: int = 0
    shares: str = "equal"
    # regions76: the memory per GPU as the way chosen shards the ZeRO state (the flat cross-DC ring: over the job's
    # data-parallel ranks; else one site's, as ``one_site["memory"]``), and what it shards over and why
    memory: dict = field(default_factory=dict)
    memory_sharding: str = ""
    # regions81: the form the dp way's gradients cross by (hierarchical, flat_ring) and whether nccl.dp_reduction =
    # auto took it, the slower, because the job does not fit in GPU memory in the faster
    dp_reduction: str = ""
    dp_reduction_by_memory: bool = False

    @property
    def slowest_site(self) -> str:
        """The site whose share steps slowest on its own fabric (the first among equals): ``one_site_step_s`` is
        its, the reference of ``throughput_vs_one_site`` and of the DCI for 95%."""
        return max(self.site_step_s, key=self.site_step_s.get) if self.site_step_s else ""

    @property
    def step_time_s(self) -> float:
        """The step across the sites the chosen way (``outer``: per inner step on average)."""
        return next(s.step_time_s for s in self.strategies if s.strategy == self.chosen)

    def mfu(self, s: AcrossSites) -> float:
        """The job's MFU across the sites the way ``s`` spans them: the same model FLOP per GPU as one site's share
        in ``s``'s step, so one site's MFU x ``throughput_vs_one_site`` (walk29: only one site's was printed).

        Parameters
        ----------
        s : AcrossSites
            One of :attr:`strategies`.

        Returns
        -------
        float
            Model FLOPs over the GPUs' peak, 0 to 1 (``outer``: per inner step on average).
        """
        return self.one_site["mfu"] * s.throughput_vs_one_site

    def time_to_train_s(self, tokens: float) -> float:
        """Seconds to train ``tokens`` tokens at the chosen step across the sites (no failures or restarts), as
        :meth:`topo.training.result.StepResult.time_to_train_s` on one site."""
        return tokens / (self.tokens_per_step / self.step_time_s)

    def gpu_hours_to_train(self, tokens: float) -> float:
        """The job's GPU-hours to train ``tokens`` tokens: every site's GPUs x :meth:`time_to_train_s` (walk24: the
        region's line gave the days alone, one site's gives both)."""
        return self.gpus * self.time_to_train_s(tokens) / 3600.0

    def to_dict(self, train_tokens: float | None = None) -> dict:
        """Plain JSON-ready dict (``topo train REGION --json``); with ``train_tokens``, its time to train."""
        d = whole_bytes(asdict(self))
        d["strategies"] = [{**{k: v for k, v in whole_bytes(s).items() if k != "own_end_s"}, "mfu": self.mfu(a)}
                           for s, a in zip(d["strategies"], self.strategies)]
        if train_tokens:
            d["train_tokens"] = train_tokens
            d["time_to_train_s"] = self.time_to_train_s(train_tokens)
            d["gpu_hours_to_train"] = self.gpu_hours_to_train(train_tokens)
        return d


SHARES = ("by-size", "equal")
"""How a region's job splits its replicas over the sites (:func:`site_shares`); the CLI's ``--shares``."""
DEFAULT_SHARES = "by-size"
"""The split when none is given: ``topo train REGION``'s ``--shares`` and a sweep's region point (tidy72)."""


def check_shares(shares) -> str:
    """``shares`` if it is one of :data:`SHARES` (the one check of ``--shares`` and a sweep's ``shares`` axis).

    Parameters
    ----------
    shares : object
        The split asked for.

    Returns
    -------
    str
        ``shares``.

    Raises
    ------
    TopoError
        Naming the key ``shares``, the value and the splits allowed.
    """
    if shares not in SHARES:
        raise TopoError(f"unknown split of the replicas over the sites {shares!r}; allowed: {', '.join(SHARES)}",
                        key="shares")
    return shares


def estimate_across_sites(region: Region, model: ModelSpec, lay: ParallelLayout, *, across: str = "dp",
                          outer_every: int | None = None, one_site: tuple[StepResult, ...] | None = None,
                          shares: str = DEFAULT_SHARES, **step_options) -> MultisiteStep:
    """One training step of ``model`` laid out as ``lay`` (the whole job) across the sites of ``region``.

    Each site runs its share of the job's replicas (:func:`site_shares`: by default in proportion to its GPUs, the
    same layout per replica and the same micro-batches, so the global batch splits as the replicas do), in
    lockstep (each step's reduction or pipeline send across the sites waits for every site), so each distinct site
    fabric and share (:meth:`~topo.fabric.region.Region.site_groups`: alike healthy sites once, a site with failed
    parts on its own) times its share with its own failures, and the site whose own end of the chosen way is the
    latest paces it (``pacing_site``; each site's share in ``site_step_s``, its replicas in ``site_dp``). Each way's
    row is the job's step, the same at every site; its ``throughput_vs_one_site`` and DCI for 95% are against the
    slowest share's step (``one_site_step_s``, :attr:`MultisiteStep.slowest_site`'s).

    Parameters
    ----------
    region : Region
    model : ModelSpec
    lay : ParallelLayout
        The whole job's layout (``dp`` every site's replicas together).
    across : str
        Which way the chosen figure spans the sites: ``dp``, ``pp`` or ``outer`` (needs ``outer_every``).
    outer_every : int, optional
        Inner steps between outer synchronisations (adds the ``outer`` strategy).
    one_site : tuple of StepResult, optional
        The share's step already estimated (a search has them), reused: on each site group's fabric, in
        :meth:`~topo.fabric.region.Region.site_groups`' order (equal shares), or on each site, in site order (``K``
        of them: each site's own share, any ``shares``; regsearch72).
    shares : str
        ``by-size`` (each site's replicas in proportion to its GPUs, :func:`site_shares`) or ``equal`` (every
        site the same share, ``dp`` and ``global_batch`` divided by the sites). Pipeline stages across the sites
        (``pp``) pair the sites' replicas one to one: equal shares whatever is asked.
    **step_options
        Passed to :func:`topo.training.step.estimate_step` (``convention``, ``efficiency``, ``contention``,
        ``profile``: each site's, else each site's ``profile`` key; a calibrated file must be of one site's
        network, :func:`~topo.engine.region_estimate.check_region_profile`; it prices no DCI phase).

    Returns
    -------
    MultisiteStep
    """
    K = region.num_sites
    shares = shares_run(region, shares, across, one_site)
    _check_job(model, lay, K, across, shares)
    check_region_profile(region, step_options.get("profile"))
    dps = site_shares(region, lay, shares)
    lays = [lay.model_copy(update={"dp": d, "global_batch": lay.global_batch * d // lay.dp}) for d in dps]
    _check_shard_shares(region, lay, lays)
    _check_fit(region, lays)
    ones = _share_steps(region, model, dps, lays, one_site, step_options)
    ready = _site_ready(ones, model, sum(dps))
    channels = region_channels(region, step_options.get("profile"))
    fits = form_fits(model, ones, sum(dps))
    runs = [(sites, _across_from(region, f, model, lay, sl, one, across, outer_every, ready, dps, channels, fits))
            for f, sites, sl, one in ones]
    # reg70: every way's row is the job's, the same from every site; the figures of one site are the slowest
    # share's (the first among equals), and the site whose own end of the chosen way is the latest paces the step
    out = max(runs, key=lambda r: r[1].one_site_step_s)[1]
    sites, _ = max(runs, key=lambda r: _chosen(r[1]).own_end_s)
    out.pacing_site = region.site_names[sites[0]]
    _site_maps(out, region, runs, ones)
    out.tokens_per_step = sum(one.tokens_per_step * len(group) for _, group, _, one in ones)
    out.shares = shares
    if len(runs) > 1:
        out.notes.append(_lockstep_note(region, out))
    return out


def _site_ready(ones: list[tuple], model: ModelSpec, job_dp: int) -> SiteReady:
    """Each site group's step end, in-site reduction window, compute, forward gather window (regdp67: every
    site's share ends its step and its in-site reduction at its own time) and what the flat ring's optimizer step
    saves it (the state over the job's ``job_dp`` replicas, :func:`flat_optimizer_saved_s`) and its optimizer step."""
    return SiteReady(tuple(one.step_time_s for *_, one in ones),
                     tuple(dp_window_s(one, sl) for _, _, sl, one in ones),
                     tuple(one.breakdown_s["compute"] for *_, one in ones),
                     tuple(dp_gather_window_s(one, sl) for _, _, sl, one in ones),
                     tuple(flat_optimizer_saved_s(model, sl, one, job_dp) for _, _, sl, one in ones),
                     tuple(one.breakdown_s["optimizer"] for *_, one in ones))


def form_fits(model: ModelSpec, ones: list[tuple], job_dp: int) -> dict[str, bool]:
    """Whether every site's share fits in GPU memory in each form of the ``dp`` way (regions81): the hierarchical
    form with its ZeRO state over its site's replicas (the share's own step's memory), NCCL's flat cross-DC ring
    with it over the job's ``job_dp`` (:func:`.multisite_memory.job_memory`, as :func:`_share_memory` says it).

    Parameters
    ----------
    model : ModelSpec
    ones : list of tuple
        ``(fabric, sites, the share's layout, its step)`` once per distinct site fabric and share.
    job_dp : int
        Every site's replicas.

    Returns
    -------
    dict of str to bool
    """
    flat = True
    for f, _, sl, one in ones:
        placed, _ = default_placement(sl, f.spec.gpus_per_domain, f.layout.num_gpus)
        flat = flat and job_memory(f, model, state_layout(placed, job_dp), one.memory).fits
    own = all(one.memory.fits for *_, one in ones)
    return {n: flat if over_job(n, ones[0][2]) else own for n in DP_REDUCTIONS}


def over_job(form: str, lay: ParallelLayout) -> bool:
    """Whether a job across the sites the ``dp`` way in ``form`` (a :data:`.dp_across.DP_REDUCTIONS` name) shards its
    optimizer over every site's replicas, its step and memory then the job's (:func:`flat_optimizer_saved_s`,
    :func:`.multisite_memory.job_memory`): NCCL's flat cross-DC ring (one optimizer instance over the job), and either
    form under Megatron-FSDP's optimizer-sharded outer group (``lay.dp_outer_sharding`` ``optim``: the optimizer
    state over every data-parallel rank whatever the instances, NVIDIA/Megatron-LM@d98e8a64ddf34856e74b24714e3bedb2f5a39553
    megatron/core/distributed/fsdp/src/megatron_fsdp/param_and_grad_buffer.py lines 2423-2425; regions83).

    Parameters
    ----------
    form : str
    lay : ParallelLayout
        The job's or a share's (its ``dp_outer_sharding``).

    Returns
    -------
    bool
    """
    return form == "flat_ring" or lay.dp_outer_sharding == "optim"


def flat_optimizer_saved_s(model: ModelSpec, share: ParallelLayout, one: StepResult, job_dp: int) -> float:
    """What NCCL's flat cross-DC ring saves a share's step ``one``: its one optimizer instance over the job's
    ``job_dp`` replicas steps a shard that many replicas' share of the state, not the site's
    (:func:`.multisite_memory.job_optimizer_s`), so the share's ``optimizer`` line less that.

    Parameters
    ----------
    model : ModelSpec
    share : ParallelLayout
        The site's share.
    one : StepResult
        The share's step.
    job_dp : int
        Every site's replicas.

    Returns
    -------
    float
    """
    opt = one.breakdown_s["optimizer"]
    return opt - job_optimizer_s(model, share, opt, job_dp)


def _site_maps(out: MultisiteStep, region: Region, runs: list[tuple], ones: list[tuple]) -> None:
    """Fill ``out``'s per-site step, profile and placement, in the region's site order."""
    step = {region.site_names[i]: r.one_site_step_s for group, r in runs for i in group}
    out.site_step_s = {n: step[n] for n in region.site_names}
    profile = {region.site_names[i]: one.profile for _, group, _, one in ones for i in group}
    out.site_profile = {n: profile[n] for n in region.site_names}
    placed = {region.site_names[i]: one.layout.get("gpus_per_domain_used") for _, group, _, one in ones for i in group}
    out.site_gpus_per_domain_used = {n: placed[n] for n in region.site_names}


def _share_steps(region: Region, model: ModelSpec, dps, lays, one_site, step_options: dict) -> list[tuple]:
    """``(fabric, sites, the share's layout, its step)`` once per distinct site fabric and share (``one_site``: a
    search's steps per group, reused)."""
    ones = []
    for g, (f, group) in enumerate(region.site_groups()):
        for d in dict.fromkeys(dps[i] for i in group):
            sites = tuple(i for i in group if dps[i] == d)
            if one_site is not None:  # per site (K of them) or per group
                ones.append((f, sites, lays[sites[0]], one_site[sites[0] if len(one_site) == len(dps) else g]))
                continue
            mine = site_profile(region, step_options.get("profile"), sites[0])  # reg70: a site's key, none given
            try:
                ones.append((f, sites, lays[sites[0]],
                             estimate_step(f, model, lays[sites[0]], **{**step_options, "profile": mine})))
            except TopoError as exc:
                raise site_failure(region, f, exc) from None
    return ones


def shares_run(region: Region, shares: str, across: str, one_site) -> str:
    """The split run: ``equal`` for ``pp`` across the sites, a search's steps per site group (``one_site`` not one
    per site), or sites all of one size; else ``shares``.

    Parameters
    ----------
    region : Region
    shares : str
        The split asked, one of :data:`SHARES`.
    across : str
        The way across the sites (``dp``, ``pp``, ``outer``).
    one_site : tuple of StepResult or None
        As :func:`estimate_across_sites` takes it.

    Returns
    -------
    str
        One of :data:`SHARES`.

    Raises
    ------
    TopoError
        ``shares`` not one of :data:`SHARES`.
    """
    check_shares(shares)
    alike = len({f.num_gpus for f in region.fabrics}) == 1  # by size: equal shares, checked as such
    grouped = one_site is not None and len(one_site) != region.num_sites
    return "equal" if across == "pp" or grouped or alike else shares


def site_shares(region: Region, lay: ParallelLayout, shares: str = DEFAULT_SHARES) -> tuple[int, ...]:
    """Each site's data-parallel replicas of the whole job's ``lay.dp``, in site order.

    ``equal``: ``dp / K`` each. ``by-size``: in proportion to the GPUs each site's placement holds
    (:func:`site_capacities`: skip72, past the job's skipped NVLink domains from its first GPU; largest remainders
    first, the first site among equals), each at least 1 and at most the replicas those GPUs hold (share72: a
    remainder that would put a site one replica over is given to the next site with room, most room first); sites
    all of one size split equally, as ``equal`` does. A job larger than the region's sites hold is split uncapped
    (the share over its site is refused by the site's check or its placement's). Each replica keeps the layout and
    the micro-batches, so site ``i`` runs ``global_batch x dp_i / dp`` sequences.

    Parameters
    ----------
    region : Region
    lay : ParallelLayout
        The whole job's layout.
    shares : str
        One of :data:`SHARES`.

    Returns
    -------
    tuple of int
        ``dp_i``, summing to ``lay.dp``.
    """
    K = region.num_sites
    if shares == "equal" or len({f.num_gpus for f in region.fabrics}) == 1:
        return (lay.dp // K,) * K
    sizes = site_capacities(region, lay.first_gpu, lay.skip_domains, lay.gpus_per_domain_used)
    caps = [n // (lay.gpus // lay.dp) for n in sizes]
    caps = caps if sum(caps) >= lay.dp else [lay.dp] * K  # too large for the region: _check_fit names a site
    exact = [lay.dp * n / sum(sizes) for n in sizes]
    dps = [max(1, min(int(x), c)) for x, c in zip(exact, caps)]
    for i in sorted(range(K), key=lambda i: (-(exact[i] - int(exact[i])), i)):
        if sum(dps) < lay.dp and dps[i] < caps[i]:
            dps[i] += 1
    while sum(dps) < lay.dp:  # a capped site's remainder: to the site with the most room
        dps[max(range(K), key=lambda i: caps[i] - dps[i])] += 1
    while sum(dps) > lay.dp:  # the floor of 1 took more than the job has: from the largest
        dps[max(range(K), key=lambda i: dps[i])] -= 1
    return tuple(dps)


def site_capacities(region: Region, first_gpu: int = 0, skip_domains=(),
                    gpus_per_domain_used: int | None = None) -> tuple[int, ...]:
    """The GPUs the job's placement holds on each site, in site order: every GPU from ``first_gpu`` past the NVLink
    domains ``skip_domains`` lists (indices within a site), at ``gpus_per_domain_used`` of each where the layout
    names it (:func:`~topo.training.mapping.free_gpus`, the one count of what a placement holds; skip72: the
    by-size split counted each site's whole fabric, so a skip gave the smaller site more than it held).

    Parameters
    ----------
    region : Region
    first_gpu : int
        The job's first GPU on each site.
    skip_domains : iterable of int
        The NVLink domains the job passes over on each site.
    gpus_per_domain_used : int, optional
        The layout's GPUs of each domain (None: every GPU of each, as the default placement takes them when needed).

    Returns
    -------
    tuple of int
    """
    return tuple(free_gpus(f.layout.num_gpus, f.spec.gpus_per_domain, first_gpu, tuple(skip_domains),
                           gpus_per_domain_used) for f in region.fabrics)


def _check_placed(region: Region, i: int, sl: ParallelLayout) -> None:
    """Refuse site ``i``'s share where its placement (past skipped domains, from its first GPU) runs past the
    site's last GPU: the placement's own line (:func:`~topo.training.mapping.map_layout`, its key, so the CLI names
    the flag that sized the job), the site, its share and the replicas its placement holds named first (tidy72:
    skip72's Left 1, the same line said no site)."""
    f = region.fabrics[i]
    held = site_capacities(region, sl.first_gpu, sl.skip_domains, sl.gpus_per_domain_used)[i]
    if sl.gpus <= held:
        return
    placed, _ = default_placement(sl, f.spec.gpus_per_domain, f.layout.num_gpus)
    try:
        map_layout(placed, f.spec.gpus_per_domain, f.layout.num_gpus)
    except TopoError as exc:
        if exc.key != "gpus" or not exc.message.startswith("the job needs"):
            raise
        share = f"its share of the job ({sl.dp:,} replicas; its placement holds {held // (sl.gpus // sl.dp):,})"
        raise TopoError(f"site {region.site_names[i]}: {share}{exc.message.removeprefix('the job')}",
                        source=exc.source, key=exc.key) from None


def _check_fit(region: Region, lays: list[ParallelLayout]) -> None:
    """Refuse a share larger than its site, or placed on a failed GPU or NVLink switch of its site (the site named,
    :func:`site_failure`)."""
    for i, (f, sl) in enumerate(zip(region.fabrics, lays)):
        if sl.dp < 1:
            raise TopoError(f"{region.site_names[i]} gets no replica of the job's dp {sum(x.dp for x in lays):,}; "
                            f"allowed: at least {region.num_sites} (one a site)", key="dp")
        if sl.gpus > f.num_gpus:
            raise TopoError(f"{region.site_names[i]}'s share of the job ({sl.dp:,} replicas) needs {sl.gpus:,} GPUs; "
                            f"the site has {f.num_gpus:,}", key="dp")
        _check_placed(region, i, sl)
        _refuse_site_failures(region, f, sl)


def _chosen(m: MultisiteStep) -> AcrossSites:
    """The way across the sites ``m`` chose."""
    return next(s for s in m.strategies if s.strategy == m.chosen)


def _sizes_note(region: Region, out: MultisiteStep, dps: tuple[int, ...]) -> list[str]:
    """The line that says how sites of different sizes share the job and which GPUs run none of it (empty when
    the sites are alike)."""
    sizes = sorted({f.num_gpus for f in region.fabrics})
    if len(sizes) == 1:
        return []
    # walk29: a larger site's idle GPUs went unsaid; regshare71: its replicas by its size
    how = ("every site runs the same share of the job" if len(set(dps)) == 1 else
           f"each site runs replicas of the job in proportion to its GPUs ({_dp_text(out)})")
    said = ", ".join(f"{n} {f.num_gpus - out.site_gpus[n]:,}" for n, f in zip(region.site_names, region.fabrics)
                     if f.num_gpus > out.site_gpus[n])
    idle = f"; {out.idle_gpus:,} of the region's {region.num_gpus:,} GPUs run no part of it ({said})" if said \
        else f"; all {region.num_gpus:,} GPUs of the region run it"
    return [f"sites of different sizes ({', '.join(f'{n:,}' for n in sizes)} GPUs): {how}, each timed on its own "
            f"fabric; the slowest paces the step{idle}"]


def _pp_and_outer(out: MultisiteStep, region: Region, one: StepResult, placed: ParallelLayout, model: ModelSpec,
                  ready: SiteReady, lay: ParallelLayout, dps: tuple[int, ...], across: str, outer_every: int | None,
                  V, nic_gpus: tuple[int, ...]) -> None:
    """Add the pipeline-across-sites and outer-synchronisation ways to ``out`` where they apply, saying why where
    they do not; refuse the one ``across`` names when it cannot run."""
    K = region.num_sites
    T1 = one.step_time_s
    if len(set(dps)) > 1:  # a pipeline's stages pair the sites' replicas one to one
        out.assumptions.append(f"pp across sites: not timed, the sites run unequal shares ({_dp_text(out)}); "
                               f"pipeline stages across the sites pair each site's replicas one to one, so every "
                               f"site runs the same share (shares equal)")
    elif lay.pp >= K and lay.pp % K == 0:
        out.strategies.append(_pp(region, one, placed, model, ready))
        out.assumptions.append(_PP_ACROSS)
    elif across == "pp":
        raise TopoError(f"pipeline stages across {K} sites need pp a multiple of {K}, got {lay.pp}", key="pp")
    else:  # said, not silently left out of the table (walk9)
        out.assumptions.append(f"pp across sites: not timed, pp {lay.pp} is not a multiple of the {K} sites")
    if outer_every:
        out.strategies.append(_outer(region, T1, V.gradient_bytes, outer_every, ready.slowest_s, nic_gpus))
    elif across == "outer":
        raise TopoError("the outer synchronisation needs its period, outer_every (inner steps between outer "
                        "synchronisations)",
                        key="outer_every")


def _across_from(region: Region, fabric, model: ModelSpec, lay: ParallelLayout, site_lay: ParallelLayout,
                 one: StepResult, across: str, outer_every: int | None,
                 ready: SiteReady | None = None, dps: tuple[int, ...] | None = None,
                 channels: int | None = None, fits: dict[str, bool] | None = None) -> MultisiteStep:
    """The job's step across the sites seen from the site whose share steps as ``one`` on ``fabric``: the one-site
    figures its, each way's row the job's (``own_end_s`` its); ``ready``: every site's step, in-site reduction end
    and compute (:class:`SiteReady`; None: every site's are ``one``'s); ``dps``: each site's replicas (None:
    ``site_lay``'s at every site); ``channels``: NCCL's, the amax tree's crossing NICs (None:
    :func:`~topo.engine.region_estimate.region_channels` of the sites' own profiles); ``fits``: whether the job fits in
    GPU memory in each form of the ``dp`` way (:func:`form_fits`; None: not asked)."""
    K = region.num_sites
    T1 = one.step_time_s
    dps = dps or (site_lay.dp,) * K
    ready = ready or SiteReady((T1,), (dp_window_s(one, site_lay),), (one.breakdown_s["compute"],))
    replica = site_lay.gpus // site_lay.dp
    out = MultisiteStep(region=region.name, model=model.name, num_sites=K, gpus=replica * sum(dps),
                        one_site_step_s=T1, one_site=one.to_dict(), assumptions=_assumptions(region, dps),
                        tokens_per_step=one.tokens_per_step * K,
                        site_dp=dict(zip(region.site_names, dps)),
                        site_gpus={n: replica * d for n, d in zip(region.site_names, dps)})
    out.idle_gpus = region.num_gpus - out.gpus
    out.assumptions += _sizes_note(region, out, dps)
    placed, _ = default_placement(site_lay, fabric.spec.gpus_per_domain, fabric.layout.num_gpus)
    # one replica's gradients, from the job's reduction (dp x K): a site holding a single replica (or a single
    # expert replica) reduces nothing inside, and its gradients still cross (walk9: 0 B crossed at dp = K)
    V = replica_dp_bytes(model, placed.model_copy(update={"dp": placed.dp * K,
                                                           "global_batch": placed.global_batch * K}))
    nic_gpus = tuple(replica * d for d in dps)  # share72: a share's bytes cross its own GPUs' NICs (site order)
    amax_s, amax_calls = _amax_across_s(region, model, placed, channels or region_channels(region), nic_gpus)
    crowd = dp_ranks_per_node(map_layout(placed, fabric.spec.gpus_per_domain, fabric.layout.num_gpus).groups("dp"),
                              fabric.layout.gpus_per_server)  # regpp73 Left 1: the flat ring assumes one a node
    shard = hybrid_ring_shard(lay)  # regions75: hybrid sharding's ring is its replicate group's
    forms = dp_crossings(region, V, sum(nic_gpus) * site_lay.dp // site_lay.gpus // shard,
                         site_lay.gpus // site_lay.dp * shard, channels or region_channels(region), nic_gpus,
                         crowd, dp_passes(site_lay))  # both forms, worked out once (rev74); regions81: FSDP's a pass
    loss_s = small_all_reduce_dci_s(region, LOSS_BYTES, channels or region_channels(region), nic_gpus)
    saved = flat_optimizer_saved_s(model, site_lay, one, sum(dps))
    forms = {n: replace(c, fits=fits[n] if fits else None,  # regions82: auto compares the job's steps
                        step_s=dp_form_ends_s(c, one, site_lay, V, _dp_ready(one, site_lay, ready, saved), amax_s,
                                              loss_s, saved)[0]) for n, c in forms.items()}
    out.strategies.append(_dp(region, one, site_lay, V, forms, amax_s, ready, nic_gpus, loss_s, saved))
    out.assumptions.append(_dp_form_note(region, V, forms, crowd))
    out.assumptions.append(_loss_note(loss_s, site_lay, one))
    out.assumptions += _amax_note(out.strategies[-1], amax_s, amax_calls, ready.slowest_s)
    _pp_and_outer(out, region, one, placed, model, ready, lay, dps, across, outer_every, V, nic_gpus)
    pick = next(s for s in out.strategies if s.strategy == across)
    out.chosen, out.throughput_vs_one_site = across, pick.throughput_vs_one_site
    out.timeline = step_with_dci(one.timeline, T1, pick)
    if one.uncertainty:  # walk16: the interval one site prints, said of the step it bounds
        out.uncertainty = {**one.uncertainty, "bounds": "one_site_step_s"}
    if pick.strategy in ("dp", "pp"):  # the cross-site call: a gradient bucket (Megatron-Core's dp_bucket_params), or
        # regions83: one rank's send of a micro-batch's activations to the next stage
        call = (dp_bucket_params(site_lay) * site_lay.reduce_bytes if pick.strategy == "dp"
                else pp_send_bytes(model, placed))
        out.step_interval = across_sites_interval(one.uncertainty, pick.step_time_s - pick.exposed_s,
                                                  pick.exposed_s, call)
    elif one.uncertainty:  # tidy94: said, not left to a missing field (findings 369 Left 2)
        out.assumptions.append(NO_INTERVAL_NOTE.format(across=pick.strategy))
    taken = _share_as_taken(one, _share_memory(out, region, fabric, model, placed, one, forms, across, sum(dps)))
    out.one_site = taken.to_dict()
    out.notes = [f"one site's share: {n}" for n in taken.notes] + split_notes(region) + _form_by_memory(out, region,
                                                                                                          forms)
    return out


def _share_as_taken(one: StepResult, mem) -> StepResult:
    """The share's step ``one`` with the memory per GPU ``mem`` of the form its job takes (:func:`_share_memory`,
    the one memory a region's job reports: regions82, the flat ring's job fitting at 78.6 GB was said "does not
    fit: 150.9 GB", its share's own), its does-not-fit note that memory's (:func:`.step.not_fit_note`) whether or
    not the share's own step fit (tidy89), none where it fits; in the share's own note's place, else first."""
    own, taken = not_fit_note(one.memory, one.gpu), not_fit_note(mem, one.gpu)
    notes = list(one.notes)
    at = notes.index(own) if own and own in notes else 0
    if own and own in notes:
        del notes[at]
    if taken:
        notes.insert(at, taken)
    return replace(one, memory=mem, notes=notes)


def _share_memory(out: MultisiteStep, region: Region, fabric, model: ModelSpec, placed: ParallelLayout,
                  one: StepResult, forms: dict, across: str, job_dp: int):
    """``out``'s memory per GPU, what its ZeRO state shards over, and whether it fits, as the way chosen runs
    (:mod:`.multisite_memory`): NCCL's flat cross-DC ring shards over the job's ``job_dp`` replicas (one optimizer
    instance over every site); pipeline stages across the sites over the job's too (each stage's ``job_dp`` replicas
    sit in one site: :func:`pp_boundary_ranks`); the hierarchical reduction and an outer synchronisation over one
    site's, as the share's step ``one`` did. Returns that memory (a
    :class:`~topo.training.memory.MemoryBreakdown`)."""
    flat = across == "dp" and over_job(pick_dp_crossing(region, forms).name, placed)
    if flat or across == "pp":  # pp: each stage's job_dp replicas sit in one site, one optimizer instance (walk39)
        placed = state_layout(placed, job_dp)
        mem = job_memory(fabric, model, placed, one.memory)
    else:
        mem = one.memory
    where = ("the optimizer over every site's replicas: Megatron-FSDP's optimizer-sharded outer group"
             if flat and placed.dp_outer_sharding == "optim" else
             "one optimizer instance over every site: NCCL's flat cross-DC ring" if flat else
             "one optimizer instance a site: the hierarchical reduction" if across == "dp" else
             f"data parallelism inside each site: {across} across the sites")
    out.memory, out.memory_sharding = mem.to_dict(), sharding_text(placed, where, model.moe is not None)
    out.fits = mem.fits  # walk16: a share of 1,454 GB per GPU printed its step as if it ran
    return mem


def _lockstep_note(region: Region, out: MultisiteStep) -> str:
    """Each site's share's step on its own fabric (its failed parts said) and the site that paces the step."""
    def one(i, name):
        failed = region.fabrics[i].failures
        return f"{name} {format_time(out.site_step_s[name])}" + (f" (failed: {', '.join(failed)})" if failed else "")

    steps = ", ".join(one(i, n) for i, n in enumerate(region.site_names))
    if len(set(out.site_dp.values())) > 1:
        steps += f" ({_dp_text(out)})"
    return (f"the sites step in lockstep, each share on its own fabric: {steps}; {out.pacing_site}'s paces the job's "
            f"step; the one-site figures are {out.slowest_site}'s share's, the slowest (vs one site and the DCI for "
            f"95% are against its step)")


def share_fabric(region: Region, site_lay: ParallelLayout | None = None):
    """The site fabric a region's search bounds its share by and searches first (every site runs the same share,
    each timed on its own fabric, :func:`estimate_across_sites`): the smallest site's, one with failed parts
    first among the smallest (place64: ``--fail west:nvswitch1`` was timed on east's healthy fabric). With ``site_lay`` (the share), a failed GPU or NVLink switch of
    any site under it is refused first (:func:`~topo.training.mapping.refuse_failed_gpus`; the share is placed
    alike in every site, ``skip_domains`` as indices within a site), the line naming the site."""
    for fabric in region.fabrics if site_lay is not None else ():
        _refuse_site_failures(region, fabric, site_lay)
    return min(region.fabrics, key=lambda f: (f.num_gpus, not f.failures))


def site_failure(region: Region, fabric, exc: TopoError) -> TopoError:
    """``exc`` with the site of ``fabric`` named where it is about a failed part (key ``fail``)."""
    if exc.key != "fail":
        return exc
    site = region.site_names[next(i for i, f in enumerate(region.fabrics) if f is fabric)]
    return TopoError(f"site {site}: {exc.message}", source=exc.source, key=exc.key)


def _check_job(model: ModelSpec, lay: ParallelLayout, K: int, across: str, shares: str = "equal") -> None:
    """Refuse a job the model cannot be split by (one site's first rules, :func:`.parallel.check_model_split`:
    tidy84, before its batch), whose ranks or batch do not split over ``K`` sites (equal shares), or an unknown way
    across."""
    check_model_split(model, lay)
    for key, size, what in (("dp", lay.dp, "data-parallel ranks"), ("global_batch", lay.global_batch, "sequences")):
        if size % K and shares == "equal":  # walk14: one line for both named dp when only the batch was at fault
            raise TopoError(f"{size} {what} do not divide by the {K} sites; allowed: a multiple of {K}", key=key)
    if across not in ACROSS_SITES:
        raise TopoError(f"unknown way across sites {across!r}; allowed: {', '.join(ACROSS_SITES)}", key="across")
    if lay.global_batch % (lay.dp * lay.micro_batch):  # said in the job's figures, not one site's halves
        raise TopoError(f"{lay.global_batch} sequences do not split into dp ({lay.dp}, over the {K} sites) x "
                        f"micro_batch ({lay.micro_batch}) = {lay.dp * lay.micro_batch}; "
                        f"{batch_allowed(lay.global_batch, lay.dp * lay.micro_batch)}", key="global_batch")

    def bad(key, msg):  # walk29: the flushes' and interleaving's units in the job's figures, not one site's share's
        raise TopoError(msg, key=key)
    check_batch(lay, bad)


def step_with_dci(timeline: list[dict], one_site_s: float, s: AcrossSites) -> list[dict]:
    """One site's step timeline with the cross-site phase on a ``dci`` lane: its hidden part in the window before
    the last backward's end (where the DP reduction overlaps), its exposed part after it; data parallelism across
    the sites then runs the optimizer's step, which waits for the gradients' reduction (Megatron-Core's
    ``finalize_model_grads`` and its ``finish_grad_sync`` after the last backward, then ``optimizer.step``:
    NVIDIA/Megatron-LM@d98e8a64 megatron/core/distributed/finalize_model_grads.py, megatron/training/training.py
    ``train_step``; regions80), so the optimizer's segment moves after the exposed
    part; pipeline stages across sites pay their crossing's latency at the fill and the drain."""
    out = [dict(x) for x in timeline]
    hidden = max(0.0, s.dci_time_s - s.exposed_s)

    def seg(start, end, label, exposed):
        if end > start:
            out.append({"lane": "dci", "start_s": start, "end_s": end, "label": label, "exposed": exposed})

    if s.strategy == "pp":
        lat = s.latency_s  # the fill's and the drain's
        for x in out:  # the step stretches: everything after the fill moves by half the latency
            x["start_s"] += lat / 2
            x["end_s"] += lat / 2
        seg(0.0, lat / 2, "pipeline fill across sites (latency)", True)
        seg(lat / 2, lat / 2 + min(s.dci_time_s - lat, one_site_s), "activations across sites (hidden)", False)
        seg(one_site_s + lat / 2, s.step_time_s, "pipeline drain across sites (latency, and what did not hide)",
            True)
        return out
    what = "outer synchronisation across sites, per step" if s.strategy == "outer" else "all-reduce across sites"
    end = one_site_s
    if s.strategy == "dp":  # regions80: the optimizer steps after the gradients' reduction across the sites
        end -= sum(x["end_s"] - x["start_s"] for x in out if x["lane"] == "optimizer")
        for x in (x for x in out if x["lane"] == "optimizer"):
            x["start_s"] += s.step_time_s - one_site_s
            x["end_s"] += s.step_time_s - one_site_s
    seg(max(0.0, end - hidden), end, f"{what} (hidden)", False)
    seg(end, end + s.step_time_s - one_site_s, f"{what} (exposed)", True)
    return out


_CROSSING_KIND = {"all_reduce": "all_reduce_bytes", "reduce_scatter": "reduce_scatter_bytes",
                  "all_gather": "all_gather_bytes"}
"""The :class:`.dp_across.ReplicaBytes` field of a data-parallel collective over the whole data-parallel group."""
_SHARD_GROUPS = ("dps", "edps")
"""Hybrid sharding's shard groups: their reduce-scatter crosses as an all-reduce of the site's shards (the sites
replicate them), their gathers stay inside the group; the replicate groups' all-reduces (``dpr``, ``edpr``) are the
in-site half of that reduction."""
_REPLICA_GROUPS = ("dpr", "edpr")
"""Hybrid sharding's replicate groups: under ``dp_outer_sharding = "optim"`` their once-a-step reduce-scatter and
gather are what crosses (regions83), the shard groups' collectives all inside the sites."""


def replica_dp_bytes(model: ModelSpec, lay: ParallelLayout) -> ReplicaBytes:
    """One replica's data-parallel bytes a step, by collective, as the one-site step moves them.

    Each data-parallel collective of :func:`~topo.training.step.step_traffic` (its size, at the gradient-reduction
    or the gather dtype, times its calls: buckets, FSDP's units and micro-batches) per rank, over the degree of its
    reduction (the job's ``dp x cp``, the experts' ``expert_dp``) and the GPUs of a stage: what one replica's
    GPUs move together. ``step_traffic`` sizes the busiest pipeline stage's; each stage counts its own, the dense and
    the expert bytes scaled by the stage's parameters over the busiest's (:func:`~topo.training.memory.stage_params`;
    walk16: the busiest for every stage put Llama 3 70B at pp 4 3% high, its embedding and head counted on all four).

    Parameters
    ----------
    model : ModelSpec
    lay : ParallelLayout
        The job's layout, placed (``dp``: every site's replicas, so that a site holding one replica still reduces).

    Returns
    -------
    ReplicaBytes
    """
    per_rank = {f: [0.0, 0.0] for f in _CROSSING_KIND.values()}  # field -> [dense, expert] bytes per rank
    outer = lay.dp_outer_sharding == "optim"
    for it in step_traffic(model, lay):
        g = it["groups"]
        if it["dim"] != "dp" or _stays_in_site(g, it["collective"], outer):
            continue
        expert = g in EXPERT_DP_GROUPS
        if outer and g not in _REPLICA_GROUPS and (lay.expert_dp if expert else lay.dp * lay.cp) > 1:
            _refuse_mixed_outer(g, lay)  # regions83: a group's per-micro-batch ZeRO-3 crossing beside the outer's
        # the outer group's collectives carry a rank's shard: its shard group's width of them is a replica's part
        field = "all_reduce_bytes" if g in _SHARD_GROUPS else _CROSSING_KIND[it["collective"]]
        width = (lay.expert_dp_shard_size if expert else lay.dp_shard_size * lay.cp) if g in _REPLICA_GROUPS else 1
        per_rank[field][expert] += it["size_bytes"] * it["calls"] * width / (lay.expert_dp if expert
                                                                             else lay.dp * lay.cp)
    rows = stage_params(model, lay)
    b = busiest_stage(rows)  # the busiest, as the step's DP traffic takes it
    ends = bf16_kept_params(model, lay)
    # a stage's dense gather at its own mean bytes a parameter (its BF16 part under fp8_param_gather), the rest by
    # its parameters alone
    wb = [gather_bytes_per_param(lay, d, end) / gather_bytes_per_param(lay, rows[b][0], ends[b]) if d else 0.0
          for (d, _, _), end in zip(rows, ends)]
    stage_gpus = lay.gpus / len(rows)

    def each(field: str, dense: float, exp: float) -> float:
        d_b, e_b, _ = rows[b]
        return stage_gpus * sum((dense * d / d_b * (w if field == "all_gather_bytes" else 1.0) if d_b else 0.0)
                                + (exp * e / e_b if e_b else 0.0) for (d, e, _), w in zip(rows, wb))

    return ReplicaBytes(**{f: each(f, dense, exp) for f, (dense, exp) in per_rank.items()},
                        forward_gather_share=1.0 if outer else forward_gather_share(lay), outer_sharded=outer)


def _stays_in_site(groups: str, collective: str, outer: bool) -> bool:
    """Whether a data-parallel collective of the job's step stays inside the sites (the shard groups inside them):
    hybrid sharding's gathers, and its replicas' all-reduce, the in-site half of the crossing's; under Megatron-FSDP's
    optimizer-sharded outer group (``outer``) every shard-group collective, the replicas' reduce-scatter and gather
    crossing (regions83, :attr:`.dp_across.ReplicaBytes.outer_sharded`)."""
    if groups in _REPLICA_GROUPS:
        return not outer
    return groups in _SHARD_GROUPS and (outer or collective == "all_gather")


def _check_shard_shares(region: Region, lay: ParallelLayout, lays: list[ParallelLayout]) -> None:
    """Refuse a job across the sites whose hybrid shard group (``dp_shard``, ``expert_dp_shard``) does not divide
    every site's share of its replicas (``lays``, in site order), in the job's figures: the region's step keeps each
    shard group inside one site (:func:`_stays_in_site`), so a group wider than a share would cross the sites every
    micro-batch, which is not priced (tidy96, findings 400 Left 4: the share's own check said "does not divide dp
    64" of a job of dp 96)."""
    for key, whole, what in (("dp_shard", lambda x: x.dp, "dp"), ("expert_dp_shard", lambda x: x.expert_dp,
                                                                   "the experts' replicas")):
        size = getattr(lay, key)
        if size is None or size >= whole(lay):
            continue
        for name, share in zip(region.site_names, lays):
            if whole(share) % size:
                each = math.gcd(*(whole(x) for x in lays))
                raise TopoError(f"{size} does not divide site {name}'s share of {what} ({whole(share):,} of the "
                                f"job's {whole(lay):,}): a shard group runs inside one site (one crossing the sites "
                                f"every micro-batch is not priced); allowed: a divisor of every site's share ({each:,})",
                                key=key)


def _refuse_mixed_outer(groups: str, lay: ParallelLayout) -> None:
    """Refuse a job across the sites under ``dp_outer_sharding = "optim"`` whose dense or expert weights are sharded
    over their whole data-parallel group (``groups``, not hybrid; ``lay`` the job's): their crossing runs every
    micro-batch beside the outer group's once a step, a mix not priced (regions83)."""
    expert = groups in EXPERT_DP_GROUPS
    key, got, whole = (("expert_dp_shard", lay.expert_dp_shard, lay.expert_dp) if expert
                       else ("dp_shard", lay.dp_shard, lay.dp))
    raise TopoError(f"optim across the sites needs the dense and the expert weights both hybrid-sharded, got "
                    f"{key} {got} with {'expert_dp' if expert else 'dp'} {whole} (the "
                    f"{'experts' if expert else 'dense weights'} sharded over their whole data-parallel group cross "
                    f"every micro-batch, beside the outer group's once a step: not priced); allowed: {key} below "
                    f"{whole}, or no_shard", key="dp_outer_sharding")


def _ring(K):
    a = np.arange(K)
    return a, (a + 1) % K


SPAN_RULE = ("each span sized for the bytes it carries, per direction, in the time the budget for 95% of one site "
             "leaves (the way's latency paid), on the lowest-latency routes or split over longer paths as the "
             "phase splits them, whichever needs less in total; the total is their sum")
"""How ``dci_Bps_for_95pct_by_span`` is found (ms55). A span's need is its own bytes (spans of unequal capacity
share split bytes by capacity, which made one figure for every span the busiest's); at those capacities the same
routes or split fit the budget. Where the sites' borders are oversubscribed (``border_oversubscription``), every
span is scaled up until each site's border keeps the time too."""


def _allowed_s(E: float, fixed_s: float, window_s: float = 0.0, share: float = 1.0) -> float:
    """The longest bandwidth time ``t`` that keeps ``fixed_s + share x t`` and ``fixed_s + t - window_s`` within the
    budget ``E``; 0 when the fixed latency alone exceeds it (:func:`_allowed_parts_s` of one part)."""
    return _allowed_parts_s(E, fixed_s, ((1.0, window_s, share),))


def _allowed_parts_s(E: float, fixed_s: float, parts) -> float:
    r"""The longest bandwidth time ``t`` of a phase whose parts each take ``x_j t`` of it behind their own window:
    part ``j`` (``parts``: ``(x_j, window_j, share_j)``) exposes :math:`\max(s_j x_j t, x_j t - W_j)` (its edge
    bucket, ``share_j`` of its bandwidth time, or all but its window: :func:`topo.training.step.behind_window_s`),
    and the parts with ``fixed_s`` (every part's latency) must keep within the budget ``E``. The sum of the
    maxima is the largest of the sums over each choice of one term a part, so ``t`` is the least over the choices of
    :math:`(E - L + \sum W_j) / \sum \alpha_j` (:math:`\alpha_j` the chosen slope, the windows of the parts that
    chose the second term); 0 when the fixed latency alone exceeds the budget."""
    if E - fixed_s <= 0:
        return 0.0
    parts = [p for p in parts if p[0] > 0]
    best = math.inf
    for pick in itertools.product((False, True), repeat=len(parts)):
        slope = sum(x if whole else share * x for (x, _, share), whole in zip(parts, pick))
        windows = sum(w for (_, w, _), whole in zip(parts, pick) if whole)
        if slope > 0:
            best = min(best, (E - fixed_s + windows) / slope)
    return best


def _for_95pct(region: Region, src, dst, nbytes, steps: int, allowed,
               site_gpus=None, channels: int | None = None, floor_s: float = 0.0) -> tuple[float, dict[str, float], float]:
    """The DCI for 95% of one site by :data:`SPAN_RULE`: ``(the largest span's, each span's, their total)``, per
    direction. ``allowed(latency_s)`` is the bandwidth time the budget leaves a phase of that latency
    (:func:`_allowed_s`); inf where it leaves none or a GPU's NICs alone take longer, whatever the spans
    (``site_gpus``: each site's share's GPUs, whose NICs carry its bytes; ``channels``: at most that many NICs
    a site, as :func:`~topo.engine.region_estimate.dci_phase` takes it; ``floor_s``: a bandwidth time no span's
    capacity shortens, as a GPU's NICs', :attr:`.dp_across.DpCrossing.floor_s`)."""
    names = region.span_names()
    best = None
    for ph, loads, _, nic_s in dci_phase_options(region, src, dst, nbytes, steps, channels, site_gpus):  # routes, split
        each = np.maximum(loads[0::2], loads[1::2])  # a span's capacity is per direction: its busier one
        if not each.any():
            return 0.0, dict.fromkeys(names, 0.0), 0.0
        t = allowed(ph.latency_s)
        if t > 0 and max(nic_s, floor_s) <= t:
            each = _border_kept(region, src, dst, nbytes, each / t, t)
            best = each if best is None or each.sum() < best.sum() else best
    if best is None:
        best = np.where(np.maximum(loads[0::2], loads[1::2]) > 0, math.inf, 0.0)
    return float(best.max()), dict(zip(names, best.tolist())), float(best.sum())


def _border_kept(region: Region, src, dst, nbytes, each: np.ndarray, t: float) -> np.ndarray:
    """``each`` span's capacity scaled up, where a site's border at those capacities
    (:meth:`~topo.fabric.region.Region.border_Bps`) would take longer than ``t`` to pass what the site sends or
    receives (:func:`~topo.engine.region_estimate.site_exchange_bytes`)."""
    sent = site_exchange_bytes(region, src, dst, nbytes)
    border = np.array([region.border_Bps(s, span_Bps=each) for s in range(region.num_sites)])
    return each * max(1.0, float(np.max(np.where(sent > 0, sent / (t * np.maximum(border, 1e-300)), 0.0))))


def _amax_across_s(region: Region, model: ModelSpec, lay: ParallelLayout, channels: int,
                   site_gpus=None) -> tuple[float, int]:
    """What delayed FP8 scaling's amax reductions add to a step when DP spans the sites, and their calls a step:
    Transformer Engine all-reduces each model chunk's amax buffer over the tensor x data x context group
    (:mod:`.fp8_amax`), which then spans the sites; one site's step has each call inside the site, and each call
    now also crosses them, the cheaper of the tree's chain of site roots (``2 sum_i L_i`` and the buffer on each
    chained span) and the hierarchical ring across the sites (``2(K-1)`` hops), as
    :func:`~topo.engine.region_estimate.small_all_reduce_dci_s` prices it: a few KB, so latency. The calls
    block the compute stream in each micro-batch, so the bubble's micro-batch grows with them as the step's
    ``fp8_amax`` line does (:func:`~topo.training.step.step_breakdown`). ``(0.0, 0)`` without the reduction, or
    with ``tp_only_amax_red`` (its tensor x context group stays inside a site: :func:`.fp8_amax.amax_group`).
    ``lay``: one site's share, placed; ``channels``: NCCL's (:func:`~topo.engine.region_estimate.region_channels`),
    the tree's crossing through one NIC each (:func:`~topo.engine.region_estimate.tree_dci_phase`); ``site_gpus``:
    each site's share's GPUs, whose NICs carry its bytes."""
    calls = amax_reductions(model, lay, stage_block_counts(model, lay))
    K = region.num_sites
    if not calls or K < 2 or amax_group(lay) != AMAX_GROUP:
        return 0.0, 0
    per_call = [small_all_reduce_dci_s(region, size, channels, site_gpus) for size, _ in calls]
    total = sum(n * t for (_, n), t in zip(calls, per_call))
    return sum(step_breakdown(lay, _NO_COMPUTE, {AMAX_PHASE: total}, 0.0).values()), int(sum(n for _, n in calls))


def _amax_note(dp: AcrossSites, amax_s: float, calls: int, one_site_s: float) -> list[str]:
    """The assumptions' line on the amax reductions' crossing (:func:`_amax_across_s`), none without one: its
    seconds, and what avoids it, with the share of one site the ``dp`` strategy ``dp`` would give without them (its
    step less ``amax_s``; the in-site step as is)."""
    if amax_s <= 0:
        return []
    without = one_site_s / (dp.step_time_s - amax_s)
    return [f"dp across sites: delayed FP8 scaling's amax all-reduces span the sites (Transformer Engine's "
            f"tensor x data x context group), {calls} a step each crossing them: {format_time(amax_s)} a step exposed, "
            f"bubble included (pp and outer: inside each site, in one site's step); tp_only_amax_red = true "
            f"(Megatron-Core's tensor x context group, inside each site) or fp8_recipe current (or mxfp8 on "
            f"Blackwell: no amax history) avoids it: {without:.1%} of one site instead of {dp.throughput_vs_one_site:.1%}"]


class _NoCompute:
    """A stage of no compute: :func:`~topo.training.step.step_breakdown` of exposed seconds alone (the step's
    formula, linear in them) gives what they add to a step, the bubble's share included."""

    microbatch_s = forward_s = 0.0


_NO_COMPUTE = _NoCompute()


@dataclass(frozen=True)
class SiteReady:
    r"""Each distinct site's share's step :math:`T_i` on its own fabric (``steps_s``) and the window :math:`w_i` its
    in-site DP reduction leaves in its backward (``windows_s``, :func:`dp_window_s`): the site is ready for
    the cross-site phase of the ``dp`` strategy at :math:`r_i = T_i - w_i` from the end of the previous step's
    cross-site phase (regions80: each site's optimizer steps after that phase, which its gradients wait for, then
    its forwards and backwards run, :math:`T_i` holding both; in lockstep the phase ends every
    :math:`\max_i (T_i + \max(e, D - w_i))`, the step, with the optimizer at either end of it); and its compute
    (``computes_s``, the window a pipeline's crossings stream behind, :func:`_pp`); one entry a distinct site in
    each, none left out; and the window the in-site parameter gather leaves in the next step's first forward
    (``gather_windows_s``, :func:`dp_gather_window_s`; empty: none given, the share's own taken); and what NCCL's
    flat cross-DC ring's optimizer step saves its step (``flat_saved_s``, :func:`flat_optimizer_saved_s`; empty:
    none); and each site's share's optimizer step (``optimizers_s``, its step's ``optimizer`` line; empty: none
    given, every site's the share's own), which the flat ring's parameter gathers wait for at every site
    (:func:`gather_waits_s`)."""

    steps_s: tuple[float, ...]
    windows_s: tuple[float, ...]
    computes_s: tuple[float, ...]
    gather_windows_s: tuple[float, ...] = ()
    flat_saved_s: tuple[float, ...] = ()
    optimizers_s: tuple[float, ...] = ()

    def __post_init__(self):
        if not len(self.steps_s) == len(self.windows_s) == len(self.computes_s) > 0:
            raise ValueError(f"SiteReady takes one entry a site in steps_s, windows_s and computes_s, got "
                             f"{len(self.steps_s)}, {len(self.windows_s)} and {len(self.computes_s)}")
        if self.gather_windows_s and len(self.gather_windows_s) != len(self.steps_s):
            raise ValueError(f"SiteReady takes one gather window a site or none, got {len(self.gather_windows_s)} "
                             f"for {len(self.steps_s)} sites")
        if self.flat_saved_s and len(self.flat_saved_s) != len(self.steps_s):
            raise ValueError(f"SiteReady takes one flat-ring saving a site or none, got {len(self.flat_saved_s)} "
                             f"for {len(self.steps_s)} sites")
        if self.optimizers_s and len(self.optimizers_s) != len(self.steps_s):
            raise ValueError(f"SiteReady takes one optimizer step a site or none, got {len(self.optimizers_s)} "
                             f"for {len(self.steps_s)} sites")

    @property
    def slowest_s(self) -> float:
        r""":math:`\max_i T_i`, the latest share's step end."""
        return max(self.steps_s)

    @property
    def last_ready_s(self) -> float:
        r""":math:`R = \max_i (T_i - w_i)`, the latest in-site reduction end."""
        return max(t - w for t, w in zip(self.steps_s, self.windows_s))


def dp_window_s(one: StepResult, lay: ParallelLayout) -> float:
    """:math:`w`, the part of a share's backward its in-site DP reduction leaves to the cross-site phase: the
    last micro-batch's backward (:data:`BACKWARD_SHARE` of its compute), every micro-batch's for ZeRO-3 / FSDP
    (:func:`dp_passes`: its reduce-scatters and backward gathers, and their crossing, run in each micro-batch's
    backward; regions80), less the step's in-site DP seconds but the
    parameter gathers that run in a forward (the distributed optimizer's, FSDP's forward ones:
    :func:`dp_gather_window_s`), at least
    0; none where the in-site reduction runs behind no backward (PyTorch pipelining's FSDP2 branch reduces after the
    stage's last backward, which the one-site step exposes whole: one rule,
    :attr:`~topo.training.parallel.ParallelLayout.dp_reduce_behind_backward`). The in-site reduction then ends, and
    the site is ready for the cross-site phase, at :math:`T - w` from the step's start, :math:`T` the share's step on
    its own fabric (``one``; ``lay``: the share)."""
    if not lay.dp_reduce_behind_backward:
        return 0.0
    t_bwd = BACKWARD_SHARE * one.breakdown_s["compute"] * dp_passes(lay) / lay.microbatches
    return max(0.0, t_bwd - _in_site_dp_s(one, lay, gather=False))


def dp_passes(lay: ParallelLayout) -> int:
    """The micro-batches whose forward and backward a share's data-parallel collectives run in: every one for
    ZeRO-3 / FSDP (each unit gathered before its forward and backward and its gradients reduce-scattered after its
    backward in every micro-batch, :func:`topo.training.step.step_traffic`'s ``m x calls``: PyTorch FSDP reduces each
    micro-batch's gradients outside ``no_sync``, pytorch/pytorch@3ade90a6aaa939cd6238e314c321b9f920db1471
    torch/distributed/fsdp/_runtime_utils.py ``_post_backward_hook``; regions80; once a schedule run under PyTorch
    pipelining's FSDP2 branch: :attr:`~topo.training.parallel.ParallelLayout.fsdp_unit_rounds`), one otherwise (the distributed
    optimizer's and DDP's buckets reduce in the last micro-batch's backward and gather in the next step's first
    forward).

    Parameters
    ----------
    lay : ParallelLayout

    Returns
    -------
    int
    """
    return lay.fsdp_unit_rounds if lay.zero_stage >= 3 and lay.dp_outer_sharding != "optim" else 1


def dp_gather_window_s(one: StepResult, lay: ParallelLayout) -> float:
    """The forward compute a share's parameter gathers across the sites (NCCL's flat cross-DC ring) run in, less
    the in-site gathers that run there (one rule, :func:`topo.training.step.forward_gather_share`): the
    distributed optimizer's updated parameters in the next step's first micro-batch's forward (``1 -``
    :data:`BACKWARD_SHARE` of its compute), FSDP's per-unit forward gathers in every micro-batch's forward (each
    unit's before its forward, regions79), and before it the optimizer steps the first model chunk's gather runs
    behind under ``overlap_param_gather_with_optimizer_step`` (the step's ``gather_lead_s``,
    :func:`topo.training.step.gather_lead_s`, which the one-site step gives chunk 0's gather too); at least 0; 0
    where the gather is not overlapped (:func:`topo.training.parallel.dp_overlapped`: Megatron-Core's
    ``overlap_param_gather`` off, the gather runs after the optimizer's step, before any forward; FSDP's gathers not
    prefetched, ``overlap_dp`` off). The one-site step hides its own gathers behind the same forwards
    (:func:`topo.training.step.behind_window_s`)."""
    if not dp_overlapped(lay, "gather" if lay.zero_stage < 3 else "gather_unit"):
        return 0.0
    t_fwd = (1 - BACKWARD_SHARE) * one.breakdown_s["compute"] * dp_passes(lay) / lay.microbatches
    return max(0.0, t_fwd + one.gather_lead_s - _in_site_dp_s(one, lay, gather=True))


def _in_site_dp_s(one: StepResult, lay: ParallelLayout, gather: bool) -> float:
    """A share's in-site data-parallel seconds a step: with ``gather`` the parameter gathers that run in a forward
    (:func:`topo.training.step.forward_gather_share` of the all-gathers: the distributed optimizer's, FSDP's
    forward ones), else the rest (the gradients' reduction, FSDP's backward gathers, in the last backward's
    window)."""
    dp = [c for c in one.comm if c.dim in ("dp", "dp_experts")]
    fwd = forward_gather_share(lay) * sum(c.time_s for c in dp if c.collective == "all_gather")
    return fwd if gather else sum(c.time_s for c in dp) - fwd


def loss_fill_s(lay: ParallelLayout, compute_s: float) -> float:
    """The compute before the last pipeline stage's first forward of a step: the ``pp - 1`` stages before it each
    run the first micro-batch's first model chunk forward (``1 -`` :data:`BACKWARD_SHARE` of a micro-batch's
    compute over ``vpp`` chunks; ``compute_s`` a share's step's compute, ``lay`` the share). The last stage's
    logged-loss all-reduce of the step before (after its optimizer's step) hides behind it; 0 at ``pp = 1``.

    Parameters
    ----------
    lay : ParallelLayout
    compute_s : float

    Returns
    -------
    float
    """
    return (lay.pp - 1) * (1 - BACKWARD_SHARE) * compute_s / (lay.microbatches * lay.vpp)


def _dp(region: Region, one, lay, V: ReplicaBytes, forms: dict, amax_s: float = 0.0, ready: SiteReady | None = None,
        site_gpus=None, loss_s: float = 0.0, saved_s: float = 0.0) -> AcrossSites:
    r"""DP across the sites: the gradients' hierarchical all-reduce (the cross-site phase in the window the in-site
    reduction leaves in the last backward; the FP8 amax all-reduces are no DP traffic and take no part in that
    window) and ``amax_s``, the amax reductions' crossing (:func:`_amax_across_s`), exposed; seen from the site
    whose share steps as ``one``.

    Site :math:`i` (its share's step :math:`T_i` on its own fabric, its window :math:`w_i`, :func:`dp_window_s`) is
    ready at :math:`r_i = T_i - w_i` from the previous phase's end (its optimizer first: :class:`SiteReady`). The
    cross-site phase (:math:`D`, its latency and bandwidth time; its buckets cross as each is reduced in every
    site) is one collective over every site: it starts at the last site's readiness :math:`R = \max_i r_i`, and
    its last bucket (``edge`` :math:`e`, latency plus a bucket's bandwidth time) crosses after the slowest share's
    step end. The job's step::

        T = max(max_i T_i + e, R + D) + amax_s = max_i (T_i + max(e, D - w_i)) + amax_s

    the same for every site, each hiding :math:`\min(D, \max(0, T_i - R))` behind its own backward and exposing
    the rest; site :math:`i`'s own end :math:`T_i + \max(e, D - w_i) + amax_s` (``own_end_s``) is the step at the
    site that paces it. Equal sites: :math:`R = T - w`, the one-site formula ``T + max(e, D - w)``. The need for
    95% of one site (the slowest share's step :math:`T_s = \max_i T_i`, budget :math:`E = T_s (1/0.95 - 1) -
    amax_s`, so that :math:`T \le T_s / 0.95`): the edge within :math:`E`, the phase within :math:`E + T_s - R`.
    ``site_gpus``: each site's share's GPUs, whose NICs carry the site's shards (each GPU its own, share72). The
    cross-site phase is the hierarchical reduction's or NCCL's flat cross-DC ring's (``forms``, the job's
    :func:`.dp_across.dp_crossings`), the faster unless the region's ``nccl.dp_reduction`` names one; the flat
    ring's gradient norm crossing the sites (:attr:`.dp_across.DpCrossing.norm_s`) is exposed with ``amax_s``.
    The flat ring's parameter gathers that run in a forward (:attr:`.dp_across.DpCrossing.gather_phase`: the
    distributed optimizer's, in the next step's first forward, regions76; FSDP's forward ones, in every
    micro-batch's, regions79) cross behind the window the in-site gathers leave there (:func:`dp_gather_window_s`),
    their first bucket exposed; the need for 95% gives each part its own window (:func:`_allowed_parts_s`).
    ``loss_s``: the logged loss's all-reduce across the sites (:data:`.dp_across.LOSS_BYTES`, both forms), after
    the last stage's optimizer step, exposed beyond that stage's next fill (:func:`loss_fill_s`). Under the flat
    ring each site's step is shorter by what its optimizer step saves (the state over the job's replicas:
    ``saved_s`` this site's, ``ready.flat_saved_s`` each site's, :func:`flat_optimizer_saved_s`; regions79), and
    the budget for 95% of one site grows by the least of them.
    """
    cross = pick_dp_crossing(region, forms)
    ready = _dp_ready(one, lay, ready, saved_s)
    T, own, steps = dp_form_ends_s(cross, one, lay, V, ready, amax_s, loss_s, saved_s)
    Ts = ready.slowest_s
    after = amax_s + cross.norm_s
    E = Ts / TARGET_FRACTION - max(steps) - after - max(_loss_exposed_s(loss_s, lay, c) for c in ready.computes_s)
    w_grad = max(steps) - max(t - w for t, w in zip(steps, ready.windows_s))
    need, each, total = _dp_need(region, cross, E, w_grad, min(ready.gather_windows_s), _dp_bucket(V, lay),
                                 site_gpus)
    return AcrossSites("dp", T, Ts / T, cross.time_s + amax_s + loss_s, T - Ts, float(cross.loads.max()), need,
                       cross.phase.bound, latency_s=cross.phase.latency_s, dci_Bps_for_95pct_by_span=each,
                       dci_total_Bps_for_95pct=total, own_end_s=own)


def _dp_ready(one, lay, ready: SiteReady | None, saved_s: float) -> SiteReady:
    """``ready``, its gather windows filled with this site's (``one``, its share ``lay``) where it has none; this
    site's alone (its step, windows, compute, flat-ring saving ``saved_s`` and optimizer) where ``ready`` is None."""
    fwd = dp_gather_window_s(one, lay)
    if ready is None:
        return SiteReady((one.step_time_s,), (dp_window_s(one, lay),), (one.breakdown_s["compute"],), (fwd,),
                         (saved_s,), (one.breakdown_s["optimizer"],))
    return ready if ready.gather_windows_s else replace(ready, gather_windows_s=(fwd,) * len(ready.steps_s))


def _dp_bucket(V: ReplicaBytes, lay: ParallelLayout) -> float:
    """A gradient bucket's share of the bytes a crossing carries (Megatron-Core's ``dp_bucket_params``), at most 1:
    the part of its bandwidth time the last bucket adds after the window (its edge)."""
    per_gpu = V.gradient_bytes / lay.gpus  # the buckets are the gradients' (and the parameters' they gather)
    return min(1.0, dp_bucket_params(lay) * lay.reduce_bytes / (per_gpu * lay.dp * lay.cp)) if per_gpu else 0.0


def _loss_exposed_s(loss_s: float, lay: ParallelLayout, compute_s: float) -> float:
    """The logged loss's crossing ``loss_s`` beyond the last stage's next fill (:func:`loss_fill_s`)."""
    return max(0.0, loss_s - loss_fill_s(lay, compute_s))


def dp_form_ends_s(cross, one, lay, V: ReplicaBytes, ready: SiteReady, amax_s: float = 0.0, loss_s: float = 0.0,
                   saved_s: float = 0.0) -> tuple[float, float, tuple[float, ...]]:
    """The ``dp`` way's step in the form ``cross`` (a :class:`.dp_across.DpCrossing`), in closed form (see
    :func:`_dp`): what the job pays for that form, the figure ``auto`` compares (regions82), and the step the ``dp``
    row gives.

    Each site's own end is its step as the form follows it (:func:`_dp_steps_s`: the flat ring's optimizer over the
    job's shard, its wait for the slowest optimizer), the gradients' part of the crossing behind its last backward's
    window and the forward gathers' behind its forward's (:func:`.step.behind_window_s`, each part's edge one pass's
    latency and a bucket's bandwidth time), then the amax and gradient-norm crossings and the logged loss's beyond
    the last stage's fill, exposed.

    Parameters
    ----------
    cross : DpCrossing
    one : StepResult
        This site's share's step.
    lay : ParallelLayout
        The share.
    V : ReplicaBytes
        One replica's data-parallel bytes.
    ready : SiteReady
        Every site's (:func:`_dp_ready`: with its gather windows).
    amax_s, loss_s : float
        The amax reductions' and the logged loss's crossings.
    saved_s : float
        What the flat ring saves this site's optimizer step (:func:`flat_optimizer_saved_s`).

    Returns
    -------
    tuple
        The job's step, this site's own end, and each site's step as the form follows it.
    """
    ph, p, g = cross.phase, cross.passes, cross.gather_phase  # g: the flat ring's gathers run in a forward
    bucket = _dp_bucket(V, lay)
    # regions81: an edge bucket pays one collective's latency, the phase every pass's (FSDP: each micro-batch's)
    grad_s = ph.time_s - g.time_s
    grad_edge = (ph.latency_s - g.latency_s) / p + bucket * (ph.bandwidth_s - g.bandwidth_s)
    g_edge = g.latency_s / p + bucket * g.bandwidth_s
    after = amax_s + cross.norm_s  # exposed after the phase: the amax crossings, the gradient norm's (flat ring)

    def end(t, w, f, c):  # a site's own end: its step, the gradients behind its last backward, the gather its forward
        return (t + behind_window_s(grad_s, grad_edge, w) + behind_window_s(g.time_s, g_edge, f) + after
                + _loss_exposed_s(loss_s, lay, c))

    steps, own_step = _dp_steps_s(ready, one, saved_s, over_job(cross.name, lay), g.time_s > 0)
    own = end(own_step, dp_window_s(one, lay), dp_gather_window_s(one, lay), one.breakdown_s["compute"])
    T = max(end(*x) for x in zip(steps, ready.windows_s, ready.gather_windows_s, ready.computes_s))
    return T, own, steps


def _dp_need(region: Region, cross, E: float, w_grad: float, w_gather: float, bucket: float, site_gpus):
    """The ``dp`` way's DCI for 95% of one site (:func:`_for_95pct`): the crossing ``cross`` within the budget
    ``E``, its gradients' part behind the window ``w_grad``, its forward gathers' behind ``w_gather``, each part's
    edge ``bucket`` of its bandwidth time and one pass's latency (regions81: every pass's latency but the edge's
    hides behind its part's window, so it shortens that window; one pass, as before)."""
    ph, g, p = cross.phase, cross.gather_phase, cross.passes
    xg = g.bandwidth_s / ph.bandwidth_s if ph.bandwidth_s else 0.0  # the gather's share of the bandwidth time
    lg = cross.gather_steps / cross.steps if cross.steps else 0.0  # and of the latency

    def allowed(lat):
        rest = lat * (1 - 1 / p)
        parts = ((1 - xg, w_grad - (1 - lg) * rest, bucket),) + (((xg, w_gather - lg * rest, bucket),) if xg else ())
        return _allowed_parts_s(E, lat / p, parts)

    return _for_95pct(region, *_ring(region.num_sites), cross.nbytes, cross.steps * p, allowed, site_gpus,
                      cross.channels, cross.floor_s)


def gather_waits_s(optimizers_s, saved_s) -> tuple[float, ...]:
    r"""What each site waits after its own optimizer step for the flat cross-DC ring's parameter gather (regions81):
    the ring is one collective over every site's ranks, each sending the shard its own optimizer has just stepped,
    so it starts when the slowest site's optimizer is done; a site's next forward (which the gather feeds) waits
    :math:`\max_j o_j - o_i`, :math:`o_i` its optimizer step (``optimizers_s``) less what the flat ring saves it
    (``saved_s``, :func:`flat_optimizer_saved_s`). Megatron-Core's distributed optimizer gathers the updated
    parameters after ``optimizer.step()`` (``overlap_param_gather``: in the next forward's pre-hooks) over its
    data-parallel group (NVIDIA/Megatron-LM@d98e8a64ddf34856e74b24714e3bedb2f5a39553
    megatron/core/distributed/param_and_grad_buffer.py ``start_param_sync``); FSDP's forward gathers of the
    stepped shards likewise.

    Parameters
    ----------
    optimizers_s, saved_s : sequence of float
        Each site's optimizer step and its flat-ring saving.

    Returns
    -------
    tuple of float

    >>> gather_waits_s((0.75, 0.25), (0.25, 0.0))
    (0.0, 0.25)
    """
    done = [o - d for o, d in zip(optimizers_s, saved_s)]
    return tuple(max(done) - x for x in done)


def _dp_steps_s(ready: SiteReady, one, saved_s: float, flat: bool, gathers: bool) -> tuple[tuple[float, ...], float]:
    """Each site's step as the ``dp`` way's cross-site phases follow it, and this site's (``one``, saving
    ``saved_s``): under the flat ring shorter by what its optimizer saves (regions79) and, where parameters gather
    across the sites after the optimizer (``gathers``), longer by its wait for the slowest site's optimizer
    (:func:`gather_waits_s`, regions81; alike sites wait none)."""
    n = len(ready.steps_s)
    saves = ready.flat_saved_s if flat and ready.flat_saved_s else (0.0,) * n
    opts = ready.optimizers_s or (one.breakdown_s["optimizer"],) * n
    mine = saved_s if flat else 0.0
    waits = gather_waits_s(opts, saves) if gathers else (0.0,) * n
    # this site's own wait: the last of the sites' optimizers (it among them) less its own
    late = max(o - d for o, d in zip(opts, saves)) - (one.breakdown_s["optimizer"] - mine) if gathers else 0.0
    return tuple(t - d + w for t, d, w in zip(ready.steps_s, saves, waits)), one.step_time_s - mine + late


def _pp_crossings(K: int, lay: ParallelLayout, send_bytes: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The DCI transfers of one step with the pipeline's stages split at the sites: each site boundary carries every
    micro-batch's activations once per virtual stage one way and their gradients back; interleaved stages also wrap
    from the last site to the first, ``vpp - 1`` times a micro-batch. ``send_bytes``: one micro-batch's send of a
    stage's ranks together. The bytes are the micro-batches', not the sends the step's timing counts on the
    critical path (``m + fills``, or the fills alone with ``overlap_pp``; walk19)."""
    m, v = lay.microbatches, lay.vpp
    a = np.r_[np.arange(K - 1), np.arange(1, K)]
    b = np.r_[np.arange(1, K), np.arange(K - 1)]
    nbytes = np.full(a.size, m * v * send_bytes)
    if v > 1:
        a, b = np.r_[a, K - 1, 0], np.r_[b, 0, K - 1]
        nbytes = np.r_[nbytes, [m * (v - 1) * send_bytes] * 2]
    return a, b, nbytes


def _pp(region: Region, one, lay, model, ready: SiteReady) -> AcrossSites:
    r"""Pipeline stages across the sites, seen from the site whose share steps as ``one``: site :math:`i` (step
    :math:`T_i`, compute :math:`c_i`, ``ready``) ends at :math:`T_i + L + \max(0, B - c_i)` (:math:`L` the fill's and
    the drain's latency, :math:`B` the crossings' bandwidth time, streamed behind the compute); the job's step is the
    latest, and the need for 95% keeps every site's end within the slowest share's step / 0.95.

    A boundary's bytes cross through the NICs of the ranks that send them (:func:`pp_boundary_ranks`), one NIC a
    rank pair: Megatron-Core's pipeline send and receive (NVIDIA/Megatron-LM@2fd6e2b7,
    ``megatron/core/pipeline_parallel/p2p_communication.py``, ``_batched_p2p_ops`` / ``_p2p_ops``: ``isend`` /
    ``irecv`` to ``get_pipeline_model_parallel_next_rank()`` / ``prev_rank()``) pairs each rank of a stage with its
    peer of the next, so a site's crossing is one rank's sends over its own NIC, not spread over the share's NICs
    (regtree71's Left 1)."""
    K = region.num_sites
    size = pp_send_bytes(model, lay)
    ranks = pp_boundary_ranks(lay, K)
    a, b, nbytes = _pp_crossings(K, lay, size * ranks)  # a stage's ranks across the job
    nics = dict(site_gpus=(ranks,) * K, channels=ranks)  # one NIC a rank pair, fewer where its servers share them
    ph, loads = dci_phase(region, a, b, nbytes, 1, **nics)  # latency: one crossing
    latency = 2 * (K - 1) * lay.vpp * ph.latency_s  # fill and drain, once per virtual stage
    sites = tuple(zip(ready.steps_s, ready.computes_s))
    T = max(t + latency + max(0.0, ph.bandwidth_s - c) for t, c in sites)
    Ts = ready.slowest_s
    need, each, total = _for_95pct(region, a, b, nbytes, 1, lambda lat: min(
        _allowed_s(Ts / TARGET_FRACTION - t, 2 * (K - 1) * lay.vpp * lat, c, 0.0) for t, c in sites), **nics)
    own = one.step_time_s + latency + max(0.0, ph.bandwidth_s - one.breakdown_s["compute"])
    return AcrossSites("pp", T, Ts / T, latency + ph.bandwidth_s, T - Ts, float(loads.max()), need,
                       ph.bound, latency_s=latency, dci_Bps_for_95pct_by_span=each, dci_total_Bps_for_95pct=total,
                       own_end_s=own)


def pp_send_bytes(model: ModelSpec, lay: ParallelLayout) -> float:
    """One rank's send of a micro-batch's activations to the next pipeline stage (or their gradients back), the call
    a stage boundary's crossing is made of: the step's ``pipeline`` item (:func:`topo.training.step.step_traffic`,
    ``act / tp`` with sequence parallelism or scatter-gather), one ``isend`` / ``irecv`` a rank pair
    (:func:`_pp`'s sources).

    Parameters
    ----------
    model : ModelSpec
    lay : ParallelLayout
        The share, placed.

    Returns
    -------
    float
        Bytes; 0 at ``pp`` 1.
    """
    return sum(it["size_bytes"] for it in step_traffic(model, lay) if it["collective"] == "pipeline")


def pp_boundary_ranks(lay: ParallelLayout, num_sites: int) -> int:
    """The ranks of a pipeline stage at a site boundary, each sending its activations to its peer of the next stage
    (and receiving their gradients back): ``tp x cp x dp`` of the whole job. ``lay`` is one site's equal share
    (``dp / K`` replicas of every stage), so the job's stage holds ``lay.gpus x K / pp`` ranks, all on the site that
    holds the boundary stage.

    Parameters
    ----------
    lay : ParallelLayout
        One site's share of the job (``pp`` the job's).
    num_sites : int
        ``K``.

    Returns
    -------
    int
    """
    return lay.gpus * num_sites // lay.pp


def _outer(region: Region, T1: float, V: float, H: int, slowest_s: float, site_gpus=None) -> AcrossSites:
    """The outer synchronisation every ``H`` inner steps, seen from the site whose share steps in ``T1``: each site
    adds the phase over ``H`` to its own step; the job's step is the slowest share's (``slowest_s``) plus it
    (``site_gpus``: each site's share's GPUs, whose NICs carry its bytes)."""
    K = region.num_sites
    a, b = _ring(K)
    ph, loads = dci_phase(region, a, b, 2 * (K - 1) / K * V, 2 * (K - 1), site_gpus=site_gpus)
    exposed = ph.time_s / H
    T = slowest_s + exposed
    E = slowest_s * (1 / TARGET_FRACTION - 1)
    need, each, total = _for_95pct(region, a, b, 2 * (K - 1) / K * V, 2 * (K - 1), lambda lat: _allowed_s(H * E, lat),
                                   site_gpus)
    return AcrossSites("outer", T, slowest_s / T, ph.time_s, exposed, float(loads.max()) / H, need, ph.bound, H,
                       latency_s=ph.latency_s, dci_Bps_for_95pct_by_span=each, dci_total_Bps_for_95pct=total,
                       own_end_s=T1 + exposed)


def _dp_text(out: MultisiteStep) -> str:
    """Each site's replicas, ``east dp 2, west dp 1``."""
    return ", ".join(f"{n} dp {d:,}" for n, d in out.site_dp.items())


def _assumptions(region: Region, dps: tuple[int, ...]) -> list[str]:
    if len(set(dps)) == 1:
        share = "the job's per-site share (dp / sites, global batch / sites) on one site's fabric"
    else:
        share = ("each site's share of the replicas in proportion to its GPUs, at most the replicas they hold (" +
                 ", ".join(f"{n} dp {d:,}" for n, d in zip(region.site_names, dps)) + "), each replica the same "
                 "layout and micro-batches (the global batch split as the replicas), on its own fabric; the DCI "
                 "carries one replica's gradients as with equal shares (a site's replicas reduced inside first)")
    return list(region.spec.assumptions) + [
        f"one site's throughput: {share}",
        f"the backward is {BACKWARD_SHARE:.2g} of a micro-batch's compute (the window the DP reduction overlaps)",
    ]


def _dp_form_note(region: Region, V: ReplicaBytes, forms: dict, ranks_per_node: int = 1) -> str:
    """The assumptions' line on how the ``dp`` way's gradients cross (:mod:`.dp_across`): both forms' phases
    (``forms``, the ones :func:`_dp` picks from) and which was taken, and why; where a data-parallel group has several
    ranks on one node, why the flat ring is not priced."""
    pick = pick_dp_crossing(region, forms)
    h, r = forms["hierarchical"], forms.get("flat_ring")
    fastest = fastest_dp_crossing(forms)
    why = ("as the region's nccl.dp_reduction sets" if region.spec.nccl.dp_reduction != "auto" else "the faster"
           if pick is fastest else "the fastest in which the job fits in GPU memory")  # regions81
    said = {"hierarchical": "by the hierarchical reduction", "flat_ring": "by NCCL's flat cross-DC ring"}
    inside = ", the parameters gathered inside each site's optimizer instance" if V.reduce_scatter_bytes else ""
    h_what = (f"{_ring_carries(V)} of the optimizer-sharded outer group once a step" if V.outer_sharded
              else f"the gradients' all-reduce{inside}")  # regions83
    norm = f", the gradient norm's all-reduce {format_time(r.norm_s)}" if r is not None and r.norm_s else ""
    ring = (f"NCCL's flat cross-DC ring over {r.steps // 2 + 1:,} replicas {format_time(r.time_s)} "
            f"({format_size(r.nbytes)} a boundary, {_ring_carries(V)}, {r.steps:,} crossings{norm}, "
            f"bound {r.phase.bound})"
            if r is not None else
            f"NCCL's flat cross-DC ring not priced: a data-parallel group has up to {ranks_per_node} ranks on one node, "
            f"and the ring's crossings are modelled at one rank a node")
    if r is None and region.spec.nccl.dp_reduction == "auto":  # rev74 Left b: a set form keeps its reason
        why = "the only one priced"
    steps = (f"; the job's step {format_time(h.step_s)} by the hierarchical reduction, {format_time(r.step_s)} by "
             f"the flat ring (what auto compares)" if r is not None and h.step_s is not None else "")  # regions82
    return (f"dp across sites: the gradients cross {said[pick.name]} ({why}): hierarchical "
            f"{format_time(h.time_s)} ({format_size(h.nbytes)} a boundary, {h_what}, "
            f"{h.steps} crossings), {ring}{steps}; nccl.dp_reduction = hierarchical, flat_ring or auto")


def _form_by_memory(out: MultisiteStep, region: Region, forms: dict) -> list[str]:
    """Set ``out``'s ``dp_reduction`` (the form :func:`.dp_across.pick_dp_crossing` takes) and, where ``auto`` took
    the slower because the job does not fit in GPU memory in the faster, ``dp_reduction_by_memory``, with its one
    line (regions81); none otherwise."""
    pick = pick_dp_crossing(region, forms)
    fastest = fastest_dp_crossing(forms)
    out.dp_reduction = pick.name
    out.dp_reduction_by_memory = region.spec.nccl.dp_reduction == "auto" and pick is not fastest
    if not out.dp_reduction_by_memory:
        return []
    said = {"hierarchical": "the hierarchical reduction (one optimizer instance a site)",
            "flat_ring": "NCCL's flat cross-DC ring (one optimizer instance over every site)"}
    gap = pick.paid_s - fastest.paid_s
    pace = f"{format_time(gap)} faster" if gap > 0 else "as fast"
    what = "the job's step" if pick.step_s is not None else "its crossing"  # regions82: the step where known
    return [f"dp across sites: the gradients cross by {said[pick.name]}, {what} {format_time(pick.paid_s)}, not by "
            f"{said[fastest.name]}, {format_time(fastest.paid_s)}, {pace}: the job does not fit in GPU memory in that "
            f"form (its ZeRO state sharded over fewer ranks) and fits in this one (nccl.dp_reduction = auto)"]


def _loss_note(loss_s: float, lay: ParallelLayout, one: StepResult) -> str:
    """The assumptions' line on the logged loss's all-reduce across the sites (:data:`.dp_across.LOSS_BYTES`): its
    seconds and what the last stage's next fill hides (:func:`loss_fill_s`; ``lay`` and ``one``: the share)."""
    fill = loss_fill_s(lay, one.breakdown_s["compute"])
    hid = (f", {format_time(max(0.0, loss_s - fill))} of it exposed (the rest behind the last stage's next fill of "
           f"{format_time(fill)})" if lay.pp > 1 else ", exposed (pp 1: the next step's first forward waits for it)")
    return (f"dp across sites: the logged loss's all-reduce ({LOSS_BYTES} bytes over the data x context group of "
            f"the last pipeline stage, Megatron's train_step, every step after the optimizer's) crosses the sites in "
            f"either form: {format_time(loss_s)}{hid}; pp and outer across sites: inside each site")


def _ring_carries(V: ReplicaBytes) -> str:
    """What the flat ring carries across the sites (:meth:`.dp_across.ReplicaBytes.ring_crossing_bytes`), in words."""
    parts = [what for what, b in (("the gradients' all-reduce", V.all_reduce_bytes),
                                  ("the gradients' reduce-scatter", V.reduce_scatter_bytes),
                                  ("the parameters' all-gather", V.all_gather_bytes)) if b > 0]
    return " and ".join(parts) or "nothing"


_PP_ACROSS = "pp across sites: DP stays inside each site at its per-site degree; the fill and drain pay the crossing"


def _refuse_site_failures(region: Region, fabric, lay: ParallelLayout) -> None:
    """One site's share ``lay`` placed on ``fabric`` past its failed parts, else its refusal naming the site."""
    if not fabric.failures:
        return
    placed, _ = default_placement(lay, fabric.spec.gpus_per_domain, fabric.layout.num_gpus)
    try:
        refuse_failed_gpus(placed, fabric.spec.gpus_per_domain, fabric.failures, fabric.layout.num_gpus)
    except TopoError as exc:
        raise site_failure(region, fabric, exc) from None
