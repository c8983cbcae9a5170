"""Parsing and scoring blocks of a canonical run into trajectory rows, in worker processes.

Kept apart from ``store`` so a spawned worker imports only what it needs (``sqlite_utils``
pulls in pandas: 0.7 s per worker start).
"""

from __future__ import annotations

import collections
import concurrent.futures
import functools
import hashlib
import json
import multiprocessing
import os
from dataclasses import dataclass
from typing import Iterable, Iterator

import orjson

from .errors import InputError
from .importers import canonical
from .importers._common import RecordError, decode_json_line
from .importers.canonical import HEX64
from .model import BENIGN, Rejection, ScoredTrajectory, Status, Trajectory
from .recapture import PayloadJoin
from .score import MIN_BENIGN_CONFIDENCE, HarnessVerdictClassifier, RuleClassifier, assess_calls, score_trajectory

PARALLEL_MIN_BYTES = 32 * 1024 * 1024
BLOCK_BYTES = 4 * 1024 * 1024
IMPORT_WORKERS = min(2, os.cpu_count() or 1)


@dataclass(frozen=True, slots=True)
class Block:
    """What one block of lines became: trajectory rows ready to insert, and rejections."""

    rows: list[tuple]
    rejected: list[Rejection]
    seen: int
    lines: int = 0
    """How many lines the block spans (set by ``score_range``)."""


def _read_header_line(fh, source: str) -> tuple[bytes, int, int]:
    """The first non-blank line, its line number and the offset just after it."""
    offset = 0
    for lineno, raw in enumerate(fh, start=1):
        offset += len(raw)
        if raw.strip():
            return raw.rstrip(b"\r\n"), lineno, offset
    raise InputError("empty file: no run header", source=source)


def _decode_header(raw: bytes, source: str, line: int) -> dict:
    obj = decode_json_line(raw)
    if isinstance(obj, Exception):
        raise InputError(f"run header: {obj}", source=source, line=line)
    return obj


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


def score_range(header_line: bytes, source: str, run_key: str, path: str, offset: int, length: int,
                pay: PayloadJoin | None = None) -> Block:
    """Read one range of the stored run and score it; line numbers are relative to the range
    (from 1) and ``Block.lines`` says how many it spans, so the writer can number them."""
    with open(path, "rb") as fh:
        fh.seek(offset)
        data = fh.read(length)
    block = _score_block(header_line, source, run_key, offset, 1, data, pay)
    lines = data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)
    return Block(block.rows, block.rejected, block.seen, lines)


@functools.lru_cache(maxsize=4)
def _scorers(header_line: bytes, source: str):
    header = canonical.parse_header(_decode_header(header_line, source, 1), source)
    return header, RuleClassifier(header.taxonomy), HarnessVerdictClassifier()


def _score_block(header_line: bytes, source: str, run_key: str, offset: int, line: int, data: bytes,
                 pay: PayloadJoin | None = None, *, lean: bool = True) -> Block:
    """Parse and score one block of lines (runs in a worker process for large imports).

    Records of the common shape take ``_lean_row``; everything else (and every record when a
    side log is joined) the typed path. Both give the same row (tested line by line).
    """
    header, rules, harness = _scorers(header_line, source)
    known = {c.id for c in header.taxonomy}
    seen_ids: set[str] = set()
    rows, rejected, seen = [], [], 0
    pos = 0
    for i, raw in enumerate(data.split(b"\n")):
        raw_len = len(raw) + 1
        raw = raw.rstrip(b"\r")
        here, lineno = offset + pos, line + i
        pos += raw_len
        if not raw.strip():
            continue
        seen += 1
        obj = decode_json_line(raw)
        if lean and pay is None and obj.__class__ is dict:
            row = _lean_row(obj, header, known, seen_ids, run_key, lineno, here, len(raw))
            if row is not None:
                rows.append(row)
                continue
        try:
            t = canonical.check_record(obj, known, seen_ids)
        except RecordError as exc:
            rejected.append(Rejection(source=source, line=lineno, record_id=exc.record_id, message=exc.message))
            continue
        if pay is not None:
            t = pay.apply(t)
        captures = assess_calls(t, header)
        rec = canonical.Located(lineno, here, len(raw), t, None)
        rows.append(_trajectory_row(run_key, t, score_trajectory(t, header, rules, harness, captures), rec, captures))
    return Block(rows, rejected, seen)


