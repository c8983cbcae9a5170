"""The canonical litmus-review run format (JSONL, ``format_version`` 1).

Line 1 is the run header (``"record": "run"``); every other line is one trajectory
(``"record": "trajectory"``). ``docs/run-format.md`` documents every field and
``docs/run-format.schema.json`` is the JSON Schema the tests validate the samples against.
"""

from __future__ import annotations

import io
import re
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, BinaryIO

import msgspec

from ..errors import BLOCKING_REASONS, FormatVersionError, InputError, ReasonCode
from ..model import (
    BENIGN,
    Adapter,
    Category,
    EvidenceStandard,
    HarnessVerdict,
    JudgeAttestation,
    Message,
    Redaction,
    Rejection,
    Run,
    RunHeader,
    Termination,
    ToolCall,
    ToolResult,
    Trajectory,
    harness_category,
)
from ..taxonomy_rules import RuleError, check_rule
from ._common import (
    DuplicateRecordError,
    RecordError,
    check,
    decode_json_line,
    duplicate_message,
    iter_lines,
    opt,
    refuse_duplicates,
    req,
    sha256_bytes,
)
from .base import DEFAULT_OPTIONS, ParseOptions, no_continuations

NAME = "canonical"
#: Keys this format writes (the closest-format hint of an unrecognised file).
HINTS = (b'"record"', b'"format_version"', b'"raw_sha256"', b'"raw_size_bytes"', b'"capture_limit_bytes"')
#: What the format needs to recognise a file (said when it refuses one).
NEEDS = "line 1 a run header {\"record\": \"run\", \"format\": \"litmus-review-run\"}"
continuations = no_continuations
FORMAT_TAG = "litmus-review-run"
SUPPORTED_VERSIONS = (1,)
HEX64 = re.compile(r"[0-9a-fA-F]{64}")
"""A SHA-256 in hex (the check of ``raw_sha256``; the workspace checks stored file names with it)."""
CLASSIFIERS_OF_RECORD = ("harness_verdict", "taxonomy_rules")
"""What ``classifier_of_record`` in a header may say produced the harness's verdicts."""
MAX_STORED_INT = 2**63 - 1
"""SQLite's largest integer: a size beyond it cannot be stored, so the record is refused."""
_SURROGATE = re.compile("[\ud800-\udfff]")


