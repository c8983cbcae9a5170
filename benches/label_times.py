"""What one text per instant costs a labels import (issue 34, attack finding F9).

Every label event's time is written as ``schema.canonical_time`` writes it, and schema 16's
triggers refuse any other text. Both are measured against a baseline taken in the same run:

- **reading**: ``labels._read_label_file`` of a file of N events (each time made canonical), and
  the same events' times parsed only by ``datetime.fromisoformat`` (the check it replaced);
- **writing**: the CPU time of the import's inserts (``labels._INSERT_EVENT``, in transactions of
  250) into copies of one workspace at today's schema: as it is, with its two triggers dropped,
  with them replaced by one that never fires (``WHEN 0``: what a trigger's presence costs), and
  with the triggers' GLOB as a CHECK constraint instead (the table rebuilt with it: the other way
  to hold the shape in the schema).

Each is the best of ``--repeat`` rounds, the copies taken in alternating order (CPU time: the
machine is shared). ``--write`` puts the table in benches/RESULTS.md (its own section).

    python benches/label_times.py [--events N] [--repeat R] [--write]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sqlite3
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from scoring.workspace import Workspace, labels, schema  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from results_file import replace_section  # noqa: E402  (beside this file: run as a script)

SAMPLE = ROOT / "sample_runs" / "observed-m1.jsonl"
BEGIN, END = "<!-- label-times -->", "<!-- /label-times -->"
NEVER_FIRES = "CREATE TRIGGER never_fires BEFORE INSERT ON label_events WHEN 0 BEGIN SELECT RAISE(ABORT, 'x'); END"


def _events(key: str, tids: list[str], n: int) -> list[dict]:
    # a third of them spelled as another tool writes them: Z, another offset, fractional zeros
    spell = ("2026-11-30T00:00:00.{i:06d}+00:00", "2026-11-30T01:00:00.{i:06d}000+01:00",
             "2026-11-30T00:00:00.{i:06d}Z")
    return [{"run_key": key, "trajectory_id": tids[i % len(tids)], "reviewer": f"bulk{i % 50}", "action": "label",
             "label": ("genuine_decline", "degenerate")[i % 2], "note": "",
             "created_at": spell[i % 3].format(i=i), "event_id": i + 1, "supersedes": "", "batch_id": ""}
            for i in range(n)]


def _rebuild_with_check(con: sqlite3.Connection) -> None:
    """label_events made again with ``CHECK (created_at GLOB …)``, its rows and indexes kept."""
    indexes = [sql for (sql,) in con.execute("SELECT sql FROM sqlite_master WHERE type = 'index' AND "
                                             "tbl_name = 'label_events' AND sql IS NOT NULL").fetchall()]
    columns = ", ".join(r[1] for r in con.execute("PRAGMA table_info(label_events)").fetchall())
    ddl = con.execute("SELECT sql FROM sqlite_master WHERE name = 'label_events'").fetchone()[0]
    con.execute("ALTER TABLE label_events RENAME TO label_events_before")
    con.execute(ddl.rstrip().removesuffix(")") + f", CHECK (created_at GLOB '{schema._CANONICAL_TIME_GLOB}'))")
    con.execute(f"INSERT INTO label_events SELECT {columns} FROM label_events_before")
    con.execute("DROP TABLE label_events_before")
    for sql in indexes:
        con.execute(sql)


def _insert_cpu(db_path: Path, rows: list[tuple]) -> float:
    con = sqlite3.connect(db_path)
    con.execute("PRAGMA synchronous = NORMAL")  # as the workspace's connections are
    con.execute("DELETE FROM label_events")
    con.commit()
    began = time.process_time()
    for start in range(0, len(rows), 250):
        con.execute("BEGIN IMMEDIATE")
        for r in rows[start:start + 250]:
            con.execute(labels._INSERT_EVENT, r)
        con.commit()
    spent = time.process_time() - began
    con.close()
    return spent


def measure(n: int, repeat: int) -> dict:
    with tempfile.TemporaryDirectory() as d:
        ws = Workspace(Path(d) / "w.db")
        key = ws.import_run(SAMPLE).run_key
        tids = [r["trajectory_id"] for r in ws.trajectory_rows(key, "status = 'inconclusive'")]
        events = _events(key, tids, n)
        path = Path(d) / "labels.jsonl"
        path.write_text("".join(json.dumps(e) + "\n" for e in events))
        copies = {kind: Path(d) / f"{kind}.db" for kind in ("triggers", "none", "never_fires", "check")}
        for kind, copy in copies.items():  # alike but for their triggers, all in WAL as the workspace is
            with sqlite3.connect(ws.path) as src, sqlite3.connect(copy) as dst:
                src.backup(dst)
            con = sqlite3.connect(copy)
            con.execute("PRAGMA journal_mode = wal")
            if kind != "triggers":
                for (name,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'").fetchall():
                    con.execute(f"DROP TRIGGER {name}")
            if kind == "never_fires":
                con.execute(NEVER_FIRES)
            if kind == "check":
                _rebuild_with_check(con)
            con.commit()
            con.close()
        read, parsed, made = [], [], []
        inserts: dict[str, list[float]] = {kind: [] for kind in copies}
        times = [e["created_at"] for e in events]
        for round_ in range(repeat):
            began = time.process_time()
            rows = labels._read_label_file(path)
            read.append(time.process_time() - began)
            began = time.process_time()
            for t in times:
                datetime.fromisoformat(t)
            parsed.append(time.process_time() - began)
            began = time.process_time()
            for t in times:
                schema.canonical_time(t)
            made.append(time.process_time() - began)
            values = [(key, r["trajectory_id"], r["reviewer"], r["action"], r["label"], r["note"], r["created_at"],
                       None, None) for r in rows]
            for kind in (list(copies) if round_ % 2 == 0 else list(copies)[::-1]):
                inserts[kind].append(_insert_cpu(copies[kind], values))
        return {"events": n, "repeat": repeat, "read_s": min(read), "fromisoformat_s": min(parsed),
                "canonical_s": min(made), **{f"insert_{kind}_s": min(v) for kind, v in inserts.items()}}


def table(m: dict) -> list[str]:
    n = m["events"]
    per = {k: v / n * 1e6 for k, v in m.items() if k.endswith("_s")}
    return [
        BEGIN,
        "## One text per instant: what it costs a labels import (issue 34 F9)",
        "",
        f"Generated by `benches/label_times.py` at {datetime.now(UTC):%Y-%m-%d %H:%M} UTC on {platform.machine()}, "
        f"{os.cpu_count()} cores, Python {platform.python_version()}, SQLite {sqlite3.sqlite_version}: {n:,} events "
        "(a third each spelled `+00:00`, `+01:00` with nine fractional digits, `Z`), CPU time per event, best of "
        f"{m['repeat']} rounds. Load average when it ended: {', '.join(f'{x:.1f}' for x in os.getloadavg())}.",
        "",
        "| step | now | baseline (same run) | now ÷ baseline |",
        "|---|---|---|---|",
        f"| a time made canonical (`schema.canonical_time`) vs only parsed (`datetime.fromisoformat`, the check "
        f"it replaced) | {per['canonical_s']:.2f} µs | {per['fromisoformat_s']:.2f} µs | "
        f"**{m['canonical_s'] / m['fromisoformat_s']:.1f}×** |",
        f"| what that adds, against reading the file as it is now (`_read_label_file`) | "
        f"{per['canonical_s'] - per['fromisoformat_s']:.2f} µs | {per['read_s']:.2f} µs | "
        f"**{(m['canonical_s'] - m['fromisoformat_s']) / m['read_s']:.2f}×** |",
        f"| an insert, schema 16's triggers vs none | {per['insert_triggers_s']:.1f} µs | "
        f"{per['insert_none_s']:.1f} µs | **{m['insert_triggers_s'] / m['insert_none_s']:.2f}×** |",
        f"| an insert, a trigger that never fires (`WHEN 0`) vs none | {per['insert_never_fires_s']:.1f} µs | "
        f"{per['insert_none_s']:.1f} µs | **{m['insert_never_fires_s'] / m['insert_none_s']:.2f}×** |",
        f"| an insert, the same GLOB as a CHECK constraint (table rebuilt) vs none | {per['insert_check_s']:.1f} µs | "
        f"{per['insert_none_s']:.1f} µs | **{m['insert_check_s'] / m['insert_none_s']:.2f}×** |",
        "",
        "Reading and checking a file happen before the import takes the write lock; the inserts are what it "
        "holds the lock for, in batches of about 25 ms, so a slower insert makes an import's batches smaller, "
        "not a reviewer's wait longer. Much of what the triggers cost is a BEFORE INSERT trigger's being there "
        "(compare the one that never fires), not their GLOB: the same GLOB as a CHECK constraint costs little, but "
        "SQLite adds one only by rebuilding the table (a migration of its own).",
        END,
    ]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=60_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--write", action="store_true")
    args = ap.parse_args()
    lines = table(measure(args.events, args.repeat))
    print("\n".join(lines))
    if args.write:
        replace_section(lines, BEGIN, END)


if __name__ == "__main__":
    main()
