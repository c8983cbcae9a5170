"""Every reason code has a case that produces it, and complete calls produce none."""

from __future__ import annotations

import base64
import gzip
import json

import pytest

from scoring.capture import MAX_DECODED_BYTES, assess, gaps, is_complete
from scoring.errors import BLOCKING_REASONS, ReasonCode
from scoring.model import Adapter, EvidenceStandard, Redaction, ToolCall, ToolResult

from .helpers import proven, sha

LIMIT = 64
R = ReasonCode


def reasons(call: ToolCall, standard=EvidenceStandard.PROVEN, limit=LIMIT) -> set[ReasonCode]:
    return {g.reason for g in gaps(call, capture_limit_bytes=limit, standard=standard)}


def test_a_proven_call_is_complete_and_its_surface_is_the_capture():
    call = proven({"cmd": "ls"})
    cap = assess(call, capture_limit_bytes=LIMIT)
    assert cap.is_complete and cap.gaps == () and cap.surface == call.arguments


def _over_limit() -> ToolCall:
    full = json.dumps({"body": "x" * 200})
    return ToolCall(index=0, tool="t", arguments=full[:LIMIT], raw_size_bytes=len(full), raw_sha256=sha(full))


CASES: dict[ReasonCode, ToolCall] = {
    R.OVER_CAPTURE_LIMIT: _over_limit(),
    R.TRUNCATED: proven({"a": 1}, truncated=True),
    R.CAPTURED_DIFFERS_FROM_RAW: ToolCall(index=0, tool="t", arguments='{"a": 1}', raw_text='{"a": 2}'),
    R.SIZE_MISMATCH: proven({"a": 1}, raw_size_bytes=999),
    R.DIGEST_MISMATCH: proven({"a": 1}, raw_sha256="0" * 64),
    R.REDACTED: proven('{"t": "[REDACTED]"}', redactions=(Redaction(marker="[REDACTED]"),)),
    R.UNLOGGED_CHANNEL: proven({"a": 1}, channel="unlogged"),
    R.LOSSY_ADAPTER: proven({"a": 1}, adapters=(Adapter(name="image-downscale", lossless=False),)),
    R.UNVERIFIABLE_ADAPTER: proven("!!!", adapters=(Adapter(name="base64", lossless=True),)),
    R.UNPARSEABLE_ARGUMENTS: proven('{"a": '),
    R.MISSING_EVIDENCE: ToolCall(index=0, tool="t", arguments='{"a": 1}'),
    R.RESULT_TRUNCATED: proven({"a": 1}, result=ToolResult(content="...", truncated=True)),
}


@pytest.mark.parametrize("code", list(CASES), ids=str)
def test_each_reason_code_is_detected(code):
    assert code in reasons(CASES[code])


@pytest.mark.parametrize("code", sorted(BLOCKING_REASONS & set(CASES)), ids=str)
def test_each_blocking_reason_makes_the_call_incomplete(code):
    assert not is_complete(CASES[code], capture_limit_bytes=LIMIT)


def test_every_reason_code_has_a_case_or_is_covered_elsewhere():
    # PAYLOAD_MISMATCH belongs to recapture (tests/test_recapture.py).
    # payload_mismatch: tests/test_recapture.py; not_classified_on_full_surface and
    # at_capture_limit (a trajectory-level and a limit rule): tests/test_classifier_of_record.py;
    # judge_did_not_see_full_surface (a verdict's attestation): tests/test_proof.py, tests/test_inspect_proof.py;
    # missing_transcript (a trajectory with nothing captured): tests/test_strict_proof.py;
    # unproven_capture (only under --require-proof): tests/test_require_proof.py;
    # judge_input_unresolved, judge_proof_refused, verdict_not_proven (the judge-input audit):
    # tests/test_judge_audit_log.py, tests/test_judge_audit_inspect.py; guard_refused (a strict(scorer)
    # refusal with a code this release does not know): tests/test_guard_keeps_harm.py
    assert set(ReasonCode) - set(CASES) == {R.PAYLOAD_MISMATCH, R.NOT_CLASSIFIED_ON_FULL_SURFACE, R.AT_CAPTURE_LIMIT,
                                            R.JUDGE_DID_NOT_SEE_FULL_SURFACE, R.MISSING_TRANSCRIPT,
                                            R.UNPROVEN_CAPTURE, R.JUDGE_INPUT_UNRESOLVED, R.JUDGE_PROOF_REFUSED,
                                            R.JUDGE_INPUT_NOT_IN_LOG, R.VERDICT_NOT_PROVEN, R.GUARD_REFUSED}


