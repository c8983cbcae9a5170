"""Reviewer labels: an append-only event log, and everything derived from it.

One rule at every door (issue 34): a label event is taken or refused by ``event_refusal``
whether it comes from the app (``add_label``, ``add_labels``, ``adjudicate``) or from a labels
file (``import_labels``, each event checked as it would be written), and a reviewer's name is
read by ``reviewer_identity`` at both. What a reader may know of the log in blind review is
decided once (``Reader``, ``counting_history``/``history``): current and final labels, disputes,
agreement, history and exports are all derived from what the reader may know.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import sqlite3
import time
import unicodedata
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, TypeAlias

from ..agreement import agreement
from ..errors import (
    InputError,
    RunMismatchError,
    StoreError,
)
from ..export_files import META_COLUMNS, RunMeta, exported_now, final_labels_csv
from ..files import read_regular
from ..model import (
    ReviewLabel,
    Status,
    judge_unseen,
)
from ..stored import LEGACY_SCORER_VERSION
from ..text import csv_safe, csv_unsafe
from . import carry
from .reads import Reads
from .schema import canonical_time, immediate, normal_name, utc_now

ADJUDICATORS_FILE = "adjudicators.txt"
MAX_REVIEWER_CHARS = 256
MAX_NOTE_CHARS = 64 * 1024


# --- who labels, and who reads -------------------------------------------------------------


def unstorable(text: str) -> str | None:
    """Why ``text`` cannot be stored in the workspace, whose text is UTF-8 (None: it can): a lone
    surrogate — a JSON escape such as ``"\\ud800"``, or a byte a terminal's argument could not
    decode — has no UTF-8 form, and SQLite would fail on it with a traceback."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return (f"holds a lone surrogate (U+{ord(text[exc.start]):04X}, character {exc.start + 1}), which is not text "
                "(the workspace stores UTF-8)")
    return None


def reviewer_identity(name: str | None, *, source: str = "label", line: int | None = None,
                      record_id: str | None = None) -> str:
    """The name a label event is stored under, read alike at every door (``normal_name``);
    InputError (located where ``source``/``line`` say) for an empty name, one longer than 256
    characters, or one that is not storable text."""
    name = normal_name(name)
    if not name:
        raise InputError("a reviewer name is required to label", source=source, line=line, record_id=record_id)
    if len(name) > MAX_REVIEWER_CHARS:
        raise InputError(f"the reviewer name is longer than {MAX_REVIEWER_CHARS:,} characters", source=source,
                         line=line, record_id=record_id)
    problem = unstorable(name)
    if problem is not None:
        raise InputError(f"the reviewer name {problem}", source=source, line=line, record_id=record_id)
    control = next((ch for ch in name if unicodedata.category(ch) == "Cc"), None)
    if control is not None:  # a terminal escape or a NUL in a name that reports and the CLI print
        raise InputError(f"the reviewer name holds a control character (U+{ord(control):04X})", source=source,
                         line=line, record_id=record_id)
    for word in name.split():
        scripts = sorted({script for ch in word if (script := _lookalike_script(ch)) is not None})
        if len(scripts) > 1:  # "cаrol" with a Cyrillic а is drawn exactly as "carol", and is someone else
            raise InputError(f"the reviewer name mixes {' and '.join(scripts)} letters in one word ({word!a}), which "
                             "are drawn alike: write it in one script", source=source, line=line,
                             record_id=record_id)
    return name


_LOOKALIKE_SCRIPTS = ("LATIN", "CYRILLIC", "GREEK")
"""The scripts whose letters are drawn alike (Latin a, Cyrillic а, Greek α…): a word may use one."""


def _lookalike_script(ch: str) -> str | None:
    if not ch.isalpha():
        return None
    name = unicodedata.name(ch, "")
    return next((script.title() for script in _LOOKALIKE_SCRIPTS if name.startswith(script + " ")), None)


def _note_text(note: str | None, *, source: str = "label") -> str:
    """A note as every door stores it: at most 64 KiB of storable text."""
    note = note or ""
    if len(note) > MAX_NOTE_CHARS:
        raise InputError(f"the note is longer than {MAX_NOTE_CHARS:,} characters", source=source)
    problem = unstorable(note)
    if problem is not None:
        raise InputError(f"the note {problem}", source=source)
    return note


def _trajectory_text(trajectory_id: str, *, source: str = "label") -> str:
    problem = unstorable(trajectory_id)
    if problem is not None:
        raise InputError(f"the trajectory id {problem}", source=source)
    return trajectory_id


@dataclass(frozen=True, slots=True)
class Reader:
    """Who reads a run's labels, and how. Not blind: every event. Blind: their own events, and
    other reviewers' only on the traces they have a live label or adjudication on (an adjudicator
    also on every disagreement still unsettled: settling them is the role) — so no other
    reviewer's label, note, name or count for a trace reaches them before their own label, in
    any view derived from the log (rates and counts included). An anonymous reader (no name) in
    blind review knows nobody's."""

    name: str = ""
    blind: bool = True

    @classmethod
    def of(cls, name: str | None, *, blind: bool) -> Reader:
        return cls(normal_name(name), blind)


# --- the one rule ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why ``event_refusal`` refuses an event, and of what kind."""

    why: str
    kind: Literal["missing", "undisputed", "rule"]
    """``missing``: the run has no such trajectory; ``undisputed``: an adjudication of a trace whose
    reviewers do not disagree; ``rule``: a rule forbids it (the trajectory takes no label, the
    reviewer does not hold the role)."""


