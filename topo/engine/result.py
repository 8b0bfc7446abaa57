"""Results of an estimate: plain dataclasses, with ``to_dict`` (the JSON contract) and ``to_frame`` (pandas)."""

from __future__ import annotations

import dataclasses
from dataclasses import asdict, dataclass, field
from functools import lru_cache

import numpy as np

from ..units import whole_bytes
from .collectives import DATA_TYPES, REDUCING, REDUCTION_OPS, count_column

__all__ = ["Bottleneck", "SizeResult", "EstimateResult", "LinkTable", "NodeNames", "whole_bytes_row"]


@dataclass(frozen=True)
class NodeNames:
    """The fabric's node names as plain data (``gpu12``, ``nvswitch1``, ``nic3.5``, ``leaf7``): where each kind of
    node starts in the id space, so a result names nodes without holding the fabric."""

    starts: tuple[int, ...]  # first node id of each kind, ascending
    prefixes: tuple[str, ...]  # gpu, nvswitch, nic, then each tier's name
    nics_per_server: int

    @classmethod
    def of(cls, fabric) -> "NodeNames":
        """The node names of ``fabric``.

        Parameters
        ----------
        fabric : Fabric

        Returns
        -------
        NodeNames
        """
        o = fabric.node_offset
        kinds = [(o["gpu"], "gpu"), (o["nvswitch"], "nvswitch"), (o["nic"], "nic")]
        kinds += [(o[f"tier:{t.index}"], t.name) for t in fabric.layout.tiers]
        kinds.sort(key=lambda x: x[0])
        return cls(tuple(int(a) for a, _ in kinds), tuple(b for _, b in kinds), int(fabric.layout.nics_per_server))

    def __call__(self, ids) -> np.ndarray:
        """Names of node ids (an array of str), as :meth:`topo.fabric.Fabric.node_names` gives them.

        Parameters
        ----------
        ids : array_like of int
            Node ids.

        Returns
        -------
        numpy.ndarray of str
        """
        ids = np.asarray(ids, dtype=np.int64)
        starts = np.asarray(self.starts, dtype=np.int64)
        k = np.searchsorted(starts, ids, side="right") - 1
        local = ids - starts[k]
        nic = k == self.prefixes.index("nic") if "nic" in self.prefixes else np.zeros(ids.shape, bool)
        n = self.nics_per_server
        width = _digits(local[~nic].max(initial=0))
        if nic.any():  # nicS.J: server S's NIC J
            width = max(width, _digits(local[nic].max() // n) + 1 + _digits(n - 1))
        num = local.astype(f"<U{width}")
        if nic.any():
            num[nic] = np.char.add(np.char.add((local[nic] // n).astype(str), "."), (local[nic] % n).astype(str))
        # string ufuncs (no Python object per name), the result as wide as its longest name
        out = np.char.add(np.asarray(self.prefixes)[k], num)
        return out.astype(f"<U{max(1, int(np.char.str_len(out).max(initial=0)))}")

    def categories(self, num_nodes: int):
        """A pandas categorical type whose codes are the node ids ``0 .. num_nodes - 1``, named.

        Built once per fabric shape and kept (a few most recent): naming the ~220,000 nodes of a 100k-GPU fabric and
        indexing their names costs ~0.2 s, and a training step's link-load tables ask for it again and again.

        Parameters
        ----------
        num_nodes : int

        Returns
        -------
        pandas.CategoricalDtype
        """
        return _categories(self, int(num_nodes))


def _digits(x) -> int:
    return len(str(int(x)))


@lru_cache(maxsize=4)
def _categories(names: NodeNames, num_nodes: int):
    import pandas as pd

    return pd.CategoricalDtype(names(np.arange(num_nodes)))


@dataclass(frozen=True)
class LinkTable:
    """The fabric's links as plain arrays (what a link-load table needs, without the fabric)."""

    src: np.ndarray  # node id of the lower end
    dst: np.ndarray  # node id of the upper end
    level: np.ndarray  # index into level_names
    bandwidth_Bps: np.ndarray  # per direction
    level_names: tuple[str, ...]
    names: NodeNames | None = None  # how to name the nodes (None: frames keep node ids)

    @classmethod
    def of(cls, fabric) -> "LinkTable":
        """The links of ``fabric``.

        Parameters
        ----------
        fabric : Fabric

        Returns
        -------
        LinkTable
        """
        links = fabric.links
        return cls(links["src"], links["dst"], links["level"], links["bandwidth_Bps"], tuple(fabric.level_names),
                   NodeNames.of(fabric))

    def frame(self, bytes_per_direction: np.ndarray, time_s: float):
        """Per directed link (up then down for each link): its ends by name and their ids, bytes and utilization
        over ``time_s``.

        Parameters
        ----------
        bytes_per_direction : numpy.ndarray
            ``2 * links`` values, up then down for each link.
        time_s : float

        Returns
        -------
        pandas.DataFrame
            Columns link, direction, src, dst (node names, a categorical; ids when the table has no names), src_id,
            dst_id, level, bandwidth_Bps, bytes, utilization.
        """
        import pandas as pd

        M = self.src.size
        src = np.empty(2 * M, dtype=np.int64)
        dst = np.empty(2 * M, dtype=np.int64)
        src[0::2], dst[0::2] = self.src, self.dst
        src[1::2], dst[1::2] = self.dst, self.src
        cap = np.repeat(self.bandwidth_Bps, 2)
        if self.names is not None:  # a categorical: codes are the node ids, one name per node (not per link end)
            cats = self.names.categories(int(max(self.src.max(initial=0), self.dst.max(initial=0))) + 1)

            def named(ids):
                return pd.Categorical.from_codes(ids, dtype=cats)
        else:
            def named(ids):
                return ids
        return pd.DataFrame({
            "link": np.repeat(np.arange(M), 2),
            "direction": np.tile(np.array(["up", "down"]), M),
            "src": named(src), "dst": named(dst),
            "src_id": src, "dst_id": dst,
            "level": pd.Categorical.from_codes(np.repeat(self.level, 2), categories=list(self.level_names)),
            "bandwidth_Bps": cap,
            "bytes": bytes_per_direction,
            "utilization": bytes_per_direction / (cap * time_s) if time_s > 0 else 0.0,
        })


@dataclass(frozen=True)
class Bottleneck:
    """The resource that bounds the bandwidth part of the time."""

    src: str
    dst: str
    level: str  # nvlink, pcie, nic-leaf, leaf-spine, spine-core
    direction: str  # up (towards the top tier) or down
    num_links: int  # 1 for a link; >1 for the uplinks of a switch or group under ideal ECMP
    bytes: float  # bytes it carries over the whole collective (per link)
    utilization: float  # of its line rate, over the collective's time
    bound: str = "bandwidth"  # "latency" when the latency part of the time is larger than the bandwidth part
    # what bounds the time (topo.engine.cost.LIMITS): latency, per-peer-latency, link, link+protocol,
    # p2p-channel-cap or protocol-cap; only link and link+protocol mean this link is saturated
    limit: str = "link"
    protocol_efficiency: float = 1.0  # the fraction of the link's usable rate the protocol carries as payload
    # what takes the link from its line rate to its utilization (the link and link+protocol limits: their
    # product with protocol_efficiency is the utilization): the profile's efficiency for its class (NVLink, PCIe,
    # network), the steady share of the bandwidth part (S / (S + fill_bytes): the first fill_bytes of the message
    # go at half speed while NCCL's buffers fill), the bandwidth part's share of the time, and the rest
    # (other_share: below 1 where the link idles in a schedule's other phases or beside busier links)
    class_efficiency: float = 1.0
    fill_bytes: float = 0.0
    fill_share: float = 1.0
    bandwidth_share: float = 1.0
    other_share: float = 1.0
    # where src -> dst is one cable of an ECMP aggregate (the uplinks of a leaf, or of a pod's spines): which cables
    # it stands for, all loaded equally ("" for a single link)
    aggregate: str = ""


@dataclass(frozen=True)
class SizeResult:
    """One row of the nccl-tests-like table. Quantities in SI base units with the unit in the name (bytes,
    seconds, bytes per second), as every JSON document of topo; ``algbw_GBps``/``busbw_GBps`` are the same
    bandwidths in GB/s (1e9 B/s), as nccl-tests prints them."""

    size_bytes: int
    count: int | None  # nccl-tests' count column; None for a size nccl-tests does not run (estimate without datatype)
    type: str
    redop: str
    root: int
    time_s: float
    algbw_Bps: float
    busbw_Bps: float
    algorithm: str
    protocol: str
    latency_s: float
    bandwidth_s: float
    bottleneck: Bottleneck | None
    # where 80% of measured times fell for this model time on clusters the model was not fitted on (leave-one-
    # setup-out, topo.engine.interval); None with a profile that is not a bundled one (calibrated, ideal)
    time_low_s: float | None = None
    time_high_s: float | None = None

    @property
    def algbw_GBps(self) -> float:
        """Algorithm bandwidth in GB/s (nccl-tests' column)."""
        return self.algbw_Bps / 1e9

    @property
    def busbw_GBps(self) -> float:
        """Bus bandwidth in GB/s (nccl-tests' column)."""
        return self.busbw_Bps / 1e9


@dataclass
class EstimateResult:
    """An estimate of one collective on one placement over a sweep of sizes."""

    spec: str
    collective: str
    num_ranks: int
    algorithm: str  # as requested: "auto" or a name
    placement: str
    ecmp: str
    sharing: str
    profile: str
    results: list[SizeResult]
    candidates: dict[str, list[float | None]] = field(default_factory=dict)
    unavailable: dict[str, str] = field(default_factory=dict)
    phases: dict[str, list[dict]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    protocol: str = "auto"  # as requested
    channels: int | None = None  # as pinned, else None
    choose: str = "fastest"  # how auto chose: the routed fastest, or NCCL's tuner ("nccl")
    # per algorithm evaluated: bytes on every directed link (2*link up, 2*link+1 down) per byte of message
    loads_per_byte: dict[str, np.ndarray] = field(default_factory=dict, repr=False)
    links: LinkTable | None = field(default=None, repr=False)

    def to_dict(self) -> dict:
        """The document ``topo estimate --json`` prints: SI base units, the unit in every key (``size_bytes``,
        ``time_s``, ``busbw_Bps``; ``candidate_time_s``: each algorithm's time per size).

        Returns
        -------
        dict
        """
        return {
            "spec": self.spec,
            "collective": self.collective,
            "num_ranks": self.num_ranks,
            "algorithm": self.algorithm,
            "placement": self.placement,
            "ecmp": self.ecmp,
            "sharing": self.sharing,
            "profile": self.profile,
            "protocol": self.protocol,
            "channels": self.channels,
            "choose": self.choose,
            "results": [whole_bytes_row(asdict(r)) for r in self.results],
            "candidate_time_s": self.candidates,
            "unavailable": self.unavailable,
            "notes": self.notes,
        }

    def with_datatype(self, datatype: str = "float", op: str = "sum") -> "EstimateResult":
        """The same estimate labelled as nccl-tests' ``-d DATATYPE -o OP`` run prints it.

        ``count`` is nccl-tests' count column for the size in elements of ``datatype``
        (:func:`topo.engine.collectives.count_column`: the whole count, or the count a rank for all_gather,
        reduce_scatter, alltoall, gather and scatter; None for a size nccl-tests does not run), ``redop`` the op
        for reducing collectives. Times do not change: the model moves bytes, and a reduction's arithmetic is negligible
        beside the transfer on GPUs.

        Parameters
        ----------
        datatype : str
        op : str

        Returns
        -------
        EstimateResult

        Raises
        ------
        ValueError
            An unknown type or op (the message lists the allowed).
        """
        if datatype not in DATA_TYPES:
            raise ValueError(f"unknown data type {datatype!r}; allowed: {', '.join(DATA_TYPES)}")
        if op not in REDUCTION_OPS:
            raise ValueError(f"unknown reduction op {op!r}; allowed: {', '.join(REDUCTION_OPS)}")
        size = DATA_TYPES[datatype]
        redop = op if self.collective in REDUCING else "none"
        rows = [dataclasses.replace(r, count=count_column(self.collective, r.size_bytes, size, self.num_ranks),
                                    type=datatype, redop=redop) for r in self.results]
        return dataclasses.replace(self, results=rows)

    def to_frame(self):
        """One row per size: the nccl-tests columns plus algorithm, protocol, latency/bandwidth parts.

        Returns
        -------
        pandas.DataFrame
        """
        import pandas as pd

        rows = []
        for r in self.results:
            d = asdict(r)
            b = d.pop("bottleneck") or {}
            d.update({f"bottleneck_{k}": v for k, v in b.items()})
            rows.append(d)
        return pd.DataFrame(rows)

    def candidates_frame(self):
        """Time of every algorithm considered (best protocol) per size: the curves of the report.

        Returns
        -------
        pandas.DataFrame
        """
        import pandas as pd

        sizes = [r.size_bytes for r in self.results]
        return pd.DataFrame({"size_bytes": sizes, **self.candidates})

    def link_loads(self, size_bytes: int | None = None, algorithm: str | None = None):
        """Per directed link: its ends by name (``src``, ``dst``, as every other output names nodes; the ids in
        ``src_id``, ``dst_id``), bytes carried and utilization for one size under the chosen (or the given)
        algorithm.

        Parameters
        ----------
        size_bytes : int, optional
            One of the estimated sizes (default: the largest).
        algorithm : str, optional
            Default: the one chosen at that size.

        Returns
        -------
        pandas.DataFrame
            As :meth:`LinkTable.frame`.

        Raises
        ------
        ValueError
            A size that was not estimated.
        """
        if self.links is None or not self.loads_per_byte:
            raise ValueError("this result holds no link loads")
        if size_bytes is None:
            size_bytes = self.results[-1].size_bytes
        i = next((k for k, r in enumerate(self.results) if r.size_bytes == size_bytes), None)
        if i is None:
            raise ValueError(f"size {size_bytes} was not estimated; sizes: {[r.size_bytes for r in self.results]}")
        if algorithm is None:
            algorithm = self.results[i].algorithm
        if algorithm not in self.loads_per_byte:
            raise ValueError(f"algorithm {algorithm!r} was not evaluated; evaluated: {', '.join(self.loads_per_byte)}")
        t = self.candidates[algorithm][i]
        frame = self.links.frame(self.loads_per_byte[algorithm] * size_bytes, t)
        frame.attrs.update({"size_bytes": size_bytes, "time_s": t, "algorithm": algorithm})
        return frame

    def top_links(self, n: int = 10, size_bytes: int | None = None, names=None):
        """The ``n`` most utilized directed links at one size (default: the largest), with node names.

        Parameters
        ----------
        n : int
        size_bytes : int, optional
        names : callable, optional
            Node ids -> names (``fabric.node_names``), replacing the result's own.

        Returns
        -------
        pandas.DataFrame
        """
        frame = self.link_loads(size_bytes)
        top = frame.nlargest(n, "utilization")
        top = top[top["bytes"] > 0].copy()
        if names is not None:
            top["src"] = names(top["src_id"].to_numpy())
            top["dst"] = names(top["dst_id"].to_numpy())
        return top.reset_index(drop=True)

    def steps_frame(self, algorithm: str | None = None):
        """Per phase of an algorithm's plan: flows, repeats, its bottleneck and its seconds per byte.

        Parameters
        ----------
        algorithm : str, optional
            Default: the algorithm chosen at the largest size.

        Returns
        -------
        pandas.DataFrame
        """
        import pandas as pd

        algorithm = algorithm or self.results[-1].algorithm
        return pd.DataFrame(self.phases.get(algorithm, []))


def whole_bytes_row(row: dict) -> dict:
    """One size's row with its byte counts whole (its bottleneck's ``fill_bytes`` and ``bytes`` too), on one site
    and across sites (:meth:`topo.engine.region_estimate.RegionEstimate.to_dict`).

    Parameters
    ----------
    row : dict
        A row as :func:`dataclasses.asdict` gives it.

    Returns
    -------
    dict
    """
    b = row.get("bottleneck")
    return whole_bytes({**row, "bottleneck": whole_bytes(b) if isinstance(b, dict) else b})
