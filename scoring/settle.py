"""Settling a run: the one function that turns a run's scored blocks into the run every door
reports (``score FILE``, ``import``, the app's import and the Dask engine's final task).

::

     bytes ──importer──▶ canonical lines ──score blocks──▶ Block ──digest──▶ BlockDigest
                          (pipeline.convert)  (ingest, in-process,        (ids, lines, calls,
                                               worker processes, Dask)     score fields)
                                                                               │
                                                                           settle() ──▶ SettledRun
                                                                                          │
                                         workspace rows (SQLite) ◀── drops, shifts ──▶ Parquet parts

A rule about a whole run lives here and nowhere else:

- **line numbers**: a block counts its lines from 1; the run's are a prefix sum of the blocks'
  line counts after the header's line;
- **duplicate ids**: two or more records with one id are all refused, within a block or across
  blocks (neither copy is preferred: the file does not say which is right); the first copy's
  rejection names the second's line, every later copy's names the first's;
- **the run key**: ``request.ScoringRequest.run_key`` of the request the run was scored under;
- **the side log's report**: each block applies the payloads of its own trajectories to a fresh
  share of the side log; the first block to take a payload owns it, a payload taken by a record
  that was refused is refused with it, the ones no call took are refused by ``PayloadJoin``;
- **the counts** (trajectories, tool calls, records seen, records rejected) and the score
  columns, over the rows that are stored;
- **the rejections listed**: the first ``REJECTIONS_LISTED`` in line order, the rest counted
  (``rejected_count``): a flood of a million bad one-byte records costs a count, not a million
  messages in memory, in ``score --json``, in the workspace's runs row and on the terminal.

It reads digests, not rows, so the Dask engine runs it on a worker with only the score fields
of each block travelling, and the workspace writer with its rows spooled on disk.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from .aggregate import ScoreColumns
from .importers._common import duplicate_message
from .model import Rejection, RunHeader
from .recapture import PayloadJoin, RecaptureReport
from .request import AUTO_FORMAT, DEFAULT_REQUEST, ScoringRequest
from .rows import COL, ROW_COLUMNS, SCORE_FIELDS, SCORE_INDEX
from .score import SCORER_VERSION

_ID, _LINE, _CALLS = COL["trajectory_id"], COL["line"], COL["tool_call_count"]

REJECTIONS_LISTED = 1_000
"""How many of a run's rejected records are kept and shown one by one (the first, in line
order); past it they are counted, and every place that lists them ends "and M more". The one
cap: a block keeps no more (``ingest``), a run settles no more, the workspace stores no more,
``score --json`` and the pages list no more."""


def listed(rejections: Iterable[Rejection]) -> list[Rejection]:
    """The rejections a run keeps: the first ``REJECTIONS_LISTED`` of them in line order."""
    return sorted(rejections, key=lambda r: (r.line is None, r.line or 0))[:REJECTIONS_LISTED]


def unlisted_note(count: int, listed_: int, what: str = "rejected records") -> str | None:
    """The line that ends a list of ``listed_`` rejections of ``count``: "and M more", or None
    when every one is listed."""
    more = count - listed_
    return f"… and {more:,} more {what} (the first {listed_:,} of {count:,} are listed)" if more > 0 else None


@dataclass(frozen=True, slots=True)
class BlockDigest:
    """What ``settle`` reads of one scored block: its score fields, not its rows."""

    lines: int
    """How many lines the block spans."""
    seen: int
    """Records in the block (scored or rejected)."""
    rejected: list[Rejection]
    """The block's first rejections (``REJECTIONS_LISTED`` at most), lines counted from the
    block's first line; the block rejected ``seen - len(ids)`` records in all."""
    ids: list[str]
    rel_lines: list[int]
    calls: list[int]
    fields: list[list]
    """``rows.SCORE_FIELDS`` as columns."""
    recapture: list[tuple] | None = None
    """What the block's share of the side log did: ``(trajectory id, call index, payload line,
    refusal message or None)`` per payload a trajectory of the block took."""
    error: tuple[int, int, str] | None = None
    """(line within the block, byte offset, message) of a block that raised (the Dask engine)."""
    span: tuple[int, int, bytes] | None = None
    """(offset, length, SHA-256) of the bytes the block scored (``ingest.Block.span``): the Dask
    engine's hash of the run checks the blocks read the bytes it hashes."""


def digest(block: Any) -> BlockDigest:
    """The digest of an ``ingest.Block``."""
    # One transpose in C (zip) rather than a Python pass per column: a million-call import
    # digests about 200 k rows.
    cols = list(zip(*block.rows, strict=True)) if block.rows else [()] * len(ROW_COLUMNS)
    return BlockDigest(
        lines=block.lines, seen=block.seen, rejected=list(block.rejected),
        ids=list(cols[_ID]), rel_lines=list(cols[_LINE]), calls=list(cols[_CALLS]),
        fields=[list(cols[i]) for i in SCORE_INDEX], recapture=block.recapture, span=getattr(block, "span", None))


