"""Price sensitivity (tornado): cost per GPU-hour with each price alone at its low and high end (issue 32)."""

import pytest

from topo.plan import plan
from topo.plan.catalog import load_catalog
from topo.report.plan_figures import tornado_figure


def test_each_bar_is_the_plan_with_that_one_price_at_its_end():
    r = plan("dgx-h100-superpod", collectives=False)
    rows = {x["key"]: x for x in r.price_sensitivity}
    assert rows and all(x["low"] <= x["expected"] <= x["high"] for x in rows.values())
    widths = [x["high"] - x["low"] for x in r.price_sensitivity]
    assert widths == sorted(widths, reverse=True)  # widest first
    # the server price's high end (price_ranges.toml), set as a quote: the same cost per GPU-hour
    ends = {p["key"]: p for p in load_catalog().prices()}
    high = ends["servers.DGX H100.price_usd"]["high"]
    quoted = plan("dgx-h100-superpod", layers=[("t", {"servers": {"DGX H100": {"price_usd": high}}})],
                  collectives=False)
    assert rows["servers.DGX H100.price_usd"]["high"] == pytest.approx(quoted.ownership.cost_per_gpu_hour_usd)
    assert rows["servers.DGX H100.price_usd"]["expected"] == pytest.approx(r.ownership.cost_per_gpu_hour_usd)
    fig = tornado_figure([r])
    assert len(fig.data) == 2 and fig.data[1].customdata[-1] == pytest.approx(r.price_sensitivity[0]["high"])
    assert r.to_dict()["price_sensitivity"] == r.price_sensitivity
