"""Importing a run into the workspace: owned copies, scoring ahead, one transaction."""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import functools
import hashlib
import itertools
import json
import os
import sqlite3
import tempfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Unpack

from ..errors import (
    DatabaseUnavailableError,
    InputError,
    LitmusReviewError,
    StoreError,
)
from ..files import read_regular
from ..importers import (
    CATEGORY_FORMATS,
    CATEGORY_VERSION,
    agentdojo_dir,
    canonical,
    holds_runs,
    inspect_log,
    parse_run,
    sniff_file,
)
from ..importers.base import Segment
from ..importers.inspect_log import VerdictMap
from ..ingest import (
    IMPORT_WORKERS,
    PARALLEL_MIN_BYTES,
    PARALLEL_WINDOW,
    Block,
    block_ranges,
    pool_map,
    score_range,
)
from ..model import Rejection, RunHeader, grouping_category
from ..pipeline import canonical_lines, convert, loaded_classifier, read_header, with_read_proof
from ..proof import proof_path_of
from ..recapture import PayloadJoin
from ..request import AUTO_FORMAT, CANONICAL_REQUEST, ScoringOptions, ScoringRequest
from ..rows import ROW_COLUMNS
from ..score import SCORER_VERSION
from ..settle import BlockDigest, SettledRun, digest, settle
from ..stored import StoredRun
from . import carry, copies
from .columns import COLUMNS_FORMAT, encode_columns
from .copies import (
    FileState,
    PendingCopy,
    copy_file,
    file_state,
    kernel_copy,
    rejection_dict,
    same_content,
    sha256_of_file,
    sweep_abandoned_copies,
    temporary_name,
)
from .reads import Reads, score_fields
from .schema import immediate, utc_now


