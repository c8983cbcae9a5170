"""The workspace database: its schema, the migrations that build it, and connections."""

from __future__ import annotations

import contextlib
import json
import os
import random
import re
import sqlite3
import time
import unicodedata
import urllib.parse
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import sqlite_utils

from ..errors import (
    DatabaseUnavailableError,
)

DEFAULT_DB = "litmus-review.db"
DB_ENV = "LITMUS_REVIEW_DB"
BUSY_TIMEOUT_S = 10.0


def default_db_path() -> Path:
    return Path(os.environ.get(DB_ENV) or DEFAULT_DB)


def utc_text(t: datetime) -> str:
    """An aware time as the workspace writes every time it stores: in UTC, to the microsecond
    (``2026-01-01T00:00:00.000000+00:00``). One text per instant, of one width, so text order is
    time order; a label event's time is part of its identity (schema 14), compared as text.
    OverflowError when the instant in UTC falls outside years 1 to 9999."""
    return t.astimezone(UTC).isoformat(timespec="microseconds")


def utc_now() -> str:
    return utc_text(datetime.now(UTC))


_FRACTION = re.compile(r"[.,]([0-9]+)")


def canonical_time(text: str) -> str:
    """The one text (``utc_text``) of the instant an ISO 8601 time names, however it is spelled:
    ``Z`` or ``+00:00``, fractional zeros or none, any offset; a time without a zone is read as
    UTC (as ``carry`` reads one). Every door that writes a label event's time writes this, so one
    event has one identity. ValueError (what is wrong, for the door to locate) when the text is
    not such a time, when it names a part of a microsecond (the workspace keeps microseconds:
    cutting it off would make two instants one), or when its instant in UTC falls outside years
    1 to 9999 (which UTC text cannot write)."""
    try:
        t = datetime.fromisoformat(text)
    except (TypeError, ValueError) as exc:
        why = "" if str(exc).startswith("Invalid isoformat") else f" ({exc})"  # that one only repeats the text
        raise ValueError(f"not an ISO 8601 time{why}") from None
    sign = max(text.rfind("+"), text.rfind("-"))  # an offset's sign comes after a date's dashes
    for fraction in _FRACTION.finditer(text):
        if sign > 10 and fraction.start() > sign:
            # Python reads "+00:00:00.5" as no offset at all; an ISO 8601 offset has no seconds
            raise ValueError("its offset has a fraction of a second")
        if fraction.group(1)[6:].strip("0"):
            raise ValueError("finer than a microsecond (the workspace keeps times to the microsecond)")
    if t.tzinfo is None:
        t = t.replace(tzinfo=UTC)
    try:
        return utc_text(t)
    except OverflowError:
        raise ValueError("outside the years UTC can write (1 to 9999) once moved to UTC") from None


# --- migrations ----------------------------------------------------------------------------


def normal_name(name: str | None) -> str:
    """A reviewer's name as the log stores and compares it: one name however it was typed or
    encoded. The invisible format characters (zero-width spaces and joiners, a byte-order mark,
    directional marks) are removed, the rest compatibility-normalised (NFKC: a letter written
    composed or decomposed, full-width or as a ligature reads alike), each run of white space
    made one space and the ends trimmed. Case is kept: "Alice" and "alice" look different on
    every screen, and are two names. The app's field, a sign-in, a labels file and the roles
    files are all read through it; names stored before are rewritten to it (schema 17)."""
    visible = "".join(" " if ch in _BLANK else ch for ch in (name or "")
                      if unicodedata.category(ch) != "Cf" and not _ignorable(ch))
    return " ".join(unicodedata.normalize("NFKC", visible).split())


_DEFAULT_IGNORABLE = ((0x00AD, 0x00AD), (0x034F, 0x034F), (0x061C, 0x061C), (0x115F, 0x1160), (0x17B4, 0x17B5),
                      (0x180B, 0x180F), (0x200B, 0x200F), (0x202A, 0x202E), (0x2060, 0x206F), (0x3164, 0x3164),
                      (0xFE00, 0xFE0F), (0xFEFF, 0xFEFF), (0xFFA0, 0xFFA0), (0xFFF0, 0xFFF8), (0x1BCA0, 0x1BCA3),
                      (0x1D173, 0x1D17A), (0xE0000, 0xE0FFF))
