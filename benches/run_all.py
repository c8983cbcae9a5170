"""Benchmarks for litmus-review (``make bench``). Prints figures and writes benches/RESULTS.md.

Every target is a ratio against a baseline measured in the same run on the same file, so the
figures mean the same on a slower or busier machine. Each measurement runs in a fresh
subprocess (clean peak RSS, no warm caches inside Python); the reported figure is the median.

    python benches/run_all.py [--runs 3] [--sizes 2000,20000,200000] [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "benches" / "out"
SHARED = ROOT.parent / "shared" / "real"
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "sample_runs"))

# --- one measurement per subprocess ----------------------------------------------------------

CHILD = r'''
import json, resource, sys, time
sys.path.insert(0, {root!r})
def main():
    kind, path = sys.argv[1], sys.argv[2]
    t = time.perf_counter()
    extra = {{}}
    if kind == "pyarrow":
        import pyarrow.json as pj
        opts = pj.ReadOptions(block_size=1 << 24)
        before = resource.getrusage(resource.RUSAGE_SELF)
        table = pj.read_json(path, read_options=opts)
        cold = time.perf_counter() - t
        after = resource.getrusage(resource.RUSAGE_SELF)
        extra["rows"] = table.num_rows
        extra["cold_sys_s"] = after.ru_stime - before.ru_stime
        extra["cold_user_s"] = after.ru_utime - before.ru_utime
        # Parsed again in the same process: its memory is already faulted in (mimalloc keeps
        # it), so this is the parse alone, without the kernel's cost of handing out ~2 GB.
        del table
        warm_start = time.perf_counter()
        table = pj.read_json(path, read_options=opts)
        extra["warm_seconds"] = time.perf_counter() - warm_start
    elif kind == "json_loads":
        n = 0
        with open(path, "rb") as fh:
            for line in fh:
                json.loads(line)
                n += 1
        extra["rows"] = n
    elif kind == "import":
        from scoring.workspace import Workspace
        ws = Workspace(sys.argv[3])
        t = time.perf_counter()
        res = ws.import_run(path)
        extra = {{"trajectories": res.run["trajectories"], "tool_calls": res.run["tool_calls"],
                  "unscored": None}}
    elif kind == "inspect_ours":
        from scoring.importers import load_run
        run = load_run(path)
        extra["tool_calls"] = run.tool_call_count
    elif kind == "inspect_theirs":
        from inspect_ai.log import read_eval_log
        log = read_eval_log(path)
        extra["tool_calls"] = sum(len(m.tool_calls or []) for s in log.samples for m in s.messages
                                  if m.role == "assistant")
    seconds = cold if kind == "pyarrow" else time.perf_counter() - t
    # Worker processes count too: the peak of the whole import is at most this process's
    # peak plus each worker's (RUSAGE_CHILDREN gives the largest finished child).
    workers = 0
    if kind == "import":
        from scoring.ingest import IMPORT_WORKERS, PARALLEL_MIN_BYTES
        import os
        workers = IMPORT_WORKERS if os.path.getsize(path) >= PARALLEL_MIN_BYTES else 0
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    child = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024 if workers else 0
    cpu = sum(getattr(resource.getrusage(w), f) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
              for f in ("ru_utime", "ru_stime"))
    print(json.dumps({{"seconds": seconds, "peak_rss_mb": own + workers * child, "own_rss_mb": own,
                      "worker_rss_mb": child, "workers": workers, "cpu_s": cpu, **extra}}))
if __name__ == "__main__":
    main()
'''


def measure(kind: str, path: Path, *extra: str) -> dict:
    script = OUT / "child.py"
    script.write_text(CHILD.format(root=str(ROOT)))
    out = subprocess.run([sys.executable, str(script), kind, str(path), *extra], capture_output=True, text=True,
                         cwd=ROOT, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def empty_db(db: Path) -> Path:
    """``db`` with nothing left of an earlier run (the database, its WAL files, its folder)."""
    for old in db.parent.glob(db.name + "*"):
        shutil.rmtree(old) if old.is_dir() else old.unlink()
    return db


def median_of(runs: int, kind: str, path: Path, fresh_db: bool = False) -> dict:
    results = []
    for i in range(runs):
        args = (str(empty_db(OUT / f"bench-{path.stem}-{i}.db")),) if fresh_db else ()
        results.append(measure(kind, path, *args))
    best = sorted(results, key=lambda r: r["seconds"])[len(results) // 2]
    best["all_seconds"] = [round(r["seconds"], 3) for r in results]
    for k in ("peak_rss_mb", "own_rss_mb", "worker_rss_mb"):
        if k in best:
            best[k] = max(r[k] for r in results)
    return best


# --- inputs ----------------------------------------------------------------------------------


def bench_file(trajectories: int) -> tuple[Path, dict]:
    import generate

    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / f"bench-{trajectories}.jsonl"
    meta = OUT / f"bench-{trajectories}.meta.json"
    if not path.exists() or not meta.exists():
        t = time.perf_counter()
        info = generate.write_bench_run(path, trajectories)
        info["generate_seconds"] = round(time.perf_counter() - t, 1)
        meta.write_text(json.dumps(info))
    return path, json.loads(meta.read_text())


def big_eval(samples: int) -> Path | None:
    """A large .eval made from a real Inspect log's header and sample, cloned with new ids."""
    import zipfile

    template = SHARED / "inspect_ai" / "log_message_deduplication.eval"
    if not template.exists():
        return None
    path = OUT / f"inspect-{samples}.eval"
    if path.exists():
        return path
    with zipfile.ZipFile(template) as z:
        header = z.read("header.json")
        sample = json.loads(z.read("samples/0_epoch_1.json"))
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as out:
        out.writestr("header.json", header)
        for i in range(samples):
            sample["id"] = i
            out.writestr(f"samples/{i}_epoch_1.json", json.dumps(sample))
    return path


