"""Parsing and scoring blocks of a canonical run into trajectory rows, in worker processes.

Kept apart from ``store`` so a spawned worker imports only what it needs (``sqlite_utils``
pulls in pandas: 0.7 s per worker start).
"""

from __future__ import annotations

import collections
import concurrent.futures
import functools
import json
import multiprocessing
import os
from dataclasses import dataclass
from typing import Iterable, Iterator

from .errors import InputError
from .importers import canonical
from .importers._common import decode_json_line
from .model import Rejection, ScoredTrajectory, Trajectory
from .recapture import PayloadJoin
from .score import (
    HarnessVerdictClassifier,
    RuleClassifier,
    assess_calls,
    score_trajectory,
)

PARALLEL_MIN_BYTES = 32 * 1024 * 1024
BLOCK_BYTES = 4 * 1024 * 1024
IMPORT_WORKERS = min(2, os.cpu_count() or 1)


@dataclass(frozen=True, slots=True)
class Block:
    """What one block of lines became: trajectory rows ready to insert, and rejections."""

    rows: list[tuple]
    rejected: list[Rejection]
    seen: int


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


def _line_blocks(fh, offset: int, line: int) -> Iterator[tuple[int, int, bytes]]:
    """(byte offset, first line number, bytes) blocks of whole lines, about BLOCK_BYTES each."""
    carry = b""
    while True:
        chunk = fh.read(BLOCK_BYTES)
        if not chunk:
            if carry:
                yield offset, line, carry
            return
        data = carry + chunk
        cut = data.rfind(b"\n") + 1
        if cut == 0:
            carry = data
            continue
        yield offset, line, data[:cut]
        offset += cut
        line += data.count(b"\n", 0, cut)
        carry = data[cut:]


@functools.lru_cache(maxsize=4)
def _scorers(header_line: bytes, source: str):
    header = canonical.parse_header(_decode_header(header_line, source, 1), source)
    return header, RuleClassifier(header.taxonomy), HarnessVerdictClassifier()


def _score_block(header_line: bytes, source: str, run_key: str, offset: int, line: int, data: bytes,
                 pay: PayloadJoin | None = None) -> Block:
    """Parse and score one block of lines (runs in a worker process for large imports)."""
    header, rules, harness = _scorers(header_line, source)
    lines = []
    pos = 0
    for i, raw in enumerate(data.split(b"\n")):
        stripped = raw.rstrip(b"\r")
        if stripped.strip():
            lines.append((line + i, offset + pos, stripped))
        pos += len(raw) + 1
    rows, rejected, seen = [], [], 0
    for rec in canonical.records_of(lines, header, source):
        seen += 1
        if rec.trajectory is None:
            rejected.append(rec.rejection)
            continue
        t = rec.trajectory if pay is None else pay.apply(rec.trajectory)
        captures = assess_calls(t, header)
        rows.append(_trajectory_row(run_key, t, score_trajectory(t, header, rules, harness, captures), rec, captures))
    return Block(rows, rejected, seen)


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