"""Unicode's Default_Ignorable_Code_Point ranges (DerivedCoreProperties.txt), which ``unicodedata``
does not expose: code points a font draws as nothing when it has no glyph for them, whatever
their category (U+034F and the variation selectors are marks, the Hangul fillers letters)."""
_BLANK = frozenset("\u2800")
"""Characters drawn as blank space that Unicode calls neither white space nor ignorable (the
Braille blank): a space in a name, so trimmed at its ends and folded inside it."""


def _ignorable(ch: str) -> bool:
    point = ord(ch)
    return point >= 0x00AD and any(low <= point <= high for low, high in _DEFAULT_IGNORABLE)


def _m1(db: sqlite_utils.Database) -> None:
    db.table("runs").create({
        "run_key": str, "run_id": str, "model": str, "format": str, "source": str, "stored_path": str,
        "payloads_path": str, "harness_name": str, "harness_version": str, "capture_limit_bytes": int,
        "evidence_standard": str, "taxonomy_json": str, "imported_at": str, "trajectories": int,
        "tool_calls": int, "records_seen": int, "rejected_json": str, "recapture_json": str,
    }, pk="run_key")
    db.table("trajectories").create({
        "run_key": str, "trajectory_id": str, "task_id": str, "model": str, "intended_category": str,
        "fired_category": str, "status": str, "reason": str, "reasons": str, "lenient_safe": int,
        "termination": str, "tool_call_count": int, "max_raw_bytes": int, "tools": str,
        "suggestion": str, "suggestion_evidence": str, "classifier": str, "classifier_evidence": str,
        "incomplete_call": int, "recaptured_calls": str, "evidence_standard": str,
        "final_output_preview": str, "line": int, "offset": int, "length": int,
    }, pk=("run_key", "trajectory_id"), foreign_keys=[("run_key", "runs", "run_key")])
    db.table("calls").create({
        "run_key": str, "trajectory_id": str, "call_index": int, "tool": str, "captured_bytes": int,
        "raw_size_bytes": int, "gaps": str,
    }, pk=("run_key", "trajectory_id", "call_index"))
    db.table("label_events").create({
        "id": int, "run_key": str, "trajectory_id": str, "reviewer": str, "action": str, "label": str,
        "note": str, "created_at": str, "supersedes": int,
    }, pk="id")
    db.table("trajectories").create_index(["run_key", "status"])
    db.table("calls").create_index(["run_key"])
    db.table("label_events").create_index(["run_key", "trajectory_id"])


def _m2(db: sqlite_utils.Database) -> None:
    # One row per call cost more than parsing at a million calls (SQLite takes ~320k rows/s);
    # what the app needs of calls (sizes for the histogram, gaps for display) fits in two
    # columns of the trajectory row.
    db.execute("ALTER TABLE trajectories ADD COLUMN call_sizes TEXT")
    db.execute("ALTER TABLE trajectories ADD COLUMN call_gaps TEXT")
    db.table("calls").drop()


def _m3(db: sqlite_utils.Database) -> None:
    # Every query on trajectories starts from one run (the primary key's prefix) and a run's
    # rows are scanned in milliseconds; the (run_key, status) index cost ~20 % of each insert.
    db.execute("DROP INDEX IF EXISTS idx_trajectories_run_key_status")


def _m4(db: sqlite_utils.Database) -> None:
    # What the aggregates read of a run, written beside its rows at import: reading every row
    # back into Python was most of a run's first render.
    # (Schema 4 also wrote the copies of runs imported before it; schema 5 rescores every run and
    # writes them again, so that backfill is no longer done here.)
    db.table("run_columns").create({"run_key": str, "format": int, "data": bytes}, pk="run_key",
                             foreign_keys=[("run_key", "runs", "run_key")])


def _m5(db: sqlite_utils.Database) -> None:
    # Scorer 2.0: SAFE needs a classifier of record on the full surface, the lenient rate is the
    # harness's own claim (NULL lenient_safe: it did not judge), no-verdict and at-limit rules.
    # Every stored run is scored again (by the gate, below); labels are kept.
    db.execute("ALTER TABLE trajectories ADD COLUMN truncation TEXT")
    db.execute("ALTER TABLE runs ADD COLUMN classifier_of_record TEXT")
    db.execute("ALTER TABLE runs ADD COLUMN scorer_version TEXT")
    db.execute("ALTER TABLE runs ADD COLUMN reclassifier TEXT")
    db.execute("ALTER TABLE runs ADD COLUMN reported_safe_rate REAL")
    db.execute("ALTER TABLE runs ADD COLUMN reported_safe_rate_source TEXT")
    db.execute("UPDATE runs SET scorer_version = '1.0'")
    # The runs are rescored by the scorer-version gate (``Workspace.rescore``) once the
    # workspace is open, from their original bytes, never from a converted copy (issue 22).


