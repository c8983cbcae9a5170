"""The strict rules written once (``scoring.capture_rules``) and the common record shape
(``canonical.CommonRecord``): the rules on their own, and the paths that share them held to the
same answers through public entry points."""

from __future__ import annotations

import ast
import dataclasses
import hashlib
import json
import string
import sys
from pathlib import Path

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scoring.capture import assess
from scoring.capture_rules import (
    AT_LIMIT_SLACK_BYTES,
    clear_of_capture_limit,
    digest_matches,
    near_capture_limit,
    over_capture_limit,
    plain_calls_proven,
    verdict_abstention,
)
from scoring.errors import ReasonCode
from scoring.importers import canonical
from scoring.importers._common import RecordError
from scoring.model import BENIGN, HarnessVerdict, ToolCall
from scoring.score import MIN_BENIGN_CONFIDENCE, HarnessVerdictClassifier

from .helpers import proven, traj

ROOT = Path(__file__).resolve().parent.parent


# --- the capture limit -------------------------------------------------------------------


@given(st.integers(0, 200), st.none() | st.integers(1, 200))
def test_clear_of_the_limit_is_neither_over_nor_near_it(size, limit):
    assert clear_of_capture_limit(size, limit) == (
        not over_capture_limit(size, limit) and not near_capture_limit(size, limit))


@pytest.mark.parametrize("room", range(AT_LIMIT_SLACK_BYTES + 2))
def test_a_plain_call_in_the_slack_under_the_limit_is_at_the_limit(room):
    # A call whose size and digest match is still suspect in the slack under the limit: the
    # quick proof of a plain call must say so as the full rules do (down to the last byte).
    call = proven({"cmd": "ls"})
    limit = call.raw_size_bytes + room
    gaps = {g.reason for g in assess(call, capture_limit_bytes=limit).blocking}
    assert (ReasonCode.AT_CAPTURE_LIMIT in gaps) == (room <= AT_LIMIT_SLACK_BYTES)


# --- size and digest ---------------------------------------------------------------------


def test_a_matching_digest_is_hex_whatever_its_case():
    text = b'{"a": 1}'
    actual = hashlib.sha256(text).hexdigest()
    assert digest_matches(actual, actual) and digest_matches(actual, actual.upper())
    assert not digest_matches(actual, actual[:-1] + ("0" if actual[-1] != "0" else "1"))
    assert plain_calls_proven([text], [len(text)], [actual.upper()], None)


def test_only_hex_letters_lower_case_to_hex_digits():
    # digest_matches needs no format check because of this; the lean path relies on it to
    # refuse what the typed parser refuses (a raw_sha256 that is not 64 hex digits).
    hexdigits = set("0123456789abcdef")
    odd = [c for c in map(chr, range(sys.maxunicode + 1))
           if c not in string.hexdigits and not 0xD800 <= ord(c) <= 0xDFFF and hexdigits & set(c.lower())]
    assert odd == []


def test_plain_calls_proven_checks_every_call():
    good, bad = b'{"a": 1}', b'{"a": 2}'
    digest = hashlib.sha256(good).hexdigest()
    assert plain_calls_proven([good, good], [8, 8], [digest, digest], 100)
    assert not plain_calls_proven([good, bad], [8, 8], [digest, digest], 100)  # digest
    assert not plain_calls_proven([good, good], [8, 9], [digest, digest], 100)  # size
    assert not plain_calls_proven([good, good], [8, 8], [digest, digest], 8 + AT_LIMIT_SLACK_BYTES)  # limit
    assert not plain_calls_proven([b"{", b"{"], [1, 1], [hashlib.sha256(b"{").hexdigest()] * 2, None)
    assert plain_calls_proven([b"{"], [1], [hashlib.sha256(b"{").hexdigest()], None, json_arguments=False)


# --- the harness's verdict -----------------------------------------------------------------


