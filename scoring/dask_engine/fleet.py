"""A fleet of runs on a Dask cluster (``score --engine dask``, ``score_runs``): planned by tasks
on the workers in batches, a small run scored and published by the task that planned it, a
larger run's blocks submitted by the client; each run failing or published on its own, a run
that ends its worker retried alone, and every failure located by its file and line."""

from __future__ import annotations

import collections
import concurrent.futures
import contextlib
import dataclasses
import functools
import json
import os
import re
import tempfile
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Unpack

from .. import score
from ..errors import BlockFailed, EngineError, InputError, LitmusReviewError, RunFailed
from ..ingest import BLOCK_BYTES
from ..recapture import side_log_found
from ..request import ScoringRequest, SharedOptions
from .cluster import check_version, check_workers
from .planning import NO_SIDE_LOG, RunPlan, block_bounds, plan_run
from .run_results import DONE, FAILED, SKIPPED, Progress, RunResult, detached, travels
from .storage import (
    WRITE_PROTOCOLS,
    absolute_location,
    error_message,
    exists,
    file_system,
    is_object_store,
    join_url,
    seen_from_the_client,
    unreachable,
    unreachable_message,
)
from .table_layout import PART_BYTES, RUNS_DIR, STAGING_DIR, record_name
from .table_writer import finish_table, prepare_out, publish_run, write_part
from .tasks import digest, file_sha256, finish_run, finish_whole, score_block, score_whole


def plan_task(item: str | RunPlan, storage_options: dict, payloads: str | None, auto_payloads: bool,
              request: ScoringRequest, scorer_version: str, out: str | None, replace: bool, *,
              fetch_into: str | None = None, fetch_most: int = 0,
              fresh: bool = False, fleet_tag: str = "") -> RunPlan | RunResult:
    """Plan one run on a worker (its size, header or format, side log: the requests a client
    would otherwise make one file after another). With ``out``, a run already published there
    from the same source, size and options is not scored again: its record comes back as a
    skipped ``RunResult`` (unless ``replace``), or as a done one when this fleet
    (``fleet_tag``) published it (a task run again after its worker died: the run's result was
    lost with the worker, not its rows). ``RunFailed`` names a file that cannot be planned.
    ``fetch_into``: a folder of the worker's where a run on an object store of at most
    ``fetch_most`` bytes is copied whole first (``fetch_small``), and read from there.
    ``fresh``: ``out`` was created by this fleet, so no record of an earlier fleet is looked for
    (a run of this fleet's that is started again is scored again)."""
    source = item.source if isinstance(item, RunPlan) else item
    options = request.stored()  # what a run's record must match
    look = out is not None and not replace and not fresh  # for this run's record in the table
    try:
        if look and not isinstance(item, RunPlan):  # asked first: a run in the table costs no planning
            assert out is not None
            if (skipped := _recorded(out, storage_options, item, None, options, scorer_version, fleet_tag)):
                return skipped
            look = False
        if isinstance(item, RunPlan):
            plan = item
        else:
            if payloads == NO_SIDE_LOG:
                payloads = None
            elif payloads is None and auto_payloads:
                try:
                    payloads = side_log_found(item, lambda side: exists(side, storage_options))
                except InputError as exc:  # its storage unreachable: the run's, named as the run
                    raise InputError(exc.message, source=item) from exc
            copy = fetch_small(item, storage_options, fetch_into, fetch_most) if fetch_into is not None else None
            plan = plan_run(item, storage_options, payloads, request, read_from=copy)
        plan = dataclasses.replace(plan, scorer_version=scorer_version)
        check_version(plan)
        if look:
            assert out is not None
            if (skipped := _recorded(out, storage_options, plan.source, plan.size, options, scorer_version,
                                      fleet_tag)):
                return skipped
        return plan
    except RunFailed:
        raise
    except LitmusReviewError as exc:
        raise RunFailed(str(exc)) from None
    except Exception as exc:  # a storage backend's own (credentials, endpoint), located by the file
        raise RunFailed(f"{source}: cannot read: {error_message(exc)}") from None


