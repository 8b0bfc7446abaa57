"""Profile data files: read, validate and look up the TOML files of ``topo/data/profiles/``.

Every file has a ``[profile]`` table (``kind``, ``name``, ``description``) and one table per parameter:

    [net_hop_scale]
    value = 3.0
    source = "where the value comes from"
    fitted = true                      # fitted to measurements (then fitted_on says which)
    fitted_on = "data/reference/..."
    assumed = false                    # no source: a stated assumption

``value`` is a number, a list of three (one node / two nodes / more, NCCL's scales), or, for per-algorithm
parameters, a table ``value.<family> = { LL = ..., LL128 = ..., Simple = ... }``. Which parameters a kind holds,
their shape and their physical range are in :data:`PARAMETERS`; a wrong one is a :class:`topo.errors.TopoError`
naming the file and the dotted key. A ``user`` file (what ``topo calibrate`` writes) names a bundled ``base``
profile and overrides parameters of any kind (a per-algorithm table entry by entry: what it leaves out keeps the
base's value).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..errors import TopoError
from ..inputs import read_toml
from ..resources import data_dir

__all__ = ["PARAMETERS", "KINDS", "FAMILIES", "Param", "ProfileFile", "load_profile_file", "bundled_files",
           "bundled_dir", "in_network_reduction"]

FAMILIES = ("ring", "tree", "nvls", "nvls_tree", "collnet", "pat", "p2p")
_PROTOS = ("LL", "LL128", "Simple")
KINDS = ("nccl", "gpu", "network", "model", "user")


@dataclass(frozen=True)
class Spec:
    """What one parameter is: its kind of file, shape (scalar, by_nodes, by_family), range, whether optional."""

    kind: str
    shape: str
    lo: float
    hi: float
    optional: bool = False
    doc: str = ""


# The physical ranges double as the calibration bounds (topo.calibrate.fit).
PARAMETERS: dict[str, Spec] = {
    "base_latency_us": Spec("nccl", "by_family", 0.0, 200.0, doc="software latency per collective call"),
    "nvlink_hop_us": Spec("nccl", "by_family", 0.0, 200.0, doc="latency per step over NVLink"),
    "net_hop_us": Spec("nccl", "by_family", 0.0, 500.0, doc="latency per step over the network (InfiniBand)"),
    "net_overhead_us": Spec("nccl", "scalar", 0.0, 50.0, doc="software overhead per network step (x3 Simple), "
                            "on Intel x86 and any other CPU NCCL does not single out"),
    "net_overhead_amd_us": Spec("nccl", "scalar", 0.0, 50.0, optional=True,
                                doc="the same overhead on AMD x86 hosts (default: net_overhead_us)"),
    "ll_max_busbw_amd_GBps": Spec("nccl", "by_nodes", 1.0, 5000.0, optional=True,
                                  doc="NCCL's LL busbw cap across nodes on AMD x86 hosts (its one-node entry unused: "
                                      "one node takes the GPU's); absent: the GPU file's, whatever the CPU"),
    "proto_efficiency": Spec("nccl", "by_family", 0.01, 1.0, doc="fraction of the bottleneck a protocol uses"),
    "channels": Spec("nccl", "scalar", 1, 64, doc="NCCL channels (per-channel caps scale with it)"),
    "channels_one_gpu_per_node": Spec("nccl", "scalar", 1, 64, optional=True,
                                      doc="NCCL's collective channels in a communicator of one GPU per node "
                                          "(nNodes == nRanks: an expert-data-parallel group beside EP inside "
                                          "the node); absent: channels"),
    "tree_correction": Spec("nccl", "by_protocol", 0.05, 1.0, optional=True,
                            doc="NCCL's tuner: tree bandwidth x factor[log2(bytes / 64)] (medium sizes; "
                            "topo.engine.tuner)"),
    "ring_plateau_latency_factor": Spec("nccl", "scalar", 1.0, 10.0, optional=True,
                                        doc="NCCL's tuner: ring/Simple all-reduce latency x factor across nodes"),
    "ring_plateau_min_bytes_per_rank": Spec("nccl", "scalar", 0.0, 2.0**20, optional=True,
                                            doc="NCCL's tuner: the plateau factor applies from bytes/ranks >= this"),
    "ring_allreduce_wrap_steps": Spec("nccl", "scalar", 0, 2, optional=True,
                                      doc="network steps NCCL's ring all-reduce latency counts beyond 2 x (nodes - 1)"),
    "channel_min_bytes": Spec("nccl", "by_family", 1.0, 2.0**30, optional=True,
                              doc="ring/tree: NCCL drops a channel while the message is under channels x this "
                                  "(x ranks for ring LL), and the proxy's time on the extra channels counts; absent "
                                  "(the bundled files): every channel at every size, no proxy term"),
    "ll_max_threads": Spec("nccl", "scalar", 32, 1024, optional=True,
                           doc="threads of one LL channel (NCCL_LL_MAX_NTHREADS); with channel_min_bytes, NCCL's "
                               "thread reduction at small sizes"),
    "p2p_ll_threshold_bytes": Spec("nccl", "scalar", 0, 2.0**30, optional=True,
                                   doc="send/receive runs LL up to this many bytes per p2p channel of a peer, "
                                       "Simple above (never LL128); absent: the fastest protocol"),
    "pat_net_step_divisor": Spec("nccl", "scalar", 1.0, 100.0, optional=True,
                                 doc="NCCL's PAT latency: log2(nodes) network steps, each the Tree's network step / "
                                     "this (absent: the profile has no PAT)"),
    "pat_rank_latency_us": Spec("nccl", "scalar", 0.0, 100.0, optional=True,
                                doc="NCCL's PAT latency: this much per rank of the communicator (its linear part)"),
    "nvls_max_heads": Spec("nccl", "scalar", 0, 64, optional=True,
                           doc="most NVLSTree heads (NICs carrying it) per NVLink domain; 0 = one per NIC"),
    "nvls_chunk_bytes": Spec("nccl", "scalar", 0, 2.0**24, optional=True,
                             doc="NCCL's NVLS chunk (NCCL_NVLS_CHUNKSIZE); 0 or absent: no NVLSTree chunk bound"),
    "nvls_tree_max_chunk_bytes": Spec("nccl", "scalar", 0, 2.0**24, optional=True,
                                      doc="NVLSTree's chunk cap from nvls_tree_small_chunk_domains domains on "
                                          "(NCCL_NVLSTREE_MAX_CHUNKSIZE's default)"),
    "nvls_tree_small_chunk_domains": Spec("nccl", "scalar", 0, 1024, optional=True,
                                          doc="NVLink domains from which NVLSTree's chunk is capped"),
    "steps_in_flight": Spec("nccl", "scalar", 1, 64, optional=True,
                            doc="steps a connection keeps in flight (NCCL_STEPS): NVLSTree's chunk bound is this "
                                "many chunks per step latency (absent: 1)"),
    "simple_buffer_bytes": Spec("nccl", "scalar", 0, 2.0**30, optional=True,
                                doc="NCCL's Simple-protocol buffer per connection (NCCL_BUFFSIZE's default): a step "
                                    "is this over steps_in_flight; with the chunks below, the window's lower bound "
                                    "in topo calibrate (absent: not counted)"),
    "p2p_net_chunk_bytes": Spec("nccl", "scalar", 0, 2.0**24, optional=True,
                                doc="NCCL's send/receive chunk across nodes (NCCL_P2P_NET_CHUNKSIZE's default)"),
    "nvlink_efficiency": Spec("gpu", "scalar", 0.05, 1.0, doc="usable fraction of NVLink"),
    "ll_max_busbw_GBps": Spec("gpu", "by_nodes", 1.0, 5000.0, doc="NCCL's LL busbw cap (1, 2, more nodes)"),
    "ring_ll128_per_channel_GBps": Spec("gpu", "scalar", 1.0, 500.0, doc="ring LL128 cap per channel"),
    "tree_ll128_per_channel_GBps": Spec("gpu", "by_nodes", 1.0, 500.0, doc="tree LL128 cap per channel"),
    "tree_simple_per_channel_GBps": Spec("gpu", "by_nodes", 1.0, 500.0, doc="tree Simple cap per channel"),
    "nvls_efficiency": Spec("gpu", "scalar", 0.05, 1.0, optional=True, doc="NVLS efficiency (absent: no NVLS)"),
    "nvls_tree_efficiency": Spec("gpu", "scalar", 0.05, 1.0, optional=True, doc="NVLSTree efficiency"),
    "nvls_channels": Spec("gpu", "scalar", 0, 64, optional=True,
                          doc="NCCL's NVLS channels on this generation (NVLS and NVLSTree); 0 or absent: no "
                              "NVLSTree chunk bound"),
    "nvlink_hop_extra_us": Spec("gpu", "scalar", 0.0, 5.0, optional=True,
                                doc="latency added to every NVLink step of this GPU generation over NCCL's NVLink "
                                    "constants, any domain and protocol"),
    "mnnvl_hop_extra_us": Spec("gpu", "scalar", 0.0, 20.0, optional=True,
                               doc="latency added to every NVLink step when the NVLink domain spans several servers "
                                   "(NVL72 racks: multi-node NVLink), any protocol"),
    "nvls_tree_correction_x86": Spec("gpu", "scalar", 0, 1, optional=True,
                                     doc="1: NCCL's tuner applies the tree correction to NVLSTree all-reduce on "
                                         "x86 hosts (not on Arm) for this generation"),
    "launch_us": Spec("gpu", "scalar", 0.0, 10.0, optional=True,
                      doc="the GPU's fixed cost per kernel in a queue of back-to-back kernels, added once per "
                          "collective (nccl-tests launches one kernel per call, back to back)"),
    "p2p_channel_GBps": Spec("network", "scalar", 0.1, 1000.0, optional=True,
                             doc="send/receive to a network peer: bandwidth of one NCCL p2p channel (absent: no cap)"),
    "mnnvl_extra_us": Spec("gpu", "scalar", 0.0, 100.0, optional=True,
                           doc="latency added once to a collective whose NVLink domain spans several servers "
                               "(NVL72 racks), any algorithm and protocol"),
    "max_port_rate_Gbps": Spec("network", "scalar", 1.0, 10000.0, optional=True,
                               doc="the fastest port the technology runs (InfiniBand NDR: 400 Gb/s); a NIC above it "
                                   "is another generation, and describe/estimate say so (absent: no check)"),
    "in_network_reduction": Spec("network", "scalar", 0, 1,
                                 doc="1: the technology's switches can reduce in the network (SHARP: a spec may set "
                                     "sharp = true on a tier); 0: a spec's sharp = true is refused"),
    "network_efficiency": Spec("network", "scalar", 0.05, 1.0, doc="usable fraction of the NIC line rate"),
    "net_hop_scale": Spec("network", "scalar", 0.1, 50.0,
                          doc="multiplier on the per-step network latencies (NCCL's, or net_step_latency_us)"),
    "net_step_latency_us": Spec("network", "scalar", 0.0, 500.0, optional=True,
                                doc="the network's own latency per network step, every algorithm and protocol "
                                    "(replaces NCCL's InfiniBand hwLat[NET] table; absent: NCCL's table)"),
    "net_latency_us": Spec("network", "scalar", 0.0, 200.0, optional=True,
                           doc="the network's latency per network step added to NCCL's (twice for Simple), as NCCL "
                               "adds a net plugin's reported latency (graphs[a]->latencyInter, tuning.cc)"),
    "net_simple_extra_us": Spec("network", "scalar", 0.0, 100.0, optional=True,
                                doc="added to net_step_latency_us for the Simple protocol (completion overhead)"),
    "peer_overhead_us": Spec("network", "scalar", 0.0, 100.0, doc="per remote peer of an all-to-all"),
    "protocols": Spec("network", "protocol_set", 0, 0, optional=True,
                      doc="the protocols NCCL may use on this network (the NCCL_PROTO its provider's plugin or "
                          "profile sets; absent: LL, LL128 and Simple)"),
    "pipeline_window_bytes": Spec("model", "scalar", 0.0, 2.0**31, doc="bytes sent at half speed at start"),
    "ll_channel_busbw_GBps": Spec("gpu", "scalar", 4.4, 45.0, optional=True,
                                  doc="one NCCL channel's LL bus bandwidth (ring, tree) on the channels NCCL runs "
                                      "at small sizes (channel_min_bytes); absent: no per-channel limit"),
    "proxy_channel_messages": Spec("network", "scalar", 0, 1, optional=True,
                                   doc="1: the network proxy's message cost on the channels NCCL adds at small "
                                       "sizes (topo.engine.cost.proxy_channels_s); absent or 0: not counted"),
    "host_launch_per_gpu_us": Spec("model", "scalar", 0.0, 50.0, optional=True,
                                   doc="host (CPU) time to launch one GPU's kernel when one thread launches several "
                                       "GPUs' kernels in turn (nccl-tests -g N): a floor of N times it per collective"),
    "reference_ranks_per_domain": Spec("model", "scalar", 0, 1024, optional=True,
                                 doc="NVLS ranks per domain the window and NVLS rates were fitted at (0: off)"),
}


class _Header(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    kind: str
    name: str = Field(min_length=1)
    description: str = ""
    base: str | None = None  # user files: the bundled profile they override
    nccl: str | None = None  # user files: the NCCL constants' version of the base
    provenance: dict[str, Any] = Field(default_factory=dict)  # user files: how it was made (free form)
    # network files: this file stands for the network ``replaces`` names on these GPU generations (EFA v1 is what
    # ``efa`` is on A100 instances)
    replaces: str | None = None
    generations: list[str] = Field(default_factory=list)


_SHAPE_TEXT = {"scalar": "a number", "by_nodes": "a list of 3 numbers (one node, two nodes, more)",
               "by_family": "a table per algorithm family of numbers per protocol",
               "by_protocol": "a table per protocol of lists of numbers", "protocol_set": "a list of protocol names"}


class Param(BaseModel):
    """One parameter: its value, where it comes from, and whether it was fitted or assumed."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    value: int | float | list[float] | list[str] | dict[str, dict[str, float | list[float]]] | dict[str, list[float]]
    source: str = Field(min_length=1)
    fitted: bool = False
    fitted_on: str | None = None
    assumed: bool = False


