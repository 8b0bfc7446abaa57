"""``topo compare LOG``: an nccl-tests log measured against the model, per size, with a verdict."""

from __future__ import annotations

from dataclasses import replace

from ..calibrate.compare import compare_run
from ..calibrate.parse import parse_file
from ..calibrate.setup import DEFAULT_NETWORK, DEFAULT_NIC_RATE, setup_from_run
from ..errors import TopoError
from ..engine.options import CHOICES
from ..engine.profiles import NETWORKS
from ..units import UnitError, format_size, parse_bandwidth_Bps
from .estimate_args import PLACEMENT_FLAGS, add_placement_arguments, placement_from_args, profile_mismatch
from .output import emit, emit_json, note, table


def add_cluster_arguments(p) -> None:
    """The flags that describe the measured cluster when no spec is given, and where the ranks sat (the placement
    flags of ``topo estimate``); shared with calibrate."""
    p.add_argument("--spec", default=None, metavar="SPEC",
                   help="the cluster as a spec file or bundled name (default: built from the log's header)")
    p.add_argument("--gpu", default=None, help="GPU model (default: from the log's '# Using devices' lines)")
    p.add_argument("--nodes", default=None, type=int, help="servers (default: the log's distinct hosts)")
    p.add_argument("--gpus-per-node", default=None, type=int,
                   help="GPUs per server (default: ranks per host in the log, else the GPU model's)")
    p.add_argument("--nics", default=None, type=int, help="NICs per server (default: one per GPU)")
    p.add_argument("--nic-rate", default=None, help=f"NIC line rate (default {DEFAULT_NIC_RATE})")
    p.add_argument("--network", default=None,
                   help=f"network technology of the spec (default {DEFAULT_NETWORK}); see 'topo profile list'")
    p.add_argument("--gpus-per-domain", default=None, type=int,
                   help="GPUs per NVLink domain (default: 72 for GB200/GB300 trays, else one node's); e.g. 4 for "
                   "GB200/GB300 hosts in different racks")
    add_placement_arguments(p, gpus_help="ranks of the run (default: from the log)")
    p.add_argument("-c", "--collective", default=None, help="collective (default: from the log)")


# the host-link note's remedy for a cluster built from the log: no flag sets its host link, a spec does (tidy84;
# the library's default names the spec keys, which a user of compare or calibrate without --spec cannot set)
LOG_HOST_LINK_REMEDY = ("the cluster built from the log takes the GPU's host link; if the servers' is faster, pass "
                        "--spec FILE, a spec giving server.nic_model (e.g. ConnectX-8 for 800 Gb/s, PCIe Gen6) or "
                        "server.pcie_bandwidth")


def cluster_from_args(args) -> dict:
    """The cluster a log ran on, as the flags of :func:`add_cluster_arguments` give it (the flags' own errors name
    the flag, not the spec key it becomes), with the host-link note's remedy its user can take."""
    if args.spec is not None:
        given = [f for f, v in (("--gpu", args.gpu), ("--nodes", args.nodes), ("--gpus-per-node", args.gpus_per_node),
                                ("--nics", args.nics), ("--nic-rate", args.nic_rate), ("--network", args.network),
                                ("--gpus-per-domain", args.gpus_per_domain))
                 if v is not None]
        if given:
            verb = "describe the cluster built from the log and are" if len(given) > 1 else \
                "describes the cluster built from the log and is"
            raise TopoError(f"{', '.join(given)} {verb} not used with --spec; set "
                            f"{'them' if len(given) > 1 else 'it'} in the spec (or drop --spec)", key=given[0])
    if args.network is not None and args.network not in NETWORKS:
        raise TopoError(f"unknown network {args.network!r}; allowed: {', '.join(NETWORKS)}", key="--network")
    if args.nic_rate is not None:
        try:
            parse_bandwidth_Bps(args.nic_rate)
        except UnitError as exc:
            raise TopoError(str(exc), key="--nic-rate") from None
    return dict(spec=args.spec, gpu=args.gpu, nodes=args.nodes, gpus_per_node=args.gpus_per_node, nics=args.nics,
                nic_rate=args.nic_rate, network=args.network, gpus_per_domain=args.gpus_per_domain,
                **placement_from_args(args), **({} if args.spec else {"host_link_remedy": LOG_HOST_LINK_REMEDY}))


CLUSTER_FLAGS = {"gpu": "--gpu", "nodes": "--nodes", "gpus_per_node": "--gpus-per-node", "nics": "--nics",
                 "nic_rate": "--nic-rate", "network": "--network", "gpus_per_domain": "--gpus-per-domain",
                 "collective": "-c", "spec": "--spec", "profile": "--profile", **PLACEMENT_FLAGS}


