#!/usr/bin/env python3
"""Renders Fanout's HTML reports in headless Chromium (through Selenium and
Debian's chromedriver) as a phone (390 px, mobile) and a laptop (1280 px)
show them, and fails on what a reader would see broken: a page wider than
the window (horizontal scrolling; a table may scroll inside its own box,
the page may not), no headline, a chart with nothing drawn in it, or a chart
squeezed out of sight. Saves a screenshot of each width beside the page.

Usage: check-report.py REPORT.html [REPORT.html ...]"""
import os
import sys

from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service

WIDTHS = [(390, True), (1280, False)]

MEASURE = """
const width = document.documentElement.clientWidth;
const outside = [];
for (const e of document.querySelectorAll('body *')) {
  if (e.closest('.scroll') && !e.classList.contains('scroll')) continue;
  const r = e.getBoundingClientRect();
  if (r.width > 0 && (r.right > width + 1 || r.left < -1)) {
    outside.push(e.tagName.toLowerCase() + (e.className && e.className.baseVal === undefined
      ? '.' + e.className : '') + ' ' + Math.round(r.left) + '..' + Math.round(r.right));
  }
}
const h1 = document.querySelector('h1');
const charts = [...document.querySelectorAll('svg')].map(svg => {
  const r = svg.getBoundingClientRect();
  // Data marks carry a <title> (the legend's swatches do not).
  const marks = [...svg.querySelectorAll('rect')].filter(m => m.querySelector('title'));
  const drawn = marks.filter(m => { const b = m.getBoundingClientRect(); return b.width > 0 && b.height > 0.5; });
  return {label: svg.getAttribute('aria-label') || '(unlabelled)', width: r.width, height: r.height,
          marks: marks.length, drawn: drawn.length,
          note: svg.querySelector('.no-change') !== null};
});
return {width: width, scrollWidth: document.documentElement.scrollWidth, outside: outside.slice(0, 5),
        headline: h1 ? h1.innerText.trim() : '', title: document.title.trim(), charts: charts};
"""


def problems_at(driver, page, width, mobile):
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                           {"width": width, "height": 900, "deviceScaleFactor": 1, "mobile": mobile})
    driver.get("file://" + os.path.abspath(page))
    m = driver.execute_script(MEASURE)
    found = []
    if m["scrollWidth"] > m["width"]:
        found.append(f"the page is {m['scrollWidth']} px wide in a {m['width']} px window: "
                     + "; ".join(m["outside"]))
    if not m["headline"]:
        found.append("no headline (h1)")
    if not m["title"]:
        found.append("no <title>")
    if not m["charts"]:
        found.append("no chart")
    for c in m["charts"]:
        if c["width"] < 120 or c["height"] < 40:
            found.append(f"chart {c['label']!r} is {c['width']:.0f}x{c['height']:.0f} px")
        if c["drawn"] == 0 and not c["note"]:
            found.append(f"chart {c['label']!r} draws nothing ({c['marks']} marks, none visible)")
    shot = os.path.splitext(page)[0] + f"-{width}.png"
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                           {"width": width, "height": 900, "deviceScaleFactor": 1, "mobile": mobile})
    driver.save_screenshot(shot)
    return found, m


def main(pages):
    options = Options()
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"):
        options.add_argument(flag)
    options.binary_location = "/usr/bin/chromium"
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
    failed = False
    try:
        for page in pages:
            for width, mobile in WIDTHS:
                found, m = problems_at(driver, page, width, mobile)
                status = "ok" if not found else "FAILED"
                print(f"{page} at {width} px: {status} ({len(m['charts'])} charts, "
                      f"headline {m['headline'][:80]!r})")
                for p in found:
                    print("  " + p)
                failed = failed or bool(found)
    finally:
        driver.quit()
    return 1 if failed else 0


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1:]))
