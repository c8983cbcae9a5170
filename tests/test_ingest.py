"""The lean import path gives exactly the rows of the typed path, record by record."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scoring import ingest

from .conftest import SAMPLES


def rows_both_ways(path, tmp_lines=None):
    data = path.read_bytes() if tmp_lines is None else tmp_lines
    header_line, rest = data.split(b"\n", 1)
    offset = len(header_line) + 1
    lean = ingest._score_block(header_line, str(path), offset, 2, rest, lean=True)
    typed = ingest._score_block(header_line, str(path), offset, 2, rest, lean=False)
    return lean, typed


def lean_share(path) -> float:
    data = path.read_bytes()
    header_line, rest = data.split(b"\n", 1)
    header, _, _ = ingest._scorers(header_line, str(path))
    known = {c.id for c in header.taxonomy}
    lines = [ln for ln in rest.split(b"\n") if ln.strip()]
    hits = sum(ingest._lean_row(ln, header, known, set(), 0, 0) is not None for ln in lines)
    return hits / len(lines)


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
