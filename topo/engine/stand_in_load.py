"""Why a failed NIC can leave a collective's time as it was: its stand-in (the next working NIC of its server,
:meth:`topo.engine.paths.Paths.alive_nics`) carries the failed NIC's bytes besides its own and still no more, per
byte of line rate, than the busiest link. In NCCL's double binary tree (:mod:`topo.engine.algorithms.tree`) the
first and last NVLink domains of a communicator are the roots, each with one child, and leaves of the other tree:
2 tree edges where an interior domain has 4, so their NICs carry half the bytes and a failover only brings one up to
the others (walk18: ``--fail nic0.3`` and ``nic127.3`` on dgx-h100-superpod leave ``-a tree`` at 325.7 GB/s).
"""

from __future__ import annotations

import numpy as np

from .algorithms.tree import double_binary_tree
from .paths import Paths, failed_nic_stand_ins
from .placement import Placement

__all__ = ["off_bottleneck_notes", "tree_edges"]


def tree_edges(num_domains: int) -> np.ndarray:
    """Tree edges at each domain (parent and children, both trees) of NCCL's double binary tree over
    ``num_domains`` domains: a domain's NICs carry bytes in proportion.

    Parameters
    ----------
    num_domains : int

    Returns
    -------
    numpy.ndarray
        One count per domain.
    """
    p0, p1, _ = double_binary_tree(num_domains)
    edges = np.zeros(num_domains, dtype=np.int64)
    for parent in (p0, p1):
        child = parent >= 0
        edges += child
        edges += np.bincount(parent[child], minlength=num_domains)
    return edges


def _tree_reason(placement: Placement, gpu: int, server: str) -> str:
    """Why the tree spares ``gpu``'s NICs, or "" when its domain is as busy as any."""
    g = placement.ranks_per_domain()
    hit = np.argwhere(placement.groups == gpu)
    if g is None or hit.size == 0:
        return ""
    D = placement.groups.shape[1] // g
    edges = tree_edges(D)
    d = int(hit[0][1]) // g
    if 2 * edges[d] > edges.max():
        return ""
    return (f"; {server} holds NVLink domain {d} of the {D} of its communicator, a root of NCCL's double binary "
            f"tree with one child and a leaf of the other: {edges[d]} tree edges where others have "
            f"{edges.max()}, so its NICs carried half the bytes")


def off_bottleneck_notes(paths: Paths, placement: Placement, loads_per_byte: np.ndarray, algorithm: str,
                         most: int = 8) -> list[str]:
    """One note per failed NIC when every failed NIC's stand-in, carrying the failed NIC's bytes too, is still no
    busier than the busiest other link (per byte of line rate): the failed NICs are off the bottleneck, each with
    its stand-in and, under the tree, why its server's NICs carried less.

    Parameters
    ----------
    paths : Paths
        The router's paths (the fabric and its failed parts).
    placement : Placement
    loads_per_byte : numpy.ndarray
        Bytes per directed link (up then down for each link) per byte of the collective, under ``algorithm``.
    algorithm : str
    most : int
        The failed NICs explained one a line at most; one more line counts the rest.

    Returns
    -------
    list of str
        A note per failed NIC (at most ``most``, then one for the rest), or none.
    """
    f = paths.fabric
    pairs = failed_nic_stand_ins(paths)
    if pairs is None:
        return []
    bad, to = pairs
    busy = loads_per_byte / np.repeat(f.links["bandwidth_Bps"], 2)  # seconds per byte at line rate
    ends = np.flatnonzero(np.isin(f.links["src"], f.node_offset["nic"] + to))
    mine = np.zeros(busy.size, dtype=bool)
    mine[np.concatenate([2 * ends, 2 * ends + 1])] = True
    others = busy[~mine].max(initial=0.0)  # the busiest link the stand-ins do not own
    if others <= 0 or busy[mine].max(initial=0.0) > others * (1 + 1e-9):
        return []
    first = f.node_offset["nic"]
    names, subs = f.node_names(first + bad[:most]), f.node_names(first + to[:most])
    notes = []
    for nic, a, b, gpu in zip(bad[:most].tolist(), names, subs, f.nic_gpu(bad[:most]).tolist()):
        server = f"server {nic // f.layout.nics_per_server}"
        reason = _tree_reason(placement, int(gpu), server) if algorithm == "tree" else ""
        notes.append(f"{a} is off {algorithm}'s bottleneck: its stand-in {b} carries its bytes besides its own and "
                     f"is no busier than the busiest other link{reason}")
    if bad.size > most:
        notes.append(f"{bad.size - most} more failed NICs are off {algorithm}'s bottleneck alike: their stand-ins "
                     f"carry their bytes besides their own and are no busier than the busiest other link")
    return notes
