"""Failures, checkpoints and goodput.

- **Interruptions** per GPU-hour from a published failure table (default: Llama 3's 419 unexpected interruptions
  in 54 days on 16,384 H100, Table 5, planner.md lines 49-57): rate = count / (GPUs x hours). At N GPUs the job's
  mean time between interruptions (MTBF) is 1 / (rate x N): about 30 minutes at 100,000 GPUs. N is the job's GPUs
  when a job is named (its interruptions come from the parts it uses: its GPUs' servers, their NICs and the switches
  and cables the table counts per GPU; Llama 3's own 7.76 a day on 16,384 of a 24,576-GPU cluster), else every GPU
  of the cluster; the cluster's figure is reported beside the job's. ``rate_scale`` multiplies every cause (a
  sweep's one knob for the interruption rate; 1: the table as observed).
- **Optics**: modules fail independently with a mean time to failure (MTTF) each (planner.md line 26); the
  expected time to the first failure among n modules is MTTF / n. A module on a GPU's link takes that GPU's rail out
  and stops the job, at either end: the NIC-side module and the first tier's module on the link (a twin-port module
  there serves two GPUs' links, as a twin-port NIC cage does). A switch-to-switch link's is routed around. The job's
  figure counts both ends of every GPU link; SemiAnalysis' figure (NIC-side modules only: 5 years / 100,000 links =
  26.28 min; twin-port 4 years / 50,000 = 42.05 min) is reported beside it, and every module's figure too. How optics
  enter the interruption rate is a catalog choice (``reliability.optics``): ``table`` keeps Llama 3's observed
  "network switch or cable" row (35 in 54 days), which already counts them; ``parts`` replaces that row by the
  modules on GPU links at their MTTF. Either way the all-cause MTBF with optics as parts is reported beside the
  one used, and the *reconciliation*: the MTTF per GPU link that Llama 3's row implies, against the catalog's.
- **Checkpoint**: size = parameters x bytes per parameter (14 for mixed-precision Adam, planner.md line 61); each
  GPU's shard = size / the interrupting GPUs (each writes an equal part, as Megatron's fully_parallel_save spreads
  one save over the data-parallel ranks; Llama 3 gives 1 MB - 4 GB per GPU, planner.md line 64). The
  training stall per checkpoint is the write to storage (``sync``: size / write bandwidth) or only the copy to host
  memory (``async`` and ``in_memory``: size per GPU / snapshot bandwidth; storage is written in the background, so
  the interval is at least the write time). Young's interval T = sqrt(2 x stall x MTBF) (Young, CACM 1974).
- **Per interruption** (MegaScale, NSDI'24, and Llama 3 report these apart): detection (a hung collective's
  timeout), restart (reschedule, warm up; plus the repair time when hot spares run short), reload (the checkpoint
  read back: size / storage read bandwidth, or from peers' memory with ``in_memory``), and catch-up (the work since
  the last checkpoint: about T/2 while T is short against the MTBF).
- **Goodput** = work / wall time of the renewal model (:mod:`topo.plan.renewal`: failures strike during work,
  checkpoints and recovery alike; a failure during recovery starts it again), at its optimum work between
  checkpoints, or at a site's own interval (``interval_s``, a policy: the same renewal formula at that T, the
  optimum and its goodput reported beside it, so the policy's cost shows). The first-order form 1 - stall/T -
  (detection + restart + reload + T/2)/MTBF at Young's T
  (planner.md lines 58-60) is reported beside it: it undercounts goodput once the recovery is a fair part of the
  MTBF (53.6% against 62.7% on the 100k default). A sensitivity halves and doubles each input.
- **Hot spares**: a failed server is swapped for a spare; if fewer spares are kept than servers expected to be in
  repair at once (hardware failure rate x repair time), a restart also waits ``repair_s``. The spares are
  ``hot_spare_fraction`` of the servers, at most those a named job leaves idle; but where the job's placement leaves
  whole servers idle inside each NVLink domain it uses (64 of an NVL72 rack's 72 GPUs: 2 trays a rack), those are
  its spares, each for its own domain (:func:`_domain_spares`), checked against the repairs expected in the job's
  fullest domain, not the job's (:func:`_in_repair_per_domain`; a job that fills its domains keeps the fraction
  rule, and the plan's note says it keeps none inside them). A whole domain's failure (an NVL72 rack's NVLink
  switch tray, power or cooling) needs an idle whole domain (``idle_domains``); the failure table (Llama 3's, on
  8-GPU servers) has no such cause and no rate for one is published, so it is not priced. Spare servers do not
  train: effective compute = FLOP x goodput x (GPUs - spare GPUs) / GPUs; with a named job, FLOP x goodput x
  job GPUs / GPUs (the GPUs it leaves beside the spares are idle to it: no job of its size fits in them).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import numpy as np

from ..errors import TopoError
from ..units import format_time, whole_bytes
from .renewal import optimum_work_s, renewal_goodput, segment_time_parts_s

__all__ = ["LOST_PART_LABELS", "Reliability", "reliability", "joint_reliability", "interruption_rate_per_gpu_h", "first_failure_s", "young_interval_s",
           "lost_fraction", "SECONDS_PER_YEAR", "OPTICS_CAUSE"]

SECONDS_PER_YEAR = 365 * 86_400
HARDWARE_CAUSES = ("gpu", "nic", "host")  # causes that take a server out until it is swapped or repaired
NETWORK_CAUSE = "network"  # the failure table's row for switches, cables and optics
OPTICS_CAUSE = "optics (NIC-side modules)"


def interruption_rate_per_gpu_h(causes: dict[str, float], observed_gpus: float, observed_days: float
                                ) -> dict[str, float]:
    """Interruptions per GPU-hour for each cause of a failure table."""
    gpu_hours = observed_gpus * observed_days * 24
    return {k: v / gpu_hours for k, v in causes.items()}


def first_failure_s(mttf_s: float, n: float) -> float:
    """Expected time to the first failure among ``n`` independent parts of mean life ``mttf_s`` each."""
    return mttf_s / n if n else math.inf


def young_interval_s(write_s: float, mtbf_s: float) -> float:
    """Young's (1974) first-order optimum checkpoint interval sqrt(2 x write time x MTBF)."""
    return math.sqrt(2 * write_s * mtbf_s)