class Importing(Reads):

    # --- runs ----------------------------------------------------------------------------

    def import_run(
        self,
        path: str | Path,
        request: ScoringRequest | None = None,
        *,
        progress: Callable[[int], None] | None = None,
        original_name: str | None = None,
        scorer: Callable[[PayloadJoin | None], Iterable[Block]] | None = None,
        **options: Unpack[ScoringOptions],
    ) -> ImportResult:
        """Import (and score) a run in one transaction, as ``request`` (or ``options``) asks;
        idempotent by its key (``ScoringRequest.run_key``: the content's hash, and the side log's
        hash, the Inspect verdict mapping, the re-classifier and ``require_proof`` when given:
        they change the scores). The request is kept with the run, so a rescore keeps it.

        ``original_name`` is the file's name as its owner knows it, when ``path`` is a copy (an
        upload's temporary file): it is recorded as the run's provenance.

        ``scorer`` scores the blocks elsewhere (``dask_engine.workspace_scorer``: on a Dask cluster):
        called as ``scorer(pay)`` once the copy is made, it yields the run's scored blocks in
        file order and applies each block's share of the side log to ``pay``; the rows are
        written here as the local scorer's are (it must score with the same ``require_proof``)."""
        request = ScoringRequest.of(request, **options)
        path = Path(path)
        self.check_writable()
        before = file_state(path)
        pay = PayloadJoin(request.payloads) if request.payloads is not None else None
        self.check_integrity()
        fmt = sniff_file(path) if request.fmt == AUTO_FORMAT else request.fmt
        request = dataclasses.replace(request, fmt=fmt)
        verdict_map = request.verdict_map
        if fmt == canonical.NAME and not request.changes_scores and scorer is None and IMPORT_WORKERS > 1 \
                and before.size >= PARALLEL_MIN_BYTES:
            return self._import_parallel(path, progress, before, original_name)
        content = sha256_of_file(path)
        # An Inspect log's proof side log (read beside it by the importer) changes its scores too.
        proof = proof_path_of(path)
        proof_sha = sha256_of_file(proof) if fmt == inspect_log.NAME and proof.is_file() else None
        key = request.run_key(content, side_log_sha256=pay.content_sha256 if pay else None, proof_sha256=proof_sha)

        def as_imported(stored_run: StoredRun) -> StoredRun:
            # The key matched these options: they are the run's (an old row may not say so).
            return dataclasses.replace(stored_run, verdict_map=request.verdict_text,
                                       reclassifier=request.reclassifier,
                                       header=dataclasses.replace(stored_run.header,
                                                                  require_proof=request.require_proof))

        present = self._already_imported(key, path, as_imported, rescore=scorer is None)
        former = request.former_run_key(content, side_log_sha256=pay.content_sha256 if pay else None,
                                        proof_sha256=proof_sha)
        if present is None and former is not None:  # imported before that key left out an unread verdict map
            present = self._already_imported(former, path, as_imported, rescore=scorer is None)
        if present is not None:
            return present
        # with a scorer, its workers load the re-classifier
        with loaded_classifier(request.reclassifier if scorer is None else None) as plugin, \
                self._store_file(path, _copy_name(content, key, verdict_map, proof_sha), fmt, verdict_map,
                                 content) as stored, \
                stored.read.open("rb") as fh:
            header_line, header, first_line, header_end = read_header(fh, str(path), request)
            header = _proof_read(header, stored, proof_sha)
            results = scorer(pay) if scorer is not None else (
                score_range(header_line, str(path), str(stored.read), off, n, pay=pay, reclassifier=plugin,
                            request=request)
                for off, n in block_ranges(fh, header_end, stored.read.stat().st_size))
            with _scored_ahead(results, progress, self.files) as staged:
                settled = settle(header, staged.digests, file_sha256=content, first_line=first_line,
                                 prior_rejections=stored.rejections, side_log=pay, request=request,
                                 format_metrics=stored.format_metrics, terminations=stored.terminations,
                                 proof_sha256=proof_sha)
                with self._original(path, fmt, content, proof if proof_sha else None, proof_sha) as original:
                    return self._write_run(settled, staged, stored, pay, path, before, original=original,
                                           provenance={**_provenance(content, original_name, pay),
                                                       "proof_sha256": proof_sha})

    def import_runs(self, path: str | Path, request: ScoringRequest | None = None, *,
                    progress: Callable[[int], None] | None = None, original_name: str | None = None,
                    **options: Unpack[ScoringOptions]) -> list[ImportResult]:
        """Import every run a path holds: an AgentDojo run directory (a folder, or a zip of one)
        holds one per pipeline and attack, each imported as a file of its own (``run_zip``: the
        directory's files, naming the run), so it is keyed, kept and rescored like any run file;
        any other path is ``import_run`` (as are the arguments)."""
        request = ScoringRequest.of(request, **options)
        path = Path(path)
        self.check_writable()
        if not holds_runs(path, request.fmt):
            return [self.import_run(path, request, progress=progress, original_name=original_name)]
        if request.payloads is not None:
            raise InputError("a side log pairs with one run file, not with a run directory", source=str(path))
        name = original_name or str(path)
        each = dataclasses.replace(request, fmt=agentdojo_dir.NAME)
        out = []
        with self._writing():
            scratch = tempfile.TemporaryDirectory(dir=self._scratch())
        with scratch as tmp:
            for label, data in agentdojo_dir.run_zips(path):
                one = Path(tmp) / (hashlib.sha256(label.encode()).hexdigest()[:16] + ".zip")
                with self._writing():
                    one.write_bytes(data)
                out.append(self.import_run(one, each, progress=progress, original_name=f"{name}#{label}"))
        return out

    def _scratch(self) -> Path:
        """A folder for temporary files beside the workspace's own (same file system)."""
        with self._writing():
            self.files.mkdir(parents=True, exist_ok=True)
        return self.files

    def check_writable(self) -> None:
        """DatabaseUnavailableError naming the workspace when its file or its folder cannot be
        written (it was opened read-only): nothing can be imported into it, whatever the input."""
        if self.read_only:
            raise DatabaseUnavailableError(
                f"the workspace {self.path} is read-only (its file or its folder cannot be written): nothing can be "
                "imported into it", path=str(self.path))

    def _import_parallel(self, path: Path, progress, before: FileState,
                         original_name: str | None = None) -> ImportResult:
        """A large canonical run on two cores. The workspace's copy is made first by the kernel
        (no byte of it through Python); worker processes then parse and score blocks of lines of
        that copy while two threads of this process hash the copy (the run key: of the bytes the
        workspace holds and the workers read) and the source again (hashlib releases the GIL). A
        source that changed in between (a torn copy) is refused: the two hashes differ. A run
        already imported is found once its key is known, and the workers' queued blocks dropped.
        Nothing is written to the database before the key is known."""
        with self._writing():
            self.files.mkdir(parents=True, exist_ok=True)
            sweep_abandoned_copies(self.files)
        copy = PendingCopy(temporary_name(self.files / "run.jsonl"), self.files / "run.jsonl")
        with copy:
            with self._writing():
                kernel_copy(path, copy.read)
            with copy.read.open("rb") as fh, concurrent.futures.ThreadPoolExecutor(2) as hashing:
                keyed = hashing.submit(sha256_of_file, copy.read)
                rehashed = hashing.submit(sha256_of_file, path)
                header_line, header, first_line, header_end = read_header(fh, str(path), CANONICAL_REQUEST)
                work = ((header_line, str(path), str(copy.read), off, n)
                        for off, n in block_ranges(fh, header_end, before.size))
                # no block digests: the whole copy's hash is the check (score FILE's and Dask's read them)
                results = pool_map(functools.partial(score_range, span=False), work, IMPORT_WORKERS,
                                   window=PARALLEL_WINDOW)
                with contextlib.ExitStack() as staging:
                    try:
                        first = next(results, None)  # the workers are scoring while the key is hashed
                        run_key = copy.sha256 = keyed.result()
                        present = self._already_imported(run_key, path)
                        if present is not None:
                            return present
                        copy.final = self.files / f"{run_key}.jsonl"
                        staged = staging.enter_context(_scored_ahead(
                            itertools.chain([first] if first is not None else [], results), progress, self.files))
                    finally:
                        results.close()
                    same_content(path, run_key, rehashed.result())
                    settled = settle(header, staged.digests, file_sha256=run_key, first_line=first_line)
                    return self._write_run(settled, staged, copy, None, path, before,
                                           provenance=_provenance(run_key, original_name, None))

    def _already_imported(self, run_key: str, path: Path,
                          as_imported: Callable[[StoredRun], StoredRun] | None = None,
                          rescore: bool = True) -> ImportResult | None:
        """The result of importing ``path`` again when the workspace holds its run ``run_key``
        (rescored from these bytes when stale and ``rescore``, with the options of this import
        that ``as_imported`` gives it; its categories read again when outdated); None when it
        holds no such run."""
        existing = self.run(run_key)
        if existing is None:
            return None
        stored_run = StoredRun.from_row(existing)
        if stored_run.stale and rescore:  # the same bytes under a new scorer: rescored from them (labels kept)
            if as_imported is not None:
                stored_run = as_imported(stored_run)
            outcome = self._rescore(stored_run, original=path)
            return ImportResult(run_key=run_key, already_present=True, run=self._run_or_raise(run_key),
                                rejected=(), rescored=outcome)
        if stored_run.categories_outdated:  # its bytes given again: its categories are read from them
            self._rederive(stored_run, original=path)
            existing = self._run_or_raise(run_key)
        return ImportResult(run_key=run_key, already_present=True, run=existing, rejected=())

    def _store_file(self, path: Path, content: str, fmt: str, verdict_map: VerdictMap | None = None,
                    source_sha256: str | None = None,
                    continuations: tuple[Segment, ...] | None = None) -> PendingCopy:
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
        with self._writing():
            self.files.mkdir(parents=True, exist_ok=True)
            sweep_abandoned_copies(self.files)
        dest = self.files / f"{content}.jsonl"
        copy = PendingCopy(temporary_name(dest), dest)
        try:
            if fmt == canonical.NAME:
                copy.sha256 = self._copy_in(path, copy.read)
                if source_sha256 is not None:
                    same_content(path, source_sha256, copy.sha256)
            else:
                data = read_regular(path)
                if source_sha256 is not None:
                    same_content(path, source_sha256, hashlib.sha256(data).hexdigest())
                converted = convert(data, str(path), fmt, verdict_map, continuations)
                del data
                hashing = hashlib.sha256()
                with self._writing(), copy.read.open("wb") as out:
                    for line in canonical_lines(converted.run):
                        hashing.update(line)
                        copies._write_chunk(out, line)  # one name for the tests to patch
                copy.sha256 = hashing.hexdigest()
                # The converted file holds only what parsed; its rejections are kept beside it
                # (at commit) so the import report still lists them.
                copy.rejections = tuple(converted.run.rejected)
                copy.format_metrics, copy.terminations = converted.format_metrics, converted.terminations
                copy.importer = converted.run.header
                copy.side = self.files / f"{content}.rejected.json" if converted.run.rejected else None
        except BaseException:
            copy.discard()
            raise
        return copy

    def _copy_in(self, path: Path, dest: Path) -> str:
        """Copy ``path`` to ``dest`` (a new file in the workspace folder); its SHA-256."""
        with self._writing():
            return copy_file(path, dest)

    @contextlib.contextmanager
    def _writing(self) -> Iterator[None]:
        """An OSError while writing into the workspace folder (a full disk) becomes a
        StoreError naming it; the caller removes what it had written."""
        try:
            yield
        except OSError as exc:
            raise StoreError(f"cannot keep a copy of the run in {self.files}: {exc.strerror or exc}") from exc

    def _keep(self, path: Path, name: str, sha256: str) -> PendingCopy:
        """The workspace's own copy of ``path`` (a side log), checked against the hash it was
        read with, so replay does not depend on a file that may be deleted or edited (an
        upload's temporary file, say)."""
        dest = self.files / name
        copy = PendingCopy(temporary_name(dest), dest)
        try:
            copy.sha256 = self._copy_in(path, copy.read)
            same_content(path, sha256, copy.sha256)
        except BaseException:
            copy.discard()
            raise
        return copy

    def _conversion_rejections(self, content: str) -> list[Rejection]:
        side = self.files / f"{content}.rejected.json"
        if not side.exists():
            return []
        return [Rejection(**r) for r in json.loads(side.read_text())]

    # --- categories read under another version (issue 35) ---------------------------------

    def rederive_categories(self) -> list[CategoriesRederived]:
        """Re-derive the categories of the runs whose categories were read under another
        ``importers.CATEGORY_VERSION`` (runs imported before the importers read the harness's
        categories record none), from their original bytes through today's importer. Only the
        rows' category (and the columns copy the aggregates read) is rewritten: a category
        moves no status, so statuses, the stored copy and labels stay as they are, and the
        run's figures per category become those a fresh import of the same bytes gives. A run
        whose original bytes are gone or changed keeps its categories as they were read and
        says so (``StoredRun.categories_outdated``); importing its file again re-derives them."""
        return [self._rederive(s) for s in map(StoredRun.from_row, self.runs()) if s.categories_outdated]

    def _rederive(self, s: StoredRun, original: Path | None = None) -> CategoriesRederived:
        path = original or (Path(s.original_path) if s.original_path else None)
        fmt = s.header.format
        found: dict[str, str | None] | None = None
        # A canonical run's records name a category only where they hold the key (a large run's
        # copy is scanned, not read into memory, to find it does not).
        if fmt in CATEGORY_FORMATS or (fmt == canonical.NAME and (path is None or _mentions(path, CATEGORY_KEY))):
            if path is None or not path.is_file():
                return CategoriesRederived(s.run_key, False, "its original bytes are not in the workspace")
            try:
                data = read_regular(path)
                if s.file_sha256 and hashlib.sha256(data).hexdigest() != s.file_sha256:
                    return CategoriesRederived(s.run_key, False, "the workspace's copy of its original bytes changed")
                found = run_categories(data, s.header.source or str(path), fmt, s.verdict_map)
            except (LitmusReviewError, OSError) as exc:  # the workspace still opens; the run says why
                return CategoriesRederived(s.run_key, False, f"today's importer cannot read its original bytes: {exc}")
        with self.connect() as db, immediate(db):
            changed = 0
            if found is not None:
                was = dict(db.execute("SELECT trajectory_id, intended_category FROM trajectories WHERE run_key = ?",
                                      [s.run_key]).fetchall())
                moved = [(found[t], s.run_key, t) for t, c in was.items() if t in found and found[t] != c]
                db.conn.executemany("UPDATE trajectories SET intended_category = ? WHERE run_key = ? AND "
                                    "trajectory_id = ?", moved)
                changed = len(moved)
                if moved:
                    db.execute("DELETE FROM run_columns WHERE run_key = ?", [s.run_key])
                    db.conn.execute("INSERT INTO run_columns (run_key, format, data) VALUES (?, ?, ?)",
                                    [s.run_key, COLUMNS_FORMAT,
                                     encode_columns([f.tolist() for f in score_fields(db, s.run_key)])])
            db.execute("UPDATE runs SET category_version = ? WHERE run_key = ?", [CATEGORY_VERSION, s.run_key])
        return CategoriesRederived(s.run_key, True, f"categories re-derived: {changed:,} changed")

    # --- the scorer-version gate ---------------------------------------------------------

    def rescore(self, run_keys: Iterable[str] | None = None) -> list[Rescored]:
        """Rescore runs scored under another ``SCORER_VERSION`` (all such runs, or the ones
        named) from their original bytes, through today's importer and rules, with the options
        they were imported with (format, side log, verdict map, re-classifier, ``--require-proof``,
        the proof side log: ``_proof_for_rescore``). Labels are keyed by run key and trajectory
        id, which do not change; they keep counting where the trajectory's record is the one its
        reviewers replayed (``carry``). A run whose original bytes the workspace does not hold (a
        converted run imported before schema 9, or a copy gone or changed since) is left as it
        is and stays marked stale: ``rescore_from`` (``rescore --from FILE``) or importing its
        file again with the same options rescores it."""
        rows = [self._run_or_raise(k) for k in run_keys] if run_keys is not None else self.runs()
        out = []
        for row in rows:
            stored_run = StoredRun.from_row(row)
            if stored_run.stale:
                out.append(self._rescore(stored_run))
            elif run_keys is not None:
                out.append(Rescored(stored_run.run_key, False, stored_run.scorer_version,
                                    f"already scored by scorer {SCORER_VERSION}"))
        return out

    def rescore_from(self, path: str | Path, run_keys: Iterable[str] | None = None) -> list[Rescored]:
        """Rescore stored runs from ``path``, a file given again because the workspace no longer
        holds the run's original bytes: the runs named (each refused, before any is rescored,
        unless ``path``'s bytes are its own), else every run imported from these bytes. A run's
        own bytes are the ones whose SHA-256 the workspace computed when it imported the run
        (``file_sha256``); for a run stored before it recorded that, the run key these bytes give
        with the run's own options must be the run's key. The bytes are kept in the workspace
        with the run, so the next scorer version rescores it without them. An InputError naming
        ``path`` when they are not the run's (nothing is rescored)."""
        path = Path(path)
        file_state(path)  # a folder, device or FIFO is refused before a byte is read
        content = sha256_of_file(path)
        if run_keys is None:
            rows = [r for r in self.runs() if StoredRun.from_row(r).file_sha256 == content]
            if not rows:
                raise InputError(f"its bytes (SHA-256 {content}) are not the bytes of any run imported in {self.path} "
                                 "(the SHA-256 the workspace computed for each run's file at import); nothing was "
                                 "rescored", source=str(path))
        else:
            rows = [self._run_or_raise(k) for k in run_keys]
            for row in rows:
                s = StoredRun.from_row(row)
                if s.file_sha256 and s.file_sha256 != content:
                    raise InputError(_not_its_bytes(s, content), source=str(path))
        out = []
        for row in rows:
            s = StoredRun.from_row(row)
            if not s.stale:
                out.append(Rescored(s.run_key, False, s.scorer_version, f"already scored by scorer {SCORER_VERSION}"))
            else:
                out.append(self._rescore(s, original=path))
        return out

    def _rescore(self, s: StoredRun, original: Path | None = None) -> Rescored:
        """Rescore one stored run from ``original`` (its bytes given again: an InputError naming
        it unless they are shown to be the run's) or the workspace's copy of its original bytes
        (not rescored, saying why, when that copy is gone or changed)."""
        path = original or (Path(s.original_path) if s.original_path else None)
        if path is None or not path.is_file():
            return Rescored(s.run_key, False, s.scorer_version,
                            ("its original bytes are not in the workspace (a converted run imported before they "
                             "were kept)" if path is None else
                             f"the workspace's copy of its original bytes is gone ({path.name})") + _give_it(s))
        before = file_state(path)
        content = sha256_of_file(path)
        if s.file_sha256 and content != s.file_sha256:
            if original is not None:
                raise InputError(_not_its_bytes(s, content), source=str(path))
            return Rescored(s.run_key, False, s.scorer_version,
                            f"the workspace's copy of its original bytes changed (sha256 {content[:12]}…, not "
                            f"{s.file_sha256[:12]}…)" + _give_it(s))
        fmt = s.header.format
        proof, why = self._proof_for_rescore(s, path, content)
        if why is not None:
            return Rescored(s.run_key, False, s.scorer_version, why)
        proof_sha = sha256_of_file(proof) if proof is not None else None
        request = s.request
        if not s.file_sha256 and request.run_key(content, side_log_sha256=(s.side_log or {}).get("sha256"),
                                                 proof_sha256=proof_sha) != s.run_key:
            # The workspace never recorded the file's hash: only the key, recomputed, shows the bytes are its.
            why = (f"the workspace did not record the SHA-256 of run {s.run_key[:12]}'s file, and the run key these "
                   f"bytes (SHA-256 {content[:12]}…) give with the run's options is not its key: nothing shows they "
                   "are its bytes; nothing was rescored")
            if original is not None:
                raise InputError(why, source=str(path))
            return Rescored(s.run_key, False, s.scorer_version, why + _give_it(s))
        # The proof is handed to the importer, never looked for beside the copy: another run of
        # the same log may have been scored with another proof, or none.
        continuations = None if fmt != inspect_log.NAME else () if proof is None else (
            Segment(source=str(proof_path_of(s.header.source or path)), data=read_regular(proof)),)
        verdict_map = request.verdict_map
        pay = None
        if s.payloads_path:
            if not Path(s.payloads_path).is_file():
                return Rescored(s.run_key, False, s.scorer_version, "its side log's copy is gone from the workspace")
            pay = PayloadJoin(s.payloads_path, source=(s.side_log or {}).get("source"))
        source = s.header.source or str(path)
        # The labelled trajectories' records as reviewers replayed them, before the copy is rewritten.
        with self.connect() as db:
            shown = carry.shown_before(db, self._run_or_raise(s.run_key))
        with loaded_classifier(request.reclassifier) as plugin, \
                self._store_file(path, _copy_name(content, s.run_key, verdict_map, proof_sha), fmt, verdict_map,
                                 content, continuations) as stored, \
                stored.read.open("rb") as fh:
            header_line, header, first_line, header_end = read_header(fh, source, request)
            header = _proof_read(header, stored, proof_sha)
            with _scored_ahead(
                (score_range(header_line, source, str(stored.read), off, n, pay=pay, reclassifier=plugin,
                             request=request)
                 for off, n in block_ranges(fh, header_end, stored.read.stat().st_size)), None, self.files) as staged:
                settled = settle(header, staged.digests, file_sha256=content, first_line=first_line,
                                 prior_rejections=stored.rejections, side_log=pay, request=request,
                                 format_metrics=stored.format_metrics, terminations=stored.terminations,
                                 proof_sha256=proof_sha)
                settled = dataclasses.replace(settled, run_key=s.run_key)  # a legacy key keeps its labels
                with self._original(path, fmt, content, proof, proof_sha) as kept_original:
                    published: list[PendingCopy] = []
                    try:
                        with self.connect() as db, immediate(db):
                            now = db.execute("select scorer_version from runs where run_key = ?",
                                             [s.run_key]).fetchone()
                            if now is None or now[0] == SCORER_VERSION:  # removed, or rescored by another process
                                return Rescored(s.run_key, now is not None, s.scorer_version)
                            db.execute("DELETE FROM trajectories WHERE run_key = ?", [s.run_key])
                            db.execute("DELETE FROM run_columns WHERE run_key = ?", [s.run_key])
                            _write_blocks(db, settled, staged)
                            set_aside = carry.fence_changed(db, s.run_key, shown, str(stored.read), stored.sha256,
                                                            utc_now())
                            columns = run_columns(settled)
                            del columns["run_key"]
                            db.table("runs").update(s.run_key, {
                                **columns, "stored_path": self._relative(stored.final), "stored_sha256": stored.sha256,
                                "original_path": self._relative(kept_original.final if kept_original else stored.final),
                                "file_sha256": content, "proof_sha256": proof_sha})
                            if file_state(path) != before:
                                raise InputError("the file changed while it was being rescored", source=str(path))
                            for copy in (kept_original, stored):
                                if copy is not None and copy.pending:
                                    copy.publish()
                                    published.append(copy)
                    except BaseException:
                        self._unpublish(published)
                        raise
        return Rescored(s.run_key, True, s.scorer_version, labels_set_aside=tuple(set_aside))

    def _original(self, path: Path, fmt: str, content: str, proof: Path | None = None,
                  proof_sha256: str | None = None) -> PendingCopy | contextlib.nullcontext:
        """The workspace's copy of a converted run's original bytes (what the scorer-version
        gate rescores it from); a canonical run's own copy is its original (nothing more).
        An Inspect log's proof side log (``proof``, read with ``proof_sha256``) is kept with it,
        named by its own hash (``_proof_name``): runs of one log with different proofs, or none,
        share the log's copy, never a proof."""
        if fmt == canonical.NAME:
            return contextlib.nullcontext()
        original = self._keep(path, f"{content}.original", content)
        if proof is not None and proof_sha256 is not None:
            try:
                original.companion = self._keep(proof, _proof_name(proof_sha256), proof_sha256)
            except BaseException:
                original.discard()
                raise
        return original

    def _proof_for_rescore(self, s: StoredRun, original: Path, content: str) -> tuple[Path | None, str | None]:
        """The proof side log a stored run was scored with (None: it had none), or why it cannot
        be rescored. The run records its proof's hash and the workspace keeps the proof under it;
        a run imported before it did so (scorer 3.0) is matched by its key: a proof found beside
        its copy or beside the log it came from is used only when the key it gives is the run's."""
        if s.header.format != inspect_log.NAME:
            return None, None
        if s.proof_sha256:
            kept = self.files / _proof_name(s.proof_sha256)
            if kept.is_file():
                return kept, None
            beside = proof_path_of(original)  # given again with its log (rescore --from): only the very proof
            if beside.is_file() and sha256_of_file(beside) == s.proof_sha256:
                return beside, None
            return None, ("its proof side log's copy is gone from the workspace: give its log with the proof beside it "
                          f"(rescore {s.run_key[:12]} --from LOG)")
        if _version(s.scorer_version) < PROOFS_SINCE:
            return None, None  # scored before proofs were read: it had none
        request, side_sha = s.request, (s.side_log or {}).get("sha256")
        if request.run_key(s.file_sha256 or content, side_log_sha256=side_sha) == s.run_key:
            return None, None  # its key says it was scored without a proof
        for candidate in (proof_path_of(original), proof_path_of(s.header.source) if s.header.source else None):
            if candidate is not None and candidate.is_file() and \
                    request.run_key(s.file_sha256 or content, side_log_sha256=side_sha,
                                    proof_sha256=sha256_of_file(candidate)) == s.run_key:
                return candidate, None
        return None, ("it was scored with a proof side log the workspace did not keep, and that proof is no longer "
                      "beside its log: import the log again with its proof beside it to rescore it")

    def _write_run(self, settled: SettledRun, blocks: _Staged, stored: PendingCopy, pay: PayloadJoin | None,
                   source: Path, source_state: FileState, *, provenance: dict | None = None,
                   original: PendingCopy | None = None) -> ImportResult:
        """Write a settled run (its blocks scored and staged: no rule runs under the write lock)."""
        keeping = self._keep(Path(pay.source), f"{pay.content_sha256}.payloads.jsonl", pay.content_sha256) \
            if pay else None
        key = settled.run_key
        with keeping or contextlib.nullcontext() as kept:
            published: list[PendingCopy] = []
            try:
                with self.connect() as db, immediate(db):
                    # Another import of the same content may have committed while this one was
                    # hashing or scoring (two sessions uploading one run): then the run is theirs.
                    raced = db.execute("select 1 from runs where run_key = ?", [key]).fetchone() is not None
                    if not raced:
                        self._insert_rows(db, settled, blocks, stored, kept, source, source_state,
                                          provenance=provenance, published=published, original=original)
            except BaseException:
                # The commit failed after the copies took their names (a full disk): they are
                # removed unless a committed run uses them, so no orphan copy is left.
                self._unpublish(published)
                raise
        return ImportResult(run_key=key, already_present=raced, run=self._run_or_raise(key),
                            rejected=() if raced else settled.rejected,
                            rejected_count=0 if raced else settled.rejected_count)

    def _insert_rows(self, db, settled: SettledRun, blocks: _Staged, stored: PendingCopy,
                     kept: PendingCopy | None, source: Path, source_state: FileState, *,
                     provenance: dict | None = None, published: list | None = None,
                     original: PendingCopy | None = None) -> None:
        """The run row, its trajectory rows, its score columns and its copies, in the caller's
        transaction (nobody sees a half-imported run); the copies it names go in ``published``."""
        db.table("runs").insert({
            # Relative to the workspace's folder: a workspace moved (or restored elsewhere) still replays.
            **run_columns(settled), "stored_path": self._relative(stored.final), "stored_sha256": stored.sha256,
            "payloads_path": self._relative(kept.final) if kept else None, "imported_at": utc_now(),
            "original_path": self._relative(original.final if original else stored.final), **(provenance or {}),
        })
        _write_blocks(db, settled, blocks)
        if file_state(source) != source_state:
            # A harness still writing its log: the run key (the hash) and the records read
            # would describe different files. Nothing is stored; the transaction rolls back.
            raise InputError("the file changed while it was being imported (is the harness still writing "
                             "it?); import it again once it is complete", source=str(source))
        # Last step before the commit: the copies take their names (a failed commit after
        # this leaves a correct, content-named copy that a re-import reuses).
        try:
            for copy in (kept, original, stored):
                if copy is not None and copy.pending:
                    copy.publish()
                    if published is not None:
                        published.append(copy)
        except OSError as exc:  # the workspace's folder, not the input, is at fault
            raise StoreError(f"cannot keep a copy of the run in {self.files}: {exc.strerror or exc}") from exc

    def _relative(self, path: Path) -> str:
        """A copy's path as stored: relative to the workspace's folder."""
        return os.path.relpath(path, self.files)

    def _unpublish(self, published: list[PendingCopy]) -> None:
        if not published:
            return
        try:
            with self.connect() as db:
                used = {p for (p,) in db.execute("select stored_path from runs union all select payloads_path "
                                                 "from runs union all select original_path from runs").fetchall()
                        if p}
        except (StoreError, sqlite3.Error):
            return  # cannot tell: a copy with its content name is never wrong to keep
        for copy in published:
            if str(copy.final) not in used and self._relative(copy.final) not in used:
                with contextlib.suppress(OSError):
                    copy.final.unlink()
                    if copy.side is not None:
                        copy.side.unlink()


