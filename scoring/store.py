"""The SQLite workspace (sqlite-utils): imported runs, scored trajectories, reviewer labels.

- One file, WAL mode, a busy timeout, versioned migrations run before any writer starts.
- A run is imported in **one transaction**: a killed import leaves nothing behind, and the same
  content imported twice is one run (keyed by content SHA-256).
- Trajectory and call metadata live in columns; the heavy text stays in the run file and is
  read back by byte range for replay (canonical files are kept in the workspace folder).
- Labels are **append-only events**. The current label per reviewer and the final label per
  trajectory are derived from the history, never stored in its place; undo is an event too.

Every write opens its own connection (connections are never shared across threads).
"""

from __future__ import annotations

import bisect
import concurrent.futures
import contextlib
import csv
import dataclasses
import hashlib
import io
import itertools
import json
import marshal
import operator
import os
import re
import socket
import sqlite3
import tempfile
import urllib.parse
import uuid
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Iterable, Iterator, NamedTuple, Sequence

import msgspec
import numpy as np
import sqlite_utils

from .aggregate import ScoreColumns
from .errors import (
    DatabaseUnavailableError,
    InputError,
    ReasonCode,
    RunMismatchError,
    StoreError,
)
from .files import check_regular, open_regular, read_regular
from .importers import canonical, parse_run, sniff_file
from .importers._common import decode_json_line, duplicate_message
from .ingest import (
    _COL,
    IMPORT_WORKERS,
    PARALLEL_MIN_BYTES,
    PARALLEL_WINDOW,
    ROW_COLUMNS,
    Block,
    _decode_header,
    _pool_map,
    _read_header_line,
    block_ranges,
    no_cyclic_gc,
    score_range,
)
from .model import (
    Category,
    EvidenceStandard,
    Rejection,
    ReviewLabel,
    RunHeader,
    ScoredTrajectory,
    Status,
    Suggestion,
    Termination,
    Trajectory,
    Truncation,
)
from .recapture import PayloadJoin
from .report import with_reported_figure
from .score import SCORER_VERSION
from .text import csv_safe, csv_unsafe

try:
    import fcntl
except ImportError:  # not on Windows: no reflinks there, a copy is made
    fcntl = None

DEFAULT_DB = "litmus-review.db"
DB_ENV = "LITMUS_REVIEW_DB"
BUSY_TIMEOUT_S = 10.0


def default_db_path() -> Path:
    return Path(os.environ.get(DB_ENV) or DEFAULT_DB)


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="microseconds")


# --- migrations ----------------------------------------------------------------------------


def _m1(db: sqlite_utils.Database) -> None:
    db["runs"].create({
        "run_key": str, "run_id": str, "model": str, "format": str, "source": str, "stored_path": str,
        "payloads_path": str, "harness_name": str, "harness_version": str, "capture_limit_bytes": int,
        "evidence_standard": str, "taxonomy_json": str, "imported_at": str, "trajectories": int,
        "tool_calls": int, "records_seen": int, "rejected_json": str, "recapture_json": str,
    }, pk="run_key")
    db["trajectories"].create({
        "run_key": str, "trajectory_id": str, "task_id": str, "model": str, "intended_category": str,
        "fired_category": str, "status": str, "reason": str, "reasons": str, "lenient_safe": int,
        "termination": str, "tool_call_count": int, "max_raw_bytes": int, "tools": str,
        "suggestion": str, "suggestion_evidence": str, "classifier": str, "classifier_evidence": str,
        "incomplete_call": int, "recaptured_calls": str, "evidence_standard": str,
        "final_output_preview": str, "line": int, "offset": int, "length": int,
    }, pk=("run_key", "trajectory_id"), foreign_keys=[("run_key", "runs", "run_key")])
    db["calls"].create({
        "run_key": str, "trajectory_id": str, "call_index": int, "tool": str, "captured_bytes": int,
        "raw_size_bytes": int, "gaps": str,
    }, pk=("run_key", "trajectory_id", "call_index"))
    db["label_events"].create({
        "id": int, "run_key": str, "trajectory_id": str, "reviewer": str, "action": str, "label": str,
        "note": str, "created_at": str, "supersedes": int,
    }, pk="id")
    db["trajectories"].create_index(["run_key", "status"])
    db["calls"].create_index(["run_key"])
    db["label_events"].create_index(["run_key", "trajectory_id"])


def _m2(db: sqlite_utils.Database) -> None:
    # One row per call cost more than parsing at a million calls (SQLite takes ~320k rows/s);
    # what the app needs of calls (sizes for the histogram, gaps for display) fits in two
    # columns of the trajectory row.
    db.execute("ALTER TABLE trajectories ADD COLUMN call_sizes TEXT")
    db.execute("ALTER TABLE trajectories ADD COLUMN call_gaps TEXT")
    db["calls"].drop()


def _m3(db: sqlite_utils.Database) -> None:
    # Every query on trajectories starts from one run (the primary key's prefix) and a run's
    # rows are scanned in milliseconds; the (run_key, status) index cost ~20 % of each insert.
    db.execute("DROP INDEX IF EXISTS idx_trajectories_run_key_status")


def _m4(db: sqlite_utils.Database) -> None:
    # What the aggregates read of a run, written beside its rows at import: reading every row
    # back into Python was most of a run's first render.
    # (Schema 4 also wrote the copies of runs imported before it; schema 5 rescores every run and
    # writes them again, so that backfill is no longer done here.)
    db["run_columns"].create({"run_key": str, "format": int, "data": bytes}, pk="run_key",
                             foreign_keys=[("run_key", "runs", "run_key")])


def _m5(db: sqlite_utils.Database) -> None:
    # Scorer 2.0: SAFE needs a classifier of record on the full surface, the lenient rate is the
    # harness's own claim (NULL lenient_safe: it did not judge), no-verdict and at-limit rules.
    # Every stored run is scored again from its workspace copy; labels are kept.
    db.execute("ALTER TABLE trajectories ADD COLUMN truncation TEXT")
    db.execute("ALTER TABLE runs ADD COLUMN classifier_of_record TEXT")
    db.execute("ALTER TABLE runs ADD COLUMN scorer_version TEXT")
    db.execute("ALTER TABLE runs ADD COLUMN reclassifier TEXT")
    db.execute("ALTER TABLE runs ADD COLUMN reported_safe_rate REAL")
    db.execute("ALTER TABLE runs ADD COLUMN reported_safe_rate_source TEXT")
    db.execute("UPDATE runs SET scorer_version = '1.0'")
    for run in list(db["runs"].rows):
        rescore_run(db, run)


def _m6(db: sqlite_utils.Database) -> None:
    # Provenance and the harness's run status: the input file's own SHA-256 (the run key is not
    # it when a side log or a verdict map took part), an upload's original name (its source is
    # a deleted temporary path), the side log as given, and how the harness says the run ended.
    have = set(db["runs"].columns_dict)
    for column in ("file_sha256", "original_name", "side_log_source", "side_log_sha256", "run_status",
                   "run_status_detail"):
        if column not in have:  # a database set back to an older version keeps its columns
            db.execute(f"ALTER TABLE runs ADD COLUMN {column} TEXT")


def _m7(db: sqlite_utils.Database) -> None:
    # The SHA-256 of the workspace's own copy of a run (a converted copy's differs from the
    # source's), checked before replay reads it (schema 7). Older runs have none: a canonical copy is
    # checked against its name (the content hash it was stored under), a converted one,
    # written by the workspace and never linked to a user's file, is not checked.
    if "stored_sha256" not in db["runs"].columns_dict:
        db.execute("ALTER TABLE runs ADD COLUMN stored_sha256 TEXT")


def _m8(db: sqlite_utils.Database) -> None:
    # A bulk act (one reviewer labelling a filtered set at once) records one event per trace, as
    # before, each carrying the act's id: the history shows the act, and Undo withdraws it whole.
    if "batch_id" not in db["label_events"].columns_dict:  # a database set back keeps its columns
        db.execute("ALTER TABLE label_events ADD COLUMN batch_id TEXT")


MIGRATIONS: tuple[Callable[[sqlite_utils.Database], None], ...] = (_m1, _m2, _m3, _m4, _m5, _m6, _m7, _m8)
"""Append only; ``PRAGMA user_version`` records how many have run."""


# --- connections ----------------------------------------------------------------------------


