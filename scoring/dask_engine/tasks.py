"""The tasks the workers run for one run: a block read and scored (``score_block``), a whole file
of a format that cannot be split (``score_whole``), the run's content hash checked against
what was planned (``file_sha256``), and the final stage that settles the run as every door
settles one (``finish_run``, ``finish_whole``). Tasks are pure functions of their inputs: a
task lost with a worker is run again and counted once."""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import sys
from collections.abc import Callable
from typing import Any

import numpy as np

from .. import pipeline
from ..aggregate import STATUS_CODE, ScoreColumns, by_category, summarize_by, waterfall
from ..errors import BlockFailed, RunFailed
from ..importers import canonical
from ..ingest import (
    Block,
    HeaderLine,
    changed_while_scored,
    decode_header,
    score_bytes,
)
from ..model import Status
from ..recapture import PayloadJoin
from ..report import Evaluation
from ..settle import BlockDigest, SettledRun, settle
from ..settle import digest as settle_digest
from .cluster import check_version
from .planning import RunPlan, read_owned
from .run_results import RunResult, travels
from .storage import error_message, file_system, make_folders
from .table_layout import SOURCES_DIR
from .table_writer import write_inconclusive, write_part

_HASH_CHUNK = 8 * 1024 * 1024


def block_nbytes(block: Block, sample: int = 32) -> int:
    """Memory a scored block holds, estimated from its first rows (what ``dask.sizeof`` reports
    for it, so a worker spills blocks held for their write instead of counting 48 bytes each)."""
    rows = block.rows
    if not rows:
        return 256
    head = rows[:sample]
    per_row = sum(sys.getsizeof(r) + sum(sys.getsizeof(x) for x in r) for r in head) / len(head)
    return int(256 + per_row * len(rows) + 200 * len(block.rejected))


def _teach_sizeof() -> None:
    """Register ``block_nbytes`` with ``dask.sizeof`` (where dask is installed: on the workers
    and the client, which import this module to run or submit its tasks)."""
    try:
        from dask.sizeof import sizeof  # optional: the dask extra
    except ImportError:  # the dask extra is absent: nothing sizes blocks
        return
    sizeof.register(Block)(block_nbytes)


_teach_sizeof()


@functools.lru_cache(maxsize=2)
def _side_log(url: str, source: str, storage_options: str, version: str = ""):
    """A side log as loaded once per worker process (per ``version``: its size and modification
    mark when its run was planned); blocks apply copies of it."""
    fs, path = file_system(url, json.loads(storage_options))
    with fs.open(path, "rb") as fh:
        return PayloadJoin(source, fh.read())


def _join(plan: RunPlan):
    """The run's side log as loaded (None without one); each block applies a share of it."""
    if plan.payloads is None:
        return None
    return _side_log(plan.payloads, plan.payloads_source, json.dumps(plan.storage_options, sort_keys=True),
                     plan.payloads_version)


def _run_result(settled: SettledRun, aggregates: bool) -> RunResult:
    """What a worker sends back for a settled run: its evaluation without score objects (the
    rows stay on the worker or in the table), the block shifts and drops, and, when asked, the
    run's aggregates and Inconclusive ids."""
    cols = settled.columns
    ev = Evaluation.of(settled)
    return RunResult(dataclasses.replace(ev, scored=ScoreColumns.of(())), settled.run_key, list(settled.shifts),
                     [sorted(d) for d in settled.drops], settled.trajectories,
                     aggregates=_aggregates(cols, ev.summary) if aggregates else None,
                     inconclusive=_inconclusive(cols) if aggregates else None)


@travels
def score_block(plan: RunPlan, start: int, end: int, reclassifier: str | None = None, index: int = 0) -> Block:
    """Read and score one nominal range. A block that fails raises ``BlockFailed`` (located by
    its line within the block), so Dask retries it and the run fails alone."""
    check_version(plan)
    begin, data = start, b""
    try:
        fs, fpath = _run_fs(plan)
        with fs.open(fpath, "rb") as fh:
            begin, data = read_owned(fh, start, end, start == plan.header_end)
        with pipeline.loaded_classifier(reclassifier) as plugin:
            return score_bytes(block_line(plan), plan.source, begin, data, _join(plan), reclassifier=plugin,
                               request=plan.request_with(reclassifier))
    except Exception as exc:  # reported with its location, never swallowed
        rel, at = _locate(plan, begin, data, reclassifier)
        raise BlockFailed(index, rel, at, error_message(exc)) from None


