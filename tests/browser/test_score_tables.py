"""The Score tables page in real chromium: a table written by the Dask engine, opened and replayed."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from scoring.dask_engine import table_writer
from scoring.workspace import views
from scoring.workspace.settings import settings_path

from ..conftest import SAMPLES
from ..s3_tables import CREDENTIALS, fleet_table, moto_server, profile_toml
from ..test_engine import run_inline
from .conftest import Server, wait_app
from .test_flows import fits, metric_value

pytestmark = pytest.mark.browser


def test_open_a_score_table_and_replay_a_trajectory(server, page, artifacts, tmp_path):
    run = tmp_path / "observed-m1.jsonl"
    shutil.copyfile(SAMPLES / "observed-m1.jsonl", run)
    results = run_inline([run], tmp_path, 1 << 16)
    out = tmp_path / "out"
    table_writer.commit_results(str(out), str(out), {}, results)
    s = results[0].summary

    page.goto(server.url + "/score_tables")
    wait_app(page, "Score table (directory or URL)")
    box = page.get_by_label("Score table (directory or URL)")
    box.fill(str(out))
    box.press("Enter")
    wait_app(page, "UNSCORED by reason")
    assert metric_value(page, "Strict") == f"{100 * s['safe_rate_strict']:.2f}%"
    assert metric_value(page, "UNSCORED") == f"{s['unscored']:,}"
    # Every figure and its name are read whole at 1,280 px (in six columns "+0.73 pp" read "+0.73 …").
    assert page.locator('[data-testid="stMetric"]').count() == 6
    assert fits(page, '[data-testid="stMetric"] *') == []
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
    button = page.get_by_role("button", name="genuine decline")
    for _attempt in range(3):  # a rerun still in flight can redraw the field and drop what was typed (CI, loaded)
        field.fill("ana")
        field.press("Enter")
        try:
            button.wait_for(timeout=20_000)
            break
        except PlaywrightTimeout:
            continue
    button.wait_for(timeout=10_000)
    button.click()
    wait_app(page, "labelled genuine_decline by ana")
    num, den = s["safe"] + 1, s["safe"] + s["unsafe"] + 1
    page.get_by_text(f"{100 * num / den:.2f}%").first.wait_for(timeout=30_000)
    assert metric_value(page, "Reviewed") == f"{100 * num / den:.2f}%"
    # The run made a run of the workspace: selected in the sidebar, drawn on Safe rates with the
    # label given through the table counted in its reviewed rate.
    page.get_by_role("button", name="Add to the workspace's runs").click()
    wait_app(page, "is now in the workspace and selected")
    name = views.run_names(server.db)[results[0].run_key]  # no side log: not the bundled sample's name
    assert name == "model-alpha-2026-10 · observed-m1"
    page.locator(f'[data-testid="stSidebar"] [data-tag] span[title="{name}"]').wait_for(timeout=30_000)  # its chip
    page.get_by_role("link", name="Safe rates").click()
    page.wait_for_url("**/safe_rates**", timeout=30_000)
    page.get_by_text(f"{100 * num / den:.2f}%").first.wait_for(timeout=60_000)
    page.screenshot(path=str(artifacts / "score_table_run_in_safe_rates.png"), full_page=True)


FLEET_RUNS = int(os.environ.get("LITMUS_BROWSER_FLEET_RUNS", "1000"))
"""Runs in the S3 table the browser opens: enough that the run picker and the table's index are
long, at a size ``make test`` can afford. The page at 10,000 runs is
``test_score_tables_page.py``'s (AppTest); the 10,000-run table's opening times are
``benches/dask_engine.py``'s (``LITMUS_BROWSER_FLEET_RUNS=10000`` runs this test at that size)."""


def _times(path: Path) -> list[float]:
    return [json.loads(line)["seconds"] for line in path.read_text().splitlines()] if path.exists() else []


def _timed(page, times: Path, act, text: str | None = None) -> float:
    """The server's time for the script runs ``act`` set off (the page's script, start to finish),
    once the page has settled."""
    before = len(_times(times))
    act()
    deadline = time.monotonic() + 60
    while len(_times(times)) == before and time.monotonic() < deadline:  # its run has ended
        page.wait_for_timeout(100)
    wait_app(page, text)
    page.wait_for_timeout(300)  # a run the action queued behind the first
    wait_app(page)
    assert len(_times(times)) > before, "the action ran no script"
    return sum(_times(times)[before:])


def test_a_table_of_many_runs_in_s3_opens_by_the_workspaces_profile(page, artifacts, tmp_path):
    """A moto S3 server holds a score table of ``FLEET_RUNS`` runs; the workspace's settings name a
    storage profile for its bucket (the endpoint, and the environment variables that hold the
    credentials, set only in the server's environment). The page opens the table by its URL,
    shows the first run, reruns, and shows the last run (its summary and aggregates read only
    then). The server's time for each is printed (benches/RESULTS.md), not asserted: the first
    opening also pays, once per server process, for starting the S3 client (importing s3fs and
    botocore); the same table opened again by another spelling of its URL (not cached) does not."""
    with moto_server(tmp_path / "moto.log") as s3:
        location, ids, first = fleet_table(s3, "evals", tmp_path, FLEET_RUNS)
        db = tmp_path / "browser.db"
        settings_path(db).parent.mkdir(exist_ok=True)
        settings_path(db).write_text(profile_toml(s3["endpoint_url"], "s3://evals/"))
        times = tmp_path / "script-times.jsonl"
        server = Server(db, tmp_path / "streamlit.log", env={**CREDENTIALS, "LITMUS_SCRIPT_TIMES": str(times)},
                        module="tests.browser.timed_streamlit")
        try:
            page.goto(server.url + "/score_tables")
            wait_app(page, "Score table (directory or URL)")
            box = page.get_by_label("Score table (directory or URL)")
            box.fill(location)
            cold = _timed(page, times, lambda: box.press("Enter"), "UNSCORED by reason")
            page.get_by_text("storage profile: lab").first.wait_for(timeout=30_000)
            box.fill(location + "/")
            opened = _timed(page, times, lambda: box.press("Enter"), "UNSCORED by reason")
            assert metric_value(page, "Strict") == f"{100 * first['safe_rate_strict']:.2f}%"
            assert metric_value(page, "Trajectories") == f"{first['trajectories']:,}"

            def rerun() -> None:
                page.locator("h1").first.click()
                page.keyboard.press("r")

            reruns = [_timed(page, times, rerun) for _ in range(3)]
            runs = page.get_by_label("Run", exact=True)

            def pick_last() -> None:
                runs.click()
                page.keyboard.type(ids[-1])
                page.keyboard.press("Enter")

            other = _timed(page, times, pick_last, "UNSCORED by reason")
            chosen = page.locator('[data-testid="stSelectbox"]').filter(has_text="Run").first
            assert ids[-1] in (chosen.locator("input").first.input_value() + chosen.inner_text())
            page.screenshot(path=str(artifacts / "score_tables_s3_fleet.png"), full_page=True)
        except Exception:
            page.screenshot(path=str(artifacts / "score_tables_s3_fleet-failed.png"), full_page=True)
            raise
        finally:
            server.stop()
    print(f"\nscore table of {FLEET_RUNS:,} runs on moto S3, browser, server time: open {opened:.2f} s (the server "
          f"process's first S3 table: {cold:.2f} s), rerun "
          f"{sorted(reruns)[1]:.2f} s (median of 3), another run shown {other:.2f} s (load {os.getloadavg()[0]:.1f})")
    assert opened > 0 and other > 0
