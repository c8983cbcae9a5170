"""Small runs on object storage (scoring.dask_engine): a fleet of them is bound by requests, not
bytes. A small run is read whole in one request by the task that plans and scores it; a glob's
folder listing tells which runs have side logs; in a table the fleet created, a run's files are
written straight into the table, never staged. The moto server's request log is what the engine
asked of the store."""

from __future__ import annotations

import collections
import json
import re
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from scoring.dask_engine import fleet, planning, table_layout, table_reader

from .conftest import SAMPLES
from .s3_tables import moto_server
from .test_engine import local_json

OBSERVED = SAMPLES / "observed-m1.jsonl"
SIDE = SAMPLES / "observed-m1.payloads.jsonl"
COMPARE = SAMPLES / "compare-m2.jsonl"


def head(path: Path, into: Path, lines: int = 60) -> Path:
    """The run's header and first records, a small run (under ``fleet.SMALL_RUN_BYTES``)."""
    into.mkdir(parents=True, exist_ok=True)
    (into / path.name).write_bytes(b"".join(path.read_bytes().splitlines(keepends=True)[:lines]))
    return into / path.name


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    log = tmp_path_factory.mktemp("moto") / "moto.log"
    with moto_server(log) as options:
        yield options, log


def requests(log: Path, since: int) -> list[tuple[str, str]]:
    """(method, path) of each request the server logged after its first ``since`` lines."""
    lines = log.read_text(errors="replace").splitlines()[since:]
    found = (re.search(r'"(GET|HEAD|PUT|POST|DELETE) (\S+) HTTP', re.sub(r"\x1b\[[0-9;]*m", "", line))
             for line in lines)
    return [m.groups() for m in found if m]


def test_a_fleet_of_small_runs_in_s3_reads_each_once_and_writes_its_table_unstaged(s3, inproc_client, tmp_path):
    """Each run object is asked for once (one GET, no HEAD, no listing of it); a run without a
    side log is never asked for one (the glob's listing said so), the one with a side log has it
    joined; nothing goes through ``_staging`` of the new table; each run's rows name the run where
    it lives (replay reads there), and the numbers are the local path's. Again into the same
    table, each run costs its record (one GET) and its size (one HEAD), and is skipped."""
    import s3fs

    options, log = s3
    fs = s3fs.S3FileSystem(**options)
    fs.mkdir("small")
    observed, compare = head(OBSERVED, tmp_path / "in"), head(COMPARE, tmp_path / "in")
    shutil.copyfile(SIDE, tmp_path / "in" / SIDE.name)
    fs.put(str(tmp_path / "in") + "/", "small/in/", recursive=True)
    since = len(log.read_text(errors="replace").splitlines())
    sides: dict[str, str] = {}
    runs = planning.expand_inputs(["s3://small/in/*.jsonl"], (), options, sides=sides)
    assert runs == ["s3://small/in/compare-m2.jsonl", "s3://small/in/observed-m1.jsonl"]
    assert sides == {"s3://small/in/compare-m2.jsonl": planning.NO_SIDE_LOG,
                     "s3://small/in/observed-m1.jsonl": "s3://small/in/observed-m1.payloads.jsonl"}
    res = fleet.score_runs(runs, inproc_client, out="s3://small/table", storage_options=options,
                            auto_payloads=True, payloads=[sides[r] for r in runs])
    assert [r.status for r in res] == ["done", "done"], [r.error for r in res]
    asked = collections.Counter(requests(log, since))
    for name in ("compare-m2.jsonl", "observed-m1.jsonl"):
        assert asked[("GET", f"/small/in/{name}")] == 1, asked
        assert asked[("HEAD", f"/small/in/{name}")] == 0, asked
    assert not any("compare-m2.payloads" in path for _m, path in asked), asked  # never looked for
    assert not any(m == "PUT" and "_staging" in path for m, path in asked), asked  # nothing staged
    local = json.dumps(local_json(compare, observed, auto_payloads=True)).replace(str(tmp_path / "in"), "s3://small/in")
    want = {d["run_id"]: d for d in json.loads(local)}  # the local path's, its files named as in the bucket
    assert want["observed-m1"]["recapture"]["applied"] > 0  # the side log was joined
    for r in res:
        assert r.summary == want[r.summary["run_id"]]
    parts = fs.glob("small/table/trajectories/*/*.parquet")
    assert len(parts) == 2
    for part in parts:
        with fs.open(part, "rb") as fh:
            sources = set(pq.read_table(fh, columns=["source"]).column("source").to_pylist())
        assert len(sources) == 1 and sources.pop() in runs  # the run in the bucket, not the worker's copy
    since = len(log.read_text(errors="replace").splitlines())
    again = fleet.score_runs(runs, inproc_client, out="s3://small/table", storage_options=options,
                              auto_payloads=True, payloads=[sides[r] for r in runs])
    assert [r.status for r in again] == ["skipped", "skipped"]
    asked = collections.Counter(requests(log, since))
    for name in ("compare-m2.jsonl", "observed-m1.jsonl"):  # a run in the table: its record and its size
        assert (asked[("GET", f"/small/in/{name}")], asked[("HEAD", f"/small/in/{name}")]) == (0, 1), asked
    records = [(m, path) for (m, path), n in asked.items() for _ in range(n) if "/table/runs/" in path]
    assert sorted(m for m, _p in records) == ["GET", "GET"], asked
    row = table_reader.read_table("s3://small/table", options).to_pylist()[0]
    traj = table_reader.trajectory_at(row["source"], row["offset"], row["length"], options)
    assert traj.id == row["trajectory_id"]  # replay reads the row's bytes from the run in the bucket


