"""``topo plan --bom-csv``: the bill of materials of one or several designs, or of a region's sites and DCI, as
CSV."""

from __future__ import annotations

import csv

from .. import __version__
from ..atomic import SIGNATURE
from ..plan import PlanResult
from ..plan.region import RegionPlan

__all__ = ["BOM_CSV_COLUMNS", "write_bom_csv", "write_region_bom_csv"]

BOM_CSV_COLUMNS = ("design", "kind", "where", "item", "length_class", "count", "power_W_each", "price_usd_each",
                   "price_usd", "length_m", "written_by")


def _plan_rows(design: str, r: PlanResult, by: str) -> list[list]:
    """The switch, transceiver and cable lines of one plan (cables per length class)."""
    rows = [[design, "switch", s.tier, s.model, "", s.count, f"{s.power_W_each:g}", f"{s.price_usd_each:g}",
             f"{s.count * s.price_usd_each:.2f}", "", by] for s in r.bom.switches]
    rows += [[design, "transceiver", t.at, t.type, "", t.count, f"{t.power_W_each:g}", f"{t.price_usd_each:g}",
              f"{t.count * t.price_usd_each:.2f}", "", by] for t in r.bom.transceivers]
    rows += [[design, "cable", c.level, c.type, c.length_class, c.count, f"{c.power_W / c.count:g}" if c.count
              else "0", f"{c.price_usd / c.count:.2f}" if c.count else "0", f"{c.price_usd:.2f}", f"{c.length_m:.1f}",
              by] for c in r.bom.cables]
    return rows


def _write(rows: list[list], fh) -> None:
    w = csv.writer(fh, lineterminator="\n")
    w.writerow(BOM_CSV_COLUMNS)
    w.writerows(rows)


def write_bom_csv(results: list[PlanResult], fh) -> None:
    """Write the bills of materials of ``results`` as CSV.

    Parameters
    ----------
    results : list of PlanResult
        One per design; each row names its design.
    fh : text file
        Where to write (opened by :func:`topo.atomic.open_output`, so the file appears whole or not at all).

    Notes
    -----
    One row per switch, transceiver and cable line (columns :data:`BOM_CSV_COLUMNS`; cables per length class); the
    header is the first line, so ``pandas.read_csv(path)`` and spreadsheets open it as it is. Provenance is a
    column, ``written_by`` (``written by topo <version>`` on every row), which also marks the file as topo's.
    """
    by = f"{SIGNATURE} {__version__}"
    _write([row for r in results for row in _plan_rows(r.name, r, by)], fh)


def write_region_bom_csv(r: RegionPlan, fh) -> None:
    """Write a region's bill of materials as CSV: every site's lines, then every DCI span's.

    Parameters
    ----------
    r : RegionPlan
        The region's plan (its ``site_plans``: every site's own plan, alike sites planned once but listed each).
    fh : text file
        Where to write (as :func:`write_bom_csv`).

    Notes
    -----
    The columns of :func:`write_bom_csv`. A site's rows name the site as their design; a span's rows have design
    ``dci``, kind ``dci``, where the span's name, and one row per line of its bill
    (:func:`topo.plan.dci.span_items`: coherent modules, line amplifiers, amplifier huts, muxes; fibre pairs with
    the route's length), and a row per line a site's full attach tier adds for its DCI ports (where ``SITE:TIER``:
    :mod:`topo.plan.dci_ports`). Their prices sum to the sites' switches, optics and cables and the DCI's equipment
    and fibre.
    """
    by = f"{SIGNATURE} {__version__}"
    rows = [row for site, p in zip(r.sites, r.site_plans) for row in _plan_rows(site.name, p, by)]
    rows += [["dci", "dci", span.name, i.item, "", i.count, f"{i.power_W_each:g}", f"{i.price_usd_each:g}",
              f"{i.count * i.price_usd_each:.2f}", f"{i.length_m:.1f}" if i.length_m else "", by]
             for span in r.dci.spans for i in span.items]
    rows += [["dci", "dci", f"{p['site']}:{p['attach_tier']}", i["item"], "", i["count"], f"{i['power_W_each']:g}",
              f"{i['price_usd_each']:g}", f"{i['count'] * i['price_usd_each']:.2f}", "", by]
             for p in r.dci.site_ports for i in p["items"]]  # each site's DCI/border switches and modules
    _write(rows, fh)
