"""Collective names and nccl-tests' reporting conventions (size, count, algbw, busbw).

nccl-tests (``doc/PERFORMANCE.md``): ``algbw = size / time``; ``busbw = algbw * factor`` with factor
``2(n-1)/n`` for all_reduce, ``(n-1)/n`` for all_gather, reduce_scatter and alltoall, ``1`` for broadcast,
reduce and sendrecv; gather and scatter (src/gather.cu, src/scatter.cu ``GetBw``) ``(n-1)/n``. ``size`` is the
larger of the send and receive buffers of one rank: for all_gather the receive buffer (n pieces), for
reduce_scatter the send buffer, for alltoall the send buffer (n pieces of size/n), for gather the root's receive
buffer and for scatter its send buffer (n pieces of size/n, one to or from each rank).

The sizes nccl-tests runs and prints (NVIDIA/nccl-tests@a0b82b22, src/common.cu ``setupArgs`` lines 900-912 and
the ``writeBenchmarkLinePreamble`` call at line 938): ``count = size / wordSize`` in integers, then each
collective's ``GetCollByteCount`` gives the send, receive and parameter counts; the ``size`` column is
``max(send, receive) x wordSize`` bytes and the ``count`` column the parameter count, the one NCCL is called
with. all_reduce, broadcast, reduce and sendrecv (src/all_reduce.cu lines 34-40 etc.) keep the whole count.
all_gather, reduce_scatter, alltoall, gather and scatter (src/all_gather.cu lines 10-17, src/reduce_scatter.cu
10-17, src/alltoall.cu 18-24, src/gather.cu 10-16, src/scatter.cu 10-16) call NCCL with a count per rank,
``base = (count / nranks) & ~(16 / wordSize - 1)`` (whole 16 bytes a rank), print ``base`` as count and
``base x nranks x wordSize`` as size; their ``GetBw`` (src/all_gather.cu lines 38-44 etc.) takes ``count x
wordSize x nranks / time``, i.e. ``size / time``, as algbw. A ``base`` of 0 runs and prints a row of size 0
(``startColl`` guards the zero, src/common.cu line 545): :func:`nccl_tests_count` gives it, and
:func:`topo.engine.estimate.estimate` leaves such sizes out with a note, a collective of nothing having no time
to model.

Rooted collectives (broadcast, reduce, gather, scatter) use root 0, as nccl-tests does unless ``-r`` is given.

``pipeline`` is topo's own: a pipeline-parallel stage boundary, every GPU of stage k sending ``size`` bytes to its
peer in stage k+1, all boundaries at once (busbw factor 1, as for sendrecv).
"""

from __future__ import annotations

from ..errors import TopoError

__all__ = ["COLLECTIVES", "normalize_collective", "busbw_factor", "PER_RANK", "nccl_tests_count", "count_column", "ALGORITHMS", "normalize_algorithm",
           "algorithm_candidates", "NCCL_ALGORITHMS", "REDUCING", "ROOTED", "DATA_TYPES", "REDUCTION_OPS", "SCALING_OPS"]

# nccl-tests' -d data types and their sizes in bytes (src/common.cu test_typenames; fp8 from NCCL 2.24)
DATA_TYPES: dict[str, int] = {"int8": 1, "uint8": 1, "int32": 4, "uint32": 4, "int64": 8, "uint64": 8, "half": 2,
                              "float": 4, "double": 8, "bfloat16": 2, "f8e4m3": 1, "f8e5m2": 1}
# nccl-tests' -o reduction ops (src/common.cu test_opnames); the op does not change the modelled time (the
# reduction's arithmetic is negligible beside the transfer on GPUs)
REDUCTION_OPS = ("sum", "prod", "max", "min", "avg", "mulsum")
# ops NCCL runs as a sum with a scaling (ncclAvg: SumPostDiv or PreMulSum; ncclPreMulSum): PAT has no kernel for
# them, so NCCL leaves PAT out of a reduce-scatter with one (src/enqueue.cc, updateCollCostTable)
SCALING_OPS = ("avg", "mulsum")

COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "alltoall", "broadcast", "reduce", "gather", "scatter",
               "sendrecv", "pipeline")
REDUCING = ("all_reduce", "reduce_scatter", "reduce")
ROOTED = ("broadcast", "reduce", "gather", "scatter")  # root 0, as nccl-tests' default
# the collectives nccl-tests calls with a count per rank, trimmed to whole 16 bytes (see the module docstring)
PER_RANK = ("all_gather", "reduce_scatter", "alltoall", "gather", "scatter")

