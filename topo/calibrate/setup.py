"""The cluster a measurement ran on: a spec built from a log's header, or the user's spec.

Without a spec, the cluster is one rail-optimized leaf group (``nodes`` servers under one leaf per rail, as a
measured job usually sits) with, unless told otherwise:

- the GPU model named in the ``# Using devices`` lines (``NVIDIA H100 80GB HBM3`` -> H100);
- nodes = the distinct hosts of those lines, GPUs per node = ranks per host; without rank lines, the GPU model's
  GPUs per server (8 for HGX, 4 per NVL72 compute tray) and as many nodes as the ranks need;
- one NIC per GPU (``nics``), at ``nic_rate`` 400 Gb/s, on ``network`` infiniband_ndr;
- GB200/GB300 hosts are compute trays of NVL72 racks: 18 trays and 72 GPUs per NVLink domain, and hosts that need
  several racks are split evenly over them where they can be (32 hosts: 16 per rack); ``gpus_per_domain`` says
  otherwise (4 for hosts in different racks).

Every default used is returned in :attr:`Setup.assumptions`, so a report can say what it assumed.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from ..fabric.builders import build_fabric
from ..engine.collectives import ALGORITHMS
from ..engine.estimate import placement_for
from ..engine.nic_notes import nic_notes
from ..fabric.host_link_note import SPEC_REMEDY
from ..engine.options import EstimateOptions
from ..errors import TopoError
from ..fabric.fabric import Fabric
from ..fabric.hardware import GPU_MODELS, lookup_gpu
from ..spec import load_spec, spec_from_dict
from .parse import NcclRun, ratio_allows

__all__ = ["Setup", "node_spec", "setup_from_run", "gpu_from_device", "NCCL_ALGO_TO_TOPO"]

DEFAULT_NIC_RATE = "400 Gb/s"
DEFAULT_NETWORK = "infiniband_ndr"

# NCCL_ALGO values -> topo algorithm names (several, or one topo does not model: auto)
NCCL_ALGO_TO_TOPO = {"ring": "ring", "tree": "tree", "nvls": "nvls", "nvlstree": "nvls_tree",
                     "collnet": "sharp", "collnetdirect": "sharp", "collnetchain": "sharp", "pat": "pat"}


@dataclass
class Setup:
    """A fabric and the ranks to model a run on, with what was assumed to build it."""

    fabric: Fabric
    gpus: int
    algorithm: str = "auto"
    assumptions: list[str] = field(default_factory=list)
    spec_name: str = ""
    protocol: str | None = None  # NCCL_PROTO, when the run pinned one protocol
    channels: int | None = None  # NCCL_MIN_NCHANNELS, when the run pinned the channel count
    choose: str = "fastest"  # how auto picks: the routed-fastest or NCCL's tuner's choice (topo.engine.tuner)
    ranks: list[int] | None = None  # the GPU ids of the ranks, when given (else the first ``gpus`` by placement)
    placement: str = "packed"  # how ``gpus`` are chosen without ``ranks`` (topo.engine.placement.PLACEMENTS)
    rail: int = 0  # the GPU index within a server, for placement one_per_server
    rank_order: str = "nccl"  # with ranks: NCCL's ring order or as given
    gpus_per_process: int = 1  # GPUs one process and thread launched (nccl-tests -g N): a host launch floor
    notes: list[str] = field(default_factory=list)  # NICs faster than the network or host link carries (nic_notes)

    def placement_options(self) -> dict:
        """The placement as keyword arguments of :func:`topo.engine.estimate.estimate`."""
        if self.ranks is not None:
            return {"ranks": list(self.ranks), "rank_order": self.rank_order}
        return {"gpus": self.gpus, "placement": self.placement, "rail": self.rail}


def node_spec(gpu: str, nics: int, nic_rate: str, network: str, servers: int, gpus: int | None = None,
              domain: int | None = None, name: str = "setup") -> dict:
    """``servers`` servers under one rail-optimized leaf per rail (the measured jobs share one leaf group)."""
    model = lookup_gpu(gpu)
    gpus = gpus or (model.host_gpus if model else 8)
    return {
        "name": name, "gpu": gpu, "scale_up": {"gpus_per_domain": domain or gpus},
        "server": {"gpus": gpus, "nics": nics, "nic_rate": nic_rate},
        "cluster": {"num_servers": servers},
        "fabric": {"kind": "rail_optimized", "technology": network,
                   "tiers": [{"name": "leaf", "radix": max(64, 2 * servers), "port_rate": nic_rate}]},
    }


def gpu_from_device(device: str) -> str | None:
    """``NVIDIA H100 80GB HBM3`` -> ``H100`` (the longest catalog name found as a word), or None."""
    text = device.upper()
    for name in sorted(GPU_MODELS, key=len, reverse=True):
        if re.search(rf"(?<![A-Z0-9]){name}(?![0-9])", text):
            return name
    return None


def _algorithm(run: NcclRun) -> tuple[str, str | None]:
    """The algorithms the run could use, as its environment set them: NCCL_ALGO (one, a list, or ``^`` a list to
    leave out) and NCCL_NVLS_ENABLE=0 (no NVLS nor NVLSTree); with a note when that changes what ``auto`` is."""
    algo = (run.env.get("NCCL_ALGO") or "").strip()
    nvls_off = run.env.get("NCCL_NVLS_ENABLE", "").strip() == "0"
    names = [a.strip().lower() for a in algo.lstrip("^").split(",") if a.strip()]
    unknown = [a for a in names if a not in NCCL_ALGO_TO_TOPO]
    if unknown:
        return "auto", f"NCCL_ALGO={algo} names {', '.join(unknown)}, which topo does not model: modelled with auto"
    mapped = list(dict.fromkeys(NCCL_ALGO_TO_TOPO[a] for a in names))
    if run.collective in ALGORITHMS:  # NCCL_ALGO may name algorithms the collective does not run (PAT: only
        mapped = [a for a in mapped if a in ALGORITHMS[run.collective]]  # all-gather, reduce-scatter): NCCL skips them
    if algo.startswith("^") or not mapped:  # leave some out of NCCL's set (or none given)
        drop = mapped + (["nvls", "nvls_tree"] if nvls_off else [])
        if not drop:
            return "auto", None
        why = " and ".join(x for x in (f"NCCL_ALGO={algo}" if mapped else "",
                                         "NCCL_NVLS_ENABLE=0" if nvls_off else "") if x)
        return "^" + ",".join(dict.fromkeys(drop)), f"auto without {', '.join(dict.fromkeys(drop))}, as {why} set it"
    if nvls_off:
        mapped = [a for a in mapped if a not in ("nvls", "nvls_tree")] or mapped
    if len(mapped) == 1:
        return mapped[0], None
    return ",".join(mapped), f"auto among {', '.join(mapped)}, as NCCL_ALGO={algo} set it"


def _pinned(run: NcclRun, notes: list[str]) -> tuple[str | None, int | None]:
    """The protocol and channel count the run's environment pinned (NCCL_PROTO, NCCL_MIN/MAX_NCHANNELS)."""
    protocol = channels = None
    proto = run.env.get("NCCL_PROTO")
    if proto:
        names = {"ll": "LL", "ll128": "LL128", "simple": "Simple"}
        one = proto.strip().lower()
        if one in names:
            protocol = names[one]
            notes.append(f"NCCL_PROTO={proto}: modelled with protocol {protocol} only")
        else:
            notes.append(f"NCCL_PROTO={proto} is not one protocol: topo picks the fastest per size")
    env = run.env
    for lo_key, hi_key in (("NCCL_MIN_NCHANNELS", "NCCL_MAX_NCHANNELS"), ("NCCL_MIN_CTAS", "NCCL_MAX_CTAS")):
        lo, hi = env.get(lo_key), env.get(hi_key)
        try:
            pick = int(lo) if lo else (int(hi) if hi else None)
        except ValueError:
            pick = None
        if pick is not None and 1 <= pick <= 64:
            channels = pick
            notes.append(f"{channels} channels, as {lo_key if lo else hi_key}={pick} pinned them")
            break
    return protocol, channels