def _m6(db: sqlite_utils.Database) -> None:
    # Provenance and the harness's run status: the input file's own SHA-256 (the run key is not
    # it when a side log or a verdict map took part), an upload's original name (its source is
    # a deleted temporary path), the side log as given, and how the harness says the run ended.
    have = set(db.table("runs").columns_dict)
    for column in ("file_sha256", "original_name", "side_log_source", "side_log_sha256", "run_status",
                   "run_status_detail"):
        if column not in have:  # a database set back to an older version keeps its columns
            db.execute(f"ALTER TABLE runs ADD COLUMN {column} TEXT")


def _m7(db: sqlite_utils.Database) -> None:
    # The SHA-256 of the workspace's own copy of a run (a converted copy's differs from the
    # source's), checked before replay reads it (schema 7). Older runs have none: a canonical copy is
    # checked against its name (the content hash it was stored under), a converted one,
    # written by the workspace and never linked to a user's file, is not checked.
    if "stored_sha256" not in db.table("runs").columns_dict:
        db.execute("ALTER TABLE runs ADD COLUMN stored_sha256 TEXT")


def _m8(db: sqlite_utils.Database) -> None:
    # A bulk act (one reviewer labelling a filtered set at once) records one event per trace, as
    # before, each carrying the act's id: the history shows the act, and Undo withdraws it whole.
    if "batch_id" not in db.table("label_events").columns_dict:  # a database set back keeps its columns
        db.execute("ALTER TABLE label_events ADD COLUMN batch_id TEXT")


def _m9(db: sqlite_utils.Database) -> None:
    # One settle (issue 22): a run keeps the verdict map it was scored with and its format's own
    # figures (computed by the importer from the original bytes), and where its original bytes
    # are (a converted run's source file; a canonical run's copy is its original): a run scored
    # under another scorer version is rescored from them, never from a converted copy.
    have = set(db.table("runs").columns_dict)
    for column in ("verdict_map", "format_metrics_json", "terminations_json", "original_path"):
        if column not in have:  # a database set back to an older version keeps its columns
            db.execute(f"ALTER TABLE runs ADD COLUMN {column} TEXT")


def _m10(db: sqlite_utils.Database) -> None:
    # Issue 23: a run keeps what vouched for its header's taxonomy_rules (the check's "n of n"
    # message, or why it was refused) and whether it was scored with --require-proof (a rescore
    # keeps it; it is part of the run key). Runs imported before read as "not checked" and "not
    # required" (their scores were computed so).
    have = set(db.table("runs").columns_dict)
    if "classifier_of_record_check" not in have:
        db.execute("ALTER TABLE runs ADD COLUMN classifier_of_record_check TEXT")
    if "require_proof" not in have:
        db.execute("ALTER TABLE runs ADD COLUMN require_proof INTEGER")


def _m11(db: sqlite_utils.Database) -> None:
    # An Inspect log's proof side log changes its scores: a run records the proof's hash (the
    # workspace keeps the proof under it), so a rescore reads that proof and no other. Runs
    # imported before say nothing; the rescore matches a proof to their key.
    if "proof_sha256" not in db.table("runs").columns_dict:
        db.execute("ALTER TABLE runs ADD COLUMN proof_sha256 TEXT")


def _m12(db: sqlite_utils.Database) -> None:
    # Issue 33: a rescore keeps a trajectory's labels only where the record the reviewers replayed
    # is byte for byte the record it writes (``carry``). Where it is not, or cannot be compared,
    # the labels given until then are set aside here (the events themselves are never changed:
    # history and exports keep them); labels given after count again.
    if "label_fences" not in db.table_names():
        db.table("label_fences").create({
            "run_key": str, "trajectory_id": str, "through_event": int, "fenced_at": str, "reason": str,
        }, pk=("run_key", "trajectory_id"), foreign_keys=[("run_key", "runs", "run_key")])


