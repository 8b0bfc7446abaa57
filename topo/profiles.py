"""Hardware profiles: what fraction of each link a collective can use, and what each step costs in latency.

One profile per hardware generation (the GPU's: Ampere, Hopper, Blackwell), combined with one per network
technology (InfiniBand, RoCE, EFA). Never a constant tuned to one measured setup: ``benchmarks/accuracy.py``
checks the same profiles against every measurement in ``../shared/data/`` and RESULTS.md reports the errors.

From NCCL's own model (``src/graph/tuning.cc``: v2.30.7 as summarised in ``../shared/design/cost-model.md``, and
the ``ncclTunerConstantsDefaults`` table of current releases as quoted in public copies of that file):

- base latencies (us, LL/LL128/Simple): Ring 6.6/14.0/8.4, Tree 6.8/14.0/8.4, NVLS, NVLSTree, CollNet 0;
- per-hop latency over NVLink: Ring 0.6/1.9/3.4, Tree 0.6/1.25/4.0, NVLS and NVLSTree 25, CollNetDirect 3.7
  (Simple); over the network: Ring 2.7/4.0/14.0, Tree 5.0/8.5/14, NVLS 18, NVLSTree 20.9, CollNetDirect 31;
  network overhead 1 us per step (Intel x86), x3 for Simple; a ring with one GPU per node uses the Tree's
  network latency;
- bandwidth: Ring LL x0.5 capped at ``llMaxBw``, LL128 x0.92 capped at 36.7 GB/s per channel (Hopper; Blackwell
  40, Ampere 20); Tree x0.92 (Simple, capped at 38.7/41.4/36.0 GB/s per channel on 1/2/4+ nodes for Hopper),
  then LL x1/3.8 (capped at ``llMaxBw``) and LL128 x120/128 (x7/9 in one node); NVLS x``nvlsEfficiency``
  (Hopper 0.85, Blackwell 0.74); ``llMaxBw`` (busbw): one node Ampere 87.7, Hopper 141, Blackwell 282 GB/s;
  several nodes (Intel CPUs) 39.0 on 2 nodes, 20.4 on 4 or more.
- usable NVLink as NCCL counts it: Hopper 18 links x 20.6 GB/s = 370.8 of 450 GB/s per direction (82.4%);
  Ampere 12 x 20 = 240 of 300 GB/s (80%).

Fitted to the public measurements (``../shared/data/nccl_tests_measurements.csv``, see benchmarks/RESULTS.md),
where NCCL's model and the measurements disagree, one value per generation or technology:

- ``pipeline_window_bytes``: NCCL streams data through per-channel buffers; until those are full a collective
  runs at about half its steady bandwidth. Modelled as the first ``min(S, W)`` bytes costing twice; W = 16 MiB
  fits the slow approach to the asymptote seen in every multi-MiB measurement (NCCL's model has no such term).
- Blackwell usable NVLink: 75% of 900 GB/s (675 GB/s per direction): GB200/GB300 all-to-all inside one NVL72
  rack moves 628-685 GB/s per GPU, and the NVLS and ring all-reduces there agree within a few percent.
- NVLSTree efficiency (Hopper 0.76): the 2- and 4-node H100 runs reach 469 and 366 GB/s busbw, well below NCCL's
  own estimate; NCCL's maintainers scale NVLSTree by ``0.70 nNodes / (2 (nNodes - 1))`` in recent releases.
- Network efficiency: InfiniBand 0.94 (NVIDIA's maintainers: 46-49 GB/s per 400G NIC in NCCL, nccl-tests issues
  #290 and #267); RoCE 0.86 (the GCP B200 all-gather, NIC-bound, reaches 344 of 400 GB/s busbw); EFA 0.90.
- Network hop latency multipliers: RoCE x3 and EFA x5.5 over NCCL's InfiniBand-era constants (the OCI RoCE,
  GCP RoCE and AWS EFA small-message times; EFA has one measured setup, so its value is not cross-checked).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from .errors import TopoError

__all__ = ["Profile", "PROTOCOLS", "profile_for", "ideal_profile", "GENERATIONS", "NETWORKS", "node_index"]

PROTOCOLS = ("LL", "LL128", "Simple")
US = 1e-6
GB = 1e9


def _p(ll, ll128, simple):
    return {"LL": ll * US, "LL128": ll128 * US, "Simple": simple * US}


def node_index(num_domains: int) -> int:
    """NCCL's tuning scale: 0 for one node, 1 for two, 2 for more."""
    return 0 if num_domains <= 1 else (1 if num_domains == 2 else 2)