def _proof_read(header: RunHeader, stored: PendingCopy, proof_sha256: str | None) -> RunHeader:
    """``header`` (from the copy's header line) with the proof side log the importer read and
    joined (``pipeline.with_read_proof``), which must be the one the run's key names: a proof
    that changed, appeared or went between its hashing and the importer's read is refused."""
    if stored.importer is None:  # a canonical run: nothing but the file was read
        return header
    read = stored.importer.proof_sha256 or None
    if read != proof_sha256:
        raise InputError(f"the proof side log changed while the run was imported (sha256 "
                         f"{(proof_sha256 or 'none')[:12]} when hashed for the run's key, {(read or 'none')[:12]} as "
                         "the importer read it): import it again once it is complete",
                         source=stored.importer.proof_source or str(proof_path_of(header.source)))
    return with_read_proof(header, stored.importer)


def _copy_name(content: str, key: str, verdict_map, proof_sha256: str | None) -> str:
    """The name of a run's canonical copy: its file's hash, or its run key where a verdict map or
    a proof changes what the conversion writes (runs of one file then keep copies apart)."""
    return key if verdict_map or proof_sha256 else content


def _proof_name(proof_sha256: str) -> str:
    """The workspace's copy of a proof side log, named by its hash (never found "beside" a log)."""
    return f"{proof_sha256}.proof"


