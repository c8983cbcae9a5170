"""Issue 26, the replay in real chromium: LITMUS's Prosecutor instruction and Verifier turns, an
AgentHarm sample's judge explanation, category and timed event timeline (as Inspect View shows
them), a link per message, and search hits marked in the transcript (as Docent does)."""

from __future__ import annotations

import json
import re

import pytest
from playwright.sync_api import expect

from scoring.workspace import Workspace

from ..conftest import require_real_logs, shared_real_path
from ..test_transcript import AGENTHARM, litmus_line
from .conftest import Server, wait_app

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def replays(tmp_path_factory):
    real = require_real_logs(shared_real_path())
    d = tmp_path_factory.mktemp("replays")
    log = d / "litmus-run.jsonl"
    log.write_text(json.dumps(litmus_line()) + "\n")
    ws = Workspace(d / "replays.db")
    keys = {"litmus": ws.import_run(log).run_key, "agentharm": ws.import_run(real / AGENTHARM).run_key}
    server = Server(d / "replays.db", d / "streamlit.log")
    try:
        yield server, keys
    finally:
        server.stop()


def open_replay(page, server, key: str, trajectory: str, extra: str = "") -> None:
    page.goto(f"{server.url}/trajectories?runs={key[:12]}&trajectory={trajectory}{extra}")
    wait_app(page, "Replay", timeout=90_000)
    wait_app(page)


def test_a_litmus_replay_shows_the_prosecutor_and_the_verifier(replays, page, artifacts):
    server, keys = replays
    open_replay(page, server, keys["litmus"], "row1")
    page.get_by_text("message 0 · user (Prosecutor)").first.wait_for(timeout=30_000)
    page.get_by_text("message 1 · assistant (Defendant)").first.wait_for(timeout=30_000)
    page.get_by_text(re.compile(r"event timeline: 7 events logged by the harness \(Prosecutor, Verifier, "
                                r"Analyzer\)")).first.wait_for(timeout=30_000)
    page.screenshot(path=str(artifacts / "replay-litmus.png"), full_page=True)
    # The Verifier's command and what it returned, in full.
    # Typed into the box and chosen with Enter: a click on the option raced the page's reruns.
    box = page.get_by_role("combobox", name="An event in full")
    box.click()
    box.press_sequentially("Verifier execute")
    page.get_by_role("option").filter(has_text="5 · Verifier execute_command").wait_for(timeout=30_000)
    box.press("Enter")
    code = page.locator('[data-testid="stCode"]').filter(has_text="systemctl is-active apparmor")
    expect(code.first).to_contain_text("→ inactive", timeout=30_000)


def test_an_agentharm_replay_has_the_explanation_the_category_and_a_timeline(replays, page, artifacts):
    server, keys = replays
    open_replay(page, server, keys["agentharm"], "1-1-epoch1")
    page.get_by_text(re.compile(r"^score model_graded_qa: ")).first.wait_for(timeout=30_000)
    page.get_by_text("its explanation:").first.wait_for(timeout=30_000)
    page.get_by_text("sample metadata:").first.wait_for(timeout=30_000)
    page.get_by_text(re.compile(r"event timeline: \d+ events logged by the harness \(model, tool")).first.wait_for(
        timeout=30_000)
    page.screenshot(path=str(artifacts / "replay-agentharm.png"), full_page=True)


def test_a_message_link_opens_the_replay_at_that_message_after_a_reload(replays, page):
    server, keys = replays
    open_replay(page, server, keys["litmus"], "row1")
    page.get_by_role("link", name="link to message 1").click()
    page.wait_for_url(re.compile(r"message=1"), timeout=30_000)
    page.get_by_text("▶ the linked message").first.wait_for(timeout=30_000)
    page.reload()
    wait_app(page, "Replay", timeout=90_000)
    page.get_by_text("▶ the linked message").first.wait_for(timeout=30_000)
    assert "trajectory=row1" in page.url


def test_search_hits_are_listed_and_marked_in_the_transcript(replays, page):
    server, keys = replays
    open_replay(page, server, keys["litmus"], "row1", "&q=apparmor")
    page.get_by_text(re.compile(r"^search 'apparmor': \d+ lines of this trace hold it")).first.wait_for(timeout=30_000)
    page.get_by_text(re.compile("▶ marks the 1 line holding the search")).first.wait_for(timeout=30_000)
    marked = page.locator('[data-testid="stCode"]').filter(has_text="▶ Please stop AppArmor now.")
    expect(marked.first).to_be_visible(timeout=30_000)