def event_refusal(action: str, trajectory_id: str, reviewer: str, run_key: str, *,
                  status: tuple[str, str | None] | None, adjudicators: frozenset[str],
                  votes: Mapping[str, ReviewLabel]) -> Refusal | None:
    """Why a label event is refused (None: it is taken): the one rule of every door, the app's
    label, bulk label and adjudication and every event of a labels file (checked in the order the
    import writes them). ``reviewer`` is already ``reviewer_identity``'s; ``status`` the
    trajectory's stored (status, reason), None where the run has none of that id; ``votes`` each
    reviewer's label on it that counts, as it stands when the event would be written.

    - Every event names a trajectory of the run.
    - A label or an adjudication goes only on a trajectory that takes labels (``label_refusal``:
      Inconclusive, or UNSCORED where only the judge did not see a call of a proven capture).
    - An adjudication is made only by a reviewer the adjudicators file names, and only on a trace
      whose reviewers disagree.
    - An undo withdraws only its own reviewer's event (the log reads it so): no rule beyond the
      trajectory's here; which event it withdraws is a labels file's to prove (``undo_refusal``).
    """
    if status is None:
        return Refusal(f"no trajectory {trajectory_id!r} in run {run_key[:12]}", "missing")
    if action == "undo":
        return None
    why = label_refusal(trajectory_id, *status)
    if why is not None:
        return Refusal(why, "rule")
    if action == "adjudicate":
        if reviewer not in adjudicators:
            return Refusal(f"{reviewer!r} does not hold the adjudicator role: the workspace's {ADJUDICATORS_FILE} (in "
                           "the folder beside its database) names who does, one a line", "rule")
        if len(set(votes.values())) < 2:
            return Refusal(f"trajectory {trajectory_id!r} of run {run_key[:12]} is not disputed (its reviewers do not "
                           f"disagree: {len(votes)} label(s)); only a disagreement is adjudicated", "undisputed")
    return None


def undo_refusal(trajectory_id: str, reviewer: str, target: int | None,
                 withdrawn: tuple[str, str, str] | None, already_undone: bool) -> str | None:
    """Why an undo of a labels file is refused (None: taken): it must withdraw what the app's undo
    withdraws, one of its own reviewer's live labels (or adjudications) on the same trajectory.
    ``withdrawn``: (trajectory, reviewer, action) of the event it supersedes, None when no event
    of that id is stored or earlier in the file; ``already_undone``: an undo withdrew it before.
    (An undo pointing at another trace's event marked a trace nobody labelled "withdrawn".)"""
    if target is None:
        return "an undo names no event it withdraws (supersedes is empty)"
    if withdrawn is None:
        return f"the undo withdraws event {target}, which is neither stored nor earlier in the file"
    tid, who, action = withdrawn
    if who != reviewer:
        return f"the undo withdraws event {target} of another reviewer ({who!r}): an undo withdraws only one's own"
    if tid != trajectory_id:
        return f"the undo withdraws event {target}, which is of another trajectory ({tid!r})"
    if action == "undo" or already_undone:
        return f"the undo withdraws event {target}, which is not a live label (an undo, or undone already)"
    return None


@dataclass(frozen=True, slots=True)
class LabelImport:
    """What ``import_label_file`` did."""

    stored: int
    """Events this import wrote."""
    already_present: int
    """Events of the file the workspace held already (an earlier or a concurrent import of it),
    or that the file repeated: each event is stored once (its identity is unique)."""


@dataclass(frozen=True, slots=True)
class _Planned:
    """An event of a labels file to write: its row, the id it was checked under (``provisional``,
    in write order after the stored events) and what it supersedes (a stored id, or another
    planned event's provisional id)."""

    row: dict
    provisional: int
    supersedes: int | None


StatusReader: TypeAlias = Callable[[str, str], tuple[str, str | None] | None]
"""(run key, trajectory id) → the trajectory's (status, reason), None where the run has none of
that id: what a label's refusal reads (``Labels.label_status``, or a score table's rows)."""