def lost_fraction(interval_s, write_s: float, restart_s: float, mtbf_s: float):
    """Expected fraction of time lost: stall/T + T/(2 MTBF) + per-interruption time/MTBF (vectorised over T);
    ``write_s`` is the training stall per checkpoint, ``restart_s`` everything an interruption costs besides the
    catch-up (detection, restart, reload)."""
    T = np.asarray(interval_s, dtype=float)
    return write_s / T + T / (2 * mtbf_s) + restart_s / mtbf_s


# the words text uses for the keys of Reliability.lost_fraction_by_part (the JSON keys are snake_case names)
LOST_PART_LABELS = {"checkpoint_stall": "checkpoint stall", "catch_up": "catch-up"}


@dataclass(frozen=True)
class Reliability:
    """Failures, checkpoints and goodput of one design (times in seconds)."""

    interruptions_per_day: float  # of the interrupting GPUs' parts (the job's, or the cluster's without a job)
    interruptions_per_day_by_cause: dict[str, float]
    mtbf_s: float
    interruptions_of: str  # "job" (a named job's GPUs) or "cluster" (every GPU)
    interrupting_gpus: int  # the GPUs whose parts' failures interrupt: the job's, or every GPU
    cluster_interruptions_per_day: float  # every GPU of the cluster, for comparison (= the above without a job)
    cluster_interruptions_per_day_by_cause: dict[str, float]
    rate_scale: float  # the factor on every cause (1: the failure table as observed)
    optics_in_interruptions: str  # "table" or "parts"
    optical_modules: int  # every module of the bill of materials
    first_optical_failure_s: float  # among every module
    nic_optical_modules: int  # NIC-side
    first_nic_optics_failure_s: float  # among the NIC-side modules alone (SemiAnalysis' figure)
    job_optical_modules: int  # on GPU links, both ends (NIC and first tier): a failure stops the job
    first_job_optics_failure_s: float  # among the modules on GPU links, both ends
    optics_parts_per_day: float  # failures a day of the modules on GPU links at their MTTF
    mtbf_optics_as_parts_s: float  # the all-cause MTBF with the table's network row replaced by those modules
    table_network_per_day: float  # the failure table's network row, at this cluster's size
    table_network_mttf_years_per_gpu_link: float  # the MTTF per GPU link the table's network row implies
    params: float
    params_source: str
    checkpoint_bytes: float
    # the checkpoint over the interrupting GPUs (the job's, or every GPU): each writes (and, async or in_memory, copies
    # to host memory) an equal shard, as Megatron's fully_parallel_save spreads one save over the data-parallel ranks
    checkpoint_per_gpu_bytes: float
    checkpoint_mode: str
    checkpoint_write_s: float  # to storage
    checkpoint_stall_s: float  # training stopped per checkpoint
    checkpoint_interval_s: float  # work between checkpoints: the renewal optimum (at least the background write),
    # or the site's own interval (checkpoint_interval_of "policy")
    checkpoint_interval_of: str  # "optimum" (the renewal optimum) or "policy" (the interval_s given)
    optimum_interval_s: float  # the renewal optimum, whichever interval is used
    goodput_at_optimum: float  # the renewal goodput at the optimum (= goodput without a policy)
    young_interval_s: float  # Young's first-order interval, for comparison
    detection_s: float
    restart_s: float  # including a wait for repair when spares run short
    reload_s: float
    catch_up_s: float  # expected work redone per failure
    hot_spare_servers: int
    servers_in_repair: float  # expected at any time
    spares_enough: bool
    lost_fraction: float
    lost_fraction_by_part: dict[str, float]  # fractions of wall time: checkpoint_stall, detection, restart, reload,
    # catch_up (LOST_PART_LABELS: their words in text)
    goodput: float  # the renewal model's (failures during recovery included)
    goodput_first_order: float  # 1 - stall/T - (recovery + T/2)/MTBF at Young's T, clamped at 0, for comparison
    training_gpus: int
    effective_flop: float
    goodput_vs_interval: dict  # {"interval_s": [...], "goodput": [...]}: the optimum / 10 to x 10
    sensitivity: list[dict] = field(default_factory=list)  # each input halved and doubled
    # whole servers a named job leaves free (None: no job): the idle servers the hot spares are taken from (tidy94)
    free_servers: int | None = None
    # where the hot spares are (spares132): "fraction" (hot_spare_fraction of the servers, at most the idle ones) or
    # "domains" (the idle servers inside the NVLink domains a job placed at fewer GPUs than each holds uses: 2 trays
    # of each NVL72 rack at 64 of 72, each a spare for its own rack's server failures)
    hot_spares_of: str = "fraction"
    job_domains: int | None = None  # NVLink domains the job's GPUs are in (None: no job or no placement given)
    # whole NVLink domains the job leaves idle (None: no job or no placement given): what a failure of a whole domain
    # (an NVL72 rack's NVLink switch tray, power shelf or coolant loop) needs to re-place the job; not priced
    idle_domains: int | None = None
    # plan134: servers expected in repair at once in the job's fullest NVLink domain (its GPUs there at the hardware
    # causes' rates x repair_s), the figure its own idle servers are checked against (None: spares not "domains")
    servers_in_repair_per_domain: float | None = None

    @property
    def spares_per_domain(self) -> int | None:
        """The hot spares inside each of the job's NVLink domains where they are kept there (``hot_spares_of``
        "domains": ``hot_spare_servers`` = ``job_domains`` x this, :func:`_domain_spares`); None else. The one place
        the plan's words divide them (rev110: written twice)."""
        if self.hot_spares_of != "domains" or not self.job_domains:
            return None
        return self.hot_spare_servers // self.job_domains

    def to_dict(self) -> dict:
        return whole_bytes(asdict(self))