PROOFS_SINCE = (3, 0)
"""The scorer version from which an Inspect log's proof side log is read (and keyed)."""


def _version(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(x) for x in text.split("."))
    except ValueError:
        return (0,)


def _give_it(s: StoredRun) -> str:
    """How to rescore a run whose original bytes the workspace cannot read (said after why)."""
    must = f"; its SHA-256 must be {s.file_sha256[:12]}…, the file's at import" if s.file_sha256 else ""
    return (f": give its file again (litmus-review rescore {s.run_key[:12]} --from FILE{must}), or import its file "
            "again with the options it was imported with")


def _not_its_bytes(s: StoredRun, content: str) -> str:
    return (f"its bytes are not run {s.run_key[:12]}'s: their SHA-256 is {content}, and the "
            f"workspace computed {s.file_sha256} for the file it imported as that run; nothing was rescored (give "
            "the file the run was imported from)")


@dataclass(frozen=True, slots=True)
class Rescored:
    """What the scorer-version gate did to one stored run."""

    run_key: str
    done: bool
    """Rescored under this scorer version (False: left as it was, ``why`` says why)."""
    was: str
    """The scorer version it held before."""
    why: str = ""
    labels_set_aside: tuple[str, ...] = ()
    """The labelled trajectories whose labels stopped counting (``carry``: their record is not
    the one the reviewers replayed, or nothing shows it is)."""