# Every algorithm topo models, per collective. The first is the default for an explicit request of that family.
ALGORITHMS: dict[str, tuple[str, ...]] = {
    "all_reduce": ("ring", "tree", "nvls", "nvls_tree", "sharp", "halving_doubling", "recursive_doubling",
                   "hierarchical"),
    "all_gather": ("ring", "pat", "nvls", "recursive_doubling", "hierarchical"),
    "reduce_scatter": ("ring", "pat", "nvls", "recursive_halving", "hierarchical"),
    "broadcast": ("ring", "chain"),
    "reduce": ("ring",),
    "gather": ("direct",),
    "scatter": ("direct",),
    "alltoall": ("direct", "pairwise"),
    "sendrecv": ("direct",),
    "pipeline": ("direct",),
}

# What "auto" chooses among: the algorithms NCCL itself has (topo's textbook ones are opt-in).
NCCL_ALGORITHMS: dict[str, tuple[str, ...]] = {
    "all_reduce": ("ring", "tree", "nvls", "nvls_tree", "sharp"),
    # NCCL also runs NVLS for these inside one NVLink domain (topo models it: -a nvls), but auto leaves it out: its
    # latency is fitted on all-reduce only, and with it auto is 43% fast below 64 KiB on the 32-rank GB200 NVL72
    # all-gather (gcp_a4x_gb200_8n_mnnvl; in-sample <= 64 KiB 11.1% -> 12.8%, benchmarks/accuracy.py --quick)
    # PAT (NCCL 2.23+) runs only with one GPU per node: elsewhere auto reports it unavailable, with the reason
    "all_gather": ("ring", "pat"),
    "reduce_scatter": ("ring", "pat"),
    "broadcast": ("ring",),
    "reduce": ("ring",),  # NCCL's reduce runs ring only (src/graph/tuning.cc: coll == ncclFuncReduce && a != RING)
    "gather": ("direct",),  # nccl-tests' gather and scatter are grouped ncclSend/ncclRecv to/from the root
    "scatter": ("direct",),
    "alltoall": ("direct",),
    "sendrecv": ("direct",),
    "pipeline": ("direct",),
}

_ALIASES = {
    "allreduce": "all_reduce", "ar": "all_reduce",
    "allgather": "all_gather", "ag": "all_gather",
    "reducescatter": "reduce_scatter", "rs": "reduce_scatter",
    "all_to_all": "alltoall", "a2a": "alltoall",
    "bcast": "broadcast",
    "send_recv": "sendrecv", "p2p": "sendrecv",
    "pp": "pipeline",
}


def _key(name: str) -> str:
    return name.strip().lower().replace("-", "_")


def normalize_collective(name: str) -> str:
    """``all-reduce``, ``allreduce``, ``all_reduce`` -> ``all_reduce``.

    Parameters
    ----------
    name : str

    Returns
    -------
    str

    Raises
    ------
    TopoError
        An unknown name (keyed ``collective``).
    """
    k = _key(name)
    k = _ALIASES.get(k.replace("_", ""), _ALIASES.get(k, k))
    if k not in COLLECTIVES:
        raise TopoError(f"unknown collective {name!r}; allowed: {', '.join(COLLECTIVES)} (hyphens accepted)",
                        key="collective")
    return k


def normalize_algorithm(collective: str, name: str) -> str:
    """Check ``name`` is an algorithm of ``collective`` (or ``auto``), as its canonical name.

    Parameters
    ----------
    collective, name : str

    Returns
    -------
    str

    Raises
    ------
    TopoError
        An unknown algorithm for the collective (keyed ``algorithm``).
    """
    k = _key(name)
    if k in ("auto", "nccl"):
        return "auto"
    k = {"rabenseifner": "halving_doubling", "dbt": "tree", "double_binary_tree": "tree",
         "nvlstree": "nvls_tree", "collnet": "sharp"}.get(k, k)
    allowed = ALGORITHMS[collective]
    if k not in allowed:
        elsewhere = [c for c, algos in ALGORITHMS.items() if k in algos]
        runs = f" ({k} runs {', '.join(elsewhere)})" if elsewhere else ""
        raise TopoError(f"unknown algorithm {name!r} for {collective}{runs}; allowed: auto, {', '.join(allowed)}",
                        key="algorithm")
    return k


def _runs_elsewhere(collective: str, name: str) -> bool:
    """Whether ``name`` is no algorithm of ``collective`` but one of another collective's."""
    try:
        normalize_algorithm(collective, name)
        return False
    except TopoError:
        return any(_ok(c, name) for c in ALGORITHMS if c != collective)


def _ok(collective: str, name: str) -> bool:
    try:
        normalize_algorithm(collective, name)
        return True
    except TopoError:
        return False


