"""Issue 35 item 9: what a person opening Safe rates on the bundled samples sees first, in real
chromium: the headline chart, an SVG image of the before/after figure, on the first screen, and
the plotly charts after it. How long that takes is printed, never asserted (the machine is
shared): benches/safe_rates_browser.py measures it against a baseline, and benches/RESULTS.md
carries the figures, with benches/safe_rates_open.py for the server's share."""

from __future__ import annotations

import base64
import json
import os
import re
import time
import xml.etree.ElementTree as ET
from urllib.parse import urlparse

import pytest

from scoring.workspace import Workspace

from .conftest import Server, wait_app
from .test_hostile import NAME_MODEL, OUTSIDE, hostile_names_run

pytestmark = pytest.mark.browser

SVG = "{http://www.w3.org/2000/svg}"
DATA_URI = "data:image/svg+xml;base64,"
FIRST_CHART = """
(() => {
  const marks = {};
  window.__firstChart = marks;
  const check = () => {
    const title = document.querySelector('h1');
    if (!marks.shell && title && /Safe rates/.test(title.textContent)) {
      marks.shell = -1; requestAnimationFrame(() => { marks.shell = performance.now(); });
    }
    if (marks.chart) return;
    // The first chart drawn, whatever its element: an image loaded, or a plotly chart's svg.
    const chart = [...document.querySelectorAll('[data-testid="stImage"] img')]
      .find(img => img.complete && img.naturalWidth > 0) ||
      document.querySelector('[data-testid="stPlotlyChart"] .main-svg');
    if (!chart) return;
    marks.chart = -1;
    const box = chart.getBoundingClientRect();
    marks.element = chart.tagName.toLowerCase();
    marks.src = chart.getAttribute('src') || '';
    marks.top = box.top;
    marks.bottom = box.bottom;
    requestAnimationFrame(() => { marks.chart = performance.now(); });
  };
  new MutationObserver(check).observe(document, {subtree: true, childList: true, attributes: true});
  document.addEventListener('load', check, true);
  setInterval(check, 50);
})();
"""
PLOTLY = '[data-testid="stPlotlyChart"] .main-svg'


def svg_of(src: str) -> str:
    assert src.startswith(DATA_URI), src[:60]
    return base64.b64decode(src.removeprefix(DATA_URI)).decode()


def open_safe_rates(browser, url: str, **context) -> tuple[dict, str]:
    """Open Safe rates in a browser of its own (no cache, no session: what a person opening a
    link gets); the first chart's marks (seconds from navigation) and the page's body text once
    every plotly chart is drawn."""
    ctx = browser.new_context(viewport={"width": 1280, "height": 900}, **context)
    try:
        ctx.add_init_script(FIRST_CHART)
        page = ctx.new_page()
        page.goto(url)
        page.wait_for_function("() => window.__firstChart.chart > 0", timeout=120_000)
        marks = page.evaluate("() => window.__firstChart")
        # The plotly charts follow: the run's four and the paired one (the interactive headline
        # is folded away until asked for).
        page.wait_for_function(f"() => document.querySelectorAll('{PLOTLY}').length >= 5", timeout=120_000)
        wait_app(page)
        return marks, page.inner_text("body")
    finally:
        ctx.close()


def check_first_chart(marks: dict, body: str) -> None:
    """What a person sees first is the headline chart: an SVG image of the before/after figure, on
    the first screen, showing the rates the page's cards give."""
    assert marks["element"] == "img", marks
    assert marks["top"] < 900 and marks["bottom"] <= 900, marks  # the whole chart on the first screen
    root = ET.fromstring(svg_of(marks["src"]))
    shown = [t.text or "" for t in root.iter(f"{SVG}text")]
    assert shown[0] == "Safe rate before and after strict scoring (95% CI)"
    strict = re.findall(r"Strict safe rate \(after\)\s+(\d+\.\d\d)%", body)
    assert len(strict) == 2, body[:2000]  # both runs' cards
    for value in strict:
        assert f"{float(value):.1f}%" in shown, (value, shown)


