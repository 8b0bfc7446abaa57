"""Hardware profiles: what fraction of each link a collective can use, and what each step costs in latency.

A :class:`Profile` is composed from versioned data files in ``topo/data/profiles/`` (see its README): NCCL's own
model constants per NCCL version (``nccl/``), one file per GPU generation (``gpu/``), one per network technology
and generation (``network/``) and topo's own model terms (``model/``). Every value carries its source, and values
fitted to measurements say so (``fitted = true``, ``fitted_on``); ``benchmarks/accuracy.py`` scores the fitted ones
leave-one-setup-out. No constant is a Python literal here.

- :func:`profile_for` -- the bundled profile of a GPU generation on a network technology;
- :func:`resolve_profile` -- ``nccl`` (the fabric's default), ``ideal``, a bundled name such as
  ``hopper+infiniband_ndr`` (``ampere+roce@2.7`` picks another NCCL version), or a TOML file (as ``topo calibrate`` writes);
- :func:`ideal_profile` -- the textbook alpha-beta machine.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path

from ..errors import TopoError
from .profile_data import PARAMETERS, ProfileFile, bundled_dir, bundled_files, load_profile_file

__all__ = ["Profile", "PROTOCOLS", "profile_for", "fabric_profile", "network_for", "ideal_profile", "resolve_profile",
           "compose_profile",
           "bundled_profile_names", "site_network", "profile_network", "GENERATIONS", "NETWORKS", "NCCL_VERSIONS",
           "node_index", "profile_parts", "latency_inter_us"]

PROTOCOLS = ("LL", "LL128", "Simple")
US = 1e-6
GB = 1e9


def node_index(num_domains: int) -> int:
    """NCCL's tuning scale: 0 for one node, 1 for two, 2 for more.

    Parameters
    ----------
    num_domains : int

    Returns
    -------
    int
    """
    return 0 if num_domains <= 1 else (1 if num_domains == 2 else 2)


@dataclass(frozen=True)
class Profile:
    """Efficiencies, bandwidth caps and latencies for one GPU generation on one network technology.

    Dictionaries are keyed by algorithm family (``ring``, ``tree``, ``nvls``, ``nvls_tree``, ``collnet``, ``pat``,
    ``p2p``) and then protocol (``LL``, ``LL128``, ``Simple``); a missing protocol means the family does not
    run with it. Efficiencies and caps may be a 3-tuple for one node / two nodes / more (NCCL's scales).
    """

    name: str
    nvlink_efficiency: float
    network_efficiency: float
    pcie_efficiency: float = 1.0
    base_latency_s: dict = field(default_factory=dict)
    nvlink_hop_s: dict = field(default_factory=dict)
    net_hop_s: dict = field(default_factory=dict)
    # NCCL's own per-step network latencies, without topo's fitted net_latency_us (None: net_hop_s is NCCL's)
    nccl_net_hop_s: dict | None = None
    net_overhead_s: float = 0.0
    # NCCL's overhead on AMD x86 hosts (getNetOverhead); None: the same as net_overhead_s. for_cpu picks one
    net_overhead_amd_s: float | None = None
    # NCCL's LL busbw cap across nodes on AMD x86 hosts (tuning.cc llMaxBws, its AMD row; one node / two / more);
    # None: the GPU file's (Intel's) whatever the CPU. for_cpu("amd") puts it in busbw_cap_Bps
    ll_max_amd_Bps: tuple | None = None
    # NCCL's tuner corrects NVLSTree all-reduce's bandwidth by tree_correction (Blackwell on x86 hosts; for_cpu("arm")
    # turns it off)
    nvls_tree_correction: bool = False
    proto_efficiency: dict = field(default_factory=dict)
    busbw_cap_Bps: dict = field(default_factory=dict)  # NCCL's caps on busbw (its own accounting)
    channels: int = 16
    channels_one_gpu_per_node: int = 0  # NCCL's channels with one GPU per node (0: channels)
    pipeline_window_bytes: float = 0.0
    # NVLS ranks per NVLink domain the window and NVLS rates were fitted at: above it NVLS busbw stays flat and the
    # NVLS pipeline window grows with the ranks (topo.engine.algorithms.nvls); 0 = the textbook traffic, one window
    reference_ranks_per_domain: int = 0
    nvls_max_heads: int = 0  # NCCL_MAX_NVLS_ARITY: the most NVLSTree heads (NICs carrying it) per domain; 0 = all
    # NVLSTree's chunk (topo.engine.nvls_chunk): NCCL's NVLS channels, its NVLS chunk and the NVLSTree cap on it
    # from nvls_tree_small_chunk_domains domains on; 0: no chunk bound
    nvls_channels: int = 0
    nvls_chunk_bytes: int = 0
    nvls_tree_max_chunk_bytes: int = 0
    nvls_tree_small_chunk_domains: int = 0
    steps_in_flight: int = 1  # NCCL_STEPS: steps a connection keeps in flight (src/include/device.h)
    # NCCL's Simple-protocol buffer per connection (NCCL_BUFFSIZE's default) and its p2p chunk across nodes; with
    # the NVLS chunks they give the smallest chunk a pipelined transfer runs (smallest_chunk_bytes); 0: not given
    simple_buffer_bytes: int = 0
    p2p_net_chunk_bytes: int = 0
    nvlink_hop_extra_s: float = 0.0  # added to every NVLink step of the generation (over NCCL's NVLink constants)
    mnnvl_hop_extra_s: float = 0.0  # added to every NVLink step in a domain spanning several servers (NVL72)
    mnnvl_extra_s: float = 0.0  # added once to a collective in such a domain
    launch_s: float = 0.0  # the GPU's fixed cost per kernel in a queue of back-to-back kernels, once per collective
    host_launch_per_gpu_s: float = 0.0  # host time per GPU's kernel when one thread launches several GPUs in turn
    p2p_channel_Bps: float = math.inf  # one NCCL p2p channel to a network peer (send/receive)
    peer_overhead_s: float = 0.0  # per remote peer of an all-to-all (message set-up)
    # send/receive: LL up to this many bytes per p2p channel of a peer, Simple above, never LL128 (NCCL's
    # P2P_LL_THRESHOLD, src/enqueue.cc); 0: no rule, the fastest protocol
    p2p_ll_threshold_bytes: float = 0.0
    # ring/tree: bytes of message per channel below which NCCL runs one channel fewer, by family and protocol
    # (src/enqueue.cc: nThreads x threadThreshold; x ranks for ring LL); empty: every channel at every size
    channel_min_bytes: dict = field(default_factory=dict)
    # LL on the channels NCCL runs at a size (channel_min_bytes): each moves at most this bus bandwidth (inf: no
    # per-channel limit); the proxy's per-channel message cost is counted only where proxy_channel_messages
    ll_channel_busbw_Bps: float = math.inf
    ll_max_threads: int = 512  # one LL channel's threads at full size (NCCL_LL_MAX_NTHREADS)
    proxy_channel_messages: bool = False
    # NCCL's tuner terms (topo.engine.tuner): tree bandwidth x tree_correction[proto][log2(bytes/64)] at medium sizes;
    # ring/Simple all-reduce latency x ring_plateau_latency_factor across nodes from that many bytes per rank.
    # Empty / 1.0: the profile gives none (the tuner then uses none).
    tree_correction: dict = field(default_factory=dict)
    ring_plateau_latency_factor: float = 1.0
    ring_plateau_min_bytes_per_rank: float = 0.0
    # network steps NCCL's ring all-reduce latency counts beyond the 2 x (nodes - 1) a chunk crosses (tuning.cc
    # nInterSteps: 2 x nodes from NCCL 2.8, 2 x (nodes - 1) before); they replace as many NVLink steps
    ring_allreduce_wrap_steps: float = 0.0
    # NCCL's PAT latency (tuning.cc): base + log2i(nodes) x the Tree's network step / pat_net_step_divisor + ranks x
    # pat_rank_latency_s
    pat_net_step_divisor: float = 1.0
    pat_rank_latency_s: float = 0.0
    source: str = ""
    # where each value comes from: parameter -> {value, source, fitted, fitted_on, assumed, file}
    sources: dict = field(default_factory=dict, compare=False, repr=False)
    # composed from bundled files only (no user overrides): the accuracy figures, and so the time ranges of
    # topo.engine.interval, describe it
    bundled: bool = False

    def protocols(self, family: str) -> tuple[str, ...]:
        """The protocols the profile prices for ``family`` (LL, LL128, Simple order).

        Parameters
        ----------
        family : str

        Returns
        -------
        tuple of str
        """
        return tuple(p for p in PROTOCOLS if p in self.proto_efficiency.get(family, {}))

    def smallest_chunk_bytes(self) -> int:
        """The smallest chunk NCCL's Simple protocol moves through a connection at full message size, over the
        algorithms the profile runs: one Simple step (the buffer over NCCL_STEPS: a tree's chunk; a ring's chunk is
        4 steps), the p2p chunk across nodes, and with NVLS its chunk and NVLSTree's cap. A pipelined collective
        fills its pipeline with at least one such chunk (0: the profile gives none of them).

        Returns
        -------
        int
        """
        sizes = [self.simple_buffer_bytes // max(self.steps_in_flight, 1), self.p2p_net_chunk_bytes]
        if "nvls" in self.proto_efficiency:
            sizes += [self.nvls_chunk_bytes, self.nvls_tree_max_chunk_bytes]
        return min((s for s in sizes if s > 0), default=0)

    def efficiency(self, family: str, proto: str, num_domains: int = 1) -> float:
        """Bandwidth efficiency of protocol ``proto`` for ``family``.

        Parameters
        ----------
        family : str
            ring, tree, nvls, nvls_tree, collnet, pat or p2p.
        proto : str
            LL, LL128 or Simple.
        num_domains : int
            NVLink domains of the communicator (NCCL's tables differ for 1, 2 and more nodes).

        Returns
        -------
        float
        """
        e = self.proto_efficiency[family][proto]
        return e[node_index(num_domains)] if isinstance(e, tuple) else e

    def busbw_cap(self, family: str, proto: str, num_domains: int = 1) -> float:
        """NCCL's cap on the bus bandwidth (bytes/s, at the profile's channels; inf: none).

        Parameters
        ----------
        family : str
            ring, tree, nvls, nvls_tree, collnet, pat or p2p.
        proto : str
            LL, LL128 or Simple.
        num_domains : int
            NVLink domains of the communicator (NCCL's tables differ for 1, 2 and more nodes).

        Returns
        -------
        float
        """
        c = self.busbw_cap_Bps.get(family, {}).get(proto)
        if c is None:
            return math.inf
        return c[node_index(num_domains)] if isinstance(c, tuple) else c

    def base(self, family: str, proto: str) -> float:
        """Base latency (s) of ``family`` with ``proto``.

        Parameters
        ----------
        family : str
            ring, tree, nvls, nvls_tree, collnet, pat or p2p.
        proto : str
            LL, LL128 or Simple.

        Returns
        -------
        float
        """
        return self.base_latency_s.get(family, {}).get(proto, 0.0)

    def nv_hop(self, family: str, proto: str) -> float:
        """Latency (s) of one NVLink hop.

        Parameters
        ----------
        family : str
            ring, tree, nvls, nvls_tree, collnet, pat or p2p.
        proto : str
            LL, LL128 or Simple.

        Returns
        -------
        float
        """
        return self.nvlink_hop_s.get(family, {}).get(proto, 0.0)

    def net_hop(self, family: str, proto: str) -> float:
        """Latency (s) of one network hop.

        Parameters
        ----------
        family : str
            ring, tree, nvls, nvls_tree, collnet, pat or p2p.
        proto : str
            LL, LL128 or Simple.

        Returns
        -------
        float
        """
        return self.net_hop_s.get(family, {}).get(proto, 0.0)

    def nccl_model(self) -> "Profile":
        """This profile as NCCL's tuner prices with it: without topo's fitted latency terms (a network's
        ``net_latency_us``, the NVL72 ``mnnvl_*`` extras, the kernel launch and the host's launch floor), which time the wire but are not in NCCL's model (nccl #1453:
        NCCL's own figure on RoCE is its InfiniBand constants).

        Returns
        -------
        Profile
        """
        hops = self.net_hop_s if self.nccl_net_hop_s is None else self.nccl_net_hop_s
        return replace(self, net_hop_s=hops, nvlink_hop_extra_s=0.0, mnnvl_hop_extra_s=0.0, mnnvl_extra_s=0.0,
                       launch_s=0.0, host_launch_per_gpu_s=0.0)

    def for_cpu(self, cpu_vendor: str | None) -> "Profile":
        """This profile on hosts with ``cpu_vendor``'s CPUs: NCCL's network overhead per step is 2 us on AMD x86,
        1 us on Intel and on every other CPU (NVIDIA/nccl src/graph/tuning.cc getNetOverhead), its LL bus bandwidth cap
        across nodes is its AMD row's on AMD hosts (llMaxBws: 22.5 GB/s on 2 nodes, 19.0 on more, against Intel's 39.0
        and 20.4), and its tuner's
        NVLSTree correction holds on x86 hosts only (ncclTopoGetAlgoTime).

        Parameters
        ----------
        cpu_vendor : str or None
            ``intel``, ``amd`` or ``arm`` (the spec's ``server.cpu_vendor``); None keeps the profile as it is.

        Returns
        -------
        Profile
        """
        changes = {}
        if cpu_vendor == "amd" and self.net_overhead_amd_s is not None:
            changes.update(net_overhead_s=self.net_overhead_amd_s, net_overhead_amd_s=None)
        if cpu_vendor == "amd" and self.ll_max_amd_Bps is not None:
            changes.update(busbw_cap_Bps=_ll_caps_across_nodes(self.busbw_cap_Bps, self.ll_max_amd_Bps),
                           ll_max_amd_Bps=None)
        if cpu_vendor == "arm" and self.nvls_tree_correction:  # NCCL: only where cpuArch == X86
            changes["nvls_tree_correction"] = False
        return replace(self, **changes) if changes else self

    def overhead(self, proto: str) -> float:
        """Per network step software overhead (NCCL: x3 for Simple).

        Parameters
        ----------
        proto : str

        Returns
        -------
        float
            Seconds.
        """
        return self.net_overhead_s * (3.0 if proto == "Simple" else 1.0)


def _ll_caps_across_nodes(caps: dict, ll_max_Bps: tuple) -> dict:
    """``caps`` with the LL busbw caps of every family across nodes (two nodes, more) from ``ll_max_Bps``; one
    node keeps its own (NCCL reads the GPU's row there, the CPU's across nodes: tuning.cc ``index1``)."""
    out = {}
    for fam, protos in caps.items():
        c = protos.get("LL")
        if isinstance(c, tuple):
            protos = {**protos, "LL": (c[0], ll_max_Bps[1], ll_max_Bps[2])}
        out[fam] = protos
    return out


def _version_key(v: str):
    return tuple(int(x) if x.isdecimal() else 0 for x in v.split("."))


GENERATIONS: tuple[str, ...] = tuple(sorted(bundled_files()["gpu"]))
NETWORKS: tuple[str, ...] = tuple(sorted(bundled_files()["network"]))
NCCL_VERSIONS: tuple[str, ...] = tuple(sorted(bundled_files()["nccl"], key=_version_key))
_DEFAULT_NCCL = NCCL_VERSIONS[-1]


def _tup(x):
    return tuple(x) if isinstance(x, list) else x


def _by_family(table: dict, scale: float) -> dict:
    return {fam: {p: (tuple(v * scale for v in x) if isinstance(x, list) else x * scale) for p, x in protos.items()}
            for fam, protos in table.items()}


def net_step_table(v: dict) -> dict:
    """Per-step network latency (us) by family and protocol, before ``net_hop_scale``.

    NCCL's InfiniBand table (``net_hop_us``), or, when the network file gives its own ``net_step_latency_us`` (a
    provider's tuner constant, e.g. aws-ofi-nccl's ``net_lat``), that value for every family and protocol, plus
    ``net_simple_extra_us`` for Simple. A ``net_latency_us`` is then added to every step, twice for Simple, as
    NCCL adds the latency a net plugin reports: ``interLat = hwLat[NET] + latencyInter`` (+ ``latencyInter``
    again for Simple's flush), NVIDIA/nccl src/graph/tuning.cc.

    Parameters
    ----------
    v : dict
        A network file's values.

    Returns
    -------
    dict
        ``{family: {protocol: microseconds}}``.
    """
    table = v["net_hop_us"]
    if "net_step_latency_us" in v:
        step, extra = v["net_step_latency_us"], v.get("net_simple_extra_us", 0.0)
        table = {fam: {p: step + (extra if p == "Simple" else 0.0) for p in protos} for fam, protos in table.items()}
    add = v.get("net_latency_us", 0.0)
    if add:
        table = {fam: {p: _plus(x, latency_inter_us(add, p)) for p, x in protos.items()}
                 for fam, protos in table.items()}
    return table


def latency_inter_us(latency_us: float, protocol: str) -> float:
    """What a network plugin's latency adds to one network step: once, twice for Simple (NCCL's ``interLat =
    hwLat[NET] + latencyInter``, plus ``latencyInter`` again for Simple, NVIDIA/nccl src/graph/tuning.cc).

    Parameters
    ----------
    latency_us : float
        The latency per step (a network file's ``net_latency_us``), in microseconds.
    protocol : str
        One of :data:`PROTOCOLS`.

    Returns
    -------
    float
        Microseconds added to the step.
    """
    return latency_us * (2.0 if protocol == "Simple" else 1.0)


def _plus(x, a):
    return [y + a for y in x] if isinstance(x, list) else x + a


def _file_label(path) -> str:
    """A bundled file as ``kind/name.toml``; any other (a calibrated profile) as its path, as given."""
    try:
        return Path(path).resolve().relative_to(bundled_dir().resolve()).as_posix()
    except ValueError:
        return str(path)


def compose_profile(parts: list[ProfileFile], name: str, overrides: ProfileFile | None = None) -> Profile:
    """Build a :class:`Profile` from data files (later files and ``overrides`` win), keeping each value's
    source.

    Parameters
    ----------
    parts : list of ProfileFile
    name : str
    overrides : ProfileFile, optional

    Returns
    -------
    Profile
    """
    params, where = _merged(parts, overrides)
    v = {k: p.value for k, p in params.items()}
    ch = int(v["channels"])
    eff = _proto_efficiency(v)
    caps = _busbw_caps(v, ch)
    sources = {k: {"value": p.value, "source": p.source, "fitted": p.fitted, "fitted_on": p.fitted_on,
                   "assumed": p.assumed, "file": where[k]} for k, p in params.items()}
    return Profile(
        name=name,
        nvlink_efficiency=v["nvlink_efficiency"],
        network_efficiency=v["network_efficiency"],
        base_latency_s=_by_family(v["base_latency_us"], US),
        nvlink_hop_s=_by_family(v["nvlink_hop_us"], US),
        net_hop_s=_by_family(net_step_table(v), US * v["net_hop_scale"]),
        nccl_net_hop_s=_by_family(net_step_table({**v, "net_latency_us": 0.0}), US * v["net_hop_scale"]),
        net_overhead_s=v["net_overhead_us"] * US,
        net_overhead_amd_s=v["net_overhead_amd_us"] * US if "net_overhead_amd_us" in v else None,
        ll_max_amd_Bps=tuple(x * GB for x in v["ll_max_busbw_amd_GBps"]) if "ll_max_busbw_amd_GBps" in v else None,
        proto_efficiency=eff,
        busbw_cap_Bps=caps,
        channels=ch,
        channels_one_gpu_per_node=int(v.get("channels_one_gpu_per_node", 0)),
        pipeline_window_bytes=v["pipeline_window_bytes"],
        reference_ranks_per_domain=int(v.get("reference_ranks_per_domain", 0)),
        nvls_max_heads=int(v.get("nvls_max_heads", 0)),
        nvls_channels=int(v.get("nvls_channels", 0)),
        nvls_chunk_bytes=int(v.get("nvls_chunk_bytes", 0)),
        nvls_tree_max_chunk_bytes=int(v.get("nvls_tree_max_chunk_bytes", 0)),
        nvls_tree_small_chunk_domains=int(v.get("nvls_tree_small_chunk_domains", 0)),
        steps_in_flight=int(v.get("steps_in_flight", 1)),
        simple_buffer_bytes=int(v.get("simple_buffer_bytes", 0)),
        p2p_net_chunk_bytes=int(v.get("p2p_net_chunk_bytes", 0)),
        nvlink_hop_extra_s=v.get("nvlink_hop_extra_us", 0.0) * US,
        mnnvl_hop_extra_s=v.get("mnnvl_hop_extra_us", 0.0) * US,
        mnnvl_extra_s=v.get("mnnvl_extra_us", 0.0) * US,
        launch_s=v.get("launch_us", 0.0) * US,
        host_launch_per_gpu_s=v.get("host_launch_per_gpu_us", 0.0) * US,
        nvls_tree_correction=bool(v.get("nvls_tree_correction_x86", 0)),
        p2p_channel_Bps=v.get("p2p_channel_GBps", math.inf) * GB,
        peer_overhead_s=v["peer_overhead_us"] * US,
        p2p_ll_threshold_bytes=float(v.get("p2p_ll_threshold_bytes", 0.0)),
        channel_min_bytes=_by_family(v.get("channel_min_bytes", {}), 1.0),
        ll_channel_busbw_Bps=v.get("ll_channel_busbw_GBps", math.inf) * GB,
        ll_max_threads=int(v.get("ll_max_threads", 512)),
        proxy_channel_messages=bool(v.get("proxy_channel_messages", 0)),
        tree_correction={p: tuple(x) for p, x in v.get("tree_correction", {}).items()},
        ring_plateau_latency_factor=float(v.get("ring_plateau_latency_factor", 1.0)),
        ring_plateau_min_bytes_per_rank=float(v.get("ring_plateau_min_bytes_per_rank", 0.0)),
        ring_allreduce_wrap_steps=float(v.get("ring_allreduce_wrap_steps", 0.0)),
        pat_net_step_divisor=float(v.get("pat_net_step_divisor", 1.0)),
        pat_rank_latency_s=v.get("pat_rank_latency_us", 0.0) * US,
        source="; ".join(sorted({_file_label(w) for w in set(where.values())})),
        sources=sources,
        bundled=overrides is None,
    )


def _merged(parts: list[ProfileFile], overrides: ProfileFile | None) -> tuple[dict, dict]:
    """Each parameter of the files (later ones and ``overrides`` win) and the file it came from."""
    params, where = {}, {}
    for pf in parts + ([overrides] if overrides else []):
        for k, p in pf.params.items():
            if pf is overrides and k in params and PARAMETERS[k].shape == "by_family":
                # a user file overrides per family and protocol: what it leaves out keeps the base's value
                base = params[k].value
                p = p.model_copy(update={"value": {fam: {**base.get(fam, {}), **protos} for fam, protos in
                                      {**{f: {} for f in base}, **p.value}.items()}})
            params[k], where[k] = p, pf.path
    return params, where


def _proto_efficiency(v: dict) -> dict:
    """Efficiency per schedule family and protocol, of the protocols the profile allows (NVLS: Simple only)."""
    allowed = set(v.get("protocols", PROTOCOLS))  # the NCCL_PROTO a provider sets
    eff = {fam: {p: _tup(x) for p, x in protos.items() if p in allowed}
           for fam, protos in v["proto_efficiency"].items()}
    if "nvls_efficiency" in v:
        eff["nvls"] = {"Simple": v["nvls_efficiency"]}
        eff["nvls_tree"] = {"Simple": v.get("nvls_tree_efficiency", v["nvls_efficiency"])}
    return eff


def _busbw_caps(v: dict, ch: int) -> dict:
    """Bus-bandwidth ceilings (bytes/s) per family and protocol: LL's, and LL128's and tree Simple's of ``ch``
    channels."""
    ll_max = tuple(x * GB for x in v["ll_max_busbw_GBps"])
    return {
        "ring": {"LL": ll_max, "LL128": ch * v["ring_ll128_per_channel_GBps"] * GB},
        "tree": {"LL": ll_max, "LL128": tuple(ch * x * GB for x in v["tree_ll128_per_channel_GBps"]),
                 "Simple": tuple(ch * x * GB for x in v["tree_simple_per_channel_GBps"])},
    }


def profile_parts(generation: str, network: str, nccl: str | None = None) -> list[ProfileFile]:
    """The bundled files a profile is made of: NCCL constants, GPU generation, network, topo's model terms.

    Parameters
    ----------
    generation, network : str
    nccl : str, optional
        NCCL version of the constants (default: the newest bundled).

    Returns
    -------
    list of ProfileFile

    Raises
    ------
    TopoError
        An unknown generation, network or version, or NCCL constants older than the GPU's NVLS.
    """
    files = bundled_files()
    if generation not in files["gpu"]:
        raise TopoError(f"no profile for GPU generation {generation!r}; known: {', '.join(GENERATIONS)}",
                        key="gpu")
    if network not in files["network"]:
        raise TopoError(f"no profile for network {network!r}; known: {', '.join(NETWORKS)}",
                        key="fabric.technology")
    network = network_for(generation, network)
    nccl = nccl or _DEFAULT_NCCL
    if nccl not in files["nccl"]:
        raise TopoError(f"no NCCL constants for version {nccl!r}; known: {', '.join(NCCL_VERSIONS)}", key="nccl")
    nccl_file, gpu_file = files["nccl"][nccl], files["gpu"][generation]
    if "nvls_efficiency" in gpu_file.params and "nvls" not in nccl_file.params["base_latency_us"].value:
        with_nvls = [v for v in NCCL_VERSIONS if "nvls" in files["nccl"][v].params["base_latency_us"].value]
        raise TopoError(f"NCCL {nccl} predates NVLS, which {generation} GPUs run; use NCCL constants "
                        f"{', '.join(with_nvls)} with {generation}", key="nccl")
    return [nccl_file, gpu_file, files["network"][network], files["model"]["topo"]]


def network_for(generation: str, network: str) -> str:
    """The network file a technology means on a GPU generation: a file that ``replaces`` it on that
    generation (``efa`` on A100 is EFA v1, ``efa_v1``), else the technology's own.

    Parameters
    ----------
    generation, network : str

    Returns
    -------
    str
    """
    for name, pf in bundled_files()["network"].items():
        if pf.replaces == network and generation in pf.generations:
            return name
    return network


@lru_cache(maxsize=64)
def profile_for(generation: str, network: str, nccl: str | None = None) -> Profile:
    """The bundled profile for a GPU generation on a network technology (cached: a :class:`Profile` is frozen and
    made only of the bundled files, which :func:`~topo.engine.profile_data.bundled_files` reads once; a training
    step asked for its fabric's three times, each composition resolving the files' paths, 2 ms).

    A technology another file ``replaces`` on that generation is named as that file (``ampere+efa`` is
    ``ampere+efa_v1``).

    Parameters
    ----------
    generation, network : str
    nccl : str, optional
        NCCL version of the constants (default: the newest bundled).

    Returns
    -------
    Profile
    """
    if network in NETWORKS:
        network = network_for(generation, network)
    name = f"{generation}+{network}" + (f"@{nccl}" if nccl and nccl != _DEFAULT_NCCL else "")
    return compose_profile(profile_parts(generation, network, nccl), name)


def bundled_profile_names() -> list[str]:
    """Every bundled profile name (``generation+network``; append ``@VERSION`` for other NCCL constants).

    Returns
    -------
    list of str
    """
    return [f"{g}+{n}" for g in GENERATIONS for n in NETWORKS]


def ideal_profile() -> Profile:
    """The textbook machine of the closed forms: every link at its full rate, no software latency, one protocol.

    With it, an estimate is pure Hockney over the routed fabric: per-hop latency is the links' ``latency_s``.

    Returns
    -------
    Profile
    """
    fams = ("ring", "tree", "nvls", "nvls_tree", "collnet", "pat", "p2p")
    return Profile(name="ideal", nvlink_efficiency=1.0, network_efficiency=1.0,
                   proto_efficiency={f: {"Simple": 1.0} for f in fams},
                   source="alpha-beta (Hockney) model with no software overheads")


def _parse_name(name: str) -> tuple[str, str, str | None]:
    base, _, nccl = name.partition("@")
    gen, plus, net = base.partition("+")
    if not plus:
        raise TopoError(f"unknown profile {name!r}; allowed: nccl, ideal, a profile file (.toml) or a bundled "
                        f"name GENERATION+NETWORK[@NCCL]: {', '.join(bundled_profile_names())}", key="profile")
    return gen, net, nccl or None


def _fabric_parts(fabric) -> tuple[str, str]:
    return fabric.spec.gpu_model.generation, fabric.spec.fabric.technology


def site_network(fabric) -> str:
    """The network file a fabric's own profile prices with (its technology as :func:`network_for` names it on its
    GPU generation).

    Parameters
    ----------
    fabric : Fabric

    Returns
    -------
    str
    """
    return network_for(*_fabric_parts(fabric))


def profile_network(profile) -> str | None:
    """The network a profile name or file was composed for: a bundled name's (``hopper+roce``: roce) or a user
    file's base's; None for one that takes each fabric's own (None, ``nccl``, a file based on ``nccl``), for
    ``ideal`` and for a name or file :func:`resolve_profile` refuses (it says why).

    Parameters
    ----------
    profile : str, Path or None

    Returns
    -------
    str or None
    """
    if profile is None or not isinstance(profile, (str, Path)) or str(profile) in ("nccl", "ideal", ""):
        return None
    text = str(profile)
    try:
        base = load_profile_file(text).base if text.endswith(".toml") or Path(text).is_file() else text
        if not base or base == "nccl":
            return None
        gen, net, _ = _parse_name(base)
    except TopoError:
        return None
    return network_for(gen, net) if net in NETWORKS else net


def fabric_profile(fabric) -> Profile:
    """The bundled profile of a fabric: its GPU generation and network technology, on its servers' CPU.

    Parameters
    ----------
    fabric : Fabric

    Returns
    -------
    Profile
    """
    return _profile_on_cpu(*_fabric_parts(fabric), fabric.spec.cpu_vendor)


@lru_cache(maxsize=64)
def _profile_on_cpu(generation: str, network: str, cpu_vendor: str | None) -> Profile:
    """:func:`profile_for` on ``cpu_vendor``'s hosts (cached on all three: :func:`fabric_profile`)."""
    return profile_for(generation, network).for_cpu(cpu_vendor)


def resolve_profile(profile=None, fabric=None) -> Profile:
    """A :class:`Profile` from what a user names.

    A user file whose base is ``nccl`` takes the fabric's default profile as its base.

    Parameters
    ----------
    profile : Profile, str, Path or None
        A Profile (returned as is), ``None`` or ``"nccl"`` (the fabric's generation and network), ``"ideal"``, a
        bundled name (``hopper+roce``, ``ampere+roce@2.7``) or the path of a profile TOML file (``kind = "user"``:
        a bundled ``base`` and the parameters it overrides, as ``topo calibrate`` writes).
    fabric : Fabric, optional
        Needed for ``None``/``"nccl"`` and for a user file based on ``nccl``.

    Returns
    -------
    Profile

    Raises
    ------
    TopoError
        Keyed ``profile``: an unknown name, a bad file.
    """
    if isinstance(profile, Profile):
        return profile
    if profile is None or profile == "nccl":
        if fabric is None:
            raise TopoError("the default profile depends on the fabric's GPU and network; name one instead, "
                            f"e.g. {bundled_profile_names()[0]!r}", key="profile")
        return fabric_profile(fabric)
    if not isinstance(profile, (str, Path)):
        raise TopoError(f"a profile is a name or a file, got {profile!r}", key="profile")
    if profile == "ideal":
        return ideal_profile()
    text = str(profile)
    if not text.strip():
        raise TopoError(f"a profile is a bundled name (e.g. {bundled_profile_names()[0]!r}, see 'topo profile "
                        "list'), 'nccl', 'ideal' or a profile file, got ''", key="profile")
    if text.endswith(".toml") or Path(text).exists():
        pf = load_profile_file(text)
        if pf.kind != "user":
            raise TopoError(f"a profile file to use must have kind = \"user\" (a base and overrides), got "
                            f"{pf.kind!r}: bundled {pf.kind} files are parts of a profile", source=text,
                            key="profile.kind")
        if pf.base == "nccl":
            if fabric is None:
                raise TopoError("base = \"nccl\" needs a fabric to pick the GPU and network", source=text,
                                key="profile.base")
            gen, net, ver = *_fabric_parts(fabric), pf.nccl
        else:
            try:
                gen, net, ver = _parse_name(pf.base)
            except TopoError as exc:
                raise TopoError(exc.message, source=text, key="profile.base") from None
            ver = ver or pf.nccl
        try:
            parts = profile_parts(gen, net, ver)
        except TopoError as exc:
            raise TopoError(exc.message, source=text, key="profile.base") from None
        return compose_profile(parts, pf.name, overrides=pf)
    try:
        return profile_for(*_parse_name(text))
    except TopoError as exc:  # the name the user gave is at fault, not a key of some fabric
        raise TopoError(f"{text!r}: {exc.message}", key="profile") from None
