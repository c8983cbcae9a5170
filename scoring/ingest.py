"""Parsing and scoring blocks of a canonical run into trajectory rows, in worker processes.

Kept apart from ``workspace`` so a spawned worker imports only what it needs (``sqlite_utils``
pulls in pandas, a slow import for every worker start).
"""

from __future__ import annotations

import collections
import concurrent.futures
import concurrent.futures.process
import contextlib
import ctypes
import dataclasses
import functools
import gc
import json
import multiprocessing
import os
import signal
import sys
import threading
import time
from collections.abc import Generator, Iterable, Iterator
from dataclasses import dataclass

import msgspec

from . import rows as codec
from .errors import InputError, StoreError
from .importers import canonical
from .importers._common import RecordError, decode_json_line
from .model import BENIGN, Rejection, RunHeader, ScoredTrajectory, Status, Termination, Trajectory
from .recapture import PayloadJoin
from .score import (
    RULES_OF_RECORD,
    HarnessVerdictClassifier,
    RuleClassifier,
    assess_calls,
    check_rules_of_record,
    score_trajectory,
    verdict_evidence,
    vouched,
)
from .settle import REJECTIONS_LISTED
from .strict_rules import plain_calls_proven, verdict_abstention

PARALLEL_MIN_BYTES = 32 * 1024 * 1024
BLOCK_BYTES = 16 * 1024 * 1024
"""Bytes of whole lines per unit of work: larger blocks mean fewer round trips and INSERT
batches (16 MB measured faster than 4 MB at 1 M calls, the same at 100 k)."""
IMPORT_WORKERS = min(2, os.cpu_count() or 1)
PARALLEL_WINDOW = 8
"""Blocks in flight: enough to keep both workers busy while the writer waits for the run key
(hashing the whole file), few enough that memory holds a few blocks, not the file."""


@dataclass(frozen=True, slots=True)
class Block:
    """What one block of lines became: trajectory rows ready to insert, and rejections."""

    rows: list[tuple]
    """In ``ROW_COLUMNS`` order, ``line`` counted from the block's first line (the writer
    adds the run key and shifts line numbers in its INSERT)."""
    rejected: list[Rejection]
    """The block's first rejections, ``settle.REJECTIONS_LISTED`` at most: it rejected
    ``seen - len(rows)`` records in all."""
    seen: int
    lines: int = 0
    """How many lines the block spans (the writer numbers the next block's lines from it)."""
    lean: int = 0
    """How many records the lean path scored (the rest took the typed path): a speed figure."""
    recapture: list[tuple] | None = None
    """What the block's share of the side log did (``PayloadJoin.outcomes``); None without one."""


def read_header_line(fh, source: str) -> tuple[bytes, int, int]:
    """The first non-blank line, its line number and the offset just after it."""
    offset = 0
    for lineno, raw in enumerate(fh, start=1):
        offset += len(raw)
        if raw.strip():
            return raw.rstrip(b"\r\n"), lineno, offset
    raise InputError("empty file: no run header", source=source)


def decode_header(raw: bytes, source: str, line: int) -> dict:
    obj = decode_json_line(raw)
    if isinstance(obj, Exception):
        raise InputError(f"run header: {obj}", source=source, line=line)
    return obj


def _located_records(fh, header_end: int, first_line: int, header: RunHeader) -> Iterator[tuple[int, Trajectory]]:
    """Every well-formed trajectory record after the header, with its line (malformed ones are
    skipped here: the block scorer reports them)."""
    known = {c.id for c in header.taxonomy}
    seen_ids: set[str] = set()
    fh.seek(header_end)
    for lineno, raw in enumerate(fh, start=first_line + 1):
        if not raw.strip():
            continue
        obj = decode_json_line(raw.rstrip(b"\r\n"))
        try:
            yield lineno, canonical.check_record(obj, known, seen_ids)
        except RecordError:
            continue