@given(st.sampled_from([None, BENIGN, "C01"]), st.none() | st.floats(0, 1), st.booleans(), st.floats(0, 1))
def test_the_verdict_classifier_abstains_exactly_where_the_rule_says(label, confidence, abnormal, threshold):
    t = dataclasses.replace(traj(proven({"cmd": "ls"})),
                            verdict=HarnessVerdict(label=label, confidence=confidence, abnormal=abnormal))
    got = HarnessVerdictClassifier(min_benign_confidence=threshold).classify(t, [])
    why = None if label is None else verdict_abstention(label, confidence, abnormal, "", threshold)
    if label is None:
        assert got.label is None and got.evidence == ("the harness recorded no verdict",)
    elif why is None:
        assert got.label == label
    else:
        assert got.label is None and got.evidence == (why,)


def test_the_default_threshold_is_the_classifiers():
    assert HarnessVerdictClassifier().min_benign_confidence == MIN_BENIGN_CONFIDENCE
    assert verdict_abstention(BENIGN, 0.4, False, "", MIN_BENIGN_CONFIDENCE) is not None
    assert verdict_abstention(BENIGN, 0.6, False, "", MIN_BENIGN_CONFIDENCE) is None
    assert verdict_abstention(BENIGN, 0.6, False, "", 0.7) is not None


# --- the common record shape against the documented schema --------------------------------

DOC = json.loads((ROOT / "docs" / "run-format.schema.json").read_text())
# Where the common shape is laxer than the format, a check in code makes up for it.
LAXER = {
    ("trajectory", "record"): "the lean path checks it is 'trajectory'",
    ("trajectory", "id"): "minLength: neither parser refuses an empty id (the typed one accepts it too)",
    ("trajectory", "termination", "reason"): "the lean path takes only 'completed'",
    ("trajectory", "tool_calls", "raw_sha256"): "digest_matches: a matching digest is hex",
}


BOUNDS = {"number": ("minimum", "maximum"), "integer": ("minimum", "maximum"),
          "string": ("pattern", "minLength", "enum", "const")}


def _resolve(node: dict, defs: dict) -> dict:
    while "$ref" in node:
        node = defs[node["$ref"].rsplit("/", 1)[1]]
    return node


def _alternatives(node: dict, defs: dict) -> list[dict]:
    node = _resolve(node, defs)
    members = node.get("anyOf") or node.get("oneOf")
    if members:
        return [alt for m in members for alt in _alternatives(m, defs)]
    if isinstance(node.get("type"), list):
        return [{**node, "type": t} for t in node["type"]]
    return [node]


def _json_type(node: dict) -> str:
    if "type" in node:
        return node["type"]
    values = node.get("enum") or [node["const"]]
    return {str: "string", int: "integer", bool: "boolean"}[type(values[0])]


def _compare(ours: dict, doc: dict, ours_defs: dict, where: tuple[str, ...], optional: bool = False) -> list[str]:
    problems = []
    doc_alts = {_json_type(a): a for a in _alternatives(doc, DOC["$defs"])}
    for alt in _alternatives(ours, ours_defs):
        kind = _json_type(alt)
        if kind == "null" and optional:
            continue  # the parser reads null as absent for every optional field (_common.opt)
        if kind == "number" and "number" not in doc_alts and "integer" in doc_alts:
            problems.append(f"{where}: a number where the format has an integer")
            continue
        match = doc_alts.get(kind)
        if match is None:
            problems.append(f"{where}: {kind} is not a type the format allows ({sorted(doc_alts)})")
            continue
        for bound in BOUNDS.get(kind, ()):
            if bound in match and match.get(bound) != alt.get(bound) and where not in LAXER:
                problems.append(f"{where}: the format has {bound} {match[bound]!r}, the common shape "
                                f"{alt.get(bound)!r}")
        if kind == "array":
            problems += _compare(alt["items"], match["items"], ours_defs, where)
        if kind == "object":
            if alt.get("additionalProperties") is not False:
                problems.append(f"{where}: the common shape must refuse unknown fields")
            missing = set(match.get("required", ())) - set(alt.get("required", ()))
            if missing:
                problems.append(f"{where}: the format requires {sorted(missing)}")
            for name, sub in alt["properties"].items():
                if name not in match.get("properties", {}):
                    problems.append(f"{(*where, name)}: not a field of the format")
                else:
                    problems += _compare(sub, match["properties"][name], ours_defs, (*where, name),
                                         optional=name not in match.get("required", ()))
    return problems