# --- app timings (AppTest, server time) -------------------------------------------------------


def app_timings(db: Path) -> dict:
    script = OUT / "app_child.py"
    script.write_text(APP_CHILD.format(root=str(ROOT), db=str(db)))
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=ROOT, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


APP_CHILD = r'''
import json, statistics, sys, time
from pathlib import Path
sys.path.insert(0, {root!r})
from streamlit.testing.v1 import AppTest
from pages._shared import loaders, state
loaders.DB_PATH = Path({db!r})
at = AppTest.from_file({root!r} + "/app.py", default_timeout=600)
t = time.perf_counter(); at.run(); first = time.perf_counter() - t
assert not at.exception, at.exception
warm = []
for _ in range(5):
    at.session_state["bench_nonce"] = time.time()
    t = time.perf_counter(); at.run(); warm.append(time.perf_counter() - t)
# A server that has served pages before meets this run for the first time (imports done,
# nothing of this run cached): what the import's cache warming spares the user.
import streamlit as st
uncached_runs = []
for _ in range(3):
    st.cache_resource.clear()
    at.session_state["bench_nonce"] = time.time()
    t = time.perf_counter(); at.run(); uncached_runs.append(time.perf_counter() - t)
uncached = statistics.median(uncached_runs)
trajectories_runs = []
at.switch_page("pages/trajectories.py")
for _ in range(3):
    st.cache_resource.clear()
    at.session_state["bench_nonce"] = time.time()
    t = time.perf_counter(); at.run(); trajectories_runs.append(time.perf_counter() - t)
    assert not at.exception, at.exception
at.switch_page("pages/review.py").run()
at.text_input(key=state.REVIEWER_INPUT).input("bench")  # set on purpose, as a reviewer does
next(b for b in at.button if b.label == "Set reviewer").click().run()
label = []
for i in range(10):
    t = time.perf_counter()
    at.button(key="label-degenerate").click().run()
    label.append(time.perf_counter() - t)
    assert not at.exception, at.exception
after = []
for i in range(3):
    at.switch_page("pages/review.py").run()
    at.button(key="label-degenerate").click().run()
    at.switch_page("pages/safe_rates.py")
    t = time.perf_counter(); at.run(); after.append(time.perf_counter() - t)
    assert not at.exception, at.exception
from scoring.workspace import search_run
ws = loaders.workspace()
run_key = ws.runs()[0]["run_key"]
searches = []
for _ in range(3):  # a word that is in no record: the whole run is read
    t = time.perf_counter(); search_run(ws, run_key, "zq-no-such-word"); searches.append(time.perf_counter() - t)
print(json.dumps({{"safe_rates_first_s": first, "safe_rates_warm_s": statistics.median(warm),
                  "search_s": statistics.median(searches),
                  "safe_rates_uncached_s": uncached,
                  "trajectories_uncached_s": statistics.median(trajectories_runs),
                  "label_next_s": statistics.median(label), "label_next_all": [round(x, 3) for x in label],
                  "safe_rates_after_label_s": statistics.median(after)}}))
'''