def block_line(plan: RunPlan) -> bytes:
    """The header line a block parses, with what the planner's check of its declared
    taxonomy_rules found (``ingest.HeaderLine``: the blocks honour accepted rules from it alone)."""
    return HeaderLine(plan.header_line, plan.rules_check) if plan.rules_check else plan.header_line


def _run_fs(plan: RunPlan):
    """(file system, path) the run's bytes are read from: its local copy, else where it is."""
    if plan.read_from is not None:
        return file_system(plan.read_from, {})
    return file_system(plan.url, plan.storage_options)


@travels
def score_whole(plan: RunPlan, reclassifier: str | None = None) -> Any:
    """Score a run of a format that cannot be split, on a worker: the whole file read and taken
    down the local path (``pipeline.score_data``: the same importer, conversion and block
    scorer); its ``pipeline.Scored`` (with the canonical copy). Raises ``RunFailed`` naming
    the file."""
    check_version(plan)
    try:
        fs, fpath = _run_fs(plan)
        with fs.open(fpath, "rb") as fh:
            data = fh.read()
        with pipeline.loaded_classifier(reclassifier) as plugin:
            return pipeline.score_data(data, plan.source, plan.request_with(reclassifier), join=_join(plan),
                                       plugin=plugin, keep_canonical=True)
    except Exception as exc:  # reported with its file, never swallowed
        raise RunFailed(f"{plan.source}: {error_message(exc)}") from None


def _fails_as_run(task: Callable[..., RunResult]) -> Callable[..., RunResult]:
    """A final stage whose error is a ``RunFailed`` naming the run's file (the first argument's
    source): an error of the tree does not travel pickled, and a bug is still located."""

    @functools.wraps(task)
    def run(plan: RunPlan, *args: Any, **kwargs: Any) -> RunResult:
        try:
            return task(plan, *args, **kwargs)
        except (RunFailed, BlockFailed):
            raise
        except Exception as exc:
            raise RunFailed(f"{plan.source}: {error_message(exc)}") from None

    return run


@travels
@_fails_as_run
def finish_whole(plan: RunPlan, scored: Any, reclassifier: str | None, *, aggregates: bool = False,
                 table: str | None = None, final_table: str | None = None,
                 storage_options: dict | None = None) -> RunResult:
    """The final stage of a whole-file run, on a worker: ``settle.settle`` as for any run; with
    a table, its canonical copy and its rows written there (the rows' ``source`` is the copy
    where the finished table will hold it)."""
    settled = pipeline.settle_scored(scored, plan.request_with(reclassifier), join=_join(plan))
    res = _run_result(settled, aggregates)
    if table is not None and final_table is not None:
        options = storage_options or {}
        fs, base = file_system(table, options)
        make_folders(fs, f"{base}/{SOURCES_DIR}")
        with fs.open(f"{base}/{SOURCES_DIR}/{settled.run_key}.jsonl", "wb") as fh:
            fh.write(scored.canonical)
        where = f"{final_table.rstrip('/')}/{SOURCES_DIR}/{settled.run_key}.jsonl"
        written = sum(write_part(block, res, i, table, options, where) for i, block in enumerate(scored.blocks))
        assert written == res.rows, (written, res.rows)
        write_inconclusive(res, table, options)
        res = dataclasses.replace(res, inconclusive=None)
    return res


def _locate(plan: RunPlan, begin: int, data: bytes, reclassifier: str | None) -> tuple[int, int]:
    """The first line of a failed block that raises on its own: (its line within the block,
    its byte offset); the block's first line when none does (an I/O error, say)."""
    pos, line = 0, 1
    try:
        with pipeline.loaded_classifier(reclassifier) as plugin:
            while pos < len(data):
                nl = data.find(b"\n", pos)
                stop = len(data) if nl < 0 else nl + 1
                try:
                    score_bytes(block_line(plan), plan.source, begin + pos, data[pos:stop], _join(plan),
                                reclassifier=plugin, request=plan.request_with(reclassifier))
                except Exception:
                    return line, begin + pos
                pos, line = stop, line + 1
    except Exception:  # the classifier itself cannot start
        pass
    return 1, begin


@travels
def digest(scored: Block) -> BlockDigest:
    """A scored block's score fields (runs where the block is held: only these travel)."""
    return settle_digest(scored)


