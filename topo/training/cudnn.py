"""The cuDNN version a run's fused attention runs, and which published attention table it reads.

Transformer Engine's fused attention is cuDNN's (the frontend graph's ``sdpa``), and cuDNN's attention kernels
change from release to release (on Hopper, 9.19's hdim-128 causal forward at 16K runs 15% above 9.1's,
``kernels.toml [attention.cudnn]``); on Blackwell, cuDNN 9.13.1's hdim-128 causal backward at 2k runs at 24% of
a B200's peak, 9.22's at 35% of a GB200's (``kernels.toml [attention.blackwell.cudnn]``). A run reads the cuDNN its
framework's container ships: ``topo/data/compute/cudnn_releases.toml`` maps a release (as a run's software string
names it, ``NeMo 25.11``) to its cuDNN, each entry with its source. The layout carries the version
(``ParallelLayout.cudnn_version``, default the newest published table, :data:`NEWEST`);
:func:`table_version` picks the published table it reads: the nearest older one by major.minor, the oldest for a
version older than every table (both assumptions, stated in ``kernels.toml``).
"""

from __future__ import annotations

import re
import tomllib
from functools import lru_cache

from ..resources import data_dir

__all__ = ["NEWEST", "parse_version", "release_cudnn", "release_entry", "table_version"]

NEWEST = "9.22"
"""The newest cuDNN with a published attention table (``kernels.toml`` ``[attention.<table>.cudnn] newest``; a
test keeps the two equal): the layout's default."""

_VERSION = re.compile(r"9\.(\d+)(?:\.\d+){0,2}")


def parse_version(version: str) -> tuple[int, int]:
    """``(major, minor)`` of a cuDNN 9 version (``"9.13.1.26"`` -> ``(9, 13)``).

    Parameters
    ----------
    version : str
        ``9.MINOR``, optionally ``.PATCH`` and ``.BUILD``.

    Returns
    -------
    tuple of int

    Raises
    ------
    ValueError
        Naming the value and the form allowed (every published table is cuDNN 9).
    """
    m = _VERSION.fullmatch(str(version).strip())
    if m is None:
        raise ValueError(f"{version!r} is not a cuDNN 9 version; allowed: 9.MINOR[.PATCH[.BUILD]], e.g. "
                         f"9.13.1 (published attention tables: 9.1-{NEWEST})")
    return 9, int(m[1])


@lru_cache(maxsize=1)
def _releases() -> dict:
    return tomllib.loads((data_dir("compute") / "cudnn_releases.toml").read_text(encoding="utf-8"))["release"]


_CONTAINERS = (
    (re.compile(r"NeMo (\d\d\.\d\d)"), "NeMo {}"),
    (re.compile(r"PyTorch (\d\d\.\d\d) container"), "PyTorch {}"),
    # the banner is every NGC container's ("{framework} NVIDIA Release yy.mm"): PyTorch's when it says so or names
    # no framework (rev72: "JAX NVIDIA Release 25.08" read PyTorch 25.08's cuDNN), JAX's where it names JAX
    (re.compile(r"(?:PyTorch |(?<![\w-] ))NVIDIA Release (\d\d\.\d\d)"), "PyTorch {}"),
    (re.compile(r"JAX NVIDIA Release (\d\d\.\d\d)"), "JAX {}"),
    (re.compile(r"nvcr\.io/nvidia/jax:(\d\d\.\d\d)"), "JAX {}"),
    (re.compile(r"((?:Megatron-MoE-ModelZoo|MaxText)@[0-9a-f]{8})"), "{}"),
)
"""How a software string names its container: each pattern, the ``cudnn_releases.toml`` key it reads (a NeMo release,
an NGC PyTorch / JAX container, the NGC banner of a PyTorch base ("NVIDIA Release yy.mm"), a repository commit
(``repo@commit``) whose Dockerfile builds its own or whose publication date bounds it)."""


def release_entry(software: str) -> dict | None:
    """The ``cudnn_releases.toml`` entry of the container a run's software string names (``NeMo yy.mm``, a patch
    release ``NeMo yy.mm.pp`` reading ``NeMo yy.mm``'s; ``PyTorch yy.mm container``; the PyTorch base's banner
    ``NVIDIA Release yy.mm``; ``nvcr.io/nvidia/jax:yy.mm``; ``Megatron-MoE-ModelZoo@commit``, ``MaxText@commit``),
    the first that names one the file lists, or None.

    Parameters
    ----------
    software : str
        The run's software string (``"NeMo 25.04.01 (DGXC 25.05.04)"``, ``"MLPerf Training v5.1 (PyTorch 25.01
        container, NeMo v2.4.0)"``).

    Returns
    -------
    dict or None
        ``cudnn``, ``status``, ``source`` (and ``at_most`` where the version is an upper bound).
    """
    releases = _releases()
    for pattern, key in _CONTAINERS:
        m = pattern.search(software or "")
        if m and key.format(m[1]) in releases:
            return releases[key.format(m[1])]
    return None


def release_cudnn(software: str) -> str | None:
    """The cuDNN version of the release a run's software string names (:func:`release_entry`), or None."""
    entry = release_entry(software)
    return str(entry["cudnn"]) if entry else None


def table_version(version: str, published) -> str:
    """The published table a cuDNN ``version`` reads: the nearest at or below its major.minor, else the oldest.

    Parameters
    ----------
    version : str
        A cuDNN 9 version (:func:`parse_version`).
    published : iterable of str
        The versions with a table (``"9.13"``, ``"9.22"``, ...).

    Returns
    -------
    str
        One of ``published``.
    """
    want = parse_version(version)
    tables = sorted(published, key=parse_version)
    older = [t for t in tables if parse_version(t) <= want]
    return older[-1] if older else tables[0]
