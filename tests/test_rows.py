"""The stored trajectory row is defined once (scoring.rows): every writer and reader takes it there."""

from __future__ import annotations

import subprocess
import sys

import pytest

from scoring import rows
from scoring.errors import ReasonCode

from .conftest import ROOT, SAMPLES


def test_the_row_codec_matches_the_workspace_table_and_is_the_one_every_writer_uses(tmp_path):
    from scoring.workspace import Workspace, columns, importing

    ws = Workspace(tmp_path / "w.db")
    with ws.connect() as db:
        stored = {c: t for c, t in db["trajectories"].columns_dict.items() if c != "run_key"}
    assert sorted(stored) == sorted(rows.ROW_COLUMNS)
    # every migration together gives each column the schema's type
    assert {c.name: c.kind for c in rows.SCHEMA} == stored
    assert rows.ROW_COLUMNS is rows.ROW_COLUMNS and importing.ROW_COLUMNS is rows.ROW_COLUMNS
    assert tuple(rows.COL[c] for c in rows.SCORE_FIELDS) == columns._COLUMNS_FROM_ROW
    assert rows.row(*rows.ROW_COLUMNS) == rows.ROW_COLUMNS  # the signature is the order


def test_list_and_gap_encodings_read_back():
    assert rows.split(rows.join(["a", "b"])) == ("a", "b") and rows.split("") == () and rows.split(None) == ()
    assert rows.split_ints(rows.join([3, 0, 12])) == (3, 0, 12)
    assert rows.evidence(rows.evidence_json(["x", "y"])) == ("x", "y") and rows.evidence(None) == ()

    class Gap:
        def __init__(self, reason):
            self.reason = reason

    class Cap:
        def __init__(self, *gaps):
            self.gaps = [Gap(g) for g in gaps]

    caps = [Cap(), Cap(ReasonCode.OVER_CAPTURE_LIMIT, ReasonCode.SIZE_MISMATCH), Cap()]
    cut = (ReasonCode.OVER_CAPTURE_LIMIT, ReasonCode.SIZE_MISMATCH)
    assert rows.call_gaps(rows.gaps_text(caps), 3) == ((), cut, ())
    assert rows.call_gaps(rows.gaps_text([Cap(), Cap()]), 2) == ((), ())


def test_the_codec_loads_in_a_worker_without_the_database_libraries():
    code = "import sys, scoring.rows; sys.exit(1 if 'sqlite_utils' in sys.modules or 'pandas' in sys.modules else 0)"
    assert subprocess.run([sys.executable, "-c", code], cwd=ROOT).returncode == 0


def _holds(column: rows.Column, value) -> bool:
    if value is None:
        return column.nullable
    if column.encoding is rows.Encoding.FLAG:
        return value in (0, 1)
    return type(value) is column.kind


@pytest.mark.parametrize("lean", [True, False], ids=["lean path", "typed path"])
def test_every_row_builder_gives_each_column_its_schema_type_and_encoding(lean):
    from scoring import ingest

    stored = []
    for name in ("observed-m1.jsonl", "compare-m2.jsonl"):
        header_line, rest = (SAMPLES / name).read_bytes().split(b"\n", 1)
        stored += ingest.score_bytes(header_line, name, len(header_line) + 1, rest, lean=lean).rows
    assert len(stored) > 1000
    for r in stored:
        bad = [(c.name, v) for c, v in zip(rows.SCHEMA, r, strict=True) if not _holds(c, v)]
        assert not bad, bad
        by_name = dict(zip(rows.ROW_COLUMNS, r, strict=True))
        for c in rows.SCHEMA:
            v = by_name[c.name]
            if c.encoding is rows.Encoding.NUMBERS:
                rows.split_ints(v)
            elif c.encoding is rows.Encoding.EVIDENCE and v is not None:
                assert all(isinstance(x, str) for x in rows.evidence(v))
            elif c.encoding is rows.Encoding.GAPS:
                assert len(rows.call_gaps(v, by_name["tool_call_count"])) == by_name["tool_call_count"]


def test_a_score_tables_parquet_schema_is_derived_from_the_row_schema():
    import pyarrow as pa

    from scoring.dask_engine import table_layout

    schema = table_layout.table_schema()
    assert schema.names == [*rows.ROW_COLUMNS, "source"]
    assert schema.field("lenient_safe").type == pa.bool_()
    assert schema.field("call_sizes").type == pa.list_(pa.int64())
    assert schema.field("call_gaps").type == pa.list_(pa.list_(pa.string()))
    assert schema.field("line").type == pa.int64() and schema.field("status").type == pa.string()


def test_the_builder_refuses_a_column_name_that_is_not_an_identifier():
    with pytest.raises(ValueError, match="not a plain identifier"):
        rows._tuple_builder(("ok", "x): pass\nimport os\ndef y(z"))


def test_a_score_table_types_list_columns_with_the_workspaces_own_decoders():
    from scoring.dask_engine import table_layout

    typed = table_layout.typed_columns({"tools": ["a,,x", ""], "call_sizes": ["3,,4", ""],
                                        "recaptured_calls": ["", "1"],
                           "reasons": ["", "truncated"], "lenient_safe": [1, None],
                           "classifier_evidence": ['["e"]', "[]"], "suggestion_evidence": [None, '["s"]'],
                           "call_gaps": ["over_capture_limit,|", ""]})
    assert typed["tools"] == [list(rows.split("a,,x")), []] == [["a", "x"], []]
    assert typed["call_sizes"] == [[3, 4], []]  # an empty item is no item, never int('')
    assert typed["call_gaps"] == [[["over_capture_limit"], []], []]
    assert typed["lenient_safe"] == [True, None] and typed["suggestion_evidence"] == [None, ["s"]]
