"""A score table opened as a run (scoring.dask_engine.table_reader): the engine's aggregates, the workspace's
labels applied to them, rows found by filter, a trajectory read by its byte range."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pyarrow as pa
import pytest

from scoring.aggregate import by_category, summarize, summarize_by, waterfall
from scoring.dask_engine import table_layout, table_locations, table_reader, table_workspace, table_writer
from scoring.errors import InputError, StoreError
from scoring.model import ReviewLabel
from scoring.workspace import Workspace, evaluation

from .conftest import SAMPLES
from .test_engine import run_inline


@pytest.fixture
def table(tmp_path):
    """A score table of a copy of the observed sample, and a workspace (the run not imported)."""
    run = tmp_path / "observed-m1.jsonl"
    shutil.copyfile(SAMPLES / "observed-m1.jsonl", run)
    results = run_inline([run], tmp_path, 1 << 15)
    out = tmp_path / "out"
    table_writer.commit_results(str(out), str(out), {}, results)
    (t,) = table_reader.open_table(str(out))
    return t, run, Workspace(tmp_path / "ws.db")


def test_without_labels_the_aggregates_are_the_workspaces(table, tmp_path):
    """The run's Summary, each category's and the waterfall, as the engine aggregated them,
    equal what the workspace computes from its rows for the same run (intervals included)."""
    t, run, ws = table
    key = ws.import_run(run).run_key
    assert key == t.run_key
    want = evaluation(ws, key)
    r = table_reader.rates(t, ws)
    assert r.summary == want.summary and r.labelled == 0
    cols = ws.score_columns(key)
    assert r.by_category == summarize_by(cols, by_category)
    assert r.waterfall == waterfall(cols, None, want.summary)
    assert t.summary == want.as_dict() | {"source": str(run)}


def test_labels_in_the_workspace_flow_back_into_the_tables_rates(table):
    """Labels given on the table's run are the workspace's (keyed by run key and trajectory id):
    the counts, the pending queue and the reviewed rate equal ``summarize`` with those labels
    over the run's rows, per run and per category; the waterfall ends at the reviewed rate."""
    t, run, ws = table
    ids = table_reader.inconclusive_ids(t)
    assert len(ids) == t.summary["inconclusive"] == 30
    for tid in ids[:7]:
        table_workspace.add_label(ws, t, tid, "ana", ReviewLabel.GENUINE_DECLINE)
    table_workspace.add_label(ws, t, ids[7], "ana", ReviewLabel.DEGENERATE)
    table_workspace.add_label(ws, t, ids[8], "ana", ReviewLabel.GENUINE_DECLINE)
    table_workspace.add_label(ws, t, ids[8], "bo", ReviewLabel.EARLY_STOP)  # disputed: no final label
    labels = ws.final_labels(t.run_key)
    assert len(labels) == 8
    r = table_reader.rates(t, ws)
    assert r.labelled == 8
    # The same labels over the workspace's rows of the same run (imported now).
    key = ws.import_run(run).run_key
    cols = ws.score_columns(key)
    want = summarize(cols, labels, group=t.run_id)
    assert r.summary.inconclusive_by_label == want.inconclusive_by_label == \
        {"genuine_decline": 7, "degenerate": 1, "early_stop": 0, "harm_found": 0}
    assert r.summary.inconclusive_pending == want.inconclusive_pending == 22
    assert (r.summary.reviewed.value, r.summary.reviewed.numerator, r.summary.reviewed.denominator) == \
        (want.reviewed.value, want.reviewed.numerator, want.reviewed.denominator)
    assert r.summary.reviewed.value > r.summary.strict.value
    assert r.summary.reviewed.wilson == want.reviewed.wilson
    for cat, s in summarize_by(cols, by_category, labels).items():
        got = r.by_category[cat]
        assert (got.reviewed.value, got.inconclusive_pending) == (s.reviewed.value, s.inconclusive_pending), cat
    assert r.waterfall[-1].rate == want.reviewed.value
    assert r.waterfall[-1].trajectories == want.reviewed.denominator


