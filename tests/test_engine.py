"""The Dask engine (scoring.dask_engine, ``score --engine dask``): the same results as the local path.

Unit tests run the engine's task functions in this process (a graph executed by hand); the
``dask``-marked tests start a real scheduler and two single-threaded workers on 127.0.0.1
(and a moto S3 server), and always tear them down.
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from scoring import errors, ingest
from scoring.cli import main
from scoring.dask_engine import cluster as dask_cluster  # the fixture named cluster is a Dask cluster
from scoring.dask_engine import (
    fleet,
    planning,
    run_results,
    table_layout,
    table_reader,
    table_writer,
    tasks,
    workspace_scorer,
)
from scoring.report import evaluate
from scoring.rows import ROW_COLUMNS
from scoring.workspace import Workspace

from .conftest import ROOT, SAMPLES
from .s3_tables import free_port as _free_port
from .s3_tables import moto_server, stop
from .s3_tables import tool as _tool

OBSERVED = SAMPLES / "observed-m1.jsonl"
COMPARE = SAMPLES / "compare-m2.jsonl"
FIELDS = ("run_key", *ROW_COLUMNS)


def cli(*args: str):
    return CliRunner().invoke(main, list(args))


def run_inline(paths, tmp: Path, block_bytes: int, reclassifier=None, payloads=None) -> list[run_results.RunResult]:
    """The engine's graph executed in this process, task by task, with the table written to
    ``tmp / 'out'`` (what the cluster does, without one)."""
    out, results = tmp / "out", []
    for i, p in enumerate(paths):
        plan = planning.plan_run(str(p), None, str(payloads[i]) if payloads else None)
        blocks = [tasks.score_block(plan, s, e, reclassifier) for s, e in planning.block_bounds(plan, block_bytes)]
        res = tasks.finish_run(plan, tasks.file_sha256(plan, *blocks), reclassifier, *map(tasks.digest, blocks),
                                aggregates=True)
        assert res.error is None, res.error
        assert sum(table_writer.write_part(b, res, i, str(out), {}, plan.url) for i, b in enumerate(blocks)) == res.rows
        results.append(res)
    return results


def table_rows(out: Path | str, run_key: str, storage_options=None) -> list[tuple]:
    rows = map(table_layout.row_text, table_reader.read_table(str(out), storage_options).to_pylist())
    return [tuple(r[c] for c in FIELDS) for r in rows if r["run_key"] == run_key]


def workspace_rows(tmp: Path, path: Path, payloads: Path | None = None) -> tuple[str, list[tuple]]:
    ws = Workspace(tmp / "ws.db")
    key = ws.import_run(path, payloads=payloads).run_key
    return key, [tuple(r[c] for c in FIELDS) for r in ws.trajectory_rows(key)]


def local_json(*paths: Path, auto_payloads: bool = False) -> list[dict]:
    """The local path's ``score --json`` objects (without a side log found beside a run, unless
    ``auto_payloads``: the engine's functions are given side logs explicitly)."""
    res = cli("score", *map(str, paths), "--json", *(() if auto_payloads else ("--no-auto-payloads",)))
    assert res.exit_code == 0, res.output
    return [json.loads(line) for line in res.stdout.splitlines()]


# --- the split convention and the final stage, without a cluster ------------------------------


def test_nominal_ranges_own_every_line_exactly_once():
    """Blocks own the lines that start in their range: together they hold every byte after the
    header once, at any block size (lines longer than a block, blank lines, CRLF, no final
    newline)."""
    header = b'{"record":"run"}\n'
    body = b"".join([b"a\n", b"\n", b"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb\n", b"cc\r\n", b"\n", b"\n",
                     b"d" * 300 + b"\n",
                     b"e\n", b"ffff"])
    data = header + body
    plan = planning.RunPlan("mem", "mem", header.rstrip(), 1, len(header), len(data), {})
    for block in (1, 2, 3, 5, 7, 16, 64, 299, 300, 301, 10_000):
        pieces = [planning.read_owned(io.BytesIO(data), s, e, s == plan.header_end)
                  for s, e in planning.block_bounds(plan, block)]
        assert b"".join(d for _, d in pieces) == body, block
        pos = len(header)
        for offset, chunk in pieces:
            if chunk:
                assert offset == pos, block  # each piece starts where the last one stopped
                pos += len(chunk)
        assert sum(d.count(b"\n") for _, d in pieces) == body.count(b"\n")


@pytest.mark.parametrize("block_bytes", [4096, 1 << 16])
def test_blocks_equal_the_local_summary_and_the_workspace_rows(tmp_path, block_bytes):
    """Many small blocks (the workspace scores this sample as one): the summary is the local
    ``score --json`` object key for key, and the table's rows are the workspace's, line numbers
    and byte offsets included."""
    (res,) = run_inline([OBSERVED], tmp_path, block_bytes)
    assert res.summary == local_json(OBSERVED)[0]
    key, rows = workspace_rows(tmp_path, OBSERVED)
    assert res.run_key == key
    assert table_rows(tmp_path / "out", key) == rows


def test_a_table_row_replays_its_trajectory_from_the_run(tmp_path):
    """Replay without an import: a row's byte range, read where its ``source`` says, holds its
    trajectory; a run changed since is reported, not misread."""
    run = tmp_path / "run.jsonl"
    shutil.copyfile(OBSERVED, run)
    run_inline([run], tmp_path, 1 << 16)
    rows = table_reader.read_table(str(tmp_path / "out")).to_pylist()
    for row in rows[::97]:
        t = table_reader.trajectory_at(row["source"], row["offset"], row["length"])
        assert t.id == row["trajectory_id"] and len(t.tool_calls) == row["tool_call_count"]
    run.write_bytes(b" " * 7 + OBSERVED.read_bytes())
    with pytest.raises(errors.InputError, match="the run changed since it was scored"):
        table_reader.trajectory_at(rows[5]["source"], rows[5]["offset"], rows[5]["length"])


