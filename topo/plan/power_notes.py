"""What a plan says beside its power figures (issue 32): how its storage was sized against Llama 3's per-GPU ratio,
where its PUE came from, and that energy, CO2 and water use the servers' average draw while the site is sized on
their nameplate."""

from __future__ import annotations

import math

from ..units import count_noun, format_in, format_time
from .catalog import Catalog
from .power import PowerBreakdown
from .storage import StoragePlan

__all__ = ["storage_scale_note", "cooling_note", "power_notes"]


def power_notes(cat: Catalog, store: StoragePlan, pw: PowerBreakdown, num_gpus: int, cooling: str) -> list[str]:
    """Notes on the storage's sizing, the PUE's source and average against nameplate draw.

    Parameters
    ----------
    cat : the plan's catalog.
    store : its storage.
    pw : its power.
    num_gpus : its GPUs.
    cooling : its halls' cooling type.
    """
    notes = []
    if store.sizing == "needs":
        n = math.ceil(num_gpus * cat.economics.storage_servers_per_gpu.value - 1e-9)
        # Llama 3's count is of its own (Tectonic) servers, so their power is that kind's, not the chosen kind's
        each = cat.storage.kinds.get("tectonic", cat.storage.server).power_W.value
        power = format_in(store.power_W, 'MW', ',.2f') if store.power_W >= 1e4 else format_in(store.power_W, 'kW', ',.1f')
        notes.append(f"storage sized from its checkpoint and dataset needs ({count_noun(store.servers, 'server')}, "
                     f"{power}, {count_noun(store.racks, 'rack')} in a storage room): Llama 3's servers "
                     f"per GPU (storage.sizing = \"per_gpu\") would give {n:,} of its servers, {format_in(n * each, 'MW', ',.2f')}; "
                     "their power is in IT power and their floor in the floor's total, no longer a flat share of "
                     "server power")
    where = ("facility.pue (it replaces the cooling type's)" if pw.pue_source == "facility.pue" else
             f"the {cooling.replace('_', ' ')} cooling's (cooling.toml; set facility.pue to replace it: "
             "SemiAnalysis' 1.59 TWh a year for its 100,000 H100 at 141.7 MW of IT load implies 1.281 at full "
             "draw)")
    notes.append(f"PUE {pw.pue:g} from {where}; energy, its cost, CO2 and water at the servers' average draw "
                 f"({100 * pw.server_average_fraction:.1f}% of nameplate, facility.server_average_fraction), "
                 f"{format_in(pw.average_facility_power_W, 'MW', ',.2f')} of facility power; the UPS, generators, halls and build cost on nameplate, "
                 f"{format_in(pw.facility_power_W, 'MW', ',.2f')}")
    return notes


def storage_scale_note(cat: Catalog, store: StoragePlan, num_servers: int) -> list[str]:
    """A note when the storage servers outnumber the compute servers (walk28: 124 for a lab's 32), naming
    ``plan.storage.kind`` and the other kinds (storage.toml), else none.

    Parameters
    ----------
    cat : the plan's catalog (its storage kinds).
    store : its storage.
    num_servers : its compute servers.
    """
    if store.servers <= num_servers:
        return []
    others = [k for k in cat.storage.kinds if k != store.kind]
    need = {"bandwidth": f"a checkpoint in {format_time(store.write_budget_s, zeros=False)} (storage.write_budget_s)",
            "capacity": "the checkpoints and the dataset (storage.checkpoints_kept, the workload's tokens)",
            "per_gpu": "storage.servers_per_gpu"}[store.limit]
    return [f"{store.servers:,} storage servers for {num_servers:,} compute servers: {store.kind or 'the default'}'s "
            f"(plan.storage.kind) count for {need}; another kind writes more a server "
            f"(--set plan.storage.kind={' or '.join(others)}, storage.toml)" if others else
            f"{store.servers:,} storage servers for {num_servers:,} compute servers, for {need}"]


def cooling_note(cat: Catalog, cooling: str, rack_load_W: float, server_cooling: str) -> list[str]:
    """A note when the halls' cooling is more than ``plan.floor.cooling`` names (the servers or the racks' load need
    more: never less than they need), else none.

    Parameters
    ----------
    cat : the plan's catalog (``floor.cooling`` and each type's ``max_rack_W``).
    cooling : the halls' cooling type (:func:`topo.plan.floor.floor_plan`).
    rack_load_W : a full server rack's load.
    server_cooling : the least cooling the servers need (the server entry's ``cooling``).
    """
    named = cat.floor.cooling
    if named in ("auto", cooling):
        return []
    limit_W = getattr(cat.cooling, named).max_rack_W.value
    why = (f"the servers need {server_cooling.replace('_', ' ')}" if rack_load_W <= limit_W else
           f"a rack of {format_in(rack_load_W, 'kW', ',.1f')} is beyond its {format_in(limit_W, 'kW', ',.0f')}")
    return [f"plan.floor.cooling = \"{named}\" is less than the halls need ({why}): they have "
            f"{cooling.replace('_', ' ')} cooling"]
