"""The Dask engine against the local path, as ratios measured in the same run (issue 18).

    python benches/dask_engine.py [--trajectories 200000] [--rounds 3] [--table-calls 10000000]

Writes its section of benches/RESULTS.md (between the ``dask-engine`` markers; ``make bench``
writes it with the rest). Measured on one generated run (5 calls per trajectory):

- the local path: ``litmus-review score FILE --json`` in a fresh process (a run this large is
  streamed on two worker processes through a temporary workspace);
- the Dask path the same way, ``--engine dask`` (it starts a LocalCluster of two single-threaded
  workers: the start is part of the time);
- the graph alone on a running LocalCluster of two workers, then of one: what a team with a
  cluster waits for, and the throughput of two workers against one;
- the overhead per block: the same small run cut into many blocks against one block;
- the Score tables page on a score table of ``--table-calls`` tool calls (10 M: made from the
  bench run's scored rows by the engine's own functions, see ``synth_table``): server time;
- the first S3 table (``--s3-runs`` runs on a local S3 server) a fresh server process opens, with
  the app's warm-up of the object store's backend and without it: server time.
Rounds alternate the paths, and each ratio is the median of the per-round ratios.

    python benches/dask_engine.py --page-only

measures only the two Score tables parts (the bench run must exist) and rewrites only their
part of the section (between the ``score-tables-page`` markers).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "benches" / "out"
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "sample_runs"))
BEGIN, END = "<!-- dask-engine -->", "<!-- /dask-engine -->"
PAGE_BEGIN, PAGE_END = "<!-- score-tables-page -->", "<!-- /score-tables-page -->"
FLEET_BEGIN, FLEET_END = "<!-- fleet -->", "<!-- /fleet -->"
SMALL = ROOT / "sample_runs" / "observed-m1.jsonl"


def cli_seconds(path: Path, *extra: str) -> tuple[float, dict]:
    t = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "scoring", "score", str(path), "--json", *extra], cwd=ROOT,
                         capture_output=True, text=True, check=True)
    return time.perf_counter() - t, json.loads(out.stdout)


def graph_seconds(client, path: Path, **kw) -> tuple[float, dict]:
    from scoring.dask_engine import fleet

    t = time.perf_counter()
    (res,) = fleet.score_runs([str(path)], client, **kw)
    return time.perf_counter() - t, res.summary


def task_seconds(client, path: Path) -> dict:
    """Seconds of worker compute per kind of task in one more run of the graph (Dask's task
    stream): where the time goes, and whether the workers had a core each."""
    from collections import defaultdict

    from distributed import get_task_stream

    from scoring.dask_engine import fleet

    with get_task_stream(client) as stream:
        fleet.score_runs([str(path)], client)
    out: dict = defaultdict(float)
    for task in stream.data:
        kind = str(task["key"]).split("-")[1]
        out[kind] += sum(s["stop"] - s["start"] for s in task["startstops"] if s["action"] == "compute")
    return dict(out)


def _spin(n: int) -> float:
    t = time.perf_counter()
    x = 0
    for i in range(n):
        x += i * i % 7
    return time.perf_counter() - t


def machine_parallelism(n: int = 20_000_000) -> float:
    """How much two processes of a pure-CPU loop get done against one, right now: 2.0 on two
    free cores; less when other jobs hold them. The ceiling for any two-worker ratio here."""
    import concurrent.futures
    import multiprocessing

    ctx = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(2, mp_context=ctx) as pool:
        list(pool.map(_spin, [1000, 1000]))  # started
        t = time.perf_counter()
        pool.submit(_spin, n).result()
        one = time.perf_counter() - t
        t = time.perf_counter()
        list(pool.map(_spin, [n, n]))
        two = time.perf_counter() - t
    return 2 * one / two


def run(trajectories: int, rounds: int, table_calls: int = 10_000_000, fleet_runs: int = 10_000,
        s3_runs: int = 10_000) -> list[str]:
    import generate

    from scoring.dask_engine import cluster, planning
    from scoring.ingest import BLOCK_BYTES

    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / f"bench-{trajectories}.jsonl"
    if not path.exists():
        generate.write_bench_run(path, trajectories)
    size = path.stat().st_size
    calls = trajectories * 5

    loads = [os.getloadavg()[0]]
    local, dask_cli = [], []
    for _ in range(rounds):
        t, want = cli_seconds(path)
        local.append(t)
        t, got = cli_seconds(path, "--engine", "dask")
        dask_cli.append(t)
        assert got == want, "the dask path's summary differs from the local path's"

    from scoring.report import evaluate  # score FILE's pipeline: two worker processes for a large run

    local_warm = []
    evaluate(path)  # imports, not measured
    for _ in range(rounds):
        t = time.perf_counter()
        assert json.loads(json.dumps(evaluate(path).as_dict())) == want
        local_warm.append(time.perf_counter() - t)

    small_blocks = 4096
    n_small = len(planning.block_bounds(planning.plan_run(str(SMALL)), small_blocks))
    warm = {1: [], 2: []}
    compute: dict[int, list[dict]] = {1: [], 2: []}
    overhead = []
    for workers in (2, 1):
        with cluster.connect(workers=workers) as client:
            graph_seconds(client, SMALL)  # imports and first connections, not measured
            for _ in range(rounds):
                t, got = graph_seconds(client, path)
                assert got == want
                warm[workers].append(t)
                if not compute[workers]:  # one more graph, once: where the time goes
                    compute[workers].append(task_seconds(client, path))
                if workers == 2:
                    one, _ = graph_seconds(client, SMALL, block_bytes=1 << 30)
                    many, _ = graph_seconds(client, SMALL, block_bytes=small_blocks)
                    overhead.append((many - one) / (n_small - 1))

    loads.append(os.getloadavg()[0])
    parallel = [machine_parallelism() for _ in range(rounds)]
    med = statistics.median
    ratio = lambda a, b: med([x / y for x, y in zip(a, b, strict=True)])  # noqa: E731 - per-round ratios
    n_blocks = len(planning.block_bounds(planning.plan_run(str(path)), BLOCK_BYTES))
    lines = [
        BEGIN,
        "## Dask engine (`score --engine dask`) against the local path",
        "",
        f"Generated by `benches/dask_engine.py` at {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}: one "
        f"generated run of {trajectories:,} trajectories, {calls:,} tool calls, {size / 2**20:,.0f} MiB, "
        f"{n_blocks} blocks of {BLOCK_BYTES >> 20} MiB; {rounds} alternating rounds, medians; the summaries were "
        "equal key for key in every round. "
        + (f"Two free cores while this ran (two CPU-bound processes did {med(parallel):.2f}× the work of one)."
           if med(parallel) >= 1.8 else
           f"The machine was shared with other jobs while this ran (two CPU-bound processes did "
           f"{med(parallel):.2f}× the work of one, where two free cores do 2.0×).")
        + f" Load average (1 min) at the start and after the graphs: {loads[0]:.1f}, {loads[1]:.1f}.",
        "",
        "| measurement | seconds (median) | rounds | ratio |",
        "|---|---|---|---|",
        f"| local path: `score --json`, fresh process | {med(local):.2f} | "
        f"{', '.join(f'{x:.2f}' for x in local)} | 1 |",
        f"| local path in a process that has scored before (the same streaming import, two worker processes) | "
        f"{med(local_warm):.2f} | {', '.join(f'{x:.2f}' for x in local_warm)} | — |",
        f"| Dask path: `score --engine dask --json`, fresh process (starts a LocalCluster of 2 single-threaded "
        f"workers) | {med(dask_cli):.2f} | {', '.join(f'{x:.2f}' for x in dask_cli)} | "
        f"**{ratio(dask_cli, local):.2f}×** local |",
        f"| Dask graph on a running LocalCluster, 2 workers | {med(warm[2]):.2f} | "
        f"{', '.join(f'{x:.2f}' for x in warm[2])} | **{ratio(warm[2], local):.2f}×** local (target ≤ 1.3) |",
        f"| Dask graph on a running LocalCluster, 1 worker | {med(warm[1]):.2f} | "
        f"{', '.join(f'{x:.2f}' for x in warm[1])} | 2 workers' throughput **{ratio(warm[1], warm[2]):.2f}×** "
        "one's (target ≥ 1.7) |",
        f"| … its graph on 2 workers against the local path in a process that has scored before | — | — | "
        f"**{ratio(warm[2], local_warm):.2f}×** |",
        f"| the machine now: two processes of a pure-CPU loop against one (2.0 = two free cores) | — | "
        f"{', '.join(f'{x:.2f}' for x in parallel)} | **{med(parallel):.2f}×** |",
        f"| overhead per block (the 2.3 MB sample as {n_small} blocks of 4 KiB against one block, 2 workers, wall "
        f"time) | {med(overhead) * 1000:.1f} ms | {', '.join(f'{x * 1000:.1f}' for x in overhead)} ms | — |",
        "",
        "Worker compute per kind of task in one more run of the graph (seconds, summed over the workers; "
        "`block`: read and score a range, `sha256`: the run key, one serial read of the file, `final`: line "
        "numbers, ids seen twice and the summary, `digest`: a block's score fields):",
        "",
        "| workers | " + " | ".join(KINDS) + " |",
        "|---|" + "---|" * len(KINDS),
    ]
    for workers in (1, 2):
        c = compute[workers][0]
        lines.append(f"| {workers} | " + " | ".join(f"{c.get(k, 0.0):.2f}" for k in KINDS) + " |")
    lines += [
        "",
        "Where the block tasks take more compute on two workers than on one, the two did not have a core each "
        "(the machine's other jobs): the throughput ratio then measures the machine, not the engine.",
        "",
    ]
    if table_calls:
        lines += page_section(path, table_calls, med(parallel), rounds, s3_runs)
    if fleet_runs:
        lines += [FLEET_BEGIN, *fleet_section(fleet_runs, 400, med(parallel)), FLEET_END]
    lines.append(END)
    return lines


# --- the Score tables page on a 10 M-call score table ---------------------------------------


TABLE_LAYOUT = 4
"""Bumped when the engine's table changes (2: the Inconclusive index; 3: index.json and each
run's summary; 4: a run's staged parts gathered into parts of ``engine.PART_BYTES``, as the
publish task does): an older synthesised table is made again."""


def synth_table(source: Path, out: Path, replicas: int) -> dict:
    """A score table of ``replicas`` copies of ``source``'s trajectories, made with the engine's
    own task functions: each block of the run is read and scored once (``score_block``), then
    each copy of it (its ids suffixed ``~k``, its bytes the original's) is digested, the final
    stage aggregates every copy (``finish_run``, with the charts' aggregates) and each copy's
    rows are written as a Parquet part (``write_part``), summaries last (``commit_results``). A 10 M-call
    run itself is about 11 GiB of JSONL: writing and scoring it would add minutes and that much
    disk to every bench, for a table the page reads the same way (index.json, the run's summary
    and aggregates, the Inconclusive index, the first rows)."""
    import shutil

    import fsspec

    from scoring.dask_engine import planning, table_layout, table_writer, tasks
    from scoring.ingest import Block
    from scoring.rows import ROW_COLUMNS

    meta = out / "bench.json"
    if meta.exists():
        info = json.loads(meta.read_text())
        if info.get("source_bytes") == source.stat().st_size and info.get("replicas") == replicas \
                and info.get("layout") == TABLE_LAYOUT:
            return info
    shutil.rmtree(out, ignore_errors=True)
    t = time.perf_counter()
    plan = planning.plan_run(str(source))
    scored = [tasks.score_block(plan, s, e) for s, e in planning.block_bounds(plan)]
    at = ROW_COLUMNS.index("trajectory_id")
    blocks = []
    for k in range(replicas):
        for sc in scored:
            rows = [(*r[:at], f"{r[at]}~{k}", *r[at + 1:]) for r in sc.rows]
            blocks.append(Block(rows, [], sc.seen, sc.lines))
    del scored
    final = tasks.finish_run(plan, tasks.file_sha256(plan), None, *map(tasks.digest, blocks), aggregates=True)
    assert final.error is None, final.error
    out.mkdir(parents=True)
    staging = out.parent / f".{out.name}-staging"
    shutil.rmtree(staging, ignore_errors=True)
    written = sum(table_writer.write_part(b, final, i, str(staging), {}, plan.url) for i, b in enumerate(blocks))
    rows = f"{table_layout.TABLE_DIR}/run_key={final.run_key}"
    parts = table_writer.gather_parts(fsspec.filesystem("file"), str(staging / rows), str(out / rows))
    shutil.rmtree(staging)
    table_writer.commit_results(str(out), str(out), {}, [final])
    info = {"source_bytes": source.stat().st_size, "replicas": replicas, "rows": written, "layout": TABLE_LAYOUT,
            "calls": final.summary["tool_calls"], "inconclusive": final.summary["inconclusive"],
            "parts": parts, "staged_parts": len(blocks),
            "bytes": sum(f.stat().st_size for f in out.rglob("*") if f.is_file()),
            "seconds": time.perf_counter() - t}
    meta.write_text(json.dumps(info))
    return info


PAGE_CHILD = r'''
import json, statistics, sys, time
from pathlib import Path
sys.path.insert(0, {root!r})
import streamlit as st
from streamlit.testing.v1 import AppTest
from pages._shared import loaders, state
loaders.DB_PATH = Path({db!r})
at = AppTest.from_file({root!r} + "/app.py", default_timeout=600)
at.run()
at.switch_page("pages/score_tables.py").run()
assert not at.exception, at.exception
box = at.text_input(key="score_table_location").input({table!r})
t = time.perf_counter(); box.run(); first = time.perf_counter() - t
assert not at.exception, at.exception
assert not at.error, [e.value for e in at.error]
shown = next(m.value for m in at.metric if m.label == "Trajectories")
rerun = []
for _ in range(5):
    at.session_state["bench_nonce"] = time.time()
    t = time.perf_counter(); at.run(); rerun.append(time.perf_counter() - t)
uncached = []
for _ in range(3):
    st.cache_data.clear(); st.cache_resource.clear()
    at.session_state["bench_nonce"] = time.time()
    t = time.perf_counter(); at.run(); uncached.append(time.perf_counter() - t)
# A reviewer's label on the table: the rates are drawn again with it (the Inconclusive ids
# and their categories read from the engine's index of them).
from scoring.dask_engine import table_reader, table_workspace
from scoring.model import ReviewLabel
(run,) = table_reader.open_table({table!r})
tid = table_reader.first_rows(run, ["trajectory_id"], 1, status="inconclusive").column(0)[0].as_py()
from scoring.workspace import Workspace
table_workspace.add_label(Workspace(loaders.db()), run, tid, "bench", ReviewLabel.GENUINE_DECLINE)
labelled = []
for _ in range(3):
    at.session_state["bench_nonce"] = time.time()
    t = time.perf_counter(); at.run(); labelled.append(time.perf_counter() - t)
    st.cache_resource.clear()
assert not at.exception, at.exception
print(json.dumps({{"first_s": first, "rerun_s": statistics.median(rerun), "uncached_s": statistics.median(uncached),
                  "labelled_s": statistics.median(labelled), "trajectories": shown}}))
'''


def page_timings(table: Path) -> dict:
    import tempfile

    with tempfile.TemporaryDirectory(prefix="litmus-bench-") as tmp:
        script = Path(tmp) / "page_child.py"
        script.write_text(PAGE_CHILD.format(root=str(ROOT), db=str(Path(tmp) / "app.db"), table=str(table)))
        out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=ROOT)
        if out.returncode:
            raise RuntimeError(out.stderr[-3000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def table_section(source: Path, calls: int, parallel: float, rounds: int = 3) -> list[str]:
    """The Score tables page on a score table of about ``calls`` tool calls (copies of the
    bench run): server time of its renders, in ``rounds`` fresh processes (AppTest)."""
    with open(source, "rb") as fh:
        per_run = sum(1 for _ in fh) - 1  # trajectories in the run
    replicas = max(1, round(calls / (per_run * 5)))
    info = synth_table(source, OUT / f"table-{replicas}x-{source.stem}", replicas)
    load = os.getloadavg()[0]
    apps = [page_timings(OUT / f"table-{replicas}x-{source.stem}") for _ in range(rounds)]
    med = statistics.median
    ok = lambda x: "" if x <= 1 else ": not met"  # noqa: E731

    def row(what: str, key: str, target: bool = True) -> str:
        got = [a[key] for a in apps]
        return (f"| {what} | {med(got):.2f} | {', '.join(f'{x:.2f}' for x in got)} | "
                + (f"≤ 1{ok(med(got))}" if target else "—") + " |")

    first_ratios = [a["first_s"] / a["uncached_s"] for a in apps]
    return [
        f"### The Score tables page on a score table of {info['calls']:,} tool calls",
        "",
        f"A score table of {info['rows']:,} trajectories, {info['calls']:,} tool calls ({info['parts']} Parquet "
        f"part{'s' if info['parts'] != 1 else ''}, {info['bytes'] / 2**20:,.0f} MiB), made by `synth_table`: the "
        f"bench run above scored once by the engine's block task and its rows written {replicas} times with new "
        "ids, aggregated by the engine's final stage (index.json, the run's summary and aggregates), staged by its "
        f"Parquet writer ({info['staged_parts']} parts, one a block) and gathered as its publish task gathers them "
        f"(a 10 M-call run itself is ≈ 11 GiB of JSONL). Made in {info['seconds']:.0f} s (once; reused while the "
        "bench run is unchanged). Server time of the page (AppTest: the script's run), in a fresh process whose "
        f"app has started (its first page drawn), {rounds} processes one after another; load average (1 min) "
        f"{load:.1f} before them"
        + ("; two free cores." if parallel >= 1.8 else
           f"; the machine was shared (two-process ratio {parallel:.2f}×)."),
        "",
        "| measurement | seconds (median) | rounds | target |",
        "|---|---|---|---|",
        row("first render of the table in the process (opens it, draws its rates, three charts and its first rows; "
            f"shows {apps[0]['trajectories']} trajectories)", "first_s"),
        row("render with the page's caches cleared (median of 3 in each process)", "uncached_s"),
        row("rerun (median of 5 in each process)", "rerun_s"),
        row("render after a label in the workspace (the label applied through the engine's index of the run's "
            "Inconclusive trajectories; median of 3 in each process)", "labelled_s"),
        f"| first render ÷ render with the caches cleared (what the process's first table costs beyond any "
        f"opening) | — | {', '.join(f'{x:.2f}' for x in first_ratios)} | **{med(first_ratios):.2f}×** |",
        "",
    ]


S3_CHILD = r'''
import json, sys, threading, time
from pathlib import Path
sys.path.insert(0, {root!r})
from streamlit.testing.v1 import AppTest
from pages._shared import loaders
from scoring.workspace import views
loaders.DB_PATH = Path({db!r})
warm = sys.argv[1] == "on"
ended = []
if warm:
    warm_up = views._warm_up  # timed: when it ends, after the app's start
    views._warm_up = lambda db, then: (warm_up(db, then), ended.append(time.perf_counter() - started))
else:
    views.warm_up_storage = lambda db, then=None: None  # the app as it was: nothing imported ahead
at = AppTest.from_file({root!r} + "/app.py", default_timeout=600)
started = time.perf_counter()
if sys.argv[2] == "score_tables":  # the server's first page is the Score tables page (a bookmark)
    at.switch_page("pages/score_tables.py")
at.run()  # else Safe rates, the app's default page
first_page = time.perf_counter() - started
assert not at.exception, at.exception
at.switch_page("pages/score_tables.py").run()
for thread in threading.enumerate():  # the researcher types the table's URL: the warm-up has ended
    if thread.name == views.WARM_UP_THREAD:
        thread.join()
assert ("s3fs" in sys.modules) is warm, "the warm-up imported s3fs" if not warm else "no warm-up ran"
times = {{}}
for name, location in (("first", {location!r}), ("again", {location!r} + "/")):  # another spelling: not cached
    at.text_input(key="score_table_location").input(location)
    t = time.perf_counter(); at.run(); times[name] = time.perf_counter() - t
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]
    assert len(at.selectbox(key="score_table_run").options) == {runs}
print(json.dumps({{"first_page_s": first_page, "warm_up_ended_s": ended[0] if ended else None, "open_s": times["first"],
                  "again_s": times["again"]}}))
'''


def s3_open_section(runs: int, rounds: int, parallel: float) -> list[str]:
    """The first S3 table a fresh server process opens: a table of ``runs`` runs on a local S3
    server (moto), opened by its URL with the workspace's storage profile, in ``rounds`` pairs of
    fresh processes, one without the app's warm-up of the store's backend, one with it (the
    table opened once the warm-up has ended, as when a researcher types its URL), alternating;
    in each, the same table opened again by another spelling of its URL (not cached: the
    baseline). Server time: the page's script run (AppTest)."""
    import tempfile

    sys.path.insert(0, str(ROOT))
    from tests.s3_tables import CREDENTIALS, fleet_table, profile_toml

    med = statistics.median
    proc, so = _moto()
    try:
        with tempfile.TemporaryDirectory(prefix="litmus-bench-s3-") as tmp:
            folder = Path(tmp)
            location, _ids, _first = fleet_table(so, "bench", folder, runs)
            db = folder / "app.db"
            db.with_name(db.name + ".d").mkdir()
            (db.with_name(db.name + ".d") / "settings.toml").write_text(profile_toml(so["endpoint_url"], "s3://bench/"))
            script = folder / "s3_child.py"
            script.write_text(S3_CHILD.format(root=str(ROOT), db=str(db), location=location, runs=runs))
            env = {**os.environ, **CREDENTIALS, "AWS_EC2_METADATA_DISABLED": "true"}
            loads = [os.getloadavg()[0]]
            got: dict[tuple[str, str], list[dict]] = {}
            for i in range(rounds):
                for first in FIRST_PAGES:
                    for mode in ("off", "on") if i % 2 == 0 else ("on", "off"):  # a drifting load hits both
                        out = subprocess.run([sys.executable, str(script), mode, first], capture_output=True,
                                             text=True, cwd=ROOT, env=env)
                        if out.returncode:
                            raise RuntimeError(out.stderr[-3000:])
                        got.setdefault((first, mode), []).append(json.loads(out.stdout.strip().splitlines()[-1]))
            loads.append(os.getloadavg()[0])
    finally:
        proc.terminate()
        proc.wait(timeout=30)

    def cells(first: str, mode: str, key: str) -> str:
        xs = [g[key] for g in got[first, mode]]
        return f"{med(xs):.2f} ({', '.join(f'{x:.2f}' for x in xs)})"

    def ratios(xs: list[float]) -> str:
        return f"**{med(xs):.2f}×** ({', '.join(f'{x:.2f}' for x in xs)})"

    def per_round(first: str, key: str) -> list[float]:
        return [on[key] / off[key] for on, off in zip(got[first, "on"], got[first, "off"], strict=True)]

    lines = [
        f"### The first S3 table a server process opens ({runs:,} runs)",
        "",
        f"A score table of {runs:,} runs on a local S3 server (moto, on this machine; `tests/s3_tables.fleet_table`), "
        "opened by its URL with the workspace's storage profile (endpoint as an option, credentials from the "
        "environment variables it names), in fresh processes: the app starts (its first page: Safe rates, the "
        "default, or the Score tables page itself, as from a bookmark), the Score tables page is drawn, then the "
        "table is opened (its index, the first run's summary, aggregates and first rows, three charts), then "
        "opened again by another spelling of its URL (the page's caches miss; s3fs and its client are warm: the "
        "baseline). Without the warm-up the first opening imports s3fs, aiobotocore and botocore; with it the "
        "app imported them in a background thread when it started (then built a throwaway chart: plotly's "
        "classes and template), and the table was opened once that thread "
        f"had ended (as when a researcher types the URL). {rounds} rounds, alternating (without, with; then with, "
        "without); medians (each round's "
        "value in brackets). Server time (AppTest: the script's run). Load average (1 min) before and after: "
        f"{loads[0]:.1f}, {loads[1]:.1f}"
        + ("; two free cores." if parallel >= 1.8 else
           f"; the machine was shared (two-process ratio {parallel:.2f}×)."),
        "",
        "| first page | seconds | without the warm-up | with the warm-up | with ÷ without |",
        "|---|---|---|---|---|",
    ]
    for first, name in FIRST_PAGES.items():
        target = med([g["open_s"] for g in got[first, "on"]])
        cold = {m: [g["open_s"] / g["again_s"] for g in got[first, m]] for m in ("off", "on")}
        lines += [
            f"| {name} | the app's first page in the process (the warm-up thread starts with it) | "
            f"{cells(first, 'off', 'first_page_s')} | {cells(first, 'on', 'first_page_s')} | "
            f"{ratios(per_round(first, 'first_page_s'))} |",
            f"| {name} | the warm-up ended, after the app's start | — | {cells(first, 'on', 'warm_up_ended_s')} | — |",
            f"| {name} | **the first S3 table opened** (target ≤ 1 s{'' if target <= 1 else ': not met'}) | "
            f"{cells(first, 'off', 'open_s')} | {cells(first, 'on', 'open_s')} | "
            f"{ratios(per_round(first, 'open_s'))} |",
            f"| {name} | the same table opened again (another spelling of its URL: the baseline) | "
            f"{cells(first, 'off', 'again_s')} | {cells(first, 'on', 'again_s')} | — |",
            f"| {name} | first ÷ again | {ratios(cold['off'])} | {ratios(cold['on'])} | — |",
        ]
    return [*lines, ""]


FIRST_PAGES = {"safe_rates": "Safe rates", "score_tables": "Score tables"}
"""The first page a fresh server draws, in the S3 case: the app's default, or the Score tables
page (a bookmark): the latter also draws the process's first charts when the table opens."""


def page_section(source: Path, calls: int, parallel: float, rounds: int, s3_runs: int = 10_000) -> list[str]:
    """The Score tables page's part of the section, between its own markers (``--page-only``
    rewrites only it)."""
    return [PAGE_BEGIN, *(table_section(source, calls, parallel, rounds) if calls else []),
            *(s3_open_section(s3_runs, rounds, parallel) if s3_runs else []), PAGE_END, ""]


KINDS = ("block", "digest", "sha256", "final")


# --- a fleet: planning on the workers, and 10,000 tiny runs ----------------------------------


def tiny_runs(folder: Path, n: int) -> list[Path]:
    """``n`` small canonical runs (a few records of the bundled sample each, each its own run id)."""
    folder.mkdir(parents=True, exist_ok=True)
    lines = SMALL.read_bytes().split(b"\n")
    header = json.loads(lines[0])
    paths = []
    for i in range(n):
        path = folder / f"run-{i:05d}.jsonl"
        if not path.exists():
            head = json.dumps({**header, "run_id": f"tiny-{i:05d}"}).encode()
            path.write_bytes(b"\n".join([head, *lines[1 + i % 50:4 + i % 50]]) + b"\n")
        paths.append(path)
    return paths


def _moto() -> tuple[subprocess.Popen, dict]:
    import socket
    import urllib.request

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    proc = subprocess.Popen([str(Path(sys.executable).parent / "moto_server"), "-H", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            urllib.request.urlopen(url, timeout=2).close()
            return proc, {"endpoint_url": url, "key": "bench", "secret": "bench"}
        except OSError:
            if time.monotonic() > deadline or proc.poll() is not None:
                proc.kill()
                raise RuntimeError("moto_server did not start") from None
            time.sleep(0.2)


def fleet_section(runs: int, plan_files: int, parallel: float) -> list[str]:
    """Planning per file on the client (``plan_run`` one file after another, as the engine did
    before) against plan tasks on two workers, one task a file and in batches (``plan_batch``:
    as ``score_runs`` plans), on a local S3 server (moto); then a fleet of ``runs`` tiny runs
    from local disk, one damaged, scored and published by ``score_runs`` on a LocalCluster of
    two workers, and a retry to the same table."""
    import shutil

    import s3fs

    from scoring import ingest, score
    from scoring.dask_engine import cluster, fleet, planning, table_layout
    from scoring.request import DEFAULT_REQUEST

    folder = OUT / "fleet-runs"
    paths = tiny_runs(folder, runs)
    plan_files = min(plan_files, runs)
    proc, so = _moto()
    try:
        fs = s3fs.S3FileSystem(**so)
        fs.mkdir("bench")
        for p in paths[:plan_files]:
            fs.pipe(f"bench/runs/{p.name}", p.read_bytes())
        urls = [f"s3://bench/runs/{p.name}" for p in paths[:plan_files]]
        t = time.perf_counter()
        for u in urls:  # the same planning as the workers', one file after another
            assert isinstance(fleet.plan_task(u, so, None, True, DEFAULT_REQUEST, score.SCORER_VERSION, None, False),
                              planning.RunPlan)
        client_s = (time.perf_counter() - t) / len(urls)
        spec = fleet.Fleet(so, True, DEFAULT_REQUEST, score.SCORER_VERSION, None, False, ingest.BLOCK_BYTES)
        with cluster.connect(workers=2) as client:
            client.run(lambda: planning.plan_run(urls[0], so) and None)  # imports and a connection per worker
            t = time.perf_counter()
            futures = client.map(fleet.plan_task, urls, storage_options=so, payloads=None, auto_payloads=True,
                                 fmt="auto", verdict_map=None, scorer_version=score.SCORER_VERSION, options={},
                                 out=None, replace=False, pure=False)
            assert all(isinstance(p, planning.RunPlan) for p in client.gather(futures))
            per_task_s = (time.perf_counter() - t) / len(urls)
            size = fleet.plan_batch_size(len(urls), 2)
            t = time.perf_counter()
            futures = [client.submit(fleet.plan_batch, [(u, None) for u in urls[at:at + size]], spec, pure=False)
                       for at in range(0, len(urls), size)]
            assert all(isinstance(p, planning.RunPlan) for batch in client.gather(futures) for p in batch)
            workers_s = (time.perf_counter() - t) / len(urls)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    damaged = folder / "run-00007.jsonl"
    good = damaged.read_bytes()
    damaged.write_bytes(b"{not json\n")
    table = OUT / "fleet-table"
    shutil.rmtree(table, ignore_errors=True)
    load = os.getloadavg()[0]
    try:
        with cluster.connect(workers=2) as client:
            t = time.perf_counter()
            first = fleet.score_runs([str(p) for p in paths], client, out=str(table))
            first_s = time.perf_counter() - t
            damaged.write_bytes(good)
            t = time.perf_counter()
            again = fleet.score_runs([str(p) for p in paths], client, out=str(table))
            again_s = time.perf_counter() - t
    finally:
        damaged.write_bytes(good)
    in_s3 = fleet_in_s3(paths, damaged.name, good)
    tasks = -(-runs // fleet.plan_batch_size(runs, 2))
    done = sum(r.status == "done" for r in first)
    failed = [r.error for r in first if r.status == "failed"]
    assert done == runs - 1 and len(failed) == 1 and str(damaged) in failed[0], (done, failed[:3])
    assert [r.status for r in again].count("skipped") == runs - 1
    held = len(json.loads((table / table_layout.SUMMARY_FILE).read_text()))
    parts = list((table / table_layout.TABLE_DIR).rglob("*.parquet"))
    orphans = list((table / table_layout.TABLE_DIR).glob("*/.*")) + list(table.glob(table_layout.STAGING_DIR))
    return [
        "### A fleet",
        "",
        f"Planning (size, header or format, side log beside it) of {plan_files} tiny runs on a local S3 server "
        f"(moto, on this machine: a real object store's latency is higher, which makes the serial client slower "
        f"still): one file after another on the client {client_s * 1000:.1f} ms per file; on a LocalCluster of "
        f"two workers, one task a file {per_task_s * 1000:.1f} ms per file, in batches of "
        f"{fleet.plan_batch_size(plan_files, 2)} files a task (as `score_runs` plans) {workers_s * 1000:.1f} ms per "
        f"file: **{client_s / workers_s:.2f}×** faster than the client (one task a file: "
        f"{client_s / per_task_s:.2f}×; two-process CPU check now {parallel:.2f}×, load average "
        f"{os.getloadavg()[0]:.1f}). The client starts a run's blocks as soon as its batch is back.",
        "",
        f"A fleet of **{runs:,} tiny runs** (3 records each, from local disk; one damaged) on a LocalCluster of two "
        f"workers with `--out` (load average {load:.1f} at its start): {first_s:.0f} s ({runs / first_s:,.0f} "
        f"runs/s; {tasks:,} tasks, each planning, scoring and publishing {fleet.plan_batch_size(runs, 2)} runs); "
        f"{done:,} done, "
        f"the damaged one failed alone, named (`{Path(failed[0].split(':')[0]).name}: …`); the table holds "
        f"{held:,} runs in {len(parts):,} parts, {len(orphans)} staging folders or orphan parts left. The damaged "
        f"run repaired, the retry to the same table scored it alone in {again_s:.0f} s ({runs - 1:,} skipped: each "
        "run's record read by its batch's task). Tiny runs measure the per-run overhead (planning, publishing, "
        "scheduling), not scoring.",
        "",
        f"The same {runs:,} runs from a bucket into a score table in the bucket (moto on this machine, given as a "
        f"glob; load average {in_s3['load']:.1f} at its start): {in_s3['first_s']:.0f} s, "
        f"**{in_s3['first_s'] / first_s:.2f}×** the local fleet's time; {in_s3['done']:,} done, the damaged one "
        f"named; **{in_s3['requests'] / runs:.1f} requests a run** (the run read once, its rows, Inconclusive "
        f"index, aggregates, summary and record written once each; the fleet's listing and index files "
        f"included). The retry, the damaged run repaired: {in_s3['again_s']:.0f} s, "
        f"{in_s3['again_requests'] / runs:.1f} requests a run ({in_s3['skipped']:,} skipped: each run's record and "
        "size). On moto every request costs CPU on this machine; on a real object store each costs latency "
        "instead, spread over each batch's threads and the workers.",
        "",
    ]


def fleet_in_s3(paths: list[Path], damaged: str, good: bytes) -> dict:
    """The fleet of ``paths`` (``damaged`` named one damaged) in a moto bucket, scored by glob into a
    table in the bucket, then retried with it repaired; the requests the server logged."""
    import s3fs

    from scoring.dask_engine import cluster, fleet, planning
    from tests.s3_tables import moto_server

    log = OUT / "moto-fleet.log"
    with moto_server(log) as so:
        fs = s3fs.S3FileSystem(**so)
        fs.mkdir("fleet")
        fs.pipe({f"fleet/in/{p.name}": b"{not json\n" if p.name == damaged else p.read_bytes() for p in paths})

        def logged() -> int:
            return sum(" HTTP/1.1" in line for line in log.read_text(errors="replace").splitlines())

        load, since = os.getloadavg()[0], logged()
        with cluster.connect(workers=2) as client:
            t = time.perf_counter()
            sides: dict[str, str] = {}
            runs = planning.expand_inputs(["s3://fleet/in/*.jsonl"], (), so, sides=sides)
            kw = {"out": "s3://fleet/table", "storage_options": so, "auto_payloads": True,
                  "payloads": [sides.get(r) for r in runs]}
            first = fleet.score_runs(runs, client, **kw)
            first_s, requests = time.perf_counter() - t, logged() - since
            fs.pipe(f"fleet/in/{damaged}", good)
            since = logged()
            t = time.perf_counter()
            again = fleet.score_runs(planning.expand_inputs(["s3://fleet/in/*.jsonl"], (), so), client, **kw)
            again_s, again_requests = time.perf_counter() - t, logged() - since
    statuses = [r.status for r in first]
    assert statuses.count("done") == len(paths) - 1 and statuses.count("failed") == 1, statuses.count("failed")
    assert [r.status for r in again].count("done") == 1
    return {"first_s": first_s, "again_s": again_s, "requests": requests, "again_requests": again_requests,
            "done": statuses.count("done"), "skipped": [r.status for r in again].count("skipped"), "load": load}


def write_section(lines: list[str], begin: str = BEGIN, end: str = END) -> None:
    """``lines`` (from ``begin`` to ``end``) in benches/RESULTS.md in place of the section
    between those markers; a page section whose markers are absent goes at the end of the Dask
    engine's, else at the end of the file."""
    results = ROOT / "benches" / "RESULTS.md"
    text = results.read_text() if results.exists() else "# Benchmarks\n"
    section = "\n".join(lines) + "\n"
    if begin in text and end in text:
        text = text[:text.index(begin)] + section + text[text.index(end) + len(end) + 1:]
    elif begin in (PAGE_BEGIN, FLEET_BEGIN) and END in text:
        text = text[:text.index(END)] + section + text[text.index(END):]
    else:
        text = text.rstrip("\n") + "\n\n" + section
    results.write_text(text)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trajectories", type=int, default=200000, help="5 tool calls each")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--table-calls", type=int, default=10_000_000,
                    help="the score table the Score tables page is timed on (0: skip it)")
    ap.add_argument("--fleet-runs", type=int, default=10_000, help="runs in the fleet case (0: skip it)")
    ap.add_argument("--s3-runs", type=int, default=10_000,
                    help="runs in the S3 table whose first opening is timed (0: skip it)")
    ap.add_argument("--page-only", action="store_true",
                    help="only the Score tables page's part (the bench run must exist): rewrites only that part")
    ap.add_argument("--fleet-only", action="store_true",
                    help="only the fleet's part (planning, --fleet-runs tiny runs from disk and from S3): rewrites "
                         "only that part")
    args = ap.parse_args(argv)
    if args.fleet_only:
        parallel = statistics.median([machine_parallelism() for _ in range(args.rounds)])
        lines = [FLEET_BEGIN, *fleet_section(args.fleet_runs, 400, parallel), FLEET_END]
        print("\n".join(lines))
        write_section(lines, FLEET_BEGIN, FLEET_END)
        return 0
    if args.page_only:
        path = OUT / f"bench-{args.trajectories}.jsonl"
        if not path.exists():
            ap.error(f"{path} is missing: run the whole bench once (it generates the run)")
        parallel = statistics.median([machine_parallelism() for _ in range(args.rounds)])
        lines = page_section(path, args.table_calls, parallel, args.rounds, args.s3_runs)
        print("\n".join(lines))
        write_section(lines, PAGE_BEGIN, PAGE_END)
        return 0
    lines = run(args.trajectories, args.rounds, args.table_calls, args.fleet_runs, args.s3_runs)
    print("\n".join(lines))
    write_section(lines)
    return 0


if __name__ == "__main__":
    sys.exit(main())
