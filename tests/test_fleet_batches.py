"""A fleet planned in batches on the workers, and a run's rows gathered into parts of a sensible
size (scoring.dask_engine): the graph on an in-process Dask client."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import ClassVar

import pyarrow.parquet as pq
import pytest

from scoring import errors, ingest
from scoring.dask_engine import fleet, planning, table_layout, table_writer, tasks
from scoring.request import DEFAULT_REQUEST

from .conftest import SAMPLES
from .test_engine import table_rows, workspace_rows

OBSERVED = SAMPLES / "observed-m1.jsonl"


class Counting:
    """A client that counts the tasks submitted, by the key's kind (``litmus-batch``...)."""

    def __init__(self, client) -> None:
        self.client, self.kinds = client, []

    def submit(self, *args, key: str, **kw):
        self.kinds.append(key.rsplit("-", 2)[0])
        return self.client.submit(*args, key=key, **kw)

    def __getattr__(self, name):
        return getattr(self.client, name)


def test_the_batch_size_gives_each_worker_about_four_tasks_and_at_most_plan_batch_runs_each():
    assert fleet.plan_batch_size(10_000, 2) == fleet.PLAN_BATCH
    assert fleet.plan_batch_size(80, 2) == 10
    assert fleet.plan_batch_size(3, 2) == 1 and fleet.plan_batch_size(0, 0) == 1


def test_a_batch_plans_and_scores_its_runs_and_a_bad_file_fails_alone(inproc_client, tmp_path):
    """Five small runs in one planning task: the damaged one fails, named, inside the batch; the
    other four are scored and published by that task (one task for five runs)."""
    runs = []
    for i in range(5):
        runs.append(tmp_path / f"run{i}.jsonl")
        shutil.copyfile(OBSERVED, runs[-1])
    runs[2].write_text("not json\n")
    client = Counting(inproc_client)
    out = tmp_path / "table"
    res = fleet.score_runs(list(map(str, runs)), client, out=str(out), plan_batch=5)
    assert [r.status for r in res] == ["done", "done", "failed", "done", "done"]
    assert res[2].error.startswith(str(runs[2]))
    assert client.kinds == ["litmus-batch"]  # planned, scored and published by one task
    assert [s["source"] for s in json.loads((out / "summary.json").read_text())] == [str(runs[i]) for i in (0, 1, 3, 4)]
    again = fleet.score_runs(list(map(str, runs)), Counting(inproc_client), out=str(out), plan_batch=2)
    assert [r.status for r in again] == ["skipped", "skipped", "failed", "skipped", "skipped"]



def test_a_record_a_dead_worker_began_is_no_record_and_the_run_is_scored_again(inproc_client, tmp_path):
    """A worker that died while writing a run's record left it empty (seen on CI: the run then
    failed "cannot read: JSONDecodeError"): a record that does not parse is no record, the run is
    scored and published again, and the new record is written whole (no ``.writing-`` file left)."""
    runs = []
    for i in range(2):
        runs.append(tmp_path / f"run{i}.jsonl")
        shutil.copyfile(OBSERVED, runs[-1])
    out = tmp_path / "table"
    first = fleet.score_runs(list(map(str, runs)), inproc_client, out=str(out), plan_batch=2)
    assert [r.status for r in first] == ["done", "done"]
    torn = out / table_layout.RUNS_DIR / table_layout.record_name(str(runs[1]))
    assert torn.exists()
    torn.write_text("")  # begun, never finished
    again = fleet.score_runs(list(map(str, runs)), inproc_client, out=str(out), plan_batch=2)
    assert [r.status for r in again] == ["skipped", "done"], [r.error for r in again]
    assert json.loads(torn.read_text())["run_key"] == first[1].run_key
    assert not [p for p in out.rglob("*") if ".writing-" in p.name]
    assert [r.status for r in fleet.score_runs(list(map(str, runs)), inproc_client, out=str(out))] == ["skipped"] * 2