@dataclass(frozen=True, slots=True, kw_only=True)
class SettledRun:
    """A run as every door reports and stores it."""

    header: RunHeader
    run_key: str
    file_sha256: str
    """SHA-256 of the input file's bytes (what ``sha256sum`` prints)."""
    records_seen: int
    rejected: tuple[Rejection, ...]
    """The first ``REJECTIONS_LISTED`` records not scored, in line order (conversion, parse and
    duplicate rejections)."""
    rejected_count: int
    """How many records were not scored (``records_seen - trajectories``), listed or not."""
    trajectories: int
    tool_calls: int
    fields: list[list]
    """The stored rows' ``rows.SCORE_FIELDS``, one list per field, in file order."""
    shifts: tuple[int, ...]
    """Per block: what its relative line numbers are shifted by."""
    drops: tuple[frozenset[int], ...]
    """Per block: indices of its rows that are not stored (duplicate ids)."""
    recapture: RecaptureReport | None = None
    side_log: dict | None = None
    """``{"source", "sha256"}`` of the side log joined, None when none was."""
    reclassifier: str | None = None
    verdict_map: str | None = None
    """The Inspect verdict map applied (its text), None when none was."""
    format_metrics: dict | None = None
    """The format's own figures (LITMUS's ASR, Inspect's verdict outcomes), computed by the
    importer from the original bytes: ``{format: {...}}``."""
    terminations: dict | None = None
    """Counts of each trajectory's recorded ending, for formats that record one (from the importer)."""
    scorer_version: str = SCORER_VERSION

    @property
    def columns(self) -> ScoreColumns:
        return ScoreColumns.build(*self.fields)

    def stored(self, index: int, rows: list[tuple]) -> list[tuple]:
        """Block ``index``'s rows that are stored (line numbers still relative to the block)."""
        drop = self.drops[index]
        return [r for i, r in enumerate(rows) if i not in drop] if drop else rows


def settle(header: RunHeader, digests: Sequence[BlockDigest], *, file_sha256: str, first_line: int,
           prior_rejections: Sequence[Rejection] = (), side_log: PayloadJoin | None = None,
           request: ScoringRequest = DEFAULT_REQUEST, format_metrics: dict | None = None,
           terminations: dict | None = None, proof_sha256: str | None = None) -> SettledRun:
    """The settled run of ``header`` from its blocks' digests, in file order.

    ``first_line``: the header's line (the first block's line 1 is the next line);
    ``prior_rejections``: records refused before the blocks were made (by a format's importer,
    with that file's line numbers: every one of them); ``side_log``: the side log as loaded (nothing applied: each
    block applied a share of it); ``request``: what the run was scored under (its key)."""
    if header.require_proof != request.require_proof:  # the blocks were scored under the header's
        raise ValueError("the header and the request disagree on require_proof")
    if request.fmt == AUTO_FORMAT:  # the header names the format the run was read as
        request = dataclasses.replace(request, fmt=header.format)
    shifts, shift = [], first_line
    for d in digests:
        shifts.append(shift)
        shift += d.lines
    source = header.source
    rejected: list[Rejection] = listed(prior_rejections)
    seen = len(prior_rejections)
    for d, s in zip(digests, shifts, strict=True):
        seen += d.seen
        rejected.extend(r.shifted(s) for r in d.rejected)
    drops: list[set[int]] = [set() for _ in digests]
    refused_ids = _refuse_duplicates(source, digests, shifts, drops, rejected)
    fields: list[list] = [[] for _ in SCORE_FIELDS]
    n_traj = n_calls = 0
    for d, drop in zip(digests, drops, strict=True):
        if not drop:
            for out, col in zip(fields, d.fields, strict=True):
                out.extend(col)
            n_traj += len(d.ids)
            n_calls += sum(d.calls)
            continue
        keep = [i for i in range(len(d.ids)) if i not in drop]
        for out, col in zip(fields, d.fields, strict=True):
            out.extend(col[i] for i in keep)
        n_traj += len(keep)
        n_calls += sum(d.calls[i] for i in keep)
    # Each source listed its first rejections (a block, the importer, the duplicates): the run's
    # first are among them.
    rejected = listed(rejected)
    report = side = None
    if side_log is not None:
        whole = side_log.report_of([d.recapture or [] for d in digests], header.run_id, refused_ids)
        report = dataclasses.replace(whole, rejected=tuple(listed(whole.rejected)), rejected_count=len(whole.rejected))
        side = {"source": side_log.source, "sha256": side_log.content_sha256 or None}
    return SettledRun(
        header=header, file_sha256=file_sha256, records_seen=seen, rejected=tuple(rejected),
        rejected_count=seen - n_traj,
        run_key=request.run_key(file_sha256, side_log_sha256=side_log.content_sha256 if side_log else None,
                                proof_sha256=proof_sha256),
        trajectories=n_traj, tool_calls=n_calls, fields=fields, shifts=tuple(shifts),
        drops=tuple(frozenset(d) for d in drops), recapture=report, side_log=side,
        reclassifier=request.reclassifier, verdict_map=request.keyed_verdict, format_metrics=format_metrics,
        terminations=terminations)


def _refuse_duplicates(source: str, digests: Sequence[BlockDigest], shifts: list[int], drops: list[set[int]],
                       rejected: list[Rejection]) -> set[str]:
    """Every copy of an id held by two or more records goes in ``drops`` and ``rejected``;
    returns those ids. Cheap when there are none (one set of the ids)."""
    every: set[str] = set()
    total = 0
    for d in digests:
        every.update(d.ids)
        total += len(d.ids)
    if len(every) == total:
        return set()
    copies: dict[str, list[tuple[int, int, int]]] = {}
    first: dict[str, tuple[int, int, int]] = {}
    for b, (d, s) in enumerate(zip(digests, shifts, strict=True)):
        for i, tid in enumerate(d.ids):
            where = (b, i, d.rel_lines[i] + s)
            earlier = first.setdefault(tid, where)
            if earlier is not where:
                copies.setdefault(tid, [earlier]).append(where)
    for tid, found in copies.items():
        lines = [line for _b, _i, line in found]
        for n, (b, i, line) in enumerate(found):
            drops[b].add(i)
            rejected.append(Rejection(source=source, line=line, record_id=tid,
                                      message=duplicate_message(tid, lines[1] if n == 0 else lines[0])))
    return set(copies)