def setup_from_run(run: NcclRun, spec=None, gpu: str | None = None, nodes: int | None = None,
                   gpus_per_node: int | None = None, nics: int | None = None, nic_rate: str | None = None,
                   network: str | None = None, gpus: int | None = None,
                   gpus_per_domain: int | None = None, ranks=None, placement: str | None = None,
                   rail: int | None = None, rank_order: str | None = None,
                   host_link_remedy: str = SPEC_REMEDY) -> Setup:
    """The fabric to model ``run`` on, and where its ranks sit.

    Parameters
    ----------
    run : NcclRun
        The parsed run.
    spec : Spec, str or None
        The cluster (a Spec, a file or a bundled name); None builds one from the log and the values below.
    gpu, nodes, gpus_per_node, nics, nic_rate, network, gpus_per_domain
        The cluster built from the log, where the log does not say or says otherwise (see the module's doc); not
        used with ``spec``.
    gpus : int, optional
        The number of ranks (default: the log's).
    ranks : sequence of int, optional
        The GPU ids of the ranks, as :class:`topo.engine.options.EstimateOptions` takes them (16 trays in each of
        two NVL72 racks: ``[*range(0, 64), *range(72, 136)]``); their count is the rank count.
    placement, rail, rank_order
        As :class:`~topo.engine.options.EstimateOptions` takes them (default: packed, rail 0, NCCL's order).
    host_link_remedy : str
        What the user can do when the host link caps the NICs (:func:`~topo.engine.nic_notes.nic_notes`): by
        default the spec's keys; the caller words it for a cluster built from the log, which has no spec to edit.

    Returns
    -------
    Setup
        The fabric, the placement and every assumption made.

    Raises
    ------
    TopoError
        Keyed by the parameter at fault (``gpus``, ``ranks``, ``nodes``, ...).
    """
    notes: list[str] = []
    opts, ranks = _placement_options(nodes, gpus_per_node, nics, gpus, gpus_per_domain, ranks, placement, rail,
                                     rank_order)
    n = _rank_count(run, gpus, ranks, notes)
    algorithm, protocol, channels = _run_settings(run, notes)
    per_process = _gpus_per_process(run, notes)
    if spec is not None:
        fabric, name = _spec_fabric(spec, n, run, notes, gpu=gpu, nodes=nodes, gpus_per_node=gpus_per_node, nics=nics,
                                    nic_rate=nic_rate, network=network, gpus_per_domain=gpus_per_domain)
        return _placed(Setup(fabric, n, algorithm, notes, name, protocol, channels,
                             gpus_per_process=per_process, notes=nic_notes(fabric.spec, host_link_remedy)), opts, ranks)
    gpu, model = _gpu_model(run, gpu, notes)
    nodes, gpn = _nodes(run, n, ranks, model, nodes, gpus_per_node, notes)
    if nics is None:
        nics = gpn
        notes.append(f"{nics} NICs per node assumed (one per GPU)")
    if nic_rate is None:
        nic_rate = DEFAULT_NIC_RATE
        notes.append(f"NIC rate {nic_rate} assumed")
    if network is None:
        network = DEFAULT_NETWORK
        notes.append(f"network {network} assumed")
    domain, servers = _nvlink_domains(model, gpu, gpn, nodes, gpus_per_domain, ranks, notes)
    name = f"{gpu}-{nodes}x{gpn}-{network}"
    sp = spec_from_dict(node_spec(model.name, nics, nic_rate, network, servers, gpn, domain, name=name),
                        source=run.source)
    return _placed(Setup(build_fabric(sp), n, algorithm, notes, name, protocol, channels,
                         gpus_per_process=per_process, notes=nic_notes(sp, host_link_remedy)), opts, ranks)


