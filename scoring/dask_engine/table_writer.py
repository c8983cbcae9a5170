"""The score table's writer: a block's rows as a Parquet part, a run's Inconclusive index, a run
published from its staging folder into the table (its parts gathered, its record written last),
and the table's index files over every run in it; the output checked before a fleet starts."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import uuid
from typing import Any

from ..errors import InputError, LitmusReviewError, RunFailed
from ..ingest import Block
from ..rows import ROW_COLUMNS
from .run_results import DONE, FAILED, SKIPPED, RunResult, travels
from .storage import (
    URL_SCHEME,
    WRITE_PROTOCOLS,
    check_location,
    error_message,
    file_system,
    join_url,
    make_folders,
    unreachable,
    unreachable_message,
)
from .table_layout import (
    AGGREGATES_FILE,
    INCONCLUSIVE_DIR,
    INDEX_FILE,
    KEYS_FILE,
    PART_BYTES,
    ROW_GROUP_BYTES,
    RUN_AGGREGATES_DIR,
    RUN_KEY,
    RUNS_DIR,
    SOURCES_DIR,
    STAGING_DIR,
    SUMMARIES_DIR,
    SUMMARY_FILE,
    TABLE_DIR,
    read_summaries,
    record_name,
    table_schema,
    typed_columns,
)


def write_inconclusive(res: RunResult, table: str, storage_options: dict) -> None:
    """The run's ``INCONCLUSIVE_DIR`` part (idempotent: a retried final stage writes it again)."""
    import pyarrow as pa  # optional: the dask extra
    import pyarrow.parquet as pq  # optional: the dask extra

    if res.error is not None or res.inconclusive is None:
        return
    ids, cats, claims = res.inconclusive
    fs, base = file_system(table, storage_options)
    folder = f"{base}/{INCONCLUSIVE_DIR}/run_key={res.run_key}"
    make_folders(fs, folder)
    with fs.open(f"{folder}/part-0.parquet", "wb") as fh:
        pq.write_table(pa.table({"trajectory_id": pa.array(ids, pa.string()),
                                 "intended_category": pa.array(cats, pa.string()),
                                 "lenient_safe": pa.array(claims, pa.bool_())}), fh)


@travels
def write_part(scored: Block, final: RunResult, index: int, tmp_url: str, storage_options: dict,
               source: str) -> int:
    """Write one block's stored rows (line numbers shifted) as a Parquet part, with ``source``
    (where the run is read: replay reads a row's byte range there); returns the rows written.
    Idempotent: a retried writer writes the same file again."""
    import pyarrow as pa  # optional: the dask extra
    import pyarrow.parquet as pq  # optional: the dask extra

    if final.error is not None:
        return 0
    block = scored
    drop, shift = set(final.drops[index]), final.shifts[index]
    rows = [r for i, r in enumerate(block.rows) if i not in drop] if drop else block.rows
    columns = {c: [r[j] for r in rows] for j, c in enumerate(ROW_COLUMNS)}
    columns["line"] = [n + shift for n in columns["line"]]
    columns["source"] = [source] * len(rows)
    summary = final.summary or {}
    table = pa.Table.from_pydict(typed_columns(columns), schema=table_schema(final.run_key, summary.get("run_id"),
                                                                       summary.get("scorer_version")))
    fs, base = file_system(tmp_url, storage_options)
    folder = f"{base}/{TABLE_DIR}/run_key={final.run_key}"
    make_folders(fs, folder)
    with fs.open(f"{folder}/part-{index:06d}.parquet", "wb") as fh:
        pq.write_table(table, fh)
    return len(rows)


def _move(fs, src: str, dst: str) -> None:
    """Move a file or folder within one file system: a rename on a local disk; on an object
    store (no rename) each object copied, then the sources removed."""
    from fsspec.implementations.local import LocalFileSystem  # optional: the dask extra

    if isinstance(fs, LocalFileSystem):
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        os.replace(src, dst)
        return
    for name in fs.find(src):
        fs.copy(name, dst + name[len(src):])
    fs.rm(src, recursive=True)