def _best_work_s(stall_s: float, mtbf_s: float, min_work_s: float) -> float:
    """The renewal optimum of work between checkpoints, at least ``min_work_s`` (1 s when nothing stalls)."""
    if stall_s <= 0:
        return max(min_work_s, 1.0)
    return max(optimum_work_s(stall_s, mtbf_s), min_work_s)


def _goodput_parts(stall_s, min_interval_s, per_failure_s: dict[str, float], mtbf_s, interval_s=None):
    """(work between checkpoints, goodput, lost fraction by part) at the renewal optimum, or at ``interval_s`` (a
    policy; at least ``min_interval_s``: a sensitivity's doubled checkpoint may outlast it, and the next
    checkpoint then waits for the write); the recovery's expected time is split between its parts in proportion to
    their durations."""
    T = _best_work_s(stall_s, mtbf_s, min_interval_s) if interval_s is None else max(interval_s, min_interval_s)
    recovery = sum(per_failure_s.values())
    t = segment_time_parts_s(T, stall_s, recovery, mtbf_s)
    total = sum(t.values())
    parts = {"checkpoint_stall": t["stall"] / total}
    parts.update({k: (t["recovery"] * v / recovery / total if recovery else 0.0) for k, v in per_failure_s.items()})
    parts["catch_up"] = t["redone"] / total
    return T, T / total, parts


def _rates_per_h(causes, observed_gpus, observed_days, num_gpus, optics, optics_per_s):
    """Interruptions per hour by cause at ``num_gpus`` (the network row replaced by the optics with ``parts``)."""
    rates = interruption_rate_per_gpu_h(causes, observed_gpus, observed_days)
    per_h = {k: r * num_gpus for k, r in rates.items()}
    if optics == "parts":
        per_h.pop(NETWORK_CAUSE, None)
        per_h[OPTICS_CAUSE] = optics_per_s * 3600
    return rates, per_h


def _failures_per_s(modules) -> float:
    return sum(n / (y * SECONDS_PER_YEAR) for n, y in modules if n)


def _sensitivity(base: dict, evaluate) -> list[dict]:
    """Goodput with each input halved and doubled (a checkpoint twice as big: twice the stall, write and reload)."""
    sens = []
    for label, key in (("interruption rate", "mtbf"), ("detection time", "detect"), ("restart time", "rest"),
                       ("checkpoint size", "stall")):
        row = {"input": label}
        for tag, f in (("half", 0.5), ("double", 2.0)):
            kw = dict(base)
            if key == "mtbf":
                kw["mtbf"] = base["mtbf"] / f  # twice the rate: half the MTBF
            elif key == "stall":
                kw.update(stall=base["stall"] * f, reload=base["reload"] * f, min_interval=base["min_interval"] * f)
            else:
                kw[key] = base[key] * f
            row[f"goodput_{tag}"] = evaluate(**kw)[1]
        sens.append(row)
    return sens