@dataclass(frozen=True)
class ProfileFile:
    """A validated profile file."""

    kind: str
    name: str
    description: str
    params: dict[str, Param]
    path: str
    base: str | None = None
    nccl: str | None = None
    provenance: dict | None = None
    replaces: str | None = None  # network files: the network this one stands for on ``generations``
    generations: tuple[str, ...] = ()


def _err(path, key, msg) -> TopoError:
    return TopoError(msg, source=str(path), key=key)


def _check_number(path, key, x, spec: Spec):
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        raise _err(path, key, f"must be a number, got {x!r}")
    if not (spec.lo <= x <= spec.hi):
        raise _err(path, key, f"{x!r} is outside the physical range [{spec.lo:g}, {spec.hi:g}]")


def _check_value(path, name, p: Param, spec: Spec):
    key = f"{name}.value"
    v = p.value
    if spec.shape == "scalar":
        if isinstance(v, (list, dict)):
            raise _err(path, key, f"must be one number, got {v!r}")
        _check_number(path, key, v, spec)
    elif spec.shape == "by_nodes":
        if not isinstance(v, list) or len(v) != 3:
            raise _err(path, key, f"must be a list of 3 numbers (one node, two nodes, more), got {v!r}")
        for i, x in enumerate(v):
            _check_number(path, f"{key}[{i}]", x, spec)
    elif spec.shape == "protocol_set":
        if not isinstance(v, list) or not v or not all(isinstance(x, str) for x in v):
            raise _err(path, key, f"must be a list of protocol names ({', '.join(_PROTOS)}), got {v!r}")
        bad = [x for x in v if x not in _PROTOS]
        if bad or len(set(v)) != len(v):
            raise _err(path, key, f"unknown or repeated protocol in {v!r}; allowed: {', '.join(_PROTOS)}")
        if "Simple" not in v:
            raise _err(path, key, f"must include Simple (NVLS and the large sizes run only Simple), got {v!r}")
    elif spec.shape == "by_protocol":
        if not isinstance(v, dict) or not v:
            raise _err(path, key, f"must be a table per protocol ({', '.join(_PROTOS)}) of lists, got {v!r}")
        for proto, xs in v.items():
            if proto not in _PROTOS:
                raise _err(path, f"{key}.{proto}", f"unknown protocol; allowed: {', '.join(_PROTOS)}")
            if not isinstance(xs, list) or not xs:
                raise _err(path, f"{key}.{proto}", f"must be a list of numbers, got {xs!r}")
            for i, y in enumerate(xs):
                _check_number(path, f"{key}.{proto}[{i}]", y, spec)
    else:
        if not isinstance(v, dict):
            raise _err(path, key, f"must be a table per algorithm family ({', '.join(FAMILIES)}), got {v!r}")
        for fam, protos in v.items():
            if fam not in FAMILIES:
                raise _err(path, f"{key}.{fam}", f"unknown algorithm family; allowed: {', '.join(FAMILIES)}")
            for proto, x in protos.items():
                if proto not in _PROTOS:
                    raise _err(path, f"{key}.{fam}.{proto}", f"unknown protocol; allowed: {', '.join(_PROTOS)}")
                xs = x if isinstance(x, list) else [x]
                if isinstance(x, list) and len(x) != 3:
                    raise _err(path, f"{key}.{fam}.{proto}", f"a list must have 3 values (1, 2, more nodes), got {x!r}")
                for i, y in enumerate(xs):
                    _check_number(path, f"{key}.{fam}.{proto}" + (f"[{i}]" if isinstance(x, list) else ""), y, spec)
    if p.fitted and not p.fitted_on:
        raise _err(path, f"{name}.fitted_on", "a fitted value must say what it was fitted on")


