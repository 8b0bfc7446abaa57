"""Hardware profiles: what fraction of each link a collective can use, and what each step costs in latency.

One profile per hardware generation (the GPU's: Ampere, Hopper, Blackwell), combined with one per network
technology (InfiniBand, RoCE, EFA). Never a constant tuned to one measured setup: ``benchmarks/accuracy.py``
checks the same profiles against every measurement in ``../shared/data/``.

Sources:

- NCCL ``src/graph/tuning.cc`` (v2.30.7 as summarised in ``../shared/design/cost-model.md``; constants drift
  between releases): base latencies (us, LL/LL128/Simple) Ring 6.6/14.0/8.4, Tree 6.8/14.0/8.4; per-hop latency
  over NVLink Ring 0.6/1.9/3.4, Tree 0.6/1.25/4.0, NVLS 25 (Simple); over the network Ring 2.7/4.0/14.0,
  Tree 5.0/8.5/14, NVLS 18, NVLSTree 20.9; network overhead 1 us per step, x3 for Simple; bandwidth efficiencies
  Ring LL 0.5, LL128 0.92, Tree 0.92, NVLS 0.85. CollNet (SHARP) network latency 31 us (tuning.cc v2.20.3, in
  ``../shared/data/hardware.md``).
- Usable NVLink bandwidth as NCCL counts it: Hopper 18 links x 20.6 GB/s = 370.8 GB/s per direction
  (cost-model.md), i.e. 82.4% of 450 GB/s; Ampere 12 x 20 GB/s = 240 of 300 GB/s (NCCL's SM80 NVLink figure);
  Blackwell taken at the same 82.4% of 900 GB/s (an assumption: NVLink5 doubles NVLink4 per link).
- Network efficiency: NVIDIA's maintainers give 46-49 GB/s per 400G NDR NIC in NCCL (nccl-tests issues #290,
  #267), i.e. 0.92-0.98 of 50 GB/s: 0.94 is used for InfiniBand. RoCE and EFA values are fitted to the
  public measurements in ``../shared/data/nccl_tests_measurements.csv`` (see benchmarks/RESULTS.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from .errors import TopoError

__all__ = ["Profile", "PROTOCOLS", "profile_for", "ideal_profile", "GENERATIONS", "NETWORKS"]

PROTOCOLS = ("LL", "LL128", "Simple")
US = 1e-6


def _p(ll, ll128, simple):
    return {"LL": ll * US, "LL128": ll128 * US, "Simple": simple * US}


@dataclass(frozen=True)
class Profile:
    """Efficiencies and latencies for one GPU generation on one network technology.

    Latency dictionaries are keyed by algorithm family (``ring``, ``tree``, ``nvls``, ``nvls_tree``,
    ``collnet``) and then protocol (``LL``, ``LL128``, ``Simple``); a missing protocol means the family does
    not run with it.
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
    peer_overhead_s: float = 0.0  # per remote peer of an all-to-all (message set-up on the NIC)
    source: str = ""

    def protocols(self, family: str) -> tuple[str, ...]:
        return tuple(p for p in PROTOCOLS if p in self.proto_efficiency.get(family, {}))

    def efficiency(self, family: str, proto: str) -> float:
        return self.proto_efficiency[family][proto]

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
            "nvls_tree": {"Simple": 25 * US}, "collnet": _p(0.6, 1.25, 4.0), "p2p": _p(0.6, 1.9, 3.4)}
_NCCL_NET = {"ring": _p(2.7, 4.0, 14.0), "tree": _p(5.0, 8.5, 14.0), "nvls": {"Simple": 18 * US},
             "nvls_tree": {"Simple": 20.9 * US}, "collnet": {"Simple": 31 * US}, "p2p": _p(2.7, 4.0, 14.0)}
_NCCL_EFF = {"ring": {"LL": 0.5, "LL128": 0.92, "Simple": 1.0}, "tree": {"LL": 0.5, "LL128": 0.92, "Simple": 0.92},
             "nvls": {"Simple": 0.85}, "nvls_tree": {"Simple": 0.85}, "collnet": {"Simple": 0.9},
             "p2p": {"LL": 0.5, "LL128": 0.92, "Simple": 1.0}}

_NCCL_SRC = "NVIDIA/nccl src/graph/tuning.cc (v2.30.7 per ../shared/design/cost-model.md)"

GENERATIONS: dict[str, dict] = {
    "ampere": {"nvlink_efficiency": 240 / 300},
    "hopper": {"nvlink_efficiency": 370.8 / 450},
    "blackwell": {"nvlink_efficiency": 370.8 / 450},
}

NETWORKS: dict[str, dict] = {
    "infiniband_hdr": {"network_efficiency": 0.94, "net_scale": 1.0, "peer_overhead_s": 1.0 * US},
    "infiniband_ndr": {"network_efficiency": 0.94, "net_scale": 1.0, "peer_overhead_s": 1.0 * US},
    "infiniband_xdr": {"network_efficiency": 0.94, "net_scale": 1.0, "peer_overhead_s": 1.0 * US},
    "roce": {"network_efficiency": 0.90, "net_scale": 1.0, "peer_overhead_s": 1.0 * US},
    "efa": {"network_efficiency": 0.90, "net_scale": 2.5, "peer_overhead_s": 4.5 * US},
}


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
    return Profile(
        name=f"{generation}+{network}",
        nvlink_efficiency=g["nvlink_efficiency"],
        network_efficiency=n["network_efficiency"],
        base_latency_s=_NCCL_BASE,
        nvlink_hop_s=_NCCL_NV,
        net_hop_s=net,
        net_overhead_s=1.0 * US,
        proto_efficiency=_NCCL_EFF,
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


def with_overrides(profile: Profile, **kw) -> Profile:
    """A copy of ``profile`` with some fields replaced (for what-if studies)."""
    return replace(profile, **kw)