def reliability(num_gpus: int, gpus_per_server: int, *, causes: dict[str, float], observed_gpus: float,
                observed_days: float, modules: list[tuple[int, float]], nic_modules: list[tuple[int, float]],
                job_modules: list[tuple[int, float]] | None = None, optics: str = "table", params: float,
                params_source: str = "", bytes_per_param: float, write_Bps: float, detection_s: float = 0.0,
                restart_s: float, repair_s: float, hot_spare_fraction: float, flop: float, mode: str = "sync",
                snapshot_Bps: float = math.inf, reload_Bps: float = math.inf,
                job_gpus: int | None = None, rate_scale: float = 1.0, interval_s: float | None = None,
                gpus_per_domain: int | None = None, gpus_per_domain_used: int | None = None) -> Reliability:
    """Failures, checkpoint and goodput of a cluster of ``num_gpus`` (see the module doc for every formula).

    Parameters
    ----------
    causes, observed_gpus, observed_days : the failure table (counts per cause over GPUs x days).
    modules, nic_modules, job_modules : (count, MTTF in years) per transceiver line: all of them, the NIC-side
        ones, and those on GPU links at both ends (default: the NIC-side ones), over the whole cluster.
    optics : ``"table"`` (the table's network row stands) or ``"parts"`` (it is replaced by ``job_modules``).
    params, bytes_per_param : the checkpointed model.
    write_Bps, reload_Bps, snapshot_Bps : storage write and read, device-to-host copy per GPU.
    detection_s, restart_s, repair_s : per interruption; repair only when spares run short.
    mode : ``"sync"``, ``"async"`` or ``"in_memory"`` checkpoints.
    job_gpus : the GPUs a named job holds (None: no job). Its interruptions come from its own GPUs' parts: the
        table's rates at ``job_gpus`` and the modules on its GPU links (their share ``job_gpus / num_gpus``); the
        cluster's rate is reported beside. Hot spares are whole servers the job leaves free:
        ``min(floor(hot_spare_fraction x servers), (num_gpus - job_gpus) // gpus_per_server)``, so a job that fills
        every GPU has none, and each hardware failure then waits for its repair (``restart_s + repair_s``).
    rate_scale : multiplies every cause of the failure table (> 0; 1: as observed).
    interval_s : a site's own work between checkpoints (s; None: the renewal optimum). The goodput, its parts and
        the sensitivity are priced at it; ``optimum_interval_s`` and ``goodput_at_optimum`` give the optimum beside.
    gpus_per_domain, gpus_per_domain_used : the NVLink domain's GPUs and how many of each the named job's placement
        uses (None: not given). Where the placement leaves whole servers idle inside each domain it uses (a job at 64
        of each NVL72 rack's 72 GPUs: 2 of 18 trays), those are the hot spares (:func:`_domain_spares`), not
        ``hot_spare_fraction``'s; ``idle_domains`` counts the whole domains the job leaves.

    Raises
    ------
    TopoError
        when ``rate_scale`` is not positive, nothing fails (every cause and, with ``parts``, every module at 0), or
        ``interval_s`` is not positive and finite, is shorter than an async write (in_memory copy), or spans more
        than 40 MTBFs.
    """
    gpus, of, causes, job_modules = _scope(num_gpus, job_gpus, causes, rate_scale,
                                           nic_modules if job_modules is None else job_modules)
    optics_per_s = _failures_per_s(job_modules)
    rates, per_h = _rates_per_h(causes, observed_gpus, observed_days, gpus, optics, optics_per_s)
    total_per_h = _some_failure_per_h(per_h, causes)
    mtbf_s = 3600 / total_per_h
    ckpt = params * bytes_per_param
    per_gpu = ckpt / gpus
    write_s, stall_s, min_T, reload_s = _checkpoint_s(ckpt, per_gpu, mode, write_Bps, snapshot_Bps, reload_Bps)
    free = _free_servers(num_gpus, gpus_per_server, job_gpus)
    domains = _domain_spares(num_gpus, gpus_per_server, gpus_per_domain, job_gpus, gpus_per_domain_used)
    spares, in_repair, per_domain, enough = _spares_check(
        domains, rates, per_h, repair_s, gpus, gpus_per_domain, gpus_per_domain_used,
        lambda: _hot_spares(num_gpus, gpus_per_server, hot_spare_fraction, free))
    training = _training_gpus(num_gpus, gpus_per_server, spares, job_gpus)
    return Reliability(
        interruptions_per_day=total_per_h * 24, interruptions_per_day_by_cause={k: v * 24 for k, v in per_h.items()},
        mtbf_s=mtbf_s, interruptions_of=of, interrupting_gpus=gpus, rate_scale=rate_scale,
        cluster_interruptions_per_day=total_per_h * 24 * (num_gpus / gpus),
        cluster_interruptions_per_day_by_cause={k: v * 24 * (num_gpus / gpus) for k, v in per_h.items()},
        optics_in_interruptions=optics,
        **_optics_fields(modules, nic_modules, job_modules, total_per_h, per_h, rates, gpus),
        params=params, params_source=params_source, checkpoint_bytes=ckpt, checkpoint_per_gpu_bytes=per_gpu,
        checkpoint_mode=mode,
        checkpoint_write_s=write_s, hot_spare_servers=spares, servers_in_repair=in_repair, spares_enough=enough,
        training_gpus=training, free_servers=free, hot_spares_of="domains" if domains["in_domains"] else "fraction",
        job_domains=domains["job_domains"], idle_domains=domains["idle_domains"],
        servers_in_repair_per_domain=per_domain,
        **_goodput_fields(mtbf_s, stall_s, min_T, detection_s, restart_s + (0.0 if enough else repair_s),
                          reload_s, flop * training / num_gpus, interval_s))


def _spares_check(domains: dict, rates: dict, per_h: dict, repair_s: float, gpus: int,
                  gpus_per_domain: int | None, gpus_per_domain_used: int | None, fraction_spares) -> tuple:
    """The hot spares, the servers expected in repair (the job's; its fullest domain's where the spares are idle
    servers inside the domains) and whether the spares cover them: ``(spares, in_repair, per_domain, enough)``.

    A domain's idle servers spare only that domain (plan134), so the fullest domain's repairs are checked against
    its own spares, not the job's repairs against every domain's; ``fraction_spares`` (a callable) gives the
    fraction rule's count where the placement leaves no idle server inside its domains.
    """
    spares = domains["in_domains"] or fraction_spares()
    in_repair = sum(per_h.get(k, 0.0) for k in HARDWARE_CAUSES) / 3600 * repair_s
    if not domains["in_domains"]:
        return spares, in_repair, None, spares >= in_repair
    per_domain = _in_repair_per_domain(rates, min(gpus_per_domain_used, gpus_per_domain, gpus), repair_s)
    return spares, in_repair, per_domain, domains["in_domains"] // domains["job_domains"] >= per_domain


