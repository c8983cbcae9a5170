"""A moto S3 server on 127.0.0.1, and a score table of many runs in it (the fleet's layout), for
the tests that open a table by a workspace's storage profile (AppTest and the browser)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from scoring.dask_engine import planning, table_layout, table_writer, tasks

from .conftest import SAMPLES

WAIT_S = 60
OBSERVED = SAMPLES / "observed-m1.jsonl"
CREDENTIALS = {"LITMUS_TEST_S3_KEY": "testing", "LITMUS_TEST_S3_SECRET": "testing"}
"""What the profile's ``env`` names (moto takes any credentials): set in the server's environment."""


def tool(name: str) -> str:
    """A command of this virtualenv (else on PATH)."""
    found = Path(sys.executable).parent / name
    return str(found) if found.exists() else shutil.which(name) or name


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def moto_server(log: Path) -> Iterator[dict]:
    """A moto S3 server (its requests logged to ``log``): yields the storage options that reach
    it, and always stops it."""
    port = free_port()
    with log.open("wb") as fh:  # unbuffered: its log is read as it goes
        proc = subprocess.Popen([sys.executable, str(Path(__file__).with_name("moto_s3.py")), "-H", "127.0.0.1", "-p",
                                 str(port)], stdout=fh,
                                stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + WAIT_S
        while True:
            try:
                urllib.request.urlopen(url, timeout=2).close()
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError("moto_server did not start") from None
                time.sleep(0.2)
        yield {"endpoint_url": url, "key": "testing", "secret": "testing"}
    finally:
        stop(proc)


def stop(proc: subprocess.Popen) -> None:
    """A process this test started, ended: asked first (SIGTERM), killed after 15 s."""
    proc.terminate()
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=15)


def profile_toml(endpoint_url: str, prefix: str) -> str:
    """A workspace's settings with one storage profile for ``prefix``: the endpoint as an
    option, the credentials as the names of environment variables (``CREDENTIALS``)."""
    return (f'[storage_profiles.lab]\nprefix = "{prefix}"\noptions = {{ endpoint_url = "{endpoint_url}" }}\n'
            'env = { key = "LITMUS_TEST_S3_KEY", secret = "LITMUS_TEST_S3_SECRET" }\n')


def fleet_table(s3: dict, bucket: str, tmp: Path, runs: int) -> tuple[str, list[str], dict]:
    """``s3://BUCKET/tables/fleet``, a score table of ``runs`` runs as a fleet leaves it
    (summary.json, run_keys.json and index.json over every run, each run's summary and
    aggregates in files of their own):
    the first run is the observed sample, scored from ``s3://BUCKET/runs/`` by the engine's
    tasks; the others are its summary under other run ids and keys (the last one with its rows,
    Inconclusive index, summary and aggregates too, to be shown). The other runs' own files are
    left out on purpose: the app reads a run's only when it is shown. Returns (location, run ids in
    order, the first run's summary)."""
    import fsspec
    import s3fs

    fs = s3fs.S3FileSystem(**s3)
    fs.mkdir(bucket)
    fs.put(str(OBSERVED), f"{bucket}/runs/{OBSERVED.name}")
    src = f"s3://{bucket}/runs/{OBSERVED.name}"
    plan = planning.plan_run(src, s3)
    local = tmp / "fleet"
    blocks = [tasks.score_block(plan, s, e) for s, e in planning.block_bounds(plan, 1 << 16)]
    res = tasks.finish_run(plan, tasks.file_sha256(plan, *blocks), None, *map(tasks.digest, blocks), aggregates=True)
    for i, b in enumerate(blocks):
        table_writer.write_part(b, res, i, str(tmp / "staged"), {}, src)
    rows = f"{table_layout.TABLE_DIR}/run_key={res.run_key}"  # gathered into one part, as a fleet publishes it
    table_writer.gather_parts(fsspec.filesystem("file"), str(tmp / "staged" / rows), str(local / rows))
    table_writer.commit_results(str(local), str(local), {}, [res])
    keys = [res.run_key] + [hashlib.sha256(f"fleet-{i}".encode()).hexdigest() for i in range(1, runs)]
    summaries = [res.summary] + [{**res.summary, "run_id": f"fleet-{i:05d}"} for i in range(1, runs)]
    last = keys[-1]
    for folder in (table_layout.TABLE_DIR, table_layout.INCONCLUSIVE_DIR):
        shutil.copytree(local / folder / f"run_key={res.run_key}", local / folder / f"run_key={last}")
    shutil.copyfile(local / table_layout.RUN_AGGREGATES_DIR / f"{res.run_key}.json",
                    local / table_layout.RUN_AGGREGATES_DIR / f"{last}.json")
    (local / table_layout.SUMMARIES_DIR / f"{last}.json").write_text(json.dumps(summaries[-1]))
    (local / table_layout.KEYS_FILE).write_text(json.dumps(keys))
    index = [[k, s["run_id"], s["model"]] for k, s in zip(keys, summaries, strict=True)]
    (local / table_layout.INDEX_FILE).write_text(json.dumps(index))
    (local / table_layout.SUMMARY_FILE).write_text(json.dumps(summaries))
    fs.put(str(local), f"{bucket}/tables/fleet", recursive=True)
    return f"s3://{bucket}/tables/fleet", [s["run_id"] for s in summaries], res.summary
