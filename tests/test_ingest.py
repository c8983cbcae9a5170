"""The lean import path gives exactly the rows of the typed path, record by record.

Both paths are driven through ``ingest.score_bytes`` (``lean=False`` scores every record the
typed way); the rules they share are tested on their own in test_capture_rules.py."""

from __future__ import annotations

import hashlib
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scoring import ingest, rows
from scoring.capture_rules import certainly_json, json_error
from scoring.score import MIN_BENIGN_CONFIDENCE, HarnessVerdictClassifier

from .conftest import SAMPLES


def rows_both_ways(path, tmp_lines=None, harness=None):
    data = path.read_bytes() if tmp_lines is None else tmp_lines
    header_line, rest = data.split(b"\n", 1)
    offset = len(header_line) + 1
    lean = ingest.score_bytes(header_line, str(path), offset, rest, harness=harness, lean=True)
    typed = ingest.score_bytes(header_line, str(path), offset, rest, harness=harness, lean=False)
    return lean, typed


def lean_share(path) -> float:
    lean, _typed = rows_both_ways(path)
    return lean.lean / lean.seen


@pytest.mark.parametrize("name", ["observed-m1.jsonl", "compare-m2.jsonl"])
def test_lean_and_typed_paths_agree_on_the_samples(name):
    lean, typed = rows_both_ways(SAMPLES / name)
    assert lean.rows == typed.rows and lean.rejected == typed.rejected and lean.seen == typed.seen


def test_lean_and_typed_paths_agree_on_a_bench_run_and_lean_does_most_of_it(tmp_path, generator):
    path = tmp_path / "bench.jsonl"
    generator.write_bench_run(path, 600)
    lean, typed = rows_both_ways(path)
    assert lean.rows == typed.rows
    assert lean_share(path) > 0.9


SAMPLE_LINES = (SAMPLES / "observed-m1.jsonl").read_bytes().split(b"\n")
HEADER = SAMPLE_LINES[0]

# Arguments that are not plain JSON objects, each with a size and digest that prove it: only
# the parse check can tell the lean path's answer from the typed path's.
TRICKY_ARGUMENTS = ('{"a":1e999}', '{"a":NaN}', '[1,]', '{"a":1}x', '\ufeff{}', '{"a":"\\ud800"}', '1 2',
                    '[' * 990 + ']' * 990, '[' * 1010 + ']' * 1010, ' {} ', '{"a":"\x01"}', '"\ud800"')


def _reprove(d: dict, text: str) -> None:
    if d.get("tool_calls"):
        raw = text.encode("utf-8", "surrogatepass")
        d["tool_calls"][0].update(arguments=text, raw_size_bytes=len(raw), raw_sha256=hashlib.sha256(raw).hexdigest())


mutations = st.sampled_from([
    lambda d: d.pop("verdict", None),
    lambda d: d.update(verdict={"label": "benign", "confidence": 0.3}),
    lambda d: d.update(verdict={"label": "C99", "confidence": 0.9}),
    lambda d: d.update(verdict={"label": "benign", "abnormal": True}),
    lambda d: d.update(termination={"reason": "step_limit"}),
    lambda d: d.update(id=7),
    lambda d: d.update(messages=[{"role": "user", "content": 3}]),
    lambda d: d.update(final_output=None),
    lambda d: d["tool_calls"][0].update(raw_size_bytes=d["tool_calls"][0].get("raw_size_bytes", 0) + 1)
    if d.get("tool_calls") else None,
    lambda d: d["tool_calls"][0].update(arguments="{") if d.get("tool_calls") else None,
    lambda d: d["tool_calls"][0].update(truncated=True) if d.get("tool_calls") else None,
    lambda d: d["tool_calls"][0].update(result={"content": "x", "truncated": True}) if d.get("tool_calls") else None,
    lambda d: d["tool_calls"][0].update(raw_sha256="Z" * 64) if d.get("tool_calls") else None,
    lambda d: d.update(tool_calls=[None]),
    lambda d: d.update(extra_field=1),
    # what a schema-checking decoder might read differently from the typed path
    lambda d: d.get("verdict", {}).update(confidence=True),
    lambda d: d.get("verdict", {}).update(confidence=1),
    lambda d: d.get("verdict", {}).update(confidence=1.5),
    lambda d: d.update(messages=None),
    lambda d: d.update(termination={"reason": "completed", "detail": 5}),
    lambda d: d["tool_calls"][0].update(raw_size_bytes=float(d["tool_calls"][0].get("raw_size_bytes") or 0))
    if d.get("tool_calls") else None,
    lambda d: d["tool_calls"][0].update(raw_sha256=(d["tool_calls"][0].get("raw_sha256") or "").upper())
    if d.get("tool_calls") else None,
    lambda d: d["tool_calls"][0].update(arguments="\ud800") if d.get("tool_calls") else None,
    *[lambda d, text=text: _reprove(d, text) for text in TRICKY_ARGUMENTS],
    lambda d: None,
])