def _goodput_fields(mtbf_s: float, stall_s: float, min_T: float, detection_s: float, restart_s: float,
                    reload_s: float, training_flop: float, interval_s: float | None = None) -> dict:
    """The goodput fields of :class:`Reliability` from the MTBF, the checkpoint's stall and shortest interval and
    the times of one interruption: the renewal optimum and its parts, Young's first-order figure beside it, the
    curve against the interval and the sensitivity; ``training_flop`` is the FLOP of the GPUs that train (times
    the goodput: the effective FLOP). With ``interval_s`` (a site's policy) every figure is at that work between
    checkpoints, the sensitivity too, and the optimum and its goodput are reported beside it. One site's plan and a
    region's (:func:`joint_reliability`) both end here."""

    def evaluate(mtbf, stall, detect, rest, reload, min_interval):
        return _goodput_parts(stall, min_interval, {"detection": detect, "restart": rest, "reload": reload}, mtbf,
                              interval_s)

    _refuse_endless_recovery(mtbf_s, stall_s, detection_s + restart_s + reload_s)
    recovery = detection_s + restart_s + reload_s
    if interval_s is not None:
        _check_interval(interval_s, min_T, stall_s, mtbf_s)
    base = dict(mtbf=mtbf_s, stall=stall_s, detect=detection_s, rest=restart_s, reload=reload_s, min_interval=min_T)
    T, goodput, parts = evaluate(**base)
    best = _best_work_s(stall_s, mtbf_s, min_T)
    young = max(young_interval_s(stall_s, mtbf_s), min_T) if stall_s > 0 else max(min_T, 1.0)
    first_order = float(max(0.0, 1.0 - lost_fraction(young, stall_s, recovery, mtbf_s)))
    grid = best * np.logspace(-1, 1, 41)
    curve = {"interval_s": grid.tolist(), "goodput": renewal_goodput(grid, stall_s, recovery, mtbf_s).tolist()}
    return dict(checkpoint_stall_s=stall_s, checkpoint_interval_s=T,
                checkpoint_interval_of="optimum" if interval_s is None else "policy", optimum_interval_s=best,
                goodput_at_optimum=float(renewal_goodput(best, stall_s, recovery, mtbf_s)), young_interval_s=young,
                detection_s=detection_s, restart_s=restart_s, reload_s=reload_s,
                catch_up_s=mtbf_s - (T + stall_s) / math.expm1((T + stall_s) / mtbf_s),
                lost_fraction=1.0 - goodput, lost_fraction_by_part=parts, goodput=goodput,
                goodput_first_order=first_order, effective_flop=training_flop * goodput,
                goodput_vs_interval=curve, sensitivity=_sensitivity(base, evaluate))


def joint_reliability(sites: list[Reliability], num_gpus: list[int], flop: list[float], exchange_s: float
                      ) -> Reliability:
    """Failures, checkpoints and goodput of one job spanning several sites (a region's), from each site's own
    :class:`Reliability` (its GPUs' interruptions, its share of the job's checkpoint at its own storage's rates).

    - Interruptions: the job stops when any site's parts fail, so the rates add (cause by cause) and
      1 / MTBF = sum of 1 / MTBF_site; the optics' first-failure times combine the same way.
    - Checkpoint: every site writes its share at once (Megatron's fully_parallel_save spreads one save over the
      data-parallel ranks), so the stall, the write and the shortest interval are the slowest site's.
    - Per interruption: detection and restart are the slowest site's (one job waits for all); the reload is the
      slowest site's read of its own share from its own storage, then ``exchange_s``: the shares sent over the
      DCI to the sites that hold them not (Megatron's fully_parallel_load: each rank reads its planned part of the
      checkpoint, then all ranks exchange what they read; NVIDIA/Megatron-LM@008e9cdb53e75bbf9733d0089a5c9bf14553ca1c
      megatron/core/dist_checkpointing/strategies/fully_parallel.py, FullyParallelLoadStrategyWrapper.load,
      steps 3 and 4, in that order).
    - Goodput: the one-site renewal model (:func:`_goodput_fields`) at those figures, at the sites' own checkpoint
      interval where they give one (one job checkpoints at one interval: sites giving different ones are refused).

    Parameters
    ----------
    sites : list of Reliability
        Each site's, in the order of ``num_gpus`` and ``flop`` (alike sites may repeat one object).
    num_gpus, flop : list
        Each site's GPUs and the FLOP its compute line gives them over the plan's days.
    exchange_s : float
        Seconds to send every site the shares it did not read, over the DCI (>= 0).

    Returns
    -------
    Reliability
        Same fields as one site's: "job" (its GPUs on every site) or "cluster" (every GPU of every site).

    Raises
    ------
    TopoError
        when the sites give different checkpoint intervals (``plan.reliability.checkpoint.interval_s``).
    """
    policy_s = _one_interval(sites)
    per_day = _summed_by_cause(r.interruptions_per_day_by_cause for r in sites)
    cluster_per_day = _summed_by_cause(r.cluster_interruptions_per_day_by_cause for r in sites)
    total_per_h = sum(per_day.values()) / 24
    mtbf_s = 3600 / total_per_h
    n = sum(r.interrupting_gpus for r in sites)
    of = "job" if any(r.interruptions_of == "job" for r in sites) else "cluster"
    modes = {r.checkpoint_mode for r in sites}
    min_T = max({"sync": 0.0, "async": r.checkpoint_write_s, "in_memory": r.checkpoint_stall_s}[r.checkpoint_mode]
                for r in sites)
    net_per_day = sum(r.table_network_per_day for r in sites)
    first = sites[0]
    spares = sum(r.hot_spare_servers for r in sites)
    training = sum(r.training_gpus for r in sites)
    free = None if any(r.free_servers is None for r in sites) else sum(r.free_servers for r in sites)
    return Reliability(
        interruptions_per_day=total_per_h * 24, interruptions_per_day_by_cause=per_day, mtbf_s=mtbf_s,
        interruptions_of=of, interrupting_gpus=n, cluster_interruptions_per_day=sum(cluster_per_day.values()),
        cluster_interruptions_per_day_by_cause=cluster_per_day, rate_scale=first.rate_scale,
        optics_in_interruptions=first.optics_in_interruptions, **_joint_optics(sites),
        table_network_per_day=net_per_day,
        table_network_mttf_years_per_gpu_link=n / (net_per_day * 365) if net_per_day else math.inf,
        params=first.params, params_source=first.params_source, checkpoint_bytes=first.checkpoint_bytes,
        checkpoint_per_gpu_bytes=first.checkpoint_bytes / n,
        checkpoint_mode=first.checkpoint_mode if len(modes) == 1 else "/".join(sorted(modes)),
        checkpoint_write_s=max(r.checkpoint_write_s for r in sites), hot_spare_servers=spares,
        servers_in_repair=sum(r.servers_in_repair for r in sites), spares_enough=all(r.spares_enough for r in sites),
        training_gpus=training, free_servers=free, **_joint_domains(sites),
        **_goodput_fields(mtbf_s, max(r.checkpoint_stall_s for r in sites), min_T,
                          max(r.detection_s for r in sites), max(r.restart_s for r in sites),
                          max(r.reload_s for r in sites) + exchange_s,
                          sum(f * r.training_gpus / g for f, r, g in zip(flop, sites, num_gpus)),
                          policy_s))