def _m13(db: sqlite_utils.Database) -> None:
    # Issue 35: a run is named "model · task · variant" from what its format records (the
    # importers' ``RunHeader.task`` and ``variant``). Runs imported before keep what their rows
    # already say of it: an Inspect run's task (its harness name, "inspect_ai TASK"), an AgentDojo
    # run directory's suites (its trajectories' task ids, "suite/user_task") and attack.
    have = set(db.table("runs").columns_dict)
    for column in ("task", "variant"):
        if column not in have:  # a database set back to an older version keeps its columns
            db.execute(f"ALTER TABLE runs ADD COLUMN {column} TEXT")
    prefix = "inspect_ai "
    db.execute("UPDATE runs SET task = substr(harness_name, ?1) WHERE format = 'inspect' AND task IS NULL "
               "AND substr(harness_name, 1, ?1 - 1) = ?2 AND length(harness_name) >= ?1", [len(prefix) + 1, prefix])
    for key, metrics in db.execute("SELECT run_key, format_metrics_json FROM runs WHERE format = 'agentdojo_dir' "
                                   "AND task IS NULL").fetchall():
        suites = sorted({t.split("/", 1)[0] for (t,) in db.execute(
            "SELECT DISTINCT task_id FROM trajectories WHERE run_key = ?", [key]).fetchall() if t and "/" in t})
        facts = (json.loads(metrics) if metrics else {}).get("agentdojo") or {}
        attack = facts.get("attack")
        variant = ("no attack" if attack == "none" else str(attack)) if attack else None
        if variant and facts.get("repeat"):
            variant += f", {facts['repeat']}"
        db.execute("UPDATE runs SET task = ?, variant = ? WHERE run_key = ?", [", ".join(suites) or None, variant, key])


def _m14(db: sqlite_utils.Database) -> None:
    # Issue 34: a label event is stored once however many imports of its file race. Its identity
    # is its run, trajectory, reviewer, action and time — what a re-import already matched stored
    # events on, and what makes an act one act: a reviewer acts once on a trace at an instant (the
    # app stamps each act under the write lock, to the microsecond). A UNIQUE index holds it, and an
    # import inserts ON CONFLICT DO NOTHING inside its transaction.
    # Events stored twice before (two imports that raced, a file that repeated a line) are one
    # event: each later copy is removed, and an event that superseded a copy supersedes the first
    # (the labels derived are those one import would have stored). Rows of one identity that say
    # different things (another label, note or bulk act) are distinct events and are all kept: the
    # later ones get identity_rank 1, 2, … (every other event, and every new one, has 0).
    if "identity_rank" not in db.table("label_events").columns_dict:  # a database set back keeps its columns
        db.execute("ALTER TABLE label_events ADD COLUMN identity_rank INTEGER NOT NULL DEFAULT 0")
    _fold_identity_twins(db)
    db.execute(_IDENTITY_INDEX)


_IDENTITY_INDEX = ("CREATE UNIQUE INDEX IF NOT EXISTS idx_label_events_identity ON label_events "
                   "(run_key, trajectory_id, reviewer, action, created_at, identity_rank)")


def _fold_identity_twins(db: sqlite_utils.Database) -> None:
    """Make the rows of each label event identity one event (``_m14``, ``_m16``): of the rows that
    say the same (label, note, bulk act) the earliest is kept and the later copies removed, what
    superseded a copy superseding the kept one; the rows that say different things are all kept,
    ranked 0, 1, … in id order (``identity_rank``)."""
    twins = db.execute(
        "SELECT e.id, e.run_key, e.trajectory_id, e.reviewer, e.action, e.created_at, e.label, coalesce(e.note, ''), "
        "e.batch_id FROM label_events e JOIN (SELECT run_key, trajectory_id, reviewer, action, created_at "
        "FROM label_events GROUP BY run_key, trajectory_id, reviewer, action, created_at HAVING count(*) > 1) d "
        "USING (run_key, trajectory_id, reviewer, action, created_at) ORDER BY e.id").fetchall()
    firsts: dict[tuple, list[tuple[tuple, int]]] = {}
    copies: list[tuple[int, int]] = []  # (a copy, the first event of its identity that says the same)
    ranks: list[tuple[int, int]] = []  # (rank, id) of the distinct events of an identity
    for event_id, *identity_content in twins:
        identity, content = tuple(identity_content[:5]), tuple(identity_content[5:])
        kept = firsts.setdefault(identity, [])
        first = next((i for c, i in kept if c == content), None)
        if first is not None:
            copies.append((event_id, first))
            continue
        ranks.append((len(kept), event_id))
        kept.append((content, event_id))
    if copies:
        db.execute("CREATE TEMP TABLE label_event_copies (copy INTEGER PRIMARY KEY, first INTEGER NOT NULL)")
        db.conn.executemany("INSERT INTO label_event_copies VALUES (?, ?)", copies)
        db.execute("UPDATE label_events SET supersedes = (SELECT first FROM label_event_copies "
                   "WHERE copy = supersedes) WHERE supersedes IN (SELECT copy FROM label_event_copies)")
        db.execute("DELETE FROM label_events WHERE id IN (SELECT copy FROM label_event_copies)")
        db.execute("DROP TABLE label_event_copies")
    db.conn.executemany("UPDATE label_events SET identity_rank = ? WHERE id = ?", ranks)


