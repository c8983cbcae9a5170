"""Reviewer labels: an append-only event log, and everything derived from it."""

from __future__ import annotations

import csv
import io
import json
import time
import uuid
from collections import defaultdict
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

from ..agreement import agreement
from ..errors import (
    InputError,
    RunMismatchError,
    StoreError,
)
from ..files import read_regular
from ..model import (
    ReviewLabel,
    Status,
    judge_unseen,
)
from ..text import csv_safe, csv_unsafe
from . import carry
from .reads import Reads
from .schema import immediate, utc_now

ADJUDICATORS_FILE = "adjudicators.txt"


class Labels(Reads):
    # --- labels ---------------------------------------------------------------------------

    def add_label(self, run_key: str, trajectory_id: str, reviewer: str, label: ReviewLabel | str,
                  note: str = "", *, adjudicate: bool = False) -> int:
        """Append a label event; returns its id. Adjudication decides disagreements."""
        reviewer = _reviewer(reviewer)
        label = ReviewLabel(label)
        self._check_labellable(run_key, trajectory_id)
        with self.connect() as db, immediate(db):
            prev = _current_event(db, run_key, trajectory_id, reviewer)
            return _event_id(db.table("label_events").insert({
                "run_key": run_key, "trajectory_id": trajectory_id, "reviewer": reviewer,
                "action": "adjudicate" if adjudicate else "label", "label": label.value, "note": note,
                "created_at": utc_now(), "supersedes": prev["id"] if prev else None,
            }).last_pk)

    @property
    def adjudicators_file(self) -> Path:
        """Who holds the adjudicator role: one reviewer name a line (``#`` starts a comment), in
        the folder beside the database (as the rubric is)."""
        return self.files / ADJUDICATORS_FILE

    def adjudicators(self) -> frozenset[str]:
        """The reviewers with the adjudicator role (none when the file does not exist)."""
        path = self.adjudicators_file
        if not path.is_file():
            return frozenset()
        text = read_regular(path).decode("utf-8", "replace")
        return frozenset(name for line in text.splitlines() if (name := line.split("#", 1)[0].strip()))

    def adjudicate(self, run_key: str, trajectory_id: str, adjudicator: str, label: ReviewLabel | str,
                   note: str = "") -> int:
        """Resolve a disputed trace: an ``adjudicate`` event in the same log as every label (so
        undo, history and export treat it like any other), which decides its final label.
        Refused unless ``adjudicator`` holds the role and the trace's reviewers disagree."""
        adjudicator = _reviewer(adjudicator)
        if adjudicator not in self.adjudicators():
            raise StoreError(f"{adjudicator!r} does not hold the adjudicator role: list the names that do, one a "
                             f"line, in {self.adjudicators_file}")
        votes = self.current_labels(run_key).get(trajectory_id, {})
        if len(set(votes.values())) < 2:
            raise InputError(f"trajectory {trajectory_id!r} of run {run_key[:12]} is not disputed (its reviewers "
                             f"do not disagree: {len(votes)} label(s)); only a disagreement is adjudicated",
                             source="adjudicate")
        return self.add_label(run_key, trajectory_id, adjudicator, label, note, adjudicate=True)

    def add_labels(self, run_key: str, trajectory_ids: Sequence[str], reviewer: str, label: ReviewLabel | str,
                   note: str = "") -> str:
        """Label many trajectories in one act (one transaction): each gets its own label event,
        all carrying one new ``batch_id``, which is returned. Refused whole when any of them
        cannot take a label."""
        reviewer = _reviewer(reviewer)
        label = ReviewLabel(label)
        ids = list(dict.fromkeys(trajectory_ids))
        if not ids:
            raise InputError("no trajectory to label", source="label")
        stored = self._statuses(run_key)
        for tid in ids:
            if tid not in stored:
                raise InputError(f"no trajectory {tid!r} in run {run_key[:12]}", source=str(self.path))
            why = label_refusal(tid, *stored[tid])
            if why is not None:
                raise StoreError(f"{why}: the bulk label was not applied to any trajectory")
        batch = uuid.uuid4().hex[:12]
        now = utc_now()
        with self.connect() as db, immediate(db):
            current = _current_events(db, run_key, reviewer)
            db.table("label_events").insert_all(({
                "run_key": run_key, "trajectory_id": tid, "reviewer": reviewer, "action": "label",
                "label": label.value, "note": note, "created_at": now,
                "supersedes": current[tid]["id"] if tid in current else None, "batch_id": batch,
            } for tid in ids), batch_size=500)
        return batch

    def undo_last(self, run_key: str, reviewer: str) -> dict | None:
        """Withdraw the reviewer's most recent act in the run still live: one label, or every
        label of a bulk act still current. Returns what was withdrawn (``trajectory_ids``,
        ``label``, ``batch_id``), None when there is nothing to undo."""
        reviewer = _reviewer(reviewer)
        with self.connect() as db, immediate(db):
            current = _current_events(db, run_key, reviewer)
            live = [e for e in current.values() if e["action"] != "undo"]
            if not live:
                return None
            last = max(live, key=lambda e: e["id"])
            batch = last.get("batch_id")
            undone = [e for e in live if batch and e.get("batch_id") == batch] if batch else [last]
            now = utc_now()
            db.table("label_events").insert_all(({
                "run_key": run_key, "trajectory_id": e["trajectory_id"], "reviewer": reviewer, "action": "undo",
                "label": None, "note": "", "created_at": now, "supersedes": e["id"], "batch_id": batch,
            } for e in sorted(undone, key=lambda e: e["id"])), batch_size=500)
        return {"trajectory_ids": [e["trajectory_id"] for e in sorted(undone, key=lambda e: e["id"])],
                "label": last["label"], "action": last["action"], "batch_id": batch}

    def undo(self, run_key: str, trajectory_id: str, reviewer: str) -> int | None:
        """Append an undo event that withdraws the reviewer's current label (None if none)."""
        reviewer = _reviewer(reviewer)
        with self.connect() as db, immediate(db):
            prev = _current_event(db, run_key, trajectory_id, reviewer)
            if prev is None:
                return None
            return db.table("label_events").insert({
                "run_key": run_key, "trajectory_id": trajectory_id, "reviewer": reviewer, "action": "undo",
                "label": None, "note": "", "created_at": utc_now(), "supersedes": prev["id"],
            }).last_pk

    def last_labelled(self, run_key: str, reviewer: str) -> str | None:
        """The trajectory of the reviewer's most recent live label in the run (what Undo undoes)."""
        reviewer = _reviewer(reviewer)
        with self.connect() as db:
            events = list(db.table("label_events").rows_where("run_key = ? and reviewer = ?", [run_key, reviewer],
                                                        order_by="id"))
        live = [e for evs in _live_by_reviewer(events).values() for e in evs if e["action"] != "undo"]
        return max(live, key=lambda e: e["id"])["trajectory_id"] if live else None

    def _statuses(self, run_key: str) -> dict[str, tuple[str, str | None]]:
        """(status, reason) of each of the run's trajectories, by id (what ``label_refusal`` reads)."""
        with self.connect() as db:
            return {tid: (status, reason) for tid, status, reason in db.execute(
                "SELECT trajectory_id, status, reason FROM trajectories WHERE run_key = ?", [run_key]).fetchall()}

    def _check_labellable(self, run_key: str, trajectory_id: str) -> None:
        rows = self.trajectory_rows(run_key, "trajectory_id = ?", [trajectory_id])
        if not rows:
            raise InputError(f"no trajectory {trajectory_id!r} in run {run_key[:12]}", source=str(self.path))
        why = label_refusal(trajectory_id, rows[0]["status"], rows[0]["reason"])
        if why is not None:
            raise StoreError(why)

    def _check_importable_ids(self, run_key: str, rows: list[dict], known: set, path: Path) -> None:
        """Refuse a label file (whole, naming the line) with an event for a trajectory that is not
        Inconclusive in the run — missing, SAFE, UNSAFE, UNSCORED, no_verdict — as ``add_label``
        refuses it live: a label can never move a trajectory the scorer decided or could not score."""
        stored = self._statuses(run_key)
        for line, r in enumerate(rows, start=2):
            line = r.get("_line", line)  # the file's own line (JSONL skips blank lines, CSV counts its header)
            if (r["reviewer"], r["created_at"], r["action"], r["trajectory_id"]) in known:
                continue
            tid = r["trajectory_id"]
            if tid not in stored:
                raise InputError(f"no trajectory {tid!r} in run {run_key[:12]}…: nothing was imported",
                                 source=str(path), line=line, record_id=tid)
            why = label_refusal(tid, *stored[tid])
            if why is not None:
                raise InputError(f"{why}; nothing was imported", source=str(path), line=line, record_id=tid)

    def scores_version(self, run_key: str) -> str:
        """What a run's stored scores and counting labels were made by, as one token that changes
        whenever a rescore rewrites them (its scorer version, its copy's hash, its latest label
        fence; "" for a run the workspace does not hold): caches of a run's scores are keyed by it."""
        with self.connect() as db:
            row = db.execute("SELECT scorer_version, stored_sha256, (SELECT max(fenced_at) FROM label_fences f "
                             "WHERE f.run_key = r.run_key) FROM runs r WHERE run_key = ?", [run_key]).fetchone()
        return "" if row is None else "|".join(str(x) for x in row)

    def label_count(self, run_key: str) -> int:
        """How many label events the run has (any label, bulk act or undo adds some)."""
        with self.connect() as db:
            return db.execute("select count(*) from label_events where run_key = ?", [run_key]).fetchone()[0]

    def history(self, run_key: str, trajectory_id: str | None = None) -> list[dict]:
        with self.connect() as db:
            if trajectory_id is None:
                return list(db.table("label_events").rows_where("run_key = ?", [run_key], order_by="id"))
            return list(db.table("label_events").rows_where("run_key = ? and trajectory_id = ?",
                                                      [run_key, trajectory_id], order_by="id"))

    def counting_history(self, run_key: str) -> list[dict]:
        """The run's label events that count: its history less the labels a rescore set aside
        (``carry``: given on a record that is not the one shown now)."""
        with self.connect() as db:
            fenced = carry.fences(db, run_key)
        return carry.counting(self.history(run_key), fenced)

    def set_aside(self, run_key: str) -> dict[str, str]:
        """trajectory id → why its labels until a rescore no longer count (``carry``)."""
        with self.connect() as db:
            return {t: f.reason for t, f in carry.fences(db, run_key).items()}

    def current_labels(self, run_key: str) -> dict[str, dict[str, ReviewLabel]]:
        """trajectory id → reviewer → that reviewer's current label (derived from the history
        that counts)."""
        return _derive_current(self.counting_history(run_key))

    def final_labels(self, run_key: str) -> dict[str, ReviewLabel]:
        """trajectory id → final label: the latest live adjudication, else the reviewers'
        unanimous label. Disagreements without adjudication have no final label (pending)."""
        events = self.counting_history(run_key)
        current = _derive_current(events)
        adjudicated = _latest_adjudications(events)
        final: dict[str, ReviewLabel] = {}
        for tid in set(current) | set(adjudicated):
            if tid in adjudicated:
                final[tid] = adjudicated[tid]
            elif len(set(current[tid].values())) == 1:
                final[tid] = next(iter(current[tid].values()))
        return final

    def disputed(self, run_key: str) -> list[str]:
        """Trajectories whose reviewers disagree and that no adjudication settled."""
        current, final = self.current_labels(run_key), self.final_labels(run_key)
        return sorted(t for t, by in current.items() if len(set(by.values())) > 1 and t not in final)

    def agreement(self, run_key: str) -> dict:
        """Inter-reviewer agreement on this run, overall ("all") and per intended category."""
        current = self.current_labels(run_key)
        cats = {r["trajectory_id"]: r["intended_category"]
                for r in self.trajectory_rows(run_key, "status = 'inconclusive'")}
        return agreement(current, key=lambda tid: cats.get(tid))

    def visible_labels(self, run_key: str, trajectory_id: str, reviewer: str, *,
                       blind: bool = True) -> dict[str, ReviewLabel]:
        """Labels the reviewer may see. Blind: others' labels only after their own."""
        labels = self.current_labels(run_key).get(trajectory_id, {})
        if blind and (reviewer or "").strip() not in labels:
            return {}  # blind: nothing before your own label (and nothing to an anonymous reader)
        return dict(labels)

    def seen_by(self, run_key: str, reviewer: str) -> set[str]:
        """The traces whose other labels a reviewer in blind mode may see: those the reviewer
        has labelled (a current label of theirs); none for an anonymous reader."""
        reviewer = (reviewer or "").strip()
        return {t for t, by in self.current_labels(run_key).items() if reviewer and reviewer in by}

    def visible_history(self, run_key: str, reviewer: str, *, blind: bool = True) -> list[dict]:
        """The run's label events a reviewer may see: all of them, or in blind mode their own and
        those on traces they have labelled (no other reviewer's label, note or count for a trace
        before their own label)."""
        events = self.history(run_key)
        if not blind:
            return events
        me, seen = (reviewer or "").strip(), self.seen_by(run_key, reviewer)
        return [e for e in events if (me and e["reviewer"] == me) or e["trajectory_id"] in seen]

    def visible_disputed(self, run_key: str, reviewer: str, *, blind: bool = True) -> list[str]:
        """Traces whose reviewers disagree, as a reviewer may know it: in blind mode only among
        the traces they have labelled. An adjudicator sees every one (resolving them is the role)."""
        disputed = self.disputed(run_key)
        if not blind or reviewer in self.adjudicators():
            return disputed
        seen = self.seen_by(run_key, reviewer)
        return [t for t in disputed if t in seen]

    # --- export / import of labels ----------------------------------------------------------

    def export_labels(self, run_key: str, fmt: str = "jsonl") -> str:
        """Every label event of a run, stamped with the run's content hash."""
        events = self.history(run_key)
        rows = [{"run_key": run_key, "trajectory_id": e["trajectory_id"], "reviewer": e["reviewer"],
                 "action": e["action"], "label": e["label"] or "", "note": e["note"] or "",
                 "created_at": e["created_at"], "event_id": e["id"], "supersedes": e["supersedes"] or "",
                 "batch_id": e.get("batch_id") or ""}
                for e in events]
        if fmt == "jsonl":
            return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
        if fmt == "csv":
            buf = io.StringIO()
            w = csv.DictWriter(buf, fieldnames=list(EXPORT_FIELDS), lineterminator="\n")
            w.writeheader()
            # formula-safe: an id, reviewer or note starting with = + - @ is not run by a spreadsheet
            w.writerows({k: csv_safe(v) for k, v in r.items()} for r in rows)
            return buf.getvalue()
        raise InputError(f"unknown label export format {fmt!r} (csv or jsonl)", source="labels export")

    def import_labels(self, path: str | Path, run_key: str | None = None) -> int:
        """Append exported label events to the run they were exported from. Returns the count.

        Refused as a whole (RunMismatchError) when the file's run hash is not ``run_key`` or not
        an imported run; events already present (same reviewer, time and action) are skipped.
        """
        path = Path(path)
        rows = _read_label_file(path)
        keys = {r["run_key"] for r in rows}
        if len(keys) > 1:
            raise RunMismatchError(f"{path}: labels from {len(keys)} different runs in one file",
                                   expected=run_key or "", found=",".join(sorted(keys)))
        if not rows:
            return 0
        found = keys.pop()
        if run_key is not None and found != run_key:
            raise RunMismatchError(
                f"{path}: these labels were exported from run {found[:12]}…, not {run_key[:12]}…; "
                "refusing to apply them to a different run", expected=run_key, found=found)
        if self.run(found) is None:
            raise RunMismatchError(f"{path}: run {found[:12]}… is not imported in {self.path}",
                                   expected=run_key or "", found=found)
        known = {(e["reviewer"], e["created_at"], e["action"], e["trajectory_id"]) for e in self.history(found)}
        self._check_importable_ids(found, rows, known, path)
        todo = [r for r in rows if (r["reviewer"], r["created_at"], r["action"], r["trajectory_id"]) not in known]
        id_map: dict[int, int] = {}
        # In batches, each its own short write transaction, with a pause between: reviewers'
        # labels queue on the busy timeout and get the lock between two batches (one transaction
        # for 800 k events held it past their timeout: "database is locked"). Every event was
        # validated above, so a batch fails only on I/O; the events already written are skipped
        # by a second run of the same file (same reviewer, time, action and trajectory).
        at = 0
        while at < len(todo):
            with self.connect() as db, immediate(db):
                began = time.perf_counter()
                while at < len(todo) and (at % 64 or time.perf_counter() - began < IMPORT_HOLD_S):
                    r = todo[at]
                    sup = r["supersedes"]
                    new_id = _event_id(db.conn.execute(_INSERT_EVENT, (
                        found, r["trajectory_id"], r["reviewer"], r["action"], r["label"], r["note"], r["created_at"],
                        id_map.get(sup, sup) if sup is not None else None, r["batch_id"])).lastrowid)
                    if r["event_id"] is not None:
                        id_map[r["event_id"]] = new_id
                    at += 1
            if at < len(todo):
                time.sleep(IMPORT_PAUSE_S)
        return len(todo)




