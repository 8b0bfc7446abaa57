"""Cost: loads and latency structure become time per size. The third of the engine's stages.

``time(S) = latency(algorithm, protocol) + (S + min(S, W)) / rate``, where the steady ``rate`` (bytes of message
per second) is the routed bottleneck at the protocol's efficiency, capped by NCCL's own per-protocol bus-bandwidth
caps, and the bottleneck of a phase is its most loaded resource's bytes over usable bandwidth (or the max-min fair
makespan): ``seconds per byte = sum over phases (repeat * drain time per byte)``. ``W`` is the profile's pipeline
window (the first bytes go at half speed while NCCL's buffers fill) times the schedule's ``window_scale``. Routing is done once per schedule; a whole
size sweep is arithmetic.

At small sizes NCCL runs a ring or tree on fewer channels and threads (``channel_min_bytes``, :func:`small_channels`,
:func:`ll_threads`); LL's rate is then at most the profile's per-channel LL bus bandwidth on them
(:func:`ll_channels_rate_Bps`, docs/calibration-findings.md section "33x"; no bundled gpu file gives that rate, so it
is off). Off too: a network file
that sets ``proxy_channel_messages`` adds the network proxy's time on the extra channels (:func:`proxy_channels_s`)
to a ring's or tree's latency (section 44); without it the term returns 0 after one attribute test.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import NamedTuple

import numpy as np

from ..fabric.levels import Level
from .contention import drain_time
from .loads import ScheduleLoads
from .nvls_chunk import nvls_tree_chunk_rate_Bps
from .profiles import Profile
from .route import Router
from .schedule import LatencyCounts

__all__ = ["latency_s", "usable_capacity", "class_efficiency", "fill_bytes", "Costed", "cost_schedule", "Limit",
           "LIMITS", "Rate", "rate_limit", "ProtocolTime", "best_protocol", "p2p_protocols", "limit_of",
           "small_channels", "proxy_channels_s", "bus_to_algorithm", "ll_channels_rate_Bps", "ll_threads"]


def latency_s(c: LatencyCounts, routed_s: float, profile: Profile, proto: str) -> float:
    """Latency of a schedule under ``profile`` with protocol ``proto``, by NCCL's formulas (tuning.cc).

    - ring: base + (steps inside domains) * max(NVLink hop, network overhead if the ring leaves the domain)
      + (steps between domains) * network hop
    - tree: base + NVLink hops * NVLink hop + network hops * network hop (the schedule counts
      ``2*((gpus per domain - 1) + log2(domains))`` hops, as NCCL does)
    - nvls: base + the NVLS hop (+ the network NVLS hop across domains); nvls_tree: + network hops * NVLSTree hop
    - collnet (SHARP): base + NVLink hops + one CollNet network latency
    - pat: base + log2(domains) x the Tree's network hop / the profile's ``pat_net_step_divisor`` + ranks x
      ``pat_rank_latency_s`` (one GPU per node, where NCCL prices network steps with the Tree's latency)
    - p2p (textbook steps, sendrecv, all-to-all): base + hops + network overhead per network step
      + per-peer message overhead

    plus, always, ``routed_s``: the routed switch and NIC latencies on the critical path. Every NVLink step costs
    the GPU generation's ``nvlink_hop_extra_s`` over NCCL's constant (Blackwell's, in any domain); in an NVLink
    domain that spans several servers (an NVL72 rack: ``c.mnnvl``) every NVLink step costs the profile's
    ``mnnvl_hop_extra_s`` more, and the collective ``mnnvl_extra_s`` more once. Every collective is one kernel:
    the GPU's fixed cost of a kernel in a queue of back-to-back launches (``launch_s``, as nccl-tests runs them) is
    added once.

    Parameters
    ----------
    c : LatencyCounts
    routed_s : float
        Routed switch and NIC latencies of the critical path.
    profile : Profile
    proto : str
        LL, LL128 or Simple.

    Returns
    -------
    float
        Seconds.
    """
    f = c.family
    base = profile.base(f, proto)
    nv = profile.nv_hop(f, proto) + profile.nvlink_hop_extra_s + (profile.mnnvl_hop_extra_s if c.mnnvl else 0.0)
    net = profile.net_hop(f, proto)
    if f == "ring":
        intra = max(nv, profile.overhead(proto)) if c.multi_domain else nv
        if c.one_per_domain:
            net = profile.net_hop("tree", proto)
        intra_hops, inter_hops = c.intra_hops, c.inter_hops
        if c.ring_allreduce and c.multi_domain and profile.ring_allreduce_wrap_steps:
            k = min(profile.ring_allreduce_wrap_steps, intra_hops)  # NCCL's own step count (tuning.cc)
            intra_hops, inter_hops = intra_hops - k, inter_hops + k
        t = base + intra_hops * intra + inter_hops * net
    elif f == "tree":
        t = base + c.intra_hops * nv + c.inter_hops * net
    elif f == "nvls":
        t = base + nv + (net if c.multi_domain else 0.0)
    elif f == "nvls_tree":
        t = base + nv + c.inter_hops * net
    elif f == "collnet":
        t = base + c.intra_hops * nv + (net if c.multi_domain else 0.0)
    elif f == "pat":  # one GPU per node: the Tree's network step, as NCCL prices every algorithm then
        t = (base + c.inter_hops * profile.net_hop("tree", proto) / profile.pat_net_step_divisor
             + c.ranks * profile.pat_rank_latency_s)
    else:  # p2p
        t = (base + c.intra_hops * nv + c.inter_hops * (net + profile.overhead(proto))
             + c.peers * profile.peer_overhead_s)
    return t + routed_s + profile.launch_s + (profile.mnnvl_extra_s if c.mnnvl else 0.0)


def small_channels(family: str, proto: str, size_bytes: float, channels: int, num_ranks: int,
                   profile: Profile) -> int:
    """The channels NCCL runs a ring or tree collective on at ``size_bytes`` (src/enqueue.cc, channel tuning).

    NCCL starts from its channel count and drops one channel while the message is under channels x
    ``channel_min_bytes`` (threads x bytes per thread; x ranks for ring LL), down to one. Only
    :func:`proxy_channels_s` reads it, and only for a profile that gives ``channel_min_bytes`` (none bundled).

    Parameters
    ----------
    family, proto : str
        The schedule's algorithm family (``ring``, ``tree``, ...) and protocol (``LL``, ``LL128``, ``Simple``).
    size_bytes : float
        The message (NCCL's ``nBytes``).
    channels : int
        The channels the schedule runs at large sizes.
    num_ranks : int
        Ranks of the communicator (ring LL's threshold scales with them).
    profile : Profile
        Its ``channel_min_bytes`` (threads x bytes per thread, by family and protocol) is the rule.

    Returns
    -------
    int
        ``channels`` when the profile gives no rule or the family is not ring or tree.
    """
    per = profile.channel_min_bytes.get(family, {}).get(proto)
    if not per:
        return channels
    if family == "ring" and proto == "LL":
        per = per * max(num_ranks, 1)
    return int(min(channels, max(1, size_bytes // per)))


def proxy_channels_s(sched, profile: Profile, proto: str, size_bytes: float, num_ranks: int) -> float:
    """Time the network proxy spends on the channels NCCL adds as a small message grows.

    One proxy thread per GPU posts every channel's network sends and receives in turn; each costs it half the
    network's per-peer message overhead (``peer_overhead_s``: one send and one receive per remote peer). On a tree
    each network step is one message per channel on each side's proxy; on a ring every GPU sends and receives at
    each step, two messages. Only the channels beyond the first are counted (the first is in the per-step latency).
    The proxy works while data is on the wire, so :func:`best_protocol` counts only what exceeds the transfer time.

    Parameters
    ----------
    sched : Schedule
        The collective's schedule (its family, channels and latency counts: network steps, domains crossed).
    profile : Profile
        ``channel_min_bytes`` and ``peer_overhead_s``.
    proto : str
        ``LL``, ``LL128`` or ``Simple``.
    size_bytes : float
        The message.
    num_ranks : int
        Ranks of the communicator.

    Returns
    -------
    float
        Seconds; 0 for schedules that do not cross the network or are neither ring nor tree, and when the profile
        gives no ``channel_min_bytes`` for them (the bundled NCCL file does not: the term is off by default).
    """
    c = sched.latency
    if (not profile.proxy_channel_messages or sched.family not in ("ring", "tree") or not c.multi_domain
            or profile.peer_overhead_s <= 0
            or not profile.channel_min_bytes.get(sched.family, {}).get(proto)):
        return 0.0
    nc = small_channels(sched.family, proto, size_bytes, sched.channels, num_ranks, profile)
    per_message = profile.peer_overhead_s / 2
    messages = 2 if sched.family == "ring" else 1
    return (nc - 1) * c.inter_hops * messages * per_message


def usable_capacity(router: Router, profile: Profile) -> np.ndarray:
    """Bytes/s of every resource a collective can use: line rate x the profile's efficiency for its class
    (NVLink, PCIe, network).

    Parameters
    ----------
    router : Router
    profile : Profile

    Returns
    -------
    numpy.ndarray
        One value per resource id.
    """
    out = class_efficiency(router, profile)[router.level]
    out *= router.capacity_Bps
    return out


def class_efficiency(router: Router, profile: Profile) -> np.ndarray:
    """The profile's efficiency of each level code's class: the fraction of a link's line rate a collective can
    use (NVLink, PCIe; every level above PCIe is the network).

    Parameters
    ----------
    router : Router
    profile : Profile

    Returns
    -------
    numpy.ndarray
        One value per level code (index it with ``router.level[resource]``).
    """
    by_code = np.full(int(router.level.max(initial=0)) + 1, profile.network_efficiency)
    by_code[Level.NVLINK.code] = profile.nvlink_efficiency
    by_code[Level.PCIE.code] = profile.pcie_efficiency
    return by_code


@dataclass
class Costed:
    """A routed schedule's bandwidth part, per byte of message, and where it is bound.

    Attributes
    ----------
    loads : ScheduleLoads
    seconds_per_byte : float
        Bandwidth part per byte of message, before the protocol's efficiency.
    bottleneck_res : int
        The resource of the phase that takes longest (-1: none).
    bottleneck_bytes_per_byte : float
        Bytes on the bottleneck resource per message byte (whole collective).
    phase_info : list of dict
        Per phase: label, flows, repeat, seconds per byte, bottleneck.
    """

    loads: ScheduleLoads
    seconds_per_byte: float  # bandwidth part per byte, before the protocol's efficiency
    bottleneck_res: int
    bottleneck_bytes_per_byte: float  # bytes on the bottleneck resource per message byte (whole collective)
    phase_info: list[dict]

    @property
    def schedule(self):
        """The schedule these loads route."""
        return self.loads.schedule


def cost_schedule(loads: ScheduleLoads, router: Router, capacity_Bps: np.ndarray, sharing: str) -> Costed:
    """Drain time per byte of message of every phase, summed over phases and repeats.

    Each phase lasts as :func:`topo.engine.contention.drain_time` says under ``sharing``; the phase that takes
    longest names the bottleneck.

    Parameters
    ----------
    loads : ScheduleLoads
    router : Router
    capacity_Bps : numpy.ndarray
        Usable capacity per resource (:func:`usable_capacity`).
    sharing : {"equal", "maxmin"}

    Returns
    -------
    Costed
    """
    total = 0.0
    worst, r_worst = -1.0, -1
    info = []
    for ph in loads.phases:
        if ph.routed is not None and sharing != "equal":
            t, r, _ = drain_time(ph.routed, capacity_Bps, sharing, router.num_res)
        elif ph.res.size:
            per = ph.bytes / capacity_Bps[ph.res]
            k = int(np.argmax(per))
            t, r = float(per[k]), int(ph.res[k])
        else:
            t, r = 0.0, -1
        total += ph.repeat * t
        if ph.repeat * t > worst:
            worst, r_worst = ph.repeat * t, r
        d = router.describe_resource(r) if r >= 0 else {}
        info.append({"phase": ph.label, "flows": ph.num_flows, "repeat": ph.repeat, "seconds_per_byte": t,
                     "bottleneck": f"{d.get('src')} -> {d.get('dst')}" if d else None,
                     "bottleneck_level": d.get("level")})
    return Costed(loads, total, r_worst, _bytes_on(loads, r_worst), info)


def _bytes_on(loads: ScheduleLoads, r: int) -> float:
    """Bytes on resource ``r`` per message byte over the whole collective (every phase and repeat): the entry of
    :meth:`ScheduleLoads.total` for ``r``, read from each phase's loads without building the whole vector."""
    if r < 0:
        return 0.0
    return float(sum(ph.repeat * float(ph.bytes[ph.res == r].sum()) for ph in loads.phases))


class Limit(str, Enum):
    """What bounds a time (:func:`limit_of`) or a steady rate (:func:`rate_limit`, the last four): one name each,
    as reports print it (the member is its string)."""

    LATENCY = "latency"
    PER_PEER_LATENCY = "per-peer-latency"
    LINK = "link"
    LINK_PROTOCOL = "link+protocol"
    P2P_CHANNELS = "p2p-channel-cap"
    PROTOCOL_CAP = "protocol-cap"

    def __str__(self) -> str:
        return self.value


LIMITS = {
    Limit.LATENCY: "the latency part of the time is larger than the bandwidth part",
    Limit.PER_PEER_LATENCY: "as latency, and most of it is the per-peer message set-up of a send/receive pattern",
    Limit.LINK: "the named link at its usable rate (line rate x the profile's efficiency for its class)",
    Limit.LINK_PROTOCOL: "the named link at its usable rate, of which the algorithm's protocol carries only its "
                         "efficiency (ring LL: half, LL128: 92%; the profile gives each algorithm's)",
    Limit.P2P_CHANNELS: "NCCL's p2p channels to a network peer, each at one channel's rate (not a link)",
    Limit.PROTOCOL_CAP: "NCCL's cap on the protocol's bus bandwidth, per channel x channels (not a link)",
}


class Rate(NamedTuple):
    """A schedule's steady algorithm bandwidth and what bounds it (:func:`rate_limit`)."""

    rate_Bps: float  # bytes of message per second
    limit: Limit  # LINK, P2P_CHANNELS or PROTOCOL_CAP


class ProtocolTime(NamedTuple):
    """A costed schedule's time at one size with one protocol (:func:`best_protocol`)."""

    time_s: float
    protocol: str
    latency_s: float
    bandwidth_s: float


def bus_to_algorithm(family: str, collective: str, num_ranks: int) -> float:
    """Algorithm bandwidth per unit of bus bandwidth, as NCCL's tuning.cc converts them: 0.5 for a tree (and
    CollNet), ``p / steps`` for a ring (2 (p - 1) steps for all-reduce, p - 1 for all-gather and reduce-scatter, p
    otherwise).

    Parameters
    ----------
    family, collective : str
    num_ranks : int

    Returns
    -------
    float
    """
    p = num_ranks
    if family in ("tree", "collnet"):
        return 0.5
    steps = 2 * (p - 1) if collective == "all_reduce" else (p - 1 if collective in ("all_gather", "reduce_scatter")
                                                             else p)
    return p / max(steps, 1)


def ll_channels_rate_Bps(sched, profile: Profile, proto: str, size_bytes: float, collective: str,
                         num_ranks: int) -> float:
    """LL's algorithm bandwidth on the channels NCCL runs at ``size_bytes``.

    NCCL runs a small ring or tree collective on fewer channels (:func:`small_channels`, src/enqueue.cc), and each
    channel is one thread block moving LL lines; its bus bandwidth is at most the profile's
    ``ll_channel_busbw_Bps``, turned into an algorithm bandwidth as NCCL does (:func:`bus_to_algorithm`). A ring LL
    all-gather on 16 ranks runs one channel up to 64 KiB.

    Parameters
    ----------
    sched : Schedule
    profile : Profile
        ``channel_min_bytes`` (NCCL's rule) and ``ll_channel_busbw_Bps``.
    proto : str
    size_bytes : float
        NCCL's ``nBytes`` (nccl-tests' size).
    collective : str
    num_ranks : int

    Returns
    -------
    float
        Bytes of message per second; inf when the protocol is not LL, the family not ring or tree, or the profile
        gives no rule or no per-channel rate.
    """
    if (proto != "LL" or sched.family not in ("ring", "tree") or not np.isfinite(profile.ll_channel_busbw_Bps)
            or not profile.channel_min_bytes.get(sched.family, {}).get(proto)):
        return np.inf
    start = sched.pinned_channels or profile.channels
    nc = small_channels(sched.family, proto, size_bytes, start, num_ranks, profile)
    share = ll_threads(sched.family, size_bytes, nc, num_ranks, profile) / profile.ll_max_threads
    return nc * share * profile.ll_channel_busbw_Bps * bus_to_algorithm(sched.family, collective, num_ranks)


WARP = 32  # threads of a warp (NCCL's WARP_SIZE)


def ll_threads(family: str, size_bytes: float, nc: int, num_ranks: int, profile: Profile) -> int:
    """The threads NCCL runs an LL ring or tree channel with at ``size_bytes`` on ``nc`` channels.

    NVIDIA/nccl src/enqueue.cc topoGetAlgoInfo (2.30.7): from ``NCCL_LL_MAX_NTHREADS`` threads, halve while
    ``nBytes < nc x nt x threadThreshold`` and nt is a multiple of 128; then at least 3 warps. Each thread moves its
    own LL lines, so a channel's LL rate is taken in proportion to its threads.

    Parameters
    ----------
    family : str
    size_bytes : float
    nc : int
        Channels at this size (:func:`small_channels`).
    num_ranks : int
    profile : Profile
        ``ll_max_threads`` and ``channel_min_bytes`` (threads x threadThreshold).

    Returns
    -------
    int
    """
    nt = profile.ll_max_threads
    per_thread = profile.channel_min_bytes[family]["LL"] / nt * (max(num_ranks, 1) if family == "ring" else 1)
    while size_bytes < nc * nt * per_thread and nt % (4 * WARP) == 0:
        nt //= 2
    return max(nt, 3 * WARP)


def rate_limit(c: Costed, profile: Profile, proto: str, collective: str, num_ranks: int, num_domains: int,
               seconds_per_byte: float | None = None) -> Rate:
    """Steady algorithm bandwidth (bytes of message per second) and what bounds it.

    The lowest of: the routed bottleneck at the protocol's efficiency (``link``); for send/receive between nodes,
    NCCL's p2p channels per peer times one channel's rate, at the same efficiency (``p2p-channels``: LL's lines
    carry half their bytes as flags, whatever bounds them); NCCL's cap on the protocol's bus bandwidth turned into
    an algorithm bandwidth as tuning.cc does (x 0.5 for a tree, x p / steps for a ring; scaled to the schedule's
    pinned channels) (``protocol-cap``).

    Parameters
    ----------
    c : Costed
    profile : Profile
    proto : str
    collective : str
    num_ranks, num_domains : int
    seconds_per_byte : float, optional
        Replaces the routed bottleneck's (NCCL's tuner prices a tree with the ring's network bandwidth beyond two
        nodes, :mod:`topo.engine.tuner`).

    Returns
    -------
    Rate
        ``rate_Bps`` and ``limit``, one of :attr:`Limit.LINK`, :attr:`Limit.P2P_CHANNELS`,
        :attr:`Limit.PROTOCOL_CAP`.
    """
    sched = c.schedule
    fam = sched.family
    D = num_domains
    spb = c.seconds_per_byte if seconds_per_byte is None else seconds_per_byte
    eff = profile.efficiency(fam, proto, D)
    rate, why = (eff / spb if spb > 0 else np.inf), Limit.LINK
    if sched.net_peer_channels and np.isfinite(profile.p2p_channel_Bps):  # NCCL's channels to a network peer
        peer = eff * sched.net_peer_channels * profile.p2p_channel_Bps
        if peer < rate:
            rate, why = peer, Limit.P2P_CHANNELS
    cap = profile.busbw_cap(fam, proto, D)
    if np.isfinite(cap):
        if sched.pinned_channels and profile.channels:  # NCCL's caps are per channel
            cap *= sched.pinned_channels / profile.channels
        ratio = bus_to_algorithm(fam, collective, num_ranks)
        if cap * ratio < rate:
            rate, why = cap * ratio, Limit.PROTOCOL_CAP
    return Rate(float(rate), why)



def limit_of(c: Costed, profile: Profile, proto: str, collective: str, num_ranks: int, num_domains: int,
             latency_s: float, bandwidth_s: float) -> Limit:
    """What bounds a time: a key of :data:`LIMITS`.

    ``latency`` when the latency part is the larger (``per-peer-latency`` when most of it is a send/receive
    pattern's per-peer overhead); else what :func:`rate_limit` names, ``link`` becoming ``link+protocol`` when the
    protocol's efficiency is below 1.

    Parameters
    ----------
    c : Costed
    profile : Profile
    proto : str
    collective : str
    num_ranks, num_domains : int
    latency_s, bandwidth_s : float
        The two parts of the time.

    Returns
    -------
    Limit
    """
    sched = c.schedule
    if latency_s > bandwidth_s:
        peers = sched.latency.peers * profile.peer_overhead_s if sched.family == "p2p" else 0.0
        return Limit.PER_PEER_LATENCY if peers > 0.5 * latency_s else Limit.LATENCY
    why = rate_limit(c, profile, proto, collective, num_ranks, num_domains).limit
    if why != Limit.LINK:
        return why
    return Limit.LINK if profile.efficiency(sched.family, proto, num_domains) >= 1.0 else Limit.LINK_PROTOCOL


def p2p_protocols(c: Costed, profile: Profile, protocols, size_bytes: int) -> tuple[str, ...]:
    """The protocols a send/receive pattern may run at ``size_bytes``.

    NCCL's own rule (src/enqueue.cc addP2pToPlan) when the profile gives its threshold and the protocol is not
    pinned: LL while one send to a peer is at most ``p2p_ll_threshold_bytes`` x the p2p channels per peer, Simple
    above, never LL128.

    Parameters
    ----------
    c : Costed
    profile : Profile
    protocols : sequence of str
        The protocols allowed otherwise.
    size_bytes : int

    Returns
    -------
    tuple of str
    """
    sched = c.schedule
    if sched.family != "p2p" or profile.p2p_ll_threshold_bytes <= 0 or len(protocols) < 2:
        return tuple(protocols)
    per_peer = size_bytes * sched.peer_message_fraction
    channels = sched.p2p_channels_per_peer or profile.channels
    want = "LL" if per_peer <= profile.p2p_ll_threshold_bytes * channels else "Simple"
    return (want,) if want in protocols else tuple(p for p in protocols if p != "LL128") or tuple(protocols)


def fill_bytes(c: Costed, profile: Profile, size_bytes: int) -> float:
    """Bytes of a message that go at half speed while NCCL's buffers fill: ``min(S, W)``, ``W`` the profile's
    pipeline window times the schedule's ``window_scale`` (NVLS over many ranks, NVLSTree's levels).

    Parameters
    ----------
    c : Costed
    profile : Profile
    size_bytes : int

    Returns
    -------
    float
    """
    return float(min(size_bytes, profile.pipeline_window_bytes * c.schedule.window_scale))


def best_protocol(c: Costed, profile: Profile, protocols, size_bytes: int, collective: str, num_ranks: int,
                  num_domains: int) -> ProtocolTime:
    """The fastest of ``protocols`` for one costed schedule at one size.

    The first ``min(S, window)`` bytes go at half speed while the pipeline fills (the profile's window, scaled by
    the schedule's ``window_scale``). The steady rate is the lowest of :func:`rate_limit`, LL's rate on the channels
    NCCL runs (:func:`ll_channels_rate_Bps`) and NVLSTree's chunk steps
    (:func:`topo.engine.nvls_chunk.nvls_tree_chunk_rate_Bps`).

    Parameters
    ----------
    c : Costed
    profile : Profile
    protocols : sequence of str
    size_bytes : int
    collective : str
    num_ranks, num_domains : int

    Returns
    -------
    ProtocolTime
    """
    best = None
    sched = c.schedule
    for proto in p2p_protocols(c, profile, protocols, size_bytes):
        lat = latency_s(sched.latency, c.loads.routed_latency_s, profile, proto)
        # the first min(S, window) bytes go at half speed while the pipeline fills (topo.engine.profiles); the
        # schedule scales the window where its pipeline is longer (NVLS over many ranks, NVLSTree's levels)
        rate = min(rate_limit(c, profile, proto, collective, num_ranks, num_domains).rate_Bps,
                   ll_channels_rate_Bps(sched, profile, proto, size_bytes, collective, num_ranks),
                   nvls_tree_chunk_rate_Bps(sched, profile, size_bytes, num_domains))
        bw = (size_bytes + fill_bytes(c, profile, size_bytes)) / rate
        # the proxy posts the channels' messages while earlier data is on the wire: whichever takes longer counts
        lat += max(0.0, proxy_channels_s(sched, profile, proto, size_bytes, num_ranks) - bw)
        t = lat + bw
        if best is None or t < best.time_s:
            best = ProtocolTime(t, proto, lat, bw)
    return best