def _joint_optics(sites: list[Reliability]) -> dict:
    """The optics' fields of a job over several sites: the modules add, the first failure is the soonest site's."""
    return dict(
        optical_modules=sum(r.optical_modules for r in sites),
        first_optical_failure_s=_first_of(r.first_optical_failure_s for r in sites),
        nic_optical_modules=sum(r.nic_optical_modules for r in sites),
        first_nic_optics_failure_s=_first_of(r.first_nic_optics_failure_s for r in sites),
        job_optical_modules=sum(r.job_optical_modules for r in sites),
        first_job_optics_failure_s=_first_of(r.first_job_optics_failure_s for r in sites),
        optics_parts_per_day=sum(r.optics_parts_per_day for r in sites),
        mtbf_optics_as_parts_s=_first_of(r.mtbf_optics_as_parts_s for r in sites))


def _joint_domains(sites: list[Reliability]) -> dict:
    """Where a job over several sites keeps its hot spares and its NVLink domains: each site's by its own rule
    (:func:`_domain_spares`), so "domains" only when every site keeps them inside its domains; the domains add; the
    repairs expected in one domain are the busiest site's (plan134)."""
    def total(key):
        values = [getattr(r, key) for r in sites]
        return None if any(v is None for v in values) else sum(values)
    of = {r.hot_spares_of for r in sites}
    per_domain = [r.servers_in_repair_per_domain for r in sites]
    return dict(hot_spares_of=of.pop() if len(of) == 1 else "/".join(sorted(of)), job_domains=total("job_domains"),
                idle_domains=total("idle_domains"),
                servers_in_repair_per_domain=None if None in per_domain else max(per_domain))


def _one_interval(sites: list[Reliability]) -> float | None:
    """The checkpoint interval the sites give (``plan.reliability.checkpoint.interval_s``), None where none does:
    one job checkpoints at one interval, so sites giving different ones are refused."""
    policies = sorted({r.checkpoint_interval_s for r in sites if r.checkpoint_interval_of == "policy"})
    if len(policies) > 1:
        shown = ", ".join(format_time(x, zeros=False) for x in policies)
        raise TopoError(f"the sites give different checkpoint intervals ({shown}); one job checkpoints at one "
                        "interval: give one value for every site", key=_INTERVAL_KEY)
    return policies[0] if policies else None


def _summed_by_cause(tables) -> dict[str, float]:
    """Interruptions a day per cause, summed over several sites' tables (any site's failure stops the job)."""
    out: dict[str, float] = {}
    for table in tables:
        for k, v in table.items():
            out[k] = out.get(k, 0.0) + v
    return out


def _first_of(times_s) -> float:
    """The expected time to the first of several independent exponential clocks: 1 / the sum of their rates."""
    rate = sum(1 / t for t in times_s if t > 0 and not math.isinf(t))
    return 1 / rate if rate else math.inf


def _some_failure_per_h(per_h: dict[str, float], causes: dict[str, float]) -> float:
    """The all-cause interruptions an hour, refused when 0: the goodput would be 100%."""
    total_per_h = sum(per_h.values())
    if not total_per_h > 0:
        raise TopoError(f"every failure rate is 0 ({', '.join(f'{k} = {v:g}' for k, v in causes.items())}): the "
                        "job would never be interrupted and its goodput would be 100%; give at least one cause a "
                        "positive count (Llama 3 Table 5 saw 419 in 54 days on 16,384 GPUs)",
                        key="plan.reliability.causes")
    return total_per_h


# Beyond this many MTBFs of one recovery plus one checkpoint stall the goodput is below e^-40 (4e-18): the renewal
# goodput is at most e^(-lambda (R + C)) (renewal.py), and e^(lambda x) overflows a float past 709 MTBFs
_MAX_MTBFS_PER_RECOVERY = 40.0