@travels
def file_sha256(plan: RunPlan, *blocks: Any) -> str:
    """The run's content SHA-256 (its run key), read on a worker once its ``blocks`` are scored
    (their ``Block.span`` or ``BlockDigest.span``, in file order). ``RunFailed`` where the file
    is not the one the blocks and the planner read: not the size it had when it was planned
    (still being written), bytes ``[0, plan.read_end)`` not those the planner hashed (its header,
    or the whole file its taxonomy_rules were checked on), or a block's bytes not those found at
    its place now; the blocks must tile the records, ``[header_end, size)``."""
    spans = [s for s in (getattr(b, "span", b) for b in blocks) if s is None or s[1]]
    refused = None
    at = plan.header_end
    for span in spans:
        if span is None or span[0] != at:
            refused = "its blocks do not cover its records line by line"
            break
        at += span[1]
    if refused is None and at != plan.size:
        refused = f"its blocks end at byte {at:,}, not at its end" if spans else "no block read its records"
    fs, fpath = _run_fs(plan)
    h, n = hashlib.sha256(), 0
    prefix = None
    with fs.open(fpath, "rb") as fh:
        if refused is None:
            data = fh.read(plan.header_end)
            h.update(data)
            n += len(data)
            prefix = h.copy()
            for off, length, want in spans:
                part, left = hashlib.sha256(), length
                while left and (chunk := fh.read(min(left, _HASH_CHUNK))):
                    h.update(chunk)
                    part.update(chunk)
                    n += len(chunk)
                    left -= len(chunk)
                if part.digest() != want:
                    refused = f"bytes {off:,} to {off + length:,} are not those a block scored"
                    break
        if refused is None:
            while chunk := fh.read(_HASH_CHUNK):
                h.update(chunk)
                n += len(chunk)
    if refused is None and n != plan.size:
        refused = f"{plan.size:,} bytes when it was planned, {n:,} now; is the harness still writing it?"
    if refused is None and plan.read_sha256:
        read = prefix if plan.read_end == plan.header_end else h if plan.read_end == plan.size else None
        if read is None or read.hexdigest() != plan.read_sha256:
            refused = ("its taxonomy_rules were checked on other bytes" if plan.read_end == plan.size
                       else "its header is not the one planned")
    if refused is not None:
        raise RunFailed(str(changed_while_scored(plan.source, refused)))
    return h.hexdigest()


@travels
@_fails_as_run
def finish_run(plan: RunPlan, content: str, reclassifier: str | None,
               *digests: BlockDigest, aggregates: bool = False, table: str | None = None,
               storage_options: dict | None = None) -> RunResult:
    """The final stage of one run, on a worker: ``settle.settle`` over the blocks' digests (as
    every door settles a run), and its ``report.Evaluation`` (the ``score --json`` shape)."""
    shifts, shift = [], plan.first_line  # the first record line is first_line + 1; block lines count from 1
    for d in digests:
        shifts.append(shift)
        shift += d.lines
    header = canonical.parse_header(decode_header(plan.header_line, plan.source, plan.first_line), plan.source)
    header = dataclasses.replace(header, source=plan.source, format=canonical.NAME, require_proof=plan.require_proof,
                                 classifier_of_record_check=plan.rules_check)
    # the engine scores canonical lines (a verdict map is never read: ``ScoringRequest.keyed_verdict``)
    request = dataclasses.replace(plan.request_with(reclassifier), fmt=canonical.NAME)
    settled = settle(header, digests, file_sha256=content, first_line=plan.first_line, side_log=_join(plan),
                     request=request)
    res = _run_result(settled, aggregates)
    if table is not None:  # written here, on the worker: the ids do not travel to the client
        write_inconclusive(res, table, storage_options or {})
        res = dataclasses.replace(res, inconclusive=None)
    return res


def _inconclusive(cols) -> tuple[list, list, list]:
    """(ids, intended categories, the harness's claims: True safe, False harm, None not judged)
    of the run's Inconclusive trajectories, in file order: a label moves one from pending review
    to labelled in the gap's parts, which need the claim (``aggregate.with_review``)."""
    at = np.flatnonzero(cols.status == STATUS_CODE[Status.INCONCLUSIVE])
    return ([str(x) for x in cols.ids[at]], [None if c is None else str(c) for c in cols.categories[at]],
            [bool(safe) if judged else None for safe, judged in zip(cols.lenient[at], cols.judged[at], strict=True)])


def _aggregates(cols, summary) -> dict:
    """What the app's charts of a run draw, without labels (``table_reader`` applies them)."""
    return {"summary": summary.as_dict(),
            "by_category": {k: v.as_dict() for k, v in summarize_by(cols, by_category).items()},
            "waterfall": [[w.name, w.rate, w.delta_pp, w.trajectories] for w in waterfall(cols, None, summary)]}
