"""The Dask engine refuses what the local engine refuses, before reading (issue 24): devices,
FIFOs and other non-regular files as a run or a side log; protocols off its allowlist; an
``--out`` that keeps nothing or cannot be written: each a located exit 2, never a traceback."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest
from click.testing import CliRunner

from scoring.cli import main
from scoring.dask_engine import fleet as dask_fleet
from scoring.dask_engine import planning
from scoring.errors import InputError
from scoring.request import DEFAULT_REQUEST

from .conftest import SAMPLES


@pytest.fixture
def fifo(tmp_path):
    path = tmp_path / "run.jsonl"
    os.mkfifo(path)
    return path


def test_a_device_or_fifo_is_refused_as_a_run_before_a_byte_is_read(fifo):
    with pytest.raises(InputError, match="character device"):
        planning.plan_run("/dev/zero")
    with pytest.raises(InputError, match="FIFO"):
        planning.plan_run(str(fifo))  # would block for ever on open
    with pytest.raises(InputError, match="folder"):
        planning.plan_run(str(fifo.parent))


def test_a_device_or_fifo_is_refused_as_a_side_log(fifo):
    with pytest.raises(InputError, match="character device") as err:
        planning.plan_run(str(SAMPLES / "observed-m1.jsonl"), payloads="/dev/zero")
    assert err.value.source == "/dev/zero"
    with pytest.raises(InputError, match="FIFO"):
        planning.plan_run(str(SAMPLES / "observed-m1.jsonl"), payloads=str(fifo))


@pytest.mark.parametrize("location", ["zip://x::data:abc", "dask://127.0.0.1:8786/x", "reference://x",
                                      "ftp://127.0.0.1:9/x", "memory://run.jsonl", "nosuchproto://x"])
def test_a_protocol_off_the_allowlist_is_a_located_exit_2(location):
    res = CliRunner().invoke(main, ["score", "--engine", "dask", location])
    assert res.exit_code == 2, res.output
    assert res.exception is None or isinstance(res.exception, SystemExit)
    assert location in res.output and "Traceback" not in res.output


@pytest.mark.parametrize("out", ["memory://table", "zip://t::file:///tmp/x", "http://127.0.0.1:9/t", "{file}/x",
                                 "{file}", "{dir}"])
def test_every_out_failure_is_a_located_exit_2(tmp_path, out):
    run = tmp_path / "observed-m1.jsonl"
    shutil.copyfile(SAMPLES / "observed-m1.jsonl", run)
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    out = out.format(file=run, dir=tmp_path / "full")
    res = CliRunner().invoke(main, ["score", "--engine", "dask", "--no-auto-payloads", str(run), "--out", out])
    assert res.exit_code == 2, res.output
    assert res.exception is None or isinstance(res.exception, SystemExit)
    assert out in res.output and "Traceback" not in res.output


def test_refused_runs_print_their_located_errors_and_no_workers_traceback(tmp_path, fifo):
    """A fleet whose every run is refused (a device, a FIFO, a format no importer reads, an
    object store that never answers), on the LocalCluster the command starts: the terminal
    shows each run's located error, not the workers' "Compute Failed ... Traceback" logs (a
    refusal is the planning task's answer, not a task that failed and is run again)."""
    from .test_storage_deadline import DEADLINE_ENV, LIMIT_S, SilentEndpoint

    unknown = tmp_path / "notes.txt"
    unknown.write_text("hello, not a run\n")
    endpoint = SilentEndpoint()
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "scoring", "score", "--engine", "dask", "/dev/zero", str(fifo), str(unknown),
             "s3://bucket/run.jsonl", "--storage-option", f"endpoint_url={endpoint.url}",
             "--storage-option", "anon=true"],
            capture_output=True, text=True, timeout=6 * LIMIT_S, env={**os.environ, DEADLINE_ENV: "1"})
    finally:
        endpoint.close()
    assert proc.returncode == 2, proc.stderr
    assert "runs: 0 done, 4 failed, 0 skipped (of 4)" in proc.stderr
    for located in ("error: /dev/zero: is a character device", f"error: {fifo}: is a FIFO",
                    f"error: {unknown}: unrecognised log format",
                    "error: s3://bucket/run.jsonl: cannot read: unreachable"):
        assert located in proc.stderr, proc.stderr
    for noise in ("Traceback", "Compute Failed", "distributed.worker"):
        assert noise not in proc.stderr + proc.stdout, proc.stderr


def test_a_refused_run_is_its_planning_tasks_answer_not_a_failed_task(fifo):
    """Returned, not raised: Dask neither logs it as a failed task nor runs it again."""
    from scoring.errors import RunFailed
    from scoring.score import SCORER_VERSION

    fleet = dask_fleet.Fleet({}, False, DEFAULT_REQUEST, SCORER_VERSION, None, False, 1 << 16)
    for path, why in (("/dev/zero", "character device"), (str(fifo), "FIFO")):
        got = dask_fleet.start_run(path, None, None, fleet)
        assert isinstance(got, RunFailed) and got.message.startswith(f"{path}: ") and why in got.message
