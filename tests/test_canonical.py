from __future__ import annotations

import json

import pytest

from scoring.errors import FormatVersionError, InputError, UnknownFormatError
from scoring.importers import load_run, parse_run

HEADER = {"record": "run", "format": "litmus-review-run", "format_version": 1, "run_id": "r", "model": "m",
          "capture_limit_bytes": 100, "taxonomy": [{"id": "C01", "name": "x", "rules": ["evil"]}]}
GOOD = {"record": "trajectory", "id": "a", "task_id": "t", "tool_calls": [{"tool": "x", "arguments": "{}"}]}


def jl(*objs) -> bytes:
    return "\n".join(o if isinstance(o, str) else json.dumps(o) for o in objs).encode() + b"\n"


def test_every_record_is_imported_or_rejected_with_its_line_and_reason():
    data = jl(HEADER, GOOD, "{broken", {**GOOD, "id": "b", "tool_calls": [{"tool": "x"}]},
              {**GOOD, "id": "a"}, {**GOOD, "id": "c", "verdict": {"label": "C99"}},
              {**GOOD, "id": "d", "tool_calls": [{"tool": "x", "arguments": "{}", "raw_size_bytes": True}]})
    data += b'\xff\xfe\n'
    run = parse_run(data, "f.jsonl")
    # Two records with id "a": neither copy is preferred, both are refused with each other's line.
    assert [t.id for t in run.trajectories] == []
    got = [(r.line, r.record_id, r.message) for r in run.rejected]
    assert got[0] == (2, "a", "duplicate trajectory id 'a' (also at line 5): neither copy is scored")
    assert got[1][0] == 3 and "invalid JSON" in got[1][2]
    assert got[2] == (4, "b", "missing field 'tool_calls[0].arguments'")
    assert got[3] == (5, "a", "duplicate trajectory id 'a': neither copy is scored")
    assert got[4][:2] == (6, "c") and "C99" in got[4][2]
    assert got[5][:2] == (7, "d") and "boolean" in got[5][2]
    assert got[6][0] == 8 and "UTF-8" in got[6][2]
    assert run.records_seen == len(run.trajectories) + len(run.rejected) == 7


def test_header_problems_are_located_errors():
    with pytest.raises(InputError, match=r"f:1: run header: missing field 'model'"):
        parse_run(jl({k: v for k, v in HEADER.items() if k != "model"}), "f", "canonical")
    with pytest.raises(FormatVersionError, match="format_version 9"):
        parse_run(jl({**HEADER, "format_version": 9}), "f")
    with pytest.raises(InputError, match="not a valid regular expression"):
        parse_run(jl({**HEADER, "taxonomy": [{"id": "C", "name": "n", "rules": ["("]}]}), "f")


def test_unknown_format_lists_what_was_tried(tmp_path):
    p = tmp_path / "x.jsonl"
    p.write_text('{"hello": 1}\n')
    with pytest.raises(UnknownFormatError) as info:
        load_run(p)
    assert info.value.tried and "canonical" in str(info.value) and str(p) in str(info.value)


def test_missing_file_and_folder_are_input_errors(tmp_path):
    with pytest.raises(InputError, match="cannot read"):
        load_run(tmp_path / "nope.jsonl")
    with pytest.raises(InputError, match="folder"):
        load_run(tmp_path)