def _refuse_endless_recovery(mtbf_s: float, stall_s: float, recovery_s: float) -> None:
    """Refuse a job that fails many times over during each restart and checkpoint (a failure table in the wrong
    unit: thousands of GPUs, hours for days): it would never train, and its goodput is below double precision."""
    if (recovery_s + stall_s) / mtbf_s > _MAX_MTBFS_PER_RECOVERY:
        raise TopoError(f"the job is interrupted every {format_time(mtbf_s)} ({86_400 / mtbf_s:,.0f} a day), but "
                        f"one recovery takes {format_time(recovery_s)} and one checkpoint stalls "
                        f"{format_time(stall_s)}: it would never "
                        f"get past a restart (goodput below 1e-17); check the failure table's units "
                        "(observed_gpus: GPUs, observed_days: days, causes: interruptions in that window, rate_scale: "
                        "a factor; Llama 3 saw 419 in 54 days on 16,384 GPUs)", key="plan.reliability")


_INTERVAL_KEY = "plan.reliability.checkpoint.interval_s"


def _check_interval(interval_s: float, min_interval_s: float, stall_s: float, mtbf_s: float) -> None:
    """Refuse a site's checkpoint interval (work between checkpoints, s) that is not a positive finite number, that
    is shorter than the background write (async) or copy (in_memory) a checkpoint must finish before the next one
    starts (Megatron-LM's async writer takes one checkpoint at a time, NVIDIA/Megatron-LM@008e9cdb53e75bbf9733d0089a5
    c9bf14553ca1c megatron/core/dist_checkpointing/strategies/async_utils.py PersistentAsyncCaller.schedule_async_call,
    lines 397-423: every request on one queue to one process; more often than one write, they queue without end,
    which the renewal model does not price), or so long that a segment spans more than
    :data:`_MAX_MTBFS_PER_RECOVERY` MTBFs (the job would almost never reach a checkpoint, and e^(lambda (T + C))
    overflows past 709). A sync checkpoint shorter than its own write is priced, not refused: the job then stalls
    longer than it works, which the goodput shows."""
    if not (isinstance(interval_s, (int, float)) and math.isfinite(interval_s) and interval_s > 0):
        raise TopoError(f"must be a positive finite number of seconds of work between checkpoints, got {interval_s!r}",
                        key=_INTERVAL_KEY)
    if interval_s < min_interval_s:
        floor = format_time(min_interval_s)
        raise TopoError(f"checkpoints every {format_time(interval_s, zeros=False)}, but one checkpoint's background "
                        f"write (async) or copy (in_memory) takes {floor} and the writer takes one at a time "
                        "(Megatron-LM's async checkpoint queue): they would queue without end; allowed: at least "
                        f"{floor}, or plan.reliability.checkpoint.mode = \"sync\"", key=_INTERVAL_KEY)
    if (interval_s + stall_s) / mtbf_s > _MAX_MTBFS_PER_RECOVERY:
        most = format_time(_MAX_MTBFS_PER_RECOVERY * mtbf_s - stall_s)
        raise TopoError(f"checkpoints every {format_time(interval_s, zeros=False)} of work, but the job is "
                        f"interrupted every {format_time(mtbf_s)}: it would almost never reach a checkpoint (goodput "
                        f"below 1e-16); allowed: at most {most} (40 MTBFs); a value in ms?", key=_INTERVAL_KEY)


def _training_gpus(num_gpus: int, gpus_per_server: int, spares: int, job_gpus: int | None) -> int:
    """The GPUs whose hours train: every GPU not held as a hot spare, or a named job's own GPUs (plan70: the GPUs
    it leaves idle hold no job of its size, so they deliver none of its work at its goodput)."""
    free = num_gpus - spares * gpus_per_server
    return free if job_gpus is None else min(job_gpus, free)


def _free_servers(num_gpus: int, gpus_per_server: int, job_gpus: int | None) -> int | None:
    """Whole servers a named job leaves free, ``(num_gpus - job_gpus) // gpus_per_server`` (None: no job); a job at
    64 of each NVL72 rack's 72 GPUs leaves 2 of its 18 four-GPU trays (tidy94).

    >>> _free_servers(288, 4, 256), _free_servers(288, 4, 288), _free_servers(288, 4, None)
    (8, 0, None)
    """
    return None if job_gpus is None else max(0, num_gpus - job_gpus) // gpus_per_server


