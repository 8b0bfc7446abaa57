"""A collective over every GPU of a region: the in-site phases timed by :func:`topo.engine.estimate.estimate` on each
distinct site fabric, the cross-site phase routed on the DCI spans (:meth:`topo.fabric.region.Region.route_loads`),
composed by :mod:`topo.engine.algorithms.across_sites`.

The cross-site phase's bandwidth part is the slowest of: each directed span (its bytes over its capacity), each
site's border (what it sends over its capacity to the DCI) and the NICs it crosses through (:func:`crossing_nics`:
every NIC of the site for the hierarchical ways, one a channel for NCCL's flat ring and tree); the bottleneck is
named after it (``dci:east-west``, ``border:east``, ``nic``). A row's ``bottleneck`` is one site's
:class:`~topo.engine.result.Bottleneck` (:func:`row_bottleneck`), its name ``bottleneck_name``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path

import numpy as np

from ..errors import TopoError
from ..inputs import read_toml
from ..resources import data_dir
from ..fabric.region import Region
from ..fabric.region_split import split_notes
from ..spec.region_load import site_profile_keys
from .algorithms.across_sites import (CROSS_SITE_ALGORITHMS, Phase, Timed, dci_phase_bytes, flat_ring, flat_tree,
                                      hierarchical, pipelined, window_s)
from .collectives import DATA_TYPES, busbw_factor, count_column, normalize_collective
from .estimate import _sizes, estimate, nccl_tests_sizes
from .profiles import Profile, profile_network, resolve_profile, site_network
from .result import Bottleneck, whole_bytes_row

__all__ = ["RegionEstimate", "RegionRow", "estimate_region", "dci_phase", "dci_phase_options", "cross_site_candidates",
           "chain_hops_s", "small_all_reduce_dci_s", "tree_root_order", "crossing_nics", "tree_dci_phase", "xdc_nodes",
           "XDC_NODES",
           "region_channels", "TREE_ROOT_RULE",
           "site_exchange_bytes", "PROFILE_PRICES",
           "check_region_profile", "site_profile"]

PROFILE_PRICES = ("each site's in-site collectives on its own fabric (a hierarchical way's reduce-scatter and "
                  "all-gather, the flat ring's and tree's steps inside a site) and each NCCL call's cost and "
                  "channels; not the DCI phase, another network: its spans' capacity and latency, the sites' borders "
                  "and a GPU's NICs price it, with no profile")
"""What a profile prices in a collective or step across sites (regprof68): a profile is calibrated on one site
network (its NCCL constants, efficiencies and latencies were measured there), so it prices the in-site phases
alone."""

_COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter")


@dataclass
class RegionRow:
    """One size: the chosen algorithm's time and parts, every candidate's time, the DCI's load."""

    size_bytes: int
    count: int | None  # nccl-tests' count column over every GPU (count_column; None: a size nccl-tests never runs)
    type: str
    time_s: float
    algbw_Bps: float
    busbw_Bps: float
    algorithm: str
    latency_s: float
    bandwidth_s: float
    bottleneck: Bottleneck  # one site's shape (row_bottleneck): figures the region does not price are None
    bottleneck_name: str  # what the text, the report and the phases' ``bound`` call it (``dci:east-west``)
    candidates: dict[str, float]
    phases: dict[str, dict]  # each phase alone, and its charged_latency_s / charged_bandwidth_s (they sum to the row)
    span_bytes: list[float]  # per directed span (2*span lower->higher site, 2*span+1 back), the chosen algorithm


@dataclass
class RegionEstimate:
    """A collective over every GPU of a region: one :class:`RegionRow` per size."""

    spec: str
    collective: str
    num_ranks: int
    num_sites: int
    spans: list[str]
    algorithm: str = "auto"  # what was asked (auto, a name, a comma list, ^ a list): cross_site_candidates
    results: list[RegionRow] = field(default_factory=list)
    unavailable: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # the sizes trimmed as nccl-tests runs them, the DCI split's bound
    tree_roots: list[str] = field(default_factory=list)  # the tree's chain of site roots (tree_root_order)
    tree_hop_s: list[float] = field(default_factory=list)  # each hop of that chain, one way (chain_hops_s)
    profile: list[str] = field(default_factory=list)  # the profile each distinct site fabric priced with, once each
    profile_prices: str = PROFILE_PRICES  # which collectives that profile priced (the DCI phase: none)

    @property
    def candidates(self) -> dict[str, list[float | None]]:
        """Each algorithm's time per size (None where it did not run), as
        :attr:`topo.engine.result.EstimateResult.candidates` on one site."""
        names = list(dict.fromkeys(k for r in self.results for k in r.candidates))
        return {k: [r.candidates.get(k) for r in self.results] for k in names}

    def to_dict(self) -> dict:
        """The document ``topo estimate REGION --json`` prints, in one site's names (``results``, a row per size;
        ``candidate_time_s``, each algorithm's time per size): a row adds ``phases`` and ``span_bytes``;
        ``tree_roots`` is the tree's chain of site roots as ``{order, hop_s, rule}`` (one shape, ``--detail`` or
        not).

        Returns
        -------
        dict
        """
        skip = ("results", "unavailable", "notes", "tree_roots", "tree_hop_s")
        doc = {k: v for k, v in asdict(self).items() if k not in skip}
        doc["tree_roots"] = {"order": list(self.tree_roots), "hop_s": list(self.tree_hop_s), "rule": TREE_ROOT_RULE}
        doc["results"] = [whole_bytes_row({k: v for k, v in asdict(r).items() if k != "candidates"})
                          for r in self.results]
        return {**doc, "candidate_time_s": self.candidates, "unavailable": self.unavailable, "notes": self.notes}