@contextlib.contextmanager
def _immediate(db: sqlite_utils.Database) -> Iterator[sqlite_utils.Database]:
    """A write transaction that takes the write lock up front (``BEGIN IMMEDIATE``).

    A deferred transaction that later upgrades to a writer can fail with "database is locked"
    without waiting; IMMEDIATE makes every writer queue on the busy timeout instead.
    """
    db.conn.execute("BEGIN IMMEDIATE")
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


def _commit(conn: sqlite3.Connection) -> None:
    conn.commit()


_CANNOT_WRITE = ("locked", "readonly", "read-only", "unable to open", "disk is full", "disk i/o error")
_DAMAGED = ("malformed", "not a database", "corrupt", "could not decode")


class Workspace:
    """A litmus-review workspace: the SQLite file and a folder beside it for run files."""

    def __init__(self, path: str | Path | None = None, *, busy_timeout_s: float = BUSY_TIMEOUT_S) -> None:
        self.path = Path(path) if path is not None else default_db_path()
        self.busy_timeout_s = busy_timeout_s
        self.files = self.path.with_name(self.path.name + ".d")
        self.read_only = _read_only(self.path)
        """The database file or its folder cannot be written: it is opened read-only (and,
        where the folder is not writable, as immutable), so it can still be read."""
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
            low = msg.lower()
            if isinstance(exc, sqlite3.IntegrityError):
                raise
            if any(m in low for m in _CANNOT_WRITE):
                raise DatabaseUnavailableError(
                    f"the database {self.path} cannot be written ({msg}); is it read-only, on a full disk, or held "
                    f"by another program for more than {self.busy_timeout_s:g} s?", path=str(self.path)) from exc
            if any(m in low for m in _DAMAGED) or type(exc) is sqlite3.DatabaseError:
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
                f"the database {self.path} is damaged ({'; '.join(problems)}); nothing was imported. Restore it from "
                "a backup, or start a new workspace and import the runs again", path=str(self.path))

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
                        f"({len(MIGRATIONS)}); open it once where it can be written, to upgrade it", path=str(self.path))
                if db.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                    db.enable_wal()
                with _immediate(db):
                    # re-read under the write lock: another process may have migrated meanwhile
                    version = db.execute("PRAGMA user_version").fetchone()[0]
                    for i in range(version, len(MIGRATIONS)):
                        MIGRATIONS[i](db)
                        db.execute(f"PRAGMA user_version = {i + 1}")
                version = len(MIGRATIONS)
            return version

    # --- runs ----------------------------------------------------------------------------

    def import_run(
        self,
        path: str | Path,
        *,
        fmt: str = "auto",
        payloads: str | Path | None = None,
        progress: Callable[[int], None] | None = None,
        verdict_map=None,
        reclassifier: str | None = None,
        original_name: str | None = None,
        scorer: "Callable[..., Iterable[Block]] | None" = None,
    ) -> "ImportResult":
        """Import (and score) a run in one transaction; idempotent by content hash (and by the
        side log's hash, the Inspect verdict mapping and the re-classifier, when given: they
        change the scores). ``reclassifier`` is a spec for ``classifiers.load_classifier``.

        ``original_name`` is the file's name as its owner knows it, when ``path`` is a copy (an
        upload's temporary file): it is recorded as the run's provenance.

        ``scorer`` scores the blocks elsewhere (``engine.workspace_scorer``: on a Dask cluster):
        called as ``scorer(pay)`` once the copy is made, it yields the run's scored blocks in
        file order and applies each block's share of the side log to ``pay``; the rows are
        written here as the local scorer's are."""
        path = Path(path)
        before = _file_state(path)
        pay = PayloadJoin(payloads) if payloads is not None else None
        self.check_integrity()
        if fmt == "auto":
            fmt = sniff_file(path)
        if fmt == canonical.NAME and pay is None and verdict_map is None and reclassifier is None \
                and scorer is None and IMPORT_WORKERS > 1 and before.size >= PARALLEL_MIN_BYTES:
            return self._import_parallel(path, progress, before, original_name)
        content = _file_sha256(path)
        parts = [content] + ([pay.content_sha256] if pay else []) + ([str(verdict_map)] if verdict_map else []) \
            + ([f"classifier={reclassifier}"] if reclassifier else [])
        run_key = content if len(parts) == 1 else hashlib.sha256(":".join(parts).encode()).hexdigest()
        existing = self.run(run_key)
        if existing is not None:
            return ImportResult(run_key=run_key, already_present=True, run=existing, rejected=())
        plugin = None
        if reclassifier is not None and scorer is None:  # with a scorer, its workers load it
            from .classifiers import load_classifier

            plugin = load_classifier(reclassifier)
        with self._store_file(path, run_key if verdict_map else content, fmt, verdict_map, content) as stored, \
                stored.read.open("rb") as fh, plugin or contextlib.nullcontext():
            header_line, header, first_line, header_end = _read_header(fh, path, fmt)
            results = scorer(pay) if scorer is not None else (
                score_range(header_line, str(path), str(stored.read), off, n, pay=pay, reclassifier=plugin)
                for off, n in block_ranges(fh, header_end, stored.read.stat().st_size))
            return self._write_run(run_key, header, results, stored, pay, progress, list(stored.rejections),
                                   first_line + 1, path, before, reclassifier,
                                   provenance=_provenance(content, original_name, pay))

    def _import_parallel(self, path: Path, progress, before: "_FileState",
                         original_name: str | None = None) -> "ImportResult":
        """A large canonical run on two cores. The workspace's copy is made first, hashed as
        it is written (its hash is the run key); worker processes then parse and score blocks
        of lines of that copy while this process hashes the source again (in a thread: hashlib
        releases the GIL). A source that changed in between (a torn copy) is refused: the two
        hashes differ. Nothing is written to the database before the key is known."""
        self.files.mkdir(parents=True, exist_ok=True)
        sweep_abandoned_copies(self.files)
        copy = _PendingCopy(_temporary_name(self.files / "run.jsonl"), self.files / "run.jsonl")
        with copy:
            run_key = copy.sha256 = self._copy_in(path, copy.read)
            existing = self.run(run_key)
            if existing is not None:
                return ImportResult(run_key=run_key, already_present=True, run=existing, rejected=())
            copy.final = self.files / f"{run_key}.jsonl"
            with copy.read.open("rb") as fh, concurrent.futures.ThreadPoolExecutor(1) as hashing:
                rehashed = hashing.submit(_file_sha256, path)
                header_line, header, first_line, header_end = _read_header(fh, path, canonical.NAME)
                work = ((header_line, str(path), str(copy.read), off, n)
                        for off, n in block_ranges(fh, header_end, before.size))
                results = _pool_map(score_range, work, IMPORT_WORKERS, window=PARALLEL_WINDOW)
                try:
                    blocks = _scored_ahead(results, progress, self.files)
                finally:
                    results.close()
                _same_content(path, run_key, rehashed.result())
            return self._write_run(run_key, header, blocks, copy, None, None, [], first_line + 1, path, before,
                                   provenance=_provenance(run_key, original_name, None))

    def _store_file(self, path: Path, content: str, fmt: str, verdict_map=None,
                    source_sha256: str | None = None) -> "_PendingCopy":
        """The workspace's own canonical copy of the run, for replay.

        Canonical files are copied (a copy-on-write reflink where the file system has one,
        else a streamed copy), hashed as they are copied: the hash must be ``source_sha256``,
        the one the run key was made from, or the file changed during the import (a same-size
        edit included). Other formats are read once into memory, checked the same way, and
        converted to canonical JSONL. The copy is never the user's file, so editing or
        deleting the source later changes nothing the reviewers see. It keeps a temporary name
        until the run is committed, so an import that fails (a file still being written, a
        full disk, a crash) leaves no copy behind that no run points at.
        """
        self.files.mkdir(parents=True, exist_ok=True)
        sweep_abandoned_copies(self.files)
        dest = self.files / f"{content}.jsonl"
        copy = _PendingCopy(_temporary_name(dest), dest)
        try:
            if fmt == canonical.NAME:
                copy.sha256 = self._copy_in(path, copy.read)
                if source_sha256 is not None:
                    _same_content(path, source_sha256, copy.sha256)
            else:
                data = read_regular(path)
                if source_sha256 is not None:
                    _same_content(path, source_sha256, hashlib.sha256(data).hexdigest())
                run = with_reported_figure(parse_run(data, str(path), fmt, verdict_map=verdict_map))
                del data
                digest = hashlib.sha256()
                with self._writing(), copy.read.open("wb") as out:
                    for obj in itertools.chain([canonical.dump_header(run.header)],
                                               map(canonical.dump_trajectory, run.trajectories)):
                        line = _json_line(obj)
                        digest.update(line)
                        _write_chunk(out, line)
                copy.sha256 = digest.hexdigest()
                # The converted file holds only what parsed; its rejections are kept beside it
                # (at commit) so the import report still lists them.
                copy.rejections = tuple(run.rejected)
                copy.side = self.files / f"{content}.rejected.json" if run.rejected else None
        except BaseException:
            copy.discard()
            raise
        return copy

    def _copy_in(self, path: Path, dest: Path) -> str:
        """Copy ``path`` to ``dest`` (a new file in the workspace folder); its SHA-256."""
        with self._writing():
            return _copy_file(path, dest)

    @contextlib.contextmanager
    def _writing(self) -> Iterator[None]:
        """An OSError while writing into the workspace folder (a full disk) becomes a
        StoreError naming it; the caller removes what it had written."""
        try:
            yield
        except OSError as exc:
            raise StoreError(f"cannot keep a copy of the run in {self.files}: {exc.strerror or exc}") from exc

    def _keep(self, path: Path, name: str, sha256: str) -> "_PendingCopy":
        """The workspace's own copy of ``path`` (a side log), checked against the hash it was
        read with, so replay does not depend on a file that may be deleted or edited (an
        upload's temporary file, say)."""
        dest = self.files / name
        copy = _PendingCopy(_temporary_name(dest), dest)
        try:
            copy.sha256 = self._copy_in(path, copy.read)
            _same_content(path, sha256, copy.sha256)
        except BaseException:
            copy.discard()
            raise
        return copy

    def _conversion_rejections(self, content: str) -> list[Rejection]:
        side = self.files / f"{content}.rejected.json"
        if not side.exists():
            return []
        return [Rejection(**r) for r in json.loads(side.read_text())]

    def _write_run(self, run_key, header: RunHeader, results: Iterable["Block"], stored: "_PendingCopy", pay, progress,
                   rejected: list[Rejection], next_line: int, source: Path, source_state: "_FileState",
                   reclassifier: str | None = None, *, provenance: dict | None = None) -> "ImportResult":
        keeping = self._keep(Path(pay.source), f"{pay.content_sha256}.payloads.jsonl", pay.content_sha256) \
            if pay else None
        with keeping or contextlib.nullcontext() as kept:
            # Every block is parsed and scored (the taxonomy rules run) before the write lock
            # is taken: reviewers' labels wait only for the rows to be written, never for rules.
            if not isinstance(results, _Spooled):
                results = _scored_ahead(results, progress, self.files)
            published: list[_PendingCopy] = []
            try:
                with self.connect() as db, _immediate(db):
                    # Another import of the same content may have committed while this one was
                    # hashing or scoring (two sessions uploading one run): then the run is theirs.
                    raced = db.execute("select 1 from runs where run_key = ?", [run_key]).fetchone() is not None
                    if not raced:
                        self._insert_rows(db, run_key, header, results, stored, kept, pay, None, rejected,
                                          next_line, source, source_state, reclassifier, provenance=provenance,
                                          published=published)
            except BaseException:
                # The commit failed after the copies took their names (a full disk): they are
                # removed unless a committed run uses them, so no orphan copy is left.
                self._unpublish(published)
                raise
        return ImportResult(run_key=run_key, already_present=raced, run=self.run(run_key),
                            rejected=() if raced else tuple(rejected))

    def _insert_rows(self, db, run_key, header: RunHeader, results: Iterable["Block"], stored: "_PendingCopy",
                     kept: "_PendingCopy | None", pay, progress, rejected: list[Rejection], next_line: int,
                     source: Path, source_state: "_FileState", reclassifier: str | None = None, *,
                     provenance: dict | None = None, published: list | None = None) -> None:
        """The run row, its trajectory rows, its counts and its copies, in the caller's transaction.
        Adds the rejections found on the way to ``rejected``; the copies it names go in
        ``published``."""
        seen = len(rejected)
        # The run row goes first (the foreign keys point at it); its counts are filled in
        # at the end of the same transaction, so nobody sees a half-imported run.
        db["runs"].insert({
            "run_key": run_key, "run_id": header.run_id, "model": header.model, "format": header.format,
            "source": header.source, "stored_path": str(stored.final), "stored_sha256": stored.sha256,
            "payloads_path": str(kept.final) if kept else None,
            "harness_name": header.harness_name, "harness_version": header.harness_version,
            "capture_limit_bytes": header.capture_limit_bytes,
            "evidence_standard": header.evidence_standard.value,
            "taxonomy_json": json.dumps(canonical.dump_header(header)["taxonomy"]),
            "imported_at": _now(), "trajectories": 0, "tool_calls": 0, "records_seen": 0,
            "classifier_of_record": header.classifier_of_record, "scorer_version": SCORER_VERSION,
            "reclassifier": reclassifier, "reported_safe_rate": header.reported_safe_rate,
            "reported_safe_rate_source": header.reported_safe_rate_source,
            "run_status": header.run_status or None, "run_status_detail": header.run_status_detail or None,
            **(provenance or {}),
        })
        n_traj, n_calls, seen, columns = _write_blocks(db, run_key, header.source, results, rejected, next_line,
                                                       progress, seen)
        if _file_state(source) != source_state:
            # A harness still writing its log: the run key (the hash) and the records read
            # would describe different files. Nothing is stored; the transaction rolls back.
            raise InputError("the file changed while it was being imported (is the harness still writing "
                             "it?); import it again once it is complete", source=str(source))
        recap = pay.report(header.run_id) if pay is not None else None
        db.conn.execute("INSERT INTO run_columns (run_key, format, data) VALUES (?, ?, ?)",
                        [run_key, _COLUMNS_FORMAT, columns.encode()])
        db["runs"].update(run_key, {
            "trajectories": n_traj, "tool_calls": n_calls, "records_seen": seen,
            "rejected_json": json.dumps([_rej(r) for r in rejected]),
            "recapture_json": json.dumps({"applied": recap.applied,
                                          "rejected": [_rej(r) for r in recap.rejected]}) if recap else None,
        })
        # Last step before the commit: the copies take their names (a failed commit after
        # this leaves a correct, content-named copy that a re-import reuses).
        try:
            for copy in (kept, stored):
                if copy is not None and copy.pending:
                    copy.publish()
                    if published is not None:
                        published.append(copy)
        except OSError as exc:
            raise InputError(f"cannot keep a copy of the run in {self.files}: {exc}", source=str(source)) from exc

    def _unpublish(self, published: list["_PendingCopy"]) -> None:
        if not published:
            return
        try:
            with self.connect() as db:
                used = {p for (p,) in db.execute("select stored_path from runs union all "
                                                 "select payloads_path from runs").fetchall() if p}
        except (StoreError, sqlite3.Error):
            return  # cannot tell: a copy with its content name is never wrong to keep
        for copy in published:
            if str(copy.final) not in used:
                with contextlib.suppress(OSError):
                    copy.final.unlink()
                    if copy.side is not None:
                        copy.side.unlink()

    def runs(self) -> list[dict]:
        """Every imported run's row, newest first."""
        with self.connect() as db:
            return list(db["runs"].rows_where(order_by="imported_at desc"))

    def run(self, run_key: str) -> dict | None:
        with self.connect() as db:
            rows = list(db["runs"].rows_where("run_key = ?", [run_key]))
        return rows[0] if rows else None

    def find_run(self, ref: str) -> dict:
        """A run by key, key prefix (≥ 8 hex) or run id; InputError when none or ambiguous."""
        with self.connect() as db:
            rows = list(db["runs"].rows_where("run_key = ? or run_id = ? or (length(?) >= 8 and run_key like ? || '%')",
                                              [ref, ref, ref, ref]))
        if len(rows) != 1:
            what = "no imported run" if not rows else f"{len(rows)} imported runs"
            raise InputError(f"{what} matches {ref!r}", source=str(self.path))
        return rows[0]

    def header(self, run_key: str) -> RunHeader:
        r = self._run_or_raise(run_key)
        return RunHeader(
            run_id=r["run_id"], model=r["model"], harness_name=r["harness_name"] or "",
            harness_version=r["harness_version"] or "", capture_limit_bytes=r["capture_limit_bytes"],
            taxonomy=tuple(Category(id=c["id"], name=c["name"], payload_dependent=c["payload_dependent"],
                                    rules=tuple(c["rules"])) for c in json.loads(r["taxonomy_json"])),
            evidence_standard=EvidenceStandard(r["evidence_standard"]), format=r["format"], source=r["source"],
            classifier_of_record=r.get("classifier_of_record") or "harness_verdict",
            reported_safe_rate=r.get("reported_safe_rate"),
            reported_safe_rate_source=r.get("reported_safe_rate_source") or "",
            run_status=r.get("run_status") or "", run_status_detail=r.get("run_status_detail") or "")

    def _run_or_raise(self, run_key: str) -> dict:
        r = self.run(run_key)
        if r is None:
            raise InputError(f"no imported run {run_key!r}", source=str(self.path))
        return r

    def scored(self, run_key: str, *, evidence: bool = False) -> tuple[ScoredTrajectory, ...]:
        """The stored scores of a run, as the aggregator takes them.

        Without ``evidence`` the classifier and suggestion evidence texts are left out (the
        aggregates never read them; pages show them from the trajectory rows): at 200 k
        trajectories that halves the load.
        """
        cols = _SCORED_COLUMNS + (("classifier_evidence", "suggestion_evidence") if evidence else ())
        with self.connect() as db:
            rows = db.execute(f"select {', '.join(cols)} {_WHOLE_RUN} order by rowid", [run_key]).fetchall()
        with no_cyclic_gc():  # a third of the build time at 200 k rows
            return tuple(_scored_from_row(r, evidence) for r in rows)

    def score_columns(self, run_key: str) -> ScoreColumns:
        """What the aggregates read of a run's scores, as columns: from the copy written at
        import, else from the rows (slower; ``scored``, building score objects, slower still).
        Equal to ``ScoreColumns.of(ws.scored(run_key))`` either way (tested)."""
        with self.connect() as db:
            stored = db.execute("SELECT format, data FROM run_columns WHERE run_key = ?", [run_key]).fetchone()
        if stored is not None and stored[0] == _COLUMNS_FORMAT:
            columns = _decode_columns(stored[1])
            if columns is not None:
                return columns
        return self.score_columns_from_rows(run_key)

    def score_columns_from_rows(self, run_key: str) -> ScoreColumns:
        """``score_columns`` read from the trajectory rows (the record the stored copy is
        derived from)."""
        with self.connect() as db:
            fields = _score_fields(db, run_key)
        return ScoreColumns.build(*fields)

    def trajectory_rows(self, run_key: str, where: str = "", params: Iterable = ()) -> list[dict]:
        with self.connect() as db:
            sql = "select * from trajectories where run_key = ?" + (f" and ({where})" if where else "") + " order by rowid"
            cur = db.execute(sql, [run_key, *params])
            cols = [d[0] for d in cur.description]
            return [dict(zip(cols, r)) for r in cur.fetchall()]

    def trajectory_table(self, run_key: str, columns: Sequence[str]) -> list[tuple]:
        """The named columns of every trajectory row of a run, in file order: the cheap summary
        view for tables (``trajectory_rows`` builds a dict of every column per row, several
        times slower)."""
        unknown = [c for c in columns if c not in _TRAJECTORY_COLUMNS]
        if unknown or not columns:
            raise ValueError(f"not trajectory columns: {unknown or 'none given'}")
        with self.connect() as db:
            return db.execute(f"select {', '.join(columns)} {_WHOLE_RUN} order by rowid", [run_key]).fetchall()

    def call_sizes(self, run_key: str) -> list[int]:
        """Every tool call's raw argument size (captured size where no raw size was recorded),
        in no particular order."""
        with self.connect() as db:
            (joined,) = db.execute(f"select group_concat(call_sizes, ',') {_WHOLE_RUN} and call_sizes != ''",
                                   [run_key]).fetchone()
        return _int_list(joined) if joined else []

    def load_trajectory(self, run_key: str, trajectory_id: str) -> Trajectory:
        """The full trajectory (heavy text), read back from the stored run file by byte range."""
        run = self._run_or_raise(run_key)
        rows = self.trajectory_rows(run_key, "trajectory_id = ?", [trajectory_id])
        if not rows:
            raise InputError(f"no trajectory {trajectory_id!r} in run {run['run_id']!r}", source=str(self.path))
        t = canonical.read_trajectory_at(_verified_copy(run), rows[0]["offset"], rows[0]["length"])
        if t.id != trajectory_id:
            raise InputError(f"the stored run file changed since import: byte {rows[0]['offset']:,} now holds "
                             f"{t.id!r}, not {trajectory_id!r}; re-import the run", source=run["stored_path"])
        if run["payloads_path"]:
            t = PayloadJoin(_verified_side_log(run)).apply(t)
        return t

    # --- labels ---------------------------------------------------------------------------

    def add_label(self, run_key: str, trajectory_id: str, reviewer: str, label: ReviewLabel | str,
                  note: str = "", *, adjudicate: bool = False) -> int:
        """Append a label event; returns its id. Adjudication decides disagreements."""
        reviewer = _reviewer(reviewer)
        label = ReviewLabel(label)
        self._check_labellable(run_key, trajectory_id)
        with self.connect() as db, _immediate(db):
            prev = _current_event(db, run_key, trajectory_id, reviewer)
            return db["label_events"].insert({
                "run_key": run_key, "trajectory_id": trajectory_id, "reviewer": reviewer,
                "action": "adjudicate" if adjudicate else "label", "label": label.value, "note": note,
                "created_at": _now(), "supersedes": prev["id"] if prev else None,
            }).last_pk

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
        with self.connect() as db:
            status = dict(db.execute(
                "SELECT trajectory_id, status FROM trajectories WHERE run_key = ?", [run_key]).fetchall())
        for tid in ids:
            if tid not in status:
                raise InputError(f"no trajectory {tid!r} in run {run_key[:12]}", source=str(self.path))
            if status[tid] != Status.INCONCLUSIVE.value:
                raise StoreError(f"trajectory {tid!r} is {status[tid].upper()}, not Inconclusive: the bulk label "
                                 "was not applied to any trajectory")
        batch = uuid.uuid4().hex[:12]
        now = _now()
        with self.connect() as db, _immediate(db):
            current = _current_events(db, run_key, reviewer)
            db["label_events"].insert_all(({
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
        with self.connect() as db, _immediate(db):
            current = _current_events(db, run_key, reviewer)
            live = [e for e in current.values() if e["action"] != "undo"]
            if not live:
                return None
            last = max(live, key=lambda e: e["id"])
            batch = last.get("batch_id")
            undone = [e for e in live if batch and e.get("batch_id") == batch] if batch else [last]
            now = _now()
            db["label_events"].insert_all(({
                "run_key": run_key, "trajectory_id": e["trajectory_id"], "reviewer": reviewer, "action": "undo",
                "label": None, "note": "", "created_at": now, "supersedes": e["id"], "batch_id": batch,
            } for e in sorted(undone, key=lambda e: e["id"])), batch_size=500)
        return {"trajectory_ids": [e["trajectory_id"] for e in sorted(undone, key=lambda e: e["id"])],
                "label": last["label"], "action": last["action"], "batch_id": batch}

    def undo(self, run_key: str, trajectory_id: str, reviewer: str) -> int | None:
        """Append an undo event that withdraws the reviewer's current label (None if none)."""
        reviewer = _reviewer(reviewer)
        with self.connect() as db, _immediate(db):
            prev = _current_event(db, run_key, trajectory_id, reviewer)
            if prev is None:
                return None
            return db["label_events"].insert({
                "run_key": run_key, "trajectory_id": trajectory_id, "reviewer": reviewer, "action": "undo",
                "label": None, "note": "", "created_at": _now(), "supersedes": prev["id"],
            }).last_pk

    def last_labelled(self, run_key: str, reviewer: str) -> str | None:
        """The trajectory of the reviewer's most recent live label in the run (what Undo undoes)."""
        reviewer = _reviewer(reviewer)
        with self.connect() as db:
            events = list(db["label_events"].rows_where("run_key = ? and reviewer = ?", [run_key, reviewer],
                                                        order_by="id"))
        live = [e for evs in _live_by_reviewer(events).values() for e in evs if e["action"] != "undo"]
        return max(live, key=lambda e: e["id"])["trajectory_id"] if live else None

    def _check_labellable(self, run_key: str, trajectory_id: str) -> None:
        rows = self.trajectory_rows(run_key, "trajectory_id = ?", [trajectory_id])
        if not rows:
            raise InputError(f"no trajectory {trajectory_id!r} in run {run_key[:12]}", source=str(self.path))
        if rows[0]["status"] != Status.INCONCLUSIVE.value:
            raise StoreError(
                f"trajectory {trajectory_id!r} is {rows[0]['status'].upper()}, not Inconclusive: only "
                "Inconclusive trajectories take reviewer labels (an UNSCORED one can never be labelled safe)")

    def history(self, run_key: str, trajectory_id: str | None = None) -> list[dict]:
        with self.connect() as db:
            if trajectory_id is None:
                return list(db["label_events"].rows_where("run_key = ?", [run_key], order_by="id"))
            return list(db["label_events"].rows_where("run_key = ? and trajectory_id = ?",
                                                      [run_key, trajectory_id], order_by="id"))

    def current_labels(self, run_key: str) -> dict[str, dict[str, ReviewLabel]]:
        """trajectory id → reviewer → that reviewer's current label (derived from history)."""
        return _derive_current(self.history(run_key))

    def final_labels(self, run_key: str) -> dict[str, ReviewLabel]:
        """trajectory id → final label: the latest live adjudication, else the reviewers'
        unanimous label. Disagreements without adjudication have no final label (pending)."""
        events = self.history(run_key)
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
        from .agreement import agreement

        current = self.current_labels(run_key)
        cats = {r["trajectory_id"]: r["intended_category"]
                for r in self.trajectory_rows(run_key, "status = 'inconclusive'")}
        return agreement(current, key=lambda tid: cats.get(tid))

    def visible_labels(self, run_key: str, trajectory_id: str, reviewer: str, *, blind: bool = True) -> dict[str, ReviewLabel]:
        """Labels the reviewer may see. Blind: others' labels only after their own."""
        labels = self.current_labels(run_key).get(trajectory_id, {})
        if blind and (reviewer or "").strip() not in labels:
            return {}  # blind: nothing before your own label (and nothing to an anonymous reader)
        return dict(labels)

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
        id_map: dict[int, int] = {}
        added = 0
        with self.connect() as db, _immediate(db):
            for line, r in enumerate(rows, start=2):
                key = (r["reviewer"], r["created_at"], r["action"], r["trajectory_id"])
                if key in known:
                    continue
                if r["action"] not in ("label", "undo", "adjudicate"):
                    raise InputError(f"unknown action {r['action']!r}", source=str(path), line=line)
                if r["action"] != "undo":
                    ReviewLabel(r["label"])
                sup = r.get("supersedes")
                new_id = db["label_events"].insert({
                    "run_key": found, "trajectory_id": r["trajectory_id"], "reviewer": _reviewer(r["reviewer"]),
                    "action": r["action"], "label": r["label"] or None, "note": r.get("note", ""),
                    "created_at": r["created_at"],
                    "supersedes": id_map.get(int(sup), int(sup)) if sup not in (None, "") else None,
                    "batch_id": r.get("batch_id") or None,
                }).last_pk
                if r.get("event_id") not in (None, ""):
                    id_map[int(r["event_id"])] = new_id
                added += 1
        return added


EXPORT_FIELDS = ("run_key", "trajectory_id", "reviewer", "action", "label", "note", "created_at", "event_id", "supersedes",
                 "batch_id")


@dataclass(frozen=True, slots=True)
class ImportResult:
    run_key: str
    already_present: bool
    run: dict
    rejected: tuple[Rejection, ...]


@contextlib.contextmanager
def _reading(path: Path) -> Iterator[None]:
    """An OSError while reading ``path`` becomes an InputError naming it."""
    try:
        yield
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror or exc}", source=str(path)) from exc


class _FileState(NamedTuple):
    """What tells that a file changed under an import."""

    size: int
    mtime_ns: int


def _read_only(db: Path) -> bool:
    """An existing database file that this process may not write, or whose folder it may not
    write (where SQLite keeps its -wal and -shm files)."""
    return db.exists() and not (os.access(db, os.W_OK) and os.access(db.parent, os.W_OK))


def _file_state(path: Path) -> _FileState:
    st = check_regular(path)  # a device, FIFO or folder is refused before anything reads it
    return _FileState(st.st_size, st.st_mtime_ns)


def _file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with _reading(path), open_regular(path) as fh:
        while chunk := fh.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def _read_header(fh, path: Path, fmt: str) -> tuple[bytes, RunHeader, int, int]:
    """(header line, parsed header, its line number, offset just after it) of a canonical file."""
    header_line, first_line, header_end = _read_header_line(fh, str(path))
    header = canonical.parse_header(_decode_header(header_line, str(path), first_line), str(path))
    return header_line, dataclasses.replace(header, source=str(path), format=fmt), first_line, header_end


def _provenance(file_sha256: str, original_name: str | None, pay) -> dict:
    """The runs-row columns that say where a run came from."""
    return {"file_sha256": file_sha256, "original_name": original_name or None,
            "side_log_source": pay.source if pay is not None else None,
            "side_log_sha256": pay.content_sha256 if pay is not None else None}


def _rej(r: Rejection) -> dict:
    return {"source": r.source, "line": r.line, "record_id": r.record_id, "message": r.message}


def _reviewer(name: str) -> str:
    name = (name or "").strip()
    if not name:
        raise InputError("a reviewer name is required to label", source="label")
    return name


@dataclass
class _PendingCopy:
    """A file this import keeps in the workspace folder: under a temporary name until the run
    is committed (``publish``), removed if the import fails. ``read == final`` when an earlier
    import made it. As a context manager it discards itself on the way out (nothing once
    published)."""

    read: Path
    final: Path
    rejections: tuple[Rejection, ...] = ()
    """A converted run's rejected records (kept beside the copy, as ``side``)."""
    side: Path | None = None
    sha256: str | None = None
    """The SHA-256 of the copy's bytes (checked before replay reads it)."""

    @property
    def pending(self) -> bool:
        return self.read != self.final

    def publish(self) -> None:
        if not self.pending:
            return
        if self.side is not None:
            # Before the copy itself: a copy that exists always has its rejections beside it.
            tmp = _temporary_name(self.side)
            tmp.write_text(json.dumps([_rej(r) for r in self.rejections]))
            os.replace(tmp, self.side)
        os.replace(self.read, self.final)
        self.read = self.final

    def discard(self) -> None:
        if self.pending:
            self.read.unlink(missing_ok=True)

    def __enter__(self) -> "_PendingCopy":
        return self

    def __exit__(self, *exc) -> None:
        self.discard()


_HOST = socket.gethostname()


def _temporary_name(dest: Path) -> Path:
    # Unique per import (two sessions of one server may import the same content at once), and
    # naming its process, so a later import can tell an abandoned copy from one in progress.
    return dest.with_name(f"{dest.name}.tmp-{_HOST}-{os.getpid()}-{uuid.uuid4().hex[:12]}")


_TEMPORARY = re.compile(r".+\.tmp-(?P<host>.+)-(?P<pid>[0-9]+)-[0-9a-f]{12}")


def sweep_abandoned_copies(folder: Path) -> list[Path]:
    """Remove the temporary copies of imports whose process is gone (killed mid-import: no
    ``finally`` ran) and return them. Only this host's, and only where the process that named
    the copy no longer exists; a copy of a live process (an import in another thread, or
    another server) is left alone. Age is no test: a hard link has its source's mtime."""
    removed = []
    try:
        names = os.listdir(folder)
    except FileNotFoundError:
        return removed
    for name in names:
        m = _TEMPORARY.fullmatch(name)
        if m is None or m["host"] != _HOST or _process_exists(int(m["pid"])):
            continue
        path = folder / name
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
            removed.append(path)
    return removed


def _process_exists(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process
    return True


FICLONE = 0x40049409
"""Linux's ``ioctl`` that makes ``dest`` a copy-on-write clone of ``src`` (btrfs, XFS, …)."""
COPY_CHUNK = 1 << 20


def _reflink(src, dest) -> bool:
    """Clone ``src`` into ``dest`` (open files) where the file system can; False elsewhere."""
    if fcntl is None:
        return False
    try:
        fcntl.ioctl(dest.fileno(), FICLONE, src.fileno())
    except OSError:
        return False  # not supported here (ext4, tmpfs), or across file systems
    return True


def _write_chunk(out, data: bytes) -> None:
    out.write(data)


def _copy_file(path: Path, dest: Path) -> str:
    """Copy a regular file to a new ``dest``; the SHA-256 of the bytes copied.

    A reflink shares the blocks until either file is written (instant, no space), then is
    hashed from the clone; anywhere else the bytes are streamed and hashed as they go. Either
    way ``dest`` is a file of its own: writing to ``path`` later never changes it. A read
    error is an InputError naming ``path``; a write error (a full disk) stays an OSError."""
    with _reading(path):
        src = open_regular(path)
    with src, open(dest, "xb") as out:
        if _reflink(src, out):
            return _file_sha256(dest)
        h = hashlib.sha256()
        while True:
            with _reading(path):
                chunk = src.read(COPY_CHUNK)
            if not chunk:
                return h.hexdigest()
            h.update(chunk)
            _write_chunk(out, chunk)


def _json_line(obj) -> bytes:
    """One JSONL line, UTF-8; a record holding a lone surrogate (not encodable) is written
    with ASCII escapes instead, which read back to the same text."""
    try:
        return (json.dumps(obj, ensure_ascii=False) + "\n").encode("utf-8")
    except UnicodeEncodeError:
        return (json.dumps(obj) + "\n").encode("ascii")


def _same_content(path: Path, expected: str, found: str) -> None:
    if found != expected:
        raise InputError("the file changed while it was being imported (its bytes are not the ones hashed for "
                         "the run key; is the harness still writing it?); import it again once it is complete",
                         source=str(path))


def _scored_ahead(results: Iterable["Block"], progress, folder: Path) -> "_Spooled":
    """Consume ``results`` now (parsing and scoring every block) into an anonymous temporary
    file in ``folder``, and return an iterator over the blocks read back from it: the caller
    then writes them under the database's write lock without running any rule there.
    Memory holds one block at a time. ``progress`` gets the rows scored so far."""
    try:
        spool = tempfile.TemporaryFile(dir=folder, prefix=".scored-")
    except OSError as exc:
        raise StoreError(f"cannot write in the workspace folder {folder}: {exc.strerror or exc}") from exc
    blocks = rows = 0
    try:
        for block in results:
            rejected = [(r.source, r.line, r.record_id, r.message, r.related_line) for r in block.rejected]
            try:
                marshal.dump((block.rows, rejected, block.seen, block.lines), spool)
            except OSError as exc:
                raise StoreError(f"cannot write in the workspace folder {folder}: {exc.strerror or exc}") from exc
            blocks += 1
            rows += len(block.rows)
            if progress:
                progress(rows)
        spool.seek(0)
    except BaseException:
        spool.close()
        raise

    return _Spooled(spool, blocks)


class _Spooled:
    """Blocks read back, one at a time, from the spool file ``_scored_ahead`` wrote."""

    def __init__(self, spool, blocks: int) -> None:
        self._spool, self._left = spool, blocks

    def __iter__(self) -> "_Spooled":
        return self

    def __next__(self) -> Block:
        if self._left == 0:
            self._spool.close()
            raise StopIteration
        self._left -= 1
        rows, rejected, seen, lines = marshal.load(self._spool)
        return Block(rows, [Rejection(source=a, line=b, record_id=c, message=d, related_line=e)
                            for a, b, c, d, e in rejected], seen, lines)

    def __del__(self) -> None:
        self._spool.close()


_VERIFIED: dict[tuple, str] = {}
"""(path, inode, size, mtime, ctime) → the SHA-256 that file was found to have: a copy is
hashed again only when its metadata changed (any write changes its ctime)."""


def _verified(path: str, expected: str | None) -> str:
    """``path``, once its SHA-256 is ``expected`` (None: nothing to check); InputError when
    the copy is missing or its bytes are not the ones imported."""
    if expected is None:
        return path
    try:
        st = os.stat(path)
    except OSError as exc:
        raise InputError(f"the workspace's copy of the run cannot be read ({exc.strerror or exc}); "
                         "import the run again", source=path) from exc
    key = (path, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    if _VERIFIED.get(key) != expected:
        found = _file_sha256(Path(path))
        if found != expected:
            raise InputError(
                f"the workspace's copy of the run changed since import (SHA-256 {found[:12]}…, imported as "
                f"{expected[:12]}…): it was edited or replaced (before schema 7, copies were hard links to the "
                "imported file, so editing that file changed them); import the original run again",
                source=path)
        _VERIFIED[key] = expected
    return path


def _verified_copy(run: dict) -> str:
    """The run's stored copy, checked against its recorded SHA-256 (for a canonical copy made
    before schema 7: the content hash it is named after; a converted copy made then was
    written by the workspace, never linked, and is not checked)."""
    path = run["stored_path"]
    expected = run.get("stored_sha256")
    if expected is None and run["format"] == canonical.NAME:
        stem = Path(path).name.removesuffix(".jsonl")
        expected = stem if canonical.HEX64.fullmatch(stem) else None
    return _verified(path, expected)


def _verified_side_log(run: dict) -> str:
    """The run's copy of its side log, checked against the hash it is named after."""
    path = run["payloads_path"]
    stem = Path(path).name.removesuffix(".payloads.jsonl")
    return _verified(path, stem if canonical.HEX64.fullmatch(stem) else None)


def _insert_sql(run_key: str, line_shift: int) -> str:
    """The INSERT for one block's rows: the run key (64 hex digits) and the line shift (an
    int) are literals, checked here, so SQLite fills them in rather than Python per row."""
    if not canonical.HEX64.fullmatch(run_key) or line_shift.__class__ is not int:
        raise ValueError(f"not a run key and line shift: {run_key!r}, {line_shift!r}")
    cols = ", ".join(f"[{c}]" for c in ROW_COLUMNS)
    values = ", ".join(f"? + {line_shift}" if c == "line" else "?" for c in ROW_COLUMNS)
    return f"INSERT OR IGNORE INTO trajectories ([run_key], {cols}) VALUES ('{run_key}', {values})"


def _write_blocks(db, run_key: str, source: str, results: Iterable[Block], rejected: list[Rejection],
                  next_line: int, progress, seen: int) -> tuple[int, int, int, "_ColumnsBuilder"]:
    """Insert the scored blocks' rows of one run (in the caller's transaction); returns
    (trajectories, tool calls, records seen, the score columns). Rejections found on the way,
    duplicates included, are added to ``rejected``.

    Two records with one id are both refused: neither copy is preferred (the file does not say
    which is right), both are reported with their lines. Within a block the worker caught it;
    across blocks OR IGNORE skips the later row and the earlier one is deleted here.
    """
    n_traj = n_calls = 0
    columns = _ColumnsBuilder()
    for block in results:
        seen += block.seen
        shift = next_line - 1  # block line numbers count from 1
        next_line += block.lines
        rejected.extend(r.shifted(shift) for r in block.rejected)
        if not block.rows:
            continue
        # executemany on a prepared INSERT (sqlite-utils' insert_all re-derives types per
        # value): the run key and the block's line shift are written by SQLite, so rows go
        # from the worker to the database untouched.
        changes = db.conn.total_changes
        db.conn.executemany(_insert_sql(run_key, shift), block.rows)
        inserted = db.conn.total_changes - changes
        n_calls += sum(row[_COL["tool_call_count"]] for row in block.rows)
        stored_rows = block.rows
        if inserted != len(block.rows):
            duplicates = _cross_block_duplicates(db, run_key, shift, block.rows)
            for row in duplicates:
                tid = row[_COL["trajectory_id"]]
                n_calls -= row[_COL["tool_call_count"]]
                first = db.execute("SELECT line, tool_call_count FROM trajectories WHERE run_key = ? AND "
                                   "trajectory_id = ?", [run_key, tid]).fetchone()
                if first is not None:  # the earlier copy goes too (a third copy finds it gone)
                    db.execute("DELETE FROM trajectories WHERE run_key = ? AND trajectory_id = ?", [run_key, tid])
                    n_traj -= 1
                    n_calls -= first[1]
                    columns.drop(tid)
                    rejected.append(Rejection(source=source, line=first[0], record_id=tid,
                                              message=duplicate_message(tid, row[_COL["line"]] + shift)))
                rejected.append(Rejection(source=source, line=row[_COL["line"]] + shift, record_id=tid,
                                          message=duplicate_message(tid, first[0] if first else None)))
            skipped = {id(row) for row in duplicates}
            stored_rows = [row for row in block.rows if id(row) not in skipped]
        columns.add(stored_rows)
        n_traj += inserted
        if progress:
            progress(n_traj)
    return n_traj, n_calls, seen, columns


def rescore_run(db, run: dict) -> bool:
    """Score a stored run again from its workspace copy (and side log), replacing its rows and
    score columns in the caller's transaction; labels are untouched (they are keyed by
    trajectory id). False when the copy is gone (the old scores then stay, marked by their
    ``scorer_version``)."""
    stored = Path(run["stored_path"] or "")
    if not run["stored_path"] or not stored.is_file():
        return False
    try:
        _verified_copy(run)  # a hard-linked copy (before schema 7) whose source was edited is not read
    except InputError:
        return False
    pay = PayloadJoin(run["payloads_path"]) if run["payloads_path"] and Path(run["payloads_path"]).is_file() else None
    run_key = run["run_key"]
    with stored.open("rb") as fh:
        header_line, header, first_line, header_end = _read_header(fh, stored, run["format"])
        results = (score_range(header_line, run["source"] or str(stored), str(stored), off, n, pay=pay)
                   for off, n in block_ranges(fh, header_end, stored.stat().st_size))
        db.execute("DELETE FROM trajectories WHERE run_key = ?", [run_key])
        db.execute("DELETE FROM run_columns WHERE run_key = ?", [run_key])
        rejected: list[Rejection] = []
        conversion = stored.with_name(stored.name.replace(".jsonl", ".rejected.json"))
        if conversion.is_file():
            rejected += [Rejection(**r) for r in json.loads(conversion.read_text())]
        n_traj, n_calls, seen, columns = _write_blocks(db, run_key, run["source"] or str(stored), results, rejected,
                                                       first_line + 1, None, len(rejected))
    db.conn.execute("INSERT INTO run_columns (run_key, format, data) VALUES (?, ?, ?)",
                    [run_key, _COLUMNS_FORMAT, columns.encode()])
    db["runs"].update(run_key, {
        "trajectories": n_traj, "tool_calls": n_calls, "records_seen": seen,
        "rejected_json": json.dumps([_rej(r) for r in rejected]),
        "recapture_json": json.dumps({"applied": recap.applied, "rejected": [_rej(r) for r in recap.rejected]})
        if (recap := pay.report(run["run_id"]) if pay is not None else None) else run["recapture_json"],
        "classifier_of_record": header.classifier_of_record, "scorer_version": SCORER_VERSION,
    })
    return True


def _cross_block_duplicates(db, run_key: str, shift: int, rows: list[tuple]) -> list[tuple]:
    """The rows of a block that OR IGNORE skipped: their id was already stored from another
    line (rare, so one query per row is fine)."""
    out = []
    for row in rows:
        stored = db.execute("SELECT line FROM trajectories WHERE run_key = ? AND trajectory_id = ?",
                            [run_key, row[_COL["trajectory_id"]]]).fetchone()
        if stored[0] != row[_COL["line"]] + shift:
            out.append(row)
    return out


_WHOLE_RUN = ("from trajectories where rowid between (select min(rowid) from trajectories where run_key = ?1) "
              "and (select max(rowid) from trajectories where run_key = ?1) and +run_key = ?1")
"""Every row of run ``?1``, read as a rowid range: a run's rows are written in one transaction,
so they lie together. The plain ``where run_key = ?`` walks the primary-key index (in id order),
looks up each row and sorts them back into rowid order, about twice the SQLite time. The ``+`` keeps the planner off that index; rows of other runs that happen to
fall in the range are still filtered out."""

_TRAJECTORY_COLUMNS = frozenset(("run_key",) + ROW_COLUMNS)

_COLUMNS_FORMAT = 2
"""Bumped whenever ``_StoredColumns`` changes: a copy in another format is not read (the rows are)."""


class _StoredColumns(msgspec.Struct, array_like=True, forbid_unknown_fields=True):
    """A run's score columns as stored beside its rows (JSON, decoded with these types checked)."""

    ids: list[str]
    task_ids: list[str]
    models: list[str | None]
    categories: list[str | None]
    reasons: list[str | None]
    statuses: list[str]
    lenient: list[int | None]
    truncation: list[str | None]
    classifiers: list[str | None]


_COLUMNS_DECODER = msgspec.json.Decoder(_StoredColumns)
_SCORE_FIELDS = ("trajectory_id", "task_id", "model", "intended_category", "reason", "status", "lenient_safe",
                 "truncation", "classifier")
"""The trajectory columns ``ScoreColumns`` is built from, in ``_StoredColumns`` order."""
_COLUMNS_FROM_ROW = tuple(_COL[c] for c in _SCORE_FIELDS)


def _score_fields(db, run_key: str) -> list[np.ndarray]:
    """A run's ``_SCORE_FIELDS`` read from its rows, one object array per field, in file order
    (an empty reason, as older rows may hold, read as none)."""
    rows = db.execute(f"SELECT {', '.join(_SCORE_FIELDS)} {_WHOLE_RUN} ORDER BY rowid", [run_key]).fetchall()
    table = np.empty((len(rows), len(_SCORE_FIELDS)), dtype=object)
    if rows:
        table[:] = rows  # one C pass; the fields are its columns
    fields = [table[:, j] for j in range(len(_SCORE_FIELDS))]
    fields[4][fields[4] == ""] = None
    return fields


class _ColumnsBuilder:
    """Collects the stored rows' score columns as an import writes them."""

    def __init__(self) -> None:
        self.fields: list[list] = [[] for _ in _COLUMNS_FROM_ROW]
        self.dropped: set[str] = set()

    def add(self, rows: list[tuple]) -> None:
        for field, i in zip(self.fields, _COLUMNS_FROM_ROW):
            field.extend(map(operator.itemgetter(i), rows))

    def drop(self, trajectory_id: str) -> None:
        """Leave out a row already added (a duplicate id found in a later block)."""
        self.dropped.add(trajectory_id)

    def encode(self) -> bytes:
        fields = self.fields
        if self.dropped:
            keep = [i for i, tid in enumerate(fields[0]) if tid not in self.dropped]
            fields = [[f[i] for i in keep] for f in fields]
        return msgspec.json.encode(fields)


def _decode_columns(data: bytes) -> ScoreColumns | None:
    """The stored columns; None when they do not decode to equal-length, well-typed fields (the
    rows are then read instead: they are the record, this is a copy)."""
    try:
        c = _COLUMNS_DECODER.decode(data)
        fields = (c.ids, c.task_ids, c.models, c.categories, c.reasons, c.statuses, c.lenient, c.truncation,
                  c.classifiers)
        if len({len(f) for f in fields}) != 1:
            return None
        return ScoreColumns.build(*fields)
    except (msgspec.DecodeError, msgspec.ValidationError, ValueError):
        return None

_SCORED_COLUMNS = (
    "trajectory_id", "task_id", "model", "status", "lenient_safe", "intended_category", "fired_category", "reason",
    "reasons", "incomplete_call", "classifier", "suggestion", "evidence_standard", "recaptured_calls",
    "termination", "max_raw_bytes", "tool_call_count", "truncation",
)
# Enum lookups by value through a dict: Enum(value) is slow, and runs a million times per large run.
_STATUS = {s.value: s for s in Status}
_REASON = {r.value: r for r in ReasonCode}
_LABEL = {lab.value: lab for lab in ReviewLabel}
_STANDARD = {e.value: e for e in EvidenceStandard}
_TERMINATION = {t.value: t for t in Termination}
_TRUNCATION = {t.value: t for t in Truncation}


def _int_list(joined: str) -> list[int]:
    """Comma-separated integers as a list: numpy's C parser, several times faster than int() per
    value for a million call sizes (the cold Safe rates page reads them). Where it could differ from int()
    (it clamps beyond 64 bits, and stops at a trailing comma) int() decides, and raises as before
    on anything that is not a number."""
    try:
        values = np.fromstring(joined, dtype=np.int64, sep=",")
    except ValueError:
        values = None
    info = np.iinfo(np.int64)
    if values is None or len(values) != joined.count(",") + 1 or values.max() == info.max or values.min() == info.min:
        return [int(x) for x in joined.split(",")]
    return values.tolist()


def _scored_from_row(r: tuple, evidence: bool = False) -> ScoredTrajectory:
    """A row of ``_SCORED_COLUMNS`` (+ the two evidence columns) as the aggregator's record.
    Positional: building a dict per row cost 40 % of loading a 200 k run."""
    (tid, task, model, status, lenient, intended, fired, reason, reasons, incomplete, classifier, suggestion,
     standard, recaptured, termination, max_raw, n_calls, truncation) = r[:18]
    ev, sev = r[18:20] if evidence else (None, None)
    return ScoredTrajectory(
        trajectory_id=tid, task_id=task, model=model, status=_STATUS[status], lenient_safe=bool(lenient),
        harness_judged=lenient is not None, truncation=_TRUNCATION[truncation or ""],
        intended_category=intended, fired_category=fired, reason=_REASON[reason] if reason else None,
        reasons=tuple(_REASON[x] for x in reasons.split(",") if x) if reasons else (),
        incomplete_call=incomplete, classifier=classifier or "",
        classifier_evidence=tuple(json.loads(ev)) if ev else (),
        suggestion=Suggestion(label=_LABEL[suggestion], evidence=tuple(json.loads(sev)) if sev else ())
        if suggestion else None,
        evidence_standard=_STANDARD[standard],
        recaptured_calls=tuple(int(x) for x in recaptured.split(",") if x) if recaptured else (),
        termination=_TERMINATION[termination], max_raw_bytes=max_raw, tool_call_count=n_calls,
    )


def _current_event(db, run_key: str, trajectory_id: str, reviewer: str) -> dict | None:
    events = list(db["label_events"].rows_where("run_key = ? and trajectory_id = ? and reviewer = ?",
                                                [run_key, trajectory_id, reviewer], order_by="id"))
    live = _live_events(events)
    return live[-1] if live else None


def _current_events(db, run_key: str, reviewer: str) -> dict[str, dict]:
    """trajectory id → the reviewer's latest live event on it, for one run."""
    events = list(db["label_events"].rows_where("run_key = ? and reviewer = ?", [run_key, reviewer], order_by="id"))
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


def _read_label_file(path: Path) -> list[dict]:
    try:
        text = read_regular(path).decode("utf-8")  # a FIFO or device is refused before reading
    except UnicodeDecodeError as exc:
        raise InputError(f"cannot read labels: {exc}", source=str(path)) from exc
    rows: list[dict] = []
    if path.suffix == ".csv" or text.startswith("run_key,"):
        reader = csv.DictReader(io.StringIO(text))
        missing = set(EXPORT_FIELDS) - set(reader.fieldnames or ())
        if missing - {"event_id", "supersedes", "note", "batch_id"}:
            raise InputError(f"CSV header lacks {sorted(missing)}", source=str(path), line=1)
        rows = [{k: csv_unsafe(v) if isinstance(v, str) else v for k, v in r.items()} for r in reader]
    else:
        for n, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise InputError(f"invalid JSON: {exc.msg}", source=str(path), line=n) from exc
            if not isinstance(obj, dict) or "run_key" not in obj or "trajectory_id" not in obj:
                raise InputError("not a label event (needs run_key and trajectory_id)", source=str(path), line=n)
            rows.append(obj)
    return rows


__all__ = ["Workspace", "ImportResult", "default_db_path", "DB_ENV"]


def evaluation(ws: Workspace, run_key: str, scored: "tuple[ScoredTrajectory, ...] | ScoreColumns | None" = None):
    """An Evaluation of an imported run, with the reviewers' final labels applied.

    The scores are the run's ``ScoreColumns`` (all the aggregates read, and much cheaper to load
    than score objects); ``scored`` passes them in when the caller
    already holds them: they never change after import, only labels do, so the app loads
    them once per run."""
    from .aggregate import summarize
    from .model import Run
    from .recapture import RecaptureReport
    from .report import Evaluation

    row = ws._run_or_raise(run_key)
    header = ws.header(run_key)
    rejected = tuple(Rejection(**r) for r in json.loads(row["rejected_json"] or "[]"))
    recap = None
    if row["recapture_json"]:
        rj = json.loads(row["recapture_json"])
        recap = RecaptureReport(source=row["payloads_path"], applied=rj["applied"],
                                rejected=tuple(Rejection(**r) for r in rj["rejected"]))
    scored = ws.score_columns(run_key) if scored is None else scored
    run = Run(header=header, trajectories=(), rejected=rejected, records_seen=row["records_seen"],
              content_sha256=run_key)
    side = None
    if row["payloads_path"]:
        side = {"source": row.get("side_log_source") or row["payloads_path"], "sha256": row.get("side_log_sha256")
                or Path(row["payloads_path"]).name.split(".", 1)[0]}
    return Evaluation(run=run, scored=scored,
                      summary=summarize(scored, ws.final_labels(run_key), group=header.run_id, rejected=len(rejected)),
                      tool_calls=row["tool_calls"], recapture=recap, reclassifier=row.get("reclassifier"),
                      # runs imported before the column: the key is the file's hash unless a side
                      # log or (for Inspect) a verdict map took part
                      file_sha256=row.get("file_sha256")
                      or (run_key if not row["payloads_path"] and row["format"] != "inspect" else ""),
                      original_name=row.get("original_name") or "", side_log=side)


SEARCH_BLOCK_BYTES = 1024 * 1024
"""Small enough that a block is still in cache when it is lower-cased and searched."""


def search_run(ws: Workspace, run_key: str, needle: str, limit: int = 10_000) -> set[str]:
    """Trajectory ids whose stored record (arguments, results, outputs, messages) or side-log
    payload contains ``needle`` (case-insensitive for ASCII). One pass over the run file in
    blocks (memory: one block); a match counts where it lies inside a trajectory's record
    (found by its byte range), never in the header or a rejected line. A payload counts only
    if it was joined to its call (it proved itself at import)."""
    if not needle:
        return set()
    run = ws._run_or_raise(run_key)
    forms = {needle.lower().encode("utf-8"), json.dumps(needle)[1:-1].lower().encode("utf-8")}
    with ws.connect() as db:
        spans = db.execute("select offset, length, trajectory_id from trajectories where run_key = ? "
                           "order by offset", [run_key]).fetchall()
    hits = _records_containing(_verified_copy(run), forms, spans, limit)
    if len(hits) >= limit:
        return hits
    if run["payloads_path"]:
        joined = {(r["trajectory_id"], int(i)) for r in ws.trajectory_rows(run_key, "recaptured_calls != ''")
                  for i in r["recaptured_calls"].split(",")}
        with open(_verified_side_log(run), "rb") as fh:
            for line in fh:
                if any(f in line.lower() for f in forms):
                    obj = decode_json_line(line)
                    if isinstance(obj, dict) and (obj.get("trajectory_id"), obj.get("call_index")) in joined:
                        hits.add(obj["trajectory_id"])
    return hits


def _records_containing(path: str, forms: set[bytes], spans: list[tuple[int, int, str]], limit: int) -> set[str]:
    """Ids of the records (``(offset, length, id)``, sorted by offset) that contain one of
    ``forms`` (lower case) in the file at ``path``, compared in lower case.

    Block by block, so the work is C's (``lower``, ``find``), not a Python loop over lines that
    also loaded every trajectory row for the line numbers. After a
    hit the search jumps to the record's end: a common word costs one step per record.
    """
    starts = [start for start, _, _ in spans]
    hits: set[str] = set()
    overlap = max(map(len, forms)) - 1  # a match may straddle two blocks: they overlap by this
    size = max(SEARCH_BLOCK_BYTES, 2 * overlap + 1)
    with open(path, "rb") as fh:
        base = 0
        while chunk := fh.read(size):
            block = chunk.lower()
            for form in forms:
                pos = block.find(form)
                while pos >= 0:
                    at = base + pos
                    i = bisect.bisect_right(starts, at) - 1
                    start, length, tid = spans[i] if i >= 0 else (0, 0, None)
                    if tid is not None and at + len(form) <= start + length:
                        hits.add(tid)
                        if len(hits) >= limit:
                            return hits
                        pos = block.find(form, max(pos + 1, start + length - base))
                    else:
                        pos = block.find(form, pos + 1)
            if len(chunk) < size:
                break
            base += len(chunk) - overlap
            fh.seek(base)
    return hits
