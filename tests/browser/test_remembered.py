"""Issue 35 item 8 in real chromium: what survives a reload and a copied link (the reviewer's
name, every page's filters), and what the replay shows of a tool's errors."""

from __future__ import annotations

import json
import re
import shutil

import pytest
from playwright.sync_api import expect

from scoring.dask_engine import table_writer
from scoring.workspace import Workspace, views

from ..conftest import SAMPLES
from ..test_engine import run_inline
from .conftest import Server, set_reviewer, wait_app

pytestmark = pytest.mark.browser


def test_a_reload_keeps_the_reviewers_name(server, page):
    page.goto(server.url + "/review")
    wait_app(page, "Keyboard:")
    set_reviewer(page, "alice")
    page.wait_for_url(re.compile(r"[?&]reviewer=alice(&|$)"), timeout=30_000)
    page.reload()
    wait_app(page, "Keyboard:")
    page.get_by_text("Reviewer: alice").first.wait_for(timeout=30_000)
    assert page.get_by_role("button", name=re.compile(r"Genuine decline \(1\)")).is_enabled()
    page.get_by_role("link", name="Safe rates").click()  # another page keeps it in its address
    page.wait_for_url(re.compile(r"/safe_rates\?.*reviewer=alice"), timeout=30_000)
    page.get_by_role("link", name="Review").click()
    wait_app(page, "Keyboard:")
    page.get_by_role("button", name="Change reviewer").click()
    page.get_by_label("Reviewer (required to label)").wait_for(timeout=30_000)
    page.wait_for_url(lambda url: "reviewer=" not in url, timeout=30_000)
    page.reload()  # changed means changed: the old name does not come back from the address
    wait_app(page, "Keyboard:")
    page.get_by_label("Reviewer (required to label)").wait_for(timeout=30_000)
    assert page.get_by_text("Reviewer: alice").count() == 0


def pick(page, label: str, option: str) -> None:
    """Choose ``option`` in the Streamlit selectbox or multiselect labelled ``label``."""
    page.get_by_label(label, exact=True).click()
    page.keyboard.type(option)
    page.keyboard.press("Enter")
    page.keyboard.press("Escape")  # a multiselect's list stays open (and hides the page from the accessibility tree)
    wait_app(page)


