"""The server's memory when a score table upload holds a Parquet bomb, as a ratio to the upload's
size (issue 34, confirmation attack V9). Part of ``make bench``; alone:

    python benches/parquet_bombs.py [--write]

Each upload is a zip of the engine's own table of the bundled observed sample, its Inconclusive
index rewritten (what the page reads whole) with 1,900 ids of about a megabyte, one value stored
once: as a dictionary-typed column; as a plain column in Parquet's own dictionary encoding (no
footer figure says it is large); and, for scale, the honest table. Each is uploaded in a fresh
process (``views.unpack_table``), and the process's peak RSS above what it held before is the
figure; *in the server's process* is today's check run in that process (``table_reader.vet``,
as every upload was checked before the check had a process of its own), beside *now* (in a
process of its own, ``vetting_process``). Writes its section
of benches/RESULTS.md (between the ``parquet-bombs`` markers).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from results_file import replace_section  # noqa: E402  (beside this file: run as a script)

from scoring.dask_engine import table_layout  # noqa: E402
from tests.test_table_upload import zip_folder  # noqa: E402 - the tests' zip of a folder, as `zip -r` makes it
from tests.test_team_tables import make_table  # noqa: E402 - the engine's table of the bundled sample

BEGIN, END = "<!-- parquet-bombs -->", "<!-- /parquet-bombs -->"
IDS = 1_900

UPLOAD = """
import json, resource, sys, time
from scoring.dask_engine import table_reader, vetting_process
from scoring.workspace import views
if sys.argv[3] == "in-server":
    vetting_process.vet_uploads = lambda tables, wait=None: [
        table_reader.vet(l, root=r, every_run=True) for l, r in tables]
data = open(sys.argv[1], "rb").read()
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
start = time.perf_counter()
try:
    views.unpack_table(sys.argv[2], "bomb.zip", data)
    said = "accepted"
except Exception as exc:
    said = str(exc)
seconds = time.perf_counter() - start
grown = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * 1024
print(json.dumps({"grown": grown, "seconds": seconds, "said": said}))
"""


def bomb(folder: Path, kind: str) -> Path:
    """A zip of the engine's table with its Inconclusive index holding ``kind``'s ids."""
    table, _run = make_table(folder / "scored" / "nightly", "table")
    if kind != "honest":
        (index,) = (table / table_layout.INCONCLUSIVE_DIR).rglob("*.parquet")
        engine = pq.read_table(index)
        meta = pq.ParquetFile(index).schema_arrow.metadata
        again = pa.array([i % engine.num_rows for i in range(IDS)])
        columns = {name: engine.column(name).combine_chunks().take(again) for name in engine.column_names}
        if kind == "dictionary-typed":
            columns["trajectory_id"] = pa.array(["a" * (1 << 20)] * IDS).dictionary_encode()
            written: dict = {}
        else:
            columns["trajectory_id"] = pa.array(["a" * 1_000_000] * IDS)
            written = {"use_dictionary": True, "dictionary_pagesize_limit": 64 << 20}
        pq.write_table(pa.table(columns).replace_schema_metadata(meta), index, compression="zstd", **written)
    out = folder / f"{kind}.zip"
    out.write_bytes(zip_folder(table.parent))
    return out


def measure(upload: Path, where: str, db: Path) -> dict:
    got = subprocess.run([sys.executable, "-c", UPLOAD, str(upload), str(db), where], capture_output=True, text=True,
                         cwd=ROOT, timeout=900)
    if got.returncode != 0:
        return {"grown": None, "seconds": None, "said": f"the process ended with code {got.returncode}"}
    return json.loads(got.stdout.splitlines()[-1])


def verdict(said: str) -> str:
    """The check's answer in a few words."""
    if said == "accepted":
        return "accepted"
    if "dictionary-encoded columns" in said:
        return "refused unread (a dictionary-typed column)"
    if "MiB of memory" in said:
        return "refused (the check's process passed its memory bound)"
    return "refused: " + said.split("cannot be opened: ", 1)[-1].split(";", 1)[0][:80]


def run() -> list[str]:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for kind in ("dictionary-typed", "Parquet dictionary page", "honest"):
            folder = Path(tmp) / kind.replace(" ", "-")
            upload = bomb(folder, kind if kind != "Parquet dictionary page" else "page")
            size = upload.stat().st_size
            cells = []
            for where in ("in-server", "now"):
                db = folder / f"{where}.db"
                shutil.rmtree(f"{db}.d", ignore_errors=True)
                got = measure(upload, where, db)
                grown = got["grown"]
                cells.append(f"{grown / 2**20:,.1f} MiB (**{grown / size:,.1f}×**), {got['seconds']:.1f} s, "
                             f"{verdict(got['said'])}" if grown is not None else got["said"])
                print(kind, where, cells[-1], file=sys.stderr)
            rows.append(f"| {kind} | {size / 1024:,.0f} KiB | {cells[0]} | {cells[1]} |")
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    return [BEGIN, "## Parquet bombs in a score table upload: the server's memory (issue 34, V9)", "",
            f"Generated by `benches/parquet_bombs.py` at {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} on "
            f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; load average when it "
            f"ended: {load}. Each upload in a fresh process; the figure is that process's peak RSS above what it "
            "held before the upload (the ratio: to the upload's size), the check's time and its answer. The "
            f"Inconclusive index holds {IDS:,} ids of about 1 MB, one value stored once.", "",
            "| upload | size | today's check in the server's process | in a process of its own (now) |",
            "|---|---|---|---|", *rows, "", END]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--write", action="store_true", help="write the section into benches/RESULTS.md")
    args = ap.parse_args()
    lines = run()
    print("\n".join(lines))
    if args.write:
        replace_section(lines, BEGIN, END)


if __name__ == "__main__":
    main()
