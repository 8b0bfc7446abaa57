"""The GPUs failed parts cut off: one rule for ``describe``, ``train``'s refusal and the report's cut.

Two kinds of cut, each named by its GPUs as ranges:

* a failed NVLink switch (``nvswitchN``): its domain's GPUs reach each other only through it
  (:func:`topo.fabric.failures.nvswitch_domains`);
* any failed parts (a switch, a leaf, a server's NICs, a pod's uplinks, ...) that leave GPUs in a connected piece of
  the working links apart from the largest one: those GPUs cannot reach the rest at all, whatever the routing (the
  largest piece by GPUs is "the rest"; the first in GPU order where two tie).
"""

from __future__ import annotations

import numpy as np

from .failures import failed_gpu_ids, nvswitch_domains

__all__ = ["cut_message", "cut_off_gpus", "cut_off_words", "cut_words", "gpu_pieces", "gpu_ranges_text"]


def gpu_pieces(fabric) -> np.ndarray | None:
    """Per GPU, the connected piece of ``fabric``'s working links it sits in, numbered so that piece 0 is the
    largest by GPUs (the first in GPU order of a tie); None without failed links (one piece)."""
    if not fabric.failures or fabric.failed is None or not fabric.failed.any():
        return None
    key = ("gpu_pieces", fabric.failures)
    if key not in fabric._cache:
        fabric._cache[key] = _pieces(fabric)
    return fabric._cache[key]


def cut_off_gpus(fabric) -> np.ndarray:
    """The GPU ids (sorted) that no working path joins to the largest connected piece of ``fabric``'s GPUs (empty
    without failures, or when every GPU still reaches every other)."""
    piece = gpu_pieces(fabric)
    return np.zeros(0, dtype=np.int64) if piece is None else np.flatnonzero(piece != 0)


def _pieces(fabric) -> np.ndarray:
    import scipy.sparse as sp  # here, as topo.fabric.bisection does: scipy.sparse costs its import only with failures
    from scipy.sparse.csgraph import connected_components

    links, alive = fabric.links, fabric.link_alive
    n = fabric.num_nodes
    m = sp.coo_array((np.ones(int(alive.sum()), dtype=np.int8), (links["src"][alive], links["dst"][alive])),
                     shape=(n, n))
    _, label = connected_components(m, directed=False)
    g0 = fabric.node_offset["gpu"]
    gpu_label = label[g0:g0 + fabric.num_gpus]
    _, first, inverse, counts = np.unique(gpu_label, return_index=True, return_inverse=True, return_counts=True)
    order = np.lexsort((first, -counts))  # the largest first; of a tie, the one holding the lower GPU
    rank = np.empty_like(order)
    rank[order] = np.arange(order.size)
    return rank[inverse]


def gpu_ranges_text(ids: np.ndarray, most: int = 4) -> str:
    """GPU ids as ranges of consecutive ids: ``GPU 5``, ``GPUs 0 to 3,071``, ``GPUs 0 to 7 and 16 to 23``; past
    ``most`` ranges the first ``most`` and how many more."""
    ids = np.asarray(ids, dtype=np.int64)
    if ids.size == 1:
        return f"GPU {int(ids[0]):,}"
    breaks = np.flatnonzero(np.diff(ids) != 1) + 1
    starts, ends = ids[np.r_[0, breaks]], ids[np.r_[breaks - 1, ids.size - 1]]
    runs = [f"{int(a):,}" if a == b else f"{int(a):,} to {int(b):,}" for a, b in zip(starts, ends)]
    if len(runs) > most:
        return f"GPUs {', '.join(runs[:most])} and {len(runs) - most:,} more ranges"
    return "GPUs " + (runs[0] if len(runs) == 1 else f"{', '.join(runs[:-1])} and {runs[-1]}")


def cut_words(fabric) -> list[str]:
    """Every cut ``fabric``'s failures make, in words: each failed NVLink switch's domain ("nvswitch1 failed: its
    NVLink domain (GPUs 72 to 143), whose GPUs reach each other only through it"), then the GPUs cut off from the
    rest (:func:`cut_off_words`); [] when none."""
    words = [f"{w}, whose GPUs reach each other only through it"
             for _, _, w in nvswitch_domains(fabric.failures, fabric.spec.gpus_per_domain)]
    off = cut_off_words(fabric)
    return words + ([off] if off else [])


def cut_message(fabric, message: str) -> str:
    """The router's line for a cut (``message``: the two GPUs it found, ``GPU 568 cannot reach GPU 640: ...``) after
    every cut the failures make (:func:`cut_words`), as the report and ``estimate`` say it (tidy67; rev69: estimate
    said only the two GPUs with pod 1 of an NVL72 SuperPOD cut off)."""
    words = "; ".join(cut_words(fabric))
    return f"{words}: {message}" if words else message


def cut_off_words(fabric) -> str | None:
    """The GPUs no working path joins to the rest (:func:`cut_off_gpus`) in words: "GPUs 0 to 3,071 (pod 0) are cut
    off: no working path joins them to the other 21,504 GPUs", with how many pieces they fall in where several
    (a rack's two servers under a failed leaf); where no piece is the largest (every spine failed over four alike
    units), each piece; None when every GPU reaches every other. A GPU the failures name (``gpu3``) failed, it is
    not cut off: it is left out (rev69: ``--fail gpu3`` said "GPU 3 is cut off", before the router's "GPU 3 itself
    failed")."""
    piece = gpu_pieces(fabric)
    if piece is None:
        return None
    live = np.ones(piece.size, dtype=bool)
    live[failed_gpu_ids(fabric.failures)] = False
    labels, sizes = np.unique(piece[live], return_counts=True)  # piece 0, the largest, first; a failed GPU's gone
    if labels.size < 2:
        return None
    if sizes[0] == sizes[1]:
        named = "; ".join(gpu_ranges_text(np.flatnonzero((piece == p) & live)) for p in labels[:4])
        more = f"; and {labels.size - 4:,} more" if labels.size > 4 else ""
        return f"the working links join the GPUs in {labels.size:,} pieces, none reaching another: {named}{more}"
    cut = np.flatnonzero((piece != 0) & live)
    verb, them = ("is", "it") if cut.size == 1 else ("are", "them")
    apart = f" (in {labels.size - 1:,} pieces, none reaching another)" if labels.size > 2 else ""
    return (f"{gpu_ranges_text(cut)}{_pods(fabric, cut)} {verb} cut off{apart}: no working path joins {them} to the "
            f"other {int(live.sum()) - cut.size:,} GPUs")


def _pods(fabric, cut: np.ndarray) -> str:
    """`` (pod 0)``, `` (pods 0 and 3)`` where the cut GPUs are whole pods of a fabric of several; else ""."""
    L = fabric.layout
    if L.num_pods <= 1:
        return ""
    per_pod = fabric.num_gpus // L.num_pods
    pods, held = np.unique(cut // per_pod, return_counts=True)
    if (held != per_pod).any():
        return ""
    names = [str(int(p)) for p in pods]
    return f" (pod {names[0]})" if len(names) == 1 else f" (pods {', '.join(names[:-1])} and {names[-1]})"
