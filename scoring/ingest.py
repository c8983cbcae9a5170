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
import hashlib
import io
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
from .capture_rules import plain_calls_proven, verdict_abstention
from .errors import InputError, StoreError
from .importers import canonical
from .importers._common import RecordError, decode_json_line
from .model import (
    BENIGN,
    Rejection,
    RunHeader,
    ScoredTrajectory,
    Status,
    Termination,
    Trajectory,
    grouping_category,
    harness_category,
)
from .recapture import PayloadJoin
from .request import DEFAULT_REQUEST, ScoringRequest
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
    span: tuple[int, int, bytes] | None = None
    """(offset, length, SHA-256) of exactly the bytes the block scored: a door compares it with
    what it checked and hashed before (``scan_canonical``; the Dask engine's ``file_sha256``), so
    a file rewritten between the two is refused, never scored under the other bytes' check."""


class HeaderLine(bytes):
    """A canonical header line as a door checked it (``vouch_for_file``): the bytes every block
    parses, and ``rules_check``, what checking the header's declared taxonomy_rules on the file
    found (``RunHeader.classifier_of_record_check``). The blocks honour the rules as classifier of
    record only where ``rules_check`` records the acceptance (``score.rules_of_record``); only
    ``vouch_for_file`` makes a ``HeaderLine``, never from the file's own bytes, so a plain
    ``bytes`` line — the header as the file says it, unchecked — never has its rules honoured.
    It travels to worker processes and Dask workers with its check (``__reduce__``)."""

    rules_check: str

    def __new__(cls, line: bytes, rules_check: str) -> HeaderLine:
        obj = super().__new__(cls, line)
        obj.rules_check = rules_check
        return obj

    def __reduce__(self):
        return HeaderLine, (bytes(self), self.rules_check)


def rules_check_of(header_line: bytes) -> str:
    """What the door's check of the header's taxonomy_rules found ("" for a line no door checked)."""
    return header_line.rules_check if isinstance(header_line, HeaderLine) else ""


MAX_HEADER_BYTES = 8 * 1024 * 1024
"""How far into a canonical run its header line must have ended (blank lines before it
included): a header is a run's names, capture limit and taxonomy. Every door reads it, and a
score table's replay reads it again on every render: a file whose first line never ends (hundreds
of megabytes without a newline) is refused once this much is read, never held whole."""
_HEADER_CHUNK = 64 * 1024


def read_header_line(fh, source: str) -> tuple[bytes, int, int]:
    """The first non-blank line, its line number and the offset just after it (``fh`` left
    there), read in growing chunks: InputError, located at the line, when no header line ends
    within ``MAX_HEADER_BYTES`` bytes."""
    limit, start = MAX_HEADER_BYTES, fh.tell()
    buf, line_start, lineno, scanned, chunk = bytearray(), 0, 1, 0, _HEADER_CHUNK
    while True:
        while (nl := buf.find(b"\n", scanned)) >= 0:
            if buf[line_start:nl].strip():
                fh.seek(start + nl + 1)
                return bytes(buf[line_start:nl]).rstrip(b"\r"), lineno, nl + 1
            lineno, line_start, scanned = lineno + 1, nl + 1, nl + 1
        scanned = len(buf)
        if len(buf) > limit:
            raise InputError(f"the run header does not end within its first {limit:,} bytes (no newline): a "
                             "header line is at most that long; refused without reading further", source=source,
                             line=lineno)
        got = fh.read(min(chunk, limit + 1 - len(buf)))
        if not got:
            if buf[line_start:].strip():  # the last line, without a newline
                return bytes(buf[line_start:]).rstrip(b"\r\n"), lineno, len(buf)
            raise InputError("empty file: no run header", source=source)
        buf += got
        chunk *= 2


def decode_header(raw: bytes, source: str, line: int) -> dict:
    obj = decode_json_line(raw)
    if isinstance(obj, Exception):
        raise InputError(f"run header: {obj}", source=source, line=line)
    return obj


