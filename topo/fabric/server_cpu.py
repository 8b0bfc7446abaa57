"""The host CPU: the vendor of a catalog server (topo/data/catalog/servers.toml ``cpu_vendor``) and the named host
CPUs a spec may give as ``server.host_cpu`` (topo/data/compute/host_cpu.toml ``[cpu]``, each with its vendor; the
GPU's catalog server's CPU is its ``[gpu]`` table).

NCCL prices its network overhead per step by the host's CPU (NVIDIA/nccl src/graph/tuning.cc getNetOverhead: 2 us
on AMD x86, 1 us on Intel and on every other CPU), so a spec's default profile depends on it
(:meth:`topo.engine.profiles.Profile.for_cpu`). The planner validates the same file (topo.plan.catalog_schema).
"""

from __future__ import annotations

import tomllib
from functools import lru_cache

from ..resources import data_dir

__all__ = ["CPU_VENDORS", "default_host_cpu", "host_cpu_names", "host_cpu_table", "host_cpu_vendor",
           "server_cpu_vendor"]

CPU_VENDORS = ("intel", "amd", "arm")


@lru_cache(maxsize=None)
def host_cpu_table() -> dict:
    """topo/data/compute/host_cpu.toml as read (cached).

    Returns
    -------
    dict
        ``reference``: the CPU the time factors are relative to; ``[cpu]``: the named CPUs (``vendor``,
        ``time_factor`` and its range, status, source); ``[gpu]``: each GPU's default CPU.
    """
    with open(data_dir("compute", "host_cpu.toml"), "rb") as f:
        return tomllib.load(f)


def host_cpu_names() -> tuple[str, ...]:
    """The host CPUs a spec may name.

    Returns
    -------
    tuple of str
        The keys of host_cpu.toml's ``[cpu]``, in the file's order.
    """
    return tuple(host_cpu_table()["cpu"])


def host_cpu_vendor(cpu: str) -> str:
    """The vendor of a named host CPU.

    Parameters
    ----------
    cpu : str
        A key of host_cpu.toml's ``[cpu]`` (``xeon_8480c``, ``grace``, ...).

    Returns
    -------
    str
        ``intel``, ``amd`` or ``arm`` (:data:`CPU_VENDORS`).

    Raises
    ------
    KeyError
        ``cpu`` is not in the table.
    """
    return host_cpu_table()["cpu"][cpu]["vendor"]


def default_host_cpu(gpu: str) -> str:
    """The host CPU of ``gpu``'s catalog server (a key of host_cpu.toml's ``[cpu]``).

    Parameters
    ----------
    gpu : str
        A GPU model as the compute catalog names it (``H100``, ``GB200``).

    Returns
    -------
    str
        The CPU's key (``xeon_8480c``, ``xeon_8570``, ``grace``, ...).

    Raises
    ------
    KeyError
        ``gpu`` has no host CPU in the table (every GPU of the compute catalog has one: a test checks it).
    """
    gpus = host_cpu_table()["gpu"]
    if gpu.upper() not in gpus:
        raise KeyError(f"host_cpu.toml: gpu: no host CPU for {gpu!r}; known: {', '.join(gpus)}")
    return gpus[gpu.upper()]


@lru_cache(maxsize=None)
def _servers() -> dict:
    with open(data_dir("catalog", "servers.toml"), "rb") as f:
        return {k: v for k, v in tomllib.load(f).items() if isinstance(v, dict)}


def server_cpu_vendor(gpu: str, server_model: str | None = None) -> str | None:
    """The CPU vendor of the catalog server ``server_model``, else of the first catalog server holding ``gpu``.

    Parameters
    ----------
    gpu : str
        A GPU model (``H100``, ``GB200``).
    server_model : str, optional
        A catalog server's name (a spec's ``[plan] server_model``), any case.

    Returns
    -------
    str or None
        ``intel``, ``amd`` or ``arm``; None when no catalog server matches.
    """
    servers = _servers()
    if server_model:
        name = next((k for k in servers if k.upper() == server_model.upper()), None)
        if name is not None:
            return servers[name]["cpu_vendor"]["value"]
    row = next((v for v in servers.values() if str(v.get("gpu", "")).upper() == gpu.upper()), None)
    return None if row is None else row["cpu_vendor"]["value"]