@dataclass(frozen=True, slots=True)
class ImportResult:
    run_key: str
    already_present: bool
    run: dict
    rejected: tuple[Rejection, ...]
    """The first rejected records this import read (``settle.REJECTIONS_LISTED``; none when the run
    was present already)."""
    rescored: Rescored | None = None
    """The run was already present under another scorer version and was rescored from the
    bytes given."""
    rejected_count: int = 0
    """How many records this import rejected, listed or not."""


@dataclass(frozen=True, slots=True)
class CategoriesRederived:
    """What ``rederive_categories`` did for one run."""

    run_key: str
    done: bool
    """Its categories are now today's importers' (False: left as they were read, ``why``)."""
    why: str = ""


CATEGORY_KEY = b'"category"'
"""The canonical record's key of a harness's category, as JSON writes it (``"intended_category"``
does not hold it: an underscore comes before ``category``)."""


def _mentions(path: Path, needle: bytes, chunk: int = 1 << 20) -> bool:
    """Whether the file holds ``needle``, read a chunk at a time (a missing file: True, so that
    its caller says it is gone)."""
    try:
        with path.open("rb") as fh:
            tail = b""
            while block := fh.read(chunk):
                if needle in tail + block:
                    return True
                tail = block[-len(needle):]
    except OSError:
        return True
    return False