PROFILE_NOTES = """## What the profile showed, and what is left

First round (cProfile on the 100 k-call run, 7.4 s import before optimising):

- the taxonomy rules ran 41 regexes over every call of every trajectory (2.4 s); they now read
  only what the harness's classifier did not see (decoded adapters, recaptured payloads,
  missing verdicts);
- every call was assessed twice; `sqlite-utils`' `insert_all` spent 2.9 s deriving types per
  value; one row per call cost more than parsing; a char-by-char hex check cost 0.5 s; the run
  was copied into the workspace. Now: one assessment, a prepared `executemany`, call sizes and
  gaps folded into the trajectory row, a compiled regex, a hard link.
- Then two spawned worker processes parse and score byte ranges while the main process writes,
  and records of the common shape take a lean path held equal to the typed path by tests.

Second round (1 M calls, 7.1 s; per-process CPU from `getrusage`, cProfile per block):
workers 10.2 s CPU, main 3.6 s — CPU-bound on both cores. Per trajectory the workers spent
~42 µs: 8 µs decoding the line, 9 µs encoding and hashing the five argument surfaces, 3 µs
JSON-checking them, ~12 µs of Python type checks and row building in the lean path, ~9 µs
(averaged) on the 5 % of records that need the typed path (a call over the capture limit:
these are the UNSCORED ones), the rest splitting the block into lines and cyclic GC passes.
The main process hashed the whole file for the run key *before* starting the workers (0.9 s
with one core idle), then renumbered every row in Python. Done:

- the common record shape is declared as `msgspec` structs and validated in C while decoding
  (one pass instead of ~20 Python checks per record); per-call checks run as list operations;
- lines are walked as memoryview slices (no copy of each block into line objects), and the
  cyclic GC is off while a block is scored (no cycles are made; it cost 7 %);
- blocks of 16 MB instead of 4 MB, 8 in flight (median of 5 alternating runs at 1 M calls:
  5.04 s vs 5.34 s; the same at 100 k);
- the run key is hashed in a thread while the workers start; the workers no longer need it:
  SQLite writes the key and each block's line shift as literals of a prepared `INSERT OR
  IGNORE`, so rows go from worker to database untouched (a duplicate id across blocks is the
  rare path, found by the row count and reported as before).

Result: 7.1 s → 5.3–6.2 s over the runs of 2026-11-29 (~10 s CPU in all processes). What remained was close to
the floor of this design in Python on two cores: decoding (~1 s CPU), SHA-256 of every argument
surface (~1 s) and of the file (0.7 s), a JSON check of every argument surface (~0.9 s, kept:
it catches a harness whose "raw" digest was taken after truncation), the typed path for the
UNSCORED records (~1.6 s) and the SQLite insert (~1.1 s: ~5 µs per 27-column row, of which an
integer run key or a WITHOUT ROWID table would save ~0.1–0.2 s, measured). `pyarrow.json`
itself uses both cores for ~2–2.8 s, so 2× its wall time leaves ~4–5.5 s of wall for all of
the above; the remaining gap needs a compiled checker for the common shape (decode + hash +
argument check per call in one native pass), held equal to the typed path by the same
property test.

Third round (2026-11-29, later): why pyarrow's time swung 3x. In a fresh process,
`read_json` on the 1 GB file spends 4.8–6.4 s of *system* time (the kernel handing it ~2.4 GB
of new memory on this VM) inside a 4.0–4.9 s wall; parsed a second time in the same process,
with its memory already mapped, it takes 1.48–1.87 s (600–760 MB/s: the parse alone, and
the issue's ~600 MB/s). Our import maps little new memory (0.9 s of system time). Both pyarrow
figures are now printed and the import is judged against each; the second is the honest
baseline. Done this round: the arguments' JSON check uses msgspec's non-building syntax check
(held by a property test to accept nothing the typed path refuses; 16.5 → 15.5 µs per lean
record, best of 5), and the call sizes for the histogram are read with one `group_concat` and
numpy's parser (0.44 → 0.13 s of a cold render). Measured and not adopted: `map` with
attribute getters instead of list comprehensions (slower, 16.5 vs 15.6 µs), msgpack or orjson
instead of pickle for rows between processes (decoding 0.27 s / 0.32 s vs 0.19 s), a rowid-range
scan for a run's scores (0.05 s), 1 MB reads to keep lines in cache (~4 % of worker time, inside
the noise).

Where the 5.1–5.5 s of a million-call import goes (~9.5 s of CPU): the workers' ~6.9 s is scoring
(a whole-file serial pass: 6.5–7.3 s) — 10 k typed records at ~155 µs (~1.6 s) and 190 k
lean records at ~26–30 µs (15.3 µs in a hot loop over the same records, whose parts measured
alone are decoding ~8 µs, encoding and SHA-256 of five argument surfaces ~8 µs and their JSON
check ~2 µs; the rest is walking lines through data not yet in cache) — plus startup and pickling;
the main process's ~2.6 s is the
file's SHA-256 (0.85 s), the SQLite insert (1.35 s) and unpickling rows (0.2–0.3 s). Twice
pyarrow's second parse is ~3–3.7 s of wall, ~6 s of CPU on two cores: out of reach for this
design in Python. **The 1 M-call import target is not met against pyarrow's parse alone
(3.0–4.3x round by round); against pyarrow in a fresh process it is (1.1–1.5x), but that baseline is inflated
by the kernel's memory cost, so the target is not claimed.** What would meet it is a native
checker for the common record shape (decode, hash and JSON-check each call in one pass, on
both cores), held equal to the typed path by the existing property tests.

App. After a new label the Safe rates page used to reload all 200 k scores (1.5–1.8 s measured
alone, plus ~1.6 s of aggregates: ~3 s, not timed as a whole) because its cache was keyed by
the label count; scores are now cached per run (they never change after import) and only the
aggregates rerun: the Wilson and cluster-robust intervals are computed in closed form (each
held equal to statsmodels by a property test; the three OLS fits took ~0.4 s and the
statsmodels import 0.6 s of every cold load), tasks are coded once per summary, and the
waterfall reuses the summary (0.70–1.05 s). Third round: a cold first render (2.6–4.2 s) was
~1 s of imports, 1.4–1.6 s loading 200 k frozen score objects (most of it the frozen
dataclass's `__init__`), ~0.5 s reading a million call sizes and ~0.5 s of aggregates over the
objects. The aggregates now take columns (`ScoreColumns`, one array per field they read);
score objects are turned into columns first, so there is still one way to aggregate, and the
app reads the columns straight from SQLite (0.43 s). Summaries, breakdowns, waterfalls and
paired differences came out bit-identical on the sample runs and the 200 k run; property tests
hold columns and objects equal. Since then, over four bench runs on this noisy host: first render in a fresh
process 1.1–1.4 s (of which ~0.5 s is importing plotly, pandas and the app), a run's first
render on a running server 0.79–1.28 s (around the 1 s target, not reliably under it), right
after a new label 0.29–0.43 s. What is left of the 0.43 s is SQLite handing
200 k rows to Python one by one (~0.3 s whatever the columns).

Fourth round (2026-11-30). The floor of the import, measured piece by piece on the 1.1 GiB file
(one process, hot loops): pyarrow's second parse took 1.51–1.89 s of wall and 3.0–3.6 s of CPU
on both cores, so the 2x target leaves 3.0–3.8 s of wall, at most 6.0–7.6 s of CPU. The C
calls the import cannot skip already take ~5.5 s of CPU on their own: msgspec decoding the
190 k common-shape records 1.61 s, re-encoding their 947 k argument surfaces 0.47 s, SHA-256 of
those surfaces (0.82 GB) 0.84 s, their JSON check ~0.4 s, SHA-256 of the file 0.83 s, and the
SQLite insert and commit of 200 k rows 1.18–1.23 s. What Python adds around them (the typed path
of the 10 k UNSCORED records alone is 1.6 s: 160 µs each, spread over ~420 calls with no hot
spot) is ~3.7 s; the target is out of reach without compiled code, and this project has none.
Measured and not adopted: msgspec's syntax check in front of the typed path's orjson parse
(no difference: orjson takes ~1.2 µs for a 900-byte argument), a lean path for records over
the capture limit (would save ~1.3 s of CPU but duplicate the UNSCORED decision, the one
this tool exists to get right). Done for the app: a run's rows are read as a rowid range
(the planner walked the primary-key index and sorted back into rowid order: SQLite time
0.175 → 0.08 s at 200 k rows; the third round left it for a 0.05 s gain on the scores alone,
but it serves every whole-run read); the score columns are stored beside the rows at import (schema
4), so a first render reads one value (0.39–0.44 → 0.11–0.16 s; the import's writer spends
~0.15 s more collecting and encoding them); the Trajectories page's frame reads the 13 columns
it shows, as tuples (2.4–2.7 → 0.8–1.4 s for its first render). Over the two bench runs of
2026-11-30: a run's first render on a running server 0.51–0.53 s and in a fresh process
0.80–0.82 s (both now under 1 s); the import's peak RSS went from 0.31x to 0.38x the file (the
writer holds the columns until the commit), still under the 0.5x target.
"""