def test_a_rows_range_past_what_a_replay_reads_is_refused_unread(tmp_path, monkeypatch):
    """A row naming 900 MB of its run (second attack on issue 34, F12: 3 GB a replay): refused
    before a byte is read, as is a range that is not one."""
    run = tmp_path / "run.jsonl"
    shutil.copyfile(OBSERVED, run)
    read: list[int] = []
    monkeypatch.setattr(table_reader, "file_system", lambda *a: read.append(1))  # nothing may be opened
    for offset, length in ((0, table_reader.MAX_REPLAY_BYTES + 1), (0, 900 << 20), (0, -1), (-5, 10)):
        with pytest.raises(errors.InputError, match="a table's replay reads at most"):
            table_reader.trajectory_at(str(run), offset, length)
    assert read == []


def test_a_run_of_only_a_header_scores_as_locally(tmp_path):
    path = tmp_path / "empty.jsonl"
    path.write_bytes(OBSERVED.read_bytes().split(b"\n", 1)[0] + b"\n")
    (res,) = run_inline([path], tmp_path, 1 << 16)
    assert res.summary == local_json(path)[0] and res.summary["trajectories"] == 0


@pytest.mark.parametrize("block_bytes", [8192, 1 << 22])
def test_with_the_side_log_blocks_equal_the_local_summary_and_the_workspace_rows(tmp_path, block_bytes):
    """Each block joins its share of the side log; the final stage refuses what no block took:
    the local ``score --payloads --json`` object key for key (recapture report included) and
    the workspace's rows."""
    side = SAMPLES / "observed-m1.payloads.jsonl"
    (res,) = run_inline([OBSERVED], tmp_path, block_bytes, payloads=[side])
    local = cli("score", str(OBSERVED), "--payloads", str(side), "--json")
    assert res.summary == json.loads(local.stdout)
    assert res.summary["recapture"]["applied"] > 0 and res.summary["unscored"] == 24
    ws = Workspace(tmp_path / "ws.db")
    key = ws.import_run(OBSERVED, payloads=side).run_key
    assert res.run_key == key
    assert table_rows(tmp_path / "out", key) == [tuple(r[c] for c in FIELDS) for r in ws.trajectory_rows(key)]


def test_side_log_payloads_no_call_takes_are_refused_once(tmp_path):
    """A payload for a call no block has is refused once (not once per block), as locally."""
    side = tmp_path / "side.jsonl"
    lines = (SAMPLES / "observed-m1.payloads.jsonl").read_text().splitlines()
    extra = json.loads(lines[0])
    extra["call_index"] = 99
    side.write_text("\n".join([*lines, json.dumps(extra), "not json"]) + "\n")
    (res,) = run_inline([OBSERVED], tmp_path, 8192, payloads=[side])
    local = json.loads(cli("score", str(OBSERVED), "--payloads", str(side), "--json").stdout)
    assert res.summary == local
    assert len(local["recapture"]["rejected"]) >= 2


def _with_duplicates(tmp_path: Path) -> Path:
    lines = OBSERVED.read_bytes().splitlines(keepends=True)[:120]
    # Record 3 again near the end; record 50 again right after itself.
    lines = [*lines[:51], lines[50], *lines[51:], lines[3]]
    path = tmp_path / "dups.jsonl"
    path.write_bytes(b"".join(lines))
    return path


@pytest.mark.parametrize("block_bytes", [2048, 1 << 20])
def test_ids_seen_twice_are_settled_as_the_workspace_does(tmp_path, monkeypatch, block_bytes):
    """Both copies of a duplicated id are refused, whether the two copies fall in one block or
    two: the same rows as the workspace, the same rejected lines and counts as the local path;
    where the blocks are the workspace's (one block here), the same summary to the letter."""
    path = _with_duplicates(tmp_path)
    monkeypatch.setattr(ingest, "BLOCK_BYTES", block_bytes)  # the workspace's blocks, the same size
    (res,) = run_inline([path], tmp_path, block_bytes)
    key, rows = workspace_rows(tmp_path, path)
    assert table_rows(tmp_path / "out", key) == rows
    if block_bytes > path.stat().st_size:
        from scoring.workspace import evaluation

        assert res.summary == evaluation(Workspace(tmp_path / "ws.db"), key).as_dict()
    local = local_json(path)[0]
    assert res.summary["rejected"] == 4 and res.summary["trajectories"] == 117
    located = lambda d: sorted((r["line"], r["record_id"]) for r in d["rejected_records"])  # noqa: E731
    assert located(res.summary) == located(local)
    assert {k: v for k, v in res.summary.items() if k != "rejected_records"} == \
        {k: v for k, v in local.items() if k != "rejected_records"}


def test_a_block_that_raises_is_located_by_line(tmp_path):
    """The block raises (so Dask's retries apply); the client locates it by the lines of the
    blocks before it: the first record the local path's classifier fails on (observed-m1-t00079)."""
    plan = planning.plan_run(str(OBSERVED))
    spec = "tests.plugin_classifiers:raises"
    with pytest.raises(errors.BlockFailed) as raised:
        for s, e in planning.block_bounds(plan, 1 << 16):
            tasks.score_block(plan, s, e, spec)
    assert raised.value.where[1:3] == (25, 101653)  # line 25 of the block that starts at byte 70,184


