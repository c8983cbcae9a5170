"""The strict rules, each written once, over plain values.

Three paths decide whether a call's capture is proven and whether the harness's verdict is
decisive: the full rules (``capture.assess`` and ``score.strict_classification``), the quick
proof of a plain logged call inside ``assess``, and the import's lean path over the common
record shape (``ingest``), which never builds model objects. Each path calls the functions
here, so a limit, a threshold or a check exists in one place; the fast paths only decide the
cases these rules settle on their own and hand everything else to the full rules.

The functions take sizes, digests, bytes, labels and confidences, not model objects, so the
typed path (a ``ToolCall``) and the lean path (a decoded msgspec struct) call the same code.
The threshold and the capture limit are always passed in: the caller's configuration decides.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence

import msgspec
import orjson

from .model import BENIGN

#: A cut that keeps UTF-8 whole drops up to three bytes of a split character, so a capture this
#: close under the limit is as suspect as one exactly at it.
AT_LIMIT_SLACK_BYTES = 3

#: A harness verdict of "benign" below this confidence is not decisive (the default of
#: ``HarnessVerdictClassifier``; every path takes the classifier's own threshold).
MIN_BENIGN_CONFIDENCE = 0.5


# --- the capture limit ----------------------------------------------------------------------


def over_capture_limit(size: int | None, limit: int | None) -> bool:
    """``size`` bytes is more than the capture limit (``over_capture_limit``)."""
    return size is not None and limit is not None and size > limit


def near_capture_limit(size: int | None, limit: int | None) -> bool:
    """``size`` bytes is the capture limit or just under it (``at_capture_limit``): the
    fingerprint of a cut (see ``AT_LIMIT_SLACK_BYTES``)."""
    return size is not None and limit is not None and limit - AT_LIMIT_SLACK_BYTES <= size <= limit


def clear_of_capture_limit(size: int, limit: int | None) -> bool:
    """Neither over nor near the capture limit: no limit rule can apply to ``size`` bytes."""
    return limit is None or size < limit - AT_LIMIT_SLACK_BYTES


# --- size, digest and parse -----------------------------------------------------------------


def digest_matches(actual_hex: str, recorded: str) -> bool:
    """The recorded SHA-256 (hex, either case) is ``actual_hex`` (lower-case hex).

    A recorded digest that matches is 64 hex digits: no character other than ``A``-``F``
    lower-cases to a hex digit, so a match needs no separate format check.
    """
    return recorded == actual_hex or recorded.lower() == actual_hex


def json_error(text: str) -> str | None:
    """Why ``text`` is not one JSON value, or None when it is (the standard library decides:
    orjson first, since it is faster, and json on anything orjson refuses, such as NaN or an
    integer beyond 64 bits)."""
    try:
        orjson.loads(text)
        return None
    except orjson.JSONDecodeError:
        pass
    try:
        json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        return str(exc)
    return None


_JSON_SYNTAX = msgspec.json.Decoder(msgspec.Raw)
_SYNTAX_MISS = (msgspec.DecodeError, RecursionError)  # deep nesting raises RecursionError


def certainly_json(data: bytes) -> bool:
    """True only when ``json_error`` certainly accepts these UTF-8 bytes: a syntax check that
    builds nothing. It is never laxer than ``json_error``: its nesting limit is lower than
    orjson's, and what it passes that orjson refuses (a number beyond float range, a lone
    surrogate inside a string, encoded with ``surrogatepass``) the standard library accepts.
    False means "ask ``json_error``", not "invalid"."""
    try:
        _JSON_SYNTAX.decode(data)
    except _SYNTAX_MISS:
        return False
    return True


def plain_calls_proven(texts: Sequence[bytes], sizes: list[int], digests: list[str], limit: int | None,
                       *, json_arguments: bool = True) -> bool:
    """True when every call, given as its captured bytes, recorded raw size and recorded SHA-256,
    is proven complete by size and digest alone, is clear of the capture limit and (for JSON
    arguments) certainly parses. False means the full rules must decide, not that a call is
    incomplete.

    This is the whole capture decision for a *plain* call (logged, no adapters, flags,
    redactions, signals or raw text): the full rules give such a call no gap exactly when all
    of this holds. It works on lists so the import's lean path checks a record's calls in a few
    C-level passes.
    """
    if not texts:
        return True
    # Equal lengths also rule out a negative size.
    if list(map(len, texts)) != sizes or not clear_of_capture_limit(max(sizes), limit):
        return False
    actual = [hashlib.sha256(t).hexdigest() for t in texts]
    if digests != actual and not all(map(digest_matches, actual, digests)):
        return False
    if json_arguments:
        try:  # certainly_json on each, in one loop under one ``try``
            for text in texts:
                _JSON_SYNTAX.decode(text)
        except _SYNTAX_MISS:
            return False
    return True


# --- the harness's verdict ------------------------------------------------------------------


def verdict_abstention(label: str, confidence: float | None, abnormal: bool, source: str,
                       min_benign_confidence: float) -> str | None:
    """Why a recorded verdict label decides nothing (the abstention's evidence), or None when it
    is decisive: a harm label, or ``benign`` at ``min_benign_confidence`` or above (or with no
    confidence recorded); never decisive when the harness flagged it abnormal."""
    if abnormal:
        return f"the harness judged its own verdict abnormal ({source or 'judge'})"
    if label == BENIGN and confidence is not None and confidence < min_benign_confidence:
        return f"benign at confidence {confidence:.2f} < {min_benign_confidence}"
    return None


__all__ = [
    "AT_LIMIT_SLACK_BYTES", "MIN_BENIGN_CONFIDENCE", "certainly_json", "clear_of_capture_limit", "digest_matches",
    "json_error", "near_capture_limit", "over_capture_limit", "plain_calls_proven", "verdict_abstention",
]
