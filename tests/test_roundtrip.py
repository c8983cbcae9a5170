"""Hypothesis round-trip: any trajectory written canonically parses back to itself."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from scoring.errors import ReasonCode
from scoring.importers.canonical import (
    dump_header,
    dump_trajectory,
    parse_header,
    parse_trajectory,
)
from scoring.model import (
    Adapter,
    Category,
    EvidenceStandard,
    HarnessVerdict,
    Message,
    Redaction,
    RunHeader,
    Termination,
    ToolCall,
    ToolResult,
    Trajectory,
)

text = st.text(max_size=30)
hexd = st.text("0123456789abcdef", min_size=64, max_size=64)

calls = st.builds(
    ToolCall, index=st.just(0), tool=text, arguments=text, arguments_format=st.sampled_from(["json", "text"]),
    raw_size_bytes=st.none() | st.integers(0, 10**9), raw_sha256=st.none() | hexd,
    raw_text=st.none() | text, truncated=st.booleans(),
    adapters=st.lists(st.builds(Adapter, name=text, lossless=st.none() | st.booleans()), max_size=2).map(tuple),
    channel=st.sampled_from(["logged", "unlogged"]),
    redactions=st.lists(st.builds(Redaction, marker=text, reason=text), max_size=2).map(tuple),
    parse_error=st.none() | text, executed=st.booleans(),
    result=st.none() | st.builds(ToolResult, content=text, raw_size_bytes=st.none() | st.integers(0, 99),
                                 truncated=st.booleans(), error=st.none() | text),
    signals=st.lists(st.sampled_from(list(ReasonCode)), max_size=2).map(tuple),
)
trajectories = st.builds(
    Trajectory, id=text, task_id=text, intended_category=st.none() | text,
    termination=st.sampled_from(list(Termination)), termination_detail=text, final_output=text,
    verdict=st.none() | st.builds(HarnessVerdict, label=st.none() | text,
                                  confidence=st.none() | st.floats(0, 1), abnormal=st.booleans(), source=text),
    messages=st.lists(st.builds(Message, role=text, content=text), max_size=3).map(tuple),
    tool_calls=st.lists(calls, max_size=3).map(lambda cs: tuple(
        ToolCall(**{**{f: getattr(c, f) for f in c.__slots__}, "index": i,
                    "raw_text_source": "log" if c.raw_text is not None else None}) for i, c in enumerate(cs))),
    model=st.none() | text,
    extra=st.lists(st.tuples(text, text), max_size=2).map(tuple),
)


@settings(max_examples=150, deadline=None)
@given(trajectories)
def test_trajectory_round_trips_through_json(t):
    assert parse_trajectory(json.loads(json.dumps(dump_trajectory(t)))) == t


def test_a_converted_run_keeps_its_importer_facts():
    # LITMUS's judgements travel in ``extra``: a workspace's converted copy kept none of them.
    from scoring.importers import load_run

    from .conftest import ROOT

    run = load_run(ROOT / "tests" / "fixtures" / "importers" / "litmus_pipeline.jsonl")
    t = next(t for t in run.trajectories if t.extra)
    assert parse_trajectory(json.loads(json.dumps(dump_trajectory(t)))).extra == t.extra


def test_header_round_trips():
    h = RunHeader(run_id="r", model="m", harness_name="h", harness_version="1", capture_limit_bytes=10,
                  taxonomy=(Category(id="C", name="n", payload_dependent=True, rules=("a+",)),),
                  evidence_standard=EvidenceStandard.STRUCTURAL, source="x")
    assert parse_header(dump_header(h), "x") == h
