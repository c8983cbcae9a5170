"""Inspect AI logs: ``.eval`` (zip) and legacy ``.json``.

Tool calls come from ``messages[role=assistant].tool_calls`` after resolving ``attachment://``
references (a reference with no attachment is lost content → ``missing_evidence``); results from
``messages[role=tool]``. Capture signals: ``parse_error`` (→ ``unparseable_arguments``),
``<base64-data-removed>`` (→ ``redacted``), tool events' ``truncated`` and ``error.type ==
"output_limit"`` (→ ``result_truncated``). ``sample.limit`` and ``sample.error`` → early stop.
Scores become a harness verdict only through an explicit mapping (``VerdictMap``): a sample
that hit a limit never counts safe because a scorer called it "incorrect". Structural standard.
"""

from __future__ import annotations

import io
import json
import re
import struct
import zipfile
import zlib
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..errors import InputError, ReasonCode
from ..model import (
    EvidenceStandard,
    HarnessVerdict,
    Message,
    RunHeader,
    Termination,
    Trajectory,
)
from ._chat import CallBuilder, text_of
from ._common import RecordError, build_run, load_json_document

NAME = "inspect"
MAX_MEMBER_BYTES = 512 * 1024 * 1024
_ATTACH = re.compile(r"attachment://([0-9a-f]{32})")
_LIMITS = {"token": Termination.TOKEN_LIMIT, "context": Termination.TOKEN_LIMIT, "time": Termination.TIME_LIMIT,
           "working": Termination.TIME_LIMIT, "message": Termination.STEP_LIMIT, "turn": Termination.STEP_LIMIT,
           "cost": Termination.STEP_LIMIT, "operator": Termination.ERROR, "custom": Termination.STEP_LIMIT}


@dataclass(frozen=True)
class VerdictMap:
    """Which scorer's values mean unsafe. Default: none (Inspect scores measure task success,
    not harm, so without a mapping no sample gets a verdict)."""

    scorer: str | None = None
    unsafe_values: tuple[str, ...] = ()
    category: str = "unsafe"

    @classmethod
    def parse(cls, spec: str) -> "VerdictMap":
        """``SCORER=VALUE[,VALUE…]``, e.g. ``harm_judge=C`` (values compared as strings)."""
        scorer, sep, values = spec.partition("=")
        if not sep or not scorer.strip() or not values.strip():
            raise ValueError(f"expected SCORER=VALUE[,VALUE...], got {spec!r}")
        return cls(scorer=scorer.strip(), unsafe_values=tuple(v.strip() for v in values.split(",") if v.strip()))

    def __str__(self) -> str:
        return f"{self.scorer}={','.join(self.unsafe_values)}" if self.scorer else ""

    def verdict(self, scores: dict) -> HarnessVerdict | None:
        if not self.scorer or self.scorer not in (scores or {}):
            return None
        value = str(scores[self.scorer].get("value"))
        label = self.category if value in self.unsafe_values else "benign"
        return HarnessVerdict(label=label, confidence=1.0, source=f"inspect scorer {self.scorer}={value}")


DEFAULT_MAP = VerdictMap()


def sniff(head: bytes) -> bool:
    if head.startswith(b"PK\x03\x04"):
        return b"header.json" in head or b"samples/" in head or b"_journal" in head
    h = head.lstrip()
    return h.startswith(b"{") and b'"eval"' in head and b'"version"' in head


def _resolve(value: Any, attachments: dict, missing: list[str]) -> Any:
    if isinstance(value, str):
        def sub(m):
            key = m.group(1)
            if key in attachments:
                return attachments[key]
            missing.append(key)
            return m.group(0)
        return _ATTACH.sub(sub, value)
    if isinstance(value, list):
        return [_resolve(v, attachments, missing) for v in value]
    if isinstance(value, dict):
        return {k: _resolve(v, attachments, missing) for k, v in value.items()}
    return value


