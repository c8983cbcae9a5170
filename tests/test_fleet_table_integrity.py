"""What a score table must never hold or lose, and what the engine must never read stale, found
by a review of the fleet's small-run path (fetch_small, the direct publish into a new table,
side logs known from a glob's listing, removing a replaced key's files): no rows of a run the
table does not list, nothing removed outside the table, a retry listing what was published, a
side log read again once changed, a small run scored where its copy cannot be written, a hostile
rule's text not kept; in an existing table, a run that fails while publishing takes its rows
back and a replace whose gathering fails keeps the rows the table lists."""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import pytest

from scoring.dask_engine import fleet, planning, table_layout, table_reader, table_writer

from .conftest import SAMPLES
from .s3_tables import moto_server

OBSERVED = SAMPLES / "observed-m1.jsonl"
COMPARE = SAMPLES / "compare-m2.jsonl"


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    with moto_server(tmp_path_factory.mktemp("moto") / "moto.log") as options:
        yield options


def head_lines(path: Path, lines: int) -> bytes:
    """A run's header and first records: a small run."""
    return b"".join(path.read_bytes().splitlines(keepends=True)[:lines])


def _listed_keys(out: Path) -> set[str]:
    return set(json.loads((out / table_layout.KEYS_FILE).read_text()))


def _keys_in(out: Path, folder: str) -> set[str]:
    return {p.name.removeprefix("run_key=") for p in (out / folder).iterdir()} if (out / folder).exists() else set()


@pytest.mark.parametrize("table", [
    "fresh",
    "existing",
])
def test_a_run_that_fails_to_publish_leaves_no_rows_in_the_table(inproc_client, tmp_path, monkeypatch, table):
    runs = tmp_path / "in"
    runs.mkdir()
    for path in (OBSERVED, COMPARE):
        shutil.copyfile(path, runs / path.name)
    out = tmp_path / "table"
    if table == "existing":  # written before: this fleet's runs are staged, then published
        assert [r.status for r in fleet.score_runs([str(runs / COMPARE.name)], inproc_client, out=str(out))] == [
            "done"]
    real = table_writer.write_summary
    calls = []

    def store_refuses_one_run(fs, base, run_key, summary):  # a store error on one run's summary, every try
        calls.append(run_key)
        if run_key == calls[0]:
            raise OSError("SlowDown: please reduce your request rate")
        return real(fs, base, run_key, summary)

    monkeypatch.setattr(table_writer, "write_summary", store_refuses_one_run)
    res = fleet.score_runs([str(runs / OBSERVED.name), str(runs / COMPARE.name)], inproc_client, out=str(out),
                            plan_batch=1)
    assert [r.status for r in res].count("failed") == 1, [r.error for r in res]
    listed = _listed_keys(out)
    assert listed == {r.run_key for r in res if r.status != "failed"}
    assert _keys_in(out, table_layout.TABLE_DIR) == listed  # no rows of the failed run
    assert _keys_in(out, table_layout.INCONCLUSIVE_DIR) <= listed
    assert len(table_reader.read_table(str(out))) == sum(len(table_reader.table_run(str(out), k)) for k in listed)


@pytest.mark.parametrize("beside", ["folder", "dangling link"])
def test_what_is_not_a_file_named_like_a_side_log_is_not_taken_for_one_by_a_glob(inproc_client, tmp_path, beside):
    run = tmp_path / "observed-m1.jsonl"
    shutil.copyfile(OBSERVED, run)
    side = tmp_path / "observed-m1.payloads.jsonl"
    if beside == "folder":
        side.mkdir()
    else:
        side.symlink_to(tmp_path / "gone.payloads.jsonl")
    sides: dict[str, str] = {}
    runs = planning.expand_inputs([str(tmp_path / "*.jsonl")], sides=sides)
    assert runs == [str(run)]
    res = fleet.score_runs(runs, inproc_client, auto_payloads=True, payloads=[sides.get(r) for r in runs])
    assert [r.status for r in res] == ["done"], [r.error for r in res]
    assert sides.get(str(run)) in (None, planning.NO_SIDE_LOG)  # none, or left to the task's look


class _ClientDied(Exception):
    """The client ended (Ctrl-C, its machine lost) after the fleet's runs were published, before the
    table's index was written."""


def test_a_retry_after_a_fleet_ended_before_its_index_lists_the_runs_published_content(
        inproc_client, tmp_path, monkeypatch):
    run = tmp_path / "in" / "observed-m1.jsonl"
    run.parent.mkdir()
    shutil.copyfile(OBSERVED, run)
    out = tmp_path / "table"
    (first,) = fleet.score_runs([str(run)], inproc_client, out=str(out))
    run.write_bytes(b"".join(OBSERVED.read_bytes().splitlines(keepends=True)[:40]))  # the harness rewrote it
    finish = table_writer.finish_table

    def client_dies(*args, **kwargs):
        raise _ClientDied

    monkeypatch.setattr(fleet, "finish_table", client_dies)
    with pytest.raises(_ClientDied):
        fleet.score_runs([str(run)], inproc_client, out=str(out))
    monkeypatch.setattr(fleet, "finish_table", finish)
    (retry,) = fleet.score_runs([str(run)], inproc_client, out=str(out))  # the user runs the same command again
    assert retry.status == "skipped"
    assert retry.run_key != first.run_key  # its record: the content the table published
    assert _listed_keys(out) == {retry.run_key}
    assert json.loads((out / table_layout.SUMMARY_FILE).read_text()) == [retry.recorded]
    assert _keys_in(out, table_layout.TABLE_DIR) == {retry.run_key}


