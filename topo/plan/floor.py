"""The floor plan: racks, rows and halls, where each switch sits, and from that the length and medium of every
scale-out link.

Placement (all distances from :mod:`topo.plan.catalog`'s ``layout`` values, every one an assumption):

- servers fill racks in order, ``servers_per_rack`` each (checked against ``rack_power_W``); a scalable unit
  fills one row of racks; a pod fills ``units_per_pod`` rows plus one network row; ``pods_per_hall`` pods share a
  hall; halls stand side by side, ``hall_spacing_m`` apart;
- leaves: inside the server rack when the unit fits in one rack (top of rack), otherwise in a network rack at the
  end of the unit's row; spines: in the pod's network row, half-way along it; a third tier: in a central
  network room in front of the middle hall;
- a link's length is the Manhattan distance between its ends plus ``slack_m`` (inside one rack: half the slack);
- medium: copper (DAC) up to the DAC's reach, multimode up to the multimode optics' reach, single-mode beyond
  (:func:`media`).

Everything is numpy over the fabric's link table: no loop per GPU or per link.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..errors import TopoError
from ..fabric.fabric import LEVEL_NIC, Fabric
from .catalog import Catalog

__all__ = ["Floor", "floor_plan", "MEDIA"]

MEDIA = ("copper", "multimode", "single_mode")


@dataclass(frozen=True)
class Floor:
    """Where everything sits, and the length of every scale-out link (``lengths_m``, indexed like the fabric's
    links from the NIC block on: ``fabric.links[...][first_link:]``)."""

    servers_per_rack: int
    server_racks: int
    network_racks: int
    racks_per_row: int
    rows: int
    halls: int
    rack_power_W: float
    server_power_W: float
    leaf_placement: str  # "top_of_rack" or "end_of_row"
    rack_load_W: float  # a full rack: its servers and its own switches (NVLink switch trays)
    first_link: int
    lengths_m: np.ndarray
    levels: np.ndarray

    def to_dict(self) -> dict:
        return {k: getattr(self, k) for k in ("servers_per_rack", "server_racks", "network_racks",
                                               "racks_per_row", "rows", "halls", "rack_power_W",
                                               "server_power_W", "leaf_placement", "rack_load_W")}


def floor_plan(fabric: Fabric, catalog: Catalog, server_power_W: float, servers_per_rack: int | None = None,
               rack_power_W: float | None = None, rack_extra_W: float = 0.0, leaf_in_rack: bool = True) -> Floor:
    """Place racks, rows and halls for ``fabric`` and measure every scale-out link.

    A rack-scale server (a GB200 NVL72 compute tray) brings its own ``servers_per_rack`` and ``rack_power_W`` (they
    replace the layout's) and ``rack_extra_W``, the power of the rack's own switches (its NVLink switch trays),
    which the rack's budget must also hold; ``leaf_in_rack=False`` (a full NVL72 rack) puts the leaves at the end of
    the row even when a unit fits one rack.

    Raises
    ------
    TopoError
        ``plan.layout.servers_per_rack``: a rack cannot hold one server (its power budget is below one server's),
        or the servers do not fit the rack's power budget.
    """
    lay = catalog.layout
    L = fabric.layout
    spr = int(servers_per_rack if servers_per_rack is not None else lay.servers_per_rack.value)
    rack_W = rack_power_W if rack_power_W is not None else lay.rack_power_W.value
    if server_power_W + rack_extra_W > rack_W:
        raise TopoError(f"a rack of {rack_W:,.0f} W cannot hold one server of {server_power_W:,.0f} W"
                        + (f" and its {rack_extra_W:,.0f} W of rack switches" if rack_extra_W else "")
                        + "; raise rack_power_W or lower the server's power", key="plan.layout.rack_power_W")
    if spr * server_power_W + rack_extra_W > rack_W:
        raise TopoError(f"{spr} servers of {server_power_W:,.0f} W"
                        + (f" and {rack_extra_W:,.0f} W of rack switches" if rack_extra_W else "")
                        + f" need {spr * server_power_W + rack_extra_W:,.0f} W, more than rack_power_W = "
                        f"{rack_W:,.0f} W; at most {int((rack_W - rack_extra_W) // server_power_W)} fit",
                        key="plan.layout.servers_per_rack")
    spu, upp, pph = L.servers_per_unit, L.units_per_pod, int(lay.pods_per_hall.value)
    tor = spu <= spr and leaf_in_rack
    racks_per_row = math.ceil(spu / spr) + (0 if tor else 1)
    w, pitch, slack = lay.rack_width_m.value, lay.row_pitch_m.value, lay.slack_m.value
    row_len = racks_per_row * w
    hall_dx = row_len + lay.hall_spacing_m.value
    halls = math.ceil(L.num_pods / pph)
    rows_per_pod = upp + (1 if L.num_tiers > 1 else 0)

    def unit_xy(unit):
        pod = unit // upp
        hall, q = pod // pph, pod % pph
        return hall * hall_dx, (q * rows_per_pod + unit % upp) * pitch

    def pod_net_xy(pod):
        hall, q = pod // pph, pod % pph
        return hall * hall_dx + row_len / 2, (q * rows_per_pod + upp) * pitch

    core_xy = ((halls - 1) * hall_dx / 2 + row_len / 2, -2 * pitch)

    nodes, links = fabric.nodes, fabric.links
    start = fabric.link_offset["nic"]
    src, dst, level = links["src"][start:], links["dst"][start:], links["level"][start:]
    lengths = np.empty(len(src))

    # NIC -> leaf: the server's rack to the leaf's rack
    nic = level == LEVEL_NIC
    server = nodes["server"][src[nic]]
    rack_in_row = (server % spu) // spr
    if tor:
        lengths[nic] = slack / 2
    else:
        lengths[nic] = (racks_per_row - 1 - rack_in_row) * w + slack

    # switch positions per tier (x, y); the top tier of a 3-tier fabric sits in the central room
    def switch_xy(node_ids, tier):
        if tier == 0:
            ux, uy = unit_xy(nodes["unit"][node_ids].astype(np.int64))
            return ux + (row_len - w if not tor else 0.0), uy
        if tier == 1 and L.num_pods >= 1 and nodes["pod"][node_ids].min() >= 0:
            return pod_net_xy(nodes["pod"][node_ids].astype(np.int64))
        return np.full(len(node_ids), core_xy[0]), np.full(len(node_ids), core_xy[1])

    for t in L.tiers[1:]:
        sel = level == LEVEL_NIC + t.index
        if not sel.any():
            continue
        ax, ay = switch_xy(src[sel], t.index - 1)
        bx, by = switch_xy(dst[sel], t.index)
        lengths[sel] = np.abs(ax - bx) + np.abs(ay - by) + slack
    server_racks = math.ceil(spu / spr) * L.num_units
    network_racks = (0 if tor else L.num_units) + (L.num_pods if L.num_tiers > 1 else 0)
    return Floor(servers_per_rack=spr, server_racks=server_racks, network_racks=network_racks,
                 racks_per_row=racks_per_row, rows=L.num_pods * rows_per_pod, halls=halls, rack_power_W=rack_W,
                 server_power_W=server_power_W, leaf_placement="top_of_rack" if tor else "end_of_row",
                 rack_load_W=spr * server_power_W + rack_extra_W,
                 first_link=start, lengths_m=lengths, levels=level.copy())
