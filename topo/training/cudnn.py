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

A run whose software string names no container uses at most the newest cuDNN published by the run's own publication
date (:func:`dated_cudnn`; release dates in ``topo/data/compute/cudnn_release_dates.toml``): :func:`run_cudnn` takes
the container's where one is named, else that bound, else None (the layout's default, the newest).
"""

from __future__ import annotations

import datetime
import re
import tomllib
from functools import lru_cache

from ..resources import data_dir

__all__ = ["NEWEST", "UNKNOWN_DATE", "container_key", "dated_cudnn", "parse_published_date", "parse_version", "release_cudnn",
           "release_entry", "run_cudnn", "table_version"]

UNKNOWN_DATE = "unknown"
"""A run's ``published_date`` where its source's date could not be established (the date rule then does not apply)."""

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
    key = container_key(software, releases)
    return releases[key] if key is not None else None


def container_key(software: str, known) -> str | None:
    """The key of the container a run's software string names (:data:`_CONTAINERS`: ``NeMo yy.mm``, ``PyTorch
    yy.mm``, ``JAX yy.mm``, ``repo@commit``), the first of them that ``known`` holds, or None: the one rule for
    reading a run's container, which every per-container table (the cuDNN here, Transformer Engine's in
    :mod:`.te_version`) reads.

    Parameters
    ----------
    software : str
        The run's software string.
    known : container of str
        The keys a table lists.

    Returns
    -------
    str or None
    """
    for pattern, key in _CONTAINERS:
        m = pattern.search(software or "")
        if m and key.format(m[1]) in known:
            return key.format(m[1])
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


@lru_cache(maxsize=1)
def _release_dates() -> tuple[tuple[datetime.date, str], ...]:
    """``(date, version)`` of every cuDNN release ``cudnn_release_dates.toml`` lists, oldest first."""
    rows = tomllib.loads((data_dir("compute") / "cudnn_release_dates.toml").read_text(encoding="utf-8"))["version"]
    return tuple(sorted((entry["date"], version) for version, entry in rows.items()))


def parse_published_date(value: str) -> datetime.date | None:
    """A run's publication date (``published_date``: ``YYYY-MM-DD``), or None for :data:`UNKNOWN_DATE`.

    Parameters
    ----------
    value : str
        ``YYYY-MM-DD`` or ``unknown``.

    Returns
    -------
    datetime.date or None

    Raises
    ------
    ValueError
        One line naming the key, the value and the forms allowed (an empty value is refused: a run's date is
        either established or said to be unknown).
    """
    text = str(value).strip()
    if text == UNKNOWN_DATE:
        return None
    if re.fullmatch(r"\d{4}-\d\d-\d\d", text):
        try:
            return datetime.date.fromisoformat(text)
        except ValueError:
            pass
    raise ValueError(f"published_date = {value!r}; allowed: a date YYYY-MM-DD (the run's publication) or "
                     f"{UNKNOWN_DATE!r}")


def dated_cudnn(published: datetime.date) -> str:
    """The newest cuDNN released on or before ``published`` (``cudnn_release_dates.toml``): the newest a run
    published that day could have used. A date before every listed release reads the oldest listed (9.0.0, which
    reads the oldest published attention set like any older version, :func:`table_version`).

    Parameters
    ----------
    published : datetime.date
        The run's publication date.

    Returns
    -------
    str
        A cuDNN version (``"9.2.1"``).
    """
    releases = _release_dates()
    older = [version for date, version in releases if date <= published]
    return older[-1] if older else releases[0][1]


def run_cudnn(software: str, published: str = UNKNOWN_DATE) -> str | None:
    """The cuDNN a published run's fused attention is priced at: its container's (:func:`release_cudnn`) where its
    software string names one, else the newest released by its publication date (:func:`dated_cudnn`), else None
    (date unknown: the layout's default, the newest published table).

    Parameters
    ----------
    software : str
        The run's software string.
    published : str
        Its ``published_date`` (``YYYY-MM-DD`` or ``unknown``, :func:`parse_published_date`).

    Returns
    -------
    str or None
    """
    container = release_cudnn(software)
    if container is not None:
        return container
    date = parse_published_date(published)
    return dated_cudnn(date) if date is not None else None