def test_a_file_written_whole_is_never_seen_begun(tmp_path):
    """``write_whole`` on a local disk: the old text or the new, never a prefix; a write that fails
    leaves the old file and no stray."""
    fs, path = table_writer.file_system(str(tmp_path / "record.json"), {}, table_writer.WRITE_PROTOCOLS)
    table_writer.write_whole(fs, path, '{"a": 1}')
    assert json.loads(Path(path).read_text()) == {"a": 1}

    class Unwritable:
        def __str__(self):
            raise OSError("disk full")

    with pytest.raises(TypeError):
        table_writer.write_whole(fs, path, Unwritable())  # type: ignore[arg-type]
    assert json.loads(Path(path).read_text()) == {"a": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["record.json"]

def test_a_runs_rows_are_gathered_into_parts_of_about_part_bytes(inproc_client, tmp_path):
    """Blocks of 16 KiB make about 50 staged parts of the sample; published with parts of
    64 KiB there are a few parts, each but the last at least that size of staged parts, the rows
    in the same order as the workspace's; a table of one part per run holds the same rows."""
    run = tmp_path / "observed-m1.jsonl"
    shutil.copyfile(OBSERVED, run)
    gathered, whole = tmp_path / "gathered", tmp_path / "whole"
    (res,) = fleet.score_runs([str(run)], inproc_client, out=str(gathered), block_bytes=1 << 14,
                               part_bytes=1 << 16, auto_payloads=False)
    (one,) = fleet.score_runs([str(run)], inproc_client, out=str(whole), block_bytes=1 << 14, auto_payloads=False)
    blocks = len(planning.block_bounds(planning.plan_run(str(run)), 1 << 14))
    parts = sorted((gathered / "trajectories" / f"run_key={res.run_key}").iterdir())
    assert 1 < len(parts) < blocks / 4
    assert len(list((whole / "trajectories" / f"run_key={one.run_key}").iterdir())) == 1  # 64 MiB by default
    (tmp_path / "ws").mkdir()
    key, rows = workspace_rows(tmp_path / "ws", run)
    assert key == res.run_key and table_rows(gathered, key) == rows == table_rows(whole, key)
    meta = pq.read_schema(parts[0]).metadata
    assert meta[b"litmus.run_key"] == key.encode() and meta[b"litmus.schema_version"] == b"2"
    assert sum(pq.read_metadata(p).num_rows for p in parts) == len(rows)


def test_gathering_again_after_a_lost_publish_writes_the_same_parts(tmp_path):
    """The staged parts are read, not moved: a publish retried after a worker died mid-way
    gathers them again into the same parts."""
    import fsspec

    from .test_engine import run_inline

    run = tmp_path / "observed-m1.jsonl"
    shutil.copyfile(OBSERVED, run)
    (res,) = run_inline([run], tmp_path, 1 << 14)
    staged = tmp_path / "out" / "trajectories" / f"run_key={res.run_key}"
    fs = fsspec.filesystem("file")
    rows = lambda: pq.ParquetDataset(str(tmp_path / "a")).read().to_pylist()  # noqa: E731
    first = table_writer.gather_parts(fs, str(staged), str(tmp_path / "a"), 1 << 16)
    before = rows()
    (tmp_path / "a" / "part-000000.parquet").unlink()  # a publish that died after its first part
    assert table_writer.gather_parts(fs, str(staged), str(tmp_path / "a"), 1 << 16) == first > 1
    assert rows() == before == pq.ParquetDataset(str(staged)).read().to_pylist()


@pytest.fixture(autouse=True)
def _no_leftover(tmp_path):
    yield
    assert not any(p.name == table_layout.STAGING_DIR for p in Path(tmp_path).rglob("*"))


def test_plan_batch_plans_each_run_and_names_one_it_cannot(tmp_path):
    """The planning the benchmark times against the client's: one task, many files, a bad one
    failing alone."""
    from scoring import score

    bad = tmp_path / "bad.jsonl"
    bad.write_text("not json\n")
    spec = fleet.Fleet({}, False, DEFAULT_REQUEST, score.SCORER_VERSION, None, False, ingest.BLOCK_BYTES)
    got = fleet.plan_batch([(str(OBSERVED), None), (str(bad), None)], spec)
    assert isinstance(got[0], planning.RunPlan) and got[0].size == OBSERVED.stat().st_size
    assert isinstance(got[1], errors.RunFailed) and got[1].message.startswith(str(bad))


def tiny(path: Path, run_id: str) -> Path:
    """A run of three records of the observed sample (one block: scored inside its batch)."""
    lines = OBSERVED.read_bytes().split(b"\n")
    head = json.loads(lines[0]) | {"run_id": run_id}
    path.write_bytes(b"\n".join([json.dumps(head).encode(), *lines[1:4]]) + b"\n")
    return path


def test_fail_fast_stops_the_fleet_at_the_first_failure_in_a_batch(inproc_client, tmp_path):
    """In one batch: a tiny run, a damaged one, a large run and another tiny run. With
    --fail-fast the large run's blocks are never started (reported skipped); the tiny runs the
    batch already published are reported done; without it, every good run is done."""
    big = tmp_path / "big.jsonl"
    shutil.copyfile(OBSERVED, big)
    bad = tmp_path / "bad.jsonl"
    bad.write_text("not json\n")
    paths = [str(tiny(tmp_path / "a.jsonl", "a")), str(bad), str(big), str(tiny(tmp_path / "b.jsonl", "b"))]
    client = Counting(inproc_client)
    res = fleet.score_runs(paths, client, out=str(tmp_path / "t1"), plan_batch=4, block_bytes=1 << 16,
                            fail_fast=True)
    assert [r.status for r in res] == ["done", "failed", "skipped", "done"]
    assert "not started" in res[2].note and client.kinds == ["litmus-batch"]
    res = fleet.score_runs(paths, inproc_client, out=str(tmp_path / "t2"), plan_batch=4, block_bytes=1 << 16)
    assert [r.status for r in res] == ["done", "failed", "done", "done"]


class EndsWorkers:
    """``tasks.score_block`` in this process, ending as Dask ends a task whose worker died: a
    block whose bytes hold ``CULPRIT`` every time, one holding ``BYSTANDER`` the first time only
    (it sat beside the culprit); the blocks tried of each, counted in ``tried`` (on the class:
    Dask sends the task a copy of the function). Raised by the task, it is retried by
    ``retries`` as a worker's death is not: the fleets here are given none."""

    CULPRIT, BYSTANDER = b"LITMUS-TEST-CULPRIT", b"LITMUS-TEST-BYSTANDER"
    tried: ClassVar[dict[bytes, int]] = {}

    def __init__(self, monkeypatch) -> None:
        monkeypatch.setattr(EndsWorkers, "tried", {self.CULPRIT: 0, self.BYSTANDER: 0})
        real = tasks.score_block

        def score_block(plan, start, end, *args, **kwargs):
            from types import SimpleNamespace

            from distributed import get_worker
            from distributed.scheduler import KilledWorker

            data = Path(plan.url).read_bytes()[start:end]
            for mark in EndsWorkers.tried:
                if mark in data:
                    EndsWorkers.tried[mark] += 1
                    if mark == EndsWorkers.CULPRIT or EndsWorkers.tried[mark] == 1:
                        raise KilledWorker(get_worker().get_current_task(), SimpleNamespace(address="inproc"), 1)
            return real(plan, start, end, *args, **kwargs)

        monkeypatch.setattr(fleet, "score_block", score_block)  # where the fleet looks it up

    def marked(self, path: Path, mark: bytes) -> Path:
        shutil.copyfile(OBSERVED, path)
        path.write_bytes(path.read_bytes().replace(b'"observed-m1-t00079"', b'"' + mark + b'"'))
        return path


def test_runs_that_ended_with_killed_worker_are_retried_alone_and_only_the_culprit_fails(inproc_client, tmp_path,
                                                                                        monkeypatch):
    """A culprit, a bystander (KilledWorker the first time) and a plain run: the culprit and the
    bystander are retried alone once the plain run is done; the bystander is scored, the
    culprit fails again, named with the block's bytes. A culprit alone fails at once (nothing
    is run again)."""
    ends = EndsWorkers(monkeypatch)
    plain = tmp_path / "plain.jsonl"
    shutil.copyfile(OBSERVED, plain)
    paths = [str(ends.marked(tmp_path / "culprit.jsonl", ends.CULPRIT)),
             str(ends.marked(tmp_path / "bystander.jsonl", ends.BYSTANDER)), str(plain)]
    res = fleet.score_runs(paths, inproc_client, out=str(tmp_path / "t1"), block_bytes=1 << 16,
                            auto_payloads=False, retries=0)
    assert [r.status for r in res] == ["failed", "done", "done"], res
    data = Path(paths[0]).read_bytes()
    ((start, stop),) = [(s, e) for s, e in planning.block_bounds(planning.plan_run(paths[0]), 1 << 16)
                        if s <= data.index(ends.CULPRIT) < e]
    assert res[0].error.startswith(f"{paths[0]}: a task of this run (the block of bytes {start:,}–{stop:,}) "
                                   "ended every worker that ran it")
    assert ends.tried == {ends.CULPRIT: 2, ends.BYSTANDER: 2}
    EndsWorkers.tried[ends.CULPRIT] = 0
    res = fleet.score_runs([paths[0], str(plain)], inproc_client, block_bytes=1 << 16, auto_payloads=False,
                            retries=0)
    assert [r.status for r in res] == ["failed", "done"] and ends.tried[ends.CULPRIT] == 1


def test_fail_fast_stops_the_retries_alone_at_the_culprit(inproc_client, tmp_path, monkeypatch):
    """With --fail-fast the runs that ended with KilledWorker are retried alone in input order:
    the culprit, first, fails again and stops the fleet; the bystander, not retried, is skipped."""
    ends = EndsWorkers(monkeypatch)
    paths = [str(ends.marked(tmp_path / "culprit.jsonl", ends.CULPRIT)),
             str(ends.marked(tmp_path / "bystander.jsonl", ends.BYSTANDER))]
    res = fleet.score_runs(paths, inproc_client, block_bytes=1 << 16, auto_payloads=False, fail_fast=True,
                            retries=0)
    assert [r.status for r in res] == ["failed", "skipped"]
    assert "not retried alone" in res[1].note and ends.tried == {ends.CULPRIT: 2, ends.BYSTANDER: 1}


def test_a_run_whose_blocks_ended_with_killed_worker_names_them_all_as_candidates():
    """When several blocks of a run were on the worker each time it died, Dask fails each with
    KilledWorker and cannot say which ended it: the run's error names every one by its bytes
    (at most three, then how many more), not only the one its final stage waited on first."""
    from types import SimpleNamespace

    from distributed.scheduler import KilledWorker

    plan = planning.plan_run(str(OBSERVED))
    bounds = planning.block_bounds(plan, 1 << 16)

    def ended(*blocks: int) -> list:
        return [SimpleNamespace(status="error", exception=lambda b=b: KilledWorker(f"litmus-block-ab12-0-{b}",
                                                                                   None, 1)) for b in blocks]

    def located(first: int, digests: list) -> str:
        (tail,) = ended(first)
        return fleet._located(tail, plan, digests, str(OBSERVED), 1 << 16)

    rng = [f"{s:,}–{e:,}" for s, e in bounds]
    finished = SimpleNamespace(status="finished", exception=lambda: None)
    assert f"a task of this run (the block of bytes {rng[2]}) ended every worker" in located(2, [finished])
    assert f"a task of this run (one of its blocks of bytes {rng[1]}, {rng[2]}: each was on the worker every time " \
           "it died) ended every worker" in located(2, [finished, *ended(1, 2)])
    assert f"(one of its blocks of bytes {rng[1]}, {rng[2]}, {rng[3]} and 2 more: each" in \
        located(5, ended(1, 2, 3, 4, 5))