def _recorded(out: str, storage_options: dict, source: str, size: int | None, options: dict,
              scorer_version: str, fleet_tag: str = "") -> RunResult | None:
    """A skipped result for a run the table at ``out`` holds from the same source, size, options
    and scorer version (its record, written when it was published), or a done one when this
    fleet (``fleet_tag``) published it; None otherwise. ``size`` None: asked of the run's
    storage only when a record is found (one request each)."""
    fs, base = file_system(out, storage_options, WRITE_PROTOCOLS)
    try:
        # A range from 0: one request (s3fs asks an object's size first when no range is given)
        record = json.loads(fs.cat_file(join_url(base, RUNS_DIR, record_name(source)), start=0))
    except FileNotFoundError:
        return None
    except ValueError:  # a record begun by a worker that died (a table written before write_whole)
        return None  # not a record: the run is scored again and its publish writes one whole
    if not isinstance(record, dict):
        return None
    if record.get("options") != options or record.get("scorer_version") != scorer_version:
        return None
    if size is None:
        run_fs, path = file_system(absolute_location(source), storage_options)
        try:
            size = run_fs.size(path)
        except FileNotFoundError:  # planned as any run, and reported so
            return None
    if record.get("size") != size:
        return None
    if fleet_tag and record.get("fleet") == fleet_tag:
        return RunResult(None, record["run_key"], [], [], 0, source=source, status=DONE,
                         note="published by this fleet before its task's worker died", recorded=record["summary"])
    return RunResult(None, record["run_key"], [], [], 0, source=source, status=SKIPPED, note="already in the table",
                     recorded=record["summary"])


SMALL_RUN_BYTES = 1 << 20
"""A run on an object store of at most this size (and at most one block) is read whole, in one
request, by the task that plans and scores it: its size, header, blocks and content hash then
cost no more requests (a fleet of small runs is bound by requests, not bytes)."""


def fetch_small(url: str, storage_options: dict, into: str, most: int = SMALL_RUN_BYTES) -> str | None:
    """The run at ``url``, when it is on an object store and at most ``most`` bytes, copied into
    the folder ``into`` with one ranged read; the copy's path. None otherwise (a larger run, a
    local one, or a read that failed: the run is then read where it is, and any failure reported
    there, located as ever). A larger run costs one read of ``most + 1`` bytes for nothing."""
    try:
        fs, fpath = file_system(absolute_location(url), storage_options)
        if not is_object_store(fs) or most <= 0:
            return None
        data = fs.cat_file(fpath, start=0, end=most + 1)
    except Exception as exc:  # reported by the read where the run is
        if unreachable(exc):  # asked again, the run's read would wait as long for the same answer
            raise InputError(f"cannot read: {unreachable_message()}", source=url) from exc
        return None
    if len(data) > most:
        return None
    copy = None
    try:
        fd, copy = tempfile.mkstemp(dir=into, suffix=".run")  # its own name: a run given twice is two copies
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
    except OSError:  # the worker's temp disk is full or read-only: read where the run is
        if copy is not None:
            with contextlib.suppress(OSError):
                os.remove(copy)
        return None
    return copy


@dataclass(frozen=True, slots=True)
class Fleet:
    """What every run of a fleet is planned, scored and published with (sent with each task)."""

    storage_options: dict
    auto_payloads: bool
    request: ScoringRequest
    """What every run is scored under (a run's own side log is given with the run)."""
    scorer_version: str
    out: str | None
    replace: bool
    block_bytes: int
    part_bytes: int = PART_BYTES
    fresh: bool = False
    """``out`` was created by this fleet: no earlier files of any run key are there to replace."""
    tag: str = ""
    """The fleet's id (``score_runs``): each run's record names the fleet that published it."""

    @property
    def options(self) -> dict:
        """What a run's record must match to be skipped by a retry (``ScoringRequest.stored``)."""
        return self.request.stored()

    @property
    def reclassifier(self) -> str | None:
        return self.request.reclassifier