def dci_phase(region: Region, src, dst, nbytes, steps: int, channels: int | None = None,
              site_gpus=None, cross_nodes: int | None = None) -> tuple[Phase, np.ndarray]:
    """The cross-site phase where site ``src[i]`` sends ``nbytes[i]`` to site ``dst[i]``, in ``steps`` steps that
    each pay the slowest cross-site hop's latency once: the faster of the lowest-latency routes alone and the split
    over every pair's direct span, 2-hop paths and paths one hop longer than its route
    (:meth:`~topo.fabric.region.Region.split_loads`).

    Parameters
    ----------
    region : Region
    src, dst : array of int
        Sending and receiving sites, one entry per transfer.
    nbytes : float or array
        Bytes of each transfer.
    steps : int
        Steps of the phase (its latency is ``steps`` x the slowest cross-site hop, one way).
    channels : int, optional
        The NCCL channels of a flat ring or tree, whose bytes cross a site's border through one NIC a channel
        (:func:`crossing_nics`); None: through every NIC of the site (the hierarchical ways).
    site_gpus : sequence of int, optional
        Per site, the GPUs whose NICs carry its bytes (a training job's share of the site, share72); None: every
        GPU of each site.
    cross_nodes : int, optional
        The nodes a site's channels cross from (:func:`xdc_nodes`; None: a node a channel).

    Returns
    -------
    tuple of (Phase, numpy.ndarray)
        The phase, and the bytes on every directed span.
    """
    ph, loads, _, _ = min(dci_phase_options(region, src, dst, nbytes, steps, channels, site_gpus, cross_nodes),
                          key=lambda o: o[0].time_s)
    return ph, loads  # the route alone when splitting does not pay its latency


def dci_phase_options(region: Region, src, dst, nbytes, steps: int, channels: int | None = None,
                      site_gpus=None, cross_nodes: int | None = None) -> list[tuple[Phase, np.ndarray, float, float]]:
    """Both ways :func:`dci_phase` may carry the transfers (the lowest-latency routes, then the split), each as
    ``(phase, bytes on every directed span, dci_s, nic_s)``: the phase's bandwidth time is the larger of ``dci_s``
    (the busiest directed span's or site border's time, which scale with the spans' capacities: a border's
    capacity is its spans', :meth:`~topo.fabric.region.Region.border_Bps`) and ``nic_s`` (a GPU's NICs', which does
    not). The spans' loads of either way
    do not change when every span's capacity is scaled by one factor (the split's min-max fractions are the same).

    Parameters
    ----------
    region, src, dst, nbytes, steps, channels, site_gpus, cross_nodes : as :func:`dci_phase`.

    Returns
    -------
    list of (Phase, numpy.ndarray, float, float)
        The routes' way, then the split's.
    """
    src, dst = np.asarray(src), np.asarray(dst)
    nbytes = np.broadcast_to(np.asarray(nbytes, dtype=float), src.shape)
    up = np.array([region.up_latency_s(s) for s in range(region.num_sites)])
    routed = region.route_loads(src, dst, nbytes), region.route_latency_s(src, dst)
    split = region.split_loads(src, dst, nbytes) if src.size else routed
    return [_phase(region, src, dst, nbytes, steps, up, loads, lat, channels, site_gpus, cross_nodes)
            for loads, lat in (routed, split)]