def _located_records(lines: Iterable[tuple[int, bytes]], header: RunHeader) -> Iterator[tuple[int, Trajectory | str]]:
    """Every record of ``lines`` (line number, bytes), for ``score.check_rules_of_record``: a
    well-formed trajectory record as its ``Trajectory``; a record the block scorer refuses
    (malformed, an unknown category) as the trajectory id it holds, if any, so that no copy of an
    id held twice in the file is a witness, whichever copy is well-formed. Repeated ids are
    left to the check (it sets every copy aside, as ``settle`` scores none)."""
    known = {c.id for c in header.taxonomy}
    for lineno, raw in lines:
        if not raw.strip():
            continue
        obj = decode_json_line(raw.rstrip(b"\r\n"))
        try:
            yield lineno, canonical.check_record(obj, known, None)
        except RecordError:
            if isinstance(obj, dict) and isinstance(obj.get("id"), str):
                yield lineno, obj["id"]


def _lines_of(chunks: Iterable[bytes], first_line: int) -> Iterator[tuple[int, bytes]]:
    """(line number, bytes without the newline) of the lines of consecutive chunks of a file that
    start after line ``first_line`` (chunks may cut lines anywhere; a last line without a
    newline is a line, as a file's lines are)."""
    lineno, parts = first_line, list[bytes]()
    for chunk in chunks:
        start = 0
        while (nl := chunk.find(b"\n", start)) >= 0:
            lineno += 1
            if parts:
                parts.append(chunk[start:nl])
                yield lineno, b"".join(parts)
                parts = []
            else:
                yield lineno, chunk[start:nl]
            start = nl + 1
        if start < len(chunk):
            parts.append(chunk[start:])
    if parts:
        yield lineno + 1, b"".join(parts)


def _vouch(header_line: bytes, header: RunHeader, lines: Iterable[tuple[int, bytes]]) -> tuple[bytes, RunHeader]:
    if header.classifier_of_record != RULES_OF_RECORD:
        return header_line, header
    check = check_rules_of_record(_located_records(lines, header), header)
    header = vouched(header, check)
    if not check.accepted:
        obj = json.loads(header_line)
        obj["classifier_of_record"] = header.classifier_of_record
        header_line = json.dumps(obj).encode("utf-8")
    return HeaderLine(header_line, header.classifier_of_record_check), header


def vouch_for_file(header_line: bytes, header: RunHeader, fh, header_end: int,
                   first_line: int) -> tuple[bytes, RunHeader]:
    """(the header line the blocks must read, the header as stored) of a canonical run whose
    header may declare its taxonomy rules as the harness's classifier: the declaration stands
    only where, on the file's fully captured trajectories, the rules reproduce the harness's own
    verdicts of both kinds, every benign and every harmful one, with harmful ones from at least
    ``score.MIN_HARMFUL_WITNESSES`` tasks (``score.check_rules_of_record``; one more read of the
    file, for such runs only). Refused, the line the blocks read says ``harness_verdict``;
    either way it is a ``HeaderLine`` carrying what the check found, which the blocks need to
    honour accepted rules. Every block door checks the header it read so: this reads ``fh``
    from ``header_end`` to its end (a workspace's own copy of the run, its rescore);
    ``scan_canonical`` checks the bytes it hashes (``score FILE``, the Dask engine's plan)."""
    fh.seek(header_end)
    return _vouch(header_line, header, ((n, raw.rstrip(b"\n")) for n, raw in enumerate(fh, start=first_line + 1)))


SCAN_CHUNK = 1 << 20
"""Bytes read at a time by ``scan_canonical`` (a range of a block is hashed in such chunks)."""


def changed_while_scored(source: str, detail: str, line: int | None = None) -> InputError:
    """The refusal of a run whose bytes changed between what a door checked and hashed and what
    it scored (a harness still writing it, a sync tool replacing it): scoring on would give the
    check of one version and the rows of another, stored under the first one's hash."""
    return InputError(f"the file changed while it was being scored ({detail}); nothing was scored from it. Score it "
                      "again once nothing writes it", source=source, line=line)


