"""The Dask engine against the local path, as ratios measured in the same run (issue 18).

    python benches/dask_engine.py [--trajectories 20000] [--rounds 3]

Writes its section of benches/RESULTS.md (between the ``dask-engine`` markers; ``make bench``
writes it with the rest). Measured on one generated run (5 calls per trajectory):

- the local path: ``litmus-review score FILE --json`` in a fresh process (a run this large is
  streamed on two worker processes through a temporary workspace);
- the Dask path the same way, ``--engine dask`` (it starts a LocalCluster of two single-threaded
  workers: the start is part of the time);
- the graph alone on a running LocalCluster of two workers, then of one: what a team with a
  cluster waits for, and the throughput of two workers against one;
- the overhead per block: the same small run cut into many blocks against one block.
Rounds alternate the paths, and each ratio is the median of the per-round ratios.
"""

from __future__ import annotations

import argparse
import json
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
SMALL = ROOT / "sample_runs" / "observed-m1.jsonl"


def cli_seconds(path: Path, *extra: str) -> tuple[float, dict]:
    t = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "scoring", "score", str(path), "--json", *extra], cwd=ROOT,
                         capture_output=True, text=True, check=True)
    return time.perf_counter() - t, json.loads(out.stdout)


def graph_seconds(client, path: Path, **kw) -> tuple[float, dict]:
    from scoring import engine

    t = time.perf_counter()
    (res,) = engine.score_runs([str(path)], client, **kw)
    return time.perf_counter() - t, res.summary


def task_seconds(client, path: Path) -> dict:
    """Seconds of worker compute per kind of task in one more run of the graph (Dask's task
    stream): where the time goes, and whether the workers had a core each."""
    from collections import defaultdict

    from distributed import get_task_stream

    from scoring import engine

    with get_task_stream(client) as stream:
        engine.score_runs([str(path)], client)
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


def run(trajectories: int, rounds: int) -> list[str]:
    import generate

    from scoring import engine
    from scoring.ingest import BLOCK_BYTES

    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / f"bench-{trajectories}.jsonl"
    if not path.exists():
        generate.write_bench_run(path, trajectories)
    size = path.stat().st_size
    calls = trajectories * 5

    local, dask_cli = [], []
    for _ in range(rounds):
        t, want = cli_seconds(path)
        local.append(t)
        t, got = cli_seconds(path, "--engine", "dask")
        dask_cli.append(t)
        assert got == want, "the dask path's summary differs from the local path's"

    from scoring.cli import _evaluate_streaming

    local_warm = []
    _evaluate_streaming(path, None)  # imports, not measured
    for _ in range(rounds):
        t = time.perf_counter()
        assert _evaluate_streaming(path, None).as_dict() == want
        local_warm.append(time.perf_counter() - t)

    small_blocks = 4096
    n_small = len(engine.block_bounds(engine.plan_run(str(SMALL)), small_blocks))
    warm = {1: [], 2: []}
    compute: dict[int, list[dict]] = {1: [], 2: []}
    overhead = []
    for workers in (2, 1):
        with engine.connect(workers=workers) as client:
            graph_seconds(client, SMALL)  # imports and first connections, not measured
            for _ in range(rounds):
                t, got = graph_seconds(client, path)
                assert got == want
                warm[workers].append(t)
                compute[workers].append(task_seconds(client, path))
                if workers == 2:
                    one, _ = graph_seconds(client, SMALL, block_bytes=1 << 30)
                    many, _ = graph_seconds(client, SMALL, block_bytes=small_blocks)
                    overhead.append((many - one) / (n_small - 1))

    parallel = [machine_parallelism() for _ in range(rounds)]
    med = statistics.median
    ratio = lambda a, b: med([x / y for x, y in zip(a, b)])  # noqa: E731 - per-round ratios
    n_blocks = len(engine.block_bounds(engine.plan_run(str(path)), BLOCK_BYTES))
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
           f"{med(parallel):.2f}× the work of one, where two free cores do 2.0×)."),
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
        f"{', '.join(f'{x:.2f}' for x in warm[2])} | **{ratio(warm[2], local):.2f}×** local |",
        f"| Dask graph on a running LocalCluster, 1 worker | {med(warm[1]):.2f} | "
        f"{', '.join(f'{x:.2f}' for x in warm[1])} | 2 workers' throughput **{ratio(warm[1], warm[2]):.2f}×** "
        "one's |",
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
        c = compute[workers][len(compute[workers]) // 2]
        lines.append(f"| {workers} | " + " | ".join(f"{c.get(k, 0.0):.2f}" for k in KINDS) + " |")
    lines += [
        "",
        "Where the block tasks take more compute on two workers than on one, the two did not have a core each "
        "(the machine's other jobs): the throughput ratio then measures the machine, not the engine.",
        END,
    ]
    return lines


KINDS = ("block", "digest", "sha256", "final")


def write_section(lines: list[str]) -> None:
    results = ROOT / "benches" / "RESULTS.md"
    text = results.read_text() if results.exists() else "# Benchmarks\n"
    section = "\n".join(lines) + "\n"
    if BEGIN in text and END in text:
        text = text[:text.index(BEGIN)] + section + text[text.index(END) + len(END) + 1:]
    else:
        text = text.rstrip("\n") + "\n\n" + section
    results.write_text(text)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trajectories", type=int, default=20000, help="5 tool calls each")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args(argv)
    lines = run(args.trajectories, args.rounds)
    print("\n".join(lines))
    write_section(lines)
    return 0


if __name__ == "__main__":
    sys.exit(main())