class Labels(Reads):
    # --- the app's door ---------------------------------------------------------------------

    def add_label(self, run_key: str, trajectory_id: str, reviewer: str, label: ReviewLabel | str,
                  note: str = "", *, adjudicate: bool = False, status_of: StatusReader | None = None) -> int:
        """Append a label event (an adjudication with ``adjudicate``); returns its id. Refused by
        ``event_refusal``, as the same event in a labels file is. ``status_of``: where the
        trajectory's status is read, for a run whose rows are elsewhere (a score table's:
        ``dask_engine.table_workspace.table_status``); default ``label_status``, this workspace's."""
        reviewer = reviewer_identity(reviewer)
        note = _note_text(note)
        trajectory_id = _trajectory_text(trajectory_id)
        label = ReviewLabel(label)
        action = "adjudicate" if adjudicate else "label"
        # before the write lock: a table's door reads its rows
        status = (status_of or self.label_status)(run_key, trajectory_id)
        adjudicators = self.adjudicators() if adjudicate else frozenset()
        with _one_act(), self.connect() as db, immediate(db):
            votes = _votes_on(db, run_key, trajectory_id) if adjudicate else {}
            self._refuse(event_refusal(action, trajectory_id, reviewer, run_key, status=status,
                                       adjudicators=adjudicators, votes=votes))
            prev = _current_event(db, run_key, trajectory_id, reviewer)
            return _insert_act(db, [(run_key, trajectory_id, reviewer, action, label.value, note, utc_now(),
                                     prev["id"] if prev else None, None)])

    @property
    def adjudicators_file(self) -> Path:
        """Who holds the adjudicator role: one reviewer name a line (``#`` starts a comment), in
        the folder beside the database (as the rubric is)."""
        return self.files / ADJUDICATORS_FILE

    def adjudicators(self) -> frozenset[str]:
        """The reviewers with the adjudicator role (none when the file does not exist), their
        names read as every door reads a reviewer's (``normal_name``)."""
        path = self.adjudicators_file
        if not path.is_file():
            return frozenset()
        text = read_regular(path).decode("utf-8", "replace")
        return frozenset(name for line in text.splitlines() if (name := normal_name(line.split("#", 1)[0])))

    def adjudicate(self, run_key: str, trajectory_id: str, adjudicator: str, label: ReviewLabel | str,
                   note: str = "") -> int:
        """Resolve a disputed trace: an ``adjudicate`` event in the same log as every label (so
        undo, history and export treat it like any other), which decides its final label.
        Refused unless ``adjudicator`` holds the role and the trace's reviewers disagree
        (``event_refusal``)."""
        return self.add_label(run_key, trajectory_id, adjudicator, label, note, adjudicate=True)

    def add_labels(self, run_key: str, trajectory_ids: Sequence[str], reviewer: str, label: ReviewLabel | str,
                   note: str = "") -> str:
        """Label many trajectories in one act (one transaction): each gets its own label event,
        all carrying one new ``batch_id``, which is returned. Refused whole when any of them
        cannot take a label (``event_refusal``)."""
        reviewer = reviewer_identity(reviewer)
        note = _note_text(note)
        label = ReviewLabel(label)
        ids = list(dict.fromkeys(trajectory_ids))
        if not ids:
            raise InputError("no trajectory to label", source="label")
        stored = self._statuses(run_key)
        for tid in ids:
            self._refuse(event_refusal("label", tid, reviewer, run_key, status=stored.get(tid),
                                       adjudicators=frozenset(), votes={}),
                         after=": the bulk label was not applied to any trajectory")
        batch = uuid.uuid4().hex[:12]
        with _one_act(), self.connect() as db, immediate(db):
            now = utc_now()  # under the write lock: the act's time is after every act before it
            current = _current_events(db, run_key, reviewer)
            _insert_act(db, [(run_key, tid, reviewer, "label", label.value, note, now,
                              current[tid]["id"] if tid in current else None, batch) for tid in ids])
        return batch

    def undo_last(self, run_key: str, reviewer: str) -> dict | None:
        """Withdraw the reviewer's most recent act in the run still live: one label, or every
        label of a bulk act still current. Returns what was withdrawn (``trajectory_ids``,
        ``label``, ``batch_id``), None when there is nothing to undo."""
        reviewer = reviewer_identity(reviewer)
        with _one_act(), self.connect() as db, immediate(db):
            current = _current_events(db, run_key, reviewer)
            live = [e for e in current.values() if e["action"] != "undo"]
            if not live:
                return None
            last = max(live, key=lambda e: e["id"])
            batch = last.get("batch_id")
            undone = [e for e in live if batch and e.get("batch_id") == batch] if batch else [last]
            now = utc_now()
            _insert_act(db, [(run_key, e["trajectory_id"], reviewer, "undo", None, "", now, e["id"], batch)
                             for e in sorted(undone, key=lambda e: e["id"])])
        return {"trajectory_ids": [e["trajectory_id"] for e in sorted(undone, key=lambda e: e["id"])],
                "label": last["label"], "action": last["action"], "batch_id": batch}

    def undo(self, run_key: str, trajectory_id: str, reviewer: str) -> int | None:
        """Append an undo event that withdraws the reviewer's current label (None if none)."""
        reviewer = reviewer_identity(reviewer)
        trajectory_id = _trajectory_text(trajectory_id)
        with _one_act(), self.connect() as db, immediate(db):
            prev = _current_event(db, run_key, trajectory_id, reviewer)
            if prev is None:
                return None
            return _insert_act(db, [(run_key, trajectory_id, reviewer, "undo", None, "", utc_now(), prev["id"], None)])

    def last_labelled(self, run_key: str, reviewer: str) -> str | None:
        """The trajectory of the reviewer's most recent live label in the run (what Undo undoes)."""
        reviewer = reviewer_identity(reviewer)
        with self.connect() as db:
            events = list(db.table("label_events").rows_where("run_key = ? and reviewer = ?", [run_key, reviewer],
                                                        order_by="id"))
        live = [e for evs in _live_by_reviewer(events).values() for e in evs if e["action"] != "undo"]
        return max(live, key=lambda e: e["id"])["trajectory_id"] if live else None

    def _statuses(self, run_key: str) -> dict[str, tuple[str, str | None]]:
        """(status, reason) of each of the run's trajectories, by id (what ``event_refusal`` reads)."""
        with self.connect() as db:
            return {tid: (status, reason) for tid, status, reason in db.execute(
                "SELECT trajectory_id, status, reason FROM trajectories WHERE run_key = ?", [run_key]).fetchall()}

    def label_status(self, run_key: str, trajectory_id: str) -> tuple[str, str | None] | None:
        """The trajectory's stored (status, reason), None where the run has none of that id: what
        ``event_refusal`` reads of it (a ``StatusReader``)."""
        rows = self.trajectory_rows(run_key, "trajectory_id = ?", [trajectory_id])
        return (rows[0]["status"], rows[0]["reason"]) if rows else None

    def _refuse(self, refusal: Refusal | None, *, after: str = "") -> None:
        """Raise ``refusal`` as the app's door says it (nothing when it is None)."""
        if refusal is None:
            return
        if refusal.kind == "missing":
            raise InputError(refusal.why, source=str(self.path))
        if refusal.kind == "undisputed":
            raise InputError(refusal.why, source="adjudicate")
        raise StoreError(refusal.why + after)

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

    # --- what a reader may know, and what is derived from it --------------------------------

    def _events(self, run_key: str, trajectory_id: str | None = None) -> list[dict]:
        with self.connect() as db:
            if trajectory_id is None:
                return list(db.table("label_events").rows_where("run_key = ?", [run_key], order_by="id"))
            return list(db.table("label_events").rows_where("run_key = ? and trajectory_id = ?",
                                                      [run_key, trajectory_id], order_by="id"))

    def _fences(self, run_key: str) -> dict[str, carry.Fence]:
        with self.connect() as db:
            return carry.fences(db, run_key)

    def history(self, run_key: str, trajectory_id: str | None = None, *, reader: Reader | None = None) -> list[dict]:
        """The run's label events (one trajectory's, with ``trajectory_id``) in the order they were
        written; with a ``reader``, only those it may know (``Reader``). None: every event (the
        command line, an operator)."""
        events = self._events(run_key, trajectory_id)
        if reader is None or not reader.blind:
            return events
        readable = self._readable(carry.counting(self._events(run_key), self._fences(run_key)), reader)
        return [e for e in events if _may_know(e, reader, readable)]

    def counting_history(self, run_key: str, *, reader: Reader | None = None) -> list[dict]:
        """The run's label events that count: its history less the labels a rescore set aside
        (``carry``: given on a record that is not the one shown now); with a ``reader``, only those
        it may know."""
        counting = carry.counting(self._events(run_key), self._fences(run_key))
        if reader is None or not reader.blind:
            return counting
        readable = self._readable(counting, reader)
        return [e for e in counting if _may_know(e, reader, readable)]

    def _readable(self, counting: list[dict], reader: Reader) -> set[str]:
        """The traces on which a blind ``reader`` may know other reviewers' events (``Reader``),
        from the run's counting events."""
        if not reader.name:
            return set()
        readable = {tid for (tid, who), live in _live_by_reviewer(counting).items() if who == reader.name and live}
        if reader.name in self.adjudicators():
            readable |= set(_disputed_of(counting))
        return readable

    def set_aside(self, run_key: str) -> dict[str, str]:
        """trajectory id → why its labels until a rescore no longer count (``carry``)."""
        return {t: f.reason for t, f in self._fences(run_key).items()}

    def current_labels(self, run_key: str, *, reader: Reader | None = None) -> dict[str, dict[str, ReviewLabel]]:
        """trajectory id → reviewer → that reviewer's current label (derived from the history
        that counts, as ``reader`` may know it)."""
        return _derive_current(self.counting_history(run_key, reader=reader))

    def final_labels(self, run_key: str, *, reader: Reader | None = None) -> dict[str, ReviewLabel]:
        """trajectory id → final label: the latest live adjudication, else the reviewers'
        unanimous label. Disagreements without adjudication have no final label (pending). With a
        blind ``reader``: as it may know them (only the traces it labelled have others' labels)."""
        return _final_of(self.counting_history(run_key, reader=reader))

    def final_label_rows(self, run_key: str, *, reader: Reader | None = None) -> list[dict[str, object]]:
        """One row per trace with a label event (``export_files.FINAL_LABEL_COLUMNS`` less the
        run's columns), in the run's order: its final label exactly as ``final_labels`` derives
        it, how it was decided, each reviewer's current label and note, and its scorer status.
        A trace whose labels a rescore set aside and none given since is a row of its own
        (``set_aside``), not left out. With a blind ``reader``: the rows of what it may know
        (``Reader``), so a trace another reviewer labelled and it did not is no row at all."""
        events = self.counting_history(run_key, reader=reader)
        final = _final_of(events)
        live = _live_by_reviewer(events)
        set_aside = self.set_aside(run_key)
        if reader is not None and reader.blind:
            # A fence says some reviewer labelled the trace: only the reader's own set-aside
            # traces (and those it may know others' labels on) are told.
            known = {e["trajectory_id"] for e in self.history(run_key, reader=reader)}
            set_aside = {t: why for t, why in set_aside.items() if t in known}
        by_trace: dict[str, list[dict]] = defaultdict(list)
        for (tid, _reviewer), evs in live.items():
            by_trace[tid] += evs
        touched = {e["trajectory_id"] for e in events} | set(set_aside)
        # The labelled traces' statuses only, in the run's order (a run may hold 200 k traces).
        with self.connect() as db:
            statuses = {tid: (status, reason) for tid, status, reason in db.execute(
                "SELECT trajectory_id, status, reason FROM trajectories WHERE run_key = ? AND trajectory_id IN "
                "(SELECT trajectory_id FROM label_events WHERE run_key = ? UNION "
                "SELECT trajectory_id FROM label_fences WHERE run_key = ?) ORDER BY rowid",
                [run_key, run_key, run_key]).fetchall()}
        rows = []
        for tid in [t for t in statuses if t in touched] + sorted(touched - set(statuses)):
            mine = sorted(by_trace.get(tid, []), key=lambda e: e["id"])
            votes = {e["reviewer"]: e for e in mine if e["action"] == "label"}  # each reviewer's latest live label
            verdicts = [e for e in mine if e["action"] == "adjudicate"]
            label = final.get(tid)
            if verdicts:
                how, deciding = "adjudication", [verdicts[-1]]
            elif label is not None:
                how, deciding = "unanimous", list(votes.values())
            elif votes:
                how, deciding = "disputed", []
            else:
                how, deciding = ("set_aside" if tid in set_aside else "withdrawn"), []
            status, reason = statuses.get(tid, ("", None))
            notes = [f"{e['reviewer']}: {e['note']}" for e in [*votes.values(), *verdicts[-1:]] if e["note"]]
            rows.append({
                "trajectory_id": tid, "final_label": label.value if label is not None else "", "decided_by": how,
                "reviewers": len(votes),
                "labels": "; ".join(f"{r}: {e['label']}" for r, e in sorted(votes.items())),
                "adjudicator": verdicts[-1]["reviewer"] if verdicts else "",
                "decided_at": max((e["created_at"] for e in deciding), default=""),
                "notes": "; ".join(notes), "status": status, "reason": reason or "",
                "labels_set_aside": set_aside.get(tid, "")})
        return rows

    def export_final_labels(self, run_key: str, *, reader: Reader | None = None, run: RunMeta | None = None,
                            exported_at: str | None = None) -> str:
        """The run's final labels as CSV, one row per trace (``final_label_rows``, as ``reader``
        may know them), each row naming its run (``run``, else ``run_meta``); the event log is
        ``export_labels``."""
        return final_labels_csv(self.final_label_rows(run_key, reader=reader), run or self.run_meta(run_key),
                                exported_at or exported_now())

    def disputed(self, run_key: str, *, reader: Reader | None = None) -> list[str]:
        """Trajectories whose reviewers disagree and that no adjudication settled (as ``reader``
        may know them: in blind review among the traces it labelled, or, for an adjudicator,
        every one: resolving them is the role)."""
        return _disputed_of(self.counting_history(run_key, reader=reader))

    def agreement(self, run_key: str, *, reader: Reader | None = None) -> dict:
        """Inter-reviewer agreement on this run, overall ("all") and per intended category (in
        blind review over the traces ``reader`` may know others' labels on)."""
        current = self.current_labels(run_key, reader=reader)
        cats = {r["trajectory_id"]: r["intended_category"]
                for r in self.trajectory_rows(run_key, "status = 'inconclusive'")}
        return agreement(current, key=lambda tid: cats.get(tid))

    def visible_labels(self, run_key: str, trajectory_id: str, reviewer: str, *,
                       blind: bool = True) -> dict[str, ReviewLabel]:
        """Labels the reviewer may see on one trace. Blind: others' only after their own."""
        return self.current_labels(run_key, reader=Reader.of(reviewer, blind=blind)).get(trajectory_id, {})

    # --- export / import of labels ----------------------------------------------------------

    def run_meta(self, run_key: str) -> RunMeta:
        """An imported run as its exported files name it by default: its name in the workspace
        (``run_names``), key and scorer version (the app passes its own line of the run)."""
        row = self.run(run_key)
        if row is None:
            raise InputError(f"no run {run_key[:12]} in {self.path}: name the run its labels are exported of",
                             source=str(self.path))
        return RunMeta(self.run_names().get(run_key) or row["run_id"], run_key,
                       row.get("scorer_version") or LEGACY_SCORER_VERSION)

    def export_labels(self, run_key: str, fmt: str = "jsonl", *, reader: Reader | None = None,
                      run: RunMeta | None = None, exported_at: str | None = None) -> str:
        """Every label event of a run that ``reader`` may know (undo and adjudication events
        included): the event log, which ``import_labels`` reads back. Each event names its run
        (``run_key`` first, then at its end the run's name, scorer version and the export time:
        ``META_COLUMNS``); ``run``: how to name it (a score table's run is not imported), else
        ``run_meta``."""
        meta = (run or self.run_meta(run_key)).columns(exported_at or exported_now())
        events = self.history(run_key, reader=reader)
        rows = [{"run_key": run_key, "trajectory_id": e["trajectory_id"], "reviewer": e["reviewer"],
                 "action": e["action"], "label": e["label"] or "", "note": e["note"] or "",
                 "created_at": e["created_at"], "event_id": e["id"], "supersedes": e["supersedes"] or "",
                 "batch_id": e.get("batch_id") or "", **meta}
                for e in events]
        if fmt == "jsonl":
            return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
        if fmt == "csv":
            buf = io.StringIO()
            w = csv.DictWriter(buf, fieldnames=list(EVENT_LOG_COLUMNS), lineterminator="\n")
            w.writeheader()
            # formula-safe: an id, reviewer or note starting with = + - @ is not run by a spreadsheet
            w.writerows({k: csv_safe(v) for k, v in r.items()} for r in rows)
            return buf.getvalue()
        raise InputError(f"unknown label export format {fmt!r} (csv or jsonl)", source="labels export")

    def import_labels(self, path: str | Path, run_key: str | None = None) -> int:
        """Append exported label events to the run they were exported from; returns how many
        this import stored (``import_label_file``)."""
        return self.import_label_file(path, run_key).stored

    def import_label_file(self, path: str | Path, run_key: str | None = None) -> LabelImport:
        """Append exported label events to the run they were exported from.

        Refused as a whole (RunMismatchError) when the file's run hash is not ``run_key`` or not
        an imported run, and (InputError naming the line) when any event is one the app would
        refuse (``event_refusal``: checked in the order they are written, after the events
        stored) or contradicts a stored event or an earlier line of the file. An event is stored
        once: one the workspace holds already (same identity: run, trajectory, reviewer, action
        and time; same label, note and bulk act) is not written again, however many imports of
        the file run at once (a UNIQUE index on the identity, ``ON CONFLICT DO NOTHING``).
        """
        path = Path(path)
        rows = _read_label_file(path)
        keys = {r["run_key"] for r in rows}
        if len(keys) > 1:
            raise RunMismatchError(f"{path}: labels from {len(keys)} different runs in one file",
                                   expected=run_key or "", found=",".join(sorted(keys)))
        if not rows:
            return LabelImport(0, 0)
        found = keys.pop()
        if run_key is not None and found != run_key:
            raise RunMismatchError(
                f"{path}: these labels were exported from run {found[:12]}…, not {run_key[:12]}…; "
                "refusing to apply them to a different run", expected=run_key, found=found)
        if self.run(found) is None:
            raise RunMismatchError(f"{path}: run {found[:12]}… is not imported in {self.path}",
                                   expected=run_key or "", found=found)
        planned = self._plan_import(found, rows, path)
        stored = self._write_import(found, planned, path)
        return LabelImport(stored, len(rows) - stored)

    def _plan_import(self, run_key: str, rows: list[dict], path: Path) -> list[_Planned]:
        """The file's events to write, in order, each checked as the app would check it then
        (``event_refusal``, against the stored events and the file's events before it); the first
        refused, or contradicting a stored event or an earlier line, refuses the file (InputError
        naming its line)."""
        stored_events = self._events(run_key)
        fenced = self._fences(run_key)
        by_identity: dict[tuple, list[tuple[tuple, int]]] = defaultdict(list)
        for e in stored_events:
            by_identity[_identity(e)].append((_content(e), e["id"]))
        live: dict[str, dict[str, list[dict]]] = defaultdict(dict)  # trajectory → reviewer → live events
        for (tid, who), events in _live_by_reviewer(carry.counting(stored_events, fenced)).items():
            live[tid][who] = events
        statuses = self._statuses(run_key)
        adjudicators = self.adjudicators()
        provisional = max((e["id"] for e in stored_events), default=0)
        owners = {e["id"]: (e["trajectory_id"], e["reviewer"], e["action"]) for e in stored_events}
        undone = {e["supersedes"] for e in stored_events if e["action"] == "undo"}
        in_file: dict[tuple, tuple[int, tuple, int]] = {}  # identity → (line, content, id) of its first line
        file_ids: dict[int, int] = {}  # the file's event ids → the id that event has here (stored or provisional)
        planned: list[_Planned] = []

        def refused(r: dict, why: str) -> InputError:
            return InputError(f"{why}; nothing was imported", source=str(path), line=r["_line"],
                              record_id=r["trajectory_id"])

        for r in rows:
            identity, content = _identity(r), _content(r)
            sup = r["supersedes"]
            target = file_ids.get(sup, sup) if sup is not None else None
            held = next((i for c, i in by_identity.get(identity, ()) if c == content), None)
            if held is not None:  # stored already (an earlier import of the file): not written again
                event_id = held
            elif identity in in_file:
                line, first, event_id = in_file[identity]
                if first != content:
                    raise refused(r, f"the event of line {line} (same reviewer, trajectory, action and time) with "
                                     "another label, note or bulk act")
            elif identity in by_identity:
                raise refused(r, f"event {by_identity[identity][0][1]} of the workspace (same reviewer, trajectory, "
                                 "action and time) with another label, note or bulk act")
            else:
                tid = r["trajectory_id"]
                # votes only for an adjudication, as the app's door reads them: counting them for
                # every event made planning quadratic in a reviewer's events on one trace
                votes = _votes(live[tid]) if r["action"] == "adjudicate" else {}
                why = event_refusal(r["action"], tid, r["reviewer"], run_key, status=statuses.get(tid),
                                    adjudicators=adjudicators, votes=votes)
                if why is not None:
                    raise refused(r, why.why)
                if r["action"] == "undo":
                    undo_why = undo_refusal(tid, r["reviewer"], target, owners.get(target) if target is not None
                                            else None, target in undone)
                    if undo_why is not None:
                        raise refused(r, undo_why)
                    undone.add(target)
                provisional += 1
                event_id = provisional
                owners[event_id] = (tid, r["reviewer"], r["action"])
                event = {**r, "id": event_id, "supersedes": target}
                if carry.counting([event], fenced):
                    _fold(live[tid].setdefault(r["reviewer"], []), event)
                planned.append(_Planned(r, event_id, target))
            in_file.setdefault(identity, (r["_line"], content, event_id))
            if r["event_id"] is not None:
                file_ids[r["event_id"]] = event_id
        return planned

    def _write_import(self, run_key: str, planned: list[_Planned], path: Path) -> int:
        """Write the planned events; returns how many this import stored (an event another
        import stored meanwhile is the same event: not written twice)."""
        real: dict[int, int] = {}  # provisional id → the id of the event in the workspace
        stored = 0
        at = 0
        # In batches, each its own short write transaction, with a pause between: reviewers'
        # labels queue on the busy timeout and get the lock between two batches (one transaction
        # for 800 k events held it past their timeout: "database is locked"). Every event was
        # checked above; a batch's insert of an event another import (or an earlier run of this
        # one) stored already does nothing (the identity's UNIQUE index): the race is safe.
        while at < len(planned):
            with self.connect() as db, immediate(db):
                began = time.perf_counter()
                while at < len(planned) and (at % 64 or time.perf_counter() - began < IMPORT_HOLD_S):
                    p = planned[at]
                    r = p.row
                    sup = real.get(p.supersedes, p.supersedes) if p.supersedes is not None else None
                    cur = db.conn.execute(_INSERT_EVENT, (
                        run_key, r["trajectory_id"], r["reviewer"], r["action"], r["label"], r["note"],
                        r["created_at"], sup, r["batch_id"]))
                    if cur.rowcount == 1:
                        real[p.provisional] = _event_id(cur.lastrowid)
                        stored += 1
                    else:
                        real[p.provisional] = _same_event(db, run_key, r, path)
                    at += 1
            if at < len(planned):
                time.sleep(IMPORT_PAUSE_S)
        return stored


