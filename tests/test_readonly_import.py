"""``import`` into a workspace that cannot be written blames the workspace, not its input
(issue 34 item 7): exit 2, one message naming the workspace (or the folder of its copies)."""

from __future__ import annotations

from pathlib import Path

import pytest

from scoring.workspace import Workspace

from .conftest import SAMPLES
from .test_hostile_core import _immutable, _run_cli


def small_runs(folder: Path) -> list[Path]:
    """Two small runs of their own (the bundled sample's header and a few of its records each)."""
    header, *records = (SAMPLES / "compare-m2.jsonl").read_text().splitlines(keepends=True)
    out = []
    for i in range(2):
        path = folder / f"run{i}.jsonl"
        path.write_text(header + "".join(records[i * 20:(i + 1) * 20]))
        out.append(path)
    return out


@pytest.mark.parametrize("what", ["file", "folder", "folder, no copies folder yet"])
def test_import_into_a_read_only_workspace_names_the_workspace_not_the_input(tmp_path, what):
    home = tmp_path / "ws"
    home.mkdir()
    db = home / "w.db"
    Workspace(db)
    if not what.endswith("yet"):
        (home / "w.db.d").mkdir(exist_ok=True)
    runs = small_runs(tmp_path)
    with _immutable(*([db] if what == "file" else [db, home])):
        done = _run_cli("import", *runs, "--db", db)
    assert done.returncode == 2, done.stderr
    errors = [ln for ln in done.stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1, done.stderr  # once, for the workspace: not once per input
    assert str(db) in errors[0] and "read-only" in errors[0], errors
    assert "run0" not in errors[0] and "run1" not in errors[0] and "cannot read" not in errors[0], errors
    assert "Traceback" not in done.stderr


def test_a_copies_folder_that_cannot_be_written_is_named_not_the_input(tmp_path):
    db = tmp_path / "w.db"
    Workspace(db)
    (tmp_path / "w.db.d").mkdir(exist_ok=True)
    run, _other = small_runs(tmp_path)
    with _immutable(tmp_path / "w.db.d"):
        done = _run_cli("import", run, "--db", db)
    assert done.returncode == 2, done.stderr
    errors = [ln for ln in done.stderr.splitlines() if ln.startswith("error:")]
    assert errors and str(tmp_path / "w.db.d") in errors[0] and "run0" not in errors[0], done.stderr
