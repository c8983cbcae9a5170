"""The Score tables page in real chromium: a table written by the Dask engine, opened and replayed."""

from __future__ import annotations

import shutil

import pytest

from scoring import engine

from ..conftest import SAMPLES
from ..test_engine import run_inline
from .conftest import wait_app
from .test_flows import metric_value

pytestmark = pytest.mark.browser


def test_open_a_score_table_and_replay_a_trajectory(server, page, artifacts, tmp_path):
    run = tmp_path / "observed-m1.jsonl"
    shutil.copyfile(SAMPLES / "observed-m1.jsonl", run)
    results = run_inline([run], tmp_path, 1 << 16)
    out = tmp_path / "out"
    engine._commit(str(out), str(out), {}, results)
    s = results[0].summary

    page.goto(server.url + "/score_tables")
    wait_app(page, "Score table (directory or URL)")
    box = page.get_by_label("Score table (directory or URL)")
    box.fill(str(out))
    box.press("Enter")
    wait_app(page, "UNSCORED by reason")
    assert metric_value(page, "Strict") == f"{100 * s['safe_rate_strict']:.2f}%"
    assert metric_value(page, "UNSCORED") == f"{s['unscored']:,}"
    replay = page.get_by_label("Replay a trajectory (its id)")
    replay.fill("observed-m1-t00079")
    replay.press("Enter")
    wait_app(page, "final output:")
    page.get_by_text("observed-m1-t00079").first.wait_for(timeout=30_000)
    page.screenshot(path=str(artifacts / "score_tables.png"), full_page=True)
    # Review from the table: an Inconclusive trajectory, a reviewer, a label; the reviewed rate moves.
    assert metric_value(page, "Reviewed") == f"{100 * s['safe_rate_reviewed']:.2f}%"
    replay.fill("observed-m1-t00025")
    replay.press("Enter")
    wait_app(page, "Labels: hidden until you label this trace")
    field = page.get_by_label("Reviewer (required to label)")
    field.fill("ana")
    field.press("Enter")
    page.get_by_role("button", name="genuine decline").wait_for(timeout=30_000)
    page.get_by_role("button", name="genuine decline").click()
    wait_app(page, "labelled genuine_decline by ana")
    num, den = s["safe"] + 1, s["safe"] + s["unsafe"] + 1
    page.get_by_text(f"{100 * num / den:.2f}%").first.wait_for(timeout=30_000)
    assert metric_value(page, "Reviewed") == f"{100 * num / den:.2f}%"
    # The run made a run of the workspace: selected in the sidebar, drawn on Safe rates with the
    # label given through the table counted in its reviewed rate.
    page.get_by_role("button", name="Add to the workspace's runs").click()
    wait_app(page, "is now in the workspace and selected")
    page.get_by_text(f"observed-m1 ·{results[0].run_key[:6]}").first.wait_for(timeout=30_000)  # its chip
    page.get_by_role("link", name="Safe rates").click()
    page.wait_for_url("**/safe_rates**", timeout=30_000)
    page.get_by_text(f"{100 * num / den:.2f}%").first.wait_for(timeout=60_000)
    page.screenshot(path=str(artifacts / "score_table_run_in_safe_rates.png"), full_page=True)