def _gpus_per_process(run: NcclRun, notes: list[str]) -> int:
    """The GPUs each thread of the run launched (the header's ``nGpus``, nccl-tests' ``-g``), with a note when
    above one: the host then launches their kernels in turn (topo.engine.host_launch)."""
    g = run.ngpus or 1
    if g > 1:
        notes.append(f"nGpus {g}: one thread launches {g} GPUs' kernels in turn (nccl-tests -g {g}), a host floor "
                     "per collective")
    return g


def _placement_options(nodes, gpus_per_node, nics, gpus, gpus_per_domain, ranks, placement, rail, rank_order):
    """The counts checked (whole numbers >= 1) and the placement as the estimate's options: ``(opts, ranks)``."""
    for key, val in (("nodes", nodes), ("gpus_per_node", gpus_per_node), ("nics", nics), ("gpus", gpus),
                     ("gpus_per_domain", gpus_per_domain)):
        if val is not None and (isinstance(val, bool) or not isinstance(val, int) or val < 1):
            raise TopoError(f"must be a whole number >= 1, got {val!r}", key=key)
    where = {k: v for k, v in (("gpus", gpus), ("ranks", ranks), ("placement", placement), ("rail", rail),
                                ("rank_order", rank_order)) if v is not None}
    opts = EstimateOptions.from_kwargs(**where)  # the estimate's own checks (keys: the option names)
    if ranks is not None:
        ranks = [int(r) for r in opts.ranks]
        if len(set(ranks)) != len(ranks):
            raise TopoError("lists a GPU twice", key="ranks")
    return opts, ranks