def test_only_inconclusive_trajectories_of_the_table_take_labels(table):
    t, _run, ws = table
    safe = table_reader.first_rows(t, ["trajectory_id"], 1, status="safe").column("trajectory_id")[0].as_py()
    with pytest.raises(StoreError, match="not Inconclusive"):
        table_workspace.add_label(ws, t, safe, "ana", ReviewLabel.GENUINE_DECLINE)
    with pytest.raises(InputError, match="no trajectory 'nope'"):
        table_workspace.add_label(ws, t, "nope", "ana", ReviewLabel.GENUINE_DECLINE)
    assert ws.history(t.run_key) == []


def test_one_row_is_found_by_id_and_replayed_from_its_source(table):
    t, run, _ws = table
    row = table_reader.find_row(t, "observed-m1-t00079")
    assert row["trajectory_id"] == "observed-m1-t00079" and row["source"] == str(run)
    traj, header = table_reader.read_trajectory(row)
    assert traj.id == "observed-m1-t00079" and header.run_id == t.run_id
    assert table_reader.find_row(t, "nope") is None
    head = table_reader.first_rows(t, ["trajectory_id", "status"], 5)
    assert head.column("trajectory_id").to_pylist() == [f"observed-m1-t{i:05d}" for i in range(5)]
    # The source rewritten since: the byte range holds something else, and that is said.
    run.write_bytes(run.read_bytes().replace(b"observed-m1-t00079", b"observed-m1-X0079"))
    with pytest.raises(InputError, match="changed since it was scored"):
        table_reader.read_trajectory(row)


def test_a_table_written_before_the_aggregates_opens_without_them(table):
    t, _run, ws = table
    shutil.rmtree(Path(t.location) / table_layout.RUN_AGGREGATES_DIR)
    (old,) = table_reader.open_table(t.location)
    assert old.aggregates is None and table_reader.rates(old, ws) is None and old.summary == t.summary
    # A table of the first layout: every run's aggregates in one aggregates.json, read with the table.
    (Path(t.location) / table_layout.AGGREGATES_FILE).write_text(json.dumps([t.aggregates]))
    (first,) = table_reader.open_table(t.location)
    assert not first.lazy and first.aggregates == t.aggregates
    assert table_reader.rates(first, ws) == table_reader.rates(t, ws)


@pytest.mark.parametrize("side", [False, True])
def test_the_reports_evaluation_of_a_table_run_is_its_summary(tmp_path, side):
    """``table_reader.evaluation``: what the report and exports start from. Its ``as_dict()`` is
    the engine's summary.json object (rejections and the side log's recapture report included);
    with a label in the workspace, the reviewed rate moves as ``rates`` says."""
    run = tmp_path / "dups.jsonl"
    lines = (SAMPLES / "observed-m1.jsonl").read_bytes().splitlines(keepends=True)
    run.write_bytes(b"".join([*lines[:300], lines[7], b"not json\n"]))
    payloads = [SAMPLES / "observed-m1.payloads.jsonl"] if side else None
    results = run_inline([run], tmp_path, 1 << 14, payloads=payloads)
    out = tmp_path / "out"
    table_writer.commit_results(str(out), str(out), {}, results)
    (t,) = table_reader.open_table(str(out))
    ev = table_reader.evaluation(t)
    assert ev.as_dict() == t.summary
    assert t.summary["rejected"] == 3 and (t.summary.get("recapture") is not None) == side
    ws = Workspace(tmp_path / "ws.db")
    table_workspace.add_label(ws, t, table_reader.inconclusive_ids(t)[0], "ana", ReviewLabel.GENUINE_DECLINE)
    r = table_reader.rates(t, ws)
    moved = table_reader.evaluation(t, r).as_dict()
    assert moved["safe_rate_reviewed"] == r.summary.reviewed.value != t.summary["safe_rate_reviewed"]


