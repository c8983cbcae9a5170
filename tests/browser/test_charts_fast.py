"""Issue 35 item 9: how long Safe rates takes to draw its first chart on the bundled samples, in
real chromium. Printed, never asserted (the machine is shared): benches/RESULTS.md and the
issue's report carry the figures, with benches/safe_rates_open.py for the server's share."""

from __future__ import annotations

import json
import os
import time

import pytest

from .conftest import Server, wait_app

pytestmark = pytest.mark.browser

FIRST_CHART = '[data-testid="stPlotlyChart"] .main-svg'


def first_chart_seconds(browser, url: str) -> float:
    """Seconds from navigation to the first chart drawn, in a browser of its own (no cache, no
    session: what a person opening a link gets)."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    try:
        page = context.new_page()
        start = time.perf_counter()
        page.goto(url)
        page.locator(FIRST_CHART).first.wait_for(timeout=120_000)
        seconds = time.perf_counter() - start
        wait_app(page, "Phantom safety")
        assert page.locator(FIRST_CHART).count() >= 4  # every chart of the page is drawn, not only the first
        return seconds
    finally:
        context.close()


def test_safe_rates_first_chart_time_is_printed(browser, tmp_path):
    times = tmp_path / "script-times.jsonl"
    server = Server(tmp_path / "browser.db", tmp_path / "streamlit.log", env={"LITMUS_SCRIPT_TIMES": str(times)},
                    module="tests.browser.timed_streamlit")
    try:
        opened = [first_chart_seconds(browser, server.url + "/safe_rates") for _ in range(4)]
    finally:
        server.stop()
    scripts = [json.loads(line)["seconds"] for line in times.read_text().splitlines()]
    # As `make run` and `litmus-review serve` start it: the app's launcher makes the app ready while
    # the server starts. A person opens a page seconds after starting a server; so does this.
    launched = Server(tmp_path / "launched.db", tmp_path / "launched.log", module="pages._shared.serve")
    try:
        time.sleep(5)
        by_launcher = [first_chart_seconds(browser, launched.url + "/safe_rates") for _ in range(2)]
    finally:
        launched.stop()
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"\nSafe rates, navigation to first chart (s): server's first session {opened[0]:.2f}; new sessions "
          + ", ".join(f"{s:.2f}" for s in opened[1:])
          + " · server script runs (s): " + ", ".join(f"{s:.2f}" for s in scripts)
          + f" · started by the app's launcher, opened 5 s later: first session {by_launcher[0]:.2f}, "
            f"next {by_launcher[1]:.2f} · load average {load}")