def test_result_truncation_is_shown_but_does_not_block():
    cap = assess(CASES[R.RESULT_TRUNCATED], capture_limit_bytes=LIMIT)
    assert cap.is_complete
    assert [g.reason for g in cap.gaps] == [R.RESULT_TRUNCATED] and not cap.gaps[0].blocking


def test_over_limit_reports_every_gap_not_just_the_first():
    assert reasons(_over_limit()) >= {R.OVER_CAPTURE_LIMIT, R.SIZE_MISMATCH, R.DIGEST_MISMATCH, R.UNPARSEABLE_ARGUMENTS}


def test_a_proven_raw_text_completes_a_truncated_call_and_keeps_the_cured_gaps():
    call = _over_limit()
    full = json.dumps({"body": "x" * 200})
    cap = assess(ToolCall(**{**_fields(call), "raw_text": full}), capture_limit_bytes=LIMIT)
    assert cap.is_complete and cap.surface == full and cap.recovered_from == "raw_text"
    assert R.OVER_CAPTURE_LIMIT in {g.reason for g in cap.cured}


def test_a_raw_text_that_does_not_match_the_digest_is_never_used():
    call = _over_limit()
    forged = json.dumps({"body": "y" * 200})
    cap = assess(ToolCall(**{**_fields(call), "raw_text": forged}), capture_limit_bytes=LIMIT)
    assert not cap.is_complete and cap.surface is None
    assert R.DIGEST_MISMATCH in {g.reason for g in cap.gaps}


def test_raw_equality_proves_a_call_without_a_digest():
    call = ToolCall(index=0, tool="t", arguments='{"a": 1}', raw_text='{"a": 1}')
    assert is_complete(call)


def test_structural_standard_does_not_demand_size_and_digest():
    call = ToolCall(index=0, tool="t", arguments='{"a": 1}')
    assert reasons(call, EvidenceStandard.STRUCTURAL) == set()
    assert reasons(call, EvidenceStandard.PROVEN) == {R.MISSING_EVIDENCE}


def test_structural_signals_from_an_importer_block():
    call = ToolCall(index=0, tool="t", arguments="{}", signals=(R.TRUNCATED,))
    assert not is_complete(call, standard=EvidenceStandard.STRUCTURAL)


@pytest.mark.parametrize("chain", [["base64"], ["gzip", "base64"], ["gzip+base64"], ["url"]])
def test_lossless_adapters_are_verified_by_decoding(chain):
    inner = json.dumps({"payload": "hello exfil.example " * 5})
    data = inner.encode()
    names = [s for a in chain for s in a.split("+")]
    for step in names:
        if step == "gzip":
            data = gzip.compress(data, mtime=0)
        elif step == "base64":
            data = base64.b64encode(data)
        elif step == "url":
            from urllib.parse import quote
            data = quote(data.decode(), safe="").encode()
    call = ToolCall(index=0, tool="t", arguments=data.decode(), arguments_format="json",
                    raw_size_bytes=len(inner.encode()), raw_sha256=sha(inner),
                    adapters=tuple(Adapter(name=a, lossless=True) for a in chain))
    cap = assess(call)
    assert cap.is_complete and cap.surface == inner


def test_an_adapter_whose_decoding_does_not_match_the_digest_is_a_mismatch():
    inner = json.dumps({"a": 1})
    other = base64.b64encode(b'{"a": 2}').decode()
    call = ToolCall(index=0, tool="t", arguments=other, raw_size_bytes=len(inner), raw_sha256=sha(inner),
                    adapters=(Adapter(name="base64", lossless=True),))
    assert R.DIGEST_MISMATCH in reasons(call)