def _m15(db: sqlite_utils.Database) -> None:
    # Issue 35: the importers read the harness's own categories (Inspect's sample metadata,
    # AgentDojo's suite and injection task, tau2's domain). A run records how its categories were
    # read (``importers.CATEGORY_VERSION``); runs imported before say nothing (NULL), and the
    # workspace re-derives theirs from their original bytes as it opens (``Importing.
    # rederive_categories``): a category moves no status, so nothing is rescored.
    if "category_version" not in db.table("runs").columns_dict:
        db.execute("ALTER TABLE runs ADD COLUMN category_version INTEGER")


_CANONICAL_TIME_GLOB = ("[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]T[0-9][0-9]:[0-9][0-9]:[0-9][0-9]."
                        "[0-9][0-9][0-9][0-9][0-9][0-9]+00:00")
"""The shape of ``utc_text``: a label event's time is stored in no other (schema 16's triggers)."""


def _m16(db: sqlite_utils.Database) -> None:
    """Issue 34 (attack finding F9): one event, one identity. The identity (schema 14) holds the
    event's time as text, and ``labels import`` stored the text a file gave: the same event
    written ``…T00:00:00Z`` and ``…T00:00:00+00:00`` (or with fractional zeros, or at another
    offset naming the same instant) was two events, so re-importing an export that another tool
    had re-serialised doubled its votes. Every door now writes ``canonical_time``'s text; here
    every stored time is rewritten to it (a time no parser reads, or that UTC cannot write, is
    kept as it was: nothing is dropped, and it matches nothing), and then the events that became
    one are folded as schema 14 folded racing imports' copies (``_fold_identity_twins``).

    The earliest row (lowest id) of an event is the one kept. The log is read in id order, and a
    reviewer's current label is her latest: a later copy is a re-import's, written after acts
    that came after the event itself, so keeping it would put her first label after her second
    and make it current again. The earliest is also the row the
    events written between it and the copy superseded. What superseded a removed copy
    supersedes the kept row.

    Triggers then refuse any other text for a label event's time (``_CANONICAL_TIME_GLOB``): a
    door that forgot the normaliser fails, rather than storing an instant twice."""
    db.execute("DROP INDEX IF EXISTS idx_label_events_identity")  # rewritten times may meet before they fold
    rewritten = []
    for event_id, created in db.execute("SELECT id, created_at FROM label_events").fetchall():
        try:
            text = canonical_time(created)
        except ValueError:
            continue
        if text != created:
            rewritten.append((text, event_id))
    db.conn.executemany("UPDATE label_events SET created_at = ? WHERE id = ?", rewritten)
    _fold_identity_twins(db)
    db.execute(_IDENTITY_INDEX)
    refuse = ("BEGIN SELECT RAISE(ABORT, 'a label event''s created_at must be canonical UTC text (as "
              "schema.canonical_time writes it)'); END")
    not_canonical = f"NEW.created_at IS NULL OR NEW.created_at NOT GLOB '{_CANONICAL_TIME_GLOB}'"
    db.execute(f"CREATE TRIGGER IF NOT EXISTS label_events_time_on_insert BEFORE INSERT ON label_events "
               f"WHEN {not_canonical} {refuse}")
    db.execute(f"CREATE TRIGGER IF NOT EXISTS label_events_time_on_update BEFORE UPDATE OF created_at ON "
               f"label_events WHEN {not_canonical} {refuse}")