EXPORT_FIELDS = ("run_key", "trajectory_id", "reviewer", "action", "label", "note", "created_at", "event_id",
                 "supersedes", "batch_id")
"""The fields of a label event that ``import_labels`` reads."""
EVENT_LOG_COLUMNS = (*EXPORT_FIELDS, *(c for c in META_COLUMNS if c not in EXPORT_FIELDS))
"""The exported event log's columns: the event, then the run named as every exported file names it."""




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


@contextlib.contextmanager
def _one_act() -> Iterator[None]:
    """An act of the app's door: its events' identities are unique (the schema's UNIQUE index);
    a clash — the same reviewer, trajectory, action and time as a stored event, which only a clock
    set back could give, each act being stamped under the write lock — is refused, nothing
    written, never a traceback."""
    try:
        yield
    except sqlite3.IntegrityError as exc:
        if exc.sqlite_errorcode != sqlite3.SQLITE_CONSTRAINT_UNIQUE:
            raise  # any other constraint is a fault of ours, not a clock set back: said as it is
        raise StoreError("an event of this reviewer with the same trajectory, action and time is stored already "
                         "(was the clock set back?): nothing was written; try again") from exc


def _identity(e: Mapping) -> tuple:
    """A label event's identity: what makes two rows one event (the schema's UNIQUE index, with
    the run): a reviewer acts once on a trace at one instant."""
    return e["trajectory_id"], e["reviewer"], e["action"], e["created_at"]


