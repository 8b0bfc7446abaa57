"""Open a report in a real, headless Chromium (Debian's ``chromium`` and ``chromium-driver``, driven by Selenium):
for the browser test and for the README's screenshot. Nothing is downloaded: the browser and its driver must be
installed (``apt-get install chromium chromium-driver``) and Selenium is told their paths.

Regenerate the README's screenshot (the default 100k-GPU report)::

    python -m topo.report.browser docs/report.png
"""

from __future__ import annotations

import argparse
import base64
import shutil
import sys
import tempfile
import time
from pathlib import Path

from ..units import format_in
from .build import build_reports
from .files import sign_image, write_bytes
from .html import write_page

__all__ = ["find_chromium", "open_browser", "load_report", "full_page_png", "FLAGS"]

# Headless, and nothing that phones home (this machine's network is closed; these also keep a report honest).
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage")


def find_chromium() -> tuple[str, str] | None:
    """Paths of the Chromium binary and its ChromeDriver, or None if either is missing."""
    browser = next((p for p in (shutil.which("chromium"), "/usr/bin/chromium", shutil.which("chromium-browser"))
                    if p and Path(p).exists()), None)
    driver = next((p for p in (shutil.which("chromedriver"), "/usr/bin/chromedriver") if p and Path(p).exists()),
                  None)
    return (browser, driver) if browser and driver else None


def open_browser(width: int = 1400, height: int = 1000, profile_dir: str | None = None):
    """A Selenium Chrome driver on the system's Chromium, with the browser console log enabled."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    found = find_chromium()
    if found is None:
        raise RuntimeError("no chromium and chromedriver found; apt-get install chromium chromium-driver")
    browser, driver = found
    opts = webdriver.ChromeOptions()
    opts.binary_location = browser
    for flag in FLAGS:
        opts.add_argument(flag)
    opts.add_argument(f"--user-data-dir={profile_dir or tempfile.mkdtemp(prefix='topo-chromium-')}")
    opts.add_argument(f"--window-size={width},{height}")
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(driver), options=opts)


def load_report(drv, html_path, timeout_s: float = 60.0) -> int:
    """Open the report file and wait until every plot is drawn; returns the number of plots."""
    drv.get(Path(html_path).resolve().as_uri())
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        ready = drv.execute_script("return document.body && document.body.getAttribute('data-plots-ready')")
        if ready:
            return int(ready)
        time.sleep(0.1)
    raise TimeoutError(f"the plots of {html_path} were not drawn within {timeout_s:.0f} s")


def full_page_png(drv, width: int = 1400, scale: float = 1.0) -> bytes:
    """A PNG of the whole page, ``width`` CSS pixels wide, scaled by ``scale``."""
    drv.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                        {"width": width, "height": 900, "deviceScaleFactor": scale, "mobile": False})
    time.sleep(0.5)  # let the responsive plots settle at the new width
    height = drv.execute_script("return document.documentElement.scrollHeight")
    shot = drv.execute_cdp_cmd("Page.captureScreenshot", {
        "format": "png", "captureBeyondViewport": True,
        "clip": {"x": 0, "y": 0, "width": width, "height": height, "scale": 1}})
    return base64.b64decode(shot["data"])


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m topo.report.browser",
                                description="Write the report of SPECs (default: the bundled 100k-GPU cluster) "
                                            "and a PNG screenshot of it taken in headless Chromium.")
    p.add_argument("png", help="screenshot file, e.g. docs/report.png")
    p.add_argument("specs", nargs="*", metavar="SPEC")
    p.add_argument("--width", type=int, default=1400, help="page width in CSS pixels (default 1400)")
    p.add_argument("--scale", type=float, default=0.6, help="device pixels per CSS pixel (default 0.6)")
    p.add_argument("--force", action="store_true", help="replace PNG even if topo did not write it")
    args = p.parse_args(argv)

    with tempfile.TemporaryDirectory() as tmp:
        html_path = Path(tmp) / "topo-report.html"
        write_page(build_reports(args.specs or [None]), html_path)
        drv = open_browser(args.width, 1000, profile_dir=str(Path(tmp) / "profile"))
        try:
            load_report(drv, html_path)
            png = full_page_png(drv, args.width, args.scale)
        finally:
            drv.quit()
    write_bytes(args.png, sign_image(png, "png"), force=args.force)
    sys.stderr.write(f"wrote {args.png} ({format_in(len(png), 'kB', '.0f')})\n")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