def test_a_run_larger_than_the_small_limit_is_read_where_it_is(s3, tmp_path):
    """``fetch_small`` copies a run of at most ``most`` bytes and leaves a larger one (and any
    local file) where it is."""
    import s3fs

    options, _log = s3
    fs = s3fs.S3FileSystem(**options)
    fs.mkdir("limits")
    fs.put(str(OBSERVED), "limits/observed-m1.jsonl")
    size = OBSERVED.stat().st_size
    copy = fleet.fetch_small("s3://limits/observed-m1.jsonl", options, str(tmp_path), size)
    assert copy is not None and Path(copy).read_bytes() == OBSERVED.read_bytes()
    assert fleet.fetch_small("s3://limits/observed-m1.jsonl", options, str(tmp_path), size - 1) is None
    assert fleet.fetch_small(str(OBSERVED), {}, str(tmp_path), size) is None
    assert fleet.fetch_small("s3://limits/missing.jsonl", options, str(tmp_path), size) is None
    plan = planning.plan_run("s3://limits/observed-m1.jsonl", options, read_from=copy)
    assert (plan.url, plan.source, plan.read_from) == ("s3://limits/observed-m1.jsonl", "s3://limits/observed-m1.jsonl",
                                                       copy)


def test_a_glob_lists_each_folder_once_for_side_logs(tmp_path):
    for name in ("a.jsonl", "a.payloads.jsonl", "b.jsonl"):
        (tmp_path / name).write_text("{}\n")
    sides: dict[str, str] = {}
    runs = planning.expand_inputs([str(tmp_path / "*.jsonl")], sides=sides)
    assert runs == [str(tmp_path / "a.jsonl"), str(tmp_path / "b.jsonl")]
    assert sides == {str(tmp_path / "a.jsonl"): str(tmp_path / "a.payloads.jsonl"),
                     str(tmp_path / "b.jsonl"): planning.NO_SIDE_LOG}
    manifest = tmp_path / "runs.txt"
    manifest.write_text("b.jsonl\n")
    sides.clear()
    planning.expand_inputs([], [str(manifest)], sides=sides)
    assert sides == {}  # a manifest's runs are not listed: their tasks look for side logs


def test_a_source_scored_again_with_new_content_leaves_no_rows_of_its_old_key(inproc_client, tmp_path):
    """The same source, changed, scored again into its table: its new key replaces the old one,
    whose rows, Inconclusive index, aggregates and summary are removed (they would otherwise be
    read as rows of the table by any Parquet reader)."""
    run = tmp_path / "in" / "observed-m1.jsonl"
    run.parent.mkdir()
    shutil.copyfile(OBSERVED, run)
    out = tmp_path / "table"
    first = fleet.score_runs([str(run)], inproc_client, out=str(out))
    lines = OBSERVED.read_bytes().splitlines(keepends=True)
    run.write_bytes(b"".join(lines[:40]))
    second = fleet.score_runs([str(run)], inproc_client, out=str(out))
    assert [r.status for r in (*first, *second)] == ["done", "done"]
    old, new = first[0].run_key, second[0].run_key
    assert old != new
    assert json.loads((out / table_layout.KEYS_FILE).read_text()) == [new]
    for folder in (table_layout.TABLE_DIR, table_layout.INCONCLUSIVE_DIR):
        assert sorted(p.name for p in (out / folder).iterdir()) == [f"run_key={new}"]
    for folder in (table_layout.RUN_AGGREGATES_DIR, table_layout.SUMMARIES_DIR):
        assert sorted(p.name for p in (out / folder).iterdir()) == [f"{new}.json"]
    assert len(table_reader.read_table(str(out))) == second[0].rows


def test_a_small_run_given_twice_in_one_batch_is_scored_twice_alike(s3, inproc_client, tmp_path):
    """The batch's threads fetch both at once: each into a copy of its own."""
    import s3fs

    options, _log = s3
    fs = s3fs.S3FileSystem(**options)
    fs.mkdir("twice")
    fs.put(str(head(OBSERVED, tmp_path, lines=400)), "twice/observed-m1.jsonl")
    url = "s3://twice/observed-m1.jsonl"
    res = fleet.score_runs([url] * 6, inproc_client, storage_options=options, plan_batch=6)
    assert [r.status for r in res] == ["done"] * 6, [r.error for r in res]
    assert len({json.dumps(r.summary, sort_keys=True) for r in res}) == 1