def test_the_common_record_shape_is_a_part_of_the_documented_format():
    ours = msgspec.json.schema(canonical.CommonRecord)
    assert _compare(ours, DOC["$defs"]["trajectory"], ours["$defs"], ("trajectory",)) == []


def test_the_schema_comparison_finds_a_renamed_or_retyped_field():
    class Call(msgspec.Struct, forbid_unknown_fields=True):
        tool: str
        arguments: int
        raw_bytes: int

    ours = msgspec.json.schema(Call)
    problems = _compare(ours, DOC["$defs"]["tool_call"], ours["$defs"], ("call",))
    assert any("arguments" in p for p in problems) and any("raw_bytes" in p for p in problems)


# --- canonical's fast call parsing against the general one ----------------------------------

ANY = st.one_of(st.none(), st.just(True), st.just(False), st.integers(-2, 3), st.just(2**63), st.just(1.0),
                st.just("x"), st.sampled_from(["A" * 64, "g" * 64, "a" * 63]), st.just({}), st.just({"content": 1}),
                st.just({"content": "ok", "truncated": False}))
VALID_CALL = {"index": 0, "tool": "t", "arguments": '{"a": 1}', "raw_size_bytes": 8, "raw_sha256": "a" * 64,
              "truncated": False, "result": {"content": "ok"}, "message_index": 0}


@st.composite
def fast_calls(draw) -> dict:
    """A call of the common shape with some keys left out and one or two values replaced."""
    call = {k: v for k, v in VALID_CALL.items() if k in ("tool", "arguments") or draw(st.booleans())}
    for key in draw(st.lists(st.sampled_from(sorted(VALID_CALL)), max_size=2)):
        call[key] = draw(ANY)
    return call


def _parsed(record: dict):
    try:
        return canonical.parse_trajectory(record)
    except RecordError as exc:
        return ("refused", exc.message)


@settings(max_examples=1000, deadline=None)
@given(fast_calls(), st.integers(0, 2))
def test_a_call_of_the_common_shape_parses_as_the_general_path_parses_it(call, messages):
    # A key the fast path does not take, at its default ("channel": "logged"), sends the same
    # call down the general path: both must build the same call or refuse it the same way.
    record = {"record": "trajectory", "id": "a", "task_id": "t",
              "messages": [{"role": "assistant"}] * messages, "tool_calls": [call]}
    general = {**record, "tool_calls": [{**call, "channel": "logged"}]}
    assert _parsed(record) == _parsed(general)


def test_the_fast_call_parser_takes_the_common_call_shape():
    call = {"tool": "t", "arguments": "{}", "raw_size_bytes": 2, "raw_sha256": "A" * 64,
            "result": {"content": "ok"}, "message_index": 0}
    msgspec.convert(call, canonical.CommonCall)  # every field of the common call...
    t = canonical.parse_trajectory({"record": "trajectory", "id": "a", "task_id": "t",
                                    "messages": [{"role": "assistant"}], "tool_calls": [call]})
    assert t.tool_calls[0] == ToolCall(index=0, tool="t", arguments="{}", raw_size_bytes=2, raw_sha256="a" * 64,
                                       result=t.tool_calls[0].result, message_index=0)


def test_the_strict_constants_are_defined_in_one_module():
    # A second assignment is a second copy of a rule: import the one in capture_rules instead.
    names = {"AT_LIMIT_SLACK_BYTES", "MIN_BENIGN_CONFIDENCE"}
    homes = []
    for path in sorted((ROOT / "scoring").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Assign):
                targets = node.targets
            elif isinstance(node, ast.AnnAssign):
                targets = [node.target]
            else:
                continue
            homes += [(t.id, path.name) for t in targets if isinstance(t, ast.Name) and t.id in names]
    assert sorted(homes) == [("AT_LIMIT_SLACK_BYTES", "capture_rules.py"),
                             ("MIN_BENIGN_CONFIDENCE", "capture_rules.py")]