@dataclass(frozen=True, slots=True)
class Scan:
    """What ``scan_canonical`` read of a canonical run before its blocks."""

    header_line: bytes
    """The header line the blocks must parse (``vouch_for_file``'s)."""
    header: RunHeader
    """The header as checked (``RunHeader.classifier_of_record_check`` set where rules were declared)."""
    end: int
    """Bytes ``[0, end)`` were read and hashed: the header's (``end`` is the header's end), or the
    whole file (``end`` is its size)."""
    sha256: str
    """SHA-256 of bytes ``[0, end)``; the file's own where ``end`` is its size."""
    spans: tuple[tuple[int, int, bytes], ...] = ()
    """(offset, length, SHA-256) of each range the scan was given, in order: what each block must
    read (``Block.span``)."""


def scan_canonical(fh, source: str, size: int, header_line: bytes, first_line: int, header_end: int,
                   header: RunHeader, *, ranges: Iterable[tuple[int, int]] | None = None, whole: bool = False) -> Scan:
    """One read of a canonical run, from byte 0, before its blocks: its header again (it must be
    the line ``read_header_line`` gave: ``header_line``, at ``first_line``, ending at
    ``header_end``), then, where ``whole`` or where the header declares taxonomy_rules, every
    byte up to ``size`` — by ``ranges`` (the blocks', which must tile ``[header_end, size)``;
    each one's SHA-256 is kept) — hashed as it is read, while ``vouch_for_file``'s check of the
    rules reads those same bytes. A file not of ``size`` bytes, or not the header read before,
    raises ``changed_while_scored``. A door then scores blocks that read exactly these bytes:
    each block's ``Block.span`` digest must be its range's, or nothing is scored."""
    fh.seek(0)
    prefix = fh.read(header_end)
    if len(prefix) != header_end or read_header_line(io.BytesIO(prefix), source) != (header_line, first_line,
                                                                                       header_end):
        raise changed_while_scored(source, "its header is not the one read first", first_line)
    hashed = hashlib.sha256(prefix)
    declared = header.classifier_of_record == RULES_OF_RECORD
    if not (whole or declared):
        return Scan(header_line, header, header_end, hashed.hexdigest())
    spans = list(ranges) if ranges is not None else [(header_end, size - header_end)] if size > header_end else []
    at = header_end
    for off, n in spans:
        assert off == at and n >= 0, (spans, header_end, size)
        at += n
    assert at == size, (spans, size)
    read: list[tuple[int, int, bytes]] = []

    def chunks() -> Iterator[bytes]:
        for off, n in spans:
            fh.seek(off)
            part, left = hashlib.sha256(), n
            while left:
                chunk = fh.read(min(left, SCAN_CHUNK))
                if not chunk:
                    raise changed_while_scored(source, f"{size:,} bytes when it was opened, fewer now")
                hashed.update(chunk)
                part.update(chunk)
                left -= len(chunk)
                yield chunk
            read.append((off, n, part.digest()))
        if fh.read(1):
            raise changed_while_scored(source, f"{size:,} bytes when it was opened, more now")

    if declared:
        header_line, header = _vouch(header_line, header, _lines_of(chunks(), first_line))
    else:
        collections.deque(chunks(), maxlen=0)
    return Scan(header_line, header, size, hashed.hexdigest(), tuple(read))