def run_categories(data: bytes, source: str, fmt: str, verdict_map: str | None) -> dict[str, str | None]:
    """Each trajectory's category (``model.grouping_category``) as today's importer reads the
    run's original bytes."""
    run = parse_run(data, source, fmt, verdict_map=VerdictMap.parse(verdict_map) if verdict_map else None,
                    continuations=())  # a proof changes no category
    return {t.id: grouping_category(t.category, t.intended_category) for t in run.trajectories}


def _read_only(db: Path) -> bool:
    """An existing database file that this process may not write, or whose folder it may not
    write (where SQLite keeps its -wal and -shm files)."""
    return db.exists() and not (os.access(db, os.W_OK) and os.access(db.parent, os.W_OK))


def run_columns(settled: SettledRun) -> dict:
    """The runs-row columns a settled run fills (the rest say where its copies are)."""
    h = settled.header
    return {
        "run_key": settled.run_key, "run_id": h.run_id, "model": h.model, "format": h.format, "source": h.source,
        "task": h.task or None, "variant": h.variant or None,
        "harness_name": h.harness_name, "harness_version": h.harness_version,
        "capture_limit_bytes": h.capture_limit_bytes, "evidence_standard": h.evidence_standard.value,
        "taxonomy_json": json.dumps(canonical.dump_header(h)["taxonomy"]),
        "trajectories": settled.trajectories, "tool_calls": settled.tool_calls, "records_seen": settled.records_seen,
        "rejected_json": json.dumps([rejection_dict(r) for r in settled.rejected]),
        "recapture_json": None if settled.recapture is None else json.dumps({
            "applied": settled.recapture.applied, "rejected": [rejection_dict(r) for r in settled.recapture.rejected],
            "rejected_count": settled.recapture.rejected_count}),
        "classifier_of_record": h.classifier_of_record, "scorer_version": settled.scorer_version,
        "classifier_of_record_check": h.classifier_of_record_check or None, "require_proof": int(h.require_proof),
        "reclassifier": settled.reclassifier, "reported_safe_rate": h.reported_safe_rate,
        "reported_safe_rate_source": h.reported_safe_rate_source,
        "run_status": h.run_status or None, "run_status_detail": h.run_status_detail or None,
        "verdict_map": settled.verdict_map,
        "format_metrics_json": None if settled.format_metrics is None else json.dumps(settled.format_metrics),
        "terminations_json": None if settled.terminations is None else json.dumps(settled.terminations),
        "category_version": CATEGORY_VERSION,  # its categories were read as today's importers read them
    }


