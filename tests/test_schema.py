"""The JSON Schema in docs/ describes the canonical format; the samples validate against it."""

from __future__ import annotations

import json

import jsonschema
import pytest

from .conftest import ROOT, SAMPLES

SCHEMA = json.loads((ROOT / "docs" / "run-format.schema.json").read_text())


def validator(kind: str):
    sub = {"$ref": f"#/$defs/{kind}", "$defs": SCHEMA["$defs"]}
    return jsonschema.Draft202012Validator(sub)


@pytest.mark.parametrize("name", sorted(p.name for p in SAMPLES.glob("*-m[0-9].jsonl")))
def test_samples_validate(name):
    lines = (SAMPLES / name).read_text().splitlines()
    validator("header").validate(json.loads(lines[0]))
    v = validator("trajectory")
    for i, line in enumerate(lines[1:], start=2):
        errors = list(v.iter_errors(json.loads(line)))
        assert not errors, f"{name}:{i}: {errors[0].message}"


def test_schema_rejects_what_the_parser_rejects():
    bad = {"record": "trajectory", "id": "x", "task_id": "t", "termination": {"reason": "exploded"}}
    assert list(validator("trajectory").iter_errors(bad))
    from scoring.importers._common import RecordError
    from scoring.importers.canonical import parse_trajectory
    with pytest.raises(RecordError, match=r"termination\.reason"):
        parse_trajectory(bad)