def algorithm_candidates(collective: str, name: str) -> tuple[str, list[str]]:
    """What an ``algorithm`` option asks for.

    ``auto`` chooses among NCCL's algorithms of the collective; one name runs that algorithm; a comma list
    (``ring,tree``) chooses among those, and ``^`` before it (``^nvls,nvls_tree``) among NCCL's algorithms but
    those, as NCCL_ALGO reads them (NCCL_NVLS_ENABLE=0 is ``^nvls,nvls_tree``).

    Parameters
    ----------
    collective, name : str

    Returns
    -------
    label : str
        What the result reports: ``auto``, the algorithm, or the normalised list.
    candidates : list of str
    """
    text = name.strip()
    if "," not in text and not text.startswith("^"):
        k = normalize_algorithm(collective, text)
        return k, (list(NCCL_ALGORITHMS[collective]) if k == "auto" else [k])
    exclude = text.startswith("^")
    parts = [x for x in text.lstrip("^").split(",") if x.strip()]
    if exclude:  # as NCCL_ALGO: an excluded algorithm another collective runs does not apply to this one
        kept = [x for x in parts if not _runs_elsewhere(collective, x)]
        if parts and not kept:  # none applies here: NCCL's own choice
            return "auto", list(NCCL_ALGORITHMS[collective])
        parts = kept
    names = [normalize_algorithm(collective, x) for x in parts]
    if not names or "auto" in names:
        raise TopoError(f"algorithm list {name!r} must name algorithms of {collective} (not auto); allowed: "
                        f"{', '.join(ALGORITHMS[collective])}", key="algorithm")
    names = list(dict.fromkeys(names))
    if exclude:
        keep = [a for a in NCCL_ALGORITHMS[collective] if a not in names]
        if not keep:
            raise TopoError(f"algorithm {name!r} leaves none of NCCL's algorithms for {collective} "
                            f"({', '.join(NCCL_ALGORITHMS[collective])})", key="algorithm")
        return "^" + ",".join(names), keep
    return (names[0], names) if len(names) == 1 else (",".join(names), names)


def nccl_tests_count(collective: str, size_bytes: int, word_bytes: int, num_ranks: int) -> tuple[int, int]:
    """The size nccl-tests runs for ``-b size`` and prints, and its ``count`` column.

    NVIDIA/nccl-tests@a0b82b22 src/common.cu ``setupArgs`` (lines 900-912) with each collective's
    ``GetCollByteCount`` (module docstring): the whole count ``size / word`` for all_reduce, broadcast, reduce,
    sendrecv (and topo's pipeline); for :data:`PER_RANK` collectives the count per rank ``(size / word / n) &
    ~(16 / word - 1)`` and the size ``count x n x word``, 0 when a rank's share is below 16 bytes.

    Parameters
    ----------
    collective : str
        A normalized name (:data:`COLLECTIVES`).
    size_bytes : int
        The size asked (``-b``/``-e``/``--size``).
    word_bytes : int
        The data type's size, a value of :data:`DATA_TYPES`.
    num_ranks : int
        Ranks of the communicator.

    Returns
    -------
    size_bytes : int
        ``max(sendBytes, expectedBytes)``, the ``size`` column.
    count : int
        The count NCCL is called with, the ``count`` column.
    """
    count = int(size_bytes) // word_bytes
    if collective not in PER_RANK:
        return count * word_bytes, count
    base = (count // max(1, num_ranks)) & ~(max(1, 16 // word_bytes) - 1)
    return base * max(1, num_ranks) * word_bytes, base


def count_column(collective: str, size_bytes: int, word_bytes: int, num_ranks: int) -> int | None:
    """nccl-tests' count column for a size timed as given: :func:`nccl_tests_count`'s count where nccl-tests runs
    exactly ``size_bytes``, else None (1,000 B of all_gather over 24 floats' ranks runs 768 B: no count multiplies
    back to 1,000 B).

    Parameters
    ----------
    collective : str
    size_bytes : int
    word_bytes : int
    num_ranks : int

    Returns
    -------
    int or None
    """
    run, count = nccl_tests_count(collective, size_bytes, word_bytes, num_ranks)
    return count if run == int(size_bytes) else None


def busbw_factor(collective: str, num_ranks: int) -> float:
    """nccl-tests' bus-bandwidth factor (PERFORMANCE.md): ``2(p-1)/p`` for all-reduce, ``(p-1)/p`` for
    all-gather, reduce-scatter and all-to-all, 1 otherwise.

    Parameters
    ----------
    collective : str
    num_ranks : int

    Returns
    -------
    float
    """
    n = num_ranks
    if collective == "all_reduce":
        return 2 * (n - 1) / n
    if collective in ("all_gather", "reduce_scatter", "alltoall", "gather", "scatter"):
        return (n - 1) / n
    return 1.0
