"""NCCL's NVLS buffers per GPU: what a communicator holds once its tuner has run a collective as NVLS or NVLSTree.

NCCL allocates one NVLS buffer per communicator, at the first collective it runs as NVLS or NVLSTree, and keeps it
for the run (NVIDIA/nccl v2.30.7-1 ``src/transport/nvls.cc`` ``ncclNvlsBufferSetup``): ``nvlsChannels x 2 x
(nvlsChunkSize x NCCL_STEPS) x nHeads`` bytes on every GPU of it. Which communicators hold it is topo's own
algorithm choice per collective and size (:class:`topo.training.comm.CommEngine`, the step's
:class:`~topo.training.result.DimensionComm` ``algorithm``): NVLS only runs where the NVSwitch reduces in the switch
(Hopper and Blackwell NVSwitch systems; never A100 or PCIe), and an engine told ``^nvls,nvls_tree``
(NCCL_NVLS_ENABLE=0) never chooses it. The channels, chunk, steps and most heads are the NCCL profile's
(:class:`topo.engine.profiles.Profile`); Blackwell inside one NVLink domain runs 24 channels, and the reduce and
broadcast halves double the buffer (``topo/data/compute/nvls_buffers.toml``). The heads are the communicator's
ranks in one NVLink domain (NCCL's node, an NVL72 rack's MNNVL clique), at most ``nvls_max_heads``: NCCL forces one
per GPU inside a node (``src/graph/search.cc``: "Force intra-node NVLS algorithm to pull evenly from all GPUs") and
takes one per NIC across nodes, which on the runs' one-NIC-per-GPU systems is the same count
(:func:`topo.engine.algorithms.nvls.nvls_heads`).
"""

from __future__ import annotations

import tomllib
from functools import lru_cache

from ..engine.collectives import algorithm_candidates
from ..errors import TopoError
from ..resources import data_dir

__all__ = ["NVLS_FAMILIES", "NO_NVLS", "nvls_constants", "nvls_buffer_bytes", "release_nvls_enabled",
           "step_nvls_bytes", "may_run_nvls", "nvls_bound_bytes"]

NVLS_FAMILIES = ("nvls", "nvls_tree")
"""The algorithms (``DimensionComm.algorithm``) that run on NCCL's NVLS buffer."""

NO_NVLS = "^" + ",".join(NVLS_FAMILIES)
"""A :class:`~topo.training.comm.CommEngine` ``algorithm`` that never runs NVLS (NCCL_NVLS_ENABLE=0)."""


@lru_cache(maxsize=None)
def nvls_constants() -> dict[str, float]:
    """``nvls_buffers.toml``'s values by key."""
    table = tomllib.loads((data_dir("compute") / "nvls_buffers.toml").read_text(encoding="utf-8"))
    return {k: float(v["value"]) for k, v in table.items()}


@lru_cache(maxsize=1)
def _env_table() -> dict:
    return tomllib.loads((data_dir("compute") / "nccl_env_releases.toml").read_text(encoding="utf-8"))


def release_nvls_enabled(software: str, source_url: str = "") -> bool:
    """Whether NCCL may run NVLS for a published run: False where its launcher exports NCCL_NVLS_ENABLE=0
    (``topo/data/compute/nccl_env_releases.toml``: a ``[release]`` matches a software string that starts with its
    name, a ``[launcher]`` a source address that contains its key), else True (NCCL's default).

    Parameters
    ----------
    software : str
        The run's software string (``"NeMo 25.04.01 (DGXC 25.05.04)"``).
    source_url : str, optional
        The run's source address (an MLPerf results directory at its commit, a model zoo at its commit).

    Returns
    -------
    bool
    """
    text, url = (software or "").strip(), source_url or ""
    table = _env_table()
    entries = [e for name, e in table.get("release", {}).items() if text.startswith(name)]
    entries += [e for key, e in table.get("launcher", {}).items() if key in url]
    return all(e["nvls_enable"] for e in entries)


