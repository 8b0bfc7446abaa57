"""The options of an estimate, as one typed, validated object.

Every field is documented with its default and where the default comes from. Errors name the field (``gpus``,
``chunks``), never a command-line flag: the CLI maps field names to its flags (:data:`topo.cli.flags.FLAGS`)
and takes its flags' defaults (:meth:`EstimateOptions.default`) and choices (:data:`CHOICES`) from here.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from ..errors import TopoError
from .collectives import REDUCTION_OPS
from .contention import SHARING_MODES
from .ecmp import ECMP_MODES
from .placement import PLACEMENTS

__all__ = ["EstimateOptions", "PROTOCOL_NAMES", "CHOICES", "MAX_SUBFLOWS", "MAX_CHUNKS", "MAX_CHANNELS", "MAX_HASH_SEED"]

PROTOCOL_NAMES = ("LL", "LL128", "Simple")
# the allowed values of every option that takes a name: declared here once (the CLI's choices come from here)
CHOICES: dict[str, tuple[str, ...]] = {
    "placement": tuple(p for p in PLACEMENTS if p != "list"),  # "list": what explicit ``ranks`` make
    "group_layout": ("strided", "blocked"),
    "rank_order": ("nccl", "given"),
    "choose": ("fastest", "nccl"),
    "protocol": PROTOCOL_NAMES,
    "ecmp": tuple(ECMP_MODES),
    "sharing": tuple(SHARING_MODES),
    "op": REDUCTION_OPS,
}
MAX_SUBFLOWS = 4096  # beyond, hashed ECMP is ideal ECMP to well under 1%: use ecmp="ideal"
MAX_CHUNKS = 1_000_000
MAX_CHANNELS = 64  # NCCL's MAXCHANNELS
MAX_GPUS_PER_PROCESS = 64  # -g drives the GPUs of one host: more than any server holds (HGX 8, an NVL72 tray 4)
MAX_HASH_SEED = 2**63 - 1  # a seed is mixed into the 64-bit ECMP hash (topo.engine.ecmp_hash)


@dataclass(frozen=True)
class EstimateOptions:
    """How to run an estimate (all optional; the defaults model a plain nccl-tests run).

    Placement: ``gpus`` (default: all), or ``ranks`` (explicit GPU ids), ``placement`` (packed, one_per_server,
    spread_pods), ``rail`` (for one_per_server), ``groups`` and ``group_layout`` (G identical communicators at
    once: strided = data-parallel replicas, blocked = consecutive blocks), ``rank_order`` (nccl or given).
    Algorithm: ``algorithm`` (auto: NCCL's algorithms for the collective, one per size), ``choose`` (how auto
    picks: ``fastest``, the one the routed model times fastest (the default: it scores as well as ``nccl`` on
    the measurements, benchmarks/RESULTS.md); ``nccl``, the one NCCL's tuner rates fastest by its own cost model
    (:mod:`topo.engine.tuner`), which is what NCCL runs, timed on the routed fabric), ``protocol`` (LL, LL128,
    Simple: as NCCL_PROTO pins it; default: the fastest), ``channels`` (as NCCL_MIN_NCHANNELS/NCCL_MAX_NCHANNELS
    pin it; default: one per NIC across domains), ``chunks`` (store-and-forward chunks for tree/broadcast;
    default: streaming, as NCCL), ``stages`` (pipeline stages for the ``pipeline`` collective, default 2), ``op``
    (the reduction op, as nccl-tests' ``-o``: sum, prod, max, min, avg, mulsum; it changes no time, but NCCL leaves
    PAT out of a reduce-scatter with ``avg`` or ``mulsum``).
    Network: ``ecmp`` (ideal or hash), ``subflows`` (parts each hashed flow is split into), ``hash_seed`` (a
    whole number mixed into the ECMP hash, so that another seed draws other collisions, as another hash function
    of the switches would; default 0, the hash without a seed; ideal ECMP has no hash and ignores it),
    ``sharing`` (equal or maxmin), ``pxn`` (cross-rail data over NVLink first; default: on in rail fabrics), ``profile`` (nccl, ideal,
    a profile name or object).
    Host: ``gpus_per_process`` (GPUs one process and thread drives, as nccl-tests' ``-g N``; default 1, one GPU
    per process as MPI launches run): above 1 the host launches the GPUs' kernels in turn, and no collective takes
    less than that many times the profile's ``host_launch_per_gpu_us`` (:mod:`topo.engine.host_launch`).
    """

    gpus: int | None = None
    ranks: Any = None
    placement: str = "packed"
    rail: int = 0
    groups: int = 1
    group_layout: str = "strided"
    rank_order: str = "nccl"
    algorithm: str = "auto"
    op: str = "sum"
    choose: str = "fastest"
    protocol: str | None = None
    channels: int | None = None
    chunks: int | None = None
    stages: int = 2
    ecmp: str = "ideal"
    subflows: int = 1
    hash_seed: int = 0
    sharing: str = "equal"
    pxn: bool | None = None
    profile: Any = None
    gpus_per_process: int = 1

    @classmethod
    def default(cls, name: str):
        """The default of option ``name`` (what an omitted keyword or command-line flag means).

        Parameters
        ----------
        name : str
            A field of :class:`EstimateOptions`.

        Returns
        -------
        object
            The field's default value.
        """
        return cls.__dataclass_fields__[name].default

    @classmethod
    def from_kwargs(cls, options: "EstimateOptions | None" = None, **kwargs) -> "EstimateOptions":
        """``options`` with ``kwargs`` replacing fields, validated.

        Parameters
        ----------
        options : EstimateOptions, optional
            The base (default: every field's default).
        **kwargs
            Field values.

        Returns
        -------
        EstimateOptions

        Raises
        ------
        TopoError
            An unknown name (listing the allowed) or a bad value (keyed by the field).
        """
        names = {f.name for f in dataclasses.fields(cls)}
        bad = sorted(set(kwargs) - names)
        if bad:
            raise TopoError(f"unknown option {bad[0]!r}; allowed: {', '.join(sorted(names))}", key=bad[0])
        base = options or cls()
        return dataclasses.replace(base, **kwargs).validated()

    def validated(self) -> "EstimateOptions":
        """Check every field.

        Returns
        -------
        EstimateOptions
            ``self``, or a copy with the protocol's name in its canonical case.

        Raises
        ------
        TopoError
            Naming the field, the value and what is allowed.
        """
        _whole(self.gpus, "gpus", 1, allow_none=True)
        _whole(self.rail, "rail", 0)
        _whole(self.groups, "groups", 1)
        _whole(self.stages, "stages", 2)
        _whole(self.subflows, "subflows", 1, MAX_SUBFLOWS,
               "; more sub-flows than that is ideal ECMP to well under 1%: use ecmp=ideal")
        _whole(self.hash_seed, "hash_seed", 0, MAX_HASH_SEED)
        _whole(self.chunks, "chunks", 1, MAX_CHUNKS, allow_none=True)
        _whole(self.channels, "channels", 1, MAX_CHANNELS, allow_none=True)
        _whole(self.gpus_per_process, "gpus_per_process", 1, MAX_GPUS_PER_PROCESS)
        _choice(self.placement, "placement", CHOICES["placement"] + ("list",))
        _choice(self.group_layout, "group_layout", CHOICES["group_layout"])
        _choice(self.rank_order, "rank_order", CHOICES["rank_order"])
        _choice(self.ecmp, "ecmp", CHOICES["ecmp"], "ECMP mode")
        _choice(self.sharing, "sharing", CHOICES["sharing"], "sharing model")
        _choice(self.choose, "choose", CHOICES["choose"], "way to choose")
        _choice(self.op, "op", CHOICES["op"], "reduction op")
        if self.subflows > 1 and self.ecmp != "hash":
            raise TopoError(f"{self.subflows} sub-flows split a hashed flow, and ecmp is {self.ecmp!r}: they would "
                            "change nothing; give ecmp=hash, or subflows=1", key="subflows")
        if self.protocol is not None:
            p = {x.lower(): x for x in CHOICES["protocol"]}.get(str(self.protocol).lower())
            if p is None:
                raise TopoError(f"unknown protocol {self.protocol!r}; allowed: {', '.join(CHOICES['protocol'])}",
                                key="protocol")
            if p != self.protocol:
                return dataclasses.replace(self, protocol=p)
        if self.gpus is not None and self.ranks is not None:
            raise TopoError("give either gpus or ranks, not both", key="ranks")
        return self


def _whole(v, key: str, lo: int, hi: int | None = None, why: str = "", allow_none: bool = False) -> None:
    if v is None and allow_none:
        return
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
        raise TopoError(f"must be a whole number >= {lo}, got {v!r}", key=key)
    if v < lo or (hi is not None and v > hi):
        allowed = f"{lo} to {hi:,}" if hi is not None else f">= {lo}"
        raise TopoError(f"must be {allowed}, got {v!r}{why if hi is not None and v > hi else ''}", key=key)


def _choice(v, key: str, allowed: Sequence[str], what: str = "") -> None:
    if v not in allowed:
        raise TopoError(f"unknown {what or key.replace('_', ' ')} {v!r}; allowed: {', '.join(allowed)}", key=key)