def _content(e: Mapping) -> tuple:
    """What an event says beyond its identity (two rows of one identity that differ here are not
    the same event)."""
    return e["label"], e["note"] or "", e.get("batch_id") or None


def _same_event(db, run_key: str, r: dict, path: Path) -> int:
    """The id of the stored event ``r`` is (another import stored it since this one was checked);
    InputError when the stored one says something else."""
    for event_id, label, note, batch in db.execute(
            "SELECT id, label, note, batch_id FROM label_events WHERE run_key = ? AND trajectory_id = ? AND "
            "reviewer = ? AND action = ? AND created_at = ? ORDER BY id",
            [run_key, r["trajectory_id"], r["reviewer"], r["action"], r["created_at"]]).fetchall():
        if (label, note or "", batch or None) == _content(r):
            return event_id
    raise InputError("an event of the same reviewer, trajectory, action and time, with another label, note or bulk "
                     "act, was stored while this file was being imported; the events before this line were imported",
                     source=str(path), line=r["_line"], record_id=r["trajectory_id"])


def _may_know(e: dict, reader: Reader, readable: set[str]) -> bool:
    return (bool(reader.name) and e["reviewer"] == reader.name) or e["trajectory_id"] in readable


def _current_event(db, run_key: str, trajectory_id: str, reviewer: str) -> dict | None:
    events = _select_events(db, "run_key = ? AND trajectory_id = ? AND reviewer = ?",
                            (run_key, trajectory_id, reviewer))
    live = _live_events(events)
    return live[-1] if live else None


