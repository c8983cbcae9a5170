"""Peak RSS of a score table's upload whose central directory is a flood, as a ratio to the
upload's size (issue 34). Part of ``make bench``; alone:

    python benches/zip_floods.py [--entries 3850000] [--write]

Three zips near the 200 MB upload cap (``table_zip.MAX_ZIP_BYTES``), each read in a fresh
process that first reads the upload's bytes (what the server holds of an upload: Streamlit keeps
it in memory), then:

- *before*: ``zipfile.ZipFile`` over them and its member list (where the upload was refused
  before issue 34: after the list was built);
- *now*: ``table_zip.unpack`` (the end-of-central-directory record read and the directory
  walked by its fixed headers first);
- *baseline*: nothing more (the interpreter, the imports and the bytes).

The zips: a directory of N entries of 52 bytes each whose zip64 record declares them; the same
directory under a record declaring one entry (zipfile builds a member per entry it finds,
whatever the record says); and an upload within the caps (20,000 stored members, about 190 MB),
which is unpacked. Writes its section of benches/RESULTS.md (between the ``zip-floods`` markers).

``--table-files [--before MAIN_CHECKOUT]`` measures instead a score table's own files and a run's
header line (issue 34 F4): an upload whose ``index.json`` is 150 MiB of blanks (or millions of
empty lists) in a small zip, unpacked and then listed in fresh processes, and the replay of a run
whose header line is 400 MiB without a newline; now and as the checkout given runs them, in its
own section (between the ``table-files`` markers).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import struct
import subprocess
import sys
import time
import zipfile
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "benches" / "out"
BEGIN, END = "<!-- zip-floods -->", "<!-- /zip-floods -->"
sys.path.insert(0, str(ROOT))

from results_file import replace_section  # noqa: E402  (beside this file: run as a script)

from scoring import ingest  # noqa: E402
from scoring.dask_engine import table_layout, table_zip  # noqa: E402

CHILD = r'''
import io, json, sys, tempfile, time, zipfile
sys.path.insert(0, {root!r})
try:
    from scoring.dask_engine import table_zip
except ImportError:  # a checkout from before the engine's rooms (the "before" column)
    from scoring import table_zip
from scoring.errors import InputError
kind, path = sys.argv[1], sys.argv[2]
data = open(path, "rb").read()
t = time.perf_counter()
said = ""
if kind == "before":
    try:
        said = f"zipfile listed {{len(zipfile.ZipFile(io.BytesIO(data)).infolist()):,}} members"
    except Exception as exc:
        said = f"{{type(exc).__name__}}: {{exc}}"
elif kind == "now":
    with tempfile.TemporaryDirectory(dir={out!r}) as tmp:
        try:
            table_zip.unpack(data, "upload.zip", __import__("pathlib").Path(tmp))
            said = "unpacked"
        except InputError as exc:
            said = exc.message
seconds = time.perf_counter() - t
# VmHWM, not ru_maxrss: the latter survives execve, so a child would report its parent's peak
peak = next(int(line.split()[1]) * 1024 for line in open("/proc/self/status") if line.startswith("VmHWM:"))
print(json.dumps({{"peak": peak, "seconds": seconds, "said": said}}))
'''


def _directory(entries: int) -> tuple[bytes, int]:
    """A central directory of ``entries`` records of 52 bytes (each a stored, empty member of a
    6-character name pointing at offset 0), and its size."""
    fixed = struct.Struct("<4s6H3L5H2L")
    head = fixed.pack(b"PK\x01\x02", 20, 20, 0, 0, 0, 0, 0, 0, 0, 6, 0, 0, 0, 0, 0, 0)
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"

    def name(i: int) -> bytes:
        out = []
        for _ in range(6):
            i, d = divmod(i, 36)
            out.append(digits[d])
        return "".join(out).encode()

    body = b"".join(head + name(i) for i in range(entries))
    return body, len(body)


def flood(entries: int, *, declared: int | None) -> bytes:
    """The flood: ``entries`` directory records, then (``declared`` None) a zip64 record and
    locator declaring them all, or a classic record declaring ``declared`` entries."""
    directory, size = _directory(entries)
    if declared is not None:
        return directory + struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, declared, declared, size, 0, 0)
    record = struct.pack("<4sQ2H2L4Q", b"PK\x06\x06", 44, 45, 45, 0, 0, entries, entries, size, 0)
    locator = struct.pack("<4sLQL", b"PK\x06\x07", 0, size, 1)
    classic = struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, 0xFFFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0)
    return directory + record + locator + classic


def within_caps(path: Path) -> None:
    """An upload within every cap: 20,000 stored members of 9.5 KiB of random bytes."""
    members = table_zip.MAX_MEMBERS
    size = 9_728
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as zf:
        for i in range(members):
            zf.writestr(f"t/part-{i:05d}.bin", os.urandom(size))


def files(entries: int) -> list[tuple[str, Path]]:
    OUT.mkdir(parents=True, exist_ok=True)
    cases = []
    path = OUT / f"cd-flood-{entries}.zip"
    if not path.exists():
        path.write_bytes(flood(entries, declared=None))
    cases.append((f"directory flood: {entries:,} entries, declared by its zip64 record", path))
    path = OUT / f"cd-flood-{entries}-declares-1.zip"
    if not path.exists():
        path.write_bytes(flood(entries, declared=1))
    cases.append((f"directory flood: {entries:,} entries under a record declaring 1", path))
    path = OUT / "within-caps.zip"
    if not path.exists():
        within_caps(path)
    cases.append((f"within the caps: {table_zip.MAX_MEMBERS:,} stored members of 9.5 KiB", path))
    return cases


def measure(kind: str, path: Path) -> dict:
    code = CHILD.format(root=str(ROOT), out=str(OUT))
    got = subprocess.run([sys.executable, "-c", code, kind, str(path)], cwd=ROOT, capture_output=True, text=True,
                         check=True)
    return json.loads(got.stdout.strip().splitlines()[-1])


def run(entries: int = 3_850_000) -> list[str]:
    rows = []
    for label, path in files(entries):
        size = path.stat().st_size
        got = {kind: measure(kind, path) for kind in ("baseline", "before", "now")}
        rows.append((label, size, got))
        figures = ", ".join(f"{k} {v['peak'] / 2**20:,.0f} MiB {v['seconds']:.2f} s" for k, v in got.items())
        print(f"{label}: {figures}", file=sys.stderr)
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    lines = [BEGIN, "## A score table's upload: a central-directory flood against the upload's size", "",
             f"Generated by `benches/zip_floods.py` at {stamp} on {platform.machine()}, {os.cpu_count()} cores, Python "
             f"{platform.python_version()}: each zip read in a fresh process that first reads the upload's bytes "
             "(baseline: that alone); *before*: `zipfile.ZipFile` and its member list, where an upload was refused "
             "before issue 34; *now*: `table_zip.unpack`. Peak RSS (the process's VmHWM) as a ratio to the upload's "
             "size. Load average "
             f"when it ended: {', '.join(f'{x:.1f}' for x in os.getloadavg())}.", "",
             "| upload | size | baseline peak RSS | before: peak RSS | ÷ size | seconds | now: peak RSS | ÷ size "
             "| seconds | now said |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for label, size, got in rows:
        base, before, now = got["baseline"], got["before"], got["now"]
        lines.append(f"| {label} | {size / 2**20:,.0f} MiB | {base['peak'] / 2**20:,.0f} MiB | "
                     f"{before['peak'] / 2**20:,.0f} MiB | {before['peak'] / size:.2f}× | {before['seconds']:.2f} | "
                     f"{now['peak'] / 2**20:,.0f} MiB | **{now['peak'] / size:.2f}×** | {now['seconds']:.2f} | "
                     f"{now['said'][:110]} |")
    more = (rows[0][2]["before"]["peak"] - rows[0][2]["now"]["peak"]) / 2**20
    lines += ["", "Now, a flood costs what its bytes cost: the peak is the baseline's (the interpreter, the imports "
              f"and the upload's bytes), where zipfile's member list took {more:,.0f} MiB "
              "more. The upload within the caps is unpacked at about the same peak (members are decoded in 1 MiB "
              "reads); its seconds are its bytes written to disk. Wall times are as noisy as the load average says.",
              END]
    return lines


# --- a table's own files, and a run's header line (issue 34 F4) -----------------------------

FILES_BEGIN, FILES_END = "<!-- table-files -->", "<!-- /table-files -->"
FILES_CHILD = r'''
import json, sys, tempfile, time
sys.path.insert(0, {code!r})
from pathlib import Path
try:
    from scoring.dask_engine import table_zip
    from scoring.dask_engine.table_reader import run_header
except ImportError:  # a checkout from before the engine's rooms (the "before" column)
    from scoring import table_zip
    from scoring.engine import run_header
from scoring.errors import InputError
from scoring.workspace import views
kind, path, work = sys.argv[1], sys.argv[2], sys.argv[3]
data = open(path, "rb").read() if path.endswith(".zip") else b""  # what the server holds of an upload
t = time.perf_counter()
said = ""
try:
    if kind == "upload":
        views.unpack_table(Path(work) / "ws.db", "upload.zip", data)
        said = "kept"
    elif kind == "listing":
        (choice,) = views.uploaded_tables(Path(work) / "ws.db").tables
        said = choice.refused or "offered"
    elif kind == "header":
        run_header(path)
        said = "read"
except InputError as exc:
    said = exc.message
seconds = time.perf_counter() - t
peak = next(int(line.split()[1]) * 1024 for line in open("/proc/self/status") if line.startswith("VmHWM:"))
print(json.dumps({{"peak": peak, "seconds": seconds, "said": said}}))
'''


def _table_zip(index: Callable[[bytes], bytes]) -> bytes:
    """A zip (deflate, as ``zip -r`` makes it) of a score table the engine wrote, its
    ``index.json`` replaced by what ``index`` makes of it."""
    import io
    import shutil
    import tempfile

    sys.path.insert(0, str(ROOT))
    from tests.test_team_tables import make_table  # the tests' table: the bundled sample, scored

    with tempfile.TemporaryDirectory(dir=OUT) as tmp:
        out, _run = make_table(Path(tmp) / "nightly", "table")
        (out / "index.json").write_bytes(index((out / "index.json").read_bytes()))
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
            for path in sorted(out.parent.rglob("*")):
                if path.is_file():
                    zf.write(path, str(path.relative_to(out.parent.parent)))
        shutil.rmtree(out.parent, ignore_errors=True)
        return buf.getvalue()


def table_files(blank_mib: int, header_mib: int) -> list[tuple[str, str, Path]]:
    """(label, what is measured, file) of each case, each file made once."""
    OUT.mkdir(parents=True, exist_ok=True)
    cases = []
    blanks = OUT / f"index-blanks-{blank_mib}.zip"
    if not blanks.exists():  # the engine's own index, then the blanks: the same JSON, as valid
        blanks.write_bytes(_table_zip(lambda own: own + b" " * (blank_mib << 20)))
    lists = OUT / "index-lists.zip"
    if not lists.exists():  # not an index: the page read summary.json instead, once it was parsed
        lists.write_bytes(_table_zip(lambda _own: b"[" + b"[]," * 5_000_000 + b"[]]"))
    for path, what in ((blanks, f"`index.json` is its own and {blank_mib} MiB of blanks"),
                       (lists, "`index.json` is 5 M empty lists (15 MB)")):
        cases.append((f"upload: a table whose {what}", "upload", path))
        cases.append((f"listing: an upload kept before, whose {what}", "listing", path))
    header = OUT / f"header-{header_mib}.jsonl"
    if not header.exists():
        with open(header, "wb") as fh:
            fh.write(b'{"record": "run", "run_id": "')
            for _ in range(header_mib):
                fh.write(b"x" * (1 << 20))
    cases.append((f"replay: a run whose header line is {header_mib} MiB without a newline", "header", header))
    return cases


def measure_files(kind: str, path: Path, code: Path) -> dict:
    """One case in a fresh process, run by the checkout at ``code``; for a listing, the upload
    is first kept as an older version kept it (unpacked without the vetting)."""
    import shutil
    import tempfile

    with tempfile.TemporaryDirectory(dir=OUT) as work:
        if kind == "listing":
            # unpacked without the checks an upload now gets (as an older version unpacked it)
            place = (f"import sys; sys.path.insert(0, {str(code)!r}); from pathlib import Path\n"
                     "try: from scoring.dask_engine import table_zip\n"
                     "except ImportError: from scoring import table_zip  # a checkout from before the engine's rooms\n"
                     f"table_zip._check_own_files = lambda *a: None; "
                     f"table_zip.unpack(open({str(path)!r}, 'rb').read(), 'upload.zip', Path({work!r}) / 'ws.db.d')")
            subprocess.run([sys.executable, "-c", place], cwd=code, check=True, capture_output=True)
        got = subprocess.run([sys.executable, "-c", FILES_CHILD.format(code=str(code)), kind, str(path), work],
                             cwd=code, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(code)})
        shutil.rmtree(work, ignore_errors=True)
    if got.returncode != 0:
        return {"peak": 0, "seconds": 0.0, "said": f"exit {got.returncode}: {got.stderr.strip().splitlines()[-1]}"}
    return json.loads(got.stdout.strip().splitlines()[-1])


def run_files(before: Path | None, blank_mib: int = 150, header_mib: int = 400) -> list[str]:
    rows = []
    for label, kind, path in table_files(blank_mib, header_mib):
        size = path.stat().st_size
        now = measure_files(kind, path, ROOT)
        then = measure_files(kind, path, before) if before is not None else None
        base = measure_files("baseline", path, ROOT)
        rows.append((label, size, base, then, now))
        print(label, base, then, now, file=sys.stderr)

    def cell(got: dict | None, base: dict, size: int) -> str:
        if got is None:
            return "— | — | — | —"
        over = got["peak"] - base["peak"]
        return (f"{got['peak'] / 2**20:,.0f} MiB | {over / 2**20:,.0f} MiB | **{over / size:,.1f}×** | "
                f"{got['seconds']:.2f}")

    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    head = "" if before is None else (f" *Before*: the same, run by the checkout at `{_commit(before)}` (main "
                                      "before the change), in the same run.")
    lines = [FILES_BEGIN, "## A score table's own files and a run's header line against their size (issue 34 F4)", "",
             f"Generated by `benches/zip_floods.py --table-files` at {stamp} on {platform.machine()}, "
             f"{os.cpu_count()} cores, Python {platform.python_version()}: each case in a fresh process, which first "
             "reads the file's bytes and imports the project (the baseline: that alone); *upload*: "
             "`views.unpack_table` of the zip (a table the engine wrote, its `index.json` replaced); *listing*: "
             "`views.uploaded_tables` of a workspace holding that upload, kept unvetted (as an older version kept "
             "it); *replay*: `table_reader.run_header`, which the Score tables page runs on every replay. Peak RSS "
             "(VmHWM), and what it is over the baseline, also as a ratio to the file's size." + head,
             "Load average when it ended: " + ", ".join(f"{x:.1f}" for x in os.getloadavg()) + ".", "",
             "| case | file size | baseline | before: peak RSS | over baseline | ÷ size | seconds | now: peak RSS "
             "| over baseline | ÷ size | seconds | now said |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for label, size, base, then, now in rows:
        said = now["said"].replace("|", "\\|")[:150]
        lines.append(f"| {label} | {size / 2**20:,.1f} MiB | {base['peak'] / 2**20:,.0f} MiB | "
                     f"{cell(then, base, size)} | {cell(now, base, size)} | {said} |")
    cap, header = table_layout.TABLE_FILE_BYTES >> 20, ingest.MAX_HEADER_BYTES >> 20
    lines += ["", f"Before, what an upload or a listing took grew with what its `index.json` decodes to (a zip "
              "of well under a megabyte); now it is bounded by what is read of a table's own file, "
              f"`table_layout.TABLE_FILE_BYTES` ({cap} MiB; none of it when the opened file says its size, as on a "
              "listing), and its parse is refused when its bound passes `table_layout.TABLE_FILE_PARSE`. An upload "
              "decodes each of its tables' own files once, one at a time, and refuses it before anything is "
              f"written. A header line is read in growing chunks up to `ingest.MAX_HEADER_BYTES` ({header} MiB).",
              FILES_END]
    return lines


def _commit(checkout: Path) -> str:
    got = subprocess.run(["git", "-C", str(checkout), "rev-parse", "--short", "HEAD"], capture_output=True,
                         text=True)
    return got.stdout.strip() or str(checkout)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--entries", type=int, default=3_850_000, help="entries of the directory floods")
    ap.add_argument("--write", action="store_true", help="write the section into benches/RESULTS.md")
    ap.add_argument("--table-files", action="store_true",
                    help="measure a table's own files and a run's header line instead (their own section)")
    ap.add_argument("--before", type=Path, help="with --table-files: a checkout to measure too (main before)")
    args = ap.parse_args()
    if args.table_files:
        lines = run_files(args.before)
        print("\n".join(lines))
        if args.write:
            replace_section(lines, FILES_BEGIN, FILES_END)
        return
    lines = run(args.entries)
    print("\n".join(lines))
    if args.write:
        replace_section(lines, BEGIN, END)


if __name__ == "__main__":
    main()