def vouch_for_file(header_line: bytes, header: RunHeader, fh, header_end: int,
                   first_line: int) -> tuple[bytes, RunHeader]:
    """(the header line the blocks must read, the header as stored) of a canonical run whose
    header may declare its taxonomy rules as the harness's classifier: the declaration stands
    only where, on the file's fully captured trajectories, the rules reproduce the harness's own
    verdicts of both kinds, every benign and every harmful one and at least
    ``score.MIN_HARMFUL_WITNESSES`` harmful ones (``score.check_rules_of_record``; one more read
    of the file, for such runs only).
    Refused, the line the blocks read says ``harness_verdict``. Every block door calls this on
    the header it read (the local import, its parallel path, a rescore, the Dask engine's plan)."""
    if header.classifier_of_record != RULES_OF_RECORD:
        return header_line, header
    check = check_rules_of_record(_located_records(fh, header_end, first_line, header), header)
    header = vouched(header, check)
    if not check.accepted:
        obj = json.loads(header_line)
        obj["classifier_of_record"] = header.classifier_of_record
        header_line = json.dumps(obj).encode("utf-8")
    return header_line, header


def block_ranges(fh, start: int, end: int) -> Iterator[tuple[int, int]]:
    """(offset, length) ranges of whole lines, about BLOCK_BYTES each, between two offsets.

    Only a few bytes around each boundary are read here; the workers read the blocks.
    """
    off = start
    while off < end:
        stop = off + BLOCK_BYTES
        if stop >= end:
            stop = end
        else:
            fh.seek(stop)
            while True:
                chunk = fh.read(65536)
                if not chunk:
                    stop = end
                    break
                cut = chunk.find(b"\n")
                if cut >= 0:
                    stop += cut + 1
                    break
                stop += len(chunk)
        yield off, stop - off
        off = stop


def score_range(header_line: bytes, source: str, path: str, offset: int, length: int,
                pay: PayloadJoin | None = None, reclassifier=None, require_proof: bool = False) -> Block:
    """Read one range of the run and score it; line numbers are relative to the range (from 1)
    and ``Block.lines`` says how many it spans, so the writer can number them."""
    with open(path, "rb") as fh:
        fh.seek(offset)
        data = fh.read(length)
    return score_bytes(header_line, source, offset, data, pay, reclassifier, require_proof=require_proof)


def score_bytes(header_line: bytes, source: str, offset: int, data: bytes, pay: PayloadJoin | None = None,
                reclassifier=None, *, harness: HarnessVerdictClassifier | None = None, lean: bool = True,
                require_proof: bool = False) -> Block:
    """Score whole lines already read (``data`` starts at byte ``offset`` of the run): the one
    block scorer of the local import and of the Dask engine, which reads its ranges itself.

    ``harness`` is the verdict classifier (default: its default threshold); ``lean=False``
    scores every record by the typed path (the rows are the same: tests hold them so);
    ``require_proof``: as ``--require-proof`` (``RunHeader.require_proof``; the header line
    never carries it). The lean path is unchanged by it: it takes only calls proven by size and
    digest."""
    with no_cyclic_gc():  # it cost 7 % of a block's time
        return _score_block(header_line, source, offset, 1, data, pay, reclassifier=reclassifier, harness=harness,
                            lean=lean, require_proof=require_proof)