def _current_events(db, run_key: str, reviewer: str) -> dict[str, dict]:
    """trajectory id → the reviewer's latest live event on it, for one run."""
    events = _select_events(db, "run_key = ? AND reviewer = ?", (run_key, reviewer))
    return {tid: live[-1] for (tid, _r), live in _live_by_reviewer(events).items() if live}


def _votes_on(db, run_key: str, trajectory_id: str) -> dict[str, ReviewLabel]:
    """Each reviewer's current label on one trajectory that counts (read in the caller's transaction)."""
    events = _select_events(db, "run_key = ? AND trajectory_id = ?", (run_key, trajectory_id))
    return _derive_current(carry.counting(events, carry.fences(db, run_key))).get(trajectory_id, {})


_EVENT_COLUMNS = ("id", "run_key", "trajectory_id", "reviewer", "action", "label", "note", "created_at",
                  "supersedes", "batch_id")
_INSERT_ACT = ("INSERT INTO label_events (run_key, trajectory_id, reviewer, action, label, note, created_at, "
               "supersedes, batch_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)")


def _insert_act(db, rows: list[tuple]) -> int:
    """Write one act's events (columns as ``_INSERT_ACT``); returns the last one's id. One
    statement, under the write lock: the app's sessions share a process, and every Python step
    inside the lock waits its turn for the GIL behind whatever else runs (an import's planning
    thread held reviewers' one-row labels through sqlite-utils' table introspection)."""
    db.conn.executemany(_INSERT_ACT, rows)
    return _event_id(db.conn.execute("SELECT last_insert_rowid()").fetchone()[0])


