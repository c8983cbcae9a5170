"""The stored trajectory row is defined once (scoring.rows): every writer and reader takes it there."""

from __future__ import annotations

import subprocess
import sys

from scoring import rows
from scoring.errors import ReasonCode

from .conftest import ROOT


def test_the_row_codec_matches_the_workspace_table_and_is_the_one_every_writer_uses(tmp_path):
    from scoring import engine
    from scoring.workspace import Workspace, columns, importing

    ws = Workspace(tmp_path / "w.db")
    with ws.connect() as db:
        stored = [c for c in db["trajectories"].columns_dict if c != "run_key"]
    assert sorted(stored) == sorted(rows.ROW_COLUMNS)
    assert engine.ROW_COLUMNS is rows.ROW_COLUMNS and importing.ROW_COLUMNS is rows.ROW_COLUMNS
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
