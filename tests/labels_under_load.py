"""Reviewers acting while ``litmus-review labels import`` of a large file runs (issue 24's load
test), shared by tests/test_labels_import.py (at a size that still catches an import holding the
write lock past a reviewer's busy timeout) and benches/labels_under_load.py (at the issue's size,
with the app's busy timeout).

Each reviewer is a process of its own, as the app's sessions are: labels, bulk acts and undos
until the import has ended (at least a dozen acts); what it had acknowledged, its longest act and
its failure (None) are written to a file the caller reads.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from scoring.model import ReviewLabel
from scoring.workspace import Workspace

MIN_ACTS = 12
"""Acts each reviewer makes however soon the import ends."""


def bulk_label_file(ws: Workspace, key: str, tids: list[str], path: Path, n: int) -> Path:
    """A labels file of ``n`` events by 50 bulk reviewers over the trajectories ``tids``."""
    base = {"run_key": key, "action": "label", "note": "", "supersedes": "", "batch_id": ""}
    with path.open("w") as fh:
        for i in range(n):
            fh.write(json.dumps({**base, "trajectory_id": tids[i % len(tids)], "reviewer": f"bulk{i % 50}",
                                 "label": ("genuine_decline", "degenerate")[i % 2],
                                 "created_at": f"2026-11-30T00:00:00.{i:06d}+00:00", "event_id": i + 1}) + "\n")
    return path


def reviewer_process(db: str, key: str, tids: list[str], name: str, busy_timeout_s: float, done: str,
                     out: str) -> None:
    """One reviewer: labels, bulk acts and undos until ``done`` exists (at least ``MIN_ACTS``)."""
    mine = Workspace(db, busy_timeout_s=busy_timeout_s)
    labels = list(ReviewLabel)[:3]
    acts: list[list] = []
    longest = 0.0
    i = 0
    began = time.perf_counter()
    try:
        while not os.path.exists(done) or i < MIN_ACTS:
            label = labels[i % 3]
            began = time.perf_counter()
            if i % 4 == 3:
                undone = mine.undo_last(key, name)
                acts.append(["undo", undone["trajectory_ids"] if undone else [], None])
            elif i % 4 == 2:
                batch = [tids[(i + k) % len(tids)] for k in range(5)]
                mine.add_labels(key, batch, name, label)
                acts.append(["label", batch, label.value])
            else:
                tid = tids[i % len(tids)]
                mine.add_label(key, tid, name, label)
                acts.append(["label", [tid], label.value])
            longest = max(longest, time.perf_counter() - began)
            i += 1
            time.sleep(0.01)
        failure = None
    except Exception as exc:  # reported to the caller, which fails on it
        failure = f"act {i} ({('label', 'label', 'bulk', 'undo')[i % 4]}) after {time.perf_counter() - began:.2f} s: " \
                  f"{type(exc).__name__}: {exc}"
    Path(out).write_text(json.dumps({"acts": acts, "longest_s": longest, "failure": failure}))


@dataclass(frozen=True)
class LoadResult:
    imported: subprocess.CompletedProcess
    import_s: float
    reviewers: dict[str, dict]
    """Each reviewer's file: ``acts`` (what it had acknowledged), ``longest_s``, ``failure``."""


def import_while_reviewers_act(ws: Workspace, key: str, tids: list[str], folder: Path, events: int,
                               reviewers: int, busy_timeout_s: float) -> LoadResult:
    """``reviewers`` reviewer processes act on ``ws`` while ``labels import`` of ``events`` bulk
    events runs in a process of its own, as a user runs it."""
    path = bulk_label_file(ws, key, tids, folder / "big.jsonl", events)
    done = folder / "done"
    spawn = multiprocessing.get_context("spawn")
    names = [f"rev{k}" for k in range(reviewers)]
    procs = [spawn.Process(target=reviewer_process, args=(str(ws.path), key, tids, name, busy_timeout_s, str(done),
                                                          str(folder / f"{name}.json"))) for name in names]
    for p in procs:
        p.start()
    began = time.perf_counter()
    try:
        imported = subprocess.run([sys.executable, "-m", "scoring", "labels", "import", str(path), "--db",
                                   str(ws.path)], capture_output=True, text=True, timeout=900)
    finally:
        took = time.perf_counter() - began
        done.touch()
        for p in procs:
            p.join(timeout=300)
    return LoadResult(imported, took, {name: json.loads((folder / f"{name}.json").read_text()) for name in names})