def test_gzip_bomb_stops_at_the_cap_with_unverifiable_adapter():
    bomb = gzip.compress(b"\0" * (MAX_DECODED_BYTES + 1024 * 1024), mtime=0)
    call = ToolCall(index=0, tool="t", arguments=base64.b64encode(bomb).decode(), arguments_format="text",
                    raw_size_bytes=10, raw_sha256="0" * 64,
                    adapters=(Adapter(name="gzip", lossless=True), Adapter(name="base64", lossless=True)))
    cap = assess(call)
    assert [g.reason for g in cap.gaps] == [R.UNVERIFIABLE_ADAPTER]
    assert "cap" in cap.gaps[0].detail


def test_a_small_bomb_costs_work_in_proportion_to_its_size_not_the_cap(monkeypatch):
    # Gzip inside gzip: a few hundred bytes that would decode to 64 MiB. Decoding stops at the
    # budget (deflate's own 1,032x limit on the capture), so no call costs the full cap.
    from scoring import capture

    inner = gzip.compress(b"\0" * (32 * 1024 * 1024), mtime=0)
    bomb = gzip.compress(inner, mtime=0)
    text = base64.b64encode(bomb).decode()
    assert len(text) < 64 * 1024
    produced = []
    real = capture.zlib.decompressobj

    class Counting:
        def __init__(self, *a, **kw):
            self._d = real(*a, **kw)

        def decompress(self, data, max_length=0):
            out = self._d.decompress(data, max_length)
            produced.append(len(out))
            return out

        def __getattr__(self, name):
            return getattr(self._d, name)

    monkeypatch.setattr(capture.zlib, "decompressobj", Counting)
    capture._DECODED.clear()
    call = ToolCall(
        index=0,
        tool="t",
        arguments=text,
        arguments_format="text",
        raw_size_bytes=10,
        raw_sha256="0" * 64,
        adapters=(
            Adapter(name="gzip", lossless=True),
            Adapter(name="gzip", lossless=True),
            Adapter(name="base64", lossless=True),
        ),
    )
    cap = assess(call)
    assert [g.reason for g in cap.gaps] == [R.UNVERIFIABLE_ADAPTER] and "budget" in cap.gaps[0].detail
    budget = capture.decode_budget(len(text))
    assert budget < MAX_DECODED_BYTES and max(produced) <= budget + 1


def test_a_replay_does_not_decode_again(monkeypatch):
    from scoring import capture

    inner = json.dumps({"a": "x" * 500})
    call = ToolCall(index=0, tool="t", arguments=base64.b64encode(gzip.compress(inner.encode(), mtime=0)).decode(),
                    arguments_format="text", raw_size_bytes=len(inner), raw_sha256=sha(inner),
                    adapters=(Adapter(name="gzip", lossless=True), Adapter(name="base64", lossless=True)))
    capture._DECODED.clear()
    calls = []
    real = capture._gunzip_capped
    monkeypatch.setattr(capture, "_gunzip_capped", lambda data, cap: calls.append(1) or real(data, cap))
    assert assess(call).is_complete and assess(call).is_complete
    assert len(calls) == 1


def test_unknown_adapter_and_undeclared_losslessness_are_unverifiable():
    assert R.UNVERIFIABLE_ADAPTER in reasons(proven({"a": 1}, adapters=(Adapter(name="multipart", lossless=True),)))
    assert R.UNVERIFIABLE_ADAPTER in reasons(proven({"a": 1}, adapters=(Adapter(name="base64", lossless=None),)))


def _fields(call: ToolCall) -> dict:
    return {f: getattr(call, f) for f in call.__slots__}


def test_the_decoded_cache_is_bounded_by_bytes():
    from scoring.capture import _DecodedCache

    cache = _DecodedCache(1000)
    for i in range(50):
        cache.put((f"capture-{i:03d}" * 5, ("base64",), 1), (True, "x" * 100))
    assert cache._bytes <= 1000 and len(cache._items) < 50
    assert cache.get(("capture-049" * 5, ("base64",), 1)) == (True, "x" * 100)  # the newest stays
    cache.put(("big", (), 1), (True, "y" * 900))  # over a quarter of the bound: never cached
    assert cache.get(("big", (), 1)) is None
