"""Where the seconds of a canonical run's import go, stage by stage, each beside its floor
(issue 37 item 1). Part of ``make bench``; alone:

    python benches/import_breakdown.py [--trajectories 200000] [--pairs 3] [--small] [--no-write]

One process walks the bench run of ``sample_runs/generate.py`` block by block (the import's
``BLOCK_BYTES`` ranges) and times each stage of the import by calling the project's own functions
on the same bytes, one after another on one core (CPU seconds of this thread); beside each, a
floor measured in the same pass over the same bytes: what the library underneath does for that
job in one C call (reading the file into a reused buffer, ``hashlib`` over it, ``msgspec``
decoding it, ``executemany`` of the same rows into a bare table, the kernel's file copy). The
stages (``STAGES``):

- *read*: each block read as ``ingest.score_range`` reads it (``ingest.read_range``);
- *split*: ``ingest.block_ranges`` and the block scorer walking each block's lines, its
  per-record work stubbed out (``ingest._score_block`` with ``_lean_row`` returning one row);
- *decode*: every record through the lean path's typed decoder (every record tries it first),
  then the records it leaves through the typed path's ``decode_json_line`` and
  ``canonical.check_record`` (model objects);
- *hash*: the file's SHA-256 twice, as the import takes it beside the workers
  (``copies.sha256_of_file`` of the copy, the run key, and of the source, the torn-copy check),
  and the argument surfaces' digests, sizes and limit (``capture_rules.plain_calls_proven``
  without its JSON check);
- *capture rules*: the lean path's JSON check of each surface (``capture_rules.certainly_json``)
  and the typed path's ``score.assess_calls``;
- *taxonomy rules*: the typed path's ``score.score_trajectory`` (the verdict decision, with the
  taxonomy rules where it runs them);
- *row building*: the rest of ``ingest._lean_row`` (its decoder and ``plain_calls_proven``
  replaced by the results above: field checks, encoding the surfaces, the row) and the typed
  path's ``rows.encode``;
- *SQLite writes*: the run row, ``importing._write_blocks`` (every staged row copied into the
  workspace by SQLite, and the score columns) and the commit, in a fresh workspace;
- *evidence copy*: the workspace's copy of the run, as the import makes it (``copies.kernel_copy``).

The work between these (``settle``, rows pickled between processes and staged for the writer)
is timed too, without a floor. As a check, the rows the stages build are the rows
``ingest.score_bytes`` builds for each block, and that whole call is timed beside their sum.

Then the whole import (``Workspace.import_run``, a fresh database) and ``pyarrow.json.read_json``
of the same file, each in a fresh process (its imports before its clock starts), in pairs taken
in turn (the order alternating), in each of two states of the machine's memory (``MEMORY_STATES``:
idle, and warm); per state, the medians of the pairs' wall and CPU ratios; and the import's
peak RSS as a ratio to the file's size: the main process's own peak (``VmHWM``) plus, per worker,
the largest worker's (``RUSAGE_CHILDREN``; an upper bound, since it keeps the high-water mark of
the process it was forked from, before its exec). These pairs run first, while the process that
starts them is small. ``--small`` is a quick check
on 2,000 trajectories that writes nothing. Writes its section of benches/RESULTS.md (between the
``import-breakdown`` markers) unless ``--small`` or ``--no-write``.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import pickle
import shutil
import sqlite3
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from unittest import mock

import msgspec

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "benches" / "out"
BEGIN, END = "<!-- import-breakdown -->", "<!-- /import-breakdown -->"
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benches"))

import run_all  # noqa: E402  (beside this file: run as a script)
from results_file import replace_section  # noqa: E402

from scoring import ingest, pipeline  # noqa: E402
from scoring import rows as codec  # noqa: E402
from scoring.capture_rules import certainly_json, plain_calls_proven  # noqa: E402
from scoring.importers import canonical  # noqa: E402
from scoring.importers._common import RecordError, decode_json_line  # noqa: E402
from scoring.request import CANONICAL_REQUEST  # noqa: E402
from scoring.score import HarnessVerdictClassifier, RuleClassifier, assess_calls, score_trajectory  # noqa: E402
from scoring.settle import settle  # noqa: E402
from scoring.taxonomy_rules import JOIN, compile_any, encode_text  # noqa: E402
from scoring.workspace import Workspace, copies, importing  # noqa: E402
from scoring.workspace.schema import immediate, utc_now  # noqa: E402

SMALL_TRAJECTORIES = 2_000

STAGES = ("read", "split", "decode", "hash", "capture rules", "taxonomy rules", "row building", "SQLite writes",
          "evidence copy")
"""The import's stages, in the order a record meets them (the rows of the table)."""