@contextlib.contextmanager
def no_cyclic_gc() -> Iterator[None]:
    """Pause the cyclic garbage collector around building many short-lived objects that form
    no cycles (a block's rows, a run's score objects): it would only rescan them."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


@functools.lru_cache(maxsize=4)
def _scorers(header_line: bytes, source: str, require_proof: bool = False):
    header = canonical.parse_header(decode_header(header_line, source, 1), source)
    if require_proof:
        header = dataclasses.replace(header, require_proof=True)
    return header, RuleClassifier(header.taxonomy), HarnessVerdictClassifier()


def _score_block(header_line: bytes, source: str, offset: int, line: int, data: bytes,
                 pay: PayloadJoin | None = None, *, lean: bool = True, reclassifier=None,
                 harness: HarnessVerdictClassifier | None = None, require_proof: bool = False) -> Block:
    """Parse and score one block of lines (runs in a worker process for large imports).

    Records of the common shape take ``_lean_row``; everything else (and every record when a
    side log is joined) the typed path. Both give the same row (tested line by line).
    """
    header, rules, default_harness = _scorers(header_line, source, require_proof)
    harness = harness or default_harness
    min_benign_confidence = harness.min_benign_confidence
    known = {c.id for c in header.taxonomy}
    if reclassifier is not None:
        reclassifier.known = frozenset(known)
    rows: list[tuple] = []
    rejected: list[Rejection] = []
    seen = n_lean = 0
    share = pay.share() if pay is not None else None  # the block's own (settle.settle joins the shares)
    lean = lean and pay is None
    # Lines are walked as memoryview slices (msgspec decodes them in place): splitting a 16 MB
    # block into bytes objects copied it once more for nothing.
    view, end_of_data, start, lines = memoryview(data), len(data), 0, 0
    while start < end_of_data:
        end = data.find(b"\n", start)
        if end < 0:
            end = end_of_data
        stop = end - 1 if end > start and data[end - 1] == 13 else end  # a CRLF line's CR
        begin, start = start, end + 1
        here, lineno = offset + begin, line + lines
        lines += 1
        raw: bytes | memoryview = view[begin:stop]
        if data[begin] != 123 and not bytes(raw).strip():  # 123: "{", the usual first byte
            continue
        seen += 1
        if lean:
            row = _lean_row(raw, header, known, lineno, here, min_benign_confidence)
            if row is not None:
                rows.append(row)
                n_lean += 1
                continue
        raw = bytes(raw)
        obj = decode_json_line(raw)
        try:
            # Ids repeated in the run are refused by settle.settle, across blocks and within one.
            t = canonical.check_record(obj, known, None)
        except RecordError as exc:
            if len(rejected) < REJECTIONS_LISTED:  # the rest are counted (seen, less the rows)
                rejected.append(Rejection(source=source, line=lineno, record_id=exc.record_id, message=exc.message))
            continue
        if share is not None:
            t = share.apply(t)
        captures = assess_calls(t, header)
        rec = canonical.Located(lineno, here, len(raw), t, None)
        rows.append(_trajectory_row(t, score_trajectory(t, header, rules, harness, captures, reclassifier), rec,
                                    captures))
    return Block(rows, rejected, seen, lines, n_lean, share.outcomes if share is not None else None)


_LEAN_DECODER = msgspec.json.Decoder(canonical.CommonRecord)
_SAFE, _UNSAFE = Status.SAFE.value, Status.UNSAFE.value
_LEAN_MISS = (msgspec.DecodeError, msgspec.ValidationError, RecursionError)
_COMPLETED = Termination.COMPLETED.value


@functools.lru_cache(maxsize=1024)
def _verdict_evidence_json(label: str, conf: float | None) -> str:
    return json.dumps([verdict_evidence(label, conf)])  # as _trajectory_dict stores it


def _lean_row(raw: bytes | memoryview, header, known: set[str], line: int, offset: int,
              min_benign_confidence: float) -> tuple | None:
    """The row of a record in the common shape, straight from its bytes; None to defer to the
    typed path.

    The common shape (``canonical.CommonRecord``): completed, a decisive harness verdict
    (``verdict_abstention`` under the harness classifier's ``min_benign_confidence``), and plain
    logged calls that ``plain_calls_proven`` proves under the run's capture limit. For these the
    harness's classifier read every full surface, so it is the classifier of record and the
    strict outcome is its verdict: no model objects are needed. Anything else — a flag, an
    adapter, a gap, a weak or missing verdict, an early stop, a malformed field — returns None
    and the typed path decides with the full rules.
    """
    try:
        r = _LEAN_DECODER.decode(raw)
    except _LEAN_MISS:
        return None
    v, term, tid = r.verdict, r.termination, r.id
    if r.record != "trajectory" or (term is not None and term.reason != _COMPLETED):
        return None
    label, conf = v.label, v.confidence
    if (canonical.unknown_label(label, known)  # the typed path refuses the record
            or verdict_abstention(label, conf, v.abnormal, v.source, min_benign_confidence) is not None):
        return None
    harm = label != BENIGN
    calls, biggest, tools = r.tool_calls, 0, ""
    if not calls and not r.messages and not r.final_output.strip():
        return None  # nothing captured: the typed path decides (``score.nothing_captured``)
    if calls:
        sizes = [c.raw_size_bytes for c in calls]
        if not plain_calls_proven([c.arguments.encode("utf-8", "surrogatepass") for c in calls], sizes,
                                  [c.raw_sha256 for c in calls], header.capture_limit_bytes):
            return None
        biggest = max(sizes)
        tools = ",".join(dict.fromkeys([c.tool for c in calls]))
        n = len(r.messages)
        if any(c.message_index is not None and not 0 <= c.message_index < n for c in calls):
            return None  # the typed path names the call
    # Positional, in ROW_COLUMNS order (the tests hold this row equal to the typed path's).
    return codec.row(
        tid, r.task_id, r.model or header.model, r.intended_category, label if harm else None,
        _UNSAFE if harm else _SAFE, None, "", 0 if harm else 1, "completed", len(calls),
        biggest, tools, None, None, "harness_verdict", _verdict_evidence_json(label, conf),
        None, "", header.evidence_standard.value, r.final_output[:codec.PREVIEW_CHARS], line, offset, len(raw),
        ",".join(map(str, sizes)) if calls else "", "", "",
    )


def pool_map(fn, work: Iterable[tuple], workers: int, window: int = 4) -> Generator[Block, None, None]:
    """``fn(*item)`` for each item in worker processes, in order, at most ``window`` in flight
    (memory stays bounded by a few blocks, not the file)."""
    ctx = multiprocessing.get_context("spawn")  # never fork a threaded (Streamlit) process
    pool = concurrent.futures.ProcessPoolExecutor(workers, mp_context=ctx, initializer=die_with_parent,
                                                  initargs=(os.getpid(),))
    try:
        pending: collections.deque = collections.deque()
        try:
            for item in work:
                pending.append(pool.submit(fn, *item))
                if len(pending) >= window:
                    yield pending.popleft().result()
            while pending:
                yield pending.popleft().result()
        except concurrent.futures.process.BrokenProcessPool as exc:
            # a worker was killed (out of memory, a signal): nothing was written; say so plainly
            raise StoreError(f"a worker process of the import ended abruptly ({exc}); nothing was imported") from exc
    finally:
        # Closed early (the run was already imported, or the writer failed): drop the blocks
        # not yet started instead of scoring them for nobody.
        pool.shutdown(wait=True, cancel_futures=True)


PR_SET_PDEATHSIG = 1


def die_with_parent(parent: int) -> None:
    """Worker initializer: the worker ends when the process that started it dies. A SIGKILLed
    import runs no ``finally``, and its workers would otherwise score the blocks still queued
    for nobody, for minutes, holding the caller's pipes (the resource tracker goes once they
    have: it exits when the last process holding its pipe does). On Linux the kernel sends
    SIGKILL (``PR_SET_PDEATHSIG``); everywhere a watchdog thread polls the parent's pid."""
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except (OSError, AttributeError):
            pass
    if os.getppid() != parent:  # it died before the line above took effect
        os._exit(1)
    threading.Thread(target=_watch_parent, args=(parent,), name="litmus-watch-parent", daemon=True).start()


def _watch_parent(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(0.5)
    os._exit(1)



def _trajectory_row(t: Trajectory, s: ScoredTrajectory, rec, captures) -> tuple:
    return codec.encode(t, s, rec.line, rec.offset, rec.length, captures)