def checked_blocks(blocks: Iterable[Block], scan: Scan, source: str, first_line: int) -> Iterator[Block]:
    """The blocks scored from the ranges ``scan`` read, in order, each refused
    (``changed_while_scored``, located at the block's first line) unless it read exactly the
    bytes the scan checked and hashed: the rows, the check and the run's hash then name one
    version of the file."""
    line = first_line + 1
    spans = iter(scan.spans)
    for block in blocks:
        want = next(spans, None)
        if want is None or block.span != want:
            at = f"bytes {want[0]:,} to {want[0] + want[1]:,}" if want is not None else "a block past its end"
            raise changed_while_scored(source, f"{at} are not those it checked and hashed before", line)
        line += block.lines
        yield block
    if next(spans, None) is not None:
        raise changed_while_scored(source, "fewer blocks were scored than it was read in")


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
                pay: PayloadJoin | None = None, reclassifier=None, request: ScoringRequest = DEFAULT_REQUEST, *,
                span: bool = True) -> Block:
    """Read one range of the run and score it; line numbers are relative to the range (from 1)
    and ``Block.lines`` says how many it spans, so the writer can number them. ``span=False``:
    no ``Block.span`` digest, for a caller that checks the whole file's hash instead."""
    return score_bytes(header_line, source, offset, read_range(path, offset, length), pay, reclassifier,
                       request=request, span=span)


def read_range(path: str, offset: int, length: int) -> bytes:
    """The bytes of one range of the run, as ``score_range`` reads them (fewer at the file's end)."""
    with open(path, "rb") as fh:
        fh.seek(offset)
        return fh.read(length)


def score_bytes(header_line: bytes, source: str, offset: int, data: bytes, pay: PayloadJoin | None = None,
                reclassifier=None, *, harness: HarnessVerdictClassifier | None = None, lean: bool = True,
                request: ScoringRequest = DEFAULT_REQUEST, span: bool = True) -> Block:
    """Score whole lines already read (``data`` starts at byte ``offset`` of the run): the one
    block scorer of the local import and of the Dask engine, which reads its ranges itself.

    ``harness`` is the verdict classifier (default: its default threshold); ``lean=False``
    scores every record by the typed path (the rows are the same: tests hold them so);
    ``request``: what the run is scored under (its ``require_proof`` goes in the block's
    ``RunHeader``; the header line never carries it); ``pay`` and ``reclassifier`` are its side
    log loaded and its re-classifier started. The lean path is unchanged by it: it takes only calls proven by size and
    digest. ``span``: the block's ``Block.span`` (its bytes' SHA-256), which ``score FILE`` and the
    Dask engine check against their hash of the file; the workspace hashes the file whole."""
    with no_cyclic_gc():  # it cost 7 % of a block's time
        block = _score_block(header_line, source, offset, 1, data, pay, reclassifier=reclassifier, harness=harness,
                             lean=lean, request=request)
    if not span:
        return block
    return dataclasses.replace(block, span=(offset, len(data), hashlib.sha256(data).digest()))


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
def _scorers(header_line: bytes, rules_check: str, source: str, request: ScoringRequest = DEFAULT_REQUEST):
    """(header, rules, harness) of a header line (plain ``bytes``: the cache key) and what the
    door's check of its taxonomy_rules found (``HeaderLine.rules_check``: "" honours none)."""
    header = canonical.parse_header(decode_header(header_line, source, 1), source)
    header = dataclasses.replace(header, require_proof=request.require_proof, classifier_of_record_check=rules_check)
    return header, RuleClassifier(header.taxonomy), HarnessVerdictClassifier()


def _score_block(header_line: bytes, source: str, offset: int, line: int, data: bytes,
                 pay: PayloadJoin | None = None, *, lean: bool = True, reclassifier=None,
                 harness: HarnessVerdictClassifier | None = None, request: ScoringRequest = DEFAULT_REQUEST) -> Block:
    """Parse and score one block of lines (runs in a worker process for large imports).

    Records of the common shape take ``_lean_row``; everything else (and every record when a
    side log is joined) the typed path. Both give the same row (tested line by line).
    """
    header, rules, default_harness = _scorers(bytes(header_line), rules_check_of(header_line), source, request)
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
        tid, r.task_id, r.model or header.model, grouping_category(harness_category(r.category), r.intended_category),
        label if harm else None,
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