FLOORS = {
    "read": "`readinto` one reused buffer, block by block",
    "split": "`bytes.find` from newline to newline over each block (memchr), nothing else",
    "decode": "`msgspec.json.Decoder().decode_lines` of each block (untyped)",
    "hash": "`hashlib.sha256` once over the file and once over the surfaces, in memory",
    "capture rules": "msgspec's syntax check (`Decoder(msgspec.Raw)`) of each block's lean surfaces as one array",
    "taxonomy rules": "one RE2 search of all the taxonomy's rules (`taxonomy_rules.compile_any`) over each typed "
                      "record's surfaces joined",
    "row building": "`list(zip(*columns))`: the same rows built from their values in C",
    "SQLite writes": "`executemany` of the same rows into a bare table (no key, index or constraint), same pragmas, "
                     "one commit",
    "evidence copy": "`shutil.copyfile` (the kernel's copy, no hash)",
}
OTHER = ("settle", "rows pickled between processes", "rows staged for the writer")
"""``settle.settle``; each block's rows through ``pickle`` and back (what ``pool_map`` does between a
worker and the writer); ``importing._scored_ahead`` (each block's digest, its rows written into
the staging database the writer copies them from): work of the import between the stages, timed
without a floor."""


@dataclass
class Ledger:
    """CPU seconds (this thread's) of each stage and of its floor, summed over the blocks."""

    stage: dict[str, float] = field(default_factory=lambda: dict.fromkeys(STAGES + OTHER, 0.0))
    floor: dict[str, float] = field(default_factory=lambda: dict.fromkeys(STAGES, 0.0))
    stage_wall: dict[str, float] = field(default_factory=lambda: dict.fromkeys(STAGES + OTHER, 0.0))
    """Wall seconds of the same: above the CPU seconds where a stage waits (on the disk, or for a core)."""
    floor_wall: dict[str, float] = field(default_factory=lambda: dict.fromkeys(STAGES, 0.0))
    whole: float = 0.0
    rehash: float = 0.0
    """The file's SHA-256 by ``copies.sha256_of_file`` (in *hash*; not part of ``score_bytes``)."""
    """``ingest.score_bytes`` of every block, whole: the check on the per-record stages' sum."""

    @contextlib.contextmanager
    def timing(self, name: str, *, floor: bool = False) -> Iterator[None]:
        into, wall = (self.floor, self.floor_wall) if floor else (self.stage, self.stage_wall)
        start, started = time.thread_time(), time.perf_counter()
        try:
            yield
        finally:
            into[name] += time.thread_time() - start
            wall[name] += time.perf_counter() - started


class Predecoded:
    """Stands in for the lean path's decoder: hands back the struct decoded in the *decode* stage."""

    def __init__(self, structs: dict[bytes, canonical.CommonRecord]) -> None:
        self.structs = structs

    def decode(self, raw: bytes) -> canonical.CommonRecord:
        return self.structs[raw]


def _proven(*_args, **_kwargs) -> bool:
    return True


@dataclass
class Counts:
    blocks: int = 0
    records: int = 0
    lean: int = 0
    typed: int = 0
    rejected: int = 0
    surfaces: int = 0
    surface_bytes: int = 0
    rule_searches: int = 0
    """``RuleClassifier.match`` calls the typed records' scoring made."""


def newline_to_newline(data: bytes) -> None:
    start = 0
    while (end := data.find(b"\n", start)) >= 0:
        start = end + 1


def lines_of(data: bytes, offset: int) -> list[tuple[int, int, bytes]]:
    """(line within the block from 1, byte offset in the file, bytes) of a block's non-blank lines,
    a CRLF line's CR dropped: what the block scorer hands each record's path."""
    out, at = [], offset
    for n, raw in enumerate(data.split(b"\n"), start=1):
        length = len(raw) + 1
        if raw.endswith(b"\r"):
            raw = raw[:-1]
        if raw.strip():
            out.append((n, at, raw))
        at += length
    return out


