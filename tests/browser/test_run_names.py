"""Issue 35, names people can read, in a browser at 1,280 × 900: a long run name cut on its chip is
on screen whole under the picker (and in the chip's tooltip), selecting its row in the Runs table
shows it whole under the table, and the ``--require-proof`` copy of a run reads as such."""

from __future__ import annotations

import sqlite3

import pytest

from scoring.workspace import Workspace

from ..run_name_logs import LONG_NAME as WHOLE
from ..run_name_logs import canonical_log, long_named
from .conftest import Server, wait_app

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def named_server(tmp_path_factory):
    d = tmp_path_factory.mktemp("names")
    ws = Workspace(d / "names.db")
    log = long_named(d)
    keys = [ws.import_run(log).run_key, ws.import_run(log, require_proof=True).run_key]
    short = ws.import_run(canonical_log(d / "short.jsonl", "gpt-x", "r-2", task="banking")).run_key
    server = Server(d / "names.db", d / "streamlit.log")
    try:
        yield server, [*keys, short]
    finally:
        server.stop()


def whole_on_screen(page, text: str) -> bool:
    """``text`` is in a text element that shows it whole: scrolled into view, it lies inside the
    window and nothing of it is cut on the right."""
    return page.evaluate("""text => [...document.querySelectorAll('[data-testid=stText]')].some(e => {
        if (!e.innerText.includes(text)) return false;
        e.scrollIntoView({block: "nearest"});
        const r = e.getBoundingClientRect();
        return r.width > 0 && r.left >= 0 && r.right <= window.innerWidth && r.top >= 0
            && r.bottom <= window.innerHeight && e.scrollWidth <= e.clientWidth + 1 })""", text)


def test_a_long_name_is_seen_whole_and_the_require_proof_copy_says_so(named_server, page, artifacts):
    server, keys = named_server
    page.goto(server.url + "/runs?runs=" + ",".join(k[:12] for k in keys))
    wait_app(page, "Imported runs", timeout=90_000)
    sidebar = page.locator('[data-testid="stSidebar"]')
    chips = sidebar.locator("[data-tag] span[title]")
    chips.first.wait_for(timeout=30_000)
    # The chips cut the long names (they start alike); the tooltip and the list under them do not.
    assert sorted(chips.evaluate_all("cs => cs.map(c => c.title)")) == sorted(
        [WHOLE, WHOLE + " · require-proof", "gpt-x · banking"])
    assert whole_on_screen(page, f"• {WHOLE}\n") and whole_on_screen(page, f"• {WHOLE} · require-proof")
    page.screenshot(path=str(artifacts / "run_names_sidebar.png"))
    # The Runs table's column cuts the name: selecting its row shows it whole under the table.
    grid = page.locator('[data-testid="stDataFrame"]').first
    grid.scroll_into_view_if_needed()
    page.wait_for_timeout(800)  # the grid paints on a canvas after its element appears
    assert page.get_by_text("Select a row to read its run's name in full").count() == 1
    with sqlite3.connect(server.db) as conn:  # the table's rows: newest first
        order = [k for (k,) in conn.execute("select run_key from runs order by imported_at desc")]
    box = grid.bounding_box()
    row = order.index(keys[1])
    page.mouse.click(box["x"] + 16, box["y"] + 35 + 35 * row + 17)  # its row's selection box
    under = page.locator('[data-testid="stText"]').filter(has_text="run id r-1 · model ")
    under.first.wait_for(timeout=30_000)
    wait_app(page)
    under.first.scroll_into_view_if_needed()
    assert under.first.inner_text().startswith(WHOLE + " · require-proof\n")
    assert whole_on_screen(page, f"{WHOLE} · require-proof\nrun id r-1")
    page.screenshot(path=str(artifacts / "run_names_runs_table.png"))