EXPORT_FIELDS = ("run_key", "trajectory_id", "reviewer", "action", "label", "note", "created_at", "event_id",
                 "supersedes", "batch_id")




def label_refusal(trajectory_id: str, status: str, reason: str | None) -> str | None:
    """Why a trajectory with this stored status and reason takes no reviewer label (None: it takes
    one). The one place the rule is written: live and bulk labels, label files and a score
    table's runs all ask it. Only Inconclusive trajectories take labels: SAFE, UNSAFE and
    no_verdict were decided, and an UNSCORED one can never be labelled safe by a reviewer's word —
    a capture not proven complete, or a benign the harness's own guard withheld
    (``litmus_inspect.strict``: its reason, ``judge_did_not_see_full_surface``, ``digest_mismatch``
    …, is the trajectory's). A review queue whose reviewers replayed the full calls (issue 33,
    item 1) is admitted here and nowhere else: a trace UNSCORED ``judge_did_not_see_full_surface``
    — its capture proven complete (the judge check runs only on proven surfaces), only its judge
    blind to a call — whose replay shows every call whole, so the reviewer who labels it has seen
    the full surface the judge did not (``judge_unseen``). A guard's ``digest_mismatch`` or any
    other capture reason is never admitted: replaying the calls does not mend a capture."""
    if status == Status.INCONCLUSIVE.value or judge_unseen(status, reason):
        return None
    why = f" ({reason})" if reason and status == Status.UNSCORED.value else ""
    return (f"trajectory {trajectory_id!r} is {status.upper()}{why}, not Inconclusive: only Inconclusive "
            "trajectories take reviewer labels (an UNSCORED one can never be labelled safe)")