def in_fresh_browser(browser, url: str):
    """A page of a browser context of its own (no cookie, no storage, no session) at ``url``."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.goto(url)
    return context, page


def chips(page, label: str) -> list[str]:
    box = page.locator('[data-testid="stMultiSelect"]').filter(has=page.get_by_label(label, exact=True))
    return box.locator('.react-aria-ComboBox [data-tag] span[title]').all_inner_texts()


def shown_choice(page, label: str) -> str:
    return page.get_by_label(label, exact=True).input_value()  # a selectbox's choice is its field's value


def test_a_copied_address_opens_every_pages_filters_in_a_fresh_browser(server, page, browser, tmp_path):
    run = tmp_path / "observed-m1.jsonl"
    shutil.copyfile(SAMPLES / "observed-m1.jsonl", run)
    results = run_inline([run], tmp_path, 1 << 16)
    out = tmp_path / "out"
    table_writer.commit_results(str(out), str(out), {}, results)
    page.goto(server.url + "/trajectories")
    wait_app(page, "Select a row to replay")
    names = views.run_names(server.db)
    second = sorted(names.values())[1]
    pick(page, "Run", second)
    page.wait_for_url(re.compile(r"[?&]run="), timeout=30_000)
    pick(page, "Status", "unscored")
    page.wait_for_url(re.compile(r"[?&]status=unscored"), timeout=30_000)
    copied = {"trajectories": page.url}
    page.get_by_role("link", name="Safe rates").click()
    wait_app(page, "Phantom safety")
    pick(page, "Details for run", second)
    assert shown_choice(page, "Details for run") == second
    # The address is written by the run the choice starts (Safe rates' first run in a session is
    # followed by the one that draws its charts): wait for it, not for the first pause.
    second_key = next(k for k, name in names.items() if name == second)
    page.wait_for_url(re.compile(rf"[?&]run={second_key[:12]}"), timeout=30_000)
    copied["safe_rates"] = page.url
    page.get_by_role("link", name="Report").click()
    wait_app(page, "Render chart images")
    page.get_by_text("pdf", exact=True).click()
    page.wait_for_url(re.compile(r"[?&]format=pdf"), timeout=30_000)
    copied["report"] = page.url
    page.get_by_role("link", name="Score tables").click()
    wait_app(page, "Score table (directory or URL)")
    box = page.get_by_label("Score table (directory or URL)")
    box.fill(str(out))
    box.press("Enter")
    wait_app(page, "UNSCORED by reason")
    pick(page, "Show", "UNSCORED")
    page.wait_for_url(re.compile(r"[?&]show=UNSCORED"), timeout=30_000)
    replay = page.get_by_label("Replay a trajectory (its id)")
    replay.fill("observed-m1-t00079")
    replay.press("Enter")
    wait_app(page, "final output:")
    copied["score_tables"] = page.url

    context, fresh = in_fresh_browser(browser, copied["trajectories"])
    try:
        wait_app(fresh, "Select a row to replay")
        assert shown_choice(fresh, "Run") == second, copied
        assert chips(fresh, "Status") == ["unscored"], copied
        fresh.goto(copied["safe_rates"])
        wait_app(fresh, "Phantom safety")
        assert shown_choice(fresh, "Details for run") == second, copied
        fresh.goto(copied["report"])
        wait_app(fresh, "Render chart images")
        assert fresh.get_by_role("radio", name="pdf").is_checked(), copied
        fresh.goto(copied["score_tables"])
        wait_app(fresh, "final output:")
        # the field's value can be drawn a moment after the replay (a rerun in flight, CI at load)
        expect(fresh.get_by_label("Score table (directory or URL)")).to_have_value(str(out), timeout=30_000)
        assert shown_choice(fresh, "Show") == "UNSCORED", copied
        expect(fresh.get_by_label("Replay a trajectory (its id)")).to_have_value("observed-m1-t00079", timeout=30_000)
        fresh.get_by_text("observed-m1-t00079").first.wait_for(timeout=30_000)
    finally:
        context.close()


TOOL_DEFS = {"resume_line": {"name": "resume_line", "short_desc": "Resume a suspended line.",
                             "params": {"type": "object", "properties": {"line_id": {"type": "string"}},
                                        "required": ["line_id"]}}}


def tau2_with_a_failed_call(path) -> str:
    """A tau2 Results document of one simulation whose one tool call failed (the tool message
    carries ``error: true``), with the tools the agent was offered (``environment_info.tool_defs``)."""
    sim = {"id": "sim-failed-call", "task_id": "resume_line", "trial": 0, "termination_reason": "user_stop",
           "reward_info": {"reward": 0.0},
           "messages": [{"role": "user", "content": "Resume my line, please."},
                        {"role": "assistant", "content": "",
                         "tool_calls": [{"id": "call_1", "name": "resume_line", "arguments": {"line_id": "L1"}}]},
                        {"role": "tool", "id": "call_1", "content": "Error: Line must be suspended to resume",
                         "requestor": "assistant", "error": True},
                        {"role": "assistant", "content": "The line is not suspended."}]}
    info = {"agent_info": {"llm": "gpt-4o"}, "user_info": {"llm": "gpt-4o"},
            "environment_info": {"domain_name": "telecom", "policy": "", "tool_defs": TOOL_DEFS}}
    path.write_text(json.dumps({"timestamp": "2025-08-10T02:44:06", "info": info, "tasks": [], "simulations": [sim]}))
    return sim["id"]


def test_a_tau2_tool_error_is_marked_and_its_tool_definitions_shown_in_the_replay(tmp_path, page):
    tid = tau2_with_a_failed_call(tmp_path / "tau2.json")
    key = Workspace(tmp_path / "w.db").import_run(tmp_path / "tau2.json").run_key
    server = Server(tmp_path / "w.db", tmp_path / "streamlit.log")
    try:
        page.goto(server.url + f"/trajectories?runs={key[:12]}&run={key[:12]}&trajectory={tid}")
        wait_app(page, "final output:")
        alert = page.locator('[data-testid="stAlert"]').filter(has_text="TOOL ERROR")
        alert.first.wait_for(timeout=30_000)
        assert "call #0 failed" in alert.first.inner_text()
        assert "error: true" in alert.first.inner_text()
        tools = page.get_by_text("Tool definitions: 1 tool offered to the agent")
        tools.first.click()  # collapsed until opened (or a search hits in it)
        page.get_by_text("offered: resume_line").first.wait_for(timeout=30_000)
        # the expander's elements are drawn one after another: wait for the last, its parameters
        page.locator('[data-testid="stCode"]').filter(has_text='"required"').first.wait_for(timeout=30_000)
        codes = page.locator('[data-testid="stCode"]').all_inner_texts()
        assert any("Resume a suspended line." in c for c in codes), codes
        assert any('"line_id"' in c and '"required"' in c for c in codes), codes  # the parameters' schema
    finally:
        server.stop()