def _provenance(file_sha256: str, original_name: str | None, pay) -> dict:
    """The runs-row columns that say where a run came from."""
    return {"file_sha256": file_sha256, "original_name": original_name or None,
            "side_log_source": pay.source if pay is not None else None,
            "side_log_sha256": pay.content_sha256 if pay is not None else None}


def _scored_ahead(results: Iterable[Block], progress, folder: Path) -> _Staged:
    """Consume ``results`` now (parsing and scoring every block) into a staging database in
    ``folder`` (a temporary name the sweep removes if this process dies) and return it with the
    blocks' digests (what ``settle`` reads). The caller then copies the rows it keeps into the
    workspace under its write lock inside SQLite (``_write_blocks``), without running any rule
    there and without building the rows in Python a second time. Memory holds one block at a
    time. ``progress`` gets the rows scored so far. The result is a context manager: leaving it
    removes the staging file."""
    staged = _Staged(temporary_name(folder / "scored.db"))
    try:
        db = sqlite3.connect(staged.path, isolation_level=None)
        try:
            # A scratch file only this import reads, removed after it: no journal, no sync.
            db.execute("PRAGMA journal_mode = OFF")
            db.execute("PRAGMA synchronous = OFF")
            db.execute(f"CREATE TABLE rows ({', '.join(f'[{c}]' for c in ROW_COLUMNS)})")
            db.execute("BEGIN")
            insert = f"INSERT INTO rows VALUES ({', '.join('?' * len(ROW_COLUMNS))})"
            rows = 0
            for block in results:
                staged.digests.append(digest(block))
                db.executemany(insert, block.rows)
                staged.blocks.append((rows, len(block.rows)))
                rows += len(block.rows)
                if progress:
                    progress(rows)
            db.execute("COMMIT")
        finally:
            db.close()
    except sqlite3.OperationalError as exc:  # the folder's fault (a full disk, no permission), not the rows'
        staged.close()
        raise StoreError(f"cannot write in the workspace folder {folder}: {exc}") from exc
    except BaseException:
        staged.close()
        raise
    return staged