def _loc(err: dict) -> str:
    return ".".join(str(x) for x in err["loc"] if not (isinstance(x, str) and x in ("float", "list[float]")
                                                        or "dict[" in str(x)))


def parse_profile_doc(doc: dict, path: str) -> ProfileFile:
    """Validate a parsed profile TOML document.

    Parameters
    ----------
    doc : dict
    path : str
        Names the document in errors.

    Returns
    -------
    ProfileFile

    Raises
    ------
    TopoError
        With the path and the key.
    """
    if "profile" not in doc or not isinstance(doc["profile"], dict):
        raise _err(path, "profile", "missing the [profile] table (kind, name, description)")
    try:
        head = _Header(**doc["profile"])
    except ValidationError as exc:
        e = exc.errors()[0]
        if e["type"] == "missing":  # say what is missing, not the whole table it is missing from
            raise _err(path, "profile." + _loc(e), "missing; [profile] needs kind and name (and base, for a user "
                       "file)") from None
        raise _err(path, "profile." + _loc(e), f"{e['msg']} (got {e.get('input')!r})") from None
    if head.kind not in KINDS:
        raise _err(path, "profile.kind", f"unknown kind {head.kind!r}; allowed: {', '.join(KINDS)}")
    if head.kind == "user" and not head.base:
        raise _err(path, "profile.base", "a user profile must name the bundled profile it overrides, "
                   "e.g. base = \"hopper+infiniband_ndr\"")
    params: dict[str, Param] = {}
    for name, body in doc.items():
        if name == "profile":
            continue
        spec = PARAMETERS.get(name)
        if spec is None:
            raise _err(path, name, f"unknown parameter; allowed: {', '.join(PARAMETERS)}")
        if head.kind != "user" and spec.kind != head.kind:
            raise _err(path, name, f"belongs in a {spec.kind} file, not a {head.kind} file")
        if not isinstance(body, dict):
            raise _err(path, name, "must be a table with value and source")
        try:
            p = Param(**body)
        except ValidationError as exc:
            e = exc.errors()[0]
            if e["loc"][0] == "value" and spec is not None and "value" in body:  # what is allowed, not pydantic's
                rng = "" if spec.shape == "protocol_set" else f" in [{spec.lo:g}, {spec.hi:g}]"
                raise _err(path, f"{name}.value", f"must be {_SHAPE_TEXT.get(spec.shape, spec.shape)}{rng}, "
                           f"got {body['value']!r}") from None
            raise _err(path, f"{name}.{e['loc'][0]}", f"{e['msg']} (got {e.get('input')!r})") from None
        _check_value(path, name, p, spec)
        params[name] = p
    if head.kind == "network" and "net_simple_extra_us" in params and "net_step_latency_us" not in params:
        raise _err(path, "net_simple_extra_us", "adds to net_step_latency_us, which this file does not give")
    if head.kind != "user":
        missing = [n for n, s in PARAMETERS.items() if s.kind == head.kind and not s.optional and n not in params]
        if missing:
            raise _err(path, missing[0], f"missing; a {head.kind} file needs: {', '.join(missing)}")
    if (head.replaces or head.generations) and not (head.kind == "network" and head.replaces and head.generations):
        raise _err(path, "profile.replaces", "replaces and generations go together, in a network file only")
    return ProfileFile(head.kind, head.name, head.description, params, path, head.base, head.nccl,
                       head.provenance or None, head.replaces, tuple(head.generations))


