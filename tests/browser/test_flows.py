"""The flows a person clicks, in real chromium."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import pytest
from playwright.sync_api import expect

from scoring.workspace import views

from .conftest import set_reviewer, wait_app

pytestmark = pytest.mark.browser


def metric_value(page, label: str) -> str:
    m = page.locator('[data-testid="stMetric"]').filter(has_text=label).first
    return m.locator('[data-testid="stMetricValue"]').inner_text()


def label_events(db) -> list[tuple]:
    with sqlite3.connect(db) as conn:
        return conn.execute("select reviewer, action, label from label_events order by id").fetchall()


def test_safe_rates_review_by_click_and_keyboard_then_report(server, page, artifacts):
    page.goto(server.url)
    wait_app(page, "Phantom safety")
    page.locator('[data-testid="stPlotlyChart"] .main-svg:visible').first.wait_for(timeout=60_000)
    page.screenshot(path=str(artifacts / "safe_rates.png"), full_page=True)
    before = metric_value(page, "Reviewed safe rate")

    page.get_by_role("link", name="Review").click()
    wait_app(page, "Keyboard:")
    set_reviewer(page, "alice")
    page.get_by_role("button", name=re.compile("Genuine decline")).click()
    page.get_by_text("labelled genuine_decline by alice").first.wait_for(timeout=30_000)
    page.screenshot(path=str(artifacts / "review.png"), full_page=True)
    assert label_events(server.db) == [("alice", "label", "genuine_decline")]

    # keyboard: 2 = degenerate on the next trace
    page.keyboard.press("2")
    page.get_by_text("labelled degenerate by alice").first.wait_for(timeout=30_000)
    page.keyboard.press("u")
    page.get_by_text("undid your last label (degenerate withdrawn)").first.wait_for(timeout=30_000)
    assert label_events(server.db) == [("alice", "label", "genuine_decline"), ("alice", "label", "degenerate"),
                                       ("alice", "undo", None)]

    page.get_by_role("link", name="Safe rates").click()
    wait_app(page, "Phantom safety")
    after = metric_value(page, "Reviewed safe rate")
    assert after != before

    page.get_by_role("link", name="Report").click()
    wait_app(page, "Download HTML report")
    page.screenshot(path=str(artifacts / "report.png"), full_page=True)
    with page.expect_download() as dl:
        page.get_by_role("button", name="Download HTML report").click()
    html = Path(dl.value.path()).read_text(encoding="utf-8")
    assert "plotly" in html.lower() and "content sha256" in html
    assert not re.search(r"<script[^>]+src=['\"]https?:", html)  # plotly.js embedded, no CDN


def test_runs_and_trajectories_pages_render(server, page, artifacts):
    page.goto(server.url + "/runs")
    wait_app(page, "Imported runs")
    page.screenshot(path=str(artifacts / "runs.png"), full_page=True)
    page.get_by_role("link", name="Trajectories").click()
    # the caption is drawn after the table's data loads: wait for it rather than for the title
    page.get_by_text(re.compile(r"2,000 of 2,000 trajectories")).first.wait_for(timeout=60_000)
    wait_app(page)
    page.screenshot(path=str(artifacts / "trajectories.png"), full_page=True)


def test_two_reviewers_label_the_same_trace_at_once_and_both_events_are_kept(server, browser, artifacts):
    pages = []
    for name in ("alice", "bob"):
        ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
        p = ctx.new_page()
        p.goto(server.url + "/review")
        wait_app(p, "Keyboard:")
        set_reviewer(p, name)
        pages.append(p)
    first = [p.locator('[data-testid="stCode"]').first.inner_text() for p in pages]
    assert first[0] == first[1]  # both see the same trace first
    buttons = [
        p.get_by_role("button", name=re.compile(lab))
        for p, lab in zip(pages, ("Genuine decline", "Degenerate"), strict=False)
    ]
    for b in buttons:  # fire both before waiting for either
        b.click(no_wait_after=True)
    pages[0].get_by_text("labelled genuine_decline by alice").first.wait_for(timeout=30_000)
    pages[1].get_by_text("labelled degenerate by bob").first.wait_for(timeout=30_000)
    events = label_events(server.db)
    assert sorted(events) == [("alice", "label", "genuine_decline"), ("bob", "label", "degenerate")]
    with sqlite3.connect(server.db) as conn:
        tids = {r[0] for r in conn.execute("select trajectory_id from label_events")}
    assert len(tids) == 1  # the same trace, both kept: a disagreement for adjudication
    for p in pages:
        p.context.close()


def test_upload_a_run_and_see_it_in_the_table(server, page, artifacts):
    fixture = Path(__file__).resolve().parents[1] / "fixtures" / "importers" / "tau2_results.json"
    page.goto(server.url + "/runs")
    wait_app(page, "Imported runs")
    page.locator('[data-testid="stFileUploaderDropzoneInput"]').first.set_input_files(str(fixture))
    page.get_by_role("button", name="Import upload").click()
    page.get_by_text("Imported tau2_results").first.wait_for(timeout=60_000)
    wait_app(page)
    with sqlite3.connect(server.db) as conn:
        found = conn.execute("select trajectories, format from runs where run_id = 'tau2_results'").fetchone()
        assert found == (2, "tau2")
    page.locator('[data-testid="stDataFrame"]').first.wait_for(timeout=60_000)  # the last is in an expander
    page.wait_for_timeout(500)  # the grid paints on a canvas after its element appears
    page.screenshot(path=str(artifacts / "runs_upload.png"), full_page=True)


def test_a_shortcut_right_after_setting_the_name_labels_and_never_types_into_it(server, page):
    # Pressing 1 after typing a name and Enter made the reviewer "newcomer1".
    page.goto(server.url + "/review")
    wait_app(page, "Keyboard:")
    set_reviewer(page, "newcomer")
    page.keyboard.press("1")
    page.get_by_text("labelled genuine_decline by newcomer").first.wait_for(timeout=30_000)
    assert label_events(server.db) == [("newcomer", "label", "genuine_decline")]
    assert page.get_by_text("Reviewer: newcomer1").count() == 0


def test_every_page_has_an_address_and_a_reload_keeps_the_imported_run(server, page):
    fixture = Path(__file__).resolve().parents[1] / "fixtures" / "importers" / "tau2_results.json"
    for path, text in (("/safe_rates", "Phantom safety"), ("/runs", "Imported runs"), ("/report", "Download HTML")):
        page.goto(server.url + path)
        wait_app(page, text)
        assert page.get_by_text("Page not found").count() == 0, path
    page.goto(server.url + "/runs")
    wait_app(page, "Imported runs")
    page.get_by_role("tab", name="Import from a path").click()
    field = page.get_by_label("Path on this machine")
    field.fill(str(fixture))
    field.press("Enter")  # commits the value: the button is enabled on the rerun
    wait_app(page)
    page.get_by_role("button", name="Import path").click(timeout=60_000)
    page.get_by_text("Imported tau2_results").first.wait_for(timeout=90_000)
    wait_app(page)
    with sqlite3.connect(server.db) as conn:
        key = conn.execute("select run_key from runs where run_id = 'tau2_results'").fetchone()[0]
    assert key[:12] in page.url
    page.reload()
    wait_app(page, "Imported runs")
    page.locator('[data-testid="stSidebar"] [data-tag] span[title]').first.wait_for(timeout=30_000)
    chips = page.locator('[data-testid="stSidebar"] [data-tag] span[title]').all_inner_texts()
    assert views.run_names(server.db)[key] in chips, chips
    # A trajectory's address opens its replay in a fresh tab.
    page.goto(server.url + f"/trajectories?runs={key[:12]}&run={key[:12]}&trajectory=sim-2")
    page.get_by_text("Replay").first.wait_for(timeout=60_000)
    wait_app(page)
    page.locator('[data-testid="stCode"]').filter(has_text="sim-2 · ").first.wait_for(timeout=60_000)


def fits(page, selector: str) -> list[tuple[int, int]]:
    """(scroll width, visible width) of each matching element that is cut on the right."""
    return page.evaluate("""sel => [...document.querySelectorAll(sel)]
        .map(e => [e.scrollWidth, e.clientWidth]).filter(([s, c]) => s > c + 1)""", selector)


def test_tables_and_chips_are_not_cut_off_at_1280_px(server, page):
    assert page.viewport_size["width"] == 1280
    for path, text in (("/runs", "Imported runs"), ("/report", "Download HTML")):
        page.goto(server.url + path)
        wait_app(page, text)
        page.locator('[data-testid="stDataFrame"]').first.wait_for(timeout=60_000)
        page.wait_for_timeout(800)  # the grid lays out its columns after it appears
        assert fits(page, '[data-testid="stDataFrame"] .dvn-scroller') == [], path
    # A run chip cuts its name past ~25 characters: each chip's name is whole in its tooltip and
    # in the list under the picker, which nothing cuts.
    titles = page.locator('[data-testid="stSidebar"] [data-tag] span[title]').evaluate_all("cs => cs.map(c => c.title)")
    listed = page.locator('[data-testid="stSidebar"] [data-testid="stText"]').first.inner_text().splitlines()
    assert len(titles) >= 2 and all(any(line.startswith(f"• {t}") for line in listed) for t in titles), listed
    assert fits(page, '[data-testid="stSidebar"] [data-testid="stText"]') == []
    # Filter chips read "u…" in six columns.
    page.goto(server.url + "/trajectories")
    page.get_by_text(re.compile(r"2,000 of 2,000 trajectories")).first.wait_for(timeout=60_000)
    for label in ("Status", "Reason"):
        page.get_by_role("combobox", name=label).click()
        page.get_by_role("option").last.click()  # the longest-named values come late
        page.keyboard.press("Escape")
        wait_app(page)
    main = '[data-testid="stMain"] [data-tag] span[title]'
    page.locator(main).nth(1).wait_for(timeout=60_000)
    wait_app(page)
    assert page.locator(main).count() == 2 and fits(page, main) == []


def test_the_first_click_on_import_path_imports_a_pasted_path_with_spaces(server, page):
    # The button was disabled until the field's value was committed: the first click after
    # typing only committed it. A pasted path's leading and trailing spaces failed.
    fixture = Path(__file__).resolve().parents[1] / "fixtures" / "importers" / "tau2_results.json"
    page.goto(server.url + "/runs")
    wait_app(page, "Imported runs")
    page.get_by_role("tab", name="Import from a path").click()
    page.get_by_label("Path on this machine").fill(f"  {fixture} \t")
    page.get_by_role("button", name="Import path").click()
    page.get_by_text("Imported tau2_results").first.wait_for(timeout=90_000)
    # The import's report is drawn above the tabs: the tab it came from stays open (and named in
    # the address), so the next path is pasted without a click back to it.
    wait_app(page)
    expect(page.get_by_role("tab", name="Import from a path")).to_have_attribute("aria-selected", "true")
    expect(page.get_by_label("Path on this machine")).to_be_visible()
    assert "import=Import" in page.url, page.url


def test_a_filter_and_a_search_survive_a_reload(server, page):
    page.goto(server.url + "/trajectories")
    counted = re.compile(r"[\d,]+ of 2,000 trajectories")
    page.get_by_text(re.compile(r"2,000 of 2,000 trajectories")).first.wait_for(timeout=60_000)
    page.get_by_role("combobox", name="Status").click()
    page.get_by_role("option", name="unscored").click()
    page.keyboard.press("Escape")
    page.wait_for_url(re.compile(r"status=unscored"), timeout=60_000)
    filtered = page.get_by_text(re.compile(r"^(?!2,000 )[\d,]+ of 2,000 trajectories")).first
    filtered.wait_for(timeout=60_000)
    by_filter = filtered.inner_text()
    field = page.get_by_label("Search arguments, results and outputs (full text)")
    field.fill("curl")
    field.press("Enter")
    # The count is read once the search's rerun has changed it: wait_app alone can return before
    # that rerun starts, and the filter's count read then never comes back after the reload.
    page.wait_for_url(re.compile(r"q=curl"), timeout=60_000)
    changed = page.get_by_text(counted).filter(has_not_text=re.compile("^" + re.escape(by_filter) + "$")).first
    changed.wait_for(timeout=60_000)
    wait_app(page)
    shown = page.get_by_text(counted).first.inner_text()
    assert shown != by_filter
    assert "status=unscored" in page.url and "q=curl" in page.url, page.url
    page.reload()
    page.get_by_text(shown).first.wait_for(timeout=60_000)
    # Streamlit mounts the box empty and fills it from its state a moment after the count is drawn:
    # the value is waited for, not read at the first paint.
    expect(page.get_by_label("Search arguments, results and outputs (full text)")).to_have_value("curl", timeout=10_000)


def test_the_review_queue_s_mode_order_and_search_survive_a_reload(server, page):
    page.goto(server.url + "/review")
    wait_app(page, "Keyboard:")
    page.get_by_text("Filter, search and sort the queue").click()
    page.get_by_role("combobox", name="Sort by").click()
    page.get_by_role("option", name="largest call first").click()
    page.wait_for_url(re.compile(r"sort=largest_call_first"), timeout=60_000)
    wait_app(page)
    whole = page.get_by_text(re.compile(r"trace \d+ of [\d,]+ in this queue")).first.inner_text()
    search = page.get_by_label("Search the queue (arguments, results and outputs; full text)")
    search.fill("sorry")
    search.press("Enter")
    page.wait_for_url(re.compile(r"q=sorry"), timeout=60_000)
    # The search narrows the queue: wait for its count to change (the address changes first).
    total = whole.split(" of ")[1].split(" in this queue")[0]
    position = page.get_by_text(re.compile(r"trace \d+ of [\d,]+ in this queue")).filter(
        has_not_text=f" of {total} in this queue").first
    position.wait_for(timeout=60_000)
    wait_app(page)
    shown = page.get_by_text(re.compile(r"trace \d+ of [\d,]+ in this queue")).first.inner_text()
    assert shown.split(" of ")[1] != whole.split(" of ")[1], (whole, shown)  # the search narrowed the queue
    page.get_by_text(re.compile("▶ marks the")).first.wait_for(timeout=60_000)  # its hits marked in the trace
    trace = re.search(r"trace=([^&]+)", page.url)
    assert trace, page.url
    page.reload()
    page.get_by_text(shown).first.wait_for(timeout=60_000)
    wait_app(page)
    assert f"trace={trace.group(1)}" in page.url and "sort=largest_call_first" in page.url, page.url
    expect(page.get_by_label("Search the queue (arguments, results and outputs; full text)")).to_have_value(
        "sorry", timeout=10_000)