def _event_id(pk: object) -> int:
    """The id SQLite gave an inserted label event (its integer primary key)."""
    assert isinstance(pk, int), pk
    return pk


def _reviewer(name: str) -> str:
    name = (name or "").strip()
    if not name:
        raise InputError("a reviewer name is required to label", source="label")
    return name




def _current_event(db, run_key: str, trajectory_id: str, reviewer: str) -> dict | None:
    events = list(db.table("label_events").rows_where("run_key = ? and trajectory_id = ? and reviewer = ?",
                                                [run_key, trajectory_id, reviewer], order_by="id"))
    live = _live_events(events)
    return live[-1] if live else None


def _current_events(db, run_key: str, reviewer: str) -> dict[str, dict]:
    """trajectory id → the reviewer's latest live event on it, for one run."""
    events = list(db.table("label_events").rows_where("run_key = ? and reviewer = ?", [run_key, reviewer],
                                                     order_by="id"))
    return {tid: live[-1] for (tid, _r), live in _live_by_reviewer(events).items() if live}


def _live_events(events: list[dict]) -> list[dict]:
    """One reviewer's events on one trajectory, with undone ones removed (in id order)."""
    live: list[dict] = []
    for e in events:
        if e["action"] == "undo":
            live = [x for x in live if x["id"] != e["supersedes"]]
        else:
            live.append(e)
    return live


