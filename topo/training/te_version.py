"""The Transformer Engine a run's container ships, and what TE's major version changes in what a step pays.

A run names its container (``NeMo 24.07``, ``MLPerf Training v4.1 (NeMo 24.09 container)``);
``topo/data/compute/te_releases.toml`` maps a container to its TE version, each entry with its source, read by the
same rule that reads a run's cuDNN (:func:`topo.training.cudnn.container_key`). The layout carries the version
(``ParallelLayout.te_version``, default :data:`NEWEST`, the newest the file lists); :func:`run_te` gives a published
run's (None where its container is not listed: the layout's default).

What the version changes, from TE's source at each tag (``kernels.toml`` ``[ub_grad_output_copies]``): under
userbuffers' dgrad all-gather (a row-parallel FP8 linear layer's output gradient, ``ub_overlap_ag``) TE 1.x casts
the gradient straight into the communicator's buffer, TE 2.x quantises it into a tensor of its own and then copies
that into the buffer (:func:`ub_grad_output_copies`). Delayed scaling's amax history and scale update is the same
at every version a run ships: one fused update per autocast, forward and backward, since v1.6
(NVIDIA/TransformerEngine 73f8d90f, "cuda graph support (#575)", 2024-04-12: ``add_fp8_tensors_to_global_buffer``
in each module's ``prepare_forward``, ``reduce_and_update_fp8_tensors`` at the autocast's exit and after the first
module's backward, v1.8 ``fp8.py`` lines 316-375, ``module/base.py`` ``prepare_forward``); the per-module
``amax_and_scale_update`` of each module's ``prepare_forward`` is v1.5's and older (v1.5 ``module/base.py`` lines
537-547), older than any listed container's TE (:mod:`topo.training.fp8_amax` prices the fused one).
"""

from __future__ import annotations

import re
import tomllib
from functools import lru_cache

from ..resources import data_dir
from .cudnn import container_key

__all__ = ["NEWEST", "parse_te_version", "release_te", "run_te", "te_releases", "ub_grad_output_copies",
           "ub_grad_output_copy_bytes"]

NEWEST = "2.14"
"""The newest Transformer Engine ``te_releases.toml`` lists (NeMo 26.04's; a test keeps the two equal): the
layout's default ``te_version``."""

_VERSION = re.compile(r"([12])\.(\d+)(?:\.\d+)?(?:\.?(?:dev|rc)\d*)?")


def parse_te_version(version: str) -> tuple[int, int]:
    """``(major, minor)`` of a Transformer Engine version (``"1.8.0.dev0"`` -> ``(1, 8)``, ``"2.14"`` ->
    ``(2, 14)``).

    Parameters
    ----------
    version : str
        ``MAJOR.MINOR[.PATCH][.devN|rcN]``, major 1 or 2.

    Returns
    -------
    tuple of int

    Raises
    ------
    ValueError
        One line naming the value and the form allowed.
    """
    m = _VERSION.fullmatch(str(version).strip()) if isinstance(version, str) else None
    if m is None:
        raise ValueError(f"{version!r} is not a Transformer Engine version; allowed: text 1.MINOR or 2.MINOR, "
                         f"optionally .PATCH and .devN / rcN, e.g. \"1.8.0.dev0\" or \"{NEWEST}\"")
    return int(m[1]), int(m[2])


@lru_cache(maxsize=1)
def te_releases() -> dict:
    """``te_releases.toml``'s entries by container.

    Returns
    -------
    dict
        ``{"NeMo 24.07": {"te": ..., "status": ..., "source": ...}, ...}``.
    """
    return tomllib.loads((data_dir("compute") / "te_releases.toml").read_text(encoding="utf-8"))["release"]


def release_te(software: str) -> str | None:
    """The Transformer Engine version of the container a run's software string names
    (:func:`topo.training.cudnn.container_key` over ``te_releases.toml``), or None where it names none listed.

    Parameters
    ----------
    software : str
        The run's software string.

    Returns
    -------
    str or None
    """
    releases = te_releases()
    key = container_key(software, releases)
    return str(releases[key]["te"]) if key is not None else None


def run_te(software: str) -> str | None:
    """The Transformer Engine a published run is priced at: its container's (:func:`release_te`), else None (the
    layout's default, :data:`NEWEST`). No date bound, unlike the cuDNN's: TE's major version, the one thing read
    (:func:`ub_grad_output_copies`), is not bounded by a publication date of a run with no container.

    Parameters
    ----------
    software : str
        The run's software string.

    Returns
    -------
    str or None
    """
    return release_te(software)


@lru_cache(maxsize=1)
def _copies_table() -> dict:
    return tomllib.loads((data_dir("compute") / "kernels.toml").read_text(encoding="utf-8"))["ub_grad_output_copies"]


def ub_grad_output_copies(te_version: str) -> int:
    """Copies Transformer Engine makes, a row-parallel FP8 linear layer and micro-batch backward, of the quantised
    output-gradient shard into userbuffers' dgrad all-gather buffer (``kernels.toml`` ``[ub_grad_output_copies]``
    by major version: 0 at 1.x, which casts into the buffer; 1 at 2.x, which quantises, then copies).

    Parameters
    ----------
    te_version : str
        The layout's ``te_version`` (:func:`parse_te_version`).

    Returns
    -------
    int
    """
    major, _ = parse_te_version(te_version)
    return int(_copies_table()["copies_by_te_major"][str(major)])


def ub_grad_output_copy_bytes(te_version: str, element_bytes: float) -> float:
    """Bytes per element of the output-gradient shard that :func:`ub_grad_output_copies` read and write: each copy
    reads and writes the quantised data (``copy_bytes_per_data_byte`` x ``element_bytes``), 0 where TE makes none.

    Parameters
    ----------
    te_version : str
        The layout's ``te_version``.
    element_bytes : float
        Bytes of one quantised element (1 for FP8: :func:`topo.training.kernels.cast_extra_bytes`).

    Returns
    -------
    float
    """
    per_copy = float(_copies_table()["copy_bytes_per_data_byte"]) * element_bytes
    return ub_grad_output_copies(te_version) * per_copy