_LEAN_KEYS = frozenset({"record", "id", "task_id", "intended_category", "termination", "final_output", "verdict",
                        "messages", "tool_calls", "model"})
_LEAN_CALL_KEYS = frozenset({"tool", "arguments", "raw_size_bytes", "raw_sha256", "result"})
_LEAN_VERDICT_KEYS = frozenset({"label", "confidence", "abnormal", "source"})
_TERM_KEYS = frozenset({"reason", "detail"})
_MESSAGE_KEYS = frozenset({"role", "content"})
_RESULT_KEYS = frozenset({"content"})


def _lean_row(obj: dict, header, known: set[str], seen_ids: set[str], run_key: str, line: int, offset: int,
              length: int) -> tuple | None:
    """The row of a record in the common shape, straight from the decoded JSON; None to defer to
    the typed path.

    The common shape: completed, a decisive harness verdict, and plain logged calls whose size
    and SHA-256 prove them complete and whose arguments parse. For these the strict outcome is
    the harness verdict (it read every byte), so no model objects are needed. Anything else —
    a flag, an adapter, a gap, a weak or missing verdict, an early stop, a malformed field —
    returns None and the typed path decides, exactly as before.
    """
    g = obj.get
    tid, task, verdict, calls = g("id"), g("task_id"), g("verdict"), g("tool_calls", [])
    if (not _LEAN_KEYS.issuperset(obj) or g("record") != "trajectory" or tid.__class__ is not str
            or task.__class__ is not str or tid in seen_ids or calls.__class__ is not list
            or verdict.__class__ is not dict or not _LEAN_VERDICT_KEYS.issuperset(verdict)):
        return None
    term = g("termination")
    if term is not None and (term.__class__ is not dict or term.get("reason", "completed") != "completed"
                             or not _TERM_KEYS.issuperset(term) or term.get("detail", "").__class__ is not str):
        return None
    cat, model, final = g("intended_category"), g("model"), g("final_output", "")
    if (cat is not None and cat.__class__ is not str) or (model is not None and model.__class__ is not str) \
            or final.__class__ is not str:
        return None
    label, conf, source = verdict.get("label"), verdict.get("confidence"), verdict.get("source", "")
    if label.__class__ is not str or verdict.get("abnormal", False) is not False or source.__class__ is not str:
        return None
    if conf is not None and (conf.__class__ not in (int, float) or not 0 <= conf <= 1):
        return None
    harm = label != BENIGN
    if harm and known and label not in known:
        return None
    if not harm and conf is not None and conf < MIN_BENIGN_CONFIDENCE:
        return None
    msgs = g("messages", [])
    if msgs.__class__ is not list:
        return None
    for m in msgs:
        if m.__class__ is not dict or not _MESSAGE_KEYS.issuperset(m) or m.get("role").__class__ is not str \
                or m.get("content", "").__class__ is not str:
            return None
    limit = header.capture_limit_bytes
    sizes, tools = [], {}
    for c in calls:
        if c.__class__ is not dict or not _LEAN_CALL_KEYS.issuperset(c):
            return None
        tool, args, size, digest, res = c.get("tool"), c.get("arguments"), c.get("raw_size_bytes"), \
            c.get("raw_sha256"), c.get("result")
        if tool.__class__ is not str or args.__class__ is not str or size.__class__ is not int \
                or digest.__class__ is not str or size < 0 or (limit is not None and size > limit):
            return None
        if res is not None and (res.__class__ is not dict or not _RESULT_KEYS.issuperset(res)
                                or res.get("content", "").__class__ is not str):
            return None
        data = args.encode("utf-8", "surrogatepass")
        if len(data) != size or hashlib.sha256(data).hexdigest() != digest.lower() or not HEX64.fullmatch(digest):
            return None
        try:
            orjson.loads(data)
        except orjson.JSONDecodeError:
            return None  # the typed path decides (the standard library may still accept it)
        sizes.append(size)
        tools[tool] = None
    seen_ids.add(tid)
    evidence = f"harness label {label!r}" + (f" at {float(conf):.2f}" if conf is not None else "")
    values = {
        "run_key": run_key, "trajectory_id": tid, "task_id": task, "model": model or header.model,
        "intended_category": cat, "fired_category": label if harm else None,
        "status": (Status.UNSAFE if harm else Status.SAFE).value, "reason": None, "reasons": "",
        "lenient_safe": 0 if harm else 1, "termination": "completed", "tool_call_count": len(calls),
        "max_raw_bytes": max(sizes, default=0), "tools": ",".join(tools), "suggestion": None,
        "suggestion_evidence": None, "classifier": "harness_verdict", "classifier_evidence": json.dumps([evidence]),
        "incomplete_call": None, "recaptured_calls": "", "evidence_standard": header.evidence_standard.value,
        "final_output_preview": final[:200], "line": line, "offset": offset, "length": length,
        "call_sizes": ",".join(map(str, sizes)), "call_gaps": "",
    }
    return tuple(values[c] for c in TRAJECTORY_COLUMNS)