PLAN_BATCH = 64
"""At most this many runs are planned (and, when small, scored) by one task: a fleet of 10,000
small files is about 160 tasks, not 10,000, and never fewer than four a worker."""


def plan_batch_size(runs: int, workers: int, most: int = PLAN_BATCH) -> int:
    """Runs per planning task: at most ``most``, and small enough that every worker gets about
    four tasks (a few runs of a small fleet are one task each)."""
    return max(1, min(most, -(-runs // max(1, 4 * workers))))


PLAN_THREADS = 8
"""Runs of a batch planned at once by its task (threads: planning waits on storage, a few
requests a run, and holds no large buffer); scoring then runs one after another."""


def _planned(item: str | RunPlan, payloads: str | None, fleet: Fleet, fetch_into: str | None) -> Any:
    """``plan_task`` with the fleet's settings (a small run fetched into ``fetch_into``)."""
    return plan_task(item, fleet.storage_options, payloads, fleet.auto_payloads, fleet.request,
                     fleet.scorer_version, fleet.out, fleet.replace, fetch_into=fetch_into,
                     fetch_most=min(SMALL_RUN_BYTES, fleet.block_bytes), fresh=fleet.fresh, fleet_tag=fleet.tag)


def _planned_or_failed(item: str | RunPlan, payloads: str | None, fleet: Fleet, fetch_into: str | None) -> Any:
    """``_planned``, a ``RunFailed`` returned, not raised."""
    try:
        return _planned(item, payloads, fleet, fetch_into)
    except RunFailed as exc:
        return detached(exc)


def plan_batch(items: Sequence[tuple[str | RunPlan, str | None]], fleet: Fleet,
               fetch_into: str | None = None) -> list[Any]:
    """``plan_task`` for a batch of runs (each: the run, its side log), on a worker,
    ``PLAN_THREADS`` at once: per run its plan, its skipped result, or its ``RunFailed``."""
    if len(items) == 1:
        return [_planned_or_failed(items[0][0], items[0][1], fleet, fetch_into)]
    with concurrent.futures.ThreadPoolExecutor(min(PLAN_THREADS, len(items))) as pool:
        return list(pool.map(lambda it: _planned_or_failed(it[0], it[1], fleet, fetch_into), items))


@travels
def start_batch(items: Sequence[tuple[str | RunPlan, str | None, str | None]], fleet: Fleet) -> list[Any]:
    """A batch of runs (each: the run, its side log, its staging folder) on a worker: planned
    (``plan_batch``), then each run that fits one task scored and published (``run_small``), one
    after another. Per run its plan, its result, or, for a run that failed, its ``RunFailed``
    (the others of the batch go on). An error outside any run (a worker lost) fails the batch,
    which Dask retries; the client then starts its runs one task each."""
    out: list[Any] = []
    with tempfile.TemporaryDirectory(prefix="litmus-runs-") as fetched:
        planned = plan_batch([(i[0], i[1]) for i in items], fleet, fetched)
        for (_item, _payloads, staging), got in zip(items, planned, strict=True):
            try:
                out.append(run_small(got, staging, fleet) if isinstance(got, RunPlan) else got)
            except RunFailed as exc:
                out.append(detached(exc))
    return out


@travels
def start_run(item: str | RunPlan, payloads: str | None, staging: str | None,
              fleet: Fleet) -> RunPlan | RunResult | RunFailed:
    """A run's first task, on a worker: ``plan_task``, then ``run_small``. A run the planner
    refuses (not a regular file, a format no importer reads, no such file, its storage
    unreachable...) is returned as its ``RunFailed``, as ``plan_batch`` returns it: an answer,
    not a task that failed (Dask would log its traceback on the worker's terminal and run it
    again for the same answer)."""
    with tempfile.TemporaryDirectory(prefix="litmus-runs-") as fetched:
        got = _planned_or_failed(item, payloads, fleet, fetched)
        return run_small(got, staging, fleet) if isinstance(got, RunPlan) else got


def run_small(plan: RunPlan, staging: str | None, fleet: Fleet) -> RunPlan | RunResult:
    """A planned run that fits one task (one block, or a format that cannot be split) scored,
    settled and, with a table, published here: one task for a small run, where a fleet of many
    small files would otherwise pay seven. A larger run's plan is returned: the client submits
    its blocks. In a table this fleet created, the run's files are written straight into the
    table (nothing of its run key is there to replace; its record, written last, marks it
    published); otherwise under ``staging`` and published from there."""
    so, scorer_version, options, out = fleet.storage_options, fleet.scorer_version, fleet.options, fleet.out
    block_bytes, reclassifier = fleet.block_bytes, fleet.reclassifier
    if not (plan.whole or plan.size - plan.header_end <= block_bytes):
        return dataclasses.replace(plan, read_from=None)  # its blocks are read where the run is
    record = {"source": plan.source, "size": plan.size, "options": options, "scorer_version": scorer_version,
              "fleet": fleet.tag}
    with_table = staging is not None and out is not None
    direct = with_table and fleet.fresh
    table = (absolute_location(str(out)) if direct else staging) if with_table else None
    try:
        if plan.whole:
            final = finish_whole(plan, score_whole(plan, reclassifier), reclassifier, aggregates=with_table,
                                 table=table,
                                 final_table=absolute_location(out) if out is not None and with_table else None,
                                 storage_options=so)
            written = [final.rows]
        else:
            bounds = block_bounds(plan, block_bytes)
            blocks = [score_block(plan, s, e, reclassifier, i) for i, (s, e) in enumerate(bounds)]
            final = finish_run(plan, file_sha256(plan, *blocks), reclassifier, *map(digest, blocks),
                               aggregates=with_table,
                               table=table, storage_options=so)
            written = [write_part(b, final, i, table, so, plan.url) for i, b in enumerate(blocks)] \
                if table is not None else []
    except BlockFailed as exc:
        _i, rel, at, message = exc.where
        raise RunFailed(f"{plan.source}:{plan.first_line + rel}: the block starting at byte {at:,} failed: "
                        f"{message}") from None
    if with_table:
        assert staging is not None and out is not None
        final = publish_run(final, staging, out, so, record, *written, part_bytes=fleet.part_bytes, staged=not direct)
    return dataclasses.replace(final, source=plan.source)


def score_runs(paths: Sequence[str | RunPlan], client, request: ScoringRequest | None = None, *,
               out: str | None = None, block_bytes: int = BLOCK_BYTES, storage_options: dict | None = None,
               payloads: Sequence[str | None] | None = None, auto_payloads: bool = False,
               retries: int = 1, fail_fast: bool = False, replace: bool = False,
               on_event: Callable[[RunResult | None, Progress], None] | None = None,
               part_bytes: int = PART_BYTES, plan_batch: int | None = None,
               **options: Unpack[SharedOptions]) -> list[RunResult]:
    """Score a fleet of runs on ``client``'s cluster (any ``distributed.Client``: a LocalCluster,
    Coiled, dask-kubernetes, dask-jobqueue, TLS included) and return one ``RunResult`` per
    input, in order, each ``done``, ``failed`` (``error`` names its file, and line where known)
    or ``skipped``.

    Every run is scored as ``request`` (or ``options``) asks. ``paths``: local paths, fsspec
    URLs or ``plan_run`` plans; they are planned by tasks on the workers, ``plan_batch`` runs a
    task (default ``plan_batch_size``: up to ``PLAN_BATCH``), and a run that fits one task is
    scored and published by it too. With ``out``, each run's rows are
    gathered into Parquet parts of about ``part_bytes``. Every task is submitted with ``retries``
    (a transient failure is retried), and a run that still fails fails alone: the others' results
    are kept (``fail_fast``: the first failure cancels the rest, reported skipped). A run that
    ends with Dask's ``KilledWorker`` (its task, or one beside it, was on every worker that died)
    fails at once only when it is the fleet's one such run; else each is retried alone once the
    rest has ended, and fails only if it ends its worker again. With ``out`` (a directory or
    URL), each run is written under ``out/_staging`` and published into the table once
    complete; a run published there before from the same source, size and options is skipped
    (``replace``: scored again), unless this fleet published it (a task run again after its
    worker died): that run is done, its result read from its record.
    ``payloads``: per run, its side log, None (with ``auto_payloads``, looked for beside it by
    its task) or ``NO_SIDE_LOG`` (known to have none). ``on_event`` is called with each run's
    result as it ends (None: progress only) and the
    fleet's ``Progress``. Raises ``EngineError`` only for the fleet as a whole (workers of
    another scorer version, an output that cannot be written)."""
    from dask.distributed import as_completed  # optional: the dask extra

    request = ScoringRequest.of(request, **options)
    if request.payloads is not None:  # it would be joined to every run, even one known to have none
        raise EngineError("a fleet's side logs are given per run (payloads=[...]), not in its request")
    so = dict(storage_options or {})
    check_workers(client)
    version = score.SCORER_VERSION
    created = prepare_out(out, so, replace=replace) if out else False
    reclassifier = request.reclassifier
    sides = list(payloads) if payloads is not None else [None] * len(paths)
    if len(sides) != len(paths):
        raise EngineError(f"{len(sides)} side logs given for {len(paths)} runs")
    results: list[RunResult | None] = [None] * len(paths)
    fleet_id = uuid.uuid4().hex  # in each run's record: the runs this fleet published
    tag = fleet_id[:8]
    attempt = {"tag": tag}  # in the tasks' keys: a run retried alone gets new ones
    spec = Fleet(so, auto_payloads, request, version, out, replace, block_bytes, part_bytes, fresh=created,
                 tag=fleet_id)
    counts = {"blocks": 0, "blocks_done": 0}
    run_blocks: dict[int, list[int]] = {}  # input index -> [its blocks, those done], while it may be retried
    pending: dict[str, tuple[str, list[int]]] = {}  # future key -> (stage, input indices)
    held: dict[int, dict] = {}  # input index -> its plan and futures, until it ends
    suspects: dict[int, str] = {}  # input index -> why, for a run that ended with KilledWorker (see below)
    ac = as_completed()

    ended: collections.Counter[str] = collections.Counter()  # kept as runs end: a fleet of 10,000 is not counted
    # again at each of its 10,000 ends

    def progress() -> Progress:
        return Progress(len(paths), ended[DONE], ended[FAILED], ended[SKIPPED], counts["blocks"],
                        counts["blocks_done"])

    def block_done(i: int, future) -> None:
        if future.status == "finished":  # not one cancelled
            counts["blocks_done"] += 1
            run_blocks.setdefault(i, [0, 0])[1] += 1

    def add_blocks(i: int, n: int, done: int = 0) -> None:
        counts["blocks"] += n
        counts["blocks_done"] += done
        tally = run_blocks.setdefault(i, [0, 0])
        tally[0] += n
        tally[1] += done

    def end(i: int, res: RunResult) -> None:
        if (before := results[i]) is not None:
            ended[before.status] -= 1
        results[i] = res
        ended[res.status] += 1
        held.pop(i, None)
        if on_event is not None:
            on_event(res, progress())

    def source_of(i: int) -> str:
        item = paths[i]
        return item.source if isinstance(item, RunPlan) else str(item)

    def staging_of(i: int) -> str | None:
        return None if out is None else join_url(out, STAGING_DIR, f"{attempt['tag']}-{i}")

    def submit(indices: list[int]) -> None:
        """One task plans (and, when small, scores) the runs at ``indices``; one run: ``start_run``."""
        items = [(paths[i], sides[i], staging_of(i)) for i in indices]
        key = attempt["tag"]
        if len(indices) == 1:
            f = client.submit(start_run, *items[0], spec, key=f"litmus-plan-{key}-{indices[0]}", retries=retries,
                              pure=False)
        else:
            f = client.submit(start_batch, items, spec, key=f"litmus-batch-{key}-{indices[0]}", retries=retries,
                              pure=False)
        pending[f.key] = ("plan", indices)
        ac.add(f)

    def stop_all() -> None:
        ac.clear()
        client.cancel([f for h in held.values() for f in h.get("futures", [])])

    def started(i: int, got: RunPlan | RunResult) -> None:
        """A run's first task came back: skipped or done there, or its blocks to submit."""
        if isinstance(got, RunResult) and got.status == SKIPPED:  # already in the table
            end(i, got)
            return
        if isinstance(got, RunResult):  # a small run, done in its first task
            add_blocks(i, 1, 1)
            finished(i, got)
            return
        tail, h = _submit_run(client, got, f"{attempt['tag']}-{i}", block_bytes, reclassifier, staging_of(i), out,
                              so, {"source": got.source, "size": got.size, "options": spec.options,
                                   "scorer_version": version, "fleet": fleet_id}, retries, part_bytes)
        for d in h["digests"]:
            d.add_done_callback(functools.partial(block_done, i))
        add_blocks(i, max(1, len(h["digests"])))
        if got.whole:
            h["final"].add_done_callback(functools.partial(block_done, i))
        held[i] = h
        pending[tail.key] = ("run", [i])
        ac.add(tail)
        if on_event is not None:
            on_event(None, progress())

    def finished(i: int, got: RunResult) -> None:
        res = dataclasses.replace(got, source=got.source or source_of(i), status=DONE)
        if res.evaluation is not None and res.evaluation.scorer_version != version:
            res = dataclasses.replace(res, status=FAILED, evaluation=None,
                                      error=f"{res.source}: scored by a worker of scorer "
                                            f"{res.evaluation.scorer_version}, not this client's {version}")
        end(i, res)

    def failed(i: int, error: str) -> None:
        error = seen_from_the_client(error, source_of(i), so)
        end(i, RunResult(None, None, [], [], 0, source=source_of(i), status=FAILED, error=error))

    def suspect(i: int, error: str) -> None:
        """A run that ended with KilledWorker: its other tasks cancelled, its blocks uncounted
        (a retry counts them again), judged when the fleet has ended."""
        client.cancel(held.pop(i, {}).get("futures", []))
        n, done = run_blocks.pop(i, [0, 0])
        counts["blocks"] -= n
        counts["blocks_done"] -= done
        suspects[i] = error

    def drain(alone: bool) -> bool:
        """Gather the submitted tasks until none is left (``alone``: a run retried alone, whose
        KilledWorker fails it); whether ``fail_fast`` stopped the fleet."""
        stopped = False
        for future in ac:
            stage, indices = pending.pop(future.key)
            if stopped:
                continue
            if future.status != "finished" and len(indices) > 1:  # a batch lost as a whole: its runs one task each
                future.release()
                for i in indices:
                    submit([i])
                continue
            if future.status != "finished":
                (i,) = indices
                h = held.get(i, {})
                error = _located(future, h.get("plan"), h.get("digests", []), source_of(i), block_bytes)
                killed = _ended_its_worker(future)
                future.release()
                if killed and not alone:
                    suspect(i, error)
                    continue
                failed(i, error)
                if fail_fast:
                    stopped = True
                    stop_all()
                continue
            got = future.result()
            future.release()
            outcomes = got if len(indices) > 1 else [got]
            for i, outcome in zip(indices, outcomes, strict=True):
                if isinstance(outcome, RunFailed):
                    failed(i, outcome.message)
                    stopped = stopped or fail_fast
                elif stopped and isinstance(outcome, RunPlan):  # --fail-fast: its blocks are not started
                    continue
                elif stage == "plan":
                    started(i, outcome)
                else:
                    finished(i, outcome)
            if stopped:
                stop_all()
        return stopped

    workers = len(client.scheduler_info().get("workers", {})) if plan_batch is None else 0
    size = plan_batch if plan_batch is not None else plan_batch_size(len(paths), workers)
    for at in range(0, len(paths), max(1, size)):
        submit(list(range(at, min(at + size, len(paths)))))
    stopped = drain(alone=False)
    # A task that ends the worker running it (a crash in native code, the OOM killer) ends with
    # KilledWorker, and so may a task of another run that sat on that worker each time it died
    # (Dask counts every task a dead worker held as suspect). The culprit's run is always among
    # them: when it is the only one, it fails; else each is retried alone, one after another,
    # once the rest of the fleet has ended (no culprit beside it), and fails only if it ends its
    # worker again.
    if len(suspects) == 1 and not stopped:
        failed(*suspects.popitem())
    elif suspects and not stopped:
        attempt["tag"] = uuid.uuid4().hex[:8]
        for i in sorted(suspects):
            if stopped:
                break
            submit([i])
            stopped = drain(alone=True)
            suspects.pop(i)
    for i in suspects:  # --fail-fast stopped the fleet before they were retried alone
        results[i] = RunResult(None, None, [], [], 0, source=source_of(i), status=SKIPPED,
                               note="not retried alone after a worker died under it: --fail-fast stopped the fleet")
    final = [r if r is not None else RunResult(None, None, [], [], 0, source=source_of(i), status=SKIPPED,
                                               note="not started: --fail-fast stopped the fleet")
             for i, r in enumerate(results)]
    if out is not None:
        finish_table(out, so, final, created)
    return final


def _submit_run(client, plan: RunPlan, tag: str, block_bytes: int, reclassifier: str | None, staging: str | None,
                out: str | None, so: dict, record: dict, retries: int,
                part_bytes: int = PART_BYTES) -> tuple[Any, dict]:
    """One run's tasks; (the future whose end is the run's end, what the client holds of it)."""
    kw = {"retries": retries}
    with_table = staging is not None
    if plan.whole:  # one task reads and scores the file; the final stage writes its rows
        whole = client.submit(score_whole, plan, reclassifier, key=f"litmus-whole-{tag}", **kw)
        final = client.submit(finish_whole, plan, whole, reclassifier, aggregates=with_table, table=staging,
                              final_table=None if out is None else absolute_location(out), storage_options=so,
                              key=f"litmus-final-{tag}", **kw)
        writes: list = []
        digests: list = []
        futures = [whole, final]
    else:
        bounds = block_bounds(plan, block_bytes)
        blocks = [client.submit(score_block, plan, s, e, reclassifier, i, key=f"litmus-block-{tag}-{i}", **kw)
                  for i, (s, e) in enumerate(bounds)]
        digests = [client.submit(digest, b, key=f"litmus-digest-{tag}-{i}", **kw) for i, b in enumerate(blocks)]
        content = client.submit(file_sha256, plan, *digests, key=f"litmus-sha256-{tag}", **kw)  # once they are read
        final = client.submit(finish_run, plan, content, reclassifier, *digests, aggregates=with_table,
                              table=staging, storage_options=so, key=f"litmus-final-{tag}", **kw)
        # In the same graph: a block's rows are dropped once its part is written (or, without a
        # table, once its digest is taken: the client holds no block).
        writes = [client.submit(write_part, b, final, i, staging, so, plan.url, key=f"litmus-write-{tag}-{i}", **kw)
                  for i, b in enumerate(blocks)] if with_table else []
        futures = [content, final, *digests, *writes]
        del blocks
    tail = final
    if with_table:
        assert staging is not None and out is not None
        rows = writes if not plan.whole else [client.submit(_rows_of, final, key=f"litmus-rows-{tag}", **kw)]
        tail = client.submit(publish_run, final, staging, out, so, record, *rows, part_bytes=part_bytes,
                             key=f"litmus-publish-{tag}",
                             **kw)
        futures.append(tail)
    return tail, {"plan": plan, "digests": digests, "futures": futures, "final": final}


@travels
def _rows_of(final: RunResult) -> int:
    """A whole-file run's rows, written by its final stage."""
    return final.rows


def _ended_its_worker(future) -> bool:
    """Whether a failed future ended with KilledWorker (a task of it, or one it waited on, was
    on every worker that died while running it)."""
    from dask.distributed import CancelledError  # optional: the dask extra
    from distributed.scheduler import KilledWorker  # optional: the dask extra

    try:
        return isinstance(future.exception(), KilledWorker)
    except CancelledError:
        return False


def _located(future, plan: RunPlan | None, digests: list, source: str, block_bytes: int) -> str:
    """Why a run failed, located: its file, and for a block its line (the lines of the blocks
    before it, which the client asks for only now)."""
    from dask.distributed import CancelledError  # optional: the dask extra
    from distributed.scheduler import KilledWorker  # optional: the dask extra

    try:
        exc = future.exception()
    except CancelledError:
        return f"{source}: cancelled"
    if isinstance(exc, RunFailed):
        return exc.message
    if isinstance(exc, BlockFailed) and plan is not None:
        shift = plan.first_line
        for d in digests:
            try:
                got = d.result()
            except BlockFailed as first:
                _i, rel, at, message = first.where
                return f"{source}:{shift + rel}: the block starting at byte {at:,} failed: {message}"
            except Exception:
                break
            shift += got.lines
        _i, rel, at, message = exc.where
        return f"{source}: the block starting at byte {at:,} failed: {message}"
    if isinstance(exc, KilledWorker):
        where = _killed_blocks(exc, plan, digests, block_bytes)
        return (f"{source}: a task of this run{where} ended every worker that ran it (out of memory, or a crash "
                "in native code); see the workers' logs")
    return f"{source}: {error_message(exc)}" if exc is not None else f"{source}: failed"


_BLOCK_KEY = re.compile(r"litmus-block-[0-9a-f]+-\d+-(\d+)")
KILLED_BLOCKS_NAMED = 3
"""At most this many of a run's blocks are named by bytes when several ended with KilledWorker."""


def _killed_blocks(exc: BaseException, plan: RunPlan | None, digests: list, block_bytes: int) -> str:
    """Which blocks of a run ended with KilledWorker, by their bytes: the one ``exc`` names and
    any other whose digest has ended so already. When several did, each was on the worker every
    time it died and Dask cannot tell which ended it: all are named, as candidates."""
    if plan is None:
        return ""

    def task(e: BaseException | None) -> str:
        return str(getattr(e, "task", "") or (e.args[0] if e is not None and e.args else ""))

    keys = [task(exc)] + [task(d.exception()) for d in digests if d.status == "error"]
    found = sorted({int(m.group(1)) for k in keys if (m := _BLOCK_KEY.search(k))})
    if not found:
        return ""
    bounds = block_bounds(plan, block_bytes)
    named = [f"{bounds[i][0]:,}–{bounds[i][1]:,}" for i in found[:KILLED_BLOCKS_NAMED]]
    if len(found) == 1:
        return f" (the block of bytes {named[0]})"
    more = f" and {len(found) - len(named)} more" if len(found) > len(named) else ""
    return f" (one of its blocks of bytes {', '.join(named)}{more}: each was on the worker every time it died)"