def test_a_failed_block_fails_its_run_located_by_line(inproc_client, tmp_path):
    """The classifier raises in a block: the run fails, named by its file and line (the lines of
    the blocks before it); nothing of it is published, no staging folder is left."""
    out = tmp_path / "table"
    (res,) = fleet.score_runs([str(OBSERVED)], inproc_client, out=str(out), block_bytes=1 << 16,
                               reclassifier="tests.plugin_classifiers:raises", retries=0)
    assert res.status == "failed"
    assert res.error.startswith(f"{OBSERVED}:81: ") and "model endpoint unreachable" in res.error
    assert not out.exists()  # the fleet created it and no run reached it


def test_a_bad_file_fails_its_run_alone_and_the_others_are_published(inproc_client, tmp_path):
    """A missing file and a file whose header is not JSON among good runs: each fails alone,
    named; the good runs are published, and a retry to the same table skips them."""
    bad = tmp_path / "bad.jsonl"
    bad.write_text("not json\n")
    out = tmp_path / "table"
    paths = [str(tmp_path / "missing.jsonl"), str(OBSERVED), str(bad), str(COMPARE)]
    res = fleet.score_runs(paths, inproc_client, out=str(out), block_bytes=1 << 18)
    assert [r.status for r in res] == ["failed", "done", "failed", "done"]
    assert res[0].error == f"{tmp_path / 'missing.jsonl'}: no such file"
    assert res[2].error.startswith(str(bad))
    assert json.loads((out / "summary.json").read_text()) == [res[1].summary, res[3].summary]
    again = fleet.score_runs(paths[1:], inproc_client, out=str(out), block_bytes=1 << 18)
    assert [r.status for r in again] == ["skipped", "failed", "skipped"]
    assert [r.summary for r in again[::2]] == [res[1].summary, res[3].summary]
    assert json.loads((out / "summary.json").read_text()) == [res[1].summary, res[3].summary]
    assert sorted(p.name for p in out.iterdir()) == ["aggregates", "inconclusive", "index.json", "run_keys.json",
                                                    "runs", "summaries", "summary.json", "trajectories"]
    # Each run's aggregates and summary are in the table, read when the run is shown; no run's
    # aggregates came to the client; the index lists the runs in summary.json's order.
    assert all(r.aggregates is None for r in res) and len(list((out / "aggregates").iterdir())) == 2
    assert [json.loads((out / "summaries" / f"{r.run_key}.json").read_text()) for r in res[1::2]] == \
        [res[1].summary, res[3].summary]
    assert json.loads((out / "index.json").read_text()) == [[r.run_key, r.summary["run_id"], r.summary["model"]]
                                                            for r in res[1::2]]


def test_other_formats_are_one_whole_file_task_of_the_format_sniffed_as_locally(tmp_path):
    from scoring.importers import sniff_file

    path = tmp_path / "chat.jsonl"
    path.write_text('{"messages": [{"role": "user", "content": "hi"}]}\n')
    plan = planning.plan_run(str(path), verdict_map="s:unsafe=1")
    assert plan.whole and plan.fmt == sniff_file(path) != "canonical" and plan.verdict_map == "s:unsafe=1"
    assert not planning.plan_run(str(OBSERVED)).whole


def test_a_bad_verdict_map_is_refused_before_any_cluster_starts():
    res = cli("score", str(OBSERVED), "--engine", "dask", "--inspect-verdict", "no rules here")
    assert res.exit_code == 2 and "--inspect-verdict" in res.output


def test_a_missing_file_is_named_before_any_cluster_starts(tmp_path):
    res = cli("score", str(tmp_path / "nope.jsonl"), "--engine", "dask")
    assert res.exit_code == 2 and "nope.jsonl: no such file" in res.output


def test_an_existing_output_is_never_overwritten(tmp_path):
    (tmp_path / "table").mkdir()
    (tmp_path / "table" / "keep.txt").write_text("x")
    with pytest.raises(errors.InputError, match="already exists"):
        table_writer.prepare_out(str(tmp_path / "table"), {})
    assert [p.name for p in tmp_path.iterdir()] == ["table"]