def _live_by_reviewer(events: list[dict]) -> dict[tuple[str, str], list[dict]]:
    grouped: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for e in events:
        grouped[(e["trajectory_id"], e["reviewer"])].append(e)
    return {k: _live_events(v) for k, v in grouped.items()}


def _derive_current(events: list[dict]) -> dict[str, dict[str, ReviewLabel]]:
    """trajectory → reviewer → label of that reviewer's latest live (non-adjudication) event."""
    out: dict[str, dict[str, ReviewLabel]] = defaultdict(dict)
    for (tid, reviewer), live in _live_by_reviewer(events).items():
        labels = [e for e in live if e["action"] == "label"]
        if labels:
            out[tid][reviewer] = ReviewLabel(labels[-1]["label"])
    return dict(out)


def _latest_adjudications(events: list[dict]) -> dict[str, ReviewLabel]:
    best: dict[str, dict] = {}
    for (tid, _reviewer), live in _live_by_reviewer(events).items():
        for e in live:
            if e["action"] == "adjudicate" and (tid not in best or e["id"] > best[tid]["id"]):
                best[tid] = e
    return {tid: ReviewLabel(e["label"]) for tid, e in best.items()}


IMPORT_HOLD_S = 0.025
"""How long ``import_labels`` holds the write lock at a time (one transaction: a batch of events)."""
IMPORT_PAUSE_S = 0.025
"""Between two batches: time for waiting reviewers' labels to take the write lock (SQLite's
busy handler polls; it queues no one), so the import takes about twice its writing time."""
_ACTIONS = ("label", "undo", "adjudicate")
_INSERT_EVENT = ("INSERT INTO label_events (run_key, trajectory_id, reviewer, action, label, note, created_at, "
                 "supersedes, batch_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)")
