"""The command line over many files: every file read, each failure named with its file, the
worst exit status at the end, side logs paired by name and never scored as runs."""

from __future__ import annotations

import json
import os
import shutil

import pytest
from click.testing import CliRunner

from scoring.cli import main

from .conftest import SAMPLES


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


@pytest.fixture()
def folder(tmp_path):
    shutil.copy(SAMPLES / "observed-m1.jsonl", tmp_path)
    shutil.copy(SAMPLES / "observed-m1.payloads.jsonl", tmp_path)
    (tmp_path / "empty.jsonl").write_bytes(b"")
    return tmp_path


def test_every_file_is_read_each_failure_named_and_side_logs_paired_not_scored(folder):
    paths = [*sorted(folder.glob("*.jsonl")), folder / "missing.jsonl"]  # what `score DIR/*.jsonl x` passes
    res = run("score", *paths, "--json")
    assert res.exit_code == 2
    objs = [json.loads(line) for line in res.stdout.splitlines()]
    assert [o["run_id"] for o in objs] == ["observed-m1"]  # the side log was not scored as a run
    assert objs[0]["recapture"]["source"].endswith("observed-m1.payloads.jsonl")
    assert f"side log {folder / 'observed-m1.payloads.jsonl'}" in res.stderr and "is used with" in res.stderr
    assert f"{folder / 'empty.jsonl'}: empty file" in res.stderr
    assert f"{folder / 'missing.jsonl'}: no such file" in res.stderr
    assert "unrecognised log format" not in res.stderr and "Traceback" not in res.output


def test_a_side_log_beside_its_run_is_found_and_said_so_unless_turned_off(folder):
    res = run("score", folder / "observed-m1.jsonl", "--json")
    assert res.exit_code == 0 and "found beside it" in res.stderr
    assert json.loads(res.stdout)["recapture"]["applied"] > 0
    off = run("score", folder / "observed-m1.jsonl", "--json", "--no-auto-payloads")
    assert off.exit_code == 0 and "side log" not in off.stderr and "recapture" not in json.loads(off.stdout)


def test_a_side_log_alone_is_refused_as_a_side_log(folder):
    res = run("score", folder / "observed-m1.payloads.jsonl")
    assert res.exit_code == 2 and "a payload side log, not a run" in res.stderr


def test_unusable_input_outranks_a_threshold_and_a_threshold_alone_exits_3(folder):
    threshold = run("score", folder / "observed-m1.jsonl", "--no-auto-payloads", "--fail-on-unscored", "0.01")
    assert threshold.exit_code == 3 and "fail-on-unscored: observed-m1" in threshold.stderr
    both = run("score", folder / "empty.jsonl", folder / "observed-m1.jsonl", "--no-auto-payloads",
               "--fail-on-unscored", "0.01")
    assert both.exit_code == 2  # the later file was still read and judged
    assert "fail-on-unscored: observed-m1" in both.stderr and "empty file" in both.stderr


def test_a_missing_file_path_is_not_called_an_unmatched_run_when_a_workspace_exists(folder):
    db = folder / "w.db"
    assert run("import", folder / "observed-m1.jsonl", "--db", db, "--no-auto-payloads").exit_code == 0
    res = run("score", folder / "nope.jsonl", "--db", db)
    assert res.exit_code == 2 and "nope.jsonl: no such file" in res.stderr
    assert "no imported run matches" not in res.stderr
    assert run("score", "observed-m1", "--db", db).exit_code == 0  # a run id still finds the run


def test_a_folder_is_refused_as_a_folder(folder):
    res = run("score", folder)
    assert res.exit_code == 2 and "is a folder" in res.stderr


def test_import_reads_every_file_and_exits_2_when_any_failed(folder):
    db = folder / "w.db"
    res = run("import", folder / "empty.jsonl", folder / "observed-m1.jsonl", folder / "gone.jsonl", "--db", db)
    assert res.exit_code == 2
    assert "imported observed-m1" in res.stdout
    assert "empty.jsonl: empty file" in res.stderr and "gone.jsonl: no such file" in res.stderr
    assert "found beside it" in res.stderr


def test_an_unreadable_file_is_named_and_the_next_file_is_still_read(folder, monkeypatch):
    locked = folder / "locked.jsonl"
    locked.write_text("{}")
    real = os.open

    def refusing_open(path, *args, **kwargs):
        if str(path) == str(locked):  # as root, chmod does not stop a read: refuse it here instead
            raise PermissionError(13, "Permission denied", str(path))
        return real(path, *args, **kwargs)

    # every input file is opened through os.open (scoring.files: regular files only)
    monkeypatch.setattr(os, "open", refusing_open)
    res = run("score", locked, folder / "observed-m1.jsonl", "--json", "--no-auto-payloads")
    assert res.exit_code == 2
    assert f"{locked}: cannot read: Permission denied" in res.stderr
    assert [json.loads(line)["run_id"] for line in res.stdout.splitlines()] == ["observed-m1"]