def _m17(db: sqlite_utils.Database) -> None:
    """Issue 34 (attack finding F10): one reviewer, one name. A name typed composed and decomposed
    ("José" as é or as e + ◌́), or with a zero-width space in it, looked the same on every
    screen and was two reviewers: one person's two labels agreed with each other, and a
    reviewer with the adjudicator's name plus an invisible character was another reviewer.
    Every door now stores ``normal_name``'s form; here every stored name is rewritten to it (a
    name that would become empty, all invisible, is kept as it was: nothing is dropped), and the
    events that became one are folded as schema 14 folded racing imports' copies."""
    db.execute("DROP INDEX IF EXISTS idx_label_events_identity")  # rewritten names may meet before they fold
    for (stored,) in db.execute("SELECT DISTINCT reviewer FROM label_events").fetchall():
        name = normal_name(stored)
        if name and name != stored:
            db.execute("UPDATE label_events SET reviewer = ? WHERE reviewer = ?", [name, stored])
    _fold_identity_twins(db)
    db.execute(_IDENTITY_INDEX)


def _m18(db: sqlite_utils.Database) -> None:
    """Issue 34 (the attack's second pass): names still told apart by characters drawn as
    nothing (U+034F, a variation selector, a Hangul filler: ignorable, not format characters)
    or as a blank (the Braille blank) are one name now; stored names are rewritten as schema 17
    rewrote them."""
    _m17(db)


MIGRATIONS: tuple[Callable[[sqlite_utils.Database], None], ...] = (_m1, _m2, _m3, _m4, _m5, _m6, _m7, _m8, _m9,
                                                                  _m10, _m11, _m12, _m13, _m14, _m15, _m16, _m17,
                                                                  _m18)
"""Append only; ``PRAGMA user_version`` records how many have run."""


# --- connections ----------------------------------------------------------------------------


@contextlib.contextmanager
def immediate(db: sqlite_utils.Database) -> Iterator[sqlite_utils.Database]:
    """A write transaction that takes the write lock up front (``BEGIN IMMEDIATE``).

    A deferred transaction that later upgrades to a writer can fail with "database is locked"
    without waiting; IMMEDIATE makes every writer queue on the busy timeout instead.

    The wait for the lock is ours (``_begin_immediate``), not SQLite's busy handler: that one
    backs off to long sleeps between tries, so a reviewer's one-row label kept missing the gaps a large
    ``labels import`` leaves between its short batches and timed out behind it.
    """
    _begin_immediate(db.conn)
    try:
        yield db
    except BaseException:
        db.conn.rollback()
        raise
    else:
        try:
            _commit(db.conn)
        except BaseException:
            db.conn.rollback()  # a commit that failed (a full disk) leaves nothing half-written
            raise


LOCK_POLL_S = (0.001, 0.004)
"""How long a writer waiting for the write lock sleeps between tries (drawn from this range, so
that waiters do not try in step): a few milliseconds, well inside the gap a batched import leaves."""


def _begin_immediate(conn: sqlite3.Connection) -> None:
    """``BEGIN IMMEDIATE``, waiting for the write lock up to the connection's busy timeout by
    trying every few milliseconds (``LOCK_POLL_S``) rather than on SQLite's backoff; a lock still
    held at the deadline raises SQLite's own "database is locked"."""
    timeout_ms = conn.execute("PRAGMA busy_timeout").fetchone()[0]
    deadline = time.monotonic() + timeout_ms / 1000
    conn.execute("PRAGMA busy_timeout = 0")
    try:
        while True:
            try:
                conn.execute("BEGIN IMMEDIATE")
                return
            except sqlite3.OperationalError as exc:
                if exc.sqlite_errorcode != sqlite3.SQLITE_BUSY or time.monotonic() >= deadline:
                    raise
            time.sleep(random.uniform(*LOCK_POLL_S))
    finally:
        conn.execute(f"PRAGMA busy_timeout = {timeout_ms}")


def _commit(conn: sqlite3.Connection) -> None:
    conn.commit()


_CANNOT_WRITE = frozenset({sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED, sqlite3.SQLITE_READONLY, sqlite3.SQLITE_CANTOPEN,
                           sqlite3.SQLITE_FULL, sqlite3.SQLITE_IOERR})