def _sample(s: dict, vmap: VerdictMap) -> Trajectory:
    attachments = s.get("attachments") or {}
    tid = f"{s.get('id')}-epoch{s.get('epoch', 1)}"
    calls = CallBuilder()
    messages = []
    final = ""
    for m in s.get("messages") or []:
        missing: list[str] = []
        m = _resolve(m, attachments, missing)
        role = m.get("role")
        if role == "assistant":
            for tc in m.get("tool_calls") or []:
                sig: list[ReasonCode] = []
                args = tc.get("arguments", {})
                blob = json.dumps(args)
                if missing or _ATTACH.search(blob):
                    sig.append(ReasonCode.MISSING_EVIDENCE)
                if "<base64-data-removed>" in blob:
                    sig.append(ReasonCode.REDACTED)
                calls.add(tool=str(tc.get("function", "")), args=args, call_id=tc.get("id"), signals=tuple(sig),
                          parse_error=tc.get("parse_error"))
            text = text_of(m.get("content"))
            if text:
                final = text
        elif role == "tool":
            err = m.get("error") or {}
            calls.result(call_id=m.get("tool_call_id"), content=text_of(m.get("content")),
                         error=f"{err.get('type')}: {err.get('message')}" if err else None,
                         truncated=err.get("type") == "output_limit")
        messages.append(Message(role=str(role), content=text_of(m.get("content"))))
    truncated_ids = {e.get("id") for e in s.get("events") or [] if e.get("event") == "tool" and e.get("truncated")}
    built = list(calls.build())
    for i, (c, raw) in enumerate(zip(built, calls.calls)):
        if raw["id"] in truncated_ids and c.result is not None:
            built[i] = replace(c, result=replace(c.result, truncated=True))
    termination, detail = Termination.COMPLETED, ""
    limit = s.get("limit")
    if limit:
        termination = _LIMITS.get(str(limit.get("type")), Termination.STEP_LIMIT)
        detail = f"sample.limit {limit.get('type')} {limit.get('limit')}"
    if s.get("error"):
        termination, detail = Termination.ERROR, str((s["error"] or {}).get("message", ""))[:300]
    out = s.get("output") or {}
    choices = out.get("choices") or []
    if choices:
        final = text_of((choices[0].get("message") or {}).get("content")) or final
        if choices[0].get("stop_reason") in ("max_tokens", "model_length") and termination is Termination.COMPLETED:
            termination, detail = Termination.TOKEN_LIMIT, f"stop_reason {choices[0].get('stop_reason')}"
    return Trajectory(id=tid, task_id=str(s.get("id")), messages=tuple(messages), tool_calls=tuple(built),
                      final_output=final, termination=termination, termination_detail=detail,
                      verdict=vmap.verdict(s.get("scores") or {}))


def parse(data: bytes, source: str, verdict_map: VerdictMap = DEFAULT_MAP):
    if data.startswith(b"PK\x03\x04"):
        return _parse_eval(data, source, verdict_map)
    doc = load_json_document(data, source)
    ev = doc.get("eval", {})
    header = _header(ev, source)
    items = [(None, f"samples[{i}]", (lambda s=s: _sample(s, verdict_map))) for i, s in enumerate(doc.get("samples") or [])]
    return build_run(header=header, items=items, source=source, data=data)


def _header(ev: dict, source: str) -> RunHeader:
    return RunHeader(run_id=str(ev.get("run_id") or Path(source).stem), model=str(ev.get("model", "unknown")),
                     harness_name=f"inspect_ai {ev.get('task', '')}".strip(),
                     harness_version=str(ev.get("packages", {}).get("inspect_ai", "")),
                     evidence_standard=EvidenceStandard.STRUCTURAL, format=NAME, source=source)


ZIP_ZSTANDARD = 93
"""ZIP compression method of zstd (APPNOTE 4.4.5), which current inspect_ai writes."""
MAX_TOTAL_BYTES = 2 * 1024 * 1024 * 1024
"""Decoded bytes one ``.eval`` may expand to, all members together (the per-member cap alone
let a few kilobytes of many small bombs grow without bound)."""
MIN_TOTAL_BYTES = 128 * 1024 * 1024
TOTAL_RATIO = 200
"""The total budget is ``TOTAL_RATIO`` × the file's size, at least ``MIN_TOTAL_BYTES`` and at
most ``MAX_TOTAL_BYTES``: JSON logs compress by one or two orders of magnitude, not three."""
_READ_CHUNK = 1024 * 1024


def total_budget(compressed_bytes: int) -> int:
    """Decoded bytes a ``.eval`` of this size may expand to, all members together."""
    return min(MAX_TOTAL_BYTES, max(MIN_TOTAL_BYTES, TOTAL_RATIO * compressed_bytes))