def _rank_count(run: NcclRun, gpus, ranks, notes: list[str]) -> int:
    """The number of ranks: given (``gpus`` or the ``ranks`` listed), checked against the log, or the log's."""
    count_key = "ranks" if ranks is not None else "gpus"
    given = len(ranks) if ranks is not None else gpus
    # a rank count the log contradicts: its busbw / algbw (nccl-tests' factor of the true count), NCCL's own
    # nranks or the launcher's; rank lines may be a pasted excerpt, so more ranks than they list stay allowed
    if given is not None and run.nranks is not None and given != run.nranks and (
            not ratio_allows(run, given) or given < run.nranks or not run.nranks_from.startswith("rank lines")):
        what = f"{given} (the GPUs listed)" if ranks is not None else str(given)
        raise TopoError(f"the log says {run.nranks} ranks ran ({run.nranks_from}), not {what}",
                        source=run.source, key=count_key)
    n = given or run.nranks
    if n is None:
        if run.nranks_at_least:
            raise TopoError(f"the log's '# Using devices' lines are cut short (they name rank "
                            f"{run.nranks_at_least - 1} but list {len({r.rank for r in run.ranks})}), and neither "
                            "a launcher command nor busbw/algbw says how many ranks ran; give the rank count",
                            source=run.source, key="gpus")
        raise TopoError("the log does not say how many ranks ran (no '# Using devices' lines, no NCCL INFO "
                        "nranks, busbw/algbw ambiguous); give the rank count", source=run.source, key="gpus")
    if not given and not run.rank_lines_complete:
        how = ("busbw/algbw" if run.nranks_from.startswith("inferred") else
               "the launcher's process count" if run.nranks_from.startswith("launcher") else run.nranks_from)
        notes.append(f"{n} ranks from {how} (the log's rank lines list only {len({r.rank for r in run.ranks})}: "
                     "their hosts are not used)")
    elif run.nranks_from.startswith("inferred") and not given:
        notes.append(f"{n} ranks inferred from busbw/algbw")
    return n


def _run_settings(run: NcclRun, notes: list[str]):
    """What the run's environment pinned: ``(algorithm, protocol, channels)``, and a note on a TCP run."""
    algorithm, why = _algorithm(run)
    if why:
        notes.append(why)
    protocol, channels = _pinned(run, notes)
    ib_off = run.env.get("NCCL_IB_DISABLE", "").strip() == "1"
    if ib_off or run.env.get("NCCL_NET", "").strip().lower() == "socket":
        notes.append(("NCCL_IB_DISABLE=1" if ib_off else f"NCCL_NET={run.env['NCCL_NET']}") + ": the run went "
                     "over TCP sockets, which topo does not model; the model's RDMA network is far faster")
    return algorithm, protocol, channels


