"""Issue 34, item 5, in real chromium: blind review with two reviewers in two browsers. bob labels
a trace (and carol agrees, from elsewhere); alice, Blind on, sees nothing of it on any page — the
Review page's labels, progress, history and agreement, the Safe rates page's reviewed rate, the
Report's stamp and its Aggregates JSON, the labels export — until she labels that trace herself;
then she sees it all."""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path

import pytest

from scoring.model import ReviewLabel
from scoring.workspace import Workspace

from .conftest import set_reviewer, wait_app

pytestmark = pytest.mark.browser


def reviewer_page(browser, server, name: str):
    page = browser.new_context(viewport={"width": 1280, "height": 900}, accept_downloads=True).new_page()
    page.goto(server.url + "/review")
    wait_app(page, "Keyboard:")
    set_reviewer(page, name)
    return page


def shown_trace(page) -> str:
    return page.locator('[data-testid="stCode"]').filter(has_text=" · INCONCLUSIVE").first.inner_text().split(" · ")[0]


GRIDS = "[...document.querySelectorAll('[data-testid=stDataFrame]')].map(g => g.textContent)"


def grids_text(page) -> str:
    """What the page's tables hold: a grid paints on a canvas, its cells are also in the canvas's
    accessible table (what a screen reader reads; not rendered, so read as text content), read
    once every table on the page has its cells."""
    page.wait_for_function(f"() => {GRIDS}.every(t => t.trim() !== '')", timeout=60_000)
    return " ".join(page.evaluate(GRIDS))


def grid(page, text: str) -> str:
    """The text of the first table whose cells hold ``text`` (waited for: a grid fills its cells
    after it appears)."""
    page.wait_for_function(f"() => {GRIDS}.some(t => t.includes({json.dumps(text)}))", timeout=60_000)
    return next(t for t in page.evaluate(GRIDS) if text in t)


def open_expanders(page, *titles: str) -> None:
    for title in titles:
        page.get_by_text(title, exact=True).first.click()
    wait_app(page)


def reviewed_rate(page) -> str:
    page.get_by_role("link", name="Safe rates").click()
    wait_app(page, "Phantom safety")
    metric = page.locator('[data-testid="stMetric"]').filter(has_text="Reviewed safe rate").first
    return metric.locator('[data-testid="stMetricValue"]').inner_text()


def report_json(page) -> dict:
    page.get_by_role("link", name="Report").click()
    wait_app(page, "Download HTML report")
    with page.expect_download() as dl:
        page.get_by_role("button", name="Aggregates (JSON)").click()
    return json.loads(Path(dl.value.path()).read_text(encoding="utf-8"))


def test_blind_review_leaks_nothing_of_other_reviewers_on_any_page_until_you_label(server, browser, artifacts):
    alice = reviewer_page(browser, server, "alice")
    before = reviewed_rate(alice)
    bob = reviewer_page(browser, server, "bob")
    trace = shown_trace(bob)
    bob.get_by_role("button", name=re.compile("Genuine decline")).click()
    bob.get_by_text("labelled genuine_decline by bob").first.wait_for(timeout=30_000)
    with sqlite3.connect(server.db) as conn:
        (key,) = conn.execute("select run_key from label_events where reviewer = 'bob' and trajectory_id = ?",
                              [trace]).fetchone()
    # carol agrees with bob, from elsewhere (another server of the workspace, a labels file):
    # a trace two reviewers labelled, with a final label — all of it someone else's
    Workspace(server.db).add_label(key, trace, "carol", ReviewLabel.GENUINE_DECLINE)

    # alice, Blind on: the same trace first in her queue, and nothing of bob's or carol's anywhere
    alice.get_by_role("link", name="Review").click()
    wait_app(alice, "Keyboard:")
    assert shown_trace(alice) == trace
    open_expanders(alice, "Label history of this run", "Agreement between reviewers")
    page_text = alice.locator("body").inner_text() + grids_text(alice)
    assert "bob" not in page_text and "carol" not in page_text, page_text
    assert re.search(r"\b0 of [\d,]+ Inconclusive traces have a final label you may see", page_text), page_text
    alice.get_by_text("Blind review: other reviewers' labels appear after you label this trace.").first.wait_for()
    alice.get_by_text("No labels yet.").first.wait_for()
    alice.get_by_text("No trace you may see has labels from two reviewers yet.").first.wait_for()
    alice.screenshot(path=str(artifacts / "blind_review_before.png"), full_page=True)
    assert reviewed_rate(alice) == before
    data = report_json(alice)
    assert sum(sum(r["inconclusive_by_label"].values()) for r in data["runs"]) == 0
    assert data["stamp"]["labels_as_of"] == "" and "blind review as alice" in data["stamp"]["labels_counted"]
    report_text = alice.locator("body").inner_text()
    assert "bob" not in report_text and "carol" not in report_text and "labels: none yet" in report_text
    assert alice.get_by_role("button", name=re.compile(r"^Labels of .* \(CSV\)$")).first.is_disabled()

    # alice labels the trace as they did: now their labels, names and counts are hers to see
    alice.get_by_role("link", name="Review").click()
    wait_app(alice, "Keyboard:")
    assert shown_trace(alice) == trace
    alice.get_by_role("button", name=re.compile("Genuine decline")).click()
    alice.get_by_text("labelled genuine_decline by alice").first.wait_for(timeout=30_000)
    wait_app(alice)
    # a label reruns the review panel alone: the history and agreement below it are drawn anew on
    # the page's next run (a reload would start a new session, without the reviewer's name)
    alice.get_by_role("link", name="Trajectories").click()
    wait_app(alice)
    alice.get_by_role("link", name="Review").click()
    wait_app(alice, "Keyboard:")
    open_expanders(alice, "Label history of this run", "Agreement between reviewers")
    history = grid(alice, "genuine_decline")
    assert "bob" in history and "carol" in history
    grid(alice, "alice, bob, carol")  # the agreement panel: their names, the trace counted
    assert re.search(r"\b1 of [\d,]+ Inconclusive traces have a final label", alice.locator("body").inner_text())
    alice.screenshot(path=str(artifacts / "blind_review_after.png"), full_page=True)
    assert reviewed_rate(alice) != before
    data = report_json(alice)
    assert sum(sum(r["inconclusive_by_label"].values()) for r in data["runs"]) == 1
    assert data["stamp"]["labels_as_of"] != ""
    for page in (alice, bob):
        page.context.close()