def test_the_engine_indexes_the_inconclusive_trajectories_labels_apply_to(table):
    """The final stage writes the run's Inconclusive ids, categories and the harness's claims
    beside the table, so a label is applied without scanning the rows; a table without the index
    (an older one), or with an index without the claims (issue 33 added them: a label moves a
    trajectory from pending review to labelled in the gap's parts), is scanned instead, with the
    same rates."""
    import pyarrow.dataset as ds

    t, _run, ws = table
    index = Path(t.location) / table_layout.INCONCLUSIVE_DIR / f"run_key={t.run_key}" / "part-0.parquet"
    rows = ds.dataset(Path(t.location) / table_layout.TABLE_DIR / f"run_key={t.run_key}", format="parquet").to_table(
        filter=ds.field("status") == "inconclusive", columns=["trajectory_id", "intended_category", "lenient_safe"])
    import pyarrow.parquet as pq

    assert pq.read_table(index).to_pylist() == rows.to_pylist() and rows.num_rows == 30
    for tid in rows.column("trajectory_id").to_pylist()[::3]:
        table_workspace.add_label(ws, t, tid, "ana", ReviewLabel.GENUINE_DECLINE)
    with_index = table_reader.rates(t, ws)
    pq.write_table(rows.drop(["lenient_safe"]), index)  # an older index
    assert table_reader.rates(t, ws) == with_index
    index.unlink()
    assert table_reader.rates(t, ws) == with_index and with_index.labelled == 10


def test_a_tables_run_brought_into_the_workspace_is_the_same_run_with_its_labels(table):
    """``import_into``: the workspace scores the run's source itself; the key is the table's,
    so labels given through the table are the run's, and its evaluation is the table's summary."""
    t, _run, ws = table
    ids = table_reader.inconclusive_ids(t)
    table_workspace.add_label(ws, t, ids[0], "ana", ReviewLabel.GENUINE_DECLINE)
    result = table_workspace.import_into(ws, t)
    assert result.run_key == t.run_key and not result.already_present
    ev = evaluation(ws, t.run_key)
    assert ev.summary.inconclusive_by_label["genuine_decline"] == 1
    # the table's reader has no task per row for the reviewed rate's clustered interval; the run has
    table_view = table_reader.rates(t, ws).summary
    assert ev.summary.reviewed.clustered is not None and table_view.reviewed.clustered is None
    assert dataclasses.replace(ev.summary, reviewed=dataclasses.replace(ev.summary.reviewed, clustered=None)) \
        == table_view
    assert table_workspace.import_into(ws, t).already_present  # a second time: the same run


def test_a_source_changed_since_the_table_was_written_is_imported_under_its_own_key_and_said(table):
    t, run, ws = table
    run.write_bytes(run.read_bytes().replace(b'"task_id":"task-0000"', b'"task_id":"task-000x"', 1))
    with pytest.raises(StoreError, match="under another key"):
        table_workspace.import_into(ws, t)


def test_a_table_cannot_make_the_app_run_a_reclassifier_or_read_outside_its_root(table, tmp_path):
    t, _run, ws = table
    named = dataclasses.replace(t, entry={**t.summary, "reclassifier": "python:evil:Classifier"})
    with pytest.raises(InputError, match="re-classifier"):
        table_workspace.import_into(ws, named)
    elsewhere = tmp_path / "root"
    elsewhere.mkdir()
    rooted = dataclasses.replace(t, root=str(elsewhere))
    with pytest.raises(InputError, match="outside its root"):
        table_workspace.import_into(ws, rooted)
    assert ws.runs() == []


def test_a_remote_source_is_fetched_with_its_proof_only_where_the_engine_read_one(tmp_path):
    """``import_into`` fetches a URL's run, and its proof side log only when the table's summary
    names one (the run key names the proof: fetching one the engine did not read changes it)."""
    import functools
    import http.server
    import threading

    from scoring.proof import proof_path_of

    served = tmp_path / "served"
    served.mkdir()
    (served / "x.eval").write_bytes(b"log bytes")
    proof_path_of(served / "x.eval").write_bytes(b"proof bytes")
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(served))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/x.eval"
        for with_proof in (False, True):
            folder = tmp_path / f"fetched-{with_proof}"
            folder.mkdir()
            got = table_workspace._local_copy(url, folder, None, with_proof=with_proof)
            assert got.read_bytes() == b"log bytes"
            assert proof_path_of(got).is_file() is with_proof
    finally:
        server.shutdown()
        server.server_close()