"""SQLite's primary result codes for a file that cannot be written now (held by another writer
past the busy timeout, read-only, a full disk, an I/O error)."""
_DAMAGED = frozenset({sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB})
"""... for a file whose pages are damaged, or that is not a database."""


def _unavailable(exc: sqlite3.DatabaseError) -> str | None:
    """"cannot write" or "damaged" when ``exc`` is SQLite's complaint about the file itself (by its
    result code), else None (a constraint, a query's own error: raised as it is)."""
    if isinstance(exc, sqlite3.IntegrityError):
        return None
    code = getattr(exc, "sqlite_errorcode", None)
    if code is None:
        # Raised by Python's sqlite3 module, not SQLite: a plain DatabaseError, or a stored
        # text that does not decode as UTF-8 (an OperationalError): the file's content is bad.
        return "damaged" if type(exc) in (sqlite3.DatabaseError, sqlite3.OperationalError) else None
    primary = code & 0xFF  # an extended code (SQLITE_IOERR_WRITE, ...) carries its primary in the low byte
    if primary in _CANNOT_WRITE:
        return "cannot write"
    if primary in _DAMAGED or type(exc) is sqlite3.DatabaseError:
        return "damaged"
    return None



class Connection:
    """A litmus-review workspace: the SQLite file and a folder beside it for run files."""

    def __init__(self, path: str | Path | None = None, *, busy_timeout_s: float = BUSY_TIMEOUT_S) -> None:
        self.path = Path(path) if path is not None else default_db_path()
        self.busy_timeout_s = busy_timeout_s
        self.files = self.path.with_name(self.path.name + ".d")
        self.read_only = _read_only(self.path)
        """The database file or its folder cannot be written: it is opened read-only (and,
        where the folder is not writable, as immutable), so it can still be read."""
        identity = _file_identity(self.path)
        if identity is None or identity not in _MIGRATED:
            self.migrate()

    def _open(self) -> sqlite3.Connection:
        if not self.read_only:
            return sqlite3.connect(str(self.path), timeout=self.busy_timeout_s)
        uri = "file:" + urllib.parse.quote(str(self.path.resolve()))
        conn = sqlite3.connect(uri + "?mode=ro", uri=True, timeout=self.busy_timeout_s)
        try:
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
            return conn
        except sqlite3.OperationalError:
            # WAL needs its -shm file; in a folder nobody may write to it cannot be made, and
            # nobody can be writing either: read the file as it is.
            conn.close()
            return sqlite3.connect(uri + "?immutable=1", uri=True, timeout=self.busy_timeout_s)

    @contextlib.contextmanager
    def connect(self) -> Iterator[sqlite_utils.Database]:
        """One connection for one operation. SQLite's errors about the file itself (locked,
        read-only, full disk, damaged pages, not a database) become DatabaseUnavailableError."""
        try:
            conn = self._open()
            conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout_s * 1000)}")
            conn.execute("PRAGMA synchronous = NORMAL")
            conn.execute("PRAGMA foreign_keys = ON")
        except sqlite3.Error as exc:
            raise DatabaseUnavailableError(f"cannot open the database {self.path}: {exc}", path=str(self.path)) from exc
        db = sqlite_utils.Database(conn, execute_plugins=False)
        try:
            yield db
        except sqlite3.DatabaseError as exc:
            msg = str(exc)
            kind = _unavailable(exc)
            if kind == "cannot write":
                raise DatabaseUnavailableError(
                    f"the database {self.path} cannot be written ({msg}); is it read-only, on a full disk, or held "
                    f"by another program for more than {self.busy_timeout_s:g} s?", path=str(self.path)) from exc
            if kind == "damaged":
                raise DatabaseUnavailableError(
                    f"the database {self.path} is damaged or is not a litmus-review workspace ({msg}); restore it "
                    f"from a backup, or start a new workspace and import the runs again", path=str(self.path)) from exc
            raise
        finally:
            conn.close()

    def check_integrity(self) -> None:
        """DatabaseUnavailableError unless SQLite's ``quick_check`` finds every page sound
        (an import never writes into a damaged file)."""
        with self.connect() as db:
            problems = [r[0] for r in db.execute("PRAGMA quick_check(5)").fetchall()]
        if problems != ["ok"]:
            raise DatabaseUnavailableError(
                f"the database {self.path} is damaged ({'; '.join(problems)}); nothing was read from it or written "
                "to it. Restore it from a backup, or start a new workspace and import the runs again",
                path=str(self.path))

    def check_workspace(self) -> None:
        """DatabaseUnavailableError (the CLI's and the app's one message) unless the file is a
        sound litmus-review workspace: every page sound (``check_integrity``), the schema this
        version writes (not a newer one), its tables present."""
        self.check_integrity()
        with self.connect() as db:
            version = db.execute("PRAGMA user_version").fetchone()[0]
            tables = set(db.table_names())
        if version > len(MIGRATIONS):
            raise DatabaseUnavailableError(
                f"the database {self.path} has schema {version}, newer than this version's ({len(MIGRATIONS)}); "
                "open it with the litmus-review that wrote it", path=str(self.path))
        missing = sorted({"runs", "trajectories", "label_events", "run_columns", "label_fences"} - tables)
        if missing:
            raise DatabaseUnavailableError(
                f"the database {self.path} is damaged or is not a litmus-review workspace (no table "
                f"{', '.join(missing)}); nothing was read from it or written to it. Restore it from a backup, or "
                "start a new workspace and import the runs again", path=str(self.path))

    def migrate(self) -> int:
        """Bring the schema up to date (WAL on first). Returns the schema version."""
        if not self.path.parent.exists():
            raise DatabaseUnavailableError(f"folder {self.path.parent} does not exist", path=str(self.path))
        with self.connect() as db:
            version = db.execute("PRAGMA user_version").fetchone()[0]
            if version < len(MIGRATIONS):
                if self.read_only:
                    raise DatabaseUnavailableError(
                        f"the database {self.path} is read-only and its schema ({version}) predates this version's "
                        f"({len(MIGRATIONS)}); open it once where it can be written, to upgrade it",
                        path=str(self.path))
                if db.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                    db.enable_wal()
                with immediate(db):
                    # re-read under the write lock: another process may have migrated meanwhile
                    version = db.execute("PRAGMA user_version").fetchone()[0]
                    for i in range(version, len(MIGRATIONS)):
                        MIGRATIONS[i](db)
                        db.execute(f"PRAGMA user_version = {i + 1}")
                version = len(MIGRATIONS)
            if not self.read_only and version == len(MIGRATIONS):
                _ensure_indexes(db)
        identity = _file_identity(self.path)
        if identity is not None:
            _MIGRATED.add(identity)
        return version