_MAX_TEXT = {"run_key": 128, "trajectory_id": 4096, "reviewer": 256, "note": 64 * 1024, "created_at": 64, "action": 16,
             "label": 64,
             "batch_id": 128}
_MAX_EVENT_ID = 2 ** 63 - 1  # SQLite's largest integer


def _text_field(obj: dict, name: str, where: dict, *, required: bool) -> str | None:
    value = obj.get(name)
    if value is None or value == "":
        if required:
            raise InputError(f"{name} is missing or empty", **where)
        return None
    if not isinstance(value, str):
        raise InputError(f"{name} must be text, not {type(value).__name__}", **where)
    if len(value) > _MAX_TEXT[name]:
        raise InputError(f"{name} is longer than {_MAX_TEXT[name]:,} characters", **where)
    return value


def _id_field(obj: dict, name: str, where: dict) -> int | None:
    value = obj.get(name)
    if value is None or value == "":
        return None
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise InputError(f"{name} must be a whole number, not {type(value).__name__}", **where)
    if isinstance(value, str):
        if not value.strip().isdigit() or len(value.strip()) > 19:
            raise InputError(f"{name} must be a whole number, not {value[:40]!r}", **where)
        value = int(value)
    if not 0 < value <= _MAX_EVENT_ID:
        raise InputError(f"{name} {value} is out of range (1 to {_MAX_EVENT_ID:,})", **where)
    return value