@dataclass
class _Staged:
    """The rows ``_scored_ahead`` staged: the file holding them (table ``rows``, in file order,
    so block ``b``'s rows are the rowids after ``blocks[b][0]``), each block's rows before it and
    its count, and the blocks' digests."""

    path: Path
    blocks: list[tuple[int, int]] = dataclasses.field(default_factory=list)
    digests: list[BlockDigest] = dataclasses.field(default_factory=list)

    def close(self) -> None:
        # A file left behind is the sweep's to remove; it never fails an import (or hides its error).
        with contextlib.suppress(OSError):
            self.path.unlink()

    def __enter__(self) -> _Staged:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _insert_sql(run_key: str, line_shift: int, before: int, count: int, drops: frozenset[int]) -> str:
    """The INSERT ... SELECT of one staged block's rows (the ``count`` rowids after ``before``,
    but its indices in ``drops``). The run key (64 hex digits), the line shift and the rowids
    (ints) are literals, checked here, so SQLite fills them in rather than Python per row."""
    if not canonical.HEX64.fullmatch(run_key) or not all(
            n.__class__ is int for n in (line_shift, before, count, *drops)):
        raise ValueError(f"not a run key, line shift and rows: {run_key!r}, {line_shift!r}, {before!r}, {count!r}")
    cols = ", ".join(f"[{c}]" for c in ROW_COLUMNS)
    values = ", ".join(f"[{c}] + {line_shift}" if c == "line" else f"[{c}]" for c in ROW_COLUMNS)
    skip = f" AND rowid NOT IN ({', '.join(str(before + 1 + i) for i in sorted(drops))})" if drops else ""
    return (f"INSERT INTO trajectories ([run_key], {cols}) SELECT '{run_key}', {values} FROM scored.rows "
            f"WHERE rowid BETWEEN {before + 1} AND {before + count}{skip} ORDER BY rowid")


def _write_blocks(db, settled: SettledRun, staged: _Staged) -> None:
    """Insert a settled run's stored rows and its score columns (in the caller's transaction):
    each block's staged rows but the ones ``settle`` refused, their lines shifted as it placed
    them. The rows go from the staging file into the workspace inside SQLite, one INSERT ...
    SELECT a block, so Python never holds them again (the staging file stays attached until
    the connection closes: it cannot be detached inside the transaction)."""
    key = settled.run_key
    db.conn.execute("ATTACH DATABASE ? AS scored", [str(staged.path)])
    for b, (before, count) in enumerate(staged.blocks):
        if count:
            db.conn.execute(_insert_sql(key, settled.shifts[b], before, count, settled.drops[b]))
    db.conn.execute("INSERT INTO run_columns (run_key, format, data) VALUES (?, ?, ?)",
                    [key, COLUMNS_FORMAT, encode_columns(settled.fields)])