def write_whole(fs, path: str, text: str) -> None:
    """``text`` at ``path``, all of it or none: a reader (a retried task looking for a run's
    record, the app) never finds the file begun and not finished. A local file is written beside
    it and renamed over it (a worker that dies mid-write leaves a stray ``.writing-`` file, not an
    empty record); an object store's put is whole already."""
    from fsspec.implementations.local import LocalFileSystem  # optional: the dask extra

    if not isinstance(fs, LocalFileSystem):
        fs.pipe_file(path, text.encode())
        return
    partial = f"{path}.writing-{uuid.uuid4().hex[:8]}"  # a local path: file_system strips file://
    try:
        with open(partial, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(partial, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(partial)


def gather_parts(fs, src: str, dst: str, part_bytes: int = PART_BYTES, prefix: str = "part-") -> int:
    """Write a run's staged parts (``src``: one per block, named in file order) into ``dst`` as
    parts of about ``part_bytes`` (by the staged parts' sizes), rows in the same order, each
    part's schema and metadata the staged ones'. One staged part is read at a time; rows are
    written in row groups of up to ``ROW_GROUP_BYTES``, named ``prefix`` and their number.
    Returns the parts written."""
    import pyarrow as pa  # optional: the dask extra
    import pyarrow.parquet as pq  # optional: the dask extra

    staged = sorted((name, info.get("size") or 0) for name, info in fs.find(src, detail=True).items()
                    if name.endswith(".parquet"))
    make_folders(fs, dst)
    parts, held, held_bytes, in_part = 0, [], 0, 0
    out_fh = writer = None
    try:
        for name, size in staged:
            with fs.open(name, "rb") as fh:
                table = pq.read_table(fh)
            if writer is None:
                out_fh = fs.open(join_url(dst, f"{prefix}{parts:06d}.parquet"), "wb")
                writer = pq.ParquetWriter(out_fh, table.schema)
                parts, in_part = parts + 1, 0
            held.append(table)
            held_bytes += table.nbytes
            in_part += size
            last = name == staged[-1][0]
            if held_bytes >= ROW_GROUP_BYTES or in_part >= part_bytes or last:
                writer.write_table(pa.concat_tables(held))
                held, held_bytes = [], 0
            if in_part >= part_bytes or last:
                writer.close()
                writer = None
                if out_fh is not None:
                    out_fh.close()
                    out_fh = None
    finally:
        if writer is not None:
            writer.close()
        if out_fh is not None:
            out_fh.close()
    return parts


@travels
def publish_run(final: RunResult, staging: str, out: str, storage_options: dict, record: dict,
                *written: int, part_bytes: int = PART_BYTES, staged: bool = True) -> RunResult:
    """Gather a complete run's staged parts into the table's parts of about ``part_bytes`` and
    move its other files there (replacing the same run key's earlier ones), then write its
    aggregates and summary and, last, its record. On a worker; idempotent (a retried publish
    gathers the staged parts, still there, again and writes the same files). ``staged=False``:
    its rows, Inconclusive index and canonical copy were written into the table itself
    (``run_small``): only its aggregates, summary and record are left to write.

    The rows are gathered into parts named for this attempt, beside any the key had; those go
    only once its record is written. A publish that fails takes its own parts back (and, for a
    key the table did not hold, its Inconclusive index and canonical copy): the table keeps the
    rows it lists, and none it does not."""
    final = dataclasses.replace(final, source=record["source"])
    fs = base = None
    attempt, existed = f"part-{uuid.uuid4().hex[:8]}-", True
    try:
        if sum(written) != final.rows:
            raise RunFailed(f"{record['source']}: the score table holds {sum(written):,} rows where {final.rows:,} "
                            "were scored")
        fs, base = file_system(out, storage_options, WRITE_PROTOCOLS)
        _, stage = file_system(staging, storage_options, WRITE_PROTOCOLS)
        key = final.run_key
        rows = f"{TABLE_DIR}/run_key={key}"
        if staged:
            fs.invalidate_cache()
            existed = fs.exists(join_url(base, rows))
        for rel in (rows, f"{INCONCLUSIVE_DIR}/run_key={key}", f"{SOURCES_DIR}/{key}.jsonl") if staged else ():
            src, dst = join_url(stage, rel), join_url(base, rel)
            if not fs.exists(src):
                continue
            if rel == rows:  # read, not moved: a retried publish finds every staged part still there
                gather_parts(fs, src, dst, part_bytes, prefix=attempt)
            else:  # the same key's are the same bytes
                if fs.exists(dst):
                    fs.rm(dst, recursive=True)
                _move(fs, src, dst)
        make_folders(fs, join_url(base, RUN_AGGREGATES_DIR))
        write_whole(fs, join_url(base, RUN_AGGREGATES_DIR, f"{key}.json"), json.dumps(final.aggregates))
        write_summary(fs, base, str(key), final.summary)
        final = dataclasses.replace(final, aggregates=None)  # in the table: they need not travel to the client
        make_folders(fs, join_url(base, RUNS_DIR))
        write_whole(fs, join_url(base, RUNS_DIR, record_name(record['source'])),
                    json.dumps({**record, "run_key": key, "summary": final.summary}))
        if staged:
            _drop_parts(fs, join_url(base, rows), keep=attempt)  # an earlier publish's of the same key
            with contextlib.suppress(FileNotFoundError, OSError):
                fs.rm(stage, recursive=True)
    except Exception as exc:
        if staged and fs is not None and base is not None:
            _take_back(fs, base, final.run_key, attempt, existed)
        if isinstance(exc, RunFailed):
            raise
        raise RunFailed(f"{record['source']}: cannot publish its rows to {out}: {error_message(exc)}") from None
    return final


def _drop_parts(fs, folder: str, *, keep: str | None = None, only: str | None = None) -> None:
    """The Parquet parts in ``folder`` not named ``keep``* (or only those named ``only``*)."""
    with contextlib.suppress(FileNotFoundError, OSError):
        for name in fs.ls(folder, detail=False):
            leaf = name.rstrip("/").rsplit("/", 1)[-1]
            if leaf.endswith(".parquet") and (leaf.startswith(only) if only is not None else
                                              not (keep is not None and leaf.startswith(keep))):
                fs.rm(name)


def _take_back(fs, base: str, key: str | None, attempt: str, existed: bool) -> None:
    """What a failed publish put in the table: its own parts; for a key the table did not hold,
    its folders and canonical copy too (best effort: the failure is what is reported)."""
    if not (isinstance(key, str) and RUN_KEY.fullmatch(key)):
        return
    rows = join_url(base, f"{TABLE_DIR}/run_key={key}")
    _drop_parts(fs, rows, only=attempt)
    if existed:
        return
    for rel in (f"{TABLE_DIR}/run_key={key}", f"{INCONCLUSIVE_DIR}/run_key={key}", f"{SOURCES_DIR}/{key}.jsonl",
                f"{RUN_AGGREGATES_DIR}/{key}.json", f"{SUMMARIES_DIR}/{key}.json"):
        with contextlib.suppress(FileNotFoundError, OSError):
            fs.rm(join_url(base, rel), recursive=True)


def _refuse_foreign_output(fs: Any, path: str, out: str) -> None:
    """An existing ``out`` must be a directory that is empty or a score table of this engine:
    nothing else is ever overwritten."""
    if not fs.isdir(path):
        raise InputError("the output exists and is not a directory; give a new directory", source=out)
    names = {n.rstrip("/").rsplit("/", 1)[-1] for n in fs.ls(path, detail=False)}
    if names and RUNS_DIR not in names:
        raise InputError("the output already exists and is not a score table written by this engine; give "
                         "a new directory (nothing is overwritten)", source=out)


def check_out(out: str, storage_options: dict) -> None:
    """What ``prepare_out`` refuses, checked without writing (the CLI asks before a cluster
    starts)."""
    check_location(out, WRITE_PROTOCOLS, what="output")
    fs, path = file_system(out, storage_options, WRITE_PROTOCOLS)
    try:
        if fs.exists(path):
            _refuse_foreign_output(fs, path, out)
        elif URL_SCHEME.match(out) is None and not os.path.isdir(os.path.dirname(os.path.abspath(path))):
            raise InputError("cannot write the score table here: its folder does not exist", source=out)
    except LitmusReviewError:
        raise
    except Exception as exc:  # OSError, or a storage backend's own (botocore's NoCredentialsError...)
        raise InputError(f"cannot write the score table here: {error_message(exc)}", source=out) from exc


def prepare_out(out: str, storage_options: dict, *, replace: bool = False) -> bool:
    """Check that ``out`` can take a score table: a new or empty directory, or a score table
    written by this engine (a retry: it resumes, or with ``replace`` rescores every run given).
    Its staging folder is emptied (a crashed attempt's parts go). Whether ``out`` was created."""
    check_location(out, WRITE_PROTOCOLS, what="output")
    fs, path = file_system(out, storage_options, WRITE_PROTOCOLS)
    try:
        created = not fs.exists(path)
        if not created:
            _refuse_foreign_output(fs, path, out)
        stage = join_url(path, STAGING_DIR)
        if fs.exists(stage):
            fs.rm(stage, recursive=True)
        fs.makedirs(stage, exist_ok=True)
    except LitmusReviewError:
        raise
    except OSError as exc:  # no such folder, no permission, a file in the way
        why = unreachable_message() if unreachable(exc) else exc.strerror or exc
        raise InputError(f"cannot write the score table here: {why}", source=out) from exc
    except Exception as exc:  # a storage backend's own (botocore's NoCredentialsError...)
        raise InputError(f"cannot write the score table here: {error_message(exc)}", source=out) from exc
    return created


def finish_table(out: str, storage_options: dict, results: list[RunResult], created: bool) -> None:
    """The table's index files, over every run in it (earlier attempts' runs kept, this fleet's
    replacing them by source); the staging folder removed; the files of run keys the table no
    longer lists removed (``_drop_replaced``). In a table this fleet created, every file of a
    key it does not list is removed, and the record of each run that did not end in it (a run
    that failed while or after publishing): nothing else wrote there. A table no run reached is
    removed when this fleet created it."""
    fs, path = file_system(out, storage_options, WRITE_PROTOCOLS)
    fs.invalidate_cache()
    prior: list[tuple[str | None, Any]] = []
    with contextlib.suppress(FileNotFoundError, InputError):
        prior = list(read_summaries(out, storage_options, allowed=WRITE_PROTOCOLS, keys_checked=False, bounded=False))
    mine = {r.source for r in results if r.status in (DONE, SKIPPED) and r.run_key is not None}
    entries: list[tuple[str | None, Any]] = [(k, s) for k, s in prior if s.get("source") not in mine]
    kept: dict[Any, tuple[str | None, Any]] = {s.get("source"): (k, s) for k, s in prior}
    for r in results:
        if r.status == DONE:
            entries.append((r.run_key, r.summary))
        elif r.status == SKIPPED and r.run_key is not None:
            # Its record is what the table published; the index is older where a fleet ended before writing it
            earlier = kept.get(r.source)
            entries.append(earlier if earlier is not None and earlier[0] == r.run_key else (r.run_key, r.recorded))
    with contextlib.suppress(FileNotFoundError, OSError):
        fs.rm(join_url(path, STAGING_DIR), recursive=True)
    listed = {k for k, _s in entries}
    dropped = {k for k, _s in prior} - listed
    if created:
        dropped |= _keys_present(fs, path) - listed
        for r in results:
            if r.status == FAILED or (r.status == SKIPPED and r.run_key is None):
                with contextlib.suppress(FileNotFoundError, OSError):
                    fs.rm(join_url(path, RUNS_DIR, record_name(r.source)))
    _drop_replaced(fs, path, dropped)
    if not entries:
        if created:
            with contextlib.suppress(FileNotFoundError, OSError):
                fs.rm(path, recursive=True)
        return
    write_index(fs, path, entries)


def _keys_present(fs, base: str) -> set[str]:
    """The run keys any file of the table is of (a listing of each of its per-run folders)."""
    found: set[str] = set()
    for folder, prefix, suffix in ((TABLE_DIR, "run_key=", ""), (INCONCLUSIVE_DIR, "run_key=", ""),
                                   (RUN_AGGREGATES_DIR, "", ".json"), (SUMMARIES_DIR, "", ".json"),
                                   (SOURCES_DIR, "", ".jsonl")):
        with contextlib.suppress(FileNotFoundError, OSError):
            for name in fs.ls(join_url(base, folder), detail=False):
                leaf = name.rstrip("/").rsplit("/", 1)[-1]
                if leaf.startswith(prefix) and leaf.endswith(suffix):
                    found.add(leaf[len(prefix):len(leaf) - len(suffix)])
    return {k for k in found if RUN_KEY.fullmatch(k)}


def _drop_replaced(fs, base: str, keys: set) -> None:
    """The files of run keys the table no longer lists (a source scored again whose content
    changed has a new key): its rows would otherwise stay beside the new ones, orphans that
    pyarrow, DuckDB and polars read as rows of the table. A key that is not a run key (a
    damaged or shared index) is never joined into a path."""
    for key in sorted(k for k in keys if isinstance(k, str) and RUN_KEY.fullmatch(k)):
        for rel in (f"{TABLE_DIR}/run_key={key}", f"{INCONCLUSIVE_DIR}/run_key={key}",
                    f"{RUN_AGGREGATES_DIR}/{key}.json", f"{SUMMARIES_DIR}/{key}.json", f"{SOURCES_DIR}/{key}.jsonl"):
            with contextlib.suppress(FileNotFoundError, OSError):
                fs.rm(join_url(base, rel), recursive=True)


def write_summary(fs, base: str, run_key: str, summary: Any) -> None:
    """A run's ``SUMMARIES_DIR/RUN_KEY.json`` (what the app reads when the run is shown)."""
    make_folders(fs, join_url(base, SUMMARIES_DIR))
    write_whole(fs, join_url(base, SUMMARIES_DIR, f"{run_key}.json"), json.dumps(summary))


def write_index(fs, path: str, entries: list[tuple[str | None, Any]]) -> None:
    """``run_keys.json``, ``index.json``, then ``summary.json`` (the mark of a table); a table of
    the first layout's ``aggregates.json`` removed (each run's are in ``RUN_AGGREGATES_DIR``)."""
    with contextlib.suppress(FileNotFoundError):
        fs.rm(join_url(path, AGGREGATES_FILE))
    # the partition of each summary, in order
    write_whole(fs, join_url(path, KEYS_FILE), json.dumps([k for k, _s in entries]))
    write_whole(fs, join_url(path, INDEX_FILE), json.dumps([[k, s.get("run_id"), s.get("model")] for k, s in entries]))
    write_whole(fs, join_url(path, SUMMARY_FILE), json.dumps([s for _k, s in entries]))


def commit_results(tmp: str, out: str, storage_options: dict, results: list[RunResult]) -> None:
    """A table's index files for results computed in this process (tests and benchmarks run the
    graph by hand): each run's Inconclusive index, per-run aggregates, then the index."""
    fs, tmp_path = file_system(tmp, storage_options)
    fs.invalidate_cache()
    for r in results:
        write_inconclusive(r, tmp, storage_options)
        make_folders(fs, join_url(tmp_path, RUN_AGGREGATES_DIR))
        write_whole(fs, join_url(tmp_path, RUN_AGGREGATES_DIR, f"{r.run_key}.json"), json.dumps(r.aggregates))
        write_summary(fs, tmp_path, str(r.run_key), r.summary)
    make_folders(fs, join_url(tmp_path, RUNS_DIR))
    write_index(fs, tmp_path, [(r.run_key, r.summary) for r in results])