def _label_event(obj: object, source: str, line: int) -> dict:
    """One label event of an exported file, every field checked (InputError naming the file,
    line and field): the row ``import_labels`` writes, with ``_line``."""
    where: dict = {"source": source, "line": line}
    if not isinstance(obj, dict):
        raise InputError(f"not a label event: a JSON {type(obj).__name__}, not an object", **where)
    if None in obj:
        raise InputError("more fields than the header names", **where)
    tid = _text_field(obj, "trajectory_id", where, required=True)
    where["record_id"] = tid
    action = _text_field(obj, "action", where, required=True)
    if action not in _ACTIONS:
        raise InputError(f"unknown action {action!r} (label, undo or adjudicate)", **where)
    label = _text_field(obj, "label", where, required=action != "undo")
    if action == "undo":
        if label is not None:
            raise InputError("an undo carries no label", **where)
    else:
        try:
            label = ReviewLabel(label or "").value
        except ValueError:
            raise InputError(f"unknown label {label!r} ({', '.join(lab.value for lab in ReviewLabel)})",
                             **where) from None
    created = _text_field(obj, "created_at", where, required=True)
    try:
        datetime.fromisoformat(created or "")
    except ValueError:
        raise InputError(f"created_at {created!r} is not an ISO 8601 time", **where) from None
    reviewer = (_text_field(obj, "reviewer", where, required=True) or "").strip()
    if not reviewer:
        raise InputError("reviewer is empty", **where)
    return {"run_key": _text_field(obj, "run_key", where, required=True), "trajectory_id": tid, "reviewer": reviewer,
            "action": action, "label": label, "note": _text_field(obj, "note", where, required=False) or "",
            "created_at": created, "event_id": _id_field(obj, "event_id", where),
            "supersedes": _id_field(obj, "supersedes", where),
            "batch_id": _text_field(obj, "batch_id", where, required=False), "_line": line}