def test_checking_large_hostile_rules_keeps_no_large_memory():
    import tracemalloc

    import re2

    from scoring import taxonomy_rules

    taxonomy_rules._CHECKED.clear()
    tracemalloc.start()
    try:
        before, _peak = tracemalloc.get_traced_memory()
        for i in range(48):  # a few dozen runs' headers, each with one large rule of its own
            taxonomy_rules.check_rule(f"(?i)run{i:04d}" + "x" * 400_000)
        re2.purge()  # RE2's own cache of compiled patterns (its last 128, whoever compiled them) is not ours
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
        taxonomy_rules._CHECKED.clear()
    assert held < 4_000_000, f"{held:,} bytes held after the rules were checked"


def test_a_worker_that_cannot_write_its_copy_reads_a_small_run_where_it_is(s3, inproc_client, tmp_path, monkeypatch):
    import errno
    import os

    import s3fs

    fs = s3fs.S3FileSystem(**s3)
    fs.mkdir("nocopy")
    fs.pipe("nocopy/run.jsonl", b"".join(OBSERVED.read_bytes().splitlines(keepends=True)[:40]))

    def disk_full(*args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(tempfile, "mkstemp", disk_full)  # the worker's temp disk is full
    (res,) = fleet.score_runs(["s3://nocopy/run.jsonl"], inproc_client, storage_options=s3)
    assert res.status == "done", res.error


def test_a_table_whose_index_names_a_path_for_a_key_removes_nothing_outside_it(inproc_client, tmp_path):
    run = tmp_path / "in" / "observed-m1.jsonl"
    run.parent.mkdir()
    shutil.copyfile(OBSERVED, run)
    out = tmp_path / "table"
    assert [r.status for r in fleet.score_runs([str(run)], inproc_client, out=str(out))] == ["done"]
    precious = tmp_path / "precious"  # beside the table: another project's files
    precious.mkdir()
    (precious / "notes.txt").write_text("not the table's")
    (out / table_layout.TABLE_DIR / "run_key=x").mkdir()
    (out / table_layout.KEYS_FILE).write_text(json.dumps(["x/../../../precious"]))  # the table's index, as shared
    (again,) = fleet.score_runs([str(run)], inproc_client, out=str(out), replace=True)
    assert again.status == "done", again.error
    assert (precious / "notes.txt").read_text() == "not the table's"


def test_a_bucket_table_whose_index_names_a_glob_for_a_key_keeps_its_rows(s3, inproc_client, tmp_path):
    import s3fs

    fs = s3fs.S3FileSystem(**s3)
    fs.mkdir("globkey")
    fs.pipe("globkey/in/a.jsonl", head_lines(OBSERVED, 40))
    fs.pipe("globkey/in/b.jsonl", head_lines(COMPARE, 40))
    runs = ["s3://globkey/in/a.jsonl", "s3://globkey/in/b.jsonl"]
    out = "s3://globkey/table"
    first = fleet.score_runs(runs, inproc_client, out=out, storage_options=s3)
    assert [r.status for r in first] == ["done", "done"], [r.error for r in first]
    fs.pipe("globkey/table/" + table_layout.KEYS_FILE, json.dumps(["*", first[1].run_key]).encode())  # a damaged index
    (again,) = fleet.score_runs(runs[:1], inproc_client, out=out, storage_options=s3, replace=True)
    assert again.status == "done", again.error
    fs.invalidate_cache()
    kept = {p.rpartition("run_key=")[2] for p in fs.glob(f"globkey/table/{table_layout.TABLE_DIR}/run_key=*")}
    assert kept == {first[0].run_key, first[1].run_key}


def test_a_replace_that_fails_to_gather_keeps_the_rows_the_table_lists(inproc_client, tmp_path, monkeypatch):
    run = tmp_path / "in" / "observed-m1.jsonl"
    run.parent.mkdir()
    shutil.copyfile(OBSERVED, run)
    out = tmp_path / "table"
    (first,) = fleet.score_runs([str(run)], inproc_client, out=str(out))
    assert first.status == "done" and first.run_key is not None, first.error
    before = len(table_reader.read_table(str(out)))

    def store_fails(*args, **kwargs):
        raise OSError("SlowDown: please reduce your request rate")

    monkeypatch.setattr(table_writer, "gather_parts", store_fails)
    (again,) = fleet.score_runs([str(run)], inproc_client, out=str(out), replace=True)
    assert again.status == "failed"
    assert _listed_keys(out) == {first.run_key}  # still listed, as before the fleet
    assert _keys_in(out, table_layout.TABLE_DIR) == {first.run_key}, "the listed run's rows are gone"
    assert len(table_reader.table_run(str(out), first.run_key)) == before == first.rows


def test_a_side_log_changed_between_fleets_is_read_again_by_the_same_worker(inproc_client, tmp_path):
    from .test_engine import local_json

    run = tmp_path / "observed-m1.jsonl"
    side = tmp_path / "observed-m1.payloads.jsonl"
    shutil.copyfile(OBSERVED, run)
    shutil.copyfile(SAMPLES / "observed-m1.payloads.jsonl", side)
    (first,) = fleet.score_runs([str(run)], inproc_client, auto_payloads=True)
    lines = side.read_bytes().splitlines(keepends=True)
    side.write_bytes(b"".join(lines[: len(lines) // 2]))  # the harness rewrote it: half its payloads
    (again,) = fleet.score_runs([str(run)], inproc_client, auto_payloads=True)
    (want,) = local_json(run, auto_payloads=True)
    assert first.status == again.status == "done"
    assert again.summary == want
