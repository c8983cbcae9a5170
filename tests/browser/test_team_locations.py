"""A team-mode server, typed at with hostile locations in every field that takes text on the
Score tables and Runs pages: nothing opened, nothing fetched, no crash, one message whether or
not a path exists; a score table arrives by upload instead (issue 24), and one whose keys climb
out of it is named and never offered (issue 34)."""

from __future__ import annotations

from pathlib import Path

import pytest

from scoring.dask_engine import table_zip
from scoring.workspace.settings import settings_path

from ..test_table_traversal import VICTIM_ID, VICTIM_RUN, hostile, victim_table
from ..test_table_upload import TRAJECTORY, zip_folder, zip_of
from ..test_team_tables import Listener, make_table
from .conftest import Server, wait_app

pytestmark = pytest.mark.browser


def test_a_team_mode_server_opens_no_typed_location(tmp_path, page, artifacts):
    out, run = make_table(tmp_path / "scores", "nightly")
    db = tmp_path / "team.db"
    settings_path(db).parent.mkdir()
    settings_path(db).write_text(f'score_table_roots = ["{tmp_path / "scores"}"]\n')
    listener = Listener()
    server = Server(db, tmp_path / "streamlit.log", env={"LITMUS_REVIEW_TEAM_MODE": "1"})
    try:
        hostile = [str(run), str(tmp_path / "no-such-file.jsonl"), "/etc/passwd", "/etc/no-such-file",
                   f"file://{run}", f"{listener.url}/summary.json", f"{listener.url}/latest/meta-data",
                   f"zip://summary.json::data:text/plain;base64,{'QQ' * 40}", "dask://127.0.0.1:8786/x",
                   "reference://x", "unknownproto://x", "s3://bucket/x", str(out)]
        page.goto(server.url + "/score_tables?location=" + f"{listener.url}/q")
        wait_app(page, "Replay a trajectory (its id)")
        assert page.get_by_label("Score table (directory or URL)").count() == 0  # nothing takes a location
        page.get_by_text(f"source {run}").first.wait_for(timeout=30_000)  # the operator's table, from its root
        replay = page.get_by_label("Replay a trajectory (its id)")
        messages = set()
        for text in hostile:
            replay.fill(text)
            replay.press("Enter")
            wait_app(page, "No trajectory with this id in the run.")
            assert page.locator('[data-testid="stException"]').count() == 0, text
            messages.add(page.locator('[data-testid="stAlert"]').last.inner_text())
        assert len(messages) == 1, messages  # the same answer whether or not a path exists
        replay.fill("observed-m1-t00079")
        replay.press("Enter")
        wait_app(page, "final output:")
        page.screenshot(path=str(artifacts / "team_score_tables.png"), full_page=True)
        page.goto(server.url + "/runs")
        wait_app(page, "Imported runs")
        page.get_by_role("tab", name="Import from a path").click()
        page.get_by_text("importing a path on the server is off").first.wait_for(timeout=30_000)
        assert page.get_by_label("Path on this machine").count() == 0
        assert page.locator('[data-testid="stException"]').count() == 0
        assert listener.requests == []  # no request to a user-given URL
    finally:
        server.stop()
        listener.close()


def test_a_team_mode_server_opens_an_uploaded_table(tmp_path, page, artifacts):
    """No roots configured: a hostile zip is a message; a zip of a table and its run is opened
    from the upload and replays (the run's file on this machine removed: the zip's is read)."""
    out, run = make_table(tmp_path / "scored" / "nightly", "table")
    good, evil = tmp_path / "nightly.zip", tmp_path / "evil.zip"
    good.write_bytes(zip_folder(out.parent))
    evil.write_bytes(zip_of([("t/summary.json", b"{}"), ("../../escape.json", b"{}")]))
    run.unlink()
    server = Server(tmp_path / "team.db", tmp_path / "streamlit.log", env={"LITMUS_REVIEW_TEAM_MODE": "1"})
    try:
        page.goto(server.url + "/score_tables")
        wait_app(page, "No score table to open")
        uploader = page.locator('[data-testid="stFileUploaderDropzoneInput"]').first
        uploader.set_input_files(str(evil))
        wait_app(page, "not a score table that can be opened")
        page.get_by_text("unsafe member path").first.wait_for(timeout=30_000)
        assert not (tmp_path.parent / "escape.json").exists()
        uploader.set_input_files(str(good))
        wait_app(page, "Replay a trajectory (its id)")
        box = page.locator('[data-testid="stSelectbox"]').first
        pick = box.inner_text() + " ".join(i.input_value() for i in box.locator("input").all())
        assert "nightly.zip (uploaded): nightly/table" in pick, pick
        replay = page.get_by_label("Replay a trajectory (its id)")
        replay.fill(TRAJECTORY)
        replay.press("Enter")
        wait_app(page, "final output:")
        assert page.locator('[data-testid="stException"]').count() == 0
        page.screenshot(path=str(artifacts / "team_score_table_upload.png"), full_page=True)
    finally:
        server.stop()


def test_a_team_mode_server_with_a_traversal_upload_stays_up_and_shows_nothing_outside(tmp_path, page, artifacts):
    """Issue 34: an upload whose index names ``x/../…/VICTIM/trajectories/run_key=KEY`` for its
    run's key, kept beside a good upload and the newest of them (every visitor's default before):
    the page offers the good table, names the other with why, and shows nothing of the victim's
    table (another team's, on the same server, under no root); uploading it again is refused."""
    victim, victim_key = victim_table(tmp_path / "victim")
    good, _run = make_table(tmp_path / "good" / "nightly", "table")
    bad, _run = make_table(tmp_path / "bad" / "evil", "t")
    hostile(bad, victim, victim_key, "both")
    db = tmp_path / "team.db"
    table_zip.unpack(zip_folder(good.parent), "nightly.zip", Path(f"{db}.d"))
    table_zip.unpack(zip_folder(bad.parent), "evil.zip", Path(f"{db}.d"))  # kept as an older version kept it
    evil = tmp_path / "evil.zip"
    evil.write_bytes(zip_folder(bad.parent))
    server = Server(db, tmp_path / "streamlit.log", env={"LITMUS_REVIEW_TEAM_MODE": "1"})
    try:
        page.goto(server.url + "/score_tables")
        wait_app(page, "Replay a trajectory (its id)")
        page.get_by_text("cannot be opened and is not offered").first.wait_for(timeout=30_000)
        box = page.locator('[data-testid="stSelectbox"]').first
        pick = box.inner_text() + " ".join(i.input_value() for i in box.locator("input").all())
        assert "nightly.zip (uploaded): nightly/table" in pick, pick
        body = page.locator("body").inner_text()
        assert "evil.zip (uploaded): evil/t: index.json names" in body
        assert VICTIM_RUN not in body and str(victim) not in body
        assert page.locator('[data-testid="stException"]').count() == 0
        page.screenshot(path=str(artifacts / "team_score_tables_traversal.png"), full_page=True)
        page.get_by_label("Replay a trajectory (its id)").fill(VICTIM_ID)
        page.get_by_label("Replay a trajectory (its id)").press("Enter")
        wait_app(page, "No trajectory with this id in the run.")
        page.locator('[data-testid="stFileUploaderDropzoneInput"]').first.set_input_files(str(evil))
        wait_app(page, "not a score table that can be opened")
        page.get_by_text("the upload is not kept").first.wait_for(timeout=30_000)
        body = page.locator("body").inner_text()
        assert VICTIM_RUN not in body and str(victim) not in body  # (a field's value is not in the text)
        assert page.locator('[data-testid="stException"]').count() == 0
    finally:
        server.stop()
