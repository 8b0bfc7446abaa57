"""Presentation: plotly figures and the self-contained HTML report (the only part of topo that imports plotly).

From Python (Jupyter), one function per figure, each returning a ``plotly.graph_objects.Figure``::

    import topo
    from topo.engine.estimate import estimate
    from topo.report import figures
    fabric = topo.build_fabric(topo.load_spec("dgx-h100-superpod"))
    figures.fabric_figure(fabric)
    figures.oversubscription_figure(topo.inventory(fabric))
    r = estimate(fabric, "all_reduce", ["8", "1G"])
    figures.collective_curves(r)
    figures.link_load_heatmap(r.link_loads(2**30), fabric)

or the whole page: ``write_page(build_reports(["h100-100k"]), "topo-report.html")``.
"""

from .build import SpecReport, build_reports, build_spec_report
from .figures import (busbw_comparison, collective_curves, fabric_figure, inventory_figure, link_load_distribution,
                      link_load_heatmap, oversubscription_figure)
from .html import render_page, write_page
from .link_summary import LoadSummary, summarize_loads
from .region import region_figure, write_region_page

__all__ = ["build_reports", "build_spec_report", "SpecReport", "render_page", "write_page", "inventory_figure", "fabric_figure",
           "oversubscription_figure", "link_load_distribution", "link_load_heatmap", "collective_curves",
           "busbw_comparison", "summarize_loads", "LoadSummary", "region_figure", "write_region_page"]