@pytest.mark.dask
def test_without_a_scheduler_a_local_cluster_scores_like_the_local_path():
    """The real command, in a fresh process: ``--engine dask`` alone starts a LocalCluster of
    two workers on this machine and prints the local path's JSON."""
    proc = subprocess.run([sys.executable, "-m", "scoring", "score", str(OBSERVED), "--engine", "dask", "--json"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout) == local_json(OBSERVED, auto_payloads=True)[0]


# --- on a real cluster ------------------------------------------------------------------------

WAIT_S = 90


class Cluster:
    """A ``dask scheduler`` and ``dask worker`` processes on 127.0.0.1, started for the tests."""

    def __init__(self, tmp: Path, env: dict[str, str] | None = None) -> None:
        self.tmp, self.procs, self.workers = tmp, [], {}
        self.env = {**os.environ, "PYTHONPATH": str(ROOT), "LITMUS_TEST_CLASSIFIER_DELAY_S": "0.2",
                    "DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES": "3", **(env or {})}
        sched_file = tmp / "scheduler.json"
        self.procs.append(self._start([_tool("dask"), "scheduler", "--host", "127.0.0.1", "--port", "0",
                                       "--dashboard-address", "127.0.0.1:0", "--scheduler-file", str(sched_file)],
                                      "scheduler"))
        deadline = time.monotonic() + WAIT_S
        while not (sched_file.exists() and sched_file.stat().st_size):
            if time.monotonic() > deadline or self.procs[0].poll() is not None:
                raise RuntimeError("the dask scheduler did not start: " + self.log("scheduler"))
            time.sleep(0.2)
        time.sleep(0.2)
        self.address = json.loads(sched_file.read_text())["address"]

    def _start(self, cmd: list[str], name: str) -> subprocess.Popen:
        log = (self.tmp / f"{name}.log").open("wb")
        return subprocess.Popen(cmd, cwd=ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT)

    def log(self, name: str) -> str:
        return (self.tmp / f"{name}.log").read_text(errors="replace")[-2000:]

    def add_worker(self, name: str, *, nanny: bool = False, hide: Path | None = None,
                   preload: Path | None = None, nthreads: int = 1) -> subprocess.Popen:
        """A worker of ``nthreads`` threads; ``nanny``: restarted when it dies; ``hide``: in a
        mount namespace of its own where that folder is an empty one (a worker on another
        machine); ``preload``: a module it runs at start."""
        cmd = [_tool("dask"), "worker", self.address, "--nthreads", str(nthreads), "--nanny" if nanny else "--no-nanny",
               "--host", "127.0.0.1", "--dashboard-address", "127.0.0.1:0", "--memory-limit", "0",
               "--name", name, "--death-timeout", "60", *(["--preload", str(preload)] if preload else [])]
        if hide is not None:
            cmd = ["unshare", "--mount", "sh", "-c", 'mount -t tmpfs tmpfs "$0" && exec "$@"', str(hide), *cmd]
        proc = self._start(cmd, name)
        self.procs.append(proc)
        self.workers[name] = proc
        return proc

    def wait_for_workers(self, n: int) -> None:
        from dask.distributed import Client

        with Client(self.address, timeout=WAIT_S) as client:
            client.wait_for_workers(n, timeout=WAIT_S)

    def close(self) -> None:
        """Every process this cluster started, ended: asked first (SIGTERM), killed after 5 s."""
        for p in reversed(self.procs):
            if p.poll() is None:
                p.terminate()
        for p in reversed(self.procs):
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=15)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = Cluster(tmp_path_factory.mktemp("dask"))
    try:
        c.add_worker("w1")
        c.add_worker("w2")
        c.wait_for_workers(2)
        yield c
    finally:
        c.close()


