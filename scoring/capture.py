"""The capture-completeness predicate.

``assess(call, ...)`` returns the call's full argument *surface* when it is proven, and every
gap otherwise; ``gaps(call)`` returns just the gaps and ``is_complete(call)`` is "no blocking
gaps". Nothing here guesses: a call is complete only when the evidence proves it.

Two routes prove a surface:

1. **Raw text** kept by the harness or joined from a side log, matching the recorded size and
   SHA-256 (or, with no digest recorded, byte-identical to the capture).
2. **The capture itself**, decoded through its adapter chain with a hard cap on decoded size,
   whose size and digest match the recorded raw size and digest (proven standard), or which
   shows none of the format's truncation signals (structural standard).

The limit, digest and parse rules themselves live in ``capture_rules``, shared with the import's
lean path; a plain call (``is_plain``) is decided there in one pass.
"""

from __future__ import annotations

import base64
import binascii
import collections
import hashlib
import re
import threading
import urllib.parse
import zlib
from dataclasses import dataclass

from .capture_rules import (
    digest_matches,
    json_error,
    near_capture_limit,
    over_capture_limit,
    plain_calls_proven,
)
from .errors import BLOCKING_REASONS, AdapterDecodeError, ReasonCode
from .model import EvidenceStandard, Gap, ToolCall

#: Decoded adapter output is never allowed past this many bytes: a compression bomb becomes an
#: ``unverifiable_adapter`` gap instead of exhausting memory.
MAX_DECODED_BYTES = 64 * 1024 * 1024

#: In-band markers that harnesses write where they cut or scrub arguments. They apply to every
#: surface that no digest or raw text proves byte for byte, whatever the header declares (a
#: proven surface holds them as the agent wrote them). Case-insensitive; the README lists them.
IN_BAND_MARKERS: tuple[tuple[ReasonCode, str, str], ...] = (
    (ReasonCode.REDACTED, "a bracketed redaction marker", r"[\[<({]\s*redacted\b[^\]>)}\n]{0,40}[\]>)}]"),
    (ReasonCode.REDACTED, "a run of five or more asterisks", r"\*{5,}"),
    (ReasonCode.REDACTED, "a removed-data marker", r"<[\w-]*(?:data|content)-removed>"),
    (ReasonCode.TRUNCATED, "a bracketed truncation marker",
     r"[\[<(]\s*(?:\.\.\.|…|(?:output |content |response )?(?:truncated|clipped|elided|omitted)\b)"
     r"[^\]>)\n]{0,40}[\]>)]"),
    (ReasonCode.TRUNCATED, "an 'N more bytes' count",
     r"\b\d[\d,]*\s+(?:more\s+)?(?:bytes|characters|chars|tokens|lines)\s+(?:more|truncated|omitted|elided|not shown)\b"
     r"|\b\d[\d,]*\s+more\s+(?:bytes|characters|chars|tokens|lines)\b"),
    (ReasonCode.TRUNCATED, "an ellipsis ending the capture", r"…[\"'\]}\s]*\Z|\.\.\.\s*\Z"),
)
_MARKERS = tuple((reason, what, re.compile(pattern, re.IGNORECASE)) for reason, what, pattern in IN_BAND_MARKERS)


@dataclass(frozen=True, slots=True)
class Capture:
    """The result of assessing one call."""

    surface: str | None
    """The full argument text, when proven; ``None`` otherwise."""
    gaps: tuple[Gap, ...]
    """Everything that stops the capture from being proven (and informational notes)."""
    recovered_from: str | None = None
    """``"raw_text"`` when the surface came from the raw text rather than the capture."""
    cured: tuple[Gap, ...] = ()
    """Gaps of the capture itself that a proven raw text made irrelevant (shown to reviewers)."""

    @property
    def blocking(self) -> tuple[Gap, ...]:
        return tuple(g for g in self.gaps if g.blocking)

    @property
    def is_complete(self) -> bool:
        return self.surface is not None and not self.blocking


