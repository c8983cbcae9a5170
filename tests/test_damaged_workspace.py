"""The app checks the workspace when it opens (issue 24): a damaged file, or one of a newer
schema, is refused with the CLI's own message, never read into figures."""

from __future__ import annotations

import os
import sqlite3

import pytest
from click.testing import CliRunner
from streamlit.testing.v1 import AppTest

from pages._shared import loaders
from scoring.cli import main
from scoring.workspace import MIGRATIONS, Workspace

from .conftest import ROOT, SAMPLES


def damaged(db) -> None:
    """Garbage over a page in the middle of the file (the runs' rows), the WAL checkpointed first."""
    with sqlite3.connect(db) as con:
        con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    size = os.path.getsize(db)
    with open(db, "r+b") as fh:
        fh.seek(size // 2 // 4096 * 4096)
        fh.write(b"\xa5" * 4096)


def newer(db) -> None:
    with sqlite3.connect(db) as con:
        con.execute(f"PRAGMA user_version = {len(MIGRATIONS) + 1}")


@pytest.mark.parametrize("harm", [damaged, newer])
def test_the_app_refuses_a_damaged_workspace_with_the_clis_message(tmp_path, monkeypatch, harm):
    db = tmp_path / "w.db"
    Workspace(db).import_run(SAMPLES / "observed-m1.jsonl", payloads=SAMPLES / "observed-m1.payloads.jsonl")
    harm(db)
    cli = CliRunner().invoke(main, ["runs", "--db", str(db)])
    assert cli.exit_code != 0
    message = cli.output.strip().splitlines()[-1].removeprefix("error: ")
    assert str(db) in message
    monkeypatch.setattr(loaders, "DB_PATH", db)
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=90)
    at.run()
    assert not at.exception, at.exception
    shown = " ".join(e.value for e in at.error) + " ".join(c.value for c in at.code)
    # The markdown of st.error escapes, and shows a line break where the terminal spells it out
    # (SQLite's quick_check names a damaged page on a line of its own): the words are the same.
    assert message.replace("⟨U+000A⟩", "\n") in shown.replace("\\", "")
    assert not at.metric  # no figure drawn from the damaged file
