"""Issue 35 item 7 in real chromium: two reviewers disagree; the adjudicator the roles file names
(adjudicators.txt) opens the disputed queue and resolves the trace; its final label is shown and
counts in the reviewed rate. A reviewer not named there sees the dispute but no way to resolve it."""

from __future__ import annotations

import re
from urllib.parse import parse_qs, urlparse

import pytest

from scoring.workspace import Workspace, views

from .conftest import wait_app
from .test_flows import metric_value

pytestmark = pytest.mark.browser

RESOLVE = re.compile(r"^Resolve as ")


def as_reviewer(browser, url: str, name: str):
    """A browser of this reviewer's own (no shared session), opened at ``url`` with the name in
    the address, as a bookmark keeps it."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.goto(url + ("&" if "?" in url else "?") + f"reviewer={name}")
    return context, page


def test_an_adjudicator_resolves_a_disagreement_and_the_rate_counts_it(server, browser):
    alice, a = as_reviewer(browser, server.url + "/review", "alice")
    try:
        wait_app(a, "Keyboard:")
        a.get_by_text("Reviewer: alice").first.wait_for(timeout=30_000)
        a.wait_for_url(re.compile(r"[?&]trace="), timeout=30_000)
        address = parse_qs(urlparse(a.url).query)
        tid, run_prefix = address["trace"][0], address["run"][0]
        a.get_by_role("button", name="Genuine decline (1)").click()
        a.get_by_text(f"{tid}: labelled genuine_decline by alice").first.wait_for(timeout=30_000)
    finally:
        alice.close()
    ws = Workspace(server.db)
    ws.adjudicators_file.parent.mkdir(exist_ok=True)
    ws.adjudicators_file.write_text("# who settles a disagreement\ncarol\n")

    bob, b = as_reviewer(browser, server.url + f"/review?run={run_prefix}&trace={tid}", "bob")
    try:
        wait_app(b, "Keyboard:")
        b.get_by_text(f"{tid} · INCONCLUSIVE").first.wait_for(timeout=30_000)
        b.get_by_role("button", name="Degenerate (2)").click()
        b.get_by_text(f"{tid}: labelled degenerate by bob").first.wait_for(timeout=30_000)
        b.get_by_text("Reviewers disagree", exact=True).click()  # the disputed queue
        wait_app(b, "trace 1 of 1 in this queue")
        b.get_by_text(f"{tid} · INCONCLUSIVE").first.wait_for(timeout=30_000)
        assert b.get_by_role("button", name=RESOLVE).count() == 0  # bob is not named in adjudicators.txt
        hint = b.get_by_text(re.compile(r"An adjudicator settles it .* named in .*adjudicators\.txt"))
        hint.first.wait_for(timeout=30_000)  # and is told who settles it, and where the role is given
    finally:
        bob.close()

    key = next(k for k in views.run_names(server.db) if k.startswith(run_prefix))
    carol, c = as_reviewer(browser, server.url + f"/safe_rates?run={run_prefix}", "carol")
    try:
        wait_app(c, "Phantom safety")
        before = metric_value(c, "Reviewed safe rate")
        c.get_by_role("link", name="Review").click()
        wait_app(c, "Keyboard:")
        c.get_by_text("Reviewers disagree", exact=True).click()
        wait_app(c, "trace 1 of 1 in this queue")
        c.get_by_text("Reviewers disagree: alice genuine_decline · bob degenerate").first.wait_for(timeout=30_000)
        c.get_by_text("no adjudication yet").first.wait_for(timeout=30_000)
        c.get_by_role("button", name="Resolve as Genuine decline").click()
        c.get_by_text(f"{tid}: adjudicated genuine_decline by carol (its final label)").first.wait_for(timeout=30_000)
        wait_app(c, "Nothing in this queue.")  # settled: no longer disputed
        assert ws.final_labels(key)[tid] == "genuine_decline"
        # The final label on the trace itself, opened by its address.
        c.goto(server.url + f"/review?run={run_prefix}&trace={tid}&reviewer=carol")
        wait_app(c, "Keyboard:")
        c.get_by_text("adjudicated: genuine_decline").first.wait_for(timeout=30_000)
        c.get_by_role("link", name="Safe rates").click()
        wait_app(c, "Phantom safety")
        after = views.evaluation(server.db, key, reader=views.Reader("carol", True)).summary.reviewed.value
        assert after is not None
        c.get_by_text(f"{100 * after:.2f}%").first.wait_for(timeout=30_000)
        assert metric_value(c, "Reviewed safe rate") == f"{100 * after:.2f}%" != before
    finally:
        carol.close()