def _spec_fabric(spec, n: int, run: NcclRun, notes: list[str], **cluster):
    """The fabric of a given spec: ``(fabric, name)``; the cluster values built from a log are refused beside it,
    and where the log's devices or hosts differ from the spec's, a note says so (the spec's word is kept)."""
    given = [k for k, v in cluster.items() if v is not None]
    if given:  # they describe the cluster built from the log; a spec says all of it
        verb = "describe the cluster built from the log and are" if len(given) > 1 else \
            "describes the cluster built from the log and is"
        raise TopoError(f"{', '.join(given)} {verb} not used with a spec; set "
                        f"{'them' if len(given) > 1 else 'it'} in the spec, or give no spec", key=given[0])
    sp = spec if not isinstance(spec, str) else load_spec(spec)
    fabric = build_fabric(sp)
    if n > fabric.num_gpus:
        raise TopoError(f"the run used {n} ranks but the spec has {fabric.num_gpus} GPUs", key="spec")
    _spec_differs(run, sp, notes)
    return fabric, sp.name


def _spec_differs(run: NcclRun, sp, notes: list[str]) -> None:
    """Note where the log says the run had other GPUs, or other GPUs per host, than the spec models."""
    named = gpu_from_device(run.gpu_name) if run.gpu_name else None
    if named is not None and named != sp.gpu.upper():
        notes.append(f"modelled as the spec's {sp.gpu}; the log's devices are {run.gpu_name}: the comparison is "
                     "with other hardware than the run's")
    per_server = sp.server.gpus or GPU_MODELS[sp.gpu.upper()].host_gpus
    if run.gpus_per_host and run.gpus_per_host != per_server:
        notes.append(f"the spec's servers hold {per_server} GPUs; the log's hosts ran {run.gpus_per_host} ranks "
                     "each")


def _gpu_model(run: NcclRun, gpu: str | None, notes: list[str]):
    """``(name, model)`` of the GPU: the one asked for (said when the log's devices differ), else the log's."""
    gpu = gpu or (gpu_from_device(run.gpu_name) if run.gpu_name else None)
    if gpu is None:
        raise TopoError("the log does not name a GPU model topo knows" + (f" ({run.gpu_name!r})" if run.gpu_name
                        else "") + f"; give one of {', '.join(GPU_MODELS)} or a spec", source=run.source, key="gpu")
    if gpu.upper() not in GPU_MODELS:
        raise TopoError(f"unknown GPU model {gpu!r}; allowed: {', '.join(GPU_MODELS)}", key="gpu")
    model = GPU_MODELS[gpu.upper()]
    named = gpu_from_device(run.gpu_name) if run.gpu_name else None
    if run.gpu_name and named != model.name:  # the user's word over the log's, said
        notes.append(f"modelled as {model.name}, as asked; the log's devices are {run.gpu_name}")
    return model.name, model  # the catalog's name (walk16: --gpu h100 named the cluster h100-3x8-...)