def machine() -> str:
    cpu = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return (f"{os.cpu_count()} cores ({cpu or platform.machine()}), {mem:.0f} GiB, "
            f"Python {platform.python_version()}, {platform.system()}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--sizes", default="2000,20000,200000", help="trajectories per scaling point (5 calls each)")
    ap.add_argument("--inspect-samples", type=int, default=2000)
    ap.add_argument("--dask-trajectories", type=int, default=200000,
                    help="the Dask engine's run (5 calls each; 0: skip it)")
    args = ap.parse_args(argv)
    sizes = [int(x) for x in args.sizes.split(",")]
    started = time.time()
    lines: list[str] = []

    def say(text: str = "") -> None:
        print(text, flush=True)
        lines.append(text)

    say("# Benchmarks")
    say()
    say(f"Machine: {machine()}. Generated {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} by "
        f"`make bench` (median of {args.runs} rounds at 1 M calls, at least 5 below; every measurement in a fresh "
        f"process).")
    say()
    say("## Import + strict score vs parsing alone")
    say()
    say(
        "| trajectories | tool calls | file | pyarrow.json.read_json, fresh process "
        "| pyarrow, parsing again in that process | "
        "json.loads loop | import + score into SQLite | import ÷ pyarrow fresh (target ≤ 2) | "
        "import ÷ pyarrow again (target ≤ 2) | json.loads loop ÷ pyarrow fresh / again | import CPU, all processes | "
        "import peak RSS, main + workers | RSS ÷ file (target ≤ 0.5) |"
    )
    say("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    scaling = []
    ratio_notes: list[str] = []
    biggest = None
    for n in sizes:
        path, info = bench_file(n)
        runs = args.runs if n >= 200000 else max(args.runs, 5)
        # Interleaved (pyarrow, json.loads, import) rounds: each ratio is taken within one round,
        # so a slower minute on a shared machine moves both sides; the median ratio is reported.
        rounds = [(median_of(1, "pyarrow", path), median_of(1, "json_loads", path),
                   median_of(1, "import", path, fresh_db=True)) for _ in range(runs)]
        pa, jl, imp = (sorted((r[i] for r in rounds), key=lambda m: m["seconds"])[runs // 2] for i in range(3))
        imp["peak_rss_mb"] = max(r[2]["peak_rss_mb"] for r in rounds)
        ratios = sorted(r[2]["seconds"] / r[0]["seconds"] for r in rounds)
        # pyarrow in a fresh process pays the kernel for ~2 GB of new memory (seconds of system
        # time on this VM, and that cost swings with the host); parsing again in the same process
        # is the parse alone: the stricter baseline, and the one the issue's ~600 MB/s describes.
        warm_ratios = sorted(r[2]["seconds"] / r[0]["warm_seconds"] for r in rounds)
        warm = sorted(r[0]["warm_seconds"] for r in rounds)[runs // 2]
        loads_ratio = sorted(r[1]["seconds"] / r[0]["seconds"] for r in rounds)[runs // 2]
        loads_ratio_again = sorted(r[1]["seconds"] / r[0]["warm_seconds"] for r in rounds)[runs // 2]
        size_mb = info["bytes"] / 2**20
        scaling.append((info["tool_calls"], imp["seconds"]))
        ratio_notes.append(
            f"{info['tool_calls']:,} calls: " + ", ".join(f"{x:.2f}×" for x in ratios) + " and "
            + ", ".join(f"{x:.2f}×" for x in warm_ratios)
            + f" (pyarrow fresh {', '.join(str(round(r[0]['seconds'], 2)) for r in rounds)} s, of which system time "
            + ", ".join(str(round(r[0]['cold_sys_s'], 1)) for r in rounds)
            + f" s; again {', '.join(str(round(r[0]['warm_seconds'], 2)) for r in rounds)} s)")
        say(f"| {n:,} | {info['tool_calls']:,} | {size_mb:,.0f} MiB | {pa['seconds']:.2f} s | {warm:.2f} s | "
            f"{jl['seconds']:.2f} s | {imp['seconds']:.2f} s | **{ratios[runs // 2]:.2f}×** | "
            f"**{warm_ratios[runs // 2]:.2f}×** | {loads_ratio:.2f}× / {loads_ratio_again:.2f}× | "
            f"{imp['cpu_s']:.1f} s | {imp['peak_rss_mb']:,.0f} MiB | **{imp['peak_rss_mb'] / size_mb:.2f}×** |")
        biggest = (n, path)
    say()
    say("Import ÷ pyarrow fresh, then ÷ pyarrow parsing again, in each round (medians in the table): "
        + "; ".join(ratio_notes) + ".")
    say()
    if len(scaling) >= 2:
        import numpy as np

        x = np.log([c for c, _ in scaling])
        y = np.log([s for _, s in scaling])
        slope = float(np.polyfit(x, y, 1)[0])
        per_m = scaling[-1][1] / scaling[-1][0] * 1e6
        say(f"Scaling: import time against tool calls on log-log axes has slope **{slope:.2f}** "
            f"(1.00 = linear); {per_m:.1f} s per million calls at the largest size.")
        say()
    if biggest:
        import import_breakdown  # benches/import_breakdown.py: where the import's seconds go, measured now

        for line in import_breakdown.run(biggest[0], max(3, args.runs)):
            say(line)
        say()
        n, path = biggest
        # re-import once so the app sees a ready database at a known path
        db_path = empty_db(OUT / "app-bench.db")  # never a database left by older code
        measure("import", path, str(db_path))
        app = app_timings(db_path)
        say("## App on the largest imported run (AppTest, server time)")
        say()
        say("| measurement | seconds | target |")
        say("|---|---|---|")
        first, uncached = app["safe_rates_first_s"], app["safe_rates_uncached_s"]
        say(f"| Safe rates page, first render in a fresh process (imports, loading and aggregating {n:,} "
            f"trajectories) | {first:.2f} | ≤ 1{'' if first <= 1 else ': not met'} |")
        say(f"| Safe rates page, first render of this run on a server that has served pages (its caches "
            f"cleared; the app fills them right after an import; median of 3) | {uncached:.2f} | ≤ 1"
            f"{'' if uncached <= 1 else ': not met'} |")
        say(f"| Safe rates page, rerun (median of 5) | {app['safe_rates_warm_s']:.2f} | ≤ 1 |")
        say(f"| Review: label → next trace (median of 10) | {app['label_next_s']:.3f} | ≤ 0.2 |")
        say(f"| Safe rates page right after a new label (re-aggregates with it; median of 3) | "
            f"{app['safe_rates_after_label_s']:.2f} | ≤ 1 |")
        say(f"| Trajectories page, first render of this run (the table's frame of {n:,} rows; caches cleared; "
            f"median of 3) | {app['trajectories_uncached_s']:.2f} | — |")
        say(f"| Trajectories: full-text search of the whole run, a word in no record (median of 3; the page "
            f"caches each query's hits) | {app['search_s']:.2f} | — |")
        say()
    ev = big_eval(args.inspect_samples)
    if ev is not None:
        ours = median_of(args.runs, "inspect_ours", ev)
        theirs = median_of(args.runs, "inspect_theirs", ev)
        say("## Inspect logs")
        say()
        say(
            f"A generated `.eval` of {args.inspect_samples:,} samples ({ev.stat().st_size / 2**20:.1f} MiB, "
            f"{ours['tool_calls']:,} tool calls): our importer {ours['seconds']:.2f} s, "
            f"`inspect_ai.log.read_eval_log` {theirs['seconds']:.2f} s — "
            f"ratio **{ours['seconds'] / theirs['seconds']:.2f}×** "
            f"(ours ÷ theirs; both read the same tool calls: {ours['tool_calls'] == theirs['tool_calls']})."
        )
        say()
    else:
        say("## Inspect logs\n\nSkipped: ../shared/real/inspect_ai is not beside the checkout.\n")
    import eval_bombs  # benches/eval_bombs.py: bombs, floods and files padded to their budget, measured now

    for line in eval_bombs.run():
        say(line)
    say()
    if args.dask_trajectories:
        import dask_engine  # benches/dask_engine.py: its section, measured now

        for line in dask_engine.run(args.dask_trajectories, args.runs):
            say(line)
        say()
    import proof_hook  # benches/proof_hook.py: the capture-proof hook's cost, measured now

    for line in proof_hook.run(5, 30):
        say(line)
    say()
    import zip_floods  # benches/zip_floods.py: a score table upload's central-directory flood, measured now

    for line in zip_floods.run():
        say(line)
    say()
    import parquet_bombs  # benches/parquet_bombs.py: a score table upload's Parquet bombs, measured now

    for line in parquet_bombs.run():
        say(line)
    say()
    import table_pins  # benches/table_pins.py: padded files of score tables, what the server keeps, measured now

    for line in table_pins.run():
        say(line)
    say()
    import labels_under_load  # benches/labels_under_load.py: reviewers acting during a large labels import, now

    for line in labels_under_load.run():
        say(line)
    say()
    say(f"Total benchmark time: {time.time() - started:.0f} s.")
    say()
    say(PROFILE_NOTES)
    (ROOT / "benches" / "RESULTS.md").write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