def cluster_flag_error(exc: TopoError) -> TopoError:
    """The library's error with its option name (``gpus_per_domain``) replaced by the flag (``--gpus-per-domain``)."""
    if exc.key in CLUSTER_FLAGS:
        return TopoError(exc.message, source=exc.source, key=CLUSTER_FLAGS[exc.key])
    return exc


def setup_from_args(run, args):
    try:
        return setup_from_run(run, **cluster_from_args(args))
    except TopoError as exc:
        raise cluster_flag_error(exc) from None


def register(sub) -> None:
    p = sub.add_parser("compare", help="compare an nccl-tests log with the model: per size, and a verdict",
                       description="Parse an nccl-tests log (any *_perf binary, as printed) and compare each size "
                       "with the model of its cluster: model/measured = modelled time / measured time (100% when the run is as "
                       "fast as the model, above 100% when it is faster). Without "
                       "--spec the cluster is built from the log (GPU model, hosts, ranks per host) and the "
                       "flags below; the assumptions made are printed.")
    p.add_argument("log", metavar="LOG", help="an nccl-tests output file, - for standard input, or a bundled example's "
                   "name to try (nccl1453-h100-allreduce: a missing file's error lists them)")
    add_cluster_arguments(p)
    p.add_argument("--profile", default="nccl", metavar="NAME|FILE",
                   help="cost profile: nccl (the fabric's, default), ideal, a bundled name or a calibrated file")
    p.add_argument("--choose", default="fastest", choices=CHOICES["choose"],
                   help="how the model picks the algorithm and protocol at each size (its 'model algorithm' "
                   "column): fastest on the routed fabric (default), or nccl, as NCCL's tuner rates them "
                   "(topo.engine.tuner: what NCCL itself would run); the log's own picks, where NCCL_DEBUG=INFO "
                   "printed them, are the 'NCCL's (INFO)' column")
    p.add_argument("--json", action="store_true", help="print one JSON document on stdout")
    p.set_defaults(func=run)


def _sample_text(res) -> str:
    """Whether compare's error is in sample (the calibrated profile was fitted on this log) or held out (walk42)."""
    if res.in_sample is None:
        return ""
    if res.in_sample:
        return f"; in sample: profile {res.profile} was fitted on this log"
    return f"; held out: profile {res.profile} was fitted on {res.profile_fitted_on}, not on this log"


_CHOSEN = {"fastest": "the fastest on the routed fabric", "nccl": "as NCCL's tuner rates them (--choose nccl)"}


def run(args) -> int:
    runs = parse_file(args.log)
    results = []
    mismatch = None
    for r in runs:
        setup = replace(setup_from_args(r, args), choose=args.choose)
        try:
            results.append(compare_run(r, setup, profile=args.profile, collective=args.collective,
                                       several=len(runs) > 1))
        except TopoError as exc:
            raise cluster_flag_error(exc) from None
        mismatch = mismatch or profile_mismatch(args.profile, setup.fabric)
    if mismatch:
        note(mismatch)
    if args.json:
        emit_json(results[0].to_dict() if len(results) == 1 else {"runs": [x.to_dict() for x in results]})
        return 0
    for res in results:
        for a in res.notes:
            note(f"note: {a}")
        for a in res.assumptions:
            note(f"assumption: {a}")
        emit(f"# {res.source}: {res.collective} on {res.ranks} ranks; model {res.spec}, profile {res.profile}, "
             f"algorithm {res.algorithm}" + (f"; NCCL {res.nccl_version}" if res.nccl_version else ""))
        emit(f"# model algorithm: {_CHOSEN[res.choose]}; NCCL's (INFO): the log's NCCL_DEBUG=INFO tuning lines")
        emit(f"# placed as: {res.placement}")
        rows = [(format_size(c.size_bytes), f"{c.measured_s * 1e6:.1f}", f"{c.model_s * 1e6:.1f}",
                 f"{c.measured_busbw_GBps:.2f}", f"{c.model_busbw_GBps:.2f}", f"{c.efficiency * 100:.0f}%",
                 c.regime, f"{c.algorithm}/{c.protocol}",
                 f"{c.nccl_algorithm}/{c.nccl_protocol}" if c.nccl_algorithm else "-") for c in res.rows]
        emit(table(rows, ["size", "measured (us)", "model (us)", "busbw (GB/s)", "model busbw", "model/measured",
                          "regime", "model algorithm", "NCCL's (INFO)"], right=[True] * 6 + [False] * 3))
        emit(f"verdict: {res.verdict}")
        emit(f"median error: {res.mdape_pct:.1f}% over {len(res.rows)} sizes (|model / measured - 1|)"
             + _sample_text(res))
    if not results:
        raise TopoError("no run to compare", source=args.log)
    return 0