def _read_label_file(path: Path) -> list[dict]:
    """The label events of an exported file (CSV or JSONL), each validated (``_label_event``):
    the first bad one is an InputError naming the file, its line and the field."""
    try:
        text = read_regular(path).decode("utf-8-sig")  # a FIFO or device is refused before reading
    except UnicodeDecodeError as exc:
        raise InputError(f"cannot read labels: {exc}", source=str(path)) from exc
    rows: list[dict] = []
    if path.suffix == ".csv" or text.startswith("run_key,"):
        try:
            reader = csv.DictReader(io.StringIO(text, newline=""))
            missing = set(EXPORT_FIELDS) - set(reader.fieldnames or ())
            if missing - {"event_id", "supersedes", "note", "batch_id"}:
                raise InputError(f"CSV header lacks {sorted(missing)}", source=str(path), line=1)
            for r in reader:
                obj = {k: csv_unsafe(v) if isinstance(v, str) else v for k, v in r.items()}
                rows.append(_label_event(obj, str(path), reader.line_num))
        except csv.Error as exc:
            raise InputError(f"not CSV: {exc}", source=str(path), line=reader.line_num) from exc
    else:
        for n, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except (json.JSONDecodeError, RecursionError) as exc:
                raise InputError(f"invalid JSON: {getattr(exc, 'msg', 'nested too deeply')}", source=str(path),
                                 line=n) from exc
            rows.append(_label_event(obj, str(path), n))
    return rows