def _domain_spares(num_gpus: int, gpus_per_server: int, gpus_per_domain: int | None, job_gpus: int | None,
                   gpus_per_domain_used: int | None) -> dict:
    """A placed job's NVLink domains: ``job_domains`` = ceil(job GPUs / GPUs used of each), ``idle_domains`` = the
    fabric's domains less those, and ``in_domains`` = ``job_domains`` x the whole servers the placement leaves idle
    inside each, (domain - used) // GPUs a server (spares132). A failed server's GPUs leave its domain with
    fewer than the job uses of it only when more of its servers are down than that: until then the job re-places
    on its own domain's idle servers, so those are its hot spares, and a server of another domain is not (the job's
    tensor, expert and data groups inside a domain need its NVLink: Megatron-Bridge's GB200 recipes run 64 of each
    72, :func:`topo.training.mapping.recipe_gpus_used`; CoreWeave recommends Slurm segments of at most 16 of an
    NVL72 rack's 18 nodes, docs.coreweave.com/observability/managed-grafana/sunk/slurm-block-topology). A domain of one
    server (HGX: 8 GPUs, a server) or a job that fills its domains leaves none inside them: 0, and the
    ``hot_spare_fraction`` rule holds. No job or no placement: every figure 0 or None.

    >>> _domain_spares(288, 4, 72, 256, 64)
    {'job_domains': 4, 'idle_domains': 0, 'in_domains': 8}
    >>> _domain_spares(1536, 8, 8, 512, 8)
    {'job_domains': 64, 'idle_domains': 128, 'in_domains': 0}
    """
    if job_gpus is None or not gpus_per_domain or not gpus_per_domain_used:
        return {"job_domains": None, "idle_domains": None, "in_domains": 0}
    used = min(gpus_per_domain_used, gpus_per_domain)
    job_domains = -(-min(job_gpus, num_gpus) // used)
    idle = max(0, num_gpus // gpus_per_domain - job_domains)
    return {"job_domains": job_domains, "idle_domains": idle,
            "in_domains": job_domains * ((gpus_per_domain - used) // gpus_per_server)}


def _in_repair_per_domain(rates_per_gpu_h: dict[str, float], domain_job_gpus: int, repair_s: float) -> float:
    """Servers expected in repair at once in one NVLink domain holding ``domain_job_gpus`` of the job's GPUs: each
    hardware cause's interruptions per GPU-hour (the failure table's, :func:`interruption_rate_per_gpu_h`, times
    ``rate_scale``) x those GPUs x the repair time in hours (plan134: checked against that domain's own idle
    servers, which spare no other domain).

    >>> round(_in_repair_per_domain({"gpu": 1e-4, "nic": 1e-5, "host": 0.0, "network": 1.0}, 64, 3600), 6)
    0.00704
    """
    return sum(rates_per_gpu_h.get(k, 0.0) for k in HARDWARE_CAUSES) * domain_job_gpus * repair_s / 3600


def _hot_spares(num_gpus: int, gpus_per_server: int, fraction: float, free_servers: int | None) -> int:
    """Hot-spare servers: ``fraction`` of the servers, at most the whole servers a named job leaves free
    (:func:`_free_servers`; walk26: a job of every GPU held 320 of them as spares)."""
    spares = int(math.floor(fraction * (num_gpus // gpus_per_server)))
    return spares if free_servers is None else min(spares, free_servers)


def _scope(num_gpus: int, job_gpus: int | None, causes: dict[str, float], rate_scale: float,
           job_modules: list[tuple[int, float]]):
    """(interrupting GPUs, "job" or "cluster", the causes times ``rate_scale``, the modules on those GPUs' links):
    a named job's GPUs and its share of the GPU links' modules, else every GPU and every module."""
    if not rate_scale > 0 or math.isinf(rate_scale):
        raise TopoError(f"the interruption rate's scale is {rate_scale:g}; allowed: a positive finite number (1: the "
                        "failure table as observed, 2: twice its rate)", key="plan.reliability.rate_scale")
    causes = {k: v * rate_scale for k, v in causes.items()}
    if job_gpus is None or job_gpus >= num_gpus:
        return num_gpus, ("cluster" if job_gpus is None else "job"), causes, job_modules
    share = job_gpus / num_gpus
    return job_gpus, "job", causes, [(n * share, y) for n, y in job_modules]


def _checkpoint_s(ckpt_bytes: float, per_gpu_bytes: float, mode: str, write_Bps: float, snapshot_Bps: float,
                  reload_Bps: float) -> tuple[float, float, float, float]:
    """A checkpoint's write, the stall it costs the job, the shortest interval between two (an async write must
    end before the next starts; an in-memory snapshot's copy likewise) and the reload after a failure, seconds;
    ``per_gpu_bytes`` is each GPU's shard, copied to host memory at ``snapshot_Bps``."""
    write_s = ckpt_bytes / write_Bps
    per_gpu_s = per_gpu_bytes / snapshot_Bps
    stall_s = write_s if mode == "sync" else per_gpu_s
    min_T = {"sync": 0.0, "async": write_s, "in_memory": per_gpu_s}[mode]
    reload_s = per_gpu_s if mode == "in_memory" else ckpt_bytes / reload_Bps
    return write_s, stall_s, min_T, reload_s


def _optics_fields(modules, nic_modules, job_modules, total_per_h: float, per_h: dict[str, float],
                   rates: dict[str, float], num_gpus: int) -> dict:
    """The optics figures of :class:`Reliability`: modules counted per line and the first failure of each, the
    job's optics as parts in place of the table's network row, and that row as an MTTF per GPU link."""
    optics_per_s = _failures_per_s(job_modules)
    inv_first = _failures_per_s(modules)
    nic_per_s = _failures_per_s(nic_modules)
    as_parts_per_h = total_per_h - per_h.get(NETWORK_CAUSE, 0.0) - per_h.get(OPTICS_CAUSE, 0.0) + optics_per_s * 3600
    return dict(
        optical_modules=int(sum(n for n, _ in modules)),
        first_optical_failure_s=1 / inv_first if inv_first else math.inf,
        nic_optical_modules=int(sum(n for n, _ in nic_modules)),
        first_nic_optics_failure_s=1 / nic_per_s if nic_per_s else math.inf,
        job_optical_modules=int(round(sum(n for n, _ in job_modules))),
        first_job_optics_failure_s=1 / optics_per_s if optics_per_s else math.inf,
        optics_parts_per_day=optics_per_s * 86_400,
        mtbf_optics_as_parts_s=3600 / as_parts_per_h if as_parts_per_h > 0 else math.inf,
        table_network_per_day=rates.get(NETWORK_CAUSE, 0.0) * num_gpus * 24,
        table_network_mttf_years_per_gpu_link=(1 / rates[NETWORK_CAUSE] / 24 / 365
                                               if rates.get(NETWORK_CAUSE) else math.inf))
