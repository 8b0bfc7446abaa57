"""Small fabrics of every kind and shape, for tests that check routing against an oracle (networkx, per-pair
routing). Each is a few hundred GPUs at most, so every pair can be routed and every path walked."""

from __future__ import annotations

from conftest import spec_dict, tier
from topo import build_fabric, spec_from_dict


def _three(kind, radix=8, spine_os=1, gpus=4, nics=4, pods=2, upp=2, spu=None, **kw):
    tiers = [tier("leaf", radix=radix, oversubscription=1), tier("spine", radix=radix, oversubscription=spine_os),
             tier("core", radix=radix)]
    d = spec_dict(kind=kind, tiers=tiers, cluster={"num_pods": pods},
                  server={"gpus": gpus, "nics": nics, "nic_rate": "400 Gb/s"},
                  scale_up={"gpus_per_domain": kw.pop("gpd", gpus)}, **kw)
    d["fabric"]["units_per_pod"] = upp
    if spu:
        d["fabric"]["servers_per_unit"] = spu
    return d


def _two(kind, radix=16, leaf_os=1, gpus=4, nics=4, units=2, spu=None, gpd=None):
    d = spec_dict(kind=kind, tiers=[tier("leaf", radix=radix, oversubscription=leaf_os), tier("spine", radix=radix)],
                  cluster={"num_units": units}, server={"gpus": gpus, "nics": nics, "nic_rate": "400 Gb/s"},
                  scale_up={"gpus_per_domain": gpd or gpus})
    if spu:
        d["fabric"]["servers_per_unit"] = spu
    return d


def _deep(kind, num_tiers, radix=8, gpus=2, nics=2, spu=2, joins=2, os_tier=None, os=2, blocks=2, **kw):
    """``num_tiers`` tiers of ``radix``-port switches, each tier above the leaves joining ``joins`` blocks of the
    tier below (the top: ``blocks``); tier ``os_tier`` (if any) oversubscribed ``os``:1, the others 1:1."""
    tiers = []
    for i in range(num_tiers):
        t = tier(("leaf", "spine", "core", "super", "hyper", "apex")[i], radix=radix)
        if i < num_tiers - 1:
            t["oversubscription"] = os if i == os_tier else 1
        if 0 < i < num_tiers - 1:
            t["joins"] = joins
        tiers.append(t)
    units = blocks * joins ** (num_tiers - 2)
    d = spec_dict(kind=kind, tiers=tiers, cluster={"num_units": units},
                  server={"gpus": gpus, "nics": nics, "nic_rate": "400 Gb/s"},
                  scale_up={"gpus_per_domain": kw.pop("gpd", gpus)}, **kw)
    d["fabric"]["servers_per_unit"] = spu
    return d


SPECS = {
    "rail_optimized-2": _two("rail_optimized"),
    "rail_optimized-2-os2": _two("rail_optimized", leaf_os=2, spu=4),
    "fat_tree-2": _two("fat_tree", spu=2),
    "rail_only-2": _two("rail_only"),
    "rail_optimized-3": _three("rail_optimized", radix=16, spu=2),
    "fat_tree-3": _three("fat_tree", spu=1),
    "rail_only-3": _three("rail_only"),
    "rail_optimized-3-os2": _three("rail_optimized", spine_os=2, radix=12),
    # fewer NICs than GPUs (2 GPUs share a NIC) and more (2 NICs per GPU)
    "rail_optimized-2-shared-nic": _two("rail_optimized", gpus=4, nics=2),
    "rail_optimized-3-two-nics-per-gpu": _three("rail_optimized", gpus=2, nics=4, radix=16, spu=2),
    "fat_tree-3-two-nics-per-gpu": _three("fat_tree", gpus=2, nics=4, spu=1),
    # an NVLink domain of two servers (NVL-rack-like)
    "rail_optimized-2-domain-of-2-servers": _two("rail_optimized", gpus=4, nics=4, gpd=8, spu=2, units=4),
    # any depth: 4 and 5 tiers (islands of pods of units), oversubscribed at one tier above the pods
    "rail_optimized-4": _deep("rail_optimized", 4),
    "rail_optimized-4-os2": _deep("rail_optimized", 4, radix=12, os_tier=2),
    "fat_tree-4": _deep("fat_tree", 4, spu=1),
    "rail_only-4": _deep("rail_only", 4),
    "rail_optimized-5": _deep("rail_optimized", 5),
}


def small_fabric(name: str):
    return build_fabric(spec_from_dict(SPECS[name]))