# ...and what only the bytes of a line can say
line_forms = st.sampled_from([
    lambda b: b,
    lambda b: b + b"\r",                                   # CRLF
    lambda b: b'{"id": "shadowed", ' + b[1:],              # a duplicate key: the last one counts
    lambda b: b"  " + b,                                    # leading blanks
    lambda b: b + b"\n",                                   # a blank line after
])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 400), mutations, line_forms), min_size=1, max_size=6))
def test_lean_and_typed_paths_agree_on_mutated_records(picks):
    out = []
    for i, mutate, form in picks:
        obj = json.loads(SAMPLE_LINES[i])
        mutate(obj)
        out.append(form(json.dumps(obj).encode()))
    data = HEADER + b"\n" + b"\n".join(out) + b"\n"
    lean, typed = rows_both_ways(SAMPLES / "observed-m1.jsonl", data)
    assert lean.rows == typed.rows
    assert [(r.line, r.message) for r in lean.rejected] == [(r.line, r.message) for r in typed.rejected]
    assert (lean.seen, lean.lines) == (typed.seen, typed.lines)


def _first_lean_record() -> dict:
    for line in SAMPLE_LINES[1:]:
        if line.strip() and json.loads(line).get("tool_calls") \
                and ingest.score_bytes(HEADER, "sample", 0, line).lean == 1:
            return json.loads(line)
    raise AssertionError("no sample record takes the lean path")


@pytest.mark.parametrize("text", TRICKY_ARGUMENTS)
def test_lean_and_typed_paths_agree_on_arguments_only_the_parse_check_can_judge(text):
    record = _first_lean_record()
    _reprove(record, text)
    data = HEADER + b"\n" + json.dumps(record).encode() + b"\n"
    lean, typed = rows_both_ways(SAMPLES / "observed-m1.jsonl", data)
    assert lean.rows == typed.rows and len(lean.rows) == 1


JSON_ISH = st.sampled_from(list('{}[],:"\\ue0E-+. \t\n\r\x0b\x0c\x00\x1f\x7ftrnlfasNI\ufeff\xa0\u2028\ud800é19x'))
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=8,
).map(json.dumps)


@st.composite
def near_json(draw) -> str:
    """Valid JSON with a few characters inserted, deleted or replaced, or JSON-ish noise."""
    if draw(st.booleans()):
        return "".join(draw(st.lists(JSON_ISH, max_size=14)))
    text = list(draw(json_values))
    for _ in range(draw(st.integers(0, 3))):
        at = draw(st.integers(0, len(text)))
        op = draw(st.sampled_from(["insert", "delete", "replace"]))
        if op == "insert":
            text.insert(at, draw(JSON_ISH))
        elif text:
            at = min(at, len(text) - 1)
            if op == "delete":
                del text[at]
            else:
                text[at] = draw(JSON_ISH)
    return "".join(text)


@settings(max_examples=3000, deadline=None)
@given(near_json())
def test_json_syntax_check_is_never_laxer_than_the_typed_path(text):
    # The fast paths check arguments with a non-building JSON syntax check; whatever it passes
    # the full rules' parse check (orjson, then the standard library) must pass too, or a record
    # the typed path holds UNSCORED (unparseable arguments) would be scored.
    if certainly_json(text.encode("utf-8", "surrogatepass")):
        assert json_error(text) is None


def test_json_syntax_check_refuses_what_json_refuses():
    for text in ['{"a":1,}', '{"a":1}x', '[' * 1010 + ']' * 1010, '{"a":NaN}', "", "1 2", '{"a":"\x01"}']:
        assert not certainly_json(text.encode())


@pytest.mark.parametrize("threshold", [0.95, 0.0, 1.0])
def test_the_lean_path_takes_the_verdict_classifiers_threshold(threshold):
    # A benign verdict below the classifier's threshold abstains; the lean path must ask the
    # classifier's threshold, not a copy of the default. The sample's benign verdicts sit at
    # 0.85-0.99, so 0.95 moves some of them to Inconclusive, and both paths must agree.
    path = SAMPLES / "observed-m1.jsonl"
    harness = HarnessVerdictClassifier(min_benign_confidence=threshold)
    lean, typed = rows_both_ways(path, harness=harness)
    assert lean.rows == typed.rows and lean.rejected == typed.rejected
    assert lean.lean > 0 and typed.lean == 0
    default, _ = rows_both_ways(path)
    status = rows.ROW_COLUMNS.index("status")
    moved = sum(a[status] != b[status] for a, b in zip(lean.rows, default.rows, strict=True))
    assert (moved > 0) == (threshold > MIN_BENIGN_CONFIDENCE)