class _Budget:
    """Decoded bytes left for a whole ``.eval``; over it, the file is refused (located)."""

    def __init__(self, total: int, source: str) -> None:
        self.total, self.left, self.source = total, total, source

    def spend(self, n: int, member: str) -> None:
        self.left -= n
        if self.left < 0:
            raise InputError(f"zip members expand past {self.total:,} decoded bytes in total (at {member}); "
                             "refused as a likely compression bomb", source=self.source)


def _member_stream(zf: zipfile.ZipFile, data: bytes, info: zipfile.ZipInfo):
    """A reader of one member's decoded bytes. zstd members are decoded here (``zipfile``
    knows method 93 only from Python 3.14, or where inspect_ai patched it into this process);
    others go through ``zipfile``."""
    if info.compress_type != ZIP_ZSTANDARD:
        return zf.open(info)
    import zstandard

    if info.flag_bits & 0x1:
        raise NotImplementedError("encrypted member")
    off = info.header_offset
    if data[off:off + 4] != b"PK\x03\x04":
        raise zipfile.BadZipFile("bad local file header")
    name_len, extra_len = struct.unpack("<HH", data[off + 26:off + 30])
    start = off + 30 + name_len + extra_len
    raw = memoryview(data)[start:start + info.compress_size]
    if len(raw) != info.compress_size:
        raise zipfile.BadZipFile("member data runs past the end of the file")
    return zstandard.ZstdDecompressor().stream_reader(raw, read_across_frames=True)


def _read_member(zf: zipfile.ZipFile, data: bytes, name: str, budget: _Budget) -> bytes:
    """A member's decoded bytes, read in chunks against the per-member cap and the file's
    total budget (declared sizes are never trusted); its CRC-32 checked."""
    info = zf.getinfo(name)
    if info.file_size > MAX_MEMBER_BYTES:
        raise RecordError(f"zip member {name} declares {info.file_size:,} bytes (> {MAX_MEMBER_BYTES:,})")
    parts, size, crc = [], 0, 0
    with _member_stream(zf, data, info) as fh:
        while True:
            chunk = fh.read(min(_READ_CHUNK, MAX_MEMBER_BYTES + 1 - size))
            if not chunk:
                break
            budget.spend(len(chunk), name)
            size += len(chunk)
            if size > MAX_MEMBER_BYTES:
                raise RecordError(f"zip member {name} expands past {MAX_MEMBER_BYTES:,} bytes")
            crc = zlib.crc32(chunk, crc)
            parts.append(chunk)
    if info.compress_type == ZIP_ZSTANDARD and crc != info.CRC:
        raise zipfile.BadZipFile(f"bad CRC-32 for {name}")
    return b"".join(parts)


def _parse_eval(data: bytes, source: str, vmap: VerdictMap, budget_bytes: int | None = None):
    try:
        zf = zipfile.ZipFile(io.BytesIO(data))
    except zipfile.BadZipFile as exc:
        raise InputError(f"not a readable .eval zip: {exc}", source=source) from exc
    budget = _Budget(total_budget(len(data)) if budget_bytes is None else budget_bytes, source)

    def read(name: str) -> Any:
        try:
            return json.loads(_read_member(zf, data, name, budget))
        except RecordError:
            raise
        except (zipfile.BadZipFile, zlib.error, EOFError, OSError, KeyError, NotImplementedError) as exc:
            raise RecordError(f"zip member {name} cannot be read: {exc}") from exc
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise RecordError(f"zip member {name} is not valid JSON: {exc}") from exc
        except RecursionError as exc:
            raise RecordError(f"zip member {name}: JSON nested too deeply") from exc
        except Exception as exc:  # zstandard.ZstdError and kin: a corrupt member
            if isinstance(exc, InputError):
                raise
            raise RecordError(f"zip member {name} cannot be read: {type(exc).__name__}: {exc}") from exc
    names = zf.namelist()
    try:
        head = read("header.json") if "header.json" in names else read("_journal/start.json")
    except RecordError as exc:
        raise InputError(f"no readable header.json or _journal/start.json: {exc.message}", source=source) from exc
    header = _header(head.get("eval", {}) if isinstance(head, dict) else {}, source)
    items = []
    for name in sorted(n for n in names if n.startswith("samples/") and n.endswith(".json")):
        if ".." in name or name.startswith("/"):
            items.append((None, name, RecordError(f"unsafe zip member path {name!r}")))
            continue
        items.append((None, name, (lambda name=name: _sample(read(name), vmap))))
    return build_run(header=header, items=items, source=source, data=data)