def breakdown(path: Path, workdir: Path) -> tuple[Ledger, Counts]:
    """Every stage and floor of importing ``path``, block by block, in this process."""
    led, counts = Ledger(), Counts()
    source = str(path)
    size = path.stat().st_size
    with path.open("rb") as fh:
        header_line, header, first_line, header_end = pipeline.read_header(fh, source, CANONICAL_REQUEST)
        with led.timing("split"):
            ranges = list(ingest.block_ranges(fh, header_end, size))
    rules, harness = RuleClassifier(header.taxonomy), HarnessVerdictClassifier()
    known = {c.id for c in header.taxonomy}
    every_rule = compile_any([r for c in header.taxonomy for r in c.rules])
    lean_decoder = msgspec.json.Decoder(canonical.CommonRecord)
    plain_decoder = msgspec.json.Decoder()
    syntax = msgspec.json.Decoder(msgspec.Raw)
    stub_row = (None,) * len(codec.ROW_COLUMNS)
    real_match = rules.match

    def counted_match(texts):
        counts.rule_searches += 1
        return real_match(texts)

    rules.match = counted_match  # type: ignore[method-assign]
    buffer = bytearray(ingest.BLOCK_BYTES + (1 << 20))
    blocks: list[ingest.Block] = []
    with path.open("rb") as fh:
        file_hash = hashlib.sha256(fh.read(header_end))  # the blocks' bytes follow the header's
    with ingest.no_cyclic_gc(), open(path, "rb", buffering=0) as raw_fh:
        for off, n in ranges:
            counts.blocks += 1
            with led.timing("read"):
                data = ingest.read_range(source, off, n)
            with led.timing("read", floor=True):
                raw_fh.seek(off)
                raw_fh.readinto(memoryview(buffer)[:n])
            with mock.patch.object(ingest, "_lean_row", lambda *_a: stub_row), led.timing("split"):
                ingest._score_block(header_line, source, off, 1, data)
            with led.timing("split", floor=True):
                newline_to_newline(data)
            records = lines_of(data, off)
            counts.records += len(records)

            # decode: the lean decoder on every record, the typed path's on those it leaves
            structs: dict[bytes, canonical.CommonRecord] = {}
            lean_misses = []
            with led.timing("decode"):
                for rec in records:
                    try:
                        structs[rec[2]] = lean_decoder.decode(rec[2])
                    except ingest._LEAN_MISS:
                        lean_misses.append(rec)
            with led.timing("decode", floor=True):
                plain_decoder.decode_lines(data)
            # the lean path's answer for each record it decoded (None: the typed path decides)
            lean_rows = {rec[2]: ingest._lean_row(rec[2], header, known, rec[0], rec[1], harness.min_benign_confidence)
                         for rec in records if rec[2] in structs}
            typed_recs = lean_misses + [rec for rec in records if rec[2] in structs and lean_rows[rec[2]] is None]
            trajectories = {}
            with led.timing("decode"):
                for rec in typed_recs:
                    try:
                        trajectories[rec[2]] = canonical.check_record(decode_json_line(rec[2]), known, None)
                    except RecordError:
                        counts.rejected += 1
            lean_recs = [rec for rec in records if lean_rows.get(rec[2]) is not None]
            counts.lean += len(lean_recs)
            counts.typed += len(trajectories)

            # hash: the surfaces' digests (sizes and limit with them); the import takes no block digest
            surfaces = []
            for rec in lean_recs:
                calls = structs[rec[2]].tool_calls
                surfaces.append(([c.arguments.encode("utf-8", "surrogatepass") for c in calls],
                                 [c.raw_size_bytes for c in calls], [c.raw_sha256 for c in calls]))
            with led.timing("hash"):
                for texts, sizes, digests in surfaces:
                    assert plain_calls_proven(texts, sizes, digests, header.capture_limit_bytes, json_arguments=False)
            every_surface = [t for texts, _s, _d in surfaces for t in texts]
            counts.surfaces += len(every_surface)
            counts.surface_bytes += sum(map(len, every_surface))
            joined_surfaces = b"".join(every_surface)
            with led.timing("hash", floor=True):
                file_hash.update(data)
                hashlib.sha256(joined_surfaces).digest()

            # capture rules: the lean path's JSON check, the typed path's assessment
            captures = {}
            with led.timing("capture rules"):
                for text in every_surface:
                    assert certainly_json(text)
                for raw, t in trajectories.items():
                    captures[raw] = assess_calls(t, header)
            surface_array = b"[" + b",".join(every_surface) + b"]"
            with led.timing("capture rules", floor=True):
                syntax.decode(surface_array)

            # taxonomy rules (and the verdict decision) on the typed path
            scored = {}
            with led.timing("taxonomy rules"):
                for raw, t in trajectories.items():
                    scored[raw] = score_trajectory(t, header, rules, harness, captures[raw])
            typed_texts = [JOIN.join([encode_text(c.arguments) for c in t.tool_calls]) for t in trajectories.values()]
            with led.timing("taxonomy rules", floor=True):
                if every_rule is not None:
                    for text in typed_texts:
                        every_rule.search(text)

            # row building: the rest of the lean path, the typed path's row
            rows_by_raw = {}
            with mock.patch.object(ingest, "_LEAN_DECODER", Predecoded(structs)), \
                    mock.patch.object(ingest, "plain_calls_proven", _proven), led.timing("row building"):
                for line, at, raw in lean_recs:
                    rows_by_raw[raw] = ingest._lean_row(raw, header, known, line, at, harness.min_benign_confidence)
            with led.timing("row building"):
                typed_at = {rec[2]: rec for rec in typed_recs}
                for raw, t in trajectories.items():
                    line, at, _raw = typed_at[raw]
                    rows_by_raw[raw] = codec.encode(t, scored[raw], line, at, len(raw), captures[raw])
            rows = [rows_by_raw[rec[2]] for rec in records if rec[2] in rows_by_raw]
            columns = list(zip(*rows, strict=True))
            with led.timing("row building", floor=True):
                list(zip(*columns, strict=True))
            for raw, row in lean_rows.items():
                if row is not None:
                    assert rows_by_raw[raw] == row, "a lean row built with its decoder and hashing stubbed differs"

            # the check: the block scorer, whole, builds the same rows
            start = time.thread_time()
            block = ingest.score_bytes(header_line, source, off, data, span=False)  # as the import scores it
            led.whole += time.thread_time() - start
            assert block.rows == rows, "the stages' rows are not the block scorer's"
            with led.timing("rows pickled between processes"):
                block = pickle.loads(pickle.dumps(block, pickle.HIGHEST_PROTOCOL))
            blocks.append(block)
    rules.match = real_match  # type: ignore[method-assign]

    start = time.thread_time()
    file_sha256 = copies.sha256_of_file(path)  # the copy's, the run key (the copy holds these bytes)
    assert copies.sha256_of_file(path) == file_sha256  # the source's, the torn-copy check
    led.rehash = time.thread_time() - start
    led.stage["hash"] += led.rehash
    led.stage_wall["hash"] += led.rehash  # a CPU-bound pass: its wall is not told apart
    assert file_sha256 == file_hash.hexdigest()
    with led.timing("rows staged for the writer"):
        staged = importing._scored_ahead(iter(blocks), None, workdir)
    with staged:
        with led.timing("settle"):
            settled = settle(header, staged.digests, file_sha256=file_sha256, first_line=first_line)
        write_rows(led, settled, staged, blocks, workdir)
    copy_run(led, path, workdir)
    return led, counts