@dataclass(frozen=True)
class Profile:
    """Efficiencies, bandwidth caps and latencies for one GPU generation on one network technology.

    Dictionaries are keyed by algorithm family (``ring``, ``tree``, ``nvls``, ``nvls_tree``, ``collnet``,
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
    net_overhead_s: float = 0.0
    proto_efficiency: dict = field(default_factory=dict)
    busbw_cap_Bps: dict = field(default_factory=dict)  # NCCL's caps on busbw (its own accounting)
    channels: int = 16
    pipeline_window_bytes: float = 0.0
    peer_overhead_s: float = 0.0  # per remote peer of an all-to-all (message set-up)
    source: str = ""

    def protocols(self, family: str) -> tuple[str, ...]:
        return tuple(p for p in PROTOCOLS if p in self.proto_efficiency.get(family, {}))

    def efficiency(self, family: str, proto: str, num_domains: int = 1) -> float:
        e = self.proto_efficiency[family][proto]
        return e[node_index(num_domains)] if isinstance(e, tuple) else e

    def busbw_cap(self, family: str, proto: str, num_domains: int = 1) -> float:
        c = self.busbw_cap_Bps.get(family, {}).get(proto)
        if c is None:
            return math.inf
        return c[node_index(num_domains)] if isinstance(c, tuple) else c

    def base(self, family: str, proto: str) -> float:
        return self.base_latency_s.get(family, {}).get(proto, 0.0)

    def nv_hop(self, family: str, proto: str) -> float:
        return self.nvlink_hop_s.get(family, {}).get(proto, 0.0)

    def net_hop(self, family: str, proto: str) -> float:
        return self.net_hop_s.get(family, {}).get(proto, 0.0)

    def overhead(self, proto: str) -> float:
        """Per network step software overhead (NCCL: x3 for Simple)."""
        return self.net_overhead_s * (3.0 if proto == "Simple" else 1.0)


_NCCL_BASE = {"ring": _p(6.6, 14.0, 8.4), "tree": _p(6.8, 14.0, 8.4), "nvls": {"Simple": 0.0},
              "nvls_tree": {"Simple": 0.0}, "collnet": {"Simple": 0.0}, "p2p": _p(6.6, 14.0, 8.4)}
_NCCL_NV = {"ring": _p(0.6, 1.9, 3.4), "tree": _p(0.6, 1.25, 4.0), "nvls": {"Simple": 25 * US},
            "nvls_tree": {"Simple": 25 * US}, "collnet": {"Simple": 3.7 * US}, "p2p": _p(0.6, 1.9, 3.4)}
_NCCL_NET = {"ring": _p(2.7, 4.0, 14.0), "tree": _p(5.0, 8.5, 14.0), "nvls": {"Simple": 18 * US},
             "nvls_tree": {"Simple": 20.9 * US}, "collnet": {"Simple": 31 * US}, "p2p": _p(2.7, 4.0, 14.0)}

# (per generation) NCCL: LL bandwidth caps, per-channel caps; usable NVLink; NVLS efficiency
GENERATIONS: dict[str, dict] = {
    "ampere": {"nvlink_efficiency": 240 / 300, "ll_max": (87.7, 39.0, 20.4), "ring_ll128_ch": 20.0,
               "tree_ll128_ch": (20.0, 20.0, 20.0), "tree_ch": (24.0, 23.6, 17.8), "nvls": None,
               "nvls_tree": None},
    "hopper": {"nvlink_efficiency": 370.8 / 450, "ll_max": (141.0, 39.0, 20.4), "ring_ll128_ch": 36.7,
               "tree_ll128_ch": (36.7, 36.7, 29.0), "tree_ch": (38.7, 41.4, 36.0), "nvls": 0.85,
               "nvls_tree": 0.76},
    "blackwell": {"nvlink_efficiency": 0.75, "ll_max": (282.0, 39.0, 20.4), "ring_ll128_ch": 40.0,
                  "tree_ll128_ch": (55.6, 31.67, 20.0), "tree_ch": (70.0, 42.8, 24.0), "nvls": 0.74,
                  "nvls_tree": 0.76 * 0.74 / 0.85},
}

NETWORKS: dict[str, dict] = {
    "infiniband_hdr": {"network_efficiency": 0.94, "net_scale": 1.0, "peer_overhead_s": 1.0 * US},
    "infiniband_ndr": {"network_efficiency": 0.94, "net_scale": 1.0, "peer_overhead_s": 1.0 * US},
    "infiniband_xdr": {"network_efficiency": 0.94, "net_scale": 1.0, "peer_overhead_s": 1.0 * US},
    "roce": {"network_efficiency": 0.86, "net_scale": 3.0, "peer_overhead_s": 1.0 * US},
    "efa": {"network_efficiency": 0.90, "net_scale": 5.5, "peer_overhead_s": 4.5 * US},
}

_CHANNELS = 16  # NCCL's channel count on 8-GPU NVSwitch servers with 8 NICs (caps scale with it)
_WINDOW = 16 * 2**20

_NCCL_SRC = ("NVIDIA/nccl src/graph/tuning.cc (v2.30.7 per ../shared/design/cost-model.md; "
             "ncclTunerConstantsDefaults of current releases); fitted values per topo.profiles docstring")


def profile_for(generation: str, network: str) -> Profile:
    """The NCCL-derived profile for a GPU generation on a network technology."""
    if generation not in GENERATIONS:
        raise TopoError(f"no profile for GPU generation {generation!r}; known: {', '.join(GENERATIONS)}",
                        key="gpu")
    if network not in NETWORKS:
        raise TopoError(f"no profile for network {network!r}; known: {', '.join(NETWORKS)}",
                        key="fabric.technology")
    g, n = GENERATIONS[generation], NETWORKS[network]
    scale = n["net_scale"]
    net = {fam: {p: v * scale for p, v in d.items()} for fam, d in _NCCL_NET.items()}
    ch = _CHANNELS
    ll_max = tuple(x * GB for x in g["ll_max"])
    eff = {
        "ring": {"LL": 0.5, "LL128": 0.92, "Simple": 1.0},
        "tree": {"LL": 0.92 / 3.8, "LL128": (0.92 * 7 / 9, 0.92 * 120 / 128, 0.92 * 120 / 128), "Simple": 0.92},
        "collnet": {"Simple": 0.9},
        "p2p": {"LL": 0.5, "LL128": 0.92, "Simple": 1.0},
    }
    caps = {
        "ring": {"LL": ll_max, "LL128": ch * g["ring_ll128_ch"] * GB},
        "tree": {"LL": ll_max, "LL128": tuple(ch * x * GB for x in g["tree_ll128_ch"]),
                 "Simple": tuple(ch * x * GB for x in g["tree_ch"])},
    }
    if g["nvls"]:
        eff["nvls"] = {"Simple": g["nvls"]}
        eff["nvls_tree"] = {"Simple": g["nvls_tree"]}
    return Profile(
        name=f"{generation}+{network}",
        nvlink_efficiency=g["nvlink_efficiency"],
        network_efficiency=n["network_efficiency"],
        base_latency_s=_NCCL_BASE,
        nvlink_hop_s=_NCCL_NV,
        net_hop_s=net,
        net_overhead_s=1.0 * US,
        proto_efficiency=eff,
        busbw_cap_Bps=caps,
        channels=ch,
        pipeline_window_bytes=_WINDOW,
        peer_overhead_s=n["peer_overhead_s"],
        source=_NCCL_SRC,
    )


def ideal_profile() -> Profile:
    """The textbook machine of the closed forms: every link at its full rate, no software latency, one protocol.

    With it, an estimate is pure Hockney over the routed fabric: per-hop latency is the links' ``latency_s``.
    """
    fams = ("ring", "tree", "nvls", "nvls_tree", "collnet", "p2p")
    return Profile(name="ideal", nvlink_efficiency=1.0, network_efficiency=1.0,
                   proto_efficiency={f: {"Simple": 1.0} for f in fams},
                   source="alpha-beta (Hockney) model with no software overheads")
