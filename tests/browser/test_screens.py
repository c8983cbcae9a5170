"""The screenshot set: every page at 1,280 px, light and dark, with the bundled samples and with a
real log from ../shared/real. Written to test-artifacts/screens/ (docs/screenshots/ is a copy).

Each shot also checks what a person would see wrong at a glance: a Streamlit error box, a
"Page not found", a table cut off on the right.
"""

from __future__ import annotations

import sqlite3

import pytest

from pages._shared.loaders import sample_files
from scoring.workspace import Workspace

from .conftest import Server, wait_app

pytestmark = pytest.mark.browser

REAL_LOG = "agentdojo_invariant_export/agentdojo-gpt-4o-mini-2024-07-18.jsonl"
PAGES = [("runs", "Imported runs"), ("safe_rates", "Phantom safety"), ("trajectories", "trajectories"),
         ("review", "Keyboard:"), ("report", "Download HTML")]


@pytest.fixture(scope="module")
def screens_server(tmp_path_factory, shared_real):
    d = tmp_path_factory.mktemp("screens")
    ws = Workspace(d / "screens.db")
    for path, side in sample_files():  # as the app imports them into an empty workspace
        ws.import_run(path, payloads=side)
    real = ws.import_run(shared_real / REAL_LOG).run_key
    server = Server(d / "screens.db", d / "streamlit.log")
    try:
        yield server, real
    finally:
        server.stop()


def run_key(db, prefix: str) -> str:
    with sqlite3.connect(db) as conn:
        return conn.execute("select run_key from runs where run_key like ?", [prefix + "%"]).fetchone()[0]


def first_inconclusive(db, run_key: str) -> str:
    with sqlite3.connect(db) as conn:
        return conn.execute("select trajectory_id from trajectories where run_key = ? and status = 'inconclusive' "
                            "order by rowid limit 1", [run_key]).fetchone()[0]


@pytest.mark.parametrize("theme", ["light", "dark"])
@pytest.mark.parametrize("data", ["samples", "real"])
def test_every_page_in_both_themes(screens_server, browser, artifacts, theme, data):
    server, real = screens_server
    out = artifacts / "screens"
    out.mkdir(exist_ok=True)
    ctx = browser.new_context(viewport={"width": 1280, "height": 900}, color_scheme=theme)
    page = ctx.new_page()
    try:
        # The real run alone, or the app's default selection (the samples with their side logs).
        page.goto(server.url + "/runs")
        wait_app(page, "Imported runs", timeout=90_000)
        with sqlite3.connect(server.db) as conn:
            samples = [k for (k,) in conn.execute("select run_key from runs where payloads_path is not null")]
        runs = real[:12] if data == "real" else ",".join(k[:12] for k in samples)
        for name, text in PAGES:
            query = f"?runs={runs}"
            if name == "trajectories":  # with a replay open
                key = run_key(server.db, runs.split(",")[0])
                query += f"&run={key[:12]}&trajectory={first_inconclusive(server.db, key)}"
            page.goto(server.url + f"/{name}{query}")
            wait_app(page, text, timeout=90_000)
            # Safe rates sends its plotly charts once its headline image is painted: wait for them.
            page.wait_for_function("() => !document.body.innerText.includes('Interactive chart: drawn once')",
                                   timeout=90_000)
            if page.locator('[data-testid="stPlotlyChart"]').count():
                page.locator('[data-testid="stPlotlyChart"] .main-svg:visible').first.wait_for(timeout=60_000)
            page.wait_for_timeout(1200)  # grids and charts paint after the script ends
            wait_app(page)
            # Streamlit scrolls its main area, not the page: a full-page shot is one screen. Make
            # the window as tall as the content (at most 6,000 px), then shoot.
            for _ in range(2):  # charts below the fold size themselves once they are in view
                tall = page.evaluate("document.querySelector('[data-testid=stMain]').scrollHeight")
                page.set_viewport_size({"width": 1280, "height": max(900, min(6000, tall))})
                page.wait_for_timeout(1000)
            # Streamlit mounts a long page's elements in batches, grey skeletons until then: the
            # shots committed before this wait showed the replay's code blocks as grey bars.
            page.wait_for_function("() => !document.querySelector('[data-testid=stSkeleton]')", timeout=60_000)
            page.wait_for_timeout(500)
            page.screenshot(path=str(out / f"{data}-{theme}-{name}.png"))
            page.set_viewport_size({"width": 1280, "height": 900})
            assert page.get_by_text("Page not found").count() == 0, name
            assert page.locator('[data-testid="stException"]').count() == 0, name
            cut = page.evaluate("""() => [...document.querySelectorAll('[data-testid=stDataFrame] .dvn-scroller')]
                .filter(e => e.offsetParent && e.scrollWidth > e.clientWidth + 1).length""")
            # The Trajectories table is as wide as a run's columns: it scrolls, by design.
            assert cut == 0 or name == "trajectories", name
            dark = page.evaluate("getComputedStyle(document.querySelector('[data-testid=stApp]')).backgroundColor")
            assert (dark != "rgb(255, 255, 255)") == (theme == "dark"), (name, dark)
    finally:
        ctx.close()