def _refuse_lone_surrogates(t: Trajectory) -> None:
    """RecordError for a lone surrogate (half of a UTF-16 pair, which JSON's ``\\ud800`` can
    spell) in a name the workspace stores or shows as a label: ids, model, categories, tool
    names, message roles. It is not text: SQLite cannot store it and nothing can print it.
    (Bulk text — arguments, results, outputs — keeps it; replay shows it as ⟨U+D800⟩.)"""
    names = [("id", t.id), ("task_id", t.task_id), ("model", t.model), ("intended_category", t.intended_category),
             ("category", t.category), ("verdict.label", t.verdict.label if t.verdict else None)]
    names += [(f"tool_calls[{c.index}].tool", c.tool) for c in t.tool_calls]
    names += [(f"messages[{i}].role", m.role) for i, m in enumerate(t.messages)]
    for field, value in names:
        m = _SURROGATE.search(value) if value else None
        if m:
            raise RecordError(f"field {field!r} holds a lone surrogate (U+{ord(m.group()):04X}) at character "
                              f"{m.start()}: it is not text, and cannot be stored or shown",
                              t.id.encode("utf-8", "backslashreplace").decode("utf-8"))


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
        if limit is not None and not 0 < limit <= MAX_STORED_INT:
            raise RecordError("capture_limit_bytes must be positive and at most 2^63 - 1")
        taxonomy = tuple(_category(c, i) for i, c in enumerate(opt(obj, "taxonomy", list, [])))
        ids = [c.id for c in taxonomy]
        if len(ids) != len(set(ids)):
            raise RecordError("taxonomy has duplicate category ids")
        standard = opt(obj, "evidence_standard", str, "proven")
        try:
            standard = EvidenceStandard(standard)
        except ValueError:
            raise RecordError(f"evidence_standard {standard!r} is not one of proven, structural") from None
        classifier = opt(obj, "classifier_of_record", str, "harness_verdict")
        if classifier not in CLASSIFIERS_OF_RECORD:
            raise RecordError(f"classifier_of_record {classifier!r} is not one of "
                              + ", ".join(CLASSIFIERS_OF_RECORD))
        if classifier == "taxonomy_rules" and not any(c.rules for c in taxonomy):
            raise RecordError("classifier_of_record is 'taxonomy_rules' but the taxonomy has no rules")
        reported = opt(obj, "reported_safe_rate", dict, None)
        reported_value = None
        if reported is not None:
            reported_value = req(reported, "value", (int, float), "reported_safe_rate.")
            if not 0 <= reported_value <= 1:
                raise RecordError("reported_safe_rate.value must be within [0, 1]")
        header = RunHeader(
            utility_only=opt(obj, "utility_only", bool, False),
            reported_safe_rate=float(reported_value) if reported_value is not None else None,
            reported_safe_rate_source=opt(reported, "source", str, "", "reported_safe_rate.") if reported else "",
            classifier_of_record=classifier,
            run_id=req(obj, "run_id", str),
            model=req(obj, "model", str),
            task=opt(obj, "task", str, ""),
            variant=opt(obj, "variant", str, ""),
            harness_name=opt(harness, "name", str, ""),
            harness_version=opt(harness, "version", str, ""),
            capture_limit_bytes=limit,
            taxonomy=taxonomy,
            evidence_standard=standard,
            format=NAME,
            source=source,
            run_status=opt(obj, "run_status", str, ""),
            run_status_detail=opt(obj, "run_status_detail", str, ""),
            # ``proof_source`` is not read: no header field can make (or show) a run proven by a
            # proof. Only the importer that read and joined a proof side log sets it, with the
            # bytes' SHA-256 (``RunHeader.proof_read``); copies written before still parse.
        )
        names = [("run_id", header.run_id), ("model", header.model), ("harness.name", header.harness_name),
                 ("harness.version", header.harness_version), ("run_status", header.run_status),
                 ("run_status_detail", header.run_status_detail),
                 ("reported_safe_rate.source", header.reported_safe_rate_source)]
        names += [(f"taxonomy[{k}].{f}", v) for k, c in enumerate(taxonomy)
                  for f, v in (("id", c.id), ("name", c.name))]
        for field, value in names:
            m = _SURROGATE.search(value) if value else None
            if m:
                raise RecordError(f"field {field!r} holds a lone surrogate (U+{ord(m.group()):04X}) at character "
                                  f"{m.start()}: it is not text, and cannot be stored or shown")
        return header
    except RecordError as exc:
        raise InputError(f"run header: {exc.message}", source=source, line=1) from exc


def _category(obj: Any, i: int) -> Category:
    where = f"taxonomy[{i}]."
    rules = tuple(check(r, str, f"{where}rules[]") for r in opt(obj, "rules", list, [], where))
    for j, r in enumerate(rules):
        try:
            check_rule(r)
        except RuleError as exc:
            raise RecordError(f"{where}rules[{j}]: {r!r} {exc}") from None
    return Category(
        id=req(obj, "id", str, where),
        name=req(obj, "name", str, where),
        payload_dependent=opt(obj, "payload_dependent", bool, False, where),
        rules=rules,
    )


# --- the common record shape ------------------------------------------------------------------
#
# Most records of a real run have one shape: a completed trajectory with a verdict label, whose
# calls carry only a tool, arguments, a recorded size and SHA-256 and a plain result. It is
# declared once, as msgspec types (field names and types as docs/run-format.schema.json gives
# them; a test holds the two together). The import's lean path decodes records with these
# types in C and the typed parser below takes its fast path on calls of this shape; anything
# else falls to the field-by-field parser, which is the definition of what a record may be.