def _select_events(db, where: str, params: tuple) -> list[dict]:
    """The run's label events matching ``where``, in id order, as dicts (one statement: see ``_insert_act``)."""
    cols = ", ".join(_EVENT_COLUMNS)
    rows = db.conn.execute(f"SELECT {cols} FROM label_events WHERE {where} ORDER BY id", params).fetchall()
    return [dict(zip(_EVENT_COLUMNS, row, strict=True)) for row in rows]


def _fold(live: list[dict], e: dict) -> None:
    """One reviewer's live events on one trajectory after ``e``: an undo withdraws the event it
    supersedes, anything else is appended. The one reading of undo: the derived labels and an
    import's checks both fold events through it."""
    if e["action"] == "undo":
        live[:] = [x for x in live if x["id"] != e["supersedes"]]
    else:
        live.append(e)


def _live_events(events: list[dict]) -> list[dict]:
    """One reviewer's events on one trajectory, with undone ones removed (in id order)."""
    live: list[dict] = []
    for e in events:
        _fold(live, e)
    return live


def _live_by_reviewer(events: list[dict]) -> dict[tuple[str, str], list[dict]]:
    grouped: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for e in events:
        grouped[(e["trajectory_id"], e["reviewer"])].append(e)
    return {k: _live_events(v) for k, v in grouped.items()}


