"""A fleet on a real loopback cluster and a moto S3 server: ``RUNS`` small generated runs of
three formats in a bucket (650 here: eleven plan batches, more than four a worker, cheap enough
for every ``make test``; the 10,000 runs issue 27 asks for are run by ``make bench``,
benches/dask_engine.py's fleet, and by this test with ``LITMUS_FLEET_TEST_RUNS=10000``), given as
a glob, then as a manifest; one damaged, one on a worker that dies while scoring it. All but the
damaged one are scored and published to a score table, the damaged one is reported with its path,
no part is left outside a run the table lists, and a retry to the same table (the damaged run
repaired) completes it.

The table is written to a local folder: on moto, each object written costs the suite about as
much as scoring a tiny run, and a run writes five; a table in the bucket takes the same code
path, tested at 120 runs (test_engine) and measured at 10,000 by benches/dask_engine.py.

Two single-threaded workers, each under a nanny (restarted when it dies); the worker's preload
ends it the first time it scores the marked run (``worker_dies_once``)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from scoring.dask_engine import fleet

from .s3_tables import moto_server
from .test_engine import OBSERVED, Cluster, cli, local_json, unsourced
from .worker_dies_once import DIES_ONCE

pytestmark = pytest.mark.dask

RUNS = int(os.environ.get("LITMUS_FLEET_TEST_RUNS", "650"))
"""Enough for many plan batches (``fleet.PLAN_BATCH`` runs each, the most a batch holds) on both
workers: ``fleet.plan_batch_size`` gives each worker at least four. A multiple of 50, so that the
last run but 24 is a LITMUS log (``fleet_runs``)."""
WORKERS = 2
FIXTURES = Path(__file__).parent / "fixtures" / "importers"
DAMAGED = "run-00007.jsonl"
DIES_ON = f"run-{RUNS // 2 + 3:05d}.jsonl"
BUCKET = "fleet10k"


def fleet_runs(n: int) -> dict[str, bytes]:
    """``n`` small runs, each its own content (so its own run key): canonical runs of three
    records under their own run id; every 50th a tau2 results file (its model renamed), every
    50th from the 25th a LITMUS pipeline log (its timestamps renamed). One canonical run holds
    ``DIES_ONCE`` in a trajectory id."""
    lines = OBSERVED.read_bytes().split(b"\n")
    header = json.loads(lines[0])
    tau2 = json.loads((FIXTURES / "tau2_results.json").read_text())
    litmus = (FIXTURES / "litmus_pipeline.jsonl").read_bytes()
    runs: dict[str, bytes] = {}
    for i in range(n):
        if i % 50 == 0:
            tau2["info"]["agent_info"]["llm"] = f"fixture-llm-{i}"
            runs[f"tau2-{i:05d}.json"] = json.dumps(tau2).encode()
        elif i % 50 == 25:
            runs[f"litmus-{i:05d}.jsonl"] = litmus.replace(b'"ts_start": "t0"', f'"ts_start": "t0-{i}"'.encode())
        else:
            head = json.dumps({**header, "run_id": f"tiny-{i:05d}"}).encode()
            runs[f"run-{i:05d}.jsonl"] = b"\n".join([head, *lines[1 + i % 50:4 + i % 50]]) + b"\n"
    first_id = re.search(rb'"id":"[^"]+"', runs[DIES_ON])
    assert first_id is not None
    runs[DIES_ON] = runs[DIES_ON].replace(first_id.group(0), first_id.group(0)[:-1] + b"-" + DIES_ONCE + b'"', 1)
    return runs


def table_files(table: Path) -> dict[str, set[str]]:
    """Each folder of a score table, and the run keys its files are of."""
    keys = {folder: {p.name.removeprefix("run_key=") for p in (table / folder).iterdir()}
            for folder in ("trajectories", "inconclusive")}
    for folder in ("aggregates", "summaries"):
        keys[folder] = {p.name.removesuffix(".json") for p in (table / folder).iterdir()}
    return keys


def test_a_fleet_of_runs_from_s3_scores_all_but_the_damaged_one_and_a_retry_completes_it(tmp_path):
    assert fleet.plan_batch_size(RUNS, WORKERS) == fleet.PLAN_BATCH and RUNS >= 4 * WORKERS * fleet.PLAN_BATCH
    assert RUNS % 50 == 0
    died = tmp_path / "a-worker-died"
    cluster = Cluster(tmp_path, {"LITMUS_TEST_DIES_ONCE": str(died)})
    try:
        for name in (f"w{k + 1}" for k in range(WORKERS)):
            cluster.add_worker(name, nanny=True, preload=Path(__file__).parent / "worker_dies_once.py")
        cluster.wait_for_workers(WORKERS)
        with moto_server(tmp_path / "moto.log") as s3:
            import s3fs

            fs = s3fs.S3FileSystem(**s3)
            fs.mkdir(BUCKET)
            runs = fleet_runs(RUNS)
            fs.pipe({f"{BUCKET}/in/{name}": b"{not json\n" if name == DAMAGED else data
                     for name, data in runs.items()})
            options = [x for k, v in {**s3, "anon": "false"}.items() for x in ("--storage-option", f"{k}={v}")]
            table = tmp_path / "table"
            args = ["--scheduler", cluster.address, "--json", "--out", str(table), *options]

            res = cli("score", f"s3://{BUCKET}/in/*", *args)
            assert res.exit_code == 2, res.output[-3000:]
            assert "Traceback" not in res.output
            assert f"error: s3://{BUCKET}/in/{DAMAGED}:" in res.stderr
            assert f"runs: {RUNS - 1:,} done, 1 failed, 0 skipped (of {RUNS:,})" in res.stderr
            assert died.exists()  # a worker died under the marked run, and the run was scored again
            done = [json.loads(line) for line in res.stdout.splitlines()]
            assert len(done) == RUNS - 1
            assert [d["source"] for d in done if d["source"].endswith(f"/{DIES_ON}")] == [f"s3://{BUCKET}/in/{DIES_ON}"]
            assert not (table / "_staging").exists()
            keys = set(json.loads((table / "run_keys.json").read_text()))
            assert len(keys) == RUNS - 1  # each run its own key: none lost, none twice
            files = table_files(table)
            assert files["trajectories"] == files["aggregates"] == files["summaries"] == keys  # no orphan parts
            assert files["inconclusive"] <= keys

            fs.pipe(f"{BUCKET}/in/{DAMAGED}", runs[DAMAGED])
            manifest = tmp_path / "runs.txt"
            manifest.write_text("# the same fleet, as a manifest\n"
                                + "".join(f"s3://{BUCKET}/in/{name}\n" for name in sorted(runs)))
            again = cli("score", "--manifest", str(manifest), *args)
            assert again.exit_code == 0, again.output[-3000:]
            assert f"runs: 1 done, 0 failed, {RUNS - 1:,} skipped (of {RUNS:,})" in again.stderr
            keys = set(json.loads((table / "run_keys.json").read_text()))
            assert len(keys) == RUNS and not (table / "_staging").exists()
            files = table_files(table)
            assert files["trajectories"] == files["aggregates"] == files["summaries"] == keys
            summaries = {d["source"].rsplit("/", 1)[1]: d for d in json.loads((table / "summary.json").read_text())}
            assert len(summaries) == RUNS
            local = tmp_path / "local"
            local.mkdir()
            for name in (DAMAGED, DIES_ON, "tau2-00050.json", f"litmus-{RUNS - 25:05d}.jsonl"):
                (local / name).write_bytes(runs[name])
                assert unsourced(summaries[name]) == unsourced(local_json(local / name)[0]), name
    finally:
        cluster.close()
