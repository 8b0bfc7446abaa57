"""The sourced inputs a plan used beyond the GPUs, switches and optics, with their sources and status: the floor, the
cooling chosen, the server's NIC optics, the facility's capex basis, the economics (TCO, CO2, storage,
front-end), the checkpoint and reliability inputs and the storage's. ``topo plan --json`` carries them under ``inputs``, the
report shows them in its plan section."""

from __future__ import annotations

from ..fabric.fabric import Fabric
from .catalog import Catalog

__all__ = ["used_assumptions", "inputs_used"]


def _rows(prefix: str, obj) -> list[dict]:
    rows = []
    for name in type(obj).model_fields:
        v = getattr(obj, name)
        if hasattr(v, "status") and hasattr(v, "value"):
            rows.append({"key": f"{prefix}.{name}", "value": v.value, "source": v.source, "status": v.status})
        elif isinstance(v, str):
            rows.append({"key": f"{prefix}.{name}", "value": v, "source": "catalog choice", "status": "assumption"})
    return rows


def inputs_used(catalog: Catalog, fabric: Fabric, server_model: str, cooling: str) -> list[dict]:
    """Rows of ``{key, value, source, status}`` for the floor, cooling, NIC optics, facility basis, economics,
    checkpoint, reliability and storage values a plan used."""
    server = catalog.servers[server_model]
    rows = [{"key": f"servers.{server_model}.nic_module_ports", "value": server.nic_module_ports.value,
             "source": server.nic_module_ports.source, "status": server.nic_module_ports.status}]
    rows += _rows("floor", catalog.floor)
    rows += _rows(f"cooling.{cooling}", getattr(catalog.cooling, cooling))
    rows += [r for r in _rows("facility", catalog.facility) if r["key"].startswith(
        ("facility.capex", "facility.pue", "facility.frontend_fraction", "facility.server_average_fraction"))]
    rows += _rows("economics", catalog.economics)
    rows += _rows("reliability.checkpoint", catalog.reliability.checkpoint)
    rows += _rows("storage", catalog.storage) + _rows(f"storage.kinds.{catalog.storage.kind}", catalog.storage.server)
    rows.append({"key": "reliability.optics", "value": catalog.reliability.optics,
                 "source": "topo/data/catalog/reliability.toml: 'table' keeps Llama 3's observed network row; "
                           "'parts' replaces it by the NIC-side modules at their MTTF", "status": "assumption"})
    rows += [r for r in _rows("deployment", catalog.deployment) if r["key"].startswith("deployment.ramp")]
    t = catalog.workload.tokens_per_param
    rows.append({"key": "workload.tokens_per_param", "value": t.value, "source": t.source, "status": t.status})
    return rows


def used_assumptions(rows: list[dict], items: dict[str, set[str]]) -> list[dict]:
    """The assumption and override rows (:meth:`Catalog.assumptions`) a plan rests on: of the named parts (gpus,
    servers, switches, transceivers, cables), only those in ``items`` (kind -> names used); of the price ranges,
    the defaults and the ranges of used parts; of the storage server kinds, those in ``items["storage.kinds"]`` if
    given; every other kind (floor, facility, cooling, economics, reliability, workload) whole."""
    prefixes = tuple(f"{kind}.{name}." for kind, names in items.items() for name in names)

    def used(key: str) -> bool:
        if key.startswith("storage.kinds.") and "storage.kinds" in items:  # only the chosen storage server's kind
            return key.startswith(tuple(f"storage.kinds.{k}." for k in items["storage.kinds"]))
        kind = key.split(".", 1)[0]
        if kind == "price_ranges":
            rest = key.split(".", 2)[2] if key.startswith("price_ranges.ranges.") else ""
            return not rest or rest.startswith(prefixes) or rest.split(".", 1)[0] not in items
        return kind not in items or key.startswith(prefixes)

    return [r for r in rows if used(r["key"])]