GEN_HEADER = {"record": "run", "format": "litmus-review-run", "format_version": 1, "run_id": "r", "model": "m",
              "taxonomy": [{"id": "C01", "name": "exfiltration", "rules": ["exfil\\.example"]}]}
GEN_ARGUMENTS = ('{"a": 1}', '{"u": "exfil.example"}', "{", "[1e999]", '{"k": "' + "x" * 40 + '"}')
THRESHOLDS = (0.7, 0.9, 0.5, 1.0, 0.0, 0.3)


@st.composite
def generated_records(draw, threshold: float) -> dict:
    """A record near the common shape, every value the lean path decides on drawn at its edges:
    the confidence either side of the threshold, sizes and digests right or wrong, arguments
    that do or do not parse. The first choice of each is the common shape (Hypothesis draws
    and shrinks towards it), so the lean path takes a good share."""
    calls = []
    for _ in range(draw(st.integers(0, 3))):
        text = draw(st.sampled_from(GEN_ARGUMENTS))
        raw = text.encode()
        call = {"tool": draw(st.sampled_from(["a", "b"])), "arguments": text,
                "raw_size_bytes": len(raw) + draw(st.sampled_from([0, 1])),
                "raw_sha256": draw(st.sampled_from([str.lower, str.upper, lambda d: "0" * 64]))(
                    hashlib.sha256(raw).hexdigest())}
        if draw(st.booleans()):
            call["result"] = {"content": "ok"}
        calls.append(call)
    confidence = draw(st.sampled_from([max(threshold - 0.05, 0.0), threshold, None, 0.45, 0.5, 1.0]))
    verdict = {"label": draw(st.sampled_from(["benign", "C01", "C99"])), "confidence": confidence,
               "abnormal": draw(st.booleans())}
    return {"record": "trajectory", "id": draw(st.sampled_from(["t1", "t2", "t3"])), "task_id": "task",
            "termination": {"reason": draw(st.sampled_from(["completed", "step_limit"]))},
            "verdict": verdict, "tool_calls": calls}


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(THRESHOLDS).flatmap(lambda t: st.tuples(
           st.just(t), st.lists(generated_records(t), min_size=1, max_size=3, unique_by=lambda r: r["id"]))),
       st.none() | st.sampled_from([8, 10, 11, 12, 46, 49, 50, 51, 64]))
def test_lean_and_typed_paths_agree_on_generated_records(case, limit):
    # The threshold and the capture limit are drawn too: the lean path must take both from
    # its caller (the verdict classifier, the header), as the typed path does.
    threshold, records = case
    header = json.dumps({**GEN_HEADER, "capture_limit_bytes": limit}).encode()
    data = b"\n".join(json.dumps(r).encode() for r in records) + b"\n"
    harness = HarnessVerdictClassifier(min_benign_confidence=threshold)
    lean = ingest.score_bytes(header, "gen", 0, data, harness=harness, lean=True)
    typed = ingest.score_bytes(header, "gen", 0, data, harness=harness, lean=False)
    assert lean.rows == typed.rows
    assert [(r.line, r.message) for r in lean.rejected] == [(r.line, r.message) for r in typed.rejected]


def test_a_range_is_read_as_score_range_scores_it(tmp_path):
    """``read_range`` (the block read ``score_range`` makes, timed alone by
    benches/import_breakdown.py): exactly the range's bytes, fewer where the file ends first."""
    path = tmp_path / "run.jsonl"
    path.write_bytes(b"0123456789\nabcdef\n")
    assert ingest.read_range(str(path), 11, 7) == b"abcdef\n"
    assert ingest.read_range(str(path), 4, 3) == b"456"
    assert ingest.read_range(str(path), 15, 100) == b"ef\n"
    header_line, rest = (SAMPLES / "observed-m1.jsonl").read_bytes().split(b"\n", 1)
    offset = len(header_line) + 1
    whole = ingest.score_range(header_line, "s", str(SAMPLES / "observed-m1.jsonl"), offset, len(rest))
    assert whole.rows == ingest.score_bytes(header_line, "s", offset, rest).rows and whole.rows