def _nodes(run: NcclRun, n: int, ranks, model, nodes, gpus_per_node, notes: list[str]) -> tuple[int, int]:
    """``(nodes, GPUs per node)``: as given, else from the log's hosts, else assumed (each assumption noted)."""
    gpn = gpus_per_node or run.gpus_per_host
    if gpn is None and nodes and n % nodes == 0 and n // nodes <= model.host_gpus:
        gpn = n // nodes  # the ranks spread over the nodes given (16 ranks on 4 nodes: 4 each)
        notes.append(f"{gpn} GPUs per node: {n} ranks over the {nodes} nodes given")
    if gpn is None:
        gpn = min(n, model.host_gpus)
        notes.append(f"{gpn} GPUs per node assumed (the log names no hosts)" if run.rank_lines_complete else
                     f"{gpn} GPUs per node assumed (the log's rank lines do not show every host)")
    hosts = len(run.hosts) if run.hosts and run.gpus_per_host else 0
    if nodes is not None and hosts and n == len(run.ranks) and nodes != hosts and not gpus_per_node:
        raise TopoError(f"the log's rank lines put its {n} ranks on {hosts} hosts, not {nodes} nodes (the ranks "
                        "would fill the first nodes and leave the rest idle)", source=run.source, key="nodes")
    need = max(n, max(ranks) + 1 if ranks else 0)  # GPUs the fabric must have: the highest id listed too
    if nodes is None:
        listed = hosts
        nodes = listed if listed * gpn >= need else math.ceil(need / gpn)
        if listed and nodes != listed:  # more ranks than the rank lines' hosts hold (ranks given)
            held = f"GPU id {need - 1} of the ranks given" if need > n else f"{n} ranks"
            notes.append(f"{nodes} nodes of {gpn} GPUs assumed for {held} (the log's rank lines list "
                         f"{listed} hosts)")
    if nodes * gpn < n:
        raise TopoError(f"{nodes} nodes of {gpn} GPUs cannot hold {n} ranks", key="nodes")
    return nodes, gpn


def _nvlink_domains(model, gpu: str, gpn: int, nodes: int, gpus_per_domain, ranks, notes: list[str]):
    """``(GPUs per NVLink domain or None for one node, servers)``: NVL72 hosts are trays of racks."""
    domain = None
    servers = nodes
    if gpus_per_domain is not None:
        if gpus_per_domain < gpn or gpus_per_domain % gpn:
            raise TopoError(f"{gpus_per_domain} GPUs per NVLink domain is not a whole number of nodes of {gpn} "
                            "GPUs", key="gpus_per_domain")
        if gpus_per_domain > gpn and model.domain_gpus <= model.host_gpus:
            raise TopoError(f"{model.name} has no NVLink between nodes: its NVLink domain is one node of {gpn} "
                            f"GPUs, got {gpus_per_domain}", key="gpus_per_domain")
        if gpus_per_domain > max(model.domain_gpus, gpn):
            raise TopoError(f"{gpus_per_domain} GPUs per NVLink domain is more than a {model.name} domain holds "
                            f"({model.domain_gpus})", key="gpus_per_domain")
    if model.domain_gpus > model.host_gpus:  # NVL72: hosts are trays of racks
        domain = gpus_per_domain or model.domain_gpus
        per_rack = domain // gpn
        racks = math.ceil(nodes / per_rack)
        if gpus_per_domain is None and racks > 1 and nodes % racks == 0 and ranks is None:
            # hosts over several racks: as many in each (16 + 16 for 32 trays, as OCI's two-rack GB300 run), not
            # 18 + 14: NCCL's trees and NVLS run on unequal racks, topo's model of them does not
            per_rack = nodes // racks
            domain = per_rack * gpn
            notes.append(f"{gpu} hosts modelled as {racks} NVL72 racks of {per_rack} trays each (the log cannot "
                         "say how the hosts are split over racks)")
        elif gpus_per_domain is None and ranks is not None:
            notes.append(f"{gpu} hosts modelled as trays of {domain}-GPU NVLink racks, the ranks on the GPUs given")
        elif gpus_per_domain is None:
            notes.append(f"{gpu} hosts modelled as trays of {domain}-GPU NVLink racks (the log cannot say which "
                         "rack each host is in)")
        else:
            notes.append(f"{gpu} hosts modelled as trays of {domain}-GPU NVLink domains")
        servers = per_rack * racks
    return domain, servers


def _placed(setup: Setup, opts, ranks) -> Setup:
    """``setup`` with the placement of ``opts`` (checked on its fabric: ids that exist, a rail within a server)."""
    setup.ranks, setup.placement, setup.rail, setup.rank_order = ranks, opts.placement, opts.rail, opts.rank_order
    try:
        placement_for(setup.fabric, _options(setup))
    except TopoError as exc:
        raise TopoError(exc.message, key=exc.key or ("ranks" if ranks is not None else "placement")) from None
    return setup


def _options(setup: Setup):
    return EstimateOptions.from_kwargs(**setup.placement_options())