def nvls_buffer_bytes(profile, generation: str, ranks_per_domain: int, domains: int) -> float:
    """Bytes of one communicator's NVLS buffer on each of its GPUs (see the module doc).

    Parameters
    ----------
    profile : Profile
        The NCCL profile (``nvls_channels``, ``nvls_chunk_bytes``, ``steps_in_flight``, ``nvls_max_heads``).
    generation : str
        The GPU generation (``blackwell`` runs fewer channels inside one NVLink domain).
    ranks_per_domain : int
        The communicator's ranks in one NVLink domain.
    domains : int
        NVLink domains the communicator spans (NCCL's nodes).

    Returns
    -------
    float
        Bytes per GPU; 0 when the profile has no NVLS channels or chunk.
    """
    k = nvls_constants()
    channels = profile.nvls_channels
    if generation == "blackwell" and domains <= 1:
        channels = int(k["blackwell_one_domain_channels"])
    heads = min(ranks_per_domain, profile.nvls_max_heads) if profile.nvls_max_heads else ranks_per_domain
    step_bytes = profile.nvls_chunk_bytes * profile.steps_in_flight
    return float(channels * k["directions"] * step_bytes * heads)


def may_run_nvls(collective: str, algorithm: str) -> bool:
    """Whether an engine told ``algorithm`` (:class:`~topo.training.comm.CommEngine`) may run ``collective`` as NVLS
    or NVLSTree: one of them is among the candidates it chooses from
    (:func:`topo.engine.collectives.algorithm_candidates`, as the engine reads it; under ``auto`` NCCL's, where only
    the all-reduce has NVLS). An algorithm the collective does not have: True (the caller counts it, to be safe).

    Parameters
    ----------
    collective, algorithm : str

    Returns
    -------
    bool
    """
    got = _MAY_RUN.get((collective, algorithm))
    if got is None:
        try:
            _, names = algorithm_candidates(collective, algorithm)
        except TopoError:
            names = list(NVLS_FAMILIES)
        got = _MAY_RUN[(collective, algorithm)] = any(n in NVLS_FAMILIES for n in names)
    return got


_MAY_RUN: dict[tuple[str, str], bool] = {}  # a search asks ~1M times for a few collectives and one algorithm


def nvls_bound_bytes(profile, generation: str, gpus_per_domain: int, communicators: int) -> float:
    """At least the NVLS buffer bytes per GPU of ``communicators`` communicators that may run NVLS
    (:func:`step_nvls_bytes` counts one buffer per communicator): each at :func:`nvls_buffer_bytes`' most for a
    group with ``gpus_per_domain`` ranks in a domain (a group holds no more in one domain, and the heads grow with
    them), in one domain or across several (Blackwell's channels differ), whichever holds more.

    Parameters
    ----------
    profile : Profile
    generation : str
    gpus_per_domain : int
        GPUs of one NVLink domain.
    communicators : int
        Communicators that may run NVLS (:func:`topo.training.step.nvls_communicators`).

    Returns
    -------
    float
    """
    if communicators <= 0:
        return 0.0
    one = max(nvls_buffer_bytes(profile, generation, gpus_per_domain, d) for d in (1, 2))
    return float(communicators * one)


def step_nvls_bytes(profile, generation: str, comms) -> float:
    """Bytes of NVLS buffers one GPU holds for a step's collectives: one buffer for each communicator (a dimension's
    groups: ``dim``, ``group_size``, ``num_groups``) whose collectives run at least once as NVLS or NVLSTree.

    Parameters
    ----------
    profile : Profile
    generation : str
    comms : iterable of DimensionComm
        The step's collectives with the algorithm topo chose for each.

    Returns
    -------
    float
    """
    held = {}
    for c in comms:
        if c.algorithm in NVLS_FAMILIES and c.group_size > 1:
            domains = max(1, c.domains_per_group)
            held[(c.dim, c.group_size, c.num_groups)] = nvls_buffer_bytes(
                profile, generation, c.group_size // domains, domains)
    return float(sum(held.values()))