class CommonVerdict(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    label: str
    confidence: Annotated[float, msgspec.Meta(ge=0, le=1)] | None = None
    abnormal: bool = False
    source: str = ""


class CommonTermination(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    reason: str = "completed"
    detail: str = ""


class CommonMessage(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    role: str
    content: str = ""


class CommonResult(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    content: str = ""


class CommonCall(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    tool: str
    arguments: str
    raw_size_bytes: Annotated[int, msgspec.Meta(ge=0)]
    raw_sha256: str
    result: CommonResult | None = None
    message_index: Annotated[int, msgspec.Meta(ge=0)] | None = None  # its upper bound is the caller's to check


class CommonRecord(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    """The common record shape, as types: msgspec checks it in C while decoding. Any other
    key, a missing size or digest, a wrong type, a JSON value json would read differently
    (NaN, a huge number, a lone surrogate) fails the decode: such a record is not of the
    common shape, and the typed parser decides."""

    record: str
    id: str
    task_id: str
    verdict: CommonVerdict
    intended_category: str | None = None
    category: str | None = None
    termination: CommonTermination | None = None
    final_output: str = ""
    messages: list[CommonMessage] = []
    tool_calls: list[CommonCall] = []
    model: str | None = None


_FAST_KEYS = frozenset(CommonCall.__struct_fields__) | {"index", "truncated"}
"""The keys of a call the fast path parses: the common call's, and the two it also takes as
given (``index``, which must be the call's position, and ``truncated``)."""
_FAST_RESULT_KEYS = frozenset(CommonResult.__struct_fields__)


def _tool_call(obj: Any, i: int) -> ToolCall:
    """One call. The common shape (no adapters, redactions, signals…) takes a fast path with
    the same checks; anything else goes through the general, field-by-field path."""
    if obj.__class__ is dict and obj.keys() <= _FAST_KEYS:
        fast = _fast_call(obj, i)
        if fast is not None:
            return fast
    return _general_call(obj, i)


def _fast_call(obj: dict, i: int) -> ToolCall | None:
    """A call of the common shape, or None for the general path to parse (and to name what is
    wrong). Accepts exactly what ``_general_call`` accepts for these keys, and builds the same."""
    g = obj.get
    tool, args, size, digest, trunc, res, at = (g("tool"), g("arguments"), g("raw_size_bytes"), g("raw_sha256"),
                                                g("truncated", False), g("result"), g("message_index"))
    if tool.__class__ is not str or args.__class__ is not str or trunc.__class__ is not bool:
        return None
    if g("index", i) != i or (size is not None and (size.__class__ is not int or not 0 <= size <= MAX_STORED_INT)):
        return None
    if digest is not None and (digest.__class__ is not str or not HEX64.fullmatch(digest)):
        return None
    if at is not None and at.__class__ is not int:
        return None
    result = None
    if res is not None:
        if (res.__class__ is not dict or not res.keys() <= _FAST_RESULT_KEYS
                or res.get("content", "").__class__ is not str):
            return None
        result = ToolResult(content=res.get("content", ""))
    return ToolCall(index=i, tool=tool, arguments=args, raw_size_bytes=size,
                    raw_sha256=digest.lower() if digest else None, truncated=trunc, result=result,
                    message_index=at)


def _general_call(obj: Any, i: int) -> ToolCall:
    where = f"tool_calls[{i}]."
    if not isinstance(obj, dict):
        raise RecordError(f"tool_calls[{i}] is {type(obj).__name__}, expected an object")
    if "index" in obj and obj["index"] != i:
        raise RecordError(f"{where}index is {obj['index']!r} but the call is at position {i}")
    size = opt(obj, "raw_size_bytes", int, None, where)
    if size is not None and size < 0:
        raise RecordError(f"{where}raw_size_bytes is negative")
    if size is not None and size > MAX_STORED_INT:
        raise RecordError(f"{where}raw_size_bytes is out of range (larger than 2^63 - 1)")
    digest = opt(obj, "raw_sha256", str, None, where)
    if digest is not None and not HEX64.fullmatch(digest):
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
        s = check(s, str, f"{where}signals[]")  # a RecordError of its own, outside the try
        try:
            signals.append(ReasonCode(s))
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
        message_index=opt(obj, "message_index", int, None, where),
        result=result,
        signals=tuple(signals),
    )


def _extra(obj: dict) -> tuple[tuple[str, str], ...]:
    """``extra``: format-specific facts an importer kept, as [key, value] string pairs."""
    pairs = opt(obj, "extra", list, [])
    out = []
    for j, pair in enumerate(pairs):
        if not (isinstance(pair, list) and len(pair) == 2 and all(isinstance(x, str) for x in pair)):
            raise RecordError(f"extra[{j}] must be a [key, value] pair of strings")
        out.append((pair[0], pair[1]))
    return tuple(out)


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
                harness_counts=opt(verdict_obj, "harness_counts", bool, False, "verdict."),
                source=opt(verdict_obj, "source", str, "", "verdict."),
                attestation=_attestation(opt(verdict_obj, "attestation", dict, None, "verdict.")),
                **_refused(opt(verdict_obj, "refused", dict, None, "verdict.")),
            )
        messages = tuple(
            Message(role=req(m, "role", str, f"messages[{j}]."), content=opt(m, "content", str, "", f"messages[{j}]."))
            for j, m in enumerate(opt(obj, "messages", list, []))
        )
        calls = tuple(_tool_call(c, i) for i, c in enumerate(opt(obj, "tool_calls", list, [])))
        unseen = verdict.attestation.unseen_calls if verdict is not None and verdict.attestation else ()
        if any(not 0 <= i < len(calls) for i in unseen):
            raise RecordError(f"verdict.attestation.unseen_calls {list(unseen)} names a call the record does not have "
                              f"({len(calls)} calls)")
        for c in calls:
            if c.message_index is not None and not 0 <= c.message_index < len(messages):
                raise RecordError(f"tool_calls[{c.index}].message_index is {c.message_index} but the record has "
                                  f"{len(messages)} messages")
        return Trajectory(
            id=req(obj, "id", str),
            task_id=req(obj, "task_id", str),
            intended_category=opt(obj, "intended_category", str),
            category=harness_category(opt(obj, "category", str)),
            termination=termination,
            termination_detail=opt(term, "detail", str, "", "termination."),
            ending_recorded=opt(term, "recorded", bool, False, "termination."),
            final_output=opt(obj, "final_output", str, ""),
            verdict=verdict,
            messages=messages,
            tool_calls=calls,
            model=opt(obj, "model", str),
            extra=_extra(obj),
        )
    except RecordError as exc:
        exc.record_id = exc.record_id or record_id
        raise


@dataclass(frozen=True, slots=True)
class Located:
    """One trajectory line of a canonical file: where it is, and what it parsed to."""

    line: int
    offset: int
    """Byte offset of the line in the file (replay reads the line back from here)."""
    length: int
    trajectory: Trajectory | None
    rejection: Rejection | None
    duplicate: bool = False
    """The rejection is a second record with an id already seen (the first must go too)."""


def stream_canonical(fh: BinaryIO, source: str) -> tuple[RunHeader, Iterator[Located]]:
    """Read the header, then yield trajectory lines one at a time (memory: one line).

    Malformed lines come out as rejections with their line number, never dropped.
    """
    lines = (item for item in iter_lines(fh) if item[2].strip())
    first = next(lines, None)
    if first is None:
        raise InputError("empty file: no run header", source=source)
    lineno, _offset, raw = first
    header_obj = decode_json_line(raw)
    if isinstance(header_obj, RecordError):
        raise InputError(f"run header: {header_obj.message}", source=source, line=lineno)
    header = parse_header(header_obj, source)
    return header, records_of(lines, header, source)


def unknown_label(label: str | None, known: Collection[str]) -> bool:
    """A verdict label naming no category of the run's taxonomy (when it has one): the record
    is refused."""
    return bool(known) and label is not None and label != BENIGN and label not in known


def check_record(obj: Any, known: set[str], seen_ids: set[str] | None) -> Trajectory:
    """One decoded trajectory line as a Trajectory, with the run-level checks (unique id, a
    known verdict category); RecordError otherwise. Adds the id to ``seen_ids``; None leaves
    repeated ids to the caller (``settle.settle`` refuses them for the block scorer)."""
    if isinstance(obj, RecordError):
        raise obj
    traj = parse_trajectory(obj)
    _refuse_lone_surrogates(traj)
    if seen_ids is not None and traj.id in seen_ids:
        raise DuplicateRecordError(duplicate_message(traj.id, None), traj.id)
    label = traj.verdict.label if traj.verdict else None
    if unknown_label(label, known):
        raise RecordError(f"verdict.label {label!r} is not a taxonomy category", traj.id)
    if seen_ids is not None:
        seen_ids.add(traj.id)
    return traj


def records_of(lines, header: RunHeader, source: str) -> Iterator[Located]:
    """Parse (line number, offset, bytes) lines into located trajectories or rejections."""
    known = {c.id for c in header.taxonomy}
    seen_ids: set[str] = set()
    for lineno, offset, raw in lines:
        try:
            traj = check_record(decode_json_line(raw), known, seen_ids)
        except RecordError as exc:
            yield Located(lineno, offset, len(raw), None,
                          Rejection(source=source, line=lineno, record_id=exc.record_id, message=exc.message),
                          isinstance(exc, DuplicateRecordError))
            continue
        yield Located(lineno, offset, len(raw), traj, None)


def parse_canonical(data: bytes, source: str) -> Run:
    """Parse a whole canonical run held in memory."""
    header, records = stream_canonical(io.BytesIO(data), source)
    kept: list[tuple[int | None, Trajectory]] = []
    rejected: list[Rejection] = []
    duplicates: dict[str, int | None] = {}
    seen = 0
    for rec in records:
        seen += 1
        if rec.trajectory is not None:
            kept.append((rec.line, rec.trajectory))
        else:
            assert rec.rejection is not None, "a record is a trajectory or a rejection"
            rejected.append(rec.rejection)
            if rec.duplicate and rec.rejection.record_id is not None:
                duplicates.setdefault(rec.rejection.record_id, rec.line)
    kept = refuse_duplicates(kept, rejected, duplicates, source)
    return Run(header=header, trajectories=tuple(t for _line, t in kept), rejected=tuple(rejected),
               records_seen=seen, content_sha256=sha256_bytes(data))


def read_trajectory_at(path: str | Path, offset: int, length: int) -> Trajectory:
    """Read one trajectory back from its byte range (used for replay of stored runs)."""
    with open(path, "rb") as fh:
        fh.seek(offset)
        raw = fh.read(length)
    obj = decode_json_line(raw)
    if isinstance(obj, RecordError):
        raise InputError(f"the stored run file changed since import: its byte range no longer holds a record "
                         f"({obj.message}); re-import the run", source=str(path))
    try:
        return parse_trajectory(obj)
    except RecordError as exc:
        raise InputError(exc.message, source=str(path), record_id=exc.record_id) from exc


def parse(data: bytes, source: str, options: ParseOptions = DEFAULT_OPTIONS) -> Run:
    """The registry entry point (``base.Importer.parse``); a canonical run has no options."""
    return parse_canonical(data, source)


# --- writing: any parsed Run back to the canonical format ---------------------------------


def _drop_defaults(d: dict, defaults: dict) -> dict:
    return {k: v for k, v in d.items() if k not in defaults or defaults[k] != v}


def dump_header(header: RunHeader) -> dict:
    """The header line of ``header`` (parse_header(dump_header(h)) == h but for ``source`` and the
    proof the importer read, ``proof_source`` and ``proof_sha256``, which no header line carries:
    the doors that converted the run set them again from the importer's header)."""
    return {
        "record": "run", "format": FORMAT_TAG, "format_version": SUPPORTED_VERSIONS[-1],
        "run_id": header.run_id, "model": header.model,
        "harness": {"name": header.harness_name, "version": header.harness_version},
        "capture_limit_bytes": header.capture_limit_bytes,
        "evidence_standard": header.evidence_standard.value,
        "classifier_of_record": header.classifier_of_record,
        "reported_safe_rate": None if header.reported_safe_rate is None else {
            "value": header.reported_safe_rate, "source": header.reported_safe_rate_source},
        "taxonomy": [{"id": c.id, "name": c.name, "payload_dependent": c.payload_dependent,
                      "rules": list(c.rules)} for c in header.taxonomy],
    } | ({"run_status": header.run_status, "run_status_detail": header.run_status_detail}
         if header.run_status else {}) | (
        {k: v for k, v in (("task", header.task), ("variant", header.variant)) if v})


def _attestation(obj: dict | None) -> JudgeAttestation | None:
    """A verdict's judge attestation (``verdict.attestation``), when the record has one."""
    if obj is None:
        return None
    where = "verdict.attestation."
    digests = opt(obj, "input_sha256", list, [], where)
    unseen = opt(obj, "unseen_calls", list, [], where)
    if not all(isinstance(d, str) for d in digests):
        raise RecordError(f"{where}input_sha256 must be a list of strings")
    if not all(isinstance(i, int) and not isinstance(i, bool) for i in unseen):
        raise RecordError(f"{where}unseen_calls must be a list of call indexes")
    kind = opt(obj, "kind", str, "judged", where)
    if kind not in ATTESTATION_KINDS:
        raise RecordError(f"{where}kind {kind!r} is not one of {', '.join(ATTESTATION_KINDS)}")
    # What a file says of its judge can only take SAFE away: its ``state_checking`` and stamp
    # count only where litmus-review wrote them (a run it converted; ``score._audited_here``).
    return JudgeAttestation(scorer=req(obj, "scorer", str, where), input_sha256=tuple(digests),
                            unseen_calls=tuple(unseen), source=opt(obj, "source", str, "", where), kind=kind,
                            detail=opt(obj, "detail", str, "", where),
                            state_checking=opt(obj, "state_checking", bool, False, where))


ATTESTATION_KINDS = ("judged", "programmatic", "unresolved", "refused", "absent")


def _refused(obj: dict | None) -> dict[str, Any]:
    """A verdict's refusal by the harness's own guard (``verdict.refused``: ``{reason, detail}``)
    as ``HarnessVerdict`` fields; the reason must be a blocking reason code."""
    if obj is None:
        return {}
    where = "verdict.refused."
    reason = req(obj, "reason", str, where)
    try:
        code = ReasonCode(reason)
    except ValueError:
        code = None
    if code is None or code not in BLOCKING_REASONS:
        raise RecordError(f"{where}reason {reason!r} is not a blocking reason code")
    return {"refused_reason": code, "refused_detail": opt(obj, "detail", str, "", where)}


def _dump_attestation(a: JudgeAttestation) -> dict:
    return {"scorer": a.scorer, "input_sha256": list(a.input_sha256), "unseen_calls": list(a.unseen_calls),
            "source": a.source} | ({"kind": a.kind} if a.kind != "judged" else {}) \
        | ({"detail": a.detail} if a.detail else {}) | ({"state_checking": True} if a.state_checking else {})


def dump_trajectory(t: Trajectory) -> dict:
    """One trajectory line; the inverse of ``parse_trajectory``."""
    calls = []
    for c in t.tool_calls:
        call = {
            "tool": c.tool, "arguments": c.arguments, "arguments_format": c.arguments_format,
            "raw_size_bytes": c.raw_size_bytes, "raw_sha256": c.raw_sha256,
            "raw_text": c.raw_text if c.raw_text_source in (None, "log") else None,
            "truncated": c.truncated,
            "adapters": [{"name": a.name, "lossless": a.lossless} for a in c.adapters],
            "channel": c.channel,
            "redactions": [{"marker": r.marker, "reason": r.reason} for r in c.redactions],
            "parse_error": c.parse_error, "executed": c.executed,
            "signals": [s.value for s in c.signals], "message_index": c.message_index,
            "result": None if c.result is None else {
                "content": c.result.content, "raw_size_bytes": c.result.raw_size_bytes,
                "truncated": c.result.truncated, "error": c.result.error},
        }
        calls.append(_drop_defaults(call, {
            "arguments_format": "json", "raw_size_bytes": None, "raw_sha256": None, "raw_text": None,
            "truncated": False, "adapters": [], "channel": "logged", "redactions": [],
            "parse_error": None, "executed": True, "signals": [], "result": None, "message_index": None}))
    out = {
        "record": "trajectory", "id": t.id, "task_id": t.task_id, "intended_category": t.intended_category,
        "category": t.category, "model": t.model,
        "termination": {"reason": t.termination.value, "detail": t.termination_detail}
        | ({"recorded": True} if t.ending_recorded else {}),
        "final_output": t.final_output,
        "verdict": None if t.verdict is None else {
            "label": t.verdict.label, "confidence": t.verdict.confidence,
            "abnormal": t.verdict.abnormal, "source": t.verdict.source}
        | ({"harness_counts": True} if t.verdict.harness_counts else {})
        | ({"attestation": _dump_attestation(t.verdict.attestation)} if t.verdict.attestation else {})
        | ({"refused": {"reason": t.verdict.refused_reason.value, "detail": t.verdict.refused_detail}}
           if t.verdict.refused_reason is not None else {}),
        "messages": [{"role": m.role, "content": m.content} for m in t.messages],
        "tool_calls": calls,
        "extra": [list(pair) for pair in t.extra],
    }
    return _drop_defaults(out, {"intended_category": None, "category": None, "model": None, "extra": []})