def load_profile_file(path: str | Path) -> ProfileFile:
    """Read and validate one profile TOML file.

    Parameters
    ----------
    path : str or Path

    Returns
    -------
    ProfileFile

    Raises
    ------
    TopoError
    """
    path = Path(path)
    return parse_profile_doc(read_toml(path, "profile file"), str(path))


def bundled_dir() -> Path:
    """The folder of the bundled profile files (``topo/data/profiles``).

    Returns
    -------
    Path
    """
    return data_dir("profiles")


@lru_cache(maxsize=None)
def bundled_files() -> dict[str, dict[str, ProfileFile]]:
    """Every bundled file by kind and name (``{"gpu": {"hopper": ...}, ...}``), validated once.

    Returns
    -------
    dict of str to dict of str to ProfileFile
    """
    out: dict[str, dict[str, ProfileFile]] = {k: {} for k in KINDS if k != "user"}
    root = bundled_dir()
    for kind in out:
        for f in sorted((root / kind).glob("*.toml")):
            pf = load_profile_file(f)
            if pf.kind != kind:
                raise _err(f, "profile.kind", f"a file in {kind}/ must have kind = {kind!r}, got {pf.kind!r}")
            out[kind][pf.name] = pf
    return out


def in_network_reduction(technology: str) -> tuple[bool, str]:
    """Whether a network technology's switches can reduce in the network (SHARP), as its bundled network file's
    ``in_network_reduction`` says (with that file's source: NVIDIA SHARP lists InfiniBand Quantum switches only).

    Parameters
    ----------
    technology : str
        A ``fabric.technology`` (a bundled network file's name).

    Returns
    -------
    tuple of (bool, str)
        Whether the switches reduce, and the file that says so (relative to the package's data folder).

    Raises
    ------
    TopoError
        When no bundled network file has that name.
    """
    files = bundled_files()["network"]
    if technology not in files:
        raise TopoError(f"no network profile {technology!r}; allowed: {', '.join(sorted(files))}",
                        key="fabric.technology")
    pf = files[technology]
    return bool(pf.params["in_network_reduction"].value), f"topo/data/profiles/network/{Path(pf.path).name}"
