"""Recapture: complete truncated calls from a side log of full payloads.

Harnesses often keep the full payload elsewhere (the tool server's own log). A side log is
JSONL, one object per payload::

    {"trajectory_id": "t-0001", "call_index": 2, "sha256": "<hex>", "size_bytes": 12345,
     "arguments": "<the full argument text>"}

A payload is used only when its text hashes to its own ``sha256``/``size_bytes`` AND those
equal the call's recorded raw digest and size. Anything else is reported and never used.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from .capture import sha256_hex, utf8_len
from .errors import InputError, ReasonCode
from .importers._common import (
    RecordError,
    file_budget,
    iter_json_lines,
    read_bytes,
    req,
    sha256_bytes,
)
from .model import Rejection, Run, Trajectory

SIDE_LOG_SUFFIX = ".payloads.jsonl"


def side_log_beside(path: str) -> str:
    """Where the side log of a run sits when it follows the naming rule, ``RUN.payloads.jsonl``
    beside ``RUN.jsonl`` (a path or a URL): the one rule every door pairs by (``score``,
    ``import``, the app, the Dask engine)."""
    head, sep, name = path.rpartition("/")
    stem = PurePosixPath(name).stem if PurePosixPath(name).suffix else name
    return f"{head}{sep}{stem}{SIDE_LOG_SUFFIX}"


def is_side_log(path: str) -> bool:
    """A file named as a side log (``RUN.payloads.jsonl``): never read as a run of its own."""
    return path.endswith(SIDE_LOG_SUFFIX)


def side_log_found(run: str, exists: Callable[[str], bool]) -> str | None:
    """The side log paired with ``run`` when none is given: ``side_log_beside`` it where
    ``exists`` finds that file (a local check, or a storage's); None otherwise, and always for a
    file that is itself named as a side log. The one pairing every door does."""
    if is_side_log(run):
        return None
    beside = side_log_beside(run)
    return beside if exists(beside) else None


@dataclass(frozen=True, slots=True)
class RecaptureReport:
    """What a side log did to a run."""

    source: str
    applied: int
    """Payloads that proved and completed a call."""
    rejected: tuple[Rejection, ...]
    """Payloads that were malformed, did not match, or named no call (each says why; a settled
    run's report lists the first ``settle.REJECTIONS_LISTED`` of them)."""
    sha256: str = ""
    """SHA-256 of the side log file."""
    rejected_count: int = 0
    """How many payloads were not used, listed in ``rejected`` or not (never fewer than it lists)."""

    def __post_init__(self) -> None:
        if self.rejected_count < len(self.rejected):
            object.__setattr__(self, "rejected_count", len(self.rejected))


class PayloadJoin:
    """A loaded side log, applied trajectory by trajectory (so imports can stream)."""

    def __init__(self, path: str | Path, data: bytes | None = None, *, source: str | None = None) -> None:
        """``data``: the side log's bytes when already read (the Dask engine reads it by URL);
        ``source``: the name to report it by, when ``path`` is a copy (a workspace's)."""
        self.source = source or str(path)
        self.content_sha256 = ""
        self._payloads: dict[tuple[str, int], tuple[int, str, str, int]] = {}
        self._rejected: list[Rejection] = []
        self.applied = 0
        self.outcomes: list[tuple[str, int, int, str | None]] = []
        """Per payload a trajectory took: (trajectory id, call index, payload line, refusal
        message or None when it was applied), in the order taken (``settle`` reads them)."""
        self._load(read_bytes(Path(path)) if data is None else data)

    def _reject(self, line: int | None, message: str, record_id: str | None = None) -> None:
        self._rejected.append(Rejection(source=self.source, line=line, record_id=record_id, message=message))

    def _load(self, data: bytes) -> None:
        self.content_sha256 = sha256_bytes(data)
        if not data.strip():
            raise InputError("empty payload side log", source=self.source)
        # one budget per file, as every importer's: a side log of empty lines is a rejection each,
        # kept for the report, and would otherwise cost memory without bound
        for lineno, obj in iter_json_lines(data, self.source, file_budget(data, self.source)):
            if isinstance(obj, RecordError):
                self._reject(lineno, obj.message)
                continue
            try:
                key = (req(obj, "trajectory_id", str), req(obj, "call_index", int))
                entry = (lineno, req(obj, "arguments", str), req(obj, "sha256", str).lower(),
                         req(obj, "size_bytes", int))
            except RecordError as exc:
                self._reject(lineno, exc.message, obj.get("trajectory_id") if isinstance(obj, dict) else None)
                continue
            if key in self._payloads:
                self._reject(lineno, f"duplicate payload for call {key[1]}", key[0])
                continue
            self._payloads[key] = entry

    def apply(self, traj: Trajectory, *, keep: bool = False) -> Trajectory:
        """The trajectory with every proven payload joined to its call; mismatches reported.
        ``keep``: a replay of a join loaded once for many (nothing is consumed, counted or
        reported: the import did that)."""
        calls = list(traj.tool_calls)
        changed = False
        take = self._payloads.get if keep else self._payloads.pop
        for i, call in enumerate(calls):
            entry = take((traj.id, call.index), None)
            if entry is None:
                continue
            lineno, text, digest, size = entry
            problems = []
            if sha256_hex(text) != digest or utf8_len(text) != size:
                problems.append("the payload does not hash to its own sha256/size_bytes")
            if call.raw_sha256 is None or call.raw_size_bytes is None:
                problems.append("the call recorded no raw digest and size to prove it against")
            elif digest != call.raw_sha256 or size != call.raw_size_bytes:
                problems.append(
                    f"payload {size:,} bytes/{digest[:12]}… ≠ call's raw "
                    f"{call.raw_size_bytes:,} bytes/{call.raw_sha256[:12]}…")
            if problems:
                if keep:
                    continue
                message = f"{ReasonCode.PAYLOAD_MISMATCH.value}: call {call.index}: " + "; ".join(problems)
                self._reject(lineno, message, traj.id)
                self.outcomes.append((traj.id, call.index, lineno, message))
                continue
            calls[i] = dataclasses.replace(call, raw_text=text, raw_text_source=self.source)
            if not keep:
                self.applied += 1
                self.outcomes.append((traj.id, call.index, lineno, None))
            changed = True
        return dataclasses.replace(traj, tool_calls=tuple(calls)) if changed else traj

    def share(self) -> PayloadJoin:
        """A fresh copy of this side log as loaded (every payload, nothing applied) for one block
        of a run: each block applies its own share, ``report_of`` settles them."""
        out = object.__new__(PayloadJoin)
        out.source, out.content_sha256, out.applied = self.source, self.content_sha256, 0
        out._payloads, out._rejected, out.outcomes = dict(self._payloads), [], []
        return out

    def report_of(self, shares: list[list[tuple]], run_id: str, refused_ids: set[str]) -> RecaptureReport:
        """The run's report from its blocks' shares (``outcomes``, in file order), this join
        being the side log as loaded: the first block to take a payload owns it (a later copy of
        the same id found it too, on another block's share); a payload whose trajectory was
        refused (a duplicate id) is refused with it; a payload no trajectory took names no call."""
        taken: dict[tuple[str, int], tuple[int, str | None]] = {}
        for outcomes in shares:
            for tid, idx, lineno, message in outcomes:
                taken.setdefault((tid, idx), (lineno, message))
        rejected = list(self._rejected)
        applied = 0
        for (tid, idx), (lineno, message) in taken.items():
            if tid in refused_ids:
                message = f"trajectory {tid!r} was refused (a duplicate id): its payload for call {idx} is not used"
            if message is None:
                applied += 1
            else:
                rejected.append(Rejection(source=self.source, line=lineno, record_id=tid, message=message))
        for (tid, idx), (lineno, *_rest) in self._payloads.items():
            if (tid, idx) not in taken:
                rejected.append(Rejection(source=self.source, line=lineno, record_id=tid,
                                          message=f"no call {idx} in trajectory {tid!r} of run {run_id!r}"))
        return RecaptureReport(source=self.source, applied=applied,
                               rejected=tuple(sorted(rejected, key=lambda r: r.line or 0)),
                               sha256=self.content_sha256)

    def report(self, run_id: str) -> RecaptureReport:
        """Finish: payloads that named no call are rejected too."""
        for (tid, idx), (lineno, *_rest) in self._payloads.items():
            self._reject(lineno, f"no call {idx} in trajectory {tid!r} of run {run_id!r}", tid)
        self._payloads.clear()
        return RecaptureReport(source=self.source, applied=self.applied,
                               rejected=tuple(sorted(self._rejected, key=lambda r: r.line or 0)),
                               sha256=self.content_sha256)


def recapture(run: Run, path: str | Path) -> tuple[Run, RecaptureReport]:
    """Return the run with proven payloads joined to their calls, and the report."""
    join = PayloadJoin(path)
    trajectories = tuple(join.apply(t) for t in run.trajectories)
    return dataclasses.replace(run, trajectories=trajectories), join.report(run.header.run_id)