@pytest.fixture(scope="module")
def generated(generator, tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("gen") / "large.jsonl"
    generator.main(["--large", "3000", "--out", str(path)])
    return path


@pytest.mark.dask
def test_a_cluster_scores_like_the_local_path_and_writes_the_workspace_rows(cluster, generated, tmp_path):
    """Three runs (the bundled samples and a generated run) in one graph on two workers: the
    summaries equal the local ``score --json`` key for key (also in summary.json), and the
    Parquet table's rows equal the workspace's."""
    paths = [OBSERVED, COMPARE, generated]
    out = tmp_path / "table"
    res = cli("score", *map(str, paths), "--scheduler", cluster.address, "--out", str(out), "--json",
              "--block-bytes", str(1 << 17))
    assert res.exit_code == 0, res.output
    dask_json = [json.loads(line) for line in res.stdout.splitlines()]
    assert dask_json == local_json(*paths, auto_payloads=True)  # both pair the samples' side logs
    sides = [p.with_name(p.stem + ".payloads.jsonl") for p in paths]
    assert [d["side_log"]["source"] for d in dask_json] == list(map(str, sides))
    assert json.loads((out / "summary.json").read_text()) == dask_json
    # The final stages wrote each run's index of Inconclusive trajectories (the app's labels use it).
    assert sorted(p.name for p in (out / "inconclusive").iterdir()) == \
        sorted(f"run_key={k}" for k in json.loads((out / "run_keys.json").read_text()))
    for i, path in enumerate(paths):
        (tmp_path / f"ws{i}").mkdir()
        key, rows = workspace_rows(tmp_path / f"ws{i}", path, sides[i])
        assert table_rows(out, key) == rows, path
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []  # no temporary left
    # Side logs given explicitly (each block joins its share; the recapture report is the local one).
    side_args = [x for s in sides[:2] for x in ("--payloads", str(s))]
    res = cli("score", str(OBSERVED), str(COMPARE), *side_args, "--scheduler", cluster.address, "--json",
              "--block-bytes", str(1 << 17))
    assert res.exit_code == 0, res.output
    local = cli("score", str(OBSERVED), str(COMPARE), *side_args, "--json")
    assert res.stdout == local.stdout and local.exit_code == 0


@pytest.mark.dask
def test_exit_status_is_the_worst_met_and_every_run_is_reported(cluster, tmp_path):
    """As the local engine: a run whose every record was rejected is exit 2, a threshold
    exceeded 3; 2 outranks 3, and every run is printed either way."""
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(OBSERVED.read_bytes().split(b"\n", 1)[0] + b"\n{\"record\": \"trajectory\"}\n")
    args = ["--scheduler", cluster.address, "--json", "--no-auto-payloads"]
    res = cli("score", str(OBSERVED), *args, "--fail-on-unscored", "0.01")
    assert res.exit_code == 3 and "fail-on-unscored: observed-m1: UNSCORED or rejected" in res.stderr
    res = cli("score", str(bad), str(OBSERVED), *args, "--fail-on-unscored", "0.01")
    assert res.exit_code == 2 and len(res.stdout.splitlines()) == 2
    assert "every one of its 1 records was rejected" in res.stderr and "fail-on-unscored" in res.stderr
    local = cli("score", str(bad), str(OBSERVED), "--json", "--no-auto-payloads", "--fail-on-unscored", "0.01")
    assert (local.exit_code, local.stdout) == (res.exit_code, res.stdout)


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    with moto_server(tmp_path_factory.mktemp("moto") / "moto.log") as options:
        yield options


@pytest.mark.dask
def test_a_run_in_s3_is_read_by_the_workers(cluster, s3, tmp_path):
    """The run is in a bucket (a local moto server): the workers read its blocks through s3fs,
    the client only its header and size; the table can go to the bucket too."""
    import s3fs

    fs = s3fs.S3FileSystem(**s3)
    fs.mkdir("runs")
    fs.put(str(OBSERVED), "runs/nightly/observed-m1.jsonl")
    url = "s3://runs/nightly/observed-m1.jsonl"
    options = [x for k, v in s3.items() for x in ("--storage-option", f"{k}={v}")]
    res = cli("score", url, "--scheduler", cluster.address, "--json", "--block-bytes", str(1 << 16),
              "--out", "s3://runs/tables/nightly", *options)
    assert res.exit_code == 0, res.output
    got = json.loads(res.stdout)
    want = local_json(OBSERVED)[0]
    assert got["source"] == url
    # Only where the run is differs: its source names the URL (rows and rejections too).
    assert {**got, "source": None} == {**want, "source": None}
    key, rows = workspace_rows(tmp_path, OBSERVED)
    s_col = FIELDS.index("offset")  # rows are equal field for field, byte offsets included
    assert table_rows("s3://runs/tables/nightly", key, s3) == rows and rows[0][s_col] > 0
    assert json.loads(fs.cat("runs/tables/nightly/summary.json")) == [got]
    row = table_reader.read_table("s3://runs/tables/nightly", s3).to_pylist()[1234]
    assert row["source"] == url  # replayed through s3fs, by byte range
    assert table_reader.trajectory_at(row["source"], row["offset"], row["length"], s3).id == row["trajectory_id"]


@pytest.mark.dask
def test_a_block_that_raises_leaves_no_table(cluster, tmp_path):
    out = tmp_path / "table"
    res = cli("score", str(OBSERVED), "--scheduler", cluster.address, "--out", str(out), "--block-bytes",
              str(1 << 16), "--classifier", "tests.plugin_classifiers:raises", "--no-auto-payloads")
    assert res.exit_code == 2, res.output
    assert re.search(rf"{re.escape(str(OBSERVED))}:81: .*model endpoint unreachable", res.output), res.output
    assert "Traceback" not in res.output
    assert list(tmp_path.iterdir()) == []  # neither the table nor its temporary directory


@pytest.mark.dask
def test_a_worker_killed_mid_graph_changes_nothing(cluster, tmp_path):
    """A third worker joins, holds scored blocks, and is killed (SIGKILL) while the graph runs:
    its blocks are scored again elsewhere, nothing is counted twice, the summary and the table
    are what the local path and the workspace give."""
    from dask.distributed import Client

    spec = "tests.plugin_classifiers:slow_ssh_keys"  # slowed on the workers only
    victim = cluster.add_worker("victim")
    cluster.wait_for_workers(3)
    out = tmp_path / "table"
    with Client(cluster.address, timeout=WAIT_S) as client:
        addr = next(a for a, w in client.scheduler_info()["workers"].items() if w.get("name") == "victim")
        import concurrent.futures

        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            job = pool.submit(fleet.score_runs, [str(OBSERVED)], client, out=str(out), block_bytes=1 << 15,
                              reclassifier=spec)
            deadline = time.monotonic() + WAIT_S
            held: list = []
            while not held:
                assert not job.done(), "the graph finished before the victim held a block"
                assert time.monotonic() < deadline, "the victim never held a block"
                held = [k for k in client.has_what().get(addr, ()) if "litmus-block" in str(k)]
                time.sleep(0.05)
            victim.send_signal(signal.SIGKILL)
            victim.wait(timeout=30)
            (res,) = job.result(timeout=300)
        # The scheduler's record: a block the victim held was computed again, on another worker.
        story = client.story(*held)
        done = [e[1] for e in story if e[3] == "memory"]  # (who, key, from, to, …)
        assert any(done.count(key) >= 2 for key in held), story[:20]
    ws = Workspace(tmp_path / "ws.db")
    key = ws.import_run(OBSERVED, reclassifier=spec).run_key
    from scoring.workspace import evaluation

    assert res.summary == evaluate(OBSERVED, reclassifier=spec).as_dict()
    # (The workspace reports its run key, which folds in the classifier, as content_sha256.)
    assert {**res.summary, "content_sha256": key} == evaluation(ws, key).as_dict()
    assert res.run_key == key
    assert table_rows(out, key) == [tuple(r[c] for c in FIELDS) for r in ws.trajectory_rows(key)]


PROVENANCE = {"source", "format", "content_sha256", "file_sha256", "original_name", "side_log", "rejected",
              "rejected_records", "records_seen", "format_metrics", "terminations", "evidence_self_declared",
              "evidence_claim"}
"""What differs by construction between a real log imported into a workspace and its canonical
copy scored by the engine: where it was read from, its hashes, the conversion's rejections
(kept beside the copy by the workspace, absent from the copy), the format's own figures and
recorded endings (computed by the importer at conversion), and whose claim a structural standard
is (the importer's inference from the format; the copy, a canonical file, declares it itself)."""


@pytest.mark.real
def test_real_logs_converted_to_canonical_score_the_same(shared_real, tmp_path):
    """Every real log, converted to canonical JSONL by a workspace import, scored by the
    engine from that copy in small blocks: the same rates, counts and intervals as the
    workspace's, and the same rows."""
    from scoring.workspace import evaluation

    ws = Workspace(tmp_path / "ws.db")
    logs = [p for p in sorted(shared_real.rglob("*")) if p.suffix in (".json", ".jsonl", ".eval")
            and "r_judge" not in str(p) and ".cont-" not in p.name]
    keys = list(dict.fromkeys(ws.import_run(p).run_key for p in logs))
    assert len(keys) >= 9
    for i, key in enumerate(keys):
        run = ws.run(key)
        (res,) = run_inline([Path(run["stored_path"])], tmp_path / f"r{i}", 4096)
        want = evaluation(ws, key).as_dict()
        assert {k: v for k, v in res.summary.items() if k not in PROVENANCE} == \
            {k: v for k, v in want.items() if k not in PROVENANCE}, run["source"]
        rows = [tuple(r[c] for c in ROW_COLUMNS) for r in ws.trajectory_rows(key)]
        got = [r[1:] for r in table_rows(tmp_path / f"r{i}" / "out", res.run_key)]
        assert got == rows, run["source"]


# --- import --engine dask: blocks scored on the cluster, rows written into the workspace -------


class InlineClient:
    """A client that runs each task when it is submitted (the cluster's part, in this process);
    a task's error is raised by its future's ``result``, as Dask's is."""

    class Done:
        def __init__(self, value, error: BaseException | None = None) -> None:
            self.value, self.error = value, error

        def result(self):
            if self.error is not None:
                raise self.error
            return self.value

        def release(self) -> None:
            pass

    def __init__(self) -> None:
        self.keys: list[str] = []

    def submit(self, fn, *args, key: str):
        self.keys.append(key)
        try:
            return self.Done(fn(*args))
        except Exception as exc:
            return self.Done(None, exc)

    def scheduler_info(self) -> dict:
        return {"workers": {"inline": {}}}

    def cancel(self, futures) -> None:
        pass


RUN_FIELDS_NOT_COMPARED = ("imported_at", "stored_path", "payloads_path", "original_path")
"""Where each workspace keeps its copies and when it imported: the rest of the run row must match."""


def stored_run(ws: Workspace, key: str) -> dict:
    from scoring.workspace import evaluation

    run = {k: v for k, v in ws.run(key).items() if k not in RUN_FIELDS_NOT_COMPARED}
    rows = [tuple(r[c] for c in FIELDS) for r in ws.trajectory_rows(key)]
    summary = evaluation(ws, key).as_dict()
    if summary.get("recapture"):  # the workspace's copy of the side log, in its own folder
        summary["recapture"]["source"] = Path(summary["recapture"]["source"]).name
    return {"run": run, "rows": rows, "summary": summary,
            "copy": Path(ws.run(key)["stored_path"]).read_bytes()}


def import_both_ways(tmp_path: Path, path: Path, client, block_bytes: int, payloads: Path | None = None,
                     reclassifier: str | None = None) -> tuple[dict, dict]:
    local = Workspace(tmp_path / "local.db")
    key = local.import_run(path, payloads=payloads, reclassifier=reclassifier).run_key
    remote = Workspace(tmp_path / "dask.db")
    plan = planning.plan_run(str(path), None, None if payloads is None else str(payloads))
    res = remote.import_run(path, payloads=payloads, reclassifier=reclassifier,
                            scorer=workspace_scorer.workspace_scorer(plan, client, block_bytes=block_bytes,
                                                           reclassifier=reclassifier))
    assert res.run_key == key
    return stored_run(local, key), stored_run(remote, key)


@pytest.mark.parametrize("block_bytes", [2048, 1 << 16])
def test_an_import_scored_in_blocks_elsewhere_stores_the_local_imports_rows(tmp_path, block_bytes):
    """``Workspace.import_run(scorer=workspace_scorer.workspace_scorer(...))``: many engine blocks (the
    local import scores this run as one), ids seen twice across blocks: the same run row,
    trajectory rows, summary and stored copy as the local import, key for key."""
    path = _with_duplicates(tmp_path)
    client = InlineClient()
    local, remote = import_both_ways(tmp_path, path, client, block_bytes)
    assert remote == local
    assert local["summary"]["rejected"] == 4
    # one task a block, and the run's hash once they are read (the blocks must have read what it hashes)
    assert len(client.keys) == len(planning.block_bounds(planning.plan_run(str(path)), block_bytes)) + 1


def test_an_import_scored_elsewhere_applies_the_side_log_as_locally(tmp_path):
    side = SAMPLES / "observed-m1.payloads.jsonl"
    local, remote = import_both_ways(tmp_path, OBSERVED, InlineClient(), 8192, payloads=side)
    assert remote == local
    assert local["summary"]["recapture"]["applied"] > 0


def test_an_import_whose_block_raises_stores_nothing_and_names_the_line(tmp_path):
    spec = "tests.plugin_classifiers:raises"
    ws = Workspace(tmp_path / "ws.db")
    plan = planning.plan_run(str(OBSERVED))
    with pytest.raises(errors.EngineError, match=rf"^{re.escape(str(OBSERVED))}:81: .*model endpoint unreachable"):
        ws.import_run(OBSERVED, reclassifier=spec,
                      scorer=workspace_scorer.workspace_scorer(plan, InlineClient(), block_bytes=1 << 16,
                                                               reclassifier=spec))
    assert ws.runs() == []


@pytest.mark.dask
def test_import_on_a_cluster_stores_what_the_local_import_stores(cluster, generated, tmp_path):
    """``import --scheduler``: the samples (with the side logs found beside them), a generated
    run and a run with duplicated ids, imported through two workers in small blocks, then
    locally: the two workspaces hold the same run rows, trajectory rows, summaries and copies."""
    dups = _with_duplicates(tmp_path)
    paths = [OBSERVED, COMPARE, generated, dups]
    res = cli("import", *map(str, paths), "--scheduler", cluster.address, "--db", str(tmp_path / "dask.db"),
              "--block-bytes", str(1 << 15))
    assert res.exit_code == 0, res.output
    local = cli("import", *map(str, paths), "--db", str(tmp_path / "local.db"))
    assert local.exit_code == 0, local.output
    assert res.stdout == local.stdout and res.stderr == local.stderr
    a, b = Workspace(tmp_path / "dask.db"), Workspace(tmp_path / "local.db")
    keys = [r["run_key"] for r in b.runs()]
    assert sorted(keys) == sorted(r["run_key"] for r in a.runs()) and len(keys) == 4
    for key in keys:
        assert stored_run(a, key) == stored_run(b, key), key
    # A block that raises on the cluster: located, nothing stored, exit 2.
    res = cli("import", str(OBSERVED), "--scheduler", cluster.address, "--db", str(tmp_path / "bad.db"),
              "--block-bytes", str(1 << 16), "--classifier", "tests.plugin_classifiers:raises", "--no-auto-payloads")
    assert res.exit_code == 2
    assert re.search(rf"{re.escape(str(OBSERVED))}:81: .*model endpoint unreachable", res.output), res.output
    assert Workspace(tmp_path / "bad.db").runs() == []


def test_cli_import_on_the_dask_engine_reports_a_run_it_cannot_read_by_its_file(tmp_path, monkeypatch):
    """A file no importer reads is refused by name before any cluster is asked for (``connect``
    is never called here: the client sniffs its format as locally), and the exit status is 2,
    as the local import's."""
    chat = tmp_path / "chat.jsonl"
    chat.write_text('{"neither": "a run nor a log"}\n')

    def no_cluster(*_a, **_k):
        raise AssertionError("a cluster was started for a run that cannot be read")

    monkeypatch.setattr(dask_cluster, "connect", no_cluster)  # where the CLI looks it up
    res = cli("import", str(chat), str(tmp_path / "missing.jsonl"), "--engine", "dask", "--db", str(tmp_path / "w.db"))
    assert res.exit_code == 2, res.output
    assert f"{chat}: unrecognised log format" in res.stderr
    assert "missing.jsonl: no such file" in res.stderr
    assert Workspace(tmp_path / "w.db").runs() == []


# --- a fleet: many tiny runs of mixed formats, from S3, fail-soft and resumable ---------------

FLEET = 120
"""Runs in the suite's fleet: hundreds of tiny runs fit the suite; the 10,000-run fleet is the
benchmark's (benches/dask_engine.py), on a machine whose two cores are shared."""


def tiny_runs(n: int) -> dict[str, bytes]:
    """``n`` small runs: canonical runs of a few records (each its own run id), a tau2 file and a
    LITMUS log among them."""
    lines = OBSERVED.read_bytes().split(b"\n")
    header = json.loads(lines[0])
    runs = {}
    for i in range(n - 2):
        head = json.dumps({**header, "run_id": f"tiny-{i:05d}"}).encode()
        runs[f"run-{i:05d}.jsonl"] = b"\n".join([head, *lines[1 + i % 50:4 + i % 50]]) + b"\n"
    fixtures = Path(__file__).parent / "fixtures" / "importers"
    runs["tau2-results.json"] = (fixtures / "tau2_results.json").read_bytes()
    runs["litmus-pipeline.jsonl"] = (fixtures / "litmus_pipeline.jsonl").read_bytes()
    return runs


def unsourced(d: dict) -> dict:
    """A ``score --json`` object without where its run was read (its source, its rejections')."""
    return {**d, "source": None, "rejected_records": [{**r, "source": None} for r in d["rejected_records"]]}


@pytest.mark.dask
def test_a_fleet_from_s3_by_glob_and_manifest_fails_soft_and_a_retry_completes_it(cluster, s3, tmp_path):
    """A fleet of tiny runs in a bucket given as a glob, one damaged: every other run is scored
    and published, the damaged one named at once with exit 2, no staging parts are left; the
    damaged run repaired, a retry to the same table given as a manifest scores it alone (the
    rest are skipped) and the table holds every run, equal to the local path's numbers."""
    import s3fs

    fs = s3fs.S3FileSystem(**s3)
    fs.mkdir("fleet")
    runs = tiny_runs(FLEET)
    damaged = "run-00007.jsonl"
    for name, data in runs.items():
        fs.pipe(f"fleet/in/{name}", b"{not json\n" if name == damaged else data)
    options = [x for k, v in {**s3, "anon": "false"}.items() for x in ("--storage-option", f"{k}={v}")]
    args = ["--scheduler", cluster.address, "--json", "--out", "s3://fleet/table", *options]
    res = cli("score", "s3://fleet/in/*", *args)
    assert res.exit_code == 2, res.output
    assert f"error: s3://fleet/in/{damaged}:" in res.stderr and "Traceback" not in res.output
    assert f"runs: {FLEET - 1:,} done, 1 failed, 0 skipped (of {FLEET:,})" in res.stderr
    assert len(res.stdout.splitlines()) == FLEET - 1
    assert not fs.exists("fleet/table/_staging")
    assert len(json.loads(fs.cat("fleet/table/summary.json"))) == FLEET - 1
    fs.pipe(f"fleet/in/{damaged}", runs[damaged])
    manifest = tmp_path / "runs.txt"
    manifest.write_text("# tonight's runs\n" + "".join(f"s3://fleet/in/{n}\n" for n in sorted(runs)))
    res = cli("score", "--manifest", str(manifest), *args)
    assert res.exit_code == 0, res.output
    assert f"runs: 1 done, 0 failed, {FLEET - 1:,} skipped (of {FLEET:,})" in res.stderr
    table = {d["run_id"]: d for d in json.loads(fs.cat("fleet/table/summary.json"))}
    assert len(table) == FLEET and not fs.exists("fleet/table/_staging")
    local_dir = tmp_path / "in"
    local_dir.mkdir()
    for name in ("run-00007.jsonl", "tau2-results.json", "litmus-pipeline.jsonl"):
        (local_dir / name).write_bytes(runs[name])
        want = local_json(local_dir / name)[0]
        got = table[want["run_id"]]
        assert unsourced(got) == unsourced(want), name  # only where the run was read differs
    keys = json.loads(fs.cat("fleet/table/run_keys.json"))
    assert len(fs.ls("fleet/table/trajectories")) == len(set(keys)) == FLEET


@pytest.mark.dask
def test_a_worker_of_another_scorer_version_is_refused_by_name(cluster, tmp_path):
    odd = cluster._start([_tool("dask"), "worker", cluster.address, "--nthreads", "1", "--no-nanny",
                          "--host", "127.0.0.1", "--dashboard-address", "127.0.0.1:0", "--name", "old-install",
                          "--preload", str(Path(__file__).parent / "worker_other_scorer.py")], "old-install")
    try:
        cluster.wait_for_workers(len([p for p in cluster.workers.values() if p.poll() is None]) + 1)
        res = cli("score", str(OBSERVED), "--scheduler", cluster.address, "--json")
        assert res.exit_code == 2, res.output
        assert "workers refused: this client runs scorer" in res.stderr and "old-install" in res.stderr
        assert "scorer 0.0-other" in res.stderr and "Traceback" not in res.output
    finally:
        stop(odd)


def test_storage_options_are_json_and_a_mistyped_one_is_named():
    res = cli("score", "s3://b/run.jsonl", "--engine", "dask", "--storage-option", "endpont_url=http://x")
    assert res.exit_code == 2 and "endpont_url: not an option of s3://" in res.stderr
    assert "did you mean endpoint_url?" in res.stderr and "Traceback" not in res.output
    from scoring.cli import _storage_options

    got = _storage_options(None, None, ("anon=false", "endpoint_url=http://127.0.0.1:9", 'client_kwargs={"a": 1}'))
    assert got == {"anon": False, "endpoint_url": "http://127.0.0.1:9", "client_kwargs": {"a": 1}}


def test_a_dead_scheduler_is_a_located_exit_2(monkeypatch):
    port = _free_port()  # nothing listens there
    monkeypatch.setenv("DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT", "2s")
    import dask

    dask.config.refresh()
    try:
        res = cli("score", str(OBSERVED), "--scheduler", f"tcp://127.0.0.1:{port}")
        assert res.exit_code == 2, res.output
        assert f"cannot reach the Dask scheduler at tcp://127.0.0.1:{port}" in res.stderr
        assert "Traceback" not in res.output
        monkeypatch.setenv("DASK_SCHEDULER_ADDRESS", f"tcp://127.0.0.1:{port}")
        dask.config.refresh()
        res = cli("score", str(OBSERVED), "--engine", "dask")  # the address from dask's config
        assert res.exit_code == 2 and f"tcp://127.0.0.1:{port}" in res.stderr, res.output
    finally:
        monkeypatch.undo()
        dask.config.refresh()


# --- the table other tools read, and blocks Dask can size --------------------------------------


def test_the_table_is_typed_and_names_its_run_and_scorer_in_each_file(tmp_path):
    """Lists are list columns, lenient_safe a boolean, and each part's metadata names its run
    key, run id, scorer version and schema; pandas reads it with run_key from the partition; the
    rows are the workspace's once typed back (``row_text``)."""
    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq

    from scoring.score import SCORER_VERSION

    (res,) = run_inline([OBSERVED], tmp_path, 1 << 18)
    part = sorted((tmp_path / "out" / table_layout.TABLE_DIR / f"run_key={res.run_key}").glob("*.parquet"))[0]
    schema = pq.read_schema(part)
    assert schema.field("reasons").type == pa.list_(pa.string())
    assert schema.field("call_sizes").type == pa.list_(pa.int64())
    assert schema.field("call_gaps").type == pa.list_(pa.list_(pa.string()))
    assert schema.field("lenient_safe").type == pa.bool_()
    meta = {k.decode(): v.decode() for k, v in schema.metadata.items() if k.startswith(b"litmus.")}
    assert meta == {"litmus.schema_version": table_layout.TABLE_SCHEMA_VERSION, "litmus.run_key": res.run_key,
                    "litmus.run_id": "observed-m1", "litmus.scorer_version": SCORER_VERSION}
    frame = pd.read_parquet(tmp_path / "out" / table_layout.TABLE_DIR)
    assert len(frame) == res.summary["trajectories"] and set(frame["run_key"].astype(str)) == {res.run_key}
    unscored = frame[frame["status"] == "unscored"].iloc[0]
    assert list(unscored["reasons"]) and unscored["reason"] == unscored["reasons"][0]
    assert frame["lenient_safe"].dropna().isin([True, False]).all()
    key, rows = workspace_rows(tmp_path, OBSERVED)
    assert key == res.run_key and table_rows(tmp_path / "out", key) == rows


def test_dask_sizes_a_scored_block_by_its_rows():
    from dask.sizeof import sizeof

    plan = planning.plan_run(str(OBSERVED))
    block = tasks.score_block(plan, plan.header_end, plan.size)
    assert sizeof(block) > OBSERVED.stat().st_size / 2  # was 48 bytes: never spilled
