"""An upload's table is vetted in a process of its own whose memory and time are bounded (issue
34, confirmation attack V9): a value the file stores once and every row reads back (a Parquet
dictionary) decodes to what the writer chose, whatever the footer says; the server never holds
it, the upload is refused as a likely bomb, and a checking process that dies is a refusal."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from scoring.dask_engine import table_layout, vetting_process
from scoring.errors import InputError
from scoring.workspace import views

from .test_table_upload import zip_folder
from .test_team_tables import make_table

ROOT = Path(__file__).parent.parent


@pytest.fixture
def table(tmp_path):
    out, _run = make_table(tmp_path / "scored" / "nightly", "table")
    return out


def index_with_ids(table: Path, ids: pa.Array, **written) -> None:
    """The run's Inconclusive index rewritten with ``len(ids)`` rows whose ids are ``ids`` (its
    other columns repeated from the engine's rows)."""
    (index,) = (table / table_layout.INCONCLUSIVE_DIR).rglob("*.parquet")
    engine = pq.read_table(index)
    meta = pq.ParquetFile(index).schema_arrow.metadata
    again = pa.array([i % engine.num_rows for i in range(len(ids))])
    columns = {name: engine.column(name).combine_chunks().take(again) for name in engine.column_names}
    columns["trajectory_id"] = ids
    pq.write_table(pa.table(columns).replace_schema_metadata(meta), index, compression="zstd", **written)


def test_a_dictionary_typed_column_is_refused_unread(tmp_path, table):
    # The attack as sent: a 1 MiB id stored once, named by 1,900 rows: the footer says about a
    # megabyte, the ids decode to 1.9 GB: the server held them all before this check.
    index_with_ids(table, pa.array(["a" * (1 << 20)] * 1_900).dictionary_encode())
    with pytest.raises(InputError, match=r"dictionary-encoded columns in the Inconclusive index .*\(trajectory_id\)"):
        views.unpack_table(tmp_path / "app.db", "bomb.zip", zip_folder(table.parent))
    assert views.uploaded_tables(tmp_path / "app.db").tables == ()


def test_a_dictionary_in_the_parts_encoding_is_bounded_by_the_memory_it_takes(tmp_path, table):
    # The same bomb with the column's type plain and the dictionary in Parquet's own encoding
    # (a dictionary page large enough for the value): nothing in the file says it is large; the
    # checking process passes its bound and is ended, and the server's own memory barely moves.
    index_with_ids(table, pa.array(["a" * 1_000_000] * 1_900), use_dictionary=True,
                   dictionary_pagesize_limit=64 << 20)
    (index,) = (table / table_layout.INCONCLUSIVE_DIR).rglob("*.parquet")
    assert pq.ParquetFile(index).metadata.row_group(0).total_byte_size < 16 << 20  # what the footer says
    bomb = tmp_path / "bomb.zip"
    bomb.write_bytes(zip_folder(table.parent))
    got = subprocess.run([sys.executable, "-c", UPLOAD, str(bomb), str(tmp_path / "app.db")],
                         capture_output=True, text=True, timeout=300, cwd=ROOT)
    said = json.loads(got.stdout.splitlines()[-1])
    assert said["refused"] is not None and "MiB of memory" in said["refused"], got.stderr
    grown, size = said["grown"], bomb.stat().st_size
    assert grown < 64 << 20, f"{grown:,} bytes more in the server for a {size:,}-byte upload"


UPLOAD = """
import json, resource, sys
from scoring.workspace import views
data = open(sys.argv[1], "rb").read()
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
try:
    views.unpack_table(sys.argv[2], "bomb.zip", data)
    refused = None
except Exception as exc:
    refused = f"{type(exc).__name__}: {exc}"
print(json.dumps({"refused": refused, "grown": (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * 1024}))
"""


