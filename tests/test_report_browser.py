"""The report in a real browser: Debian's headless Chromium, driven by Selenium through chromedriver.

Opens the generated file (file://, no server), waits for the plots, and checks: no console errors, every section
drew an SVG plot with data, a hover shows a tooltip, nothing was fetched from the network, and spec names with
markup show as text. A screenshot of the whole page is saved in the test's temp folder. Skipped only where no
Chromium is installed (``.ci/run`` installs it: ``apt-get install chromium chromium-driver``).
"""

import time

import pytest

from conftest import run_cli, spec_dict, tier
from topo import spec_from_dict
from topo.report import build_spec_report, write_page
from topo.report.browser import find_chromium, full_page_png, load_report, open_browser

pytestmark = pytest.mark.skipif(find_chromium() is None,
                                reason="no Chromium here: apt-get install chromium chromium-driver "
                                       "(.ci/run installs them)")

PLOT_STATE = """
return Array.from(document.querySelectorAll('section')).map(function (sec) {
  return {id: sec.id, plots: Array.from(sec.querySelectorAll('div.plot')).map(function (el) {
    return {id: el.id, kind: el.getAttribute('data-figure'), traces: (el.data || []).length,
            svg: el.querySelectorAll('svg.main-svg').length,
            marks: el.querySelectorAll('.scatterlayer .trace path, .scatterlayer .trace text, .barlayer .point, '
                                       + '.boxlayer .trace path, .heatmaplayer image').length};
  })};
});
"""


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    drv = open_browser(1400, 1000, profile_dir=str(tmp_path_factory.mktemp("chromium-profile")))
    yield drv
    drv.quit()


@pytest.fixture(scope="module")
def default_report(tmp_path_factory):
    folder = tmp_path_factory.mktemp("report")
    run_cli("report", "-o", str(folder / "topo-report.html"), check=True)  # the default 100k-GPU cluster
    return folder / "topo-report.html"


def severe(logs):
    return [x for x in logs if x.get("level") == "SEVERE"]


def test_default_report_renders_in_chromium(browser, default_report, tmp_path):
    n = load_report(browser, default_report)
    # summary, fabric, oversubscription: 1 each (x1 spec) + 2 per link-load scenario (cluster, pod) and 2 per traffic
    # mix (3d-parallel, moe-alltoall) + 1 curve per scenario (2) + inventory = 13
    assert n == len(browser.find_elements("css selector", "div.plot")) == 13
    assert severe(browser.get_log("browser")) == []

    sections = browser.execute_script(PLOT_STATE)
    assert [s["id"] for s in sections] == ["summary", "fabric", "oversubscription", "loads", "curves"]
    for sec in sections:
        assert sec["plots"], f"section {sec['id']} has no plot"
        for p in sec["plots"]:
            assert p["svg"] >= 1 and p["traces"] >= 1 and p["marks"] >= 1, (sec["id"], p)

    # nothing but the file itself (and data: URLs) was loaded
    resources = browser.execute_script("return performance.getEntriesByType('resource').map(e => e.name)")
    assert [r for r in resources if not r.startswith(("file:", "data:", "blob:"))] == []

    (tmp_path / "report.png").write_bytes(full_page_png(browser, 1400, 0.6))
    assert (tmp_path / "report.png").stat().st_size > 50_000


def test_hover_shows_a_tooltip(browser, default_report):
    from selenium.webdriver.common.action_chains import ActionChains

    load_report(browser, default_report)
    plot = browser.find_element("css selector", 'div.plot[data-figure="oversubscription"]')
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", plot)
    bar = plot.find_elements("css selector", ".barlayer .point path")[0]
    ActionChains(browser).move_to_element(bar).perform()
    text = ""
    for _ in range(50):
        tips = plot.find_elements("css selector", ".hoverlayer .hovertext")
        if tips:
            text = tips[0].text
            break
        time.sleep(0.1)
    assert "down" in text and "PB/s" in text and "switches" in text, text
    assert severe(browser.get_log("browser")) == []


def test_markup_in_a_spec_shows_as_text(browser, tmp_path):
    spec = spec_from_dict(spec_dict(tiers=[tier("leaf", oversubscription=1, model="<b>leaf</b>"), tier("spine")],
                                    name='<script>alert("x")</script><img src=x onerror=alert(2)>'))
    page = tmp_path / "evil.html"
    write_page([build_spec_report(spec)], page)
    load_report(browser, page)
    h1 = browser.find_element("css selector", "h1").text
    assert '<script>alert("x")</script><img src=x onerror=alert(2)>' in h1
    assert browser.execute_script("return document.querySelectorAll('main img, header img').length") == 0
    titles = browser.execute_script(
        "return Array.from(document.querySelectorAll('.gtitle')).map(e => e.textContent)")
    assert any('<script>alert("x")</script>' in t for t in titles)
    cells = browser.execute_script("return Array.from(document.querySelectorAll('td')).map(e => e.textContent)")
    assert "<b>leaf</b>" in cells  # the switch model, as text
    assert severe(browser.get_log("browser")) == []  # no script ran, no image was requested
    from selenium.common.exceptions import NoAlertPresentException

    with pytest.raises(NoAlertPresentException):
        browser.switch_to.alert.text
