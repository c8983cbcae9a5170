"""What fails a run of a fleet on a real cluster, each a located exit 2 without a traceback
(issue 27): missing credentials, a dead storage endpoint, credentials on the client only, a
path the workers cannot see, a block that ends every worker that runs it.

One nanny-supervised worker (restarted when it dies), in a mount namespace of its own where a
folder the client writes into is empty (a worker on another machine), with no credentials in
its environment; a moto S3 server."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from scoring.dask_engine import planning

from .conftest import SAMPLES
from .s3_tables import free_port, moto_server
from .test_engine import Cluster, cli
from .test_fleet_batches import tiny
from .worker_dies_once import DIES_ONCE
from .worker_poison import PLANNED_LATE, POISON

pytestmark = pytest.mark.dask

OBSERVED = SAMPLES / "observed-m1.jsonl"
COMPARE = SAMPLES / "compare-m2.jsonl"
AWS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_SHARED_CREDENTIALS_FILE")


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("dask-failures")
    hidden = tmp / "client-only"
    hidden.mkdir()
    # Every task sent to the worker at once (Dask's choice before 2022.11, and a cluster's that
    # sets it so): a run's blocks wait queued on the worker, not on the scheduler.
    env = {"DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES": "1",
           "DASK_DISTRIBUTED__SCHEDULER__WORKER_SATURATION": "inf", "LITMUS_TEST_DIES_ONCE": str(tmp / "died"),
           "AWS_EC2_METADATA_DISABLED": "true",
           "AWS_CONFIG_FILE": "/nonexistent", "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent"}
    c = Cluster(tmp, env)
    for k in AWS[:-1]:
        c.env.pop(k, None)
    try:
        c.add_worker("w1", nanny=True, hide=hidden, preload=Path(__file__).parent / "worker_poison.py", nthreads=2)
        c.wait_for_workers(1)
        with moto_server(tmp / "moto.log") as s3:
            import s3fs

            fs = s3fs.S3FileSystem(**s3)
            fs.mkdir("runs")
            fs.put(str(OBSERVED), "runs/observed-m1.jsonl")
            yield c, hidden, s3
    finally:
        c.close()


@pytest.fixture
def client_env(monkeypatch):
    """This client without credentials of its own (and no cloud metadata service to wait for)."""
    for k in AWS:
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
    return monkeypatch


def score(cluster, *args: str):
    res = cli("score", *args, "--scheduler", cluster.address, "--json", "--no-auto-payloads")
    assert "Traceback" not in res.output, res.output
    return res


def test_missing_credentials_fail_the_run_named_by_its_url(fleet, client_env):
    cluster, _hidden, s3 = fleet
    res = score(cluster, "s3://runs/observed-m1.jsonl", "--storage-option", f"endpoint_url={s3['endpoint_url']}")
    assert res.exit_code == 2, res.output
    assert "error: s3://runs/observed-m1.jsonl: cannot read: NoCredentialsError" in res.stderr
    assert "no credentials reached the process that read it" in res.stderr


def test_a_dead_endpoint_fails_the_run_named_by_its_url(fleet, client_env):
    cluster, _hidden, _s3 = fleet
    dead = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    res = score(cluster, "s3://runs/observed-m1.jsonl", "--storage-option", f"endpoint_url={dead}",
                "--storage-option", "key=testing", "--storage-option", "secret=testing",
                "--storage-option", 'config_kwargs={"retries": {"max_attempts": 1}}')
    assert res.exit_code == 2, res.output
    assert "error: s3://runs/observed-m1.jsonl: cannot read: unreachable" in res.stderr
    assert dead not in res.stderr  # the location, not the endpoint of its options (a server's, in team mode)


def test_credentials_on_the_client_only_are_said_to_be_the_clients(fleet, client_env):
    """The client's environment holds keys (it could read the bucket itself); the workers' does
    not, and storage options carry none: the run fails on the worker, and the client says why."""
    cluster, _hidden, s3 = fleet
    client_env.setenv("AWS_ACCESS_KEY_ID", "testing")
    client_env.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    res = score(cluster, "s3://runs/observed-m1.jsonl", "--storage-option", f"endpoint_url={s3['endpoint_url']}")
    assert res.exit_code == 2, res.output
    assert "This client has credentials in its environment (AWS_ACCESS_KEY_ID), the workers do not" in res.stderr
    # Given as options, they travel with the tasks: the same run is scored.
    ok = score(cluster, "s3://runs/observed-m1.jsonl", "--storage-option", f"endpoint_url={s3['endpoint_url']}",
               "--storage-option", "key=testing", "--storage-option", "secret=testing")
    assert ok.exit_code == 0 and json.loads(ok.stdout)["run_id"] == "observed-m1"


def test_a_path_the_workers_cannot_see_is_said_so(fleet, tmp_path):
    cluster, hidden, _s3 = fleet
    run = hidden / "observed-m1.jsonl"
    shutil.copyfile(OBSERVED, run)
    res = score(cluster, str(run))
    assert res.exit_code == 2, res.output
    assert f"error: {run}: no such file on the worker that read it, though this client has it: the workers cannot " \
           "see this path" in res.stderr


def test_a_block_that_kills_its_worker_fails_its_run_alone_located(fleet, tmp_path):
    """A block whose scoring ends the worker process (the worker's preload makes a marked line do
    so, as a crash in native code or the OOM killer would): the nanny restarts the worker, the
    block is tried again and ends it again, and the run fails naming its file and the block's
    bytes. The other run is scored: its blocks sat queued on the worker each time the poisoned
    block ended it (its planning is slowed, so the scheduler runs the culprit's blocks first, and
    the poisoned block waits for one of its blocks to be queued), so Dask ended it with
    KilledWorker too; the engine retried it alone once the fleet had ended."""
    cluster, _hidden, _s3 = fleet
    (tmp_path / PLANNED_LATE).mkdir()
    runs = [tmp_path / OBSERVED.name, tmp_path / PLANNED_LATE / COMPARE.name]
    shutil.copyfile(COMPARE, runs[1])
    runs[0].write_bytes(OBSERVED.read_bytes().replace(b'"observed-m1-t00079"', b'"observed-m1-t00079-' + POISON + b'"'))
    res = score(cluster, *map(str, runs), "--block-bytes", str(1 << 16))
    cluster.wait_for_workers(1)
    assert res.exit_code == 2, res.output
    (error,) = [line for line in res.stderr.splitlines() if line.startswith(f"error: {runs[0]}: ")]
    assert error.startswith(f"error: {runs[0]}: a task of this run (")
    assert "ended every worker that ran it" in error
    # The poisoned block is named by its bytes (beside the run's other blocks that were on the
    # worker each time it died, if any: Dask cannot tell them apart).
    data = runs[0].read_bytes()
    ((start, stop),) = [(s, e) for s, e in planning.block_bounds(planning.plan_run(str(runs[0])), 1 << 16)
                        if s <= data.index(POISON) < e]
    assert f"{start:,}–{stop:,}" in error, error
    scored = [json.loads(line)["run_id"] for line in res.stdout.splitlines()]
    assert scored == ["compare-m2"], res.stderr
    assert f"error: {runs[1]}" not in res.stderr
    assert "runs: 1 done, 1 failed, 0 skipped (of 2)" in res.stderr


@pytest.mark.parametrize("as_json", [True, False], ids=["json", "table"])
def test_runs_a_batch_published_before_its_worker_died_are_done(fleet, tmp_path, as_json):
    """Twelve tiny runs on one worker, into a table that existed before the fleet (its records
    are looked for): three runs a batch. The third run of the first batch ends its worker once
    (after the batch published the first two): Dask runs the batch again on the restarted
    worker, where the first two find their records in the table. This fleet published them:
    they are reported done, with their summaries, not skipped."""
    cluster, _hidden, _s3 = fleet
    runs = [tiny(tmp_path / f"r{i:02d}.jsonl", f"r{i:02d}") for i in range(12)]
    runs[2].write_bytes(runs[2].read_bytes().replace(b'"observed-m1-t00001"', b'"' + DIES_ONCE + b'"'))
    died = Path(cluster.env["LITMUS_TEST_DIES_ONCE"])
    died.unlink(missing_ok=True)  # once a test
    out = tmp_path / "table"
    out.mkdir()
    res = cli("score", *map(str, runs), "--scheduler", cluster.address, "--no-auto-payloads", "--out", str(out),
              *(["--json"] if as_json else []))
    cluster.wait_for_workers(1)
    assert res.exit_code == 0, res.output
    assert died.exists()  # the worker died in the batch
    assert "runs: 12 done, 0 failed, 0 skipped (of 12)" in res.stderr, res.stderr
    published = json.loads((out / "summary.json").read_text())
    assert [s["run_id"] for s in published] == [f"r{i:02d}" for i in range(12)]
    if as_json:
        assert [json.loads(line) for line in res.stdout.splitlines()] == published
    else:
        assert [line.split()[1] for line in res.stdout.splitlines() if line.startswith("run ")] == \
            [f"r{i:02d}" for i in range(12)]
