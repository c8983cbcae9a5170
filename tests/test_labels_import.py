"""``labels import`` (issue 24): every field of every event validated with a located error
(no traceback for a malformed file), and writes in batches that release the write lock so a
reviewer's label never fails while a large import runs (stored == acknowledged)."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from scoring.cli import main
from scoring.errors import DatabaseUnavailableError
from scoring.model import ReviewLabel
from scoring.workspace import Workspace
from scoring.workspace.schema import BUSY_TIMEOUT_S

from . import labels_under_load
from .conftest import SAMPLES


@pytest.fixture
def ws(tmp_path):
    w = Workspace(tmp_path / "w.db")
    w.key = w.import_run(SAMPLES / "observed-m1.jsonl").run_key
    w.inconclusive = [r["trajectory_id"] for r in w.trajectory_rows(w.key, "status = 'inconclusive'")]
    return w


def event(ws, **fields) -> dict:
    base = {"run_key": ws.key, "trajectory_id": ws.inconclusive[0], "reviewer": "alice", "action": "label",
            "label": "genuine_decline", "note": "", "created_at": "2026-12-01T10:00:00+00:00", "event_id": 1,
            "supersedes": "", "batch_id": ""}
    return {**base, **fields}


LOAD_EVENTS = 90_000
"""Events of the large imports reviewers act during: enough that writing them in one transaction
(the defect: one for 800 k events held the lock past the app's busy timeout) holds the lock
about twice ``LOAD_BUSY_TIMEOUT_S`` or more (an insert's cost: benches/RESULTS.md, label-times),
so a reviewer waiting on such an import fails. The issue's 300,000 events with the app's own busy
timeout are ``make bench``'s (benches/labels_under_load.py)."""
LOAD_BUSY_TIMEOUT_S = 3.0
"""The reviewers' busy timeout during those imports, under a third of the app's
(``BUSY_TIMEOUT_S``): the import's lock must come free well within it, and under a third of the
issue's size shows a lock held too long. Smaller, a reviewer of the fixed import waited past it on
a two-core machine loaded far past its cores."""


def bulk_label_file(ws, path: Path, n: int) -> Path:
    """A labels file of ``n`` events by 50 bulk reviewers over the run's Inconclusive traces."""
    return labels_under_load.bulk_label_file(ws, ws.key, ws.inconclusive, path, n)


BAD_JSONL = {
    "not an object": "[1, 2]",
    "a string": '"label"',
    "reviewer a number": {"reviewer": 7},
    "reviewer blank": {"reviewer": "   "},
    "trajectory id null": {"trajectory_id": None},
    "unknown action": {"action": "delete"},
    "unknown label": {"label": "benign"},
    "label an object": {"label": {"x": 1}},
    "undo with a label": {"action": "undo", "label": "degenerate"},
    "created_at not a time": {"created_at": "yesterday"},
    "created_at missing": {"created_at": None},
    "event_id text": {"event_id": "abc", "supersedes": ""},
    "supersedes negative": {"supersedes": -4},
    "supersedes past SQLite": {"supersedes": 2 ** 70},
    "note an object": {"note": {"a": 1}},
    "run_key a number": {"run_key": 5},
    "batch_id a list": {"batch_id": [1]},
    "deeply nested": "[" * 100_000 + "]" * 100_000,
}


@pytest.mark.parametrize("case", list(BAD_JSONL))
def test_a_malformed_label_file_is_a_located_error_not_a_traceback(ws, tmp_path, case):
    bad = BAD_JSONL[case]
    lines = [json.dumps(event(ws)), bad if isinstance(bad, str) else json.dumps(event(ws, **{"event_id": 2, **bad}))]
    path = tmp_path / "labels.jsonl"
    path.write_text("\n".join(lines) + "\n")
    res = CliRunner().invoke(main, ["labels", "import", str(path), "--db", str(ws.path)])
    assert res.exit_code == 2, (res.output, res.exception)
    assert f"{path}:2" in res.output and "Traceback" not in res.output
    assert ws.history(ws.key) == []  # refused whole


def test_malformed_csv_rows_are_located(ws, tmp_path):
    header = "run_key,trajectory_id,reviewer,action,label,note,created_at,event_id,supersedes,batch_id\n"
    good = f"{ws.key},{ws.inconclusive[0]},alice,label,degenerate,,2026-12-01T10:00:00+00:00,1,,\n"
    for row in (f"{ws.key},{ws.inconclusive[0]},alice,label,degenerate,,2026-12-01T10:00:01+00:00,2,,,extra\n",
                f"{ws.key},{ws.inconclusive[0]},alice,label\n",
                f"{ws.key},{ws.inconclusive[0]},alice,label,degenerate,,2026-12-01T10:00:01+00:00,x1,,\n"):
        path = tmp_path / "labels.csv"
        path.write_text(header + good + row)
        res = CliRunner().invoke(main, ["labels", "import", str(path), "--db", str(ws.path)])
        assert res.exit_code == 2 and f"{path}:3" in res.output, res.output
    assert ws.history(ws.key) == []


def test_reviewers_label_while_a_large_import_runs_and_every_label_is_stored(ws, tmp_path):
    """8 reviewers label as fast as they can, threads of one process as the app's sessions are
    (a busy timeout of ``LOAD_BUSY_TIMEOUT_S``, under the app's 10 s: the import's lock must come
    free well within it), while the CLI's ``labels import`` of ``LOAD_EVENTS`` events runs in its
    own process, as a user runs it; every acknowledged label is stored once, none fails with
    "database is locked"."""
    n = LOAD_EVENTS
    path = bulk_label_file(ws, tmp_path / "big.jsonl", n)
    done = threading.Event()
    acknowledged: list[tuple[str, str, str]] = []
    failures: list[BaseException] = []
    lock = threading.Lock()

    def reviewer(name: str) -> None:
        mine = Workspace(ws.path, busy_timeout_s=LOAD_BUSY_TIMEOUT_S)
        labels = list(ReviewLabel)[:3]
        i = 0
        while not done.is_set() or i < 5:
            tid, label = ws.inconclusive[i % len(ws.inconclusive)], labels[i % 3]
            try:
                mine.add_label(ws.key, tid, name, label)
            except DatabaseUnavailableError as exc:
                with lock:
                    failures.append(exc)
                return
            with lock:
                acknowledged.append((name, tid, label.value))
            i += 1
            time.sleep(0.01)

    threads = [threading.Thread(target=reviewer, args=(f"rev{k}",)) for k in range(8)]
    for t in threads:
        t.start()
    try:
        imported = subprocess.run([sys.executable, "-m", "scoring", "labels", "import", str(path), "--db",
                                   str(ws.path)], capture_output=True, text=True, timeout=900)
    finally:
        done.set()
        for t in threads:
            t.join()
    assert imported.returncode == 0, imported.stderr
    assert failures == []
    stored = [(e["reviewer"], e["trajectory_id"], e["label"]) for e in ws.history(ws.key)
              if e["reviewer"].startswith("rev")]
    assert sorted(stored) == sorted(acknowledged) and len(acknowledged) >= 40
    assert sum(1 for e in ws.history(ws.key) if e["reviewer"].startswith("bulk")) == n


def test_eight_reviewer_processes_act_while_labels_import_runs_in_another(ws, tmp_path):
    """The issue's load test: 8 reviewers, each a process (labels, bulk acts, undo), while the
    CLI's ``labels import`` of ``LOAD_EVENTS`` events runs in another: every acknowledged act is
    stored once, no reviewer fails ("database is locked" included), and the database is intact."""
    assert LOAD_BUSY_TIMEOUT_S < BUSY_TIMEOUT_S / 3
    got = labels_under_load.import_while_reviewers_act(ws, ws.key, ws.inconclusive, tmp_path, LOAD_EVENTS, 8,
                                                        LOAD_BUSY_TIMEOUT_S)
    assert got.imported.returncode == 0, got.imported.stderr
    history = ws.history(ws.key)
    assert sum(1 for e in history if e["reviewer"].startswith("bulk")) == LOAD_EVENTS
    for name, reviewer in got.reviewers.items():
        assert reviewer["failure"] is None, (name, reviewer["failure"])
        acts = reviewer["acts"]
        assert len(acts) >= labels_under_load.MIN_ACTS
        mine = [e for e in history if e["reviewer"] == name]
        labelled = sorted((tid, label) for action, tids, label in acts if action == "label" for tid in tids)
        undone = sorted(tid for action, tids, _label in acts if action == "undo" for tid in tids)
        assert sorted((e["trajectory_id"], e["label"]) for e in mine if e["action"] == "label") == labelled, name
        assert sorted(e["trajectory_id"] for e in mine if e["action"] == "undo") == undone, name
    with sqlite3.connect(ws.path) as con:
        assert con.execute("pragma integrity_check").fetchone() == ("ok",)


@pytest.mark.parametrize("suffix", [".jsonl", ".csv"])
def test_bytes_that_are_not_utf8_are_located_by_line(ws, tmp_path, suffix):
    """A lone surrogate written as raw bytes (ED A0 80, CESU-8) on line 2: exit 2 naming the
    line (second attack on issue 34, F11: the message gave a byte offset into the file)."""
    good = json.dumps(event(ws))
    if suffix == ".csv":
        header = ",".join(("run_key", "trajectory_id", "reviewer", "action", "label", "note", "created_at",
                           "event_id", "supersedes", "batch_id"))
        data = (f"{header}\n{ws.key},{ws.inconclusive[0]},al".encode() + b"\xed\xa0\x80" +
                b"ice,label,degenerate,,2026-12-01T10:00:00+00:00,1,,\n")
    else:
        data = (good + "\n").encode() + good.replace("alice", "al").encode()[:-1] + b"\xed\xa0\x80\"}\n"
    path = tmp_path / f"labels{suffix}"
    path.write_bytes(data)
    res = CliRunner().invoke(main, ["labels", "import", str(path), "--db", str(ws.path)])
    assert res.exit_code == 2 and f"{path}:2" in res.output and "not UTF-8" in res.output, res.output
    assert "Traceback" not in res.output and ws.history(ws.key) == []