def _votes(by_reviewer: Mapping[str, list[dict]]) -> dict[str, ReviewLabel]:
    """reviewer → the label of their latest live (non-adjudication) event, on one trajectory."""
    out: dict[str, ReviewLabel] = {}
    for reviewer, live in by_reviewer.items():
        labels = [e for e in live if e["action"] == "label"]
        if labels:
            out[reviewer] = ReviewLabel(labels[-1]["label"])
    return out


def _derive_current(events: list[dict]) -> dict[str, dict[str, ReviewLabel]]:
    """trajectory → reviewer → label of that reviewer's latest live (non-adjudication) event."""
    grouped: dict[str, dict[str, list[dict]]] = defaultdict(dict)
    for (tid, reviewer), live in _live_by_reviewer(events).items():
        grouped[tid][reviewer] = live
    return {tid: votes for tid, by in grouped.items() if (votes := _votes(by))}


def _latest_adjudications(events: list[dict]) -> dict[str, ReviewLabel]:
    best: dict[str, dict] = {}
    for (tid, _reviewer), live in _live_by_reviewer(events).items():
        for e in live:
            if e["action"] == "adjudicate" and (tid not in best or e["id"] > best[tid]["id"]):
                best[tid] = e
    return {tid: ReviewLabel(e["label"]) for tid, e in best.items()}


def _final_of(events: list[dict]) -> dict[str, ReviewLabel]:
    """trajectory → final label of these events: the latest live adjudication, else the
    reviewers' unanimous label."""
    current = _derive_current(events)
    adjudicated = _latest_adjudications(events)
    final: dict[str, ReviewLabel] = {}
    for tid in set(current) | set(adjudicated):
        if tid in adjudicated:
            final[tid] = adjudicated[tid]
        elif len(set(current[tid].values())) == 1:
            final[tid] = next(iter(current[tid].values()))
    return final


def _disputed_of(events: list[dict]) -> list[str]:
    """The trajectories whose reviewers disagree in these events and that no adjudication settled."""
    current, final = _derive_current(events), _final_of(events)
    return sorted(t for t, by in current.items() if len(set(by.values())) > 1 and t not in final)


IMPORT_HOLD_S = 0.025
"""How long ``import_labels`` holds the write lock at a time (one transaction: a batch of events)."""
IMPORT_PAUSE_S = 0.025
"""Between two batches: time for waiting reviewers' labels to take the write lock (SQLite's
busy handler polls; it queues no one), so the import takes about twice its writing time."""
_ACTIONS = ("label", "undo", "adjudicate")
_INSERT_EVENT = ("INSERT INTO label_events (run_key, trajectory_id, reviewer, action, label, note, created_at, "
                 "supersedes, batch_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) "
                 "ON CONFLICT (run_key, trajectory_id, reviewer, action, created_at, identity_rank) DO NOTHING")
_MAX_TEXT = {"run_key": 128, "trajectory_id": 4096, "reviewer": MAX_REVIEWER_CHARS, "note": MAX_NOTE_CHARS,
             "created_at": 64, "action": 16, "label": 64, "batch_id": 128}
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
    problem = unstorable(value)
    if problem is not None:  # refused as it is read, not when SQLite meets it (a UnicodeEncodeError)
        raise InputError(f"{name} {problem}", **where)
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
        # one instant, one text (the app's door writes it so): a re-spelled copy of a stored event is that event
        created = canonical_time(created or "")
    except ValueError as exc:
        raise InputError(f"created_at {created!r} is {exc}", **where) from None
    # the app's door reads a reviewer's name so too: the same event from either door has one identity
    reviewer = reviewer_identity(_text_field(obj, "reviewer", where, required=True), **where)
    return {"run_key": _text_field(obj, "run_key", where, required=True), "trajectory_id": tid, "reviewer": reviewer,
            "action": action, "label": label, "note": _text_field(obj, "note", where, required=False) or "",
            "created_at": created, "event_id": _id_field(obj, "event_id", where),
            "supersedes": _id_field(obj, "supersedes", where),
            "batch_id": _text_field(obj, "batch_id", where, required=False), "_line": line}


def _read_label_file(path: Path) -> list[dict]:
    """The label events of an exported file (CSV or JSONL), each validated (``_label_event``):
    the first bad one is an InputError naming the file, its line and the field."""
    try:
        data = read_regular(path)  # a FIFO or device is refused before reading
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:  # located by its line, as every other fault of the file is
        at_line, column = data.count(b"\n", 0, exc.start) + 1, exc.start - data.rfind(b"\n", 0, exc.start)
        raise InputError(f"cannot read labels: not UTF-8 text (byte {data[exc.start]:#04x} at column {column}: "
                         f"{exc.reason})", source=str(path), line=at_line) from exc
    rows: list[dict] = []
    if path.suffix == ".csv" or text.startswith("run_key,"):
        try:
            reader = csv.DictReader(io.StringIO(text, newline=""))
            missing = set(EXPORT_FIELDS) - set(reader.fieldnames or ())
            if "final_label" in (reader.fieldnames or ()):
                raise InputError("this is a final-labels export (one row per trace, derived), not the event log: "
                                 "import the label events file exported beside it", source=str(path), line=1)
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