def _phase(region: Region, src, dst, nbytes, steps: int, up, loads, route_lat,
           channels: int | None = None, site_gpus=None,
           cross_nodes: int | None = None) -> tuple[Phase, np.ndarray, float, float]:
    """:func:`dci_phase` for one way of carrying the transfers: ``loads`` per directed span, ``route_lat`` per
    transfer (one way, its longest path that carries a share); with its DCI's and a GPU's NICs' times
    (:func:`dci_phase_options`): a site's bytes over the NICs they cross through (:func:`crossing_nics`; of
    ``site_gpus[s]`` GPUs, None every GPU of the site)."""
    cap = np.repeat(region.span_bandwidth_Bps, 2)
    with np.errstate(divide="ignore", invalid="ignore"):
        span_t = np.where(loads > 0, loads / cap, 0.0)
    names = region.span_names()
    site_bytes = site_exchange_bytes(region, src, dst, nbytes)
    border = site_bytes / np.array([region.border_Bps(s) for s in range(region.num_sites)])
    gpus = [None] * region.num_sites if site_gpus is None else site_gpus
    nic = max(float(site_bytes[s] / (crossing_nics(f, channels, gpus[s], cross_nodes) * f.layout.nic_rate_Bps))
              for s, f in enumerate(region.fabrics))
    cands = [(float(span_t.max()), names[int(span_t.argmax()) // 2] + (" (back)" if span_t.argmax() % 2 else "")),
             (float(border.max()), f"border:{region.site_names[int(border.argmax())]}"), (nic, "nic")]
    bw_s, bound = max(cands, key=lambda c: c[0])
    hop = float(np.max(route_lat + up[src] + up[dst])) if src.size else 0.0
    return Phase(steps * hop, bw_s, bound), loads, max(cands[0][0], cands[1][0]), nic


def site_exchange_bytes(region: Region, src, dst, nbytes) -> np.ndarray:
    """Per site, the larger of the bytes its GPUs send to other sites and receive from them in a phase (its border
    and its NICs carry each direction apart).

    Parameters
    ----------
    region : Region
    src, dst : array_like of int
        Each transfer's sending and receiving site.
    nbytes : float or array_like
        Each transfer's bytes (one figure for all).

    Returns
    -------
    numpy.ndarray
        ``(num_sites,)`` bytes.
    """
    src, dst = np.asarray(src), np.asarray(dst)
    w = np.broadcast_to(np.asarray(nbytes, dtype=float), src.shape)
    return np.maximum(np.bincount(src, w, region.num_sites), np.bincount(dst, w, region.num_sites))


TREE_ROOT_RULE = ("roots chained in the job's rank order, as NCCL orders nodes by their ranks (a site's ranks follow "
                  "the region file's site order)")


def tree_root_order(region: Region) -> np.ndarray:
    """The sites in the order the tree across sites chains their roots: the order of their first ranks.

    NCCL numbers nodes in the order of their first ranks (NVIDIA/nccl src/init.cc ``initTransportsRank``: ``for r
    in ranks``, a node is new when its first rank is unseen, ``comm->rankToNode[r] = node``) and builds its trees
    over those node numbers (src/graph/connect.cc); its cross-DC branch chains one tree per DC, roots DC to DC
    (../shared/data/multisite.md section 2). A region's ranks run site by site in its file's order
    (:attr:`~topo.fabric.region.Region.gpu_offset`), so the chain is that order whatever the spans: a line listed
    a, c, b chains a - c - b, crossing b's span twice.

    Parameters
    ----------
    region : Region

    Returns
    -------
    numpy.ndarray
        ``(K,)`` site indices, the chain's first root first.
    """
    return np.argsort(region.gpu_offset[:-1], kind="stable")


def chain_hops_s(region: Region) -> np.ndarray:
    """Each hop of the tree's chain of roots (:func:`tree_root_order`'s site ``i`` to ``i+1``) one way: a GPU's
    way up to the DCI, the hop's own lowest-latency route, the way down.

    Parameters
    ----------
    region : Region

    Returns
    -------
    numpy.ndarray
        ``(K-1,)`` seconds.
    """
    order = tree_root_order(region)
    a, b = order[:-1], order[1:]
    up = np.array([region.up_latency_s(s) for s in range(region.num_sites)])
    return up[a] + region.route_latency_s(a, b) + up[b]


def tree_dci_phase(region: Region, size_bytes: float, channels: int, site_gpus=None) -> tuple[Phase, np.ndarray]:
    """The tree's crossing of the sites (:func:`~topo.engine.algorithms.across_sites.flat_tree`): each chained span
    (:func:`tree_root_order`) carries ``size_bytes`` each way, through one NIC a channel at each chained root
    (:func:`crossing_nics`): its bandwidth part ``max(S / (min(c, NICs) x one NIC's rate), S / span, border)``;
    with ``NCCL_SCATTER_XDC=0`` (the region's ``nccl.scatter_xdc = false``) the roots sit on two nodes
    (:func:`xdc_nodes`), so at most two nodes' NICs.

    Parameters
    ----------
    region : Region
    size_bytes : float
        ``S``.
    channels : int
        NCCL's channels (:func:`region_channels`).
    site_gpus : sequence of int, optional
        As :func:`dci_phase`.

    Returns
    -------
    tuple of (Phase, numpy.ndarray)
        As :func:`dci_phase` (no latency: :func:`chain_hops_s` prices the chain's).
    """
    order = tree_root_order(region)
    chain_a, chain_b = np.r_[order[:-1], order[1:]], np.r_[order[1:], order[:-1]]
    return dci_phase(region, chain_a, chain_b, float(size_bytes), 0, channels, site_gpus, xdc_nodes(region, "tree"))


def small_all_reduce_dci_s(region: Region, size_bytes: float, channels: int, site_gpus=None) -> float:
    """The seconds a small all-reduce (a few bytes to kilobytes: latency-bound) adds by crossing the sites, the
    cheaper of the tree's chain of site roots (:func:`chain_hops_s` there and back, ``2 sum_i L_i``, and
    ``size_bytes`` on each chained span, :func:`tree_dci_phase`) and the hierarchical ring across the sites
    (``2(K-1)/K size_bytes`` a boundary, ``2(K-1)`` hops). The one price of the training step's small cross-site
    reductions: delayed FP8 scaling's amax buffers and the optimizer's gradient norm
    (:mod:`topo.training.multisite`, :mod:`topo.training.dp_across`).

    Parameters
    ----------
    region : Region
    size_bytes : float
        The all-reduced buffer.
    channels : int
        NCCL's channels (:func:`region_channels`): the tree's crossing NICs.
    site_gpus : sequence of int, optional
        As :func:`dci_phase`.

    Returns
    -------
    float
        Seconds (0 on one site).
    """
    K = region.num_sites
    if K < 2:
        return 0.0
    tree = 2 * float(np.sum(chain_hops_s(region))) + tree_dci_phase(region, size_bytes, channels,
                                                                      site_gpus)[0].bandwidth_s
    a, b = _ring(K)
    ring = dci_phase(region, a, b, 2 * (K - 1) / K * size_bytes, 2 * (K - 1), site_gpus=site_gpus)[0].time_s
    return min(tree, ring)


XDC_NODES = {"ring": 1, "tree": 2}
"""The nodes of a site a flat ring's or tree's channels cross from with ``NCCL_SCATTER_XDC=0`` (NVIDIA/nccl branch
``cross-dc`` commit 18a07eeebe485ae00755615ced44739d20970560, src/graph/connect.cc): ``channelToNode`` (lines
93-105) gives every channel the same ``commId = nChannels x nvmlDev`` (the channel index is added only when
``ncclParamScatterXDc()``), so the same node; ``connectRings`` (lines 143-158) leaves a DC from that node's send
rank and enters the next DC at its neighbour's (``crossNode + 1``) receive rank, one node each way; ``rootNodeTree0``
(lines 190-195) puts every primal tree's root on that (even) node and the dual tree's root on its neighbour
(``ncclGetDtree``), two nodes."""


def xdc_nodes(region: Region, algorithm: str) -> int | None:
    """The nodes a site's channels of NCCL's flat ``algorithm`` (``ring`` or ``tree``) cross between the sites from:
    :data:`XDC_NODES` under the region's ``nccl.scatter_xdc = false`` (``NCCL_SCATTER_XDC=0``), None (a node a
    channel, NCCL's default) otherwise.

    Parameters
    ----------
    region : Region
    algorithm : str
        ``ring`` or ``tree``.

    Returns
    -------
    int or None
    """
    return None if region.spec.nccl.scatter_xdc else XDC_NODES[algorithm]


def region_channels(region: Region, profile=None) -> int:
    """NCCL's channels of a flat ring or tree over the region's GPUs: the fewest of the profiles that price its
    sites (:func:`site_profile`, resolved on each site), as each site's communicator has its own.

    Parameters
    ----------
    region : Region
    profile : optional
        As :func:`estimate_region` takes it.

    Returns
    -------
    int
    """
    return min(resolve_profile(site_profile(region, profile, sites[0]), f).channels for f, sites in region.site_groups())


def crossing_nics(fabric, channels: int | None = None, gpus: int | None = None,
                  nodes: int | None = None) -> float:
    """The NICs of a site that its bytes to and from other sites go through, each at one NIC's rate.

    The hierarchical ways cross through every NIC: each GPU all-reduces (gathers, scatters) its own shard with the
    GPUs of its local index in the other sites. NCCL's flat ring and tree cross through one NIC a channel: on the
    cross-DC branch (../shared/data/multisite.md section 2; NVIDIA/nccl branch ``cross-dc`` commit 18a07ee,
    src/graph/connect.cc) ring channel ``c`` leaves a DC from one node (``getCrossNodeForRing``) and enters the next
    at one node, and tree channel ``c`` (a primal or a dual tree, ``connectTrees``) chains its DC's root rank
    (``treeToParent`` of the root node) to the next DC's root rank (``treeToChild0``): one rank, so one NIC (the
    channel's), each way. ``NCCL_SCATTER_XDC=1`` (the default, ``channelToNode``) puts each channel's crossing on
    another node, so the channels cross through as many NICs as there are channels, at most the site's NICs.

    Parameters
    ----------
    fabric : Fabric
        The site's.
    channels : int, optional
        NCCL's channels (``comm->nChannels``, the profile's ``channels``) of a flat ring or tree; None: every NIC.
    gpus : int, optional
        The site's GPUs that take part (a training job's share of the site, share72: its ranks' NICs alone carry
        its bytes); None: every GPU of the site.
    nodes : int, optional
        The nodes the channels cross from (``NCCL_SCATTER_XDC=0``, :func:`xdc_nodes`): at most their NICs; None: a
        node a channel.

    Returns
    -------
    float
        NICs (the GPUs' NICs: GPUs x NICs a server / GPUs a server).
    """
    L = fabric.layout
    every = (fabric.num_gpus if gpus is None else gpus) * max(1, L.nics_per_server) / L.gpus_per_server
    if nodes is not None:
        every = min(every, float(nodes * max(1, L.nics_per_server)))
    return every if channels is None else min(float(channels), every)


def _ring(K: int) -> tuple[np.ndarray, np.ndarray]:
    a = np.arange(K)
    return a, (a + 1) % K


def estimate_region(region: Region, collective: str, sizes, algorithm: str = "auto", *,
                    datatype: str | None = None, profile=None) -> RegionEstimate:
    """Estimate ``collective`` over every GPU of every site of ``region``.

    Parameters
    ----------
    region : Region
    collective : str
        all_reduce, all_gather or reduce_scatter (nccl-tests names; hyphens accepted).
    sizes : int, str or iterable of them
        Sizes in bytes, as nccl-tests counts them (``1073741824``, ``"1GiB"``, ``"16G"``), as :func:`estimate`
        takes them.
    algorithm : str
        ``auto`` (the fastest), one of hierarchical, hierarchical_pipelined, ring, tree, a comma list of them (the
        fastest of those) or ``^`` before a list (all but those), as :func:`cross_site_candidates` reads it.
    datatype : str, optional
        nccl-tests' ``-d`` type: each size is the one nccl-tests runs over every GPU of the region
        (:func:`~topo.engine.estimate.nccl_tests_sizes`, as on one site: whole 16 bytes a rank for all_gather and
        reduce_scatter), with a note; None times the sizes as given.
    profile : optional
        As :func:`~topo.engine.profiles.resolve_profile` takes it, resolved on each distinct site fabric (None or
        ``nccl``: each site's own); it prices :data:`PROFILE_PRICES` (not the DCI phase), and a calibrated file
        must be of one site's network (:func:`check_region_profile`).

    Returns
    -------
    RegionEstimate

    Raises
    ------
    TopoError
        A collective or algorithm not modelled across sites, or a size that is not a positive number of bytes
        (the key names which).
    """
    coll = normalize_collective(collective)
    if coll not in _COLLECTIVES:
        raise TopoError(f"across sites, topo models {', '.join(_COLLECTIVES)}; got {collective!r}", key="collective")
    label, names = cross_site_candidates(algorithm)
    sizes, trim_notes = _sizes(sizes), []
    if datatype is not None:
        sizes, trim_notes = nccl_tests_sizes(coll, sizes, datatype, region.num_gpus)
    word = DATA_TYPES[datatype or "float"]
    check_region_profile(region, profile)
    site = _SiteTimes(region, coll, sizes, profile)
    out = RegionEstimate(spec=region.name, collective=coll, num_ranks=region.num_gpus, num_sites=region.num_sites,
                         spans=region.span_names(), algorithm=label, profile=site.profile_names,
                         tree_roots=[region.site_names[i] for i in tree_root_order(region)],
                         tree_hop_s=chain_hops_s(region).tolist())
    for S in sizes:
        timed, loads = _candidates(region, coll, S, site, out.unavailable)
        runs = [timed[n] for n in names if n in timed]
        if not runs:
            why = "; ".join(f"{n}: {out.unavailable.get(n, 'not modelled')}" for n in names)
            raise TopoError(f"{label} does not run {coll} across sites: {why}", key="algorithm")
        pick = min(runs, key=lambda t: t.time_s)
        algbw = S / pick.time_s if pick.time_s > 0 else 0.0
        out.results.append(RegionRow(
            size_bytes=S, count=count_column(coll, S, word, region.num_gpus), type=datatype or "float",
            time_s=pick.time_s, algbw_Bps=algbw, busbw_Bps=algbw * busbw_factor(coll, region.num_gpus),
            algorithm=pick.algorithm, latency_s=pick.latency_s, bandwidth_s=pick.bandwidth_s,
            bottleneck=row_bottleneck(region, pick, site.links.get((pick.bottleneck, S)), loads[pick.algorithm]),
            bottleneck_name=pick.bottleneck, candidates={k: t.time_s for k, t in timed.items()},
            phases=_phases_dict(pick),
            span_bytes=loads[pick.algorithm].tolist()))
    out.notes = trim_notes + split_notes(region)
    return out


def row_bottleneck(region: Region, pick: Timed, site_link, span_bytes) -> Bottleneck:
    """A row's bottleneck in one site's shape (:class:`~topo.engine.result.Bottleneck`).

    An in-site link (``east:nic1.0->leaf0``) is the site's own, its ``src`` and ``dst`` named ``SITE:PART`` as
    ``--fail`` takes them, with its figures in the slowest in-site phase it bounds (as ``phases`` times it alone).
    A DCI span (``dci:a-b``, `` (back)`` the other way) has ``level`` dci, its waves as ``num_links``, the bytes
    each wave carries and its utilization over the row's time. A border, the NICs or the ring's window name
    their ``level`` (border, nic, window) and the site (border); what the region does not price is None.

    Parameters
    ----------
    region : Region
    pick : Timed
        The chosen algorithm.
    site_link : tuple of (float, Bottleneck) or None
        The in-site link behind ``pick.bottleneck`` (:class:`_SiteTimes` ``links``), if it is one.
    span_bytes : numpy.ndarray
        Bytes on every directed span under ``pick``.

    Returns
    -------
    Bottleneck
    """
    if site_link is not None:
        return site_link[1]
    name = pick.bottleneck
    blank = {f.name: None for f in fields(Bottleneck)}
    bound = "latency" if pick.latency_s > pick.bandwidth_s else "bandwidth"
    kind, _, rest = name.partition(":")
    if name.removesuffix(" (back)") in region.span_names():
        k = region.span_names().index(name.removesuffix(" (back)"))
        back = name.endswith(" (back)")
        ends = [region.site_names[int(region.spans[e][k])] for e in ("a", "b")]
        waves = int(region.spans["waves"][k])
        load = float(span_bytes[2 * k + back])
        cap = float(region.span_bandwidth_Bps[k])
        busy = load / cap / pick.time_s if cap > 0 and pick.time_s > 0 else None
        return Bottleneck(**{**blank, "src": ends[back], "dst": ends[1 - back], "level": "dci", "num_links": waves,
                             "bytes": load / waves, "utilization": busy, "bound": bound, "limit": "link"})
    if kind == "border":
        return Bottleneck(**{**blank, "src": rest, "dst": "dci", "level": "border", "bound": bound})
    if kind in ("nic", "window"):
        return Bottleneck(**{**blank, "level": kind, "bound": bound})
    return Bottleneck(**{**blank, "src": name, "bound": bound})  # a site whose engine named no link


def _phases_dict(t: Timed) -> dict:
    """Each phase as timed alone, with ``charged_latency_s`` and ``charged_bandwidth_s``: its shares of the row's
    latency and bandwidth parts (they sum to them; phases that run at once share the bandwidth part)."""
    out = {}
    for k, p in t.phases.items():
        if not isinstance(p, Phase):
            out[k] = p
            continue
        c = t.charged.get(k, Phase(0.0, 0.0))
        out[k] = {**asdict(p), "charged_latency_s": c.latency_s, "charged_bandwidth_s": c.bandwidth_s}
    return out


def cross_site_candidates(algorithm: str) -> tuple[str, list[str]]:
    """What an algorithm option asks for across sites, read as :func:`topo.engine.collectives.algorithm_candidates`
    reads it on one site (NCCL_ALGO's forms): ``auto`` (the fastest of all), one name, a comma list (``ring,tree``:
    the fastest of those) or ``^`` before a list (the fastest of all but those).

    Parameters
    ----------
    algorithm : str
        Names of :data:`~topo.engine.algorithms.across_sites.CROSS_SITE_ALGORITHMS` (hyphens accepted).

    Returns
    -------
    label : str
        What was asked, normalised (``auto``, the name, the list).
    names : list of str
        The candidates.

    Raises
    ------
    TopoError
        An unknown name, an empty list, ``auto`` in a list, or an exclusion that leaves none (keyed
        ``algorithm``).
    """
    text = str(algorithm).strip().lower().replace("-", "_")
    if text == "auto":
        return "auto", list(CROSS_SITE_ALGORITHMS)
    exclude = text.startswith("^")
    names = [x.strip() for x in text.lstrip("^").split(",") if x.strip()]
    allowed = (f"allowed: auto, one of {', '.join(CROSS_SITE_ALGORITHMS)}, a comma list of them (ring,tree) or ^ "
               "before one (^ring: all but those)")
    bad = [x for x in names if x not in CROSS_SITE_ALGORITHMS]
    if not names or bad:
        what = f" {bad[0]!r}" + (f" in {algorithm!r}" if bad[0] != text else "") if bad else f" {algorithm!r}"
        raise TopoError(f"unknown algorithm across sites{what}; {allowed}", key="algorithm")
    names = list(dict.fromkeys(names))
    if exclude:
        keep = [a for a in CROSS_SITE_ALGORITHMS if a not in names]
        if not keep:
            raise TopoError(f"{algorithm!r} leaves no algorithm across sites; {allowed}", key="algorithm")
        return "^" + ",".join(names), keep
    return ",".join(names), names


class _SiteTimes:
    """In-site phase times at each size, the slowest over the distinct site fabrics
    (:meth:`~topo.fabric.region.Region.site_groups`: alike sites are timed once)."""

    def __init__(self, region: Region, coll: str, sizes: list[int], profile=None):
        groups = region.site_groups()  # alike healthy sites timed once, a site with failed parts on its own
        # a group's first site by name: a link is named SITE:SRC->DST, as --fail SITE:PART takes it
        first_site = [region.site_names[sites[0]] for _, sites in groups]
        # nccl: each site's own; reg70: a site's profile key where no profile is given
        profiles = [resolve_profile(site_profile(region, profile, sites[0]), f) for f, sites in groups]
        self.profile_names = list(dict.fromkeys(p.name for p in profiles))
        self.n = min(f.num_gpus for f, _ in groups)
        self.per_chunk_s = max(_call_cost_s(p) for p in profiles)
        self.channels = region_channels(region, profile)
        self.buffer_bytes = nccl_buffer_bytes()
        want = {"reduce_scatter": ("reduce_scatter",) if coll != "all_gather" else (),
                "all_gather": ("all_gather",) if coll != "reduce_scatter" else (),
                coll + ":ring": (coll, "ring"), coll + ":tree": (coll, "tree") if coll == "all_reduce" else None}
        self.times: dict[str, dict[int, Phase]] = {}
        self.missing: dict[str, str] = {}
        self.links: dict[tuple[str, int], tuple[float, Bottleneck]] = {}  # (name, size): the slowest phase's link
        for key, what in want.items():
            if not what:
                continue
            per_size = {}
            for g, (f, _) in enumerate(groups):
                try:
                    r = estimate(f, what[0], sizes, algorithm=what[1] if len(what) > 1 else "auto",
                                 profile=profiles[g])
                except TopoError as exc:
                    self.missing[key] = exc.message
                    break
                for x in r.results:
                    b = x.bottleneck
                    where = first_site[g]
                    ph = Phase(x.latency_s, x.bandwidth_s, f"{where}:{b.src}->{b.dst}" if b is not None else where)
                    if x.size_bytes not in per_size or ph.time_s > per_size[x.size_bytes].time_s:
                        per_size[x.size_bytes] = ph
                    if b is not None and ph.time_s >= self.links.get((ph.bound, x.size_bytes), (0.0,))[0]:
                        self.links[ph.bound, x.size_bytes] = (ph.time_s, replace(b, src=f"{where}:{b.src}",
                                                                                 dst=f"{where}:{b.dst}"))
            else:
                self.times[key] = per_size


def site_profile(region: Region, profile, site: int):
    """The profile that prices site ``site``'s in-site collectives: ``profile`` where a command gives one (every
    site's), else the site's ``profile`` key (:attr:`~topo.fabric.region.Region.site_profiles`; None: its own).

    Parameters
    ----------
    region : Region
    profile : optional
        The command's profile (``--profile``), as :func:`~topo.engine.profiles.resolve_profile` takes it.
    site : int
        The site's index.

    Returns
    -------
    object
        A profile as :func:`~topo.engine.profiles.resolve_profile` takes it, or None (the site's fabric's own).
    """
    return profile if profile is not None else region.site_profiles[site]


def _check_site_keys(region: Region) -> None:
    """Refuse a site's ``profile`` key of another network than the site's (a bundled name or a file): the key says
    which profile the site's own network has (reg70); unknown names as :func:`resolve_profile` says them. Named as a
    spec's errors are: the region file, the entry's key (``sites[1].profile``), the site."""
    first = 0
    for j, (entry, key) in enumerate(zip(region.spec.sites, site_profile_keys(region.spec))):
        fabric, first = region.fabrics[first], first + entry.count
        if key is None:
            continue
        where = dict(source=region.spec.source_of(f"sites[{j}].profile") or None, key=f"sites[{j}].profile")
        try:
            resolve_profile(key, fabric)
        except TopoError as exc:
            said = [p for p in (exc.source, exc.key) if p and p not in exc.message] + [exc.message]  # its file
            raise TopoError(f"site {entry.name}: {': '.join(said)}", **where) from None
        net, own = profile_network(key), site_network(fabric)
        if net is not None and net != own:
            raise TopoError(f"site {entry.name}: {key!r} is a profile of {net}, but the site's network is {own}: a "
                            f"site's profile prices its own in-site collectives; allowed: a profile of {own}, nccl, "
                            "or a file based on nccl (or none: the site's own)", **where)


def check_region_profile(region: Region, profile) -> None:
    """Refuse a profile calibrated on a network none of ``region``'s sites is on: a profile prices the in-site
    collectives of the network it was calibrated on (:data:`PROFILE_PRICES`), never the DCI, so such a profile
    would price a network it never measured. A profile of no one network (None, ``nccl``, ``ideal``, a file based on
    ``nccl``, a :class:`~topo.engine.profiles.Profile`) and a bundled name (a what-if, as on one site) pass.

    Parameters
    ----------
    region : Region
    profile : optional
        As :func:`~topo.engine.profiles.resolve_profile` takes it.

    Raises
    ------
    TopoError
        Keyed ``profile``, its source the file: the file's network and the sites' networks named.
    """
    if profile is None:
        _check_site_keys(region)
    if isinstance(profile, Profile) or profile is None:
        return
    net = profile_network(profile)
    own = list(dict.fromkeys(site_network(f) for f in region.fabrics))
    if net is None or net in own or not (str(profile).endswith(".toml") or Path(str(profile)).is_file()):
        return  # a bundled name on another network is a what-if the user chose, as on one site
    sites = ", ".join(f"{n} ({site_network(f)})" for n, f in zip(region.site_names, region.fabrics))
    raise TopoError(f"was calibrated on {net}, but no site of {region.name} is ({sites}): it would price "
                    f"{' and '.join(own)} collectives with {net}'s fitted values, and a profile never prices the DCI "
                    f"(another network); allowed: a profile calibrated on {' or '.join(own)}, nccl, or a file based "
                    "on nccl", source=str(profile), key="profile")


def nccl_buffer_bytes() -> float:
    """NCCL's Simple buffer per channel and peer (NCCL_BUFFSIZE), from ``topo/data/dci/nccl_window.toml``.

    Returns
    -------
    float

    Raises
    ------
    TopoError
        The file's value is missing or not a positive number (keyed ``simple_buffer_bytes.value``).
    """
    path = data_dir("dci", "nccl_window.toml")
    doc = read_toml(path, "NCCL window file (.toml)")
    v = doc.get("simple_buffer_bytes", {}).get("value") if isinstance(doc.get("simple_buffer_bytes"), dict) else None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0:
        raise TopoError(f"must be a positive number of bytes (NCCL_BUFFSIZE), got {v!r}", source=str(path),
                        key="simple_buffer_bytes.value")
    return float(v)


def _call_cost_s(profile) -> float:
    """What one more NCCL call costs whatever its size: the ring's Simple base latency (NCCL's baseLat, tuning.cc)
    and the kernel launch (the profile's values, with their sources): a chunk of the pipelined hierarchical pays it
    in every phase."""
    return float(profile.base_latency_s.get("ring", {}).get("Simple", 0.0)) + float(profile.launch_s)


def _candidates(region: Region, coll: str, S: int, site: _SiteTimes, unavailable: dict):
    K, N = region.num_sites, region.num_gpus
    a, b = _ring(K)
    timed: dict[str, Timed] = {}
    loads: dict[str, np.ndarray] = {}
    steps = (2 if coll == "all_reduce" else 1) * (K - 1)
    dci, ld = dci_phase(region, a, b, dci_phase_bytes(coll, K, S), steps)
    phases = {}
    if coll != "all_gather":
        phases["rs"] = site.times["reduce_scatter"][S]
    if coll == "all_gather":
        phases = {"dci": dci, "ag": site.times["all_gather"][S]}
    else:
        phases["dci"] = dci
        if coll == "all_reduce":
            phases["ag"] = site.times["all_gather"][S]
    timed["hierarchical"] = hierarchical(phases)
    timed["hierarchical_pipelined"] = pipelined(phases, site.per_chunk_s)
    loads["hierarchical"] = loads["hierarchical_pipelined"] = ld
    cross = dci.latency_s / steps if steps else 0.0
    ring_key = coll + ":ring"
    if ring_key in site.times:
        r = site.times[ring_key][S]
        n = site.n
        f = 2.0 if coll == "all_reduce" else 1.0
        step = r.latency_s / (f * (n - 1))
        site_bw = r.bandwidth_s * ((N - 1) / N) / ((n - 1) / n)  # the same ring bandwidth, N ranks instead of n
        ring_dci, ring_ld = dci_phase(region, a, b, f * (N - 1) / N * S, 0, site.channels, None,
                                      xdc_nodes(region, "ring"))
        win = window_s(f * (N - 1) / N * S, 2 * cross, site.channels, site.buffer_bytes)
        window = Phase(0.0, win, f"window:{site.channels} channels x {site.buffer_bytes / 2**20:g} MiB per round trip")
        timed["ring"] = flat_ring(N, step, site_bw, cross, ring_dci, r.bound, window)
        loads["ring"] = ring_ld
    else:
        unavailable["ring"] = site.missing.get(ring_key, "no ring inside the sites")
    tree_key = coll + ":tree"
    if tree_key in site.times:
        tree_dci, tree_ld = tree_dci_phase(region, float(S), site.channels)
        timed["tree"] = flat_tree(site.times[tree_key][S], chain_hops_s(region), tree_dci)
        loads["tree"] = tree_ld
    else:
        unavailable["tree"] = site.missing.get(tree_key, f"NCCL's tree runs all_reduce only, not {coll}")
    return timed, loads