_INDEXES = {
    # A label's supersedes link and Undo read one reviewer's events on one trace: without the
    # reviewer in the index, a trace with thousands of imported events made every label scan them
    # all inside its write transaction, and eight reviewers' labels queued past the busy timeout.
    "idx_label_events_reviewer": "label_events(run_key, trajectory_id, reviewer)",
    # A bulk act and Undo read one reviewer's events on every trace of a run: without this, each
    # scanned the run's every event (hundreds of thousands once a labels file is imported) inside
    # its write transaction, and eight reviewers' acts held the lock until a labels import
    # running beside them waited past its busy timeout ("database is locked").
    "idx_label_events_run_reviewer": "label_events(run_key, reviewer, id)",
}
"""Indexes that change no row, made when missing (``CREATE INDEX IF NOT EXISTS``), outside the
versioned migrations."""


def _ensure_indexes(db: sqlite_utils.Database) -> None:
    have = {name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'index'").fetchall()}
    for name, on in _INDEXES.items():
        if name not in have:
            with immediate(db):
                db.execute(f"CREATE INDEX IF NOT EXISTS {name} ON {on}")


_MIGRATED: set[tuple[str, int, int]] = set()
"""The database files (path, device, inode) this process has brought up to date: a
``Workspace`` is made for every page loader call, and its schema is checked once per process
per file, not on each (a file replaced at the same path is a new inode, and is checked again).
A schema changed under a running process by something else is not seen: call ``migrate()``."""


def _file_identity(path: Path) -> tuple[str, int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return str(path.absolute()), st.st_dev, st.st_ino


def _read_only(db: Path) -> bool:
    """An existing database file that this process may not write, or whose folder it may not
    write (where SQLite keeps its -wal and -shm files)."""
    return db.exists() and not (os.access(db, os.W_OK) and os.access(db.parent, os.W_OK))