def write_rows(led: Ledger, settled, staged, blocks: list[ingest.Block], workdir: Path) -> None:
    """*SQLite writes*: the run and its rows into a fresh workspace, as the import writes them;
    the floor: the same rows into a bare table of a fresh database beside it."""
    db_path = run_all.empty_db(workdir / "breakdown.db")
    ws = Workspace(db_path)
    with led.timing("SQLite writes"), ws.connect() as db, immediate(db):
        db.table("runs").insert({**importing.run_columns(settled), "stored_path": f"{settled.run_key}.jsonl",
                                 "stored_sha256": settled.file_sha256, "imported_at": utc_now(),
                                 "original_path": f"{settled.run_key}.jsonl", "file_sha256": settled.file_sha256})
        importing._write_blocks(db, settled, staged)
    bare_path = run_all.empty_db(workdir / "breakdown-bare.db")
    conn = sqlite3.connect(bare_path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    cols = ", ".join(f"[{c}]" for c in ("run_key", *codec.ROW_COLUMNS))
    conn.execute(f"CREATE TABLE bare ({cols})")
    insert = f"INSERT INTO bare VALUES ('{settled.run_key}', {', '.join('?' * len(codec.ROW_COLUMNS))})"
    with led.timing("SQLite writes", floor=True):
        conn.execute("BEGIN")
        for block in blocks:
            conn.executemany(insert, block.rows)
        conn.execute("COMMIT")
    conn.close()
    for db in (db_path, bare_path):
        run_all.empty_db(db)


def copy_run(led: Ledger, path: Path, workdir: Path) -> None:
    """*evidence copy*: the workspace's copy of the run as the import makes it (a reflink where
    the file system has one, else the kernel's copy); the floor: ``shutil.copyfile``."""
    made, bare = workdir / "breakdown-copy.jsonl", workdir / "breakdown-copy-bare.jsonl"
    for p in (made, bare):
        p.unlink(missing_ok=True)
    with led.timing("evidence copy"):
        copies.kernel_copy(path, made)
    with led.timing("evidence copy", floor=True):
        shutil.copyfile(path, bare)
    for p in (made, bare):
        p.unlink()


# --- the whole import against pyarrow, each in a fresh process --------------------------------

CHILD = r'''
import json, os, resource, sys, time
sys.path.insert(0, {root!r})


def cpu(fields=("ru_utime", "ru_stime")):
    return sum(getattr(resource.getrusage(w), f) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
               for f in fields)


def own_peak_mb():
    # VmHWM is this process's own peak; ru_maxrss would also count the parent's RSS where it was
    # forked before exec (Linux keeps the old memory's high-water mark across execve).
    try:
        with open("/proc/self/status") as fh:
            return next(int(line.split()[1]) / 1024 for line in fh if line.startswith("VmHWM"))
    except (OSError, StopIteration):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main():  # the import's spawned workers import this file again: nothing may run then
    kind, path = sys.argv[1], sys.argv[2]
    if kind == "pyarrow":
        import pyarrow.json as pj
        opts = pj.ReadOptions(block_size=1 << 24)
    else:
        from scoring.ingest import IMPORT_WORKERS, PARALLEL_MIN_BYTES
        from scoring.workspace import Workspace
        ws = Workspace(sys.argv[3])
    wall, cpu0, sys0 = time.perf_counter(), cpu(), cpu(("ru_stime",))
    if kind == "pyarrow":
        rows = pj.read_json(path, read_options=opts).num_rows
        workers = 0
    else:
        rows = ws.import_run(path).run["trajectories"]
        workers = IMPORT_WORKERS if os.path.getsize(path) >= PARALLEL_MIN_BYTES else 0
    wall, cpu_s, sys_s = time.perf_counter() - wall, cpu() - cpu0, cpu(("ru_stime",)) - sys0
    own = own_peak_mb()
    child = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024 if workers else 0
    print(json.dumps({{"wall_s": wall, "cpu_s": cpu_s, "sys_s": sys_s, "rows": rows,
                      "peak_rss_mb": own + workers * child, "own_rss_mb": own, "worker_rss_mb": child,
                      "workers": workers}}))


if __name__ == "__main__":
    main()
'''


def fresh_process(kind: str, path: Path, workdir: Path, *extra: str) -> dict:
    script = workdir / "child.py"
    script.write_text(CHILD.format(root=str(ROOT)))
    out = subprocess.run([sys.executable, str(script), kind, str(path), *extra], capture_output=True, text=True,
                         cwd=ROOT)
    if out.returncode != 0:
        raise RuntimeError(f"{kind} in a fresh process failed:\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


MEMORY_STATES = ("idle", "warm")
"""How each measured process finds the machine's memory. On a virtual machine, memory freed a few
seconds ago is handed back to the host, and a process that then touches fresh memory pays for the
host's mapping it again as system time in its own CPU (pyarrow, which allocates more than the
file, most). *idle*: a pause of ``IDLE_PAUSE_S`` before the process, the state of a machine
nobody has used for a while (what a researcher's first import meets); *warm*: right after a
throwaway ``pyarrow`` read in a process of its own, whose freed memory is still mapped. Each
ratio pairs an import and a pyarrow read in the same state: the warm one is the parse's own cost."""
IDLE_PAUSE_S = 10.0


def paired(path: Path, pairs: int, workdir: Path, state: str, pause_s: float = IDLE_PAUSE_S) -> list[tuple[dict, dict]]:
    """(pyarrow, import) in ``pairs`` pairs, the order alternating from one pair to the next, each
    process started with the memory in ``state`` (``MEMORY_STATES``)."""
    def measured(kind: str, *extra: str) -> dict:
        if state == "idle":
            time.sleep(pause_s)
        else:
            fresh_process("pyarrow", path, workdir)
        return fresh_process(kind, path, workdir, *extra)

    out = []
    for i in range(pairs):
        db = run_all.empty_db(workdir / "import.db")
        if i % 2 == 0:
            arrow, imp = measured("pyarrow"), measured("import", str(db))
        else:
            imp = measured("import", str(db))
            arrow = measured("pyarrow")
        run_all.empty_db(db)
        assert arrow["rows"] == imp["rows"] + 1, (arrow, imp)  # pyarrow reads the header line as a row
        out.append((arrow, imp))
    return out


def load() -> str:
    """The machine's load averages (1, 5 and 15 minutes), as ``uptime`` prints them."""
    return ", ".join(f"{x:.2f}" for x in os.getloadavg())


def run(trajectories: int = 200_000, pairs: int = 3, pause_s: float = IDLE_PAUSE_S) -> list[str]:
    """The section's lines (between its markers)."""
    lines: list[str] = []
    say = lines.append

    path, info = run_all.bench_file(trajectories)
    started_load = load()
    workdir = OUT / f"breakdown-{trajectories}"  # a quick check never shares files with a full run
    workdir.mkdir(parents=True, exist_ok=True)
    # first, while this process is small: the children start from it
    by_state = {state: paired(path, pairs, workdir, state, pause_s) for state in MEMORY_STATES}
    led, counts = breakdown(path, workdir)
    ended_load = load()
    rounds = [r for state in MEMORY_STATES for r in by_state[state]]
    peak_round = max((i for _a, i in rounds), key=lambda i: i["peak_rss_mb"])
    peak = peak_round["peak_rss_mb"]
    peaks = ", ".join(f"{i['peak_rss_mb']:,.0f}" for _a, i in rounds)
    size_mb = info["bytes"] / 2**20
    say(BEGIN)
    say("## Where the import's seconds go: each stage beside its floor")
    say("")
    say(f"Generated by `benches/import_breakdown.py` at {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}: "
        f"the bench run of {info['trajectories']:,} trajectories, {info['tool_calls']:,} tool calls "
        f"({info['over_limit']:,} over the capture limit), {size_mb:,.0f} MiB, in {counts.blocks} blocks of "
        f"{ingest.BLOCK_BYTES >> 20} MiB; "
        f"{counts.lean:,} records took the lean path, {counts.typed:,} the typed path ({counts.rule_searches:,} "
        f"of them searched by the taxonomy rules), {counts.rejected:,} were rejected. Each stage calls the project's "
        f"own functions on the blocks' bytes, serially in one process (CPU seconds of its thread, summed over the "
        f"blocks); each floor is measured in the same pass over the same bytes. Load average (1, 5, 15 min) "
        f"{started_load} at the start, {ended_load} at the end. The last column is wall time, for the stages that wait "
        f"(the disk; a core, on a busy machine).")
    say("")
    say("| stage | seconds | floor | floor seconds | stage ÷ floor | stage − floor | wall s, stage / floor |")
    say("|---|---|---|---|---|---|---|")
    for name in STAGES:
        s, f = led.stage[name], led.floor[name]
        ratio = f"{s / f:.2f}×" if f else "—"
        say(f"| {name} | {s:.4f} | {FLOORS[name]} | {f:.4f} | {ratio} | {s - f:.4f} | "
            f"{led.stage_wall[name]:.2f} / {led.floor_wall[name]:.2f} |")
    for name in OTHER:
        say(f"| {name} | {led.stage[name]:.4f} | — | — | — | — | {led.stage_wall[name]:.2f} / — |")
    staged = sum(led.stage.values())
    floors = sum(led.floor.values())
    say(f"| **all stages** | **{staged:.2f}** | the floors | {floors:.2f} | {staged / floors:.2f}× | "
        f"{staged - floors:.2f} | {sum(led.stage_wall.values()):.2f} / {sum(led.floor_wall.values()):.2f} |")
    say("")
    in_blocks = sum(led.stage[n] for n in ("split", "decode", "hash", "capture rules", "taxonomy rules",
                                          "row building")) - led.rehash
    say(f"Check: `ingest.score_bytes` of every block, whole, took {led.whole:.2f} s and built the same rows as the "
        f"stages; the stages it runs (split, decode, hash but the file's two hashes, {led.rehash:.2f} s, capture "
        f"rules, taxonomy rules, row building) sum to {in_blocks:.2f} s. The lean records' argument surfaces: "
        f"{counts.surfaces:,}, {counts.surface_bytes / 2**20:,.0f} MiB.")
    say("")
    before, after = led.stage["evidence copy"], led.stage["settle"] + led.stage["SQLite writes"]
    workers = led.stage["read"] + led.whole
    beside = led.rehash + led.stage["rows pickled between processes"] + led.stage["rows staged for the writer"]
    say(f"Where these run in a large import (`importing._import_parallel`): the evidence copy in the main process "
        f"before any worker starts ({before:.2f} s here, one core idle); reading and scoring the blocks on "
        f"{ingest.IMPORT_WORKERS} workers ({workers:.2f} s here: {workers / ingest.IMPORT_WORKERS:.2f} s each on free "
        f"cores); beside them in the main process the file's two hashes, the blocks' rows unpickled and staged "
        f"({beside:.2f} s here, the hashes in two threads); after the last block settle and the SQLite writes "
        f"({after:.2f} s here, one core idle). From these figures (an estimate, not a measurement) the import's "
        f"wall on two free cores is at least {before + max(workers / ingest.IMPORT_WORKERS, beside) + after:.2f} s, "
        f"of which {before + after:.2f} s on one core.")
    say("")
    say("| whole import (`Workspace.import_run`, fresh database) ÷ `pyarrow.json.read_json`, each in a fresh "
        f"process, {pairs} pairs in turn in each memory state | median | target |")
    say("|---|---|---|")
    for state in MEMORY_STATES:
        state_rounds = by_state[state]
        wall = statistics.median(i["wall_s"] / a["wall_s"] for a, i in state_rounds)
        cpu = statistics.median(i["cpu_s"] / a["cpu_s"] for a, i in state_rounds)
        walls = ", ".join(f"{i['wall_s']:.2f}/{a['wall_s']:.2f}" for a, i in state_rounds)
        cpus = ", ".join(f"{i['cpu_s']:.2f}/{a['cpu_s']:.2f} (system {i['sys_s']:.2f}/{a['sys_s']:.2f})"
                         for a, i in state_rounds)
        say(f"| {state}: wall (import/pyarrow s: {walls}) | **{wall:.2f}×** | "
            f"≤ 1.5{'' if wall <= 1.5 else ': not met'} |")
        say(f"| {state}: CPU, all processes (import/pyarrow s: {cpus}) | **{cpu:.2f}×** | "
            f"≤ 1.2{'' if cpu <= 1.2 else ': not met'} |")
    say(f"| import's peak RSS, main + workers ({peak:,.0f} MiB: {peak_round['own_rss_mb']:,.0f} + "
        f"{peak_round['workers']} × {peak_round['worker_rss_mb']:,.0f}, the largest of the pairs: {peaks}) ÷ the file "
        f"({size_mb:,.0f} MiB) | "
        f"**{peak / size_mb:.2f}×** | ≤ 0.5{'' if peak / size_mb <= 0.5 else ': not met'} |")
    say(END)
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trajectories", type=int, default=200_000, help="the bench run's size (5 calls each)")
    ap.add_argument("--pairs", type=int, default=3, help="pyarrow/import pairs of fresh processes (at least 3)")
    ap.add_argument("--small", action="store_true",
                    help=f"a quick check: {SMALL_TRAJECTORIES:,} trajectories, nothing written")
    ap.add_argument("--no-write", action="store_true", help="print only; RESULTS.md is left as it is")
    args = ap.parse_args(argv)
    if args.pairs < 3:
        ap.error("--pairs: at least 3 (the figure is a median of pairs)")
    # a quick check's figures mean nothing: it does not wait for the memory to be handed back
    small = args.small
    lines = run(SMALL_TRAJECTORIES if small else args.trajectories, args.pairs, 0.0 if small else IDLE_PAUSE_S)
    print("\n".join(lines))
    if not (args.small or args.no_write):
        replace_section(lines, BEGIN, END)
    return 0


if __name__ == "__main__":
    sys.exit(main())
