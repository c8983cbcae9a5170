"""Issue 35 items 1 and 2 in real chromium: the review screen built around the trace (its header
and the labels beside a transcript that scrolls in its own box, each new trace opened at its top,
N / P stepping through messages, search hits that link to their message) and deep links that
scroll to the message they name, on Review, Trajectories and Score tables."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from scoring.dask_engine import table_writer
from scoring.importers.inspect_log import VerdictMap
from scoring.workspace import Workspace

from ..long_transcripts import trace_id, write
from ..test_engine import run_inline
from .conftest import Server, set_reviewer, wait_app

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def long_run(tmp_path_factory):
    d = tmp_path_factory.mktemp("review_screen")
    key = Workspace(d / "review.db").import_run(write(d / "long.jsonl")).run_key
    server = Server(d / "review.db", d / "streamlit.log")
    try:
        yield server, key[:12]
    finally:
        server.stop()


def open_review(page, server, key: str, extra: str = "", reviewer: str | None = "alice") -> None:
    page.goto(f"{server.url}/review?runs={key}&run={key}{extra}")
    wait_app(page, "Keyboard:", timeout=90_000)
    if reviewer:
        set_reviewer(page, reviewer)
    wait_app(page)


def no_focus(page) -> None:
    """No field holds the focus: the keys go to the page."""
    page.evaluate("() => document.activeElement && document.activeElement.blur()")


def scroller_ready(page) -> None:
    """The page's scroller is mounted (a component's script loads after the page has settled)."""
    page.wait_for_function("() => window.__litmusScroll && window.__litmusScroll.data", timeout=30_000)


def header(page, tid: str):
    return page.locator('[data-testid="stCode"]').filter(has_text=f"{tid} · INCONCLUSIVE").first


def message_text(page, trace: int, i: int):
    """The code block holding message ``i`` of trace ``trace`` (the fixture's words)."""
    kind = "turn" if i % 2 == 0 else "reply"
    return page.locator('[data-testid="stCode"]').filter(has_text=f"Trace {trace} {kind} {i}:").first


def transcript_box(page):
    """The scrolling element of the Review page's transcript box (the first keyed transcript-…)."""
    return page.locator('[class*="st-key-transcript-"]').first


def offset_in_box(page, locator) -> float:
    """How far below the top of the transcript's box the element is, in px."""
    box = transcript_box(page).bounding_box()
    el = locator.bounding_box()
    assert box and el
    return el["y"] - box["y"]


def test_labelling_from_message_20_opens_the_next_trace_at_its_top(long_run, page):
    server, key = long_run
    open_review(page, server, key)
    expect(header(page, trace_id(0))).to_be_visible()
    page.get_by_text("message 20 · user").first.scroll_into_view_if_needed()
    expect(message_text(page, 0, 20)).to_be_in_viewport()
    expect(message_text(page, 0, 0)).not_to_be_in_viewport()  # the reader is deep in the transcript
    no_focus(page)
    page.keyboard.press("1")
    page.get_by_text(f"{trace_id(0)}: labelled genuine_decline by alice").first.wait_for(timeout=60_000)
    wait_app(page)
    # The next trace's id is on screen, and its transcript opens at its first message.
    expect(header(page, trace_id(1))).to_be_in_viewport(timeout=30_000)
    expect(message_text(page, 1, 0)).to_be_in_viewport(timeout=30_000)
    expect(message_text(page, 1, 20)).not_to_be_in_viewport()
    assert page.evaluate("document.querySelector('[data-testid=stMain]').scrollTop") < 50


def test_at_1280_by_900_the_label_buttons_sit_beside_the_first_messages(long_run, page):
    server, key = long_run
    open_review(page, server, key)
    assert page.viewport_size == {"width": 1280, "height": 900}
    for label in ("Genuine decline (1)", "Degenerate (2)", "Early stop (3)", "Harm found (4)"):
        expect(page.get_by_role("button", name=label)).to_be_in_viewport()
    expect(header(page, trace_id(0))).to_be_in_viewport()
    expect(page.get_by_text("message 0 · user").first).to_be_in_viewport()
    expect(message_text(page, 0, 0)).to_be_in_viewport()
    expect(page.get_by_text(re.compile(r"^message 1 · assistant")).first).to_be_in_viewport()


def test_a_message_link_lands_with_that_message_in_view_on_review(long_run, page):
    server, key = long_run
    open_review(page, server, key, f"&trace={trace_id(0)}&message=5", reviewer=None)
    expect(message_text(page, 0, 5)).to_be_in_viewport(timeout=30_000)
    expect(page.get_by_text("▶ the linked message").first).to_be_in_viewport()
    assert abs(offset_in_box(page, page.get_by_text("▶ the linked message").first)) < 60  # at the box's top
    expect(header(page, trace_id(0))).to_be_in_viewport()  # and the header beside it


def test_a_message_link_lands_with_that_message_in_view_on_trajectories(long_run, page):
    server, key = long_run
    page.goto(f"{server.url}/trajectories?runs={key}&run={key}&trajectory={trace_id(0)}&message=25")
    wait_app(page, "Replay", timeout=90_000)
    wait_app(page)
    expect(message_text(page, 0, 25)).to_be_in_viewport(timeout=30_000)
    expect(page.get_by_text("▶ the linked message").first).to_be_in_viewport()


def test_n_and_p_step_to_the_next_and_previous_message(long_run, page):
    server, key = long_run
    open_review(page, server, key, reviewer=None)
    first = page.get_by_text("message 0 · user").first
    expect(first).to_be_in_viewport()
    scroller_ready(page)
    no_focus(page)
    page.keyboard.press("n")
    line = lambda i: page.get_by_text(re.compile(rf"^message {i} · ")).first  # noqa: E731
    page.wait_for_function("() => document.querySelector('[class*=\"st-key-transcript-\"]').scrollTop > 0",
                           timeout=10_000)
    assert abs(offset_in_box(page, line(1))) < 40
    page.keyboard.press("n")
    page.keyboard.press("n")
    page.wait_for_timeout(300)
    assert abs(offset_in_box(page, line(3))) < 40
    page.keyboard.press("p")
    page.wait_for_timeout(300)
    assert abs(offset_in_box(page, line(2))) < 40
    expect(header(page, trace_id(0))).to_be_in_viewport()  # the header never moved


def test_a_search_hit_is_a_link_to_its_message(long_run, page):
    server, key = long_run
    open_review(page, server, key, "&q=zanzibar", reviewer=None)
    page.get_by_text(re.compile(r"^search 'zanzibar': 1 line of this trace holds? it")).first.wait_for(
        timeout=30_000)
    link = page.get_by_role("link", name="message 7 (assistant), line 2")
    expect(link).to_be_visible()
    link.click()
    page.wait_for_url(re.compile(r"message=7"), timeout=30_000)
    wait_app(page)
    expect(message_text(page, 0, 7)).to_be_in_viewport(timeout=30_000)
    expect(page.get_by_text("▶ the linked message").first).to_be_in_viewport()


def test_a_message_link_lands_with_that_message_in_view_on_score_tables(long_run, page, tmp_path):
    server, _key = long_run
    results = run_inline([write(tmp_path / "long.jsonl")], tmp_path, 1 << 16)
    out = tmp_path / "out"
    table_writer.commit_results(str(out), str(out), {}, results)
    page.goto(server.url + "/score_tables")
    wait_app(page, "Score table (directory or URL)", timeout=90_000)
    box = page.get_by_label("Score table (directory or URL)")
    box.fill(str(out))
    box.press("Enter")
    wait_app(page, "Replay a trajectory (its id)")
    replay = page.get_by_label("Replay a trajectory (its id)")
    replay.fill(trace_id(2))
    replay.press("Enter")
    wait_app(page, "final output:")
    expect(message_text(page, 2, 25)).not_to_be_in_viewport()
    page.get_by_role("link", name="link to message 25").click()
    page.wait_for_url(re.compile(r"message=25"), timeout=30_000)
    wait_app(page)
    expect(message_text(page, 2, 25)).to_be_in_viewport(timeout=30_000)
    expect(page.get_by_text("▶ the linked message").first).to_be_in_viewport()


AGENTHARM_REFUSALS = "inspect_ai/agentharm/2025-03-30T15-24-56+02-00_harmful-task_F9R3gzDZt4vaZvt9varDiw.eval"


@pytest.fixture(scope="module")
def agentharm_review(tmp_path_factory, shared_real):
    d = tmp_path_factory.mktemp("review_shots")
    key = Workspace(d / "shots.db").import_run(shared_real / AGENTHARM_REFUSALS,
                                               verdict_map=VerdictMap.parse("agentharm_refusal")).run_key
    server = Server(d / "shots.db", d / "streamlit.log")
    try:
        yield server, key[:12]
    finally:
        server.stop()


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_the_review_screen_on_a_real_agentharm_log_in_both_themes(agentharm_review, browser, artifacts, theme):
    # The first screen at 1,280 x 900 as a reviewer sees it (docs/review-light.png, -dark.png are
    # copies), two N presses in: the trace's header and the four buttons beside the agent's answer.
    server, key = agentharm_review
    ctx = browser.new_context(viewport={"width": 1280, "height": 900}, color_scheme=theme)
    page = ctx.new_page()
    try:
        open_review(page, server, key)
        page.wait_for_function("() => !document.querySelector('[data-testid=stSkeleton]')", timeout=60_000)
        page.wait_for_timeout(1000)  # code blocks paint after the script ends
        expect(page.get_by_role("button", name="Genuine decline (1)")).to_be_in_viewport()
        expect(page.get_by_text("message 1 · user").first).to_be_in_viewport()
        assert page.locator('[data-testid="stException"]').count() == 0
        # N twice: the agent's answer at the box's top, the header and the buttons in place.
        scroller_ready(page)
        no_focus(page)
        page.keyboard.press("n")
        page.keyboard.press("n")
        page.wait_for_timeout(500)
        answer = page.locator('[class*="st-key-msg-"]').filter(
            has=page.get_by_text(re.compile(r"^message 2 · assistant"))).locator('[data-testid="stCode"]').first
        expect(answer).to_be_in_viewport()
        expect(page.locator('[data-testid="stCode"]').filter(has_text=" · INCONCLUSIVE").first).to_be_in_viewport()
        page.screenshot(path=str(artifacts / f"review-{theme}.png"))
        dark = page.evaluate("getComputedStyle(document.querySelector('[data-testid=stApp]')).backgroundColor")
        assert (dark != "rgb(255, 255, 255)") == (theme == "dark"), dark
    finally:
        ctx.close()
