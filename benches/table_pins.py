"""What a server keeps in memory after opening score tables whose own JSON files are padded
within their caps (issue 34, the attack's second pass: a zip of 8 such tables took a server from
566 to 3,064 MiB, for good). Part of ``make bench``; alone:

    python benches/table_pins.py [--tables N] [--write]

Each table is a copy of the engine's own table of the bundled observed sample whose
``summaries/`` and ``aggregates/`` files are padded to just under ``TABLE_FILE_BYTES`` with a key
the reader ignores holding floats (the padding that holds most memory per byte within the parse
bound). Each is opened and its run's summary and aggregates read, as the page does when the run
is shown, in a fresh process; the figure is that process's RSS after each table, beside its RSS
before the first. *count-bounded* is the reader's file cache as it was (``functools.lru_cache``
of 512 files, the same function), *weighed* is today's (``weighed_cache``). Writes its section of
benches/RESULTS.md (between the ``table-pins`` markers).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from results_file import replace_section  # noqa: E402  (beside this file: run as a script)

from scoring.dask_engine import table_layout  # noqa: E402
from tests.test_team_tables import make_table  # noqa: E402 - the engine's table of the bundled sample

BEGIN, END = "<!-- table-pins -->", "<!-- /table-pins -->"

OPEN = """
import functools, json, sys
from scoring.dask_engine import table_reader
def rss():
    return int(open("/proc/self/statm").read().split()[1]) * 4096 / 2**20
if sys.argv[1] == "count-bounded":
    table_reader._run_file = functools.lru_cache(maxsize=512)(table_reader._run_file.function)
figures = [rss()]
for table in sys.argv[2:]:
    for run in table_reader.open_table(table):
        run.summary, run.aggregates
    figures.append(rss())
print(json.dumps(figures))
"""


def padded(path: Path, size: int) -> None:
    head = json.dumps(json.loads(path.read_text()))
    count = (size - len(head) - 20) // 5
    path.write_text(head[:-1] + ', "padding": [' + ",".join(["1.25"] * count) + "]}")


def tables(folder: Path, n: int) -> list[Path]:
    table, _run = make_table(folder / "base")
    out = []
    for i in range(n):
        copy = folder / f"t{i}"
        shutil.copytree(table, copy)
        for path in [*(copy / table_layout.SUMMARIES_DIR).glob("*.json"),
                     *(copy / table_layout.RUN_AGGREGATES_DIR).glob("*.json")]:
            padded(path, table_layout.TABLE_FILE_BYTES - 1024)
        out.append(copy)
    return out


def run(n: int = 8) -> list[str]:
    with tempfile.TemporaryDirectory() as tmp:
        made = tables(Path(tmp), n)
        lines = [BEGIN, "## A score table's own files padded within their caps: what the server keeps (issue 34)", "",
                 f"{n} copies of the engine's table of the observed sample, each run's `summaries/` and `aggregates/` "
                 f"file padded to {table_layout.TABLE_FILE_BYTES - 1024:,} bytes (floats under a key the reader "
                 "ignores); each table opened and its run's summary and aggregates read, in a fresh process. "
                 f"Load average at start: {os.getloadavg()[0]:.1f}.", "",
                 f"| reader's file cache | RSS before | after 1 table | after {n // 2} | after {n} | growth over the "
                 f"last {n - n // 2} |", "|---|---|---|---|---|---|"]
        for kind in ("count-bounded", "weighed"):
            got = subprocess.run([sys.executable, "-c", OPEN, kind, *map(str, made)], capture_output=True, text=True,
                                 cwd=ROOT, check=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
            figures = json.loads(got.stdout.strip().splitlines()[-1])
            per = (figures[-1] - figures[n // 2]) / (n - n // 2)
            lines.append(f"| {kind} | {figures[0]:,.0f} MiB | {figures[1]:,.0f} MiB | {figures[n // 2]:,.0f} MiB | "
                         f"{figures[-1]:,.0f} MiB | {per:,.1f} MiB a table |")
            print(lines[-1], flush=True)
        lines += ["", "*count-bounded*: the reader as it was (`functools.lru_cache(maxsize=512)` over the same "
                  "function); *weighed*: today's (`scoring/weighed_cache.py`: values kept within "
                  "`RUN_FILES_MEMORY`, none over `TABLE_MEMORY_LARGEST`, each weighed when made). Under *weighed* "
                  "no padded file is kept; what the process holds past the first tables is the allocator's "
                  "high-water mark of parsing one such file, reached after a few and not passed.", END]
    return lines


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tables", type=int, default=8)
    ap.add_argument("--write", action="store_true", help="write the section into benches/RESULTS.md")
    args = ap.parse_args()
    lines = run(args.tables)
    print("\n".join(lines))
    if args.write:
        replace_section(lines, BEGIN, END)


if __name__ == "__main__":
    main()