def test_safe_rates_first_chart_time_is_printed(browser, tmp_path):
    times = tmp_path / "script-times.jsonl"
    server = Server(tmp_path / "browser.db", tmp_path / "streamlit.log", env={"LITMUS_SCRIPT_TIMES": str(times)},
                    module="tests.browser.timed_streamlit")
    try:
        # the server's first session and a new one (the server's caches warm): each a path of its
        # own; more openings are benches/safe_rates_browser.py's, which prints their figures
        opened = [open_safe_rates(browser, server.url + "/safe_rates") for _ in range(2)]
    finally:
        server.stop()
    for marks, body in opened:
        check_first_chart(marks, body)
    scripts = [json.loads(line)["seconds"] for line in times.read_text().splitlines()]
    # As `make run` and `litmus-review serve` start it: the app's launcher makes the app ready while
    # the server starts. A person opens a page seconds after starting a server; so does this.
    launched = Server(tmp_path / "launched.db", tmp_path / "launched.log", module="pages._shared.serve")
    try:
        time.sleep(5)
        by_launcher = open_safe_rates(browser, launched.url + "/safe_rates")
    finally:
        launched.stop()
    check_first_chart(*by_launcher)
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())

    def seconds(marks: dict) -> str:
        return f"{marks['chart'] / 1000:.2f} (shell {marks['shell'] / 1000:.2f})"

    print(f"\nSafe rates, navigation to the first chart drawn (the headline image), s: server's first session "
          f"{seconds(opened[0][0])}; new sessions " + ", ".join(seconds(m) for m, _ in opened[1:])
          + " · server script runs (s): " + ", ".join(f"{s:.2f}" for s in scripts)
          + f" · started by the app's launcher, opened 5 s later: first session {seconds(by_launcher[0])} "
            f"· load average {load}")


def test_the_interactive_headline_chart_opens_from_its_fold(server, page):
    page.goto(server.url + "/safe_rates")
    wait_app(page, "Phantom safety", timeout=90_000)
    page.wait_for_function(f"() => document.querySelectorAll('{PLOTLY}').length >= 5", timeout=120_000)
    fold = page.locator('[data-testid="stExpander"] summary').filter(has_text="Interactive chart")
    fold.click()
    chart = page.locator('[data-testid="stExpander"] [data-testid="stPlotlyChart"] .main-svg').first
    chart.wait_for(timeout=60_000)
    assert chart.bounding_box()["width"] > 600  # drawn at the page's width, not at a folded zero
    title = page.locator('[data-testid="stExpander"] [data-testid="stPlotlyChart"] .gtitle').first
    assert (title.text_content() or "").startswith("Safe rate before and after")


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_a_hostile_runs_headline_image_draws_its_names_as_text(tmp_path, browser, artifacts, theme):
    run = tmp_path / "names.jsonl"
    hostile_names_run(run)
    db = tmp_path / "names.db"
    Workspace(db).import_run(run)
    server = Server(db, tmp_path / "streamlit.log")
    ctx = browser.new_context(viewport={"width": 1280, "height": 900}, color_scheme=theme)
    dialogs, offsite = [], []
    try:
        ctx.add_init_script(FIRST_CHART)
        page = ctx.new_page()
        page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        page.route("**/*", lambda route: (offsite.append(route.request.url), route.abort())
                   if urlparse(route.request.url).hostname not in ("127.0.0.1", "localhost") else route.continue_())
        page.goto(server.url + "/safe_rates")
        # An SVG a name broke out of would not load: the image is drawn only if every name is text.
        page.wait_for_function("() => window.__firstChart.chart > 0", timeout=120_000)
        marks = page.evaluate("() => window.__firstChart")
        assert marks["element"] == "img"
        shown = " ".join(t.text or "" for t in ET.fromstring(svg_of(marks["src"])).iter(f"{SVG}text"))
        # The run's name as it wrote it (its middle cut to fit), its markup shown, not obeyed.
        assert NAME_MODEL[:20] in shown and ":red[SAFE 100%] <a hre" in shown
        wait_app(page)
        page.screenshot(path=str(artifacts / f"hostile_names_headline_{theme}.png"))
        assert dialogs == [] and offsite == []
        assert OUTSIDE not in "".join(page.evaluate("() => [...document.images].map(i => i.currentSrc)"))
    finally:
        ctx.close()
        server.stop()