def sha256_hex(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def utf8_len(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


_DecodeError = AdapterDecodeError  # the capture check's name for it (scoring.errors)


def _gunzip_capped(data: bytes, cap: int) -> bytes:
    """Every member of a gzip stream (or one zlib stream), decoded within ``cap`` bytes in all.

    Concatenated gzip members decode to the concatenation of their contents (RFC 1952), so a
    decoder that stops after the first member shows a classifier a prefix; bytes after the
    last member are not gzip at all. Both are refused rather than ignored.
    """
    out = bytearray()
    rest = data
    members = 0
    while True:
        # wbits=47 reads a gzip or a zlib header; max_length bounds the output, so a bomb stops
        # at the cap instead of expanding.
        decomp = zlib.decompressobj(wbits=47)
        try:
            chunk = decomp.decompress(rest, cap + 1 - len(out))
        except zlib.error as exc:
            where = f" (member {members + 1})" if members else ""
            raise _DecodeError(f"gzip{where}: {exc}") from exc
        out += chunk
        if len(out) > cap or decomp.unconsumed_tail:
            raise _DecodeError(f"gzip: decoded size exceeds the {cap:,}-byte cap", step="gzip", exceeded=cap)
        if not decomp.eof:
            raise _DecodeError("gzip: stream is incomplete")
        members += 1
        rest = decomp.unused_data
        if not rest:
            return bytes(out)
        if rest[:2] != b"\x1f\x8b":
            raise _DecodeError(f"gzip: {len(rest):,} bytes after the end of the compressed stream")


def _url_decode_exact(data: bytes) -> bytes:
    """Percent-decoding that refuses what it cannot decode exactly: a non-ASCII byte (a
    lenient decoder replaces it, so the surface differs from the raw) or a ``%`` not followed
    by two hex digits (ambiguous: it may be literal or a cut escape)."""
    try:
        text = data.decode("ascii")
    except UnicodeDecodeError as exc:
        raise _DecodeError(f"url: non-ASCII byte 0x{data[exc.start]:02x} at {exc.start} cannot be "
                           "percent-encoded text") from exc
    bad = _BAD_PERCENT.search(text)
    if bad:
        raise _DecodeError(f"url: '%' at {bad.start()} is not followed by two hex digits")
    return urllib.parse.unquote_to_bytes(text)


_BAD_PERCENT = re.compile(r"%(?![0-9A-Fa-f]{2})")


def _decode_step(name: str, data: bytes, cap: int) -> bytes:
    if name == "base64":
        try:
            out = base64.b64decode(data, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise _DecodeError(f"base64: {exc}") from exc
    elif name == "gzip":
        out = _gunzip_capped(data, cap)
    elif name == "url":
        out = _url_decode_exact(data)
    else:
        raise _DecodeError(f"no decoder for adapter {name!r}, so its losslessness cannot be checked")
    if len(out) > cap:
        raise _DecodeError(f"{name}: decoded size exceeds the {cap:,}-byte cap", step=name, exceeded=cap)
    return out


#: Deflate cannot expand its input more than about 1,032 times, so a capture whose decoding
#: needs more is not one gzip layer of real arguments but a bomb (nested, or crafted): decoding
#: stops there. This bounds the work of every call by its captured size, not only its memory.
MAX_EXPANSION = 1032
#: ... plus this much, so small captures keep room for their headers and short texts.
MIN_DECODE_BUDGET = 64 * 1024


def decode_budget(captured_bytes: int, cap: int = MAX_DECODED_BYTES) -> int:
    """How many decoded bytes a capture of ``captured_bytes`` may produce at any step."""
    return min(cap, MAX_EXPANSION * captured_bytes + MIN_DECODE_BUDGET)


def decode_adapters(call: ToolCall, cap: int = MAX_DECODED_BYTES) -> str:
    """Undo the call's adapters (last applied first) and return the decoded text.

    Raises ``_DecodeError`` with a reason when any step cannot be decoded within the budget
    (``decode_budget``: at most ``cap``). Results are cached: a replay of a trajectory decodes
    what its import decoded already.
    """
    steps = tuple(step.strip().lower() for adapter in reversed(call.adapters)
                  for step in reversed(adapter.name.split("+")))
    ok, value = _decode_cached(call.arguments, steps, cap)
    if not ok:
        raise _DecodeError(value)
    return value


class _DecodedCache:
    """Decoded surfaces by (capture, steps, cap), least recently used out, bounded by the bytes it
    holds (a count alone could hold hundreds of 64 MiB surfaces). Shared by the app's threads."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._items: collections.OrderedDict[tuple, tuple[bool, str]] = collections.OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, key: tuple) -> tuple[bool, str] | None:
        with self._lock:
            hit = self._items.get(key)
            if hit is not None:
                self._items.move_to_end(key)
            return hit

    def put(self, key: tuple, value: tuple[bool, str]) -> None:
        size = len(key[0]) + len(value[1])
        if size > self.max_bytes // 4:
            return  # one huge surface would evict everything else
        with self._lock:
            if key in self._items:
                return
            self._items[key] = value
            self._bytes += size
            while self._bytes > self.max_bytes:
                old_key, old = self._items.popitem(last=False)
                self._bytes -= len(old_key[0]) + len(old[1])

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._bytes = 0


_DECODED = _DecodedCache(64 * 1024 * 1024)


def _decode_cached(arguments: str, steps: tuple[str, ...], cap: int) -> tuple[bool, str]:
    """(True, the decoded text) or (False, why not): a failure is cached as well as a success."""
    key = (arguments, steps, cap)
    hit = _DECODED.get(key)
    if hit is None:
        hit = _decode(arguments, steps, cap)
        _DECODED.put(key, hit)
    return hit


def _decode(arguments: str, steps: tuple[str, ...], cap: int) -> tuple[bool, str]:
    data = arguments.encode("utf-8", "surrogatepass")
    budget = decode_budget(len(data), cap)
    try:
        for step in steps:
            data = _decode_step(step, data, budget)
        return True, data.decode("utf-8")
    except _DecodeError as exc:
        if exc.exceeded is not None and exc.exceeded < cap:  # the budget, not the cap, was reached
            return False, (f"{exc.step}: decoded size exceeds the {exc.exceeded:,}-byte budget ({MAX_EXPANSION:,}x "
                           "the capture: more than deflate can expand, so a bomb)")
        return False, str(exc)
    except UnicodeDecodeError as exc:
        return False, f"decoded bytes are not UTF-8 ({exc.reason} at byte {exc.start})"


def _proof_gaps(text: str, call: ToolCall, what: str) -> list[Gap]:
    """Compare ``text`` to the recorded size and digest."""
    out: list[Gap] = []
    size = utf8_len(text)
    if call.raw_size_bytes is not None and size != call.raw_size_bytes:
        out.append(Gap(reason=ReasonCode.SIZE_MISMATCH,
                       detail=f"{what} is {size:,} bytes, raw was {call.raw_size_bytes:,}"))
    if call.raw_sha256 is not None and not digest_matches(sha256_hex(text), call.raw_sha256):
        out.append(Gap(reason=ReasonCode.DIGEST_MISMATCH,
                       detail=f"SHA-256 of the {what} differs from the recorded raw digest"))
    return out


def marker_gaps(text: str) -> list[Gap]:
    """A gap for each kind of in-band redaction or truncation marker found in ``text``."""
    out = []
    for reason, what, pattern in _MARKERS:
        m = pattern.search(text)
        if m:
            out.append(Gap(reason=reason, detail=f"in-band marker: {what} ({m.group(0)[:40]!r} at {m.start():,})"))
    return out


def _at_limit_gap(what: str, size: int | None, limit: int | None) -> Gap:
    # Called where near_capture_limit(size, limit) holds, so neither is None.
    return Gap(reason=ReasonCode.AT_CAPTURE_LIMIT,
               detail=f"{what} is {size:,} bytes against a capture limit of {limit:,}: the fingerprint of a cut")


def _parse_gap(text: str, fmt: str) -> Gap | None:
    error = json_error(text) if fmt == "json" else None
    return None if error is None else Gap(reason=ReasonCode.UNPARSEABLE_ARGUMENTS, detail=f"JSON: {error}")


def assess(
    call: ToolCall,
    *,
    capture_limit_bytes: int | None = None,
    standard: EvidenceStandard = EvidenceStandard.PROVEN,
    max_decoded_bytes: int = MAX_DECODED_BYTES,
    require_proof: bool = False,
) -> Capture:
    """Assess one call's capture; see the module docstring for the rules. With
    ``require_proof`` a structural capture that nothing proves byte for byte (no recorded size
    and SHA-256, no raw text) has an ``unproven_capture`` gap: its completeness is only claimed."""
    quick = _quick_proof(call, capture_limit_bytes)
    if quick is not None:
        return quick
    capture_gaps = _capture_gaps(call, capture_limit_bytes, standard, max_decoded_bytes, require_proof)
    surface_from_capture, gaps_list = capture_gaps
    informational = []
    if call.result is not None and call.result.truncated:
        informational.append(Gap(reason=ReasonCode.RESULT_TRUNCATED, blocking=False,
                                 detail="the tool result was cut by the harness"))

    blocking = [g for g in gaps_list if g.reason in BLOCKING_REASONS]
    if not blocking and surface_from_capture is not None:
        return Capture(surface=surface_from_capture, gaps=tuple(informational))

    # Route 1: a raw text that proves itself makes the capture's gaps irrelevant — unless the
    # raw text, or the raw size it is proven against, is itself at the capture limit (a size
    # and digest taken of the prefix prove nothing).
    if call.raw_text is not None:
        raw_gaps = _proof_gaps(call.raw_text, call, "raw text")
        raw_len = utf8_len(call.raw_text)
        if near_capture_limit(raw_len, capture_limit_bytes):
            raw_gaps.append(_at_limit_gap("the raw text", raw_len, capture_limit_bytes))
        has_proof = call.raw_size_bytes is not None and call.raw_sha256 is not None
        if not raw_gaps and has_proof:
            parse = _parse_gap(call.raw_text, call.arguments_format)
            if parse is None:
                return Capture(surface=call.raw_text, gaps=tuple(informational),
                               recovered_from="raw_text", cured=tuple(blocking))
            blocking.append(parse)
        elif raw_gaps:
            blocking.extend(
                Gap(reason=g.reason, detail=g.detail + " (raw text offered as proof)")
                for g in raw_gaps
            )
    return Capture(surface=None, gaps=tuple(_dedupe(blocking) + informational))


_COMPLETE = ()


def is_plain(call: ToolCall) -> bool:
    """A logged call that carries nothing the rules weigh but its capture, recorded size and
    digest (no flag, adapter, redaction, signal, raw text or cut result): with a size and
    digest recorded, ``plain_calls_proven`` decides its capture."""
    return not (call.signals or call.truncated or call.adapters or call.redactions or call.parse_error
                or call.raw_text is not None or call.channel != "logged"
                or (call.result is not None and call.result.truncated))


def _quick_proof(call: ToolCall, limit: int | None) -> Capture | None:
    """The common case in one pass: a plain call that ``plain_calls_proven`` proves.

    Returns None whenever anything needs the full rules (a flag, an adapter, a redaction, a
    mismatch…), so the answer is always the one the full path would give (tested).
    """
    size, digest = call.raw_size_bytes, call.raw_sha256
    if size is None or digest is None or not is_plain(call):
        return None
    data = call.arguments.encode("utf-8", "surrogatepass")
    if not plain_calls_proven((data,), [size], [digest], limit,
                              json_arguments=call.arguments_format == "json"):
        return None
    return Capture(surface=call.arguments, gaps=_COMPLETE)


def _dedupe(gaps: list[Gap]) -> list[Gap]:
    seen: set[ReasonCode] = set()
    out = []
    for g in gaps:
        if g.reason not in seen:
            seen.add(g.reason)
            out.append(g)
    return out


def _capture_gaps(
    call: ToolCall,
    limit: int | None,
    standard: EvidenceStandard,
    cap: int,
    require_proof: bool = False,
) -> tuple[str | None, list[Gap]]:
    """Gaps of the capture itself, and its decoded surface when that could be computed."""
    out: list[Gap] = [Gap(reason=code, detail="signalled by the log") for code in call.signals]
    if over_capture_limit(call.raw_size_bytes, limit):
        out.append(Gap(reason=ReasonCode.OVER_CAPTURE_LIMIT,
                       detail=f"raw {call.raw_size_bytes:,} bytes > capture limit {limit:,}"))
    if call.truncated:
        out.append(Gap(reason=ReasonCode.TRUNCATED, detail="the harness marked the arguments as cut"))
    if near_capture_limit(call.raw_size_bytes, limit):
        out.append(_at_limit_gap("the recorded raw size", call.raw_size_bytes, limit))
    elif near_capture_limit(call.captured_bytes, limit):
        out.append(_at_limit_gap("the capture", call.captured_bytes, limit))
    if call.channel != "logged":
        out.append(Gap(reason=ReasonCode.UNLOGGED_CHANNEL,
                       detail=f"channel {call.channel!r} was not logged"))
    for red in call.redactions:
        out.append(Gap(reason=ReasonCode.REDACTED,
                       detail=f"marker {red.marker!r}" + (f": {red.reason}" if red.reason else "")))
    if call.parse_error:
        out.append(Gap(reason=ReasonCode.UNPARSEABLE_ARGUMENTS, detail=call.parse_error))

    surface: str | None = call.arguments
    if call.adapters:
        lossy = [a.name for a in call.adapters if a.lossless is False]
        if lossy:
            out.append(Gap(reason=ReasonCode.LOSSY_ADAPTER, detail="lossy: " + ", ".join(lossy)))
            surface = None
        else:
            unknown = [a.name for a in call.adapters if a.lossless is None]
            if unknown:
                out.append(Gap(reason=ReasonCode.UNVERIFIABLE_ADAPTER,
                               detail="losslessness not declared: " + ", ".join(unknown)))
                surface = None
            else:
                try:
                    surface = decode_adapters(call, cap)
                except _DecodeError as exc:
                    out.append(Gap(reason=ReasonCode.UNVERIFIABLE_ADAPTER, detail=str(exc)))
                    surface = None

    if surface is not None:
        if call.raw_text is not None and surface != call.raw_text:
            out.append(Gap(reason=ReasonCode.CAPTURED_DIFFERS_FROM_RAW,
                           detail="the capture (decoded) is not the raw text"))
        out.extend(_proof_gaps(surface, call, "capture"))
        parse = None if call.parse_error else _parse_gap(surface, call.arguments_format)
        if parse is not None:
            out.append(parse)
        proven_by_digest = call.raw_size_bytes is not None and call.raw_sha256 is not None
        proven_by_equality = call.raw_text is not None and surface == call.raw_text
        if not (proven_by_digest or proven_by_equality):
            # Nothing proves this surface byte for byte: the format's own signals are all there
            # is, and in-band markers are among them whatever the header declares.
            out.extend(marker_gaps(surface))
        if standard is EvidenceStandard.PROVEN and not (proven_by_digest or proven_by_equality):
            missing = [n for n, v in (("raw size", call.raw_size_bytes),
                                      ("raw SHA-256", call.raw_sha256)) if v is None]
            out.append(Gap(reason=ReasonCode.MISSING_EVIDENCE,
                           detail="not recorded: " + ", ".join(missing)))
        elif require_proof and not (proven_by_digest or proven_by_equality):
            out.append(Gap(reason=ReasonCode.UNPROVEN_CAPTURE,
                           detail="complete only by the run's claim (structural standard): no recorded size and "
                                  "SHA-256 or raw text proves this capture, and --require-proof was given"))
    return surface, out


def gaps(
    call: ToolCall,
    *,
    capture_limit_bytes: int | None = None,
    standard: EvidenceStandard = EvidenceStandard.PROVEN,
) -> tuple[Gap, ...]:
    """Every gap of a call (blocking and informational); empty means complete."""
    return assess(call, capture_limit_bytes=capture_limit_bytes, standard=standard).gaps


def is_complete(
    call: ToolCall,
    *,
    capture_limit_bytes: int | None = None,
    standard: EvidenceStandard = EvidenceStandard.PROVEN,
) -> bool:
    """True when the call's full argument surface is proven captured."""
    return assess(call, capture_limit_bytes=capture_limit_bytes, standard=standard).is_complete
