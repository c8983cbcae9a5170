"""The canonical litmus-review run format (JSONL, ``format_version`` 1).

Line 1 is the run header (``"record": "run"``); every other line is one trajectory
(``"record": "trajectory"``). ``docs/run-format.md`` documents every field and
``docs/run-format.schema.json`` is the JSON Schema the tests validate the samples against.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ..errors import FormatVersionError, InputError, ReasonCode
from ..model import (
    Adapter,
    Category,
    EvidenceStandard,
    HarnessVerdict,
    Message,
    Redaction,
    Run,
    RunHeader,
    Termination,
    ToolCall,
    ToolResult,
    Trajectory,
)
from ._common import RecordError, Rejections, check, iter_json_lines, opt, read_bytes, req, sha256_bytes

NAME = "canonical"
FORMAT_TAG = "litmus-review-run"
SUPPORTED_VERSIONS = (1,)


def sniff(head: bytes) -> bool:
    """True when the first line looks like a canonical run header."""
    first = head.split(b"\n", 1)[0]
    return b'"record"' in first and FORMAT_TAG.encode() in first


def parse_header(obj: Any, source: str) -> RunHeader:
    try:
        if req(obj, "record", str) != "run":
            raise RecordError("line 1 must be the run header with \"record\": \"run\"")
        if req(obj, "format", str) != FORMAT_TAG:
            raise RecordError(f"\"format\" must be {FORMAT_TAG!r}")
        version = req(obj, "format_version", int)
        if version not in SUPPORTED_VERSIONS:
            raise FormatVersionError(
                f"format_version {version} is not supported (this release reads {SUPPORTED_VERSIONS})",
                source=source, line=1)
        harness = opt(obj, "harness", dict, {})
        limit = opt(obj, "capture_limit_bytes", int)
        if limit is not None and limit <= 0:
            raise RecordError("capture_limit_bytes must be positive")
        taxonomy = tuple(_category(c, i) for i, c in enumerate(opt(obj, "taxonomy", list, [])))
        ids = [c.id for c in taxonomy]
        if len(ids) != len(set(ids)):
            raise RecordError("taxonomy has duplicate category ids")
        standard = opt(obj, "evidence_standard", str, "proven")
        try:
            standard = EvidenceStandard(standard)
        except ValueError:
            raise RecordError(f"evidence_standard {standard!r} is not one of proven, structural") from None
        return RunHeader(
            run_id=req(obj, "run_id", str),
            model=req(obj, "model", str),
            harness_name=opt(harness, "name", str, ""),
            harness_version=opt(harness, "version", str, ""),
            capture_limit_bytes=limit,
            taxonomy=taxonomy,
            evidence_standard=standard,
            format=NAME,
            source=source,
        )
    except RecordError as exc:
        raise InputError(f"run header: {exc.message}", source=source, line=1) from exc


def _category(obj: Any, i: int) -> Category:
    where = f"taxonomy[{i}]."
    rules = tuple(check(r, str, f"{where}rules[]") for r in opt(obj, "rules", list, [], where))
    for r in rules:
        try:
            re.compile(r)
        except re.error as exc:
            raise RecordError(f"{where}rules: {r!r} is not a valid regular expression ({exc})") from exc
    return Category(
        id=req(obj, "id", str, where),
        name=req(obj, "name", str, where),
        payload_dependent=opt(obj, "payload_dependent", bool, False, where),
        rules=rules,
    )


def _tool_call(obj: Any, i: int) -> ToolCall:
    where = f"tool_calls[{i}]."
    if "index" in obj and obj["index"] != i:
        raise RecordError(f"{where}index is {obj['index']!r} but the call is at position {i}")
    size = opt(obj, "raw_size_bytes", int, None, where)
    if size is not None and size < 0:
        raise RecordError(f"{where}raw_size_bytes is negative")
    digest = opt(obj, "raw_sha256", str, None, where)
    if digest is not None and (len(digest) != 64 or any(ch not in "0123456789abcdefABCDEF" for ch in digest)):
        raise RecordError(f"{where}raw_sha256 is not 64 hex digits")
    channel = opt(obj, "channel", str, "logged", where)
    if channel not in ("logged", "unlogged"):
        raise RecordError(f"{where}channel must be 'logged' or 'unlogged', not {channel!r}")
    fmt = opt(obj, "arguments_format", str, "json", where)
    if fmt not in ("json", "text"):
        raise RecordError(f"{where}arguments_format must be 'json' or 'text', not {fmt!r}")
    adapters = tuple(
        Adapter(name=req(a, "name", str, f"{where}adapters[{j}]."),
                lossless=opt(a, "lossless", bool, None, f"{where}adapters[{j}]."))
        for j, a in enumerate(opt(obj, "adapters", list, [], where))
    )
    redactions = tuple(
        Redaction(marker=req(r, "marker", str, f"{where}redactions[{j}]."),
                  reason=opt(r, "reason", str, "", f"{where}redactions[{j}]."))
        for j, r in enumerate(opt(obj, "redactions", list, [], where))
    )
    result_obj = opt(obj, "result", dict, None, where)
    result = None
    if result_obj is not None:
        rw = f"{where}result."
        result = ToolResult(
            content=opt(result_obj, "content", str, "", rw),
            raw_size_bytes=opt(result_obj, "raw_size_bytes", int, None, rw),
            truncated=opt(result_obj, "truncated", bool, False, rw),
            error=opt(result_obj, "error", str, None, rw),
        )
    signals = []
    for s in opt(obj, "signals", list, [], where):
        try:
            signals.append(ReasonCode(check(s, str, f"{where}signals[]")))
        except ValueError:
            raise RecordError(f"{where}signals: {s!r} is not a known reason code") from None
    return ToolCall(
        index=i,
        tool=req(obj, "tool", str, where),
        arguments=req(obj, "arguments", str, where),
        arguments_format=fmt,
        raw_size_bytes=size,
        raw_sha256=digest.lower() if digest else None,
        raw_text=opt(obj, "raw_text", str, None, where),
        raw_text_source="log" if obj.get("raw_text") is not None else None,
        truncated=opt(obj, "truncated", bool, False, where),
        adapters=adapters,
        channel=channel,
        redactions=redactions,
        parse_error=opt(obj, "parse_error", str, None, where),
        executed=opt(obj, "executed", bool, True, where),
        result=result,
        signals=tuple(signals),
    )


def parse_trajectory(obj: Any) -> Trajectory:
    """One trajectory record; raises RecordError naming the field that is wrong."""
    if not isinstance(obj, dict):
        raise RecordError(f"record is {type(obj).__name__}, expected an object")
    record_id = obj.get("id") if isinstance(obj.get("id"), str) else None
    try:
        if req(obj, "record", str) != "trajectory":
            raise RecordError(f"\"record\" is {obj['record']!r}, expected 'trajectory'")
        term = opt(obj, "termination", dict, {})
        reason = opt(term, "reason", str, "completed", "termination.")
        try:
            termination = Termination(reason)
        except ValueError:
            raise RecordError(
                f"termination.reason {reason!r} is not one of "
                + ", ".join(t.value for t in Termination)) from None
        verdict_obj = opt(obj, "verdict", dict)
        verdict = None
        if verdict_obj is not None:
            conf = opt(verdict_obj, "confidence", (int, float), None, "verdict.")
            if conf is not None and not 0 <= conf <= 1:
                raise RecordError("verdict.confidence must be within [0, 1]")
            verdict = HarnessVerdict(
                label=opt(verdict_obj, "label", str, None, "verdict."),
                confidence=float(conf) if conf is not None else None,
                abnormal=opt(verdict_obj, "abnormal", bool, False, "verdict."),
                source=opt(verdict_obj, "source", str, "", "verdict."),
            )
        messages = tuple(
            Message(role=req(m, "role", str, f"messages[{j}]."), content=opt(m, "content", str, "", f"messages[{j}]."))
            for j, m in enumerate(opt(obj, "messages", list, []))
        )
        calls = tuple(_tool_call(c, i) for i, c in enumerate(opt(obj, "tool_calls", list, [])))
        return Trajectory(
            id=req(obj, "id", str),
            task_id=req(obj, "task_id", str),
            intended_category=opt(obj, "intended_category", str),
            termination=termination,
            termination_detail=opt(term, "detail", str, "", "termination."),
            final_output=opt(obj, "final_output", str, ""),
            verdict=verdict,
            messages=messages,
            tool_calls=calls,
            model=opt(obj, "model", str),
        )
    except RecordError as exc:
        exc.record_id = exc.record_id or record_id
        raise


def parse_canonical(data: bytes, source: str) -> Run:
    """Parse a whole canonical run. Malformed trajectory lines are rejected, not dropped."""
    lines = iter_json_lines(data, source)
    first = next(lines, None)
    if first is None:
        raise InputError("empty file: no run header", source=source)
    lineno, header_obj = first
    if isinstance(header_obj, RecordError):
        raise InputError(f"run header: {header_obj.message}", source=source, line=lineno)
    header = parse_header(header_obj, source)
    known = {c.id for c in header.taxonomy}
    rejected = Rejections(source)
    trajectories: list[Trajectory] = []
    seen_ids: set[str] = set()
    seen = 0
    for lineno, obj in lines:
        seen += 1
        if isinstance(obj, RecordError):
            rejected.add(lineno, obj.message)
            continue
        try:
            traj = parse_trajectory(obj)
            if traj.id in seen_ids:
                raise RecordError(f"duplicate trajectory id {traj.id!r}", traj.id)
            if known and traj.verdict and traj.verdict.label not in (None, "benign") and traj.verdict.label not in known:
                raise RecordError(f"verdict.label {traj.verdict.label!r} is not a taxonomy category", traj.id)
        except RecordError as exc:
            rejected.add(lineno, exc.message, exc.record_id)
            continue
        seen_ids.add(traj.id)
        trajectories.append(traj)
    return Run(
        header=header,
        trajectories=tuple(trajectories),
        rejected=tuple(rejected.items),
        records_seen=seen,
        content_sha256=sha256_bytes(data),
    )


def load(path: Path) -> Run:
    return parse_canonical(read_bytes(path), str(path))

parse = parse_canonical
"""The registry entry point (every importer module has ``parse(data, source) -> Run``)."""