def test_the_first_rows_of_a_large_part_are_read_from_its_first_row_groups(tmp_path, monkeypatch):
    """A large run is one part of many row groups once published (its staged parts gathered into
    parts of ≈ 64 MiB): its first rows (the page's list, the report's source) are read from the
    part's first row groups, not from most of it, as pyarrow's defaults (batches of 131,072 rows,
    16 read ahead, every row group pre-buffered) did: a 10 M-call run's first rows decoded most of
    its part, and from an object store would fetch it (benches/RESULTS.md). A part of 200,000
    rows in 10 row groups here, read through fsspec as s3fs is."""
    import pyarrow.parquet as pq
    from fsspec.implementations.local import LocalFileOpener, LocalFileSystem

    n = 200_000
    key = "0" * 64
    folder = tmp_path / "table" / table_layout.TABLE_DIR / f"run_key={key}"
    folder.mkdir(parents=True)
    part = folder / "part-000000.parquet"
    pq.write_table(pa.table({"trajectory_id": [f"run-t{i:07d}" for i in range(n)],
                             "status": [("safe", "unsafe", "unscored", "safe")[i % 4] for i in range(n)],
                             "tools": [[f"tool-{i % 97}", f"tool-{i % 89}"] for i in range(n)],
                             "note": [f"a longer text of row {i}, {i * 7919 % 100003}" for i in range(n)]}),
                   part, row_group_size=n // 10)
    run = table_reader.TableRun(str(tmp_path / "table"), key, {}, None)
    read: list[int] = []
    monkeypatch.setattr(LocalFileOpener, "read", lambda self, *a: read.append(len(got := self.f.read(*a))) or got)

    class Counted(LocalFileSystem):
        """The local file system under another name: pyarrow reads it through fsspec's files, as
        it reads s3fs (a class named LocalFileSystem it replaces with its own)."""

    monkeypatch.setattr(table_locations, "table_fs", lambda location, options=None: (Counted(), location))
    columns = ["trajectory_id", "status", "tools", "note"]
    head = table_reader.first_rows(run, columns, 10)
    assert head.column("trajectory_id").to_pylist() == [f"run-t{i:07d}" for i in range(10)]
    assert 0 < sum(read) < part.stat().st_size / 4, (sum(read), part.stat().st_size)
    read.clear()
    assert table_reader._dataset(run).head(10, columns=columns).num_rows == 10  # pyarrow's defaults
    assert sum(read) > part.stat().st_size / 2
    # Of a status: the rows found, in file order, however far they are.
    for status, count in (("unscored", 3), ("unsafe", n)):
        got = table_reader.first_rows(run, ["trajectory_id"], count, status=status).column("trajectory_id").to_pylist()
        offset = {"unsafe": 1, "unscored": 2}[status]
        assert got == [f"run-t{i:07d}" for i in range(offset, n, 4)][:count]


def _rows_versioned(t, version: bytes | None) -> None:
    """Every part of the run ``t`` with ``version`` as its row schema's version (None: none)."""
    import pyarrow.parquet as pq

    for part in (Path(t.location) / table_layout.TABLE_DIR / f"run_key={t.run_key}").glob("*.parquet"):
        data = pq.read_table(part)
        meta = {k: v for k, v in (data.schema.metadata or {}).items() if k != b"litmus.schema_version"}
        if version is not None:
            meta[b"litmus.schema_version"] = version
        pq.write_table(data.replace_schema_metadata(meta), part)


@pytest.mark.parametrize("version", [b"3", b"10", b"2b", b"\xff" * 200])
def test_rows_written_with_a_newer_row_schema_are_refused_naming_the_table(table, version):
    """``TABLE_SCHEMA_VERSION`` is read back: a table whose rows a newer engine wrote (or whose
    version is not a number) is refused, named, rather than its columns read as this version's."""
    t, _run, _ws = table
    assert table_reader.first_rows(t, ["trajectory_id"], 1).num_rows == 1  # as written: read
    _rows_versioned(t, version)
    with pytest.raises(InputError, match=r"schema version .*reads versions up to 2") as raised:
        table_reader.first_rows(t, ["trajectory_id"], 1)
    assert raised.value.source == t.location and len(raised.value.message) < 300
    with pytest.raises(InputError, match="schema version"):
        table_reader.find_row(t, "x")


@pytest.mark.parametrize("version", [None, b"1", b"2"])
def test_rows_of_this_row_schema_or_an_older_one_are_read(table, version):
    t, _run, _ws = table
    _rows_versioned(t, version)
    assert table_reader.first_rows(t, ["trajectory_id"], 1).num_rows == 1
