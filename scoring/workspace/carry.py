"""Labels across a rescore: a label counts only on the record its reviewer replayed.

A reviewer's label is evidence about the trajectory as the workspace showed it: the record at its
byte range in the run's stored copy (``reads.read_back``). A rescore writes the run's rows (and,
for a converted run, its copy) again, under the same run key and trajectory ids, so the labels
stay keyed to them; whether they still describe what is shown is a fact the workspace checks:
the SHA-256 of each labelled trajectory's record before the rescore (read from the old copy,
itself checked against the hash it was stored with) and after (from the copy the rescore wrote).
Where the two differ, or the old one cannot be read from bytes the workspace holds (its copy is
gone, changed, or was never hashed), the labels given until then are set aside: a *fence*
(``label_fences``) says which events stop counting. The events themselves are never changed
(history, export and agreement's inputs keep them); labels given after the fence count.

A canonical run's copy is its original bytes, so its records never change and its labels always
carry; a converted run's carry where today's importer renders the trajectory as the old one did.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from ..errors import InputError
from ..importers import canonical
from .copies import verified_copy

CHANGED = "its record changed at a rescore"
"""A fence's reason: the record the labels were given on is not the record shown now."""
NOT_COMPARED = ("its record before the rescore could not be read from bytes the workspace holds (the copy is gone, "
                "changed or was never hashed)")
"""A fence's reason: nothing shows the record shown now is the one the labels were given on."""
GONE = "the rescore found no such trajectory in the run"
"""A fence's reason: the trajectory is not in the run any more."""

_IDS_PER_QUERY = 10_000


@dataclass(frozen=True, slots=True)
class Fence:
    """The label events of one trajectory that a rescore set aside."""

    through_event: int
    """Events with an id up to this one do not count."""
    fenced_at: datetime
    """Nor do events made before this time (an exported label imported later)."""
    reason: str


def labelled_ids(db, run_key: str) -> list[str]:
    """The trajectories of a run that have any label event."""
    return [t for (t,) in db.execute("SELECT DISTINCT trajectory_id FROM label_events WHERE run_key = ?",
                                     [run_key]).fetchall()]


def _ranges(db, run_key: str, ids: Sequence[str]) -> dict[str, tuple[int, int]]:
    out: dict[str, tuple[int, int]] = {}
    for start in range(0, len(ids), _IDS_PER_QUERY):
        part = list(ids[start:start + _IDS_PER_QUERY])
        marks = ", ".join("?" * len(part))
        out.update((t, (o, n)) for t, o, n in db.execute(
            f"SELECT trajectory_id, offset, length FROM trajectories WHERE run_key = ? AND trajectory_id IN ({marks})",
            [run_key, *part]).fetchall())
    return out


def record_digests(path: str, ranges: Mapping[str, tuple[int, int]]) -> dict[str, str]:
    """SHA-256 of each trajectory's record in the copy at ``path`` (its byte range)."""
    out: dict[str, str] = {}
    with open(path, "rb") as fh:
        for tid, (offset, length) in ranges.items():
            fh.seek(offset)
            out[tid] = hashlib.sha256(fh.read(length)).hexdigest()
    return out


@dataclass(frozen=True, slots=True)
class Shown:
    """The labelled trajectories of a run as its reviewers replayed them, read before a rescore."""

    ids: tuple[str, ...]
    ranges: Mapping[str, tuple[int, int]]
    """Each one's byte range in the copy as it was."""
    copy_sha256: str | None
    """The SHA-256 the copy was stored with (None: never hashed, a converted copy before schema 7)."""
    digests: Mapping[str, str] | None
    """Each one's record's SHA-256, read from that copy checked against its hash; None where it
    could not be (gone or changed)."""


def shown_before(db, run: dict) -> Shown:
    """What the labelled trajectories of ``run`` (its located row) show now, before a rescore
    rewrites its rows and copy."""
    ids = tuple(labelled_ids(db, run["run_key"]))
    expected = run.get("stored_sha256")
    if expected is None and run["format"] == canonical.NAME:  # a canonical copy before schema 7: named by its hash
        stem = Path(run["stored_path"]).name.removesuffix(".jsonl")
        expected = stem if canonical.HEX64.fullmatch(stem) else None
    ranges = _ranges(db, run["run_key"], ids) if ids else {}
    digests = None
    if ids and expected is not None:
        try:
            digests = record_digests(verified_copy(run), ranges)
        except (InputError, OSError):
            digests = None
    return Shown(ids, ranges, expected, digests)


def fence_changed(db, run_key: str, shown: Shown, copy: str, copy_sha256: str | None, now: str) -> list[str]:
    """In the rescore's transaction, once its rows are written and its new copy is at ``copy``
    (``copy_sha256``: its hash): set aside the labels of every labelled trajectory whose record
    is not the one ``shown`` read; the ids set aside. Where the old copy could not be read but the
    new one has the very hash it was stored with, the old records are read from the new copy at
    their old ranges (the same bytes). Labels given since ``shown`` was read are compared with
    nothing, so they are set aside too."""
    ids = labelled_ids(db, run_key)
    if not ids:
        return []
    before = shown.digests
    if before is None and shown.copy_sha256 is not None and copy_sha256 == shown.copy_sha256:
        before = record_digests(copy, shown.ranges)
    before = before or {}
    after = record_digests(copy, _ranges(db, run_key, ids))
    reasons = {}
    for tid in ids:
        if tid not in after:
            reasons[tid] = GONE
        elif tid not in before:
            reasons[tid] = NOT_COMPARED
        elif before[tid] != after[tid]:
            reasons[tid] = CHANGED
    if reasons:
        last = dict(db.execute("SELECT trajectory_id, max(id) FROM label_events WHERE run_key = ? "
                               "GROUP BY trajectory_id", [run_key]).fetchall())
        db.conn.executemany("INSERT OR REPLACE INTO label_fences (run_key, trajectory_id, through_event, fenced_at, "
                            "reason) VALUES (?, ?, ?, ?, ?)",
                            [(run_key, tid, last[tid], now, why) for tid, why in reasons.items()])
    return sorted(reasons)


def fences(db, run_key: str) -> dict[str, Fence]:
    """trajectory id → the fence on its labels, for one run."""
    return {t: Fence(n, _when(at) or datetime.max.replace(tzinfo=UTC), why) for t, n, at, why in db.execute(
        "SELECT trajectory_id, through_event, fenced_at, reason FROM label_fences WHERE run_key = ?",
        [run_key]).fetchall()}


def counting(events: Iterable[dict], fenced: Mapping[str, Fence]) -> list[dict]:
    """The events a fence leaves counting: on a fenced trajectory, only those made after it (a
    later id and a time not before it: a label exported before the rescore and imported after
    gets a new id, and keeps its time)."""
    if not fenced:
        return list(events)
    out = []
    for e in events:
        f = fenced.get(e["trajectory_id"])
        if f is not None:
            made = _when(e["created_at"])
            if e["id"] <= f.through_event or made is None or made < f.fenced_at:
                continue
        out.append(e)
    return out


def _when(text: str | None) -> datetime | None:
    """An event's time (ISO 8601; one without a zone read as UTC), None when it is not one."""
    try:
        t = datetime.fromisoformat(text or "")
    except ValueError:
        return None
    return t if t.tzinfo is not None else t.replace(tzinfo=UTC)
