"""The host CPU's vendor of a catalog server (topo/data/catalog/servers.toml ``cpu_vendor``).

NCCL prices its network overhead per step by the host's CPU (NVIDIA/nccl src/graph/tuning.cc getNetOverhead: 2 us
on AMD x86, 1 us on Intel and on every other CPU), so a spec's default profile depends on it
(:meth:`topo.engine.profiles.Profile.for_cpu`). The planner validates the same file (topo.plan.catalog_schema).
"""

from __future__ import annotations

import tomllib
from functools import lru_cache

from ..resources import data_dir

__all__ = ["CPU_VENDORS", "server_cpu_vendor"]

CPU_VENDORS = ("intel", "amd", "arm")


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