def test_a_check_past_its_memory_bound_is_a_refusal(tmp_path, table, monkeypatch):
    monkeypatch.setattr(vetting_process, "MAX_VETTING_RSS", 1 << 20)  # less than any interpreter takes
    with pytest.raises(InputError, match=r"took more than 1 MiB of memory .* refused as a likely bomb"):
        views.unpack_table(tmp_path / "app.db", "nightly.zip", zip_folder(table.parent))
    assert views.uploaded_tables(tmp_path / "app.db").tables == ()


def test_a_check_past_its_time_bound_is_a_refusal(tmp_path, table, monkeypatch):
    monkeypatch.setattr(vetting_process, "VETTING_SECONDS", 0.0)
    with pytest.raises(InputError, match=r"checking it took longer than 0 s: refused"):
        views.unpack_table(tmp_path / "app.db", "nightly.zip", zip_folder(table.parent))


def test_a_checking_process_that_dies_is_a_refusal(tmp_path, table, monkeypatch):
    # As a decoder that crashes on a malformed part ends the child (here: a child that exits at once).
    monkeypatch.setattr(vetting_process.sys, "executable", "/bin/false")
    with pytest.raises(InputError, match=r"ended without an answer \(the checking process exited with code 1\)"):
        views.unpack_table(tmp_path / "app.db", "nightly.zip", zip_folder(table.parent))


def test_the_engines_own_table_passes_the_check_in_its_process(table):
    assert vetting_process.vet_upload(str(table), str(table.parent)) is None
    assert vetting_process.vet_upload(str(table / "nothing-here"), str(table.parent)) is not None  # the child's answer


def test_one_process_checks_a_listing_and_a_bomb_costs_only_itself(tmp_path, table, monkeypatch):
    """A listing's tables are checked by one child; a table it was ended on is checked again alone
    (what the tables before it left in memory is not its fault) and refused, and the tables after
    it are checked by a new child and pass."""
    honest = str(table)
    bomb_copy = tmp_path / "bomb" / "table"
    shutil.copytree(table, bomb_copy)
    index_with_ids(bomb_copy, pa.array(["a" * 1_000_000] * 1_900), use_dictionary=True,
                   dictionary_pagesize_limit=64 << 20)
    started = []
    real = subprocess.Popen
    monkeypatch.setattr(vetting_process.subprocess, "Popen", lambda *a, **k: started.append(a) or real(*a, **k))
    assert vetting_process.vet_uploads([(honest, str(table.parent))] * 3) == [None, None, None]
    assert len(started) == 1
    started.clear()
    got = vetting_process.vet_uploads([(honest, str(table.parent)), (str(bomb_copy), str(bomb_copy.parent)),
                                       (honest, str(table.parent))])
    assert got[0] is None and got[2] is None and "MiB of memory" in (got[1] or ""), got
    assert len(started) == 3  # the first child (ended on the bomb), the bomb alone, the rest


def test_no_more_checking_processes_run_at_once_than_the_bound(monkeypatch):
    """The fourth attack: eight members uploading at once ran eight checking processes, each
    within its own bound; the rest wait their turn."""
    import threading
    import time

    running, most = [0], [0]
    lock = threading.Lock()

    def child(tables):
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        time.sleep(0.2)
        with lock:
            running[0] -= 1
        return [None] * len(tables)

    monkeypatch.setattr(vetting_process, "_vet_in_child", child)
    threads = [threading.Thread(target=vetting_process.vet_uploads, args=([("t", "r")],)) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert most[0] == vetting_process.MAX_CHECKS_AT_ONCE


def test_a_checking_process_whose_parent_is_gone_ends_at_once():
    """The fifth attack: a server stopped mid-check left its checking child decoding a bomb with
    nothing to watch its bounds. The child dies with its parent; one started for a parent that
    is already gone ends before it reads anything."""
    env = dict(os.environ, LITMUS_VETTING_PARENT="999999999")
    got = subprocess.run([sys.executable, "-m", vetting_process.__name__], input=b"[]", capture_output=True, env=env,
                         cwd=ROOT, timeout=120)
    assert got.returncode == 1 and got.stdout == b""