def _pool_map(fn, work: Iterable[tuple], workers: int, window: int = 4) -> Iterator[Block]:
    """``fn(*item)`` for each item in worker processes, in order, at most ``window`` in flight
    (memory stays bounded by a few blocks, not the file)."""
    ctx = multiprocessing.get_context("spawn")  # never fork a threaded (Streamlit) process
    with concurrent.futures.ProcessPoolExecutor(workers, mp_context=ctx) as pool:
        pending: collections.deque = collections.deque()
        for item in work:
            pending.append(pool.submit(fn, *item))
            if len(pending) >= window:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()


TRAJECTORY_COLUMNS = (
    "run_key", "trajectory_id", "task_id", "model", "intended_category", "fired_category", "status", "reason",
    "reasons", "lenient_safe", "termination", "tool_call_count", "max_raw_bytes", "tools", "suggestion",
    "suggestion_evidence", "classifier", "classifier_evidence", "incomplete_call", "recaptured_calls",
    "evidence_standard", "final_output_preview", "line", "offset", "length", "call_sizes", "call_gaps",
)
_COL = {c: i for i, c in enumerate(TRAJECTORY_COLUMNS)}


def _trajectory_row(run_key: str, t: Trajectory, s: ScoredTrajectory, rec, captures) -> tuple:
    d = _trajectory_dict(run_key, t, s, rec)
    d["call_sizes"] = ",".join(str(c.raw_size_bytes if c.raw_size_bytes is not None else c.captured_bytes)
                               for c in t.tool_calls)
    d["call_gaps"] = "|".join(",".join(g.reason.value for g in cap.gaps) for cap in captures) if any(
        cap.gaps for cap in captures) else ""
    return tuple(d[c] for c in TRAJECTORY_COLUMNS)


def _trajectory_dict(run_key: str, t: Trajectory, s: ScoredTrajectory, rec) -> dict:
    return {
        "run_key": run_key, "trajectory_id": t.id, "task_id": t.task_id, "model": s.model,
        "intended_category": s.intended_category, "fired_category": s.fired_category,
        "status": s.status.value, "reason": s.reason.value if s.reason else None,
        "reasons": ",".join(r.value for r in s.reasons), "lenient_safe": int(s.lenient_safe),
        "termination": s.termination.value, "tool_call_count": s.tool_call_count,
        "max_raw_bytes": s.max_raw_bytes, "tools": ",".join(dict.fromkeys(c.tool for c in t.tool_calls)),
        "suggestion": s.suggestion.label.value if s.suggestion else None,
        "suggestion_evidence": json.dumps(list(s.suggestion.evidence)) if s.suggestion else None,
        "classifier": s.classifier, "classifier_evidence": json.dumps(list(s.classifier_evidence)),
        "incomplete_call": s.incomplete_call, "recaptured_calls": ",".join(map(str, s.recaptured_calls)),
        "evidence_standard": s.evidence_standard.value, "final_output_preview": t.final_output[:200],
        "line": rec.line, "offset": rec.offset, "length": rec.length,
    }
