"""From a file's bytes to a settled run: the one path every door takes.

``score FILE``, ``import`` (the CLI's and the app's), a workspace's rescore and the Dask
engine's task for a file that cannot be split all come here, and differ only in where the
blocks are scored and where the settled run is written:

1. **convert**: a canonical run is its own canonical lines; any other format is parsed by its
   importer (``importers.parse_run``) and written as canonical lines, the records it refused
   kept with their lines in the original file, and the format's own figures (``format_metrics``)
   computed from what it parsed;
2. **score**: the lines are scored in blocks (``ingest.score_bytes``, one block scorer);
3. **settle**: ``settle.settle`` turns the blocks into the run.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import io
import itertools
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Unpack

from . import rows as codec
from .errors import InputError
from .files import open_regular, read_regular
from .importers import SNIFF_BYTES, canonical, parse_run, sniff_file, sniff_format
from .importers.agentdojo_dir import agentdojo_metrics
from .importers.base import Segment
from .importers.inspect_log import VerdictMap, verdict_summary
from .importers.litmus_log import litmus_metrics
from .importers.tau2 import tau2_metrics, terminations
from .ingest import (
    IMPORT_WORKERS,
    PARALLEL_MIN_BYTES,
    PARALLEL_WINDOW,
    Block,
    block_ranges,
    checked_blocks,
    decode_header,
    pool_map,
    read_header_line,
    scan_canonical,
    score_bytes,
    score_range,
    vouch_for_file,
)
from .model import Rejection, Run, RunHeader
from .recapture import PayloadJoin
from .request import DEFAULT_REQUEST, ScoringOptions, ScoringRequest
from .score import HarnessVerdictClassifier, RuleClassifier, assess_calls, score_trajectory, vouch_for_run
from .settle import BlockDigest, SettledRun, digest, settle


@dataclass(frozen=True, slots=True)
class Converted:
    """A run of another format, parsed and ready to be written as canonical lines."""

    run: Run
    """The parsed run (its header carries the harness's reported figure where the log has one)."""
    format_metrics: dict | None
    terminations: dict | None = None


def replaced_results(run: Run) -> dict | None:
    """Tool results a defence replaced by its marker (the agent never saw the output), counted
    by marker, among the results the run holds; None when there is none. Not a capture gap: the
    call's arguments are whole, and what the agent was shown is what the log holds."""
    results = [c.result for t in run.trajectories for c in t.tool_calls if c.result is not None]
    markers: dict[str, int] = {}
    for r in results:
        if (marker := r.replaced_by_defence) is not None:
            markers[marker] = markers.get(marker, 0) + 1
    if not markers:
        return None
    return {"replaced": sum(markers.values()), "of_results": len(results),
            "trajectories": sum(1 for t in run.trajectories
                                if any(c.result is not None and c.result.replaced_by_defence for c in t.tool_calls)),
            "markers": markers}


def format_metrics(run: Run) -> dict | None:
    """The format's own figures for a parsed run, ``{format: {...}}``: LITMUS's ASR and its
    said/did table, the Inspect verdict map's outcomes; None for a format without any."""
    h, out = run.header, {}
    if h.format == "litmus" and run.trajectories:
        out["litmus"] = dataclasses.asdict(litmus_metrics(run))
    if (replaced := replaced_results(run)) is not None:
        out["replaced_results"] = replaced
    if h.format == "agentdojo" and (dojo := agentdojo_metrics(run)) is not None:
        out["agentdojo"] = dojo
    if h.format == "tau2" and run.trajectories:
        out["tau2"] = tau2_metrics(run)
    if h.format == "inspect" and run.trajectories and (summary := verdict_summary(run)) is not None:
        out["inspect"] = summary
    return out or None


def convert(data: bytes, source: str, fmt: str, verdict_map: VerdictMap | None = None,
            continuations: tuple[Segment, ...] | None = None) -> Converted:
    """Parse a run of format ``fmt`` (not canonical) with its importer. LITMUS's own figure
    (1 − ASR) goes in the header as the harness's reported safe rate when the log reports none,
    so the converted copy keeps it. ``continuations``: the run's further files, when the caller
    has them (None: the importer's, read from beside ``source``)."""
    run = parse_run(data, source, fmt, verdict_map=verdict_map, continuations=continuations)
    metrics = format_metrics(run)
    h = run.header
    asr = (metrics or {}).get("litmus", {}).get("asr")
    if h.reported_safe_rate is None and asr is not None:
        run = dataclasses.replace(run, header=dataclasses.replace(
            h, reported_safe_rate=1 - asr, reported_safe_rate_source="LITMUS 1 − ASR (physical judgement, valid rows)"))
    return Converted(run, metrics, terminations(run) if run.trajectories else None)


def json_line(obj: Any) -> bytes:
    """One JSONL line, UTF-8; a record holding a lone surrogate (not encodable) is written
    with ASCII escapes instead, which read back to the same text."""
    try:
        return (json.dumps(obj, ensure_ascii=False) + "\n").encode("utf-8")
    except UnicodeEncodeError:
        return (json.dumps(obj) + "\n").encode("ascii")


def canonical_lines(run: Run) -> Iterator[bytes]:
    """The canonical lines of a parsed run: its header, then one line per trajectory."""
    return map(json_line, itertools.chain([canonical.dump_header(run.header)],
                                          map(canonical.dump_trajectory, run.trajectories)))


@dataclass(frozen=True, slots=True)
class Scored:
    """A file's blocks, scored, and what settling them needs besides."""

    header: RunHeader
    first_line: int
    blocks: list[Block]
    file_sha256: str
    prior_rejections: tuple[Rejection, ...] = ()
    format_metrics: dict | None = None
    terminations: dict | None = None
    proof_sha256: str | None = None
    """SHA-256 of an Inspect log's proof side log read beside it (it changes the scores)."""
    canonical: bytes | None = None
    """The canonical lines the blocks were scored from, when asked for (``keep_canonical``)."""
    digests: list[BlockDigest] | None = None
    """The blocks' digests, when their rows were not kept (``blocks`` is then empty): memory
    holds a large run's score fields, not its rows."""


def with_read_proof(header: RunHeader, importer: RunHeader) -> RunHeader:
    """``header`` (read from a converted copy's header line, which never carries a proof) with
    the proof side log its importer read and joined, as the importer's own header says (its path
    and the SHA-256 of the bytes it read): the one way a run comes to be shown proven by a proof."""
    return dataclasses.replace(header, proof_source=importer.proof_source, proof_sha256=importer.proof_sha256)


def read_header(fh, source: str, request: ScoringRequest) -> tuple[bytes, RunHeader, int, int]:
    """(header line, parsed header, its line number, offset just after it) of canonical lines;
    the header names ``source`` and the original format (``request.fmt``: the caller has sniffed
    it), and says ``request.require_proof``
    (which the header line never carries: each block is given it)."""
    header_line, first_line, header_end = read_header_line(fh, source)
    header = canonical.parse_header(decode_header(header_line, source, first_line), source)
    # a declared taxonomy_rules classifier of record is checked on the file before any block
    # (on what the file proves by its own standard: the check does not depend on --require-proof)
    header_line, header = vouch_for_file(header_line, header, fh, header_end, first_line)
    return (header_line, dataclasses.replace(header, source=source, format=request.fmt,
                                             require_proof=request.require_proof),
            first_line, header_end)


def score_data(data: bytes, source: str, request: ScoringRequest = DEFAULT_REQUEST, *,
               join: PayloadJoin | None = None, plugin: Any = None, keep_canonical: bool = False) -> Scored:
    """Score a run held in memory (any format), block by block, in this process, as ``request``
    asks. ``join``: its side log, loaded; ``plugin``: its re-classifier, started (``loaded``)."""
    if not data.strip():
        raise InputError("empty file" if not data else "empty file (only white space)", source=source)
    fmt = request.fmt
    if fmt == "auto":
        fmt = sniff_format(data[:SNIFF_BYTES], source)
        request = dataclasses.replace(request, fmt=fmt)
    file_sha = hashlib.sha256(data).hexdigest()
    prior: tuple[Rejection, ...] = ()
    metrics = ends = proof_sha = None
    read_proof: RunHeader | None = None
    if fmt != canonical.NAME:
        conv = convert(data, source, fmt, request.verdict_map)
        data = b"".join(canonical_lines(conv.run))
        prior, metrics, ends = conv.run.rejected, conv.format_metrics, conv.terminations
        read_proof = conv.run.header
        proof_sha = read_proof.proof_sha256 or None  # of the bytes the importer read and joined
    fh = io.BytesIO(data)
    header_line, header, first_line, header_end = read_header(fh, source, request)
    if read_proof is not None:
        header = with_read_proof(header, read_proof)
    blocks = [score_bytes(header_line, source, off, data[off:off + n], join, plugin, request=request)
              for off, n in block_ranges(fh, header_end, len(data))]
    return Scored(header, first_line, blocks, file_sha, prior, metrics, ends, proof_sha,
                  data if keep_canonical else None)


def score_file(path: str | Path, request: ScoringRequest = DEFAULT_REQUEST, *, join: PayloadJoin | None = None,
               plugin: Any = None, keep_rows: bool = True) -> Scored:
    """Score a run file as ``request`` asks (``join``, ``plugin``: as ``score_data``): a canonical
    one is read block by block (on two cores when it is large and nothing else joins in), any
    other format whole, through its importer. Without ``keep_rows`` only the blocks' digests are
    kept."""
    path = Path(path)
    if path.is_dir():
        raise InputError("is a folder, expected a run file", source=str(path))
    fmt = request.fmt
    if fmt == "auto":
        fmt = sniff_file(path)
    if fmt != canonical.NAME:
        return score_data(read_regular(path), str(path), dataclasses.replace(request, fmt=fmt), join=join,
                          plugin=plugin)
    source = str(path)
    try:
        with open_regular(path) as fh:
            size = fh.seek(0, io.SEEK_END)
            fh.seek(0)
            raw_line, first_line, header_end = read_header_line(fh, source)
            parsed = canonical.parse_header(decode_header(raw_line, source, first_line), source)
            ranges = list(block_ranges(fh, header_end, size))
            # one read hashes the file, range by range, and checks declared taxonomy_rules on those bytes
            scan = scan_canonical(fh, source, size, raw_line, first_line, header_end, parsed, ranges=ranges,
                                  whole=True)
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror or exc}", source=source) from exc
    header_line = scan.header_line
    header = dataclasses.replace(scan.header, source=source, format=fmt, require_proof=request.require_proof)
    if join is None and plugin is None and IMPORT_WORKERS > 1 and size >= PARALLEL_MIN_BYTES:
        work = ((header_line, source, source, off, n, None, None, request) for off, n in ranges)
        scoring: Iterator[Block] = pool_map(score_range, work, IMPORT_WORKERS, window=PARALLEL_WINDOW)
    else:
        scoring = (score_range(header_line, source, source, off, n, pay=join, reclassifier=plugin,
                               request=request)
                   for off, n in ranges)
    # every block must have read the bytes the scan checked and hashed: a file rewritten in between
    # is refused (a located InputError), never scored under the check and hash of its earlier bytes
    scoring = checked_blocks(scoring, scan, source, first_line)
    if keep_rows:
        return Scored(header, first_line, list(scoring), scan.sha256)
    return Scored(header, first_line, [], scan.sha256, digests=[digest(b) for b in scoring])


def score_parsed(run: Run, request: ScoringRequest = DEFAULT_REQUEST, *, join: PayloadJoin | None = None,
                 plugin: Any = None) -> Scored:
    """Score a run already parsed (in memory) as one block, by the block scorer's typed path
    (``score.assess_calls`` and ``score.score_trajectory``, rows by ``rows.encode``): what its
    objects hold is scored as they hold it (a payload already joined from a side log, say, which
    a canonical copy would not keep). Line numbers are the trajectories' positions. A declared
    taxonomy_rules classifier of record is checked on the run's own trajectories first
    (``score.vouch_for_run``), as the file doors check the file."""
    rules, harness = RuleClassifier(run.header.taxonomy), HarnessVerdictClassifier()
    run = vouch_for_run(run, rules, harness)
    header = dataclasses.replace(run.header, require_proof=request.require_proof)
    if plugin is not None:
        plugin.known = frozenset(c.id for c in header.taxonomy)
    share = join.share() if join is not None else None
    rows = []
    for line, t in enumerate(run.trajectories, start=1):
        if share is not None:
            t = share.apply(t)
        captures = assess_calls(t, header)
        rows.append(codec.encode(t, score_trajectory(t, header, rules, harness, captures, plugin), line, 0, 0,
                                 captures))
    block = Block(rows, [], len(rows), len(rows), 0, share.outcomes if share is not None else None)
    return Scored(header, 0, [block], run.content_sha256, run.rejected, format_metrics(run),
                  terminations(run) if run.trajectories else None)


def settle_scored(scored: Scored, request: ScoringRequest = DEFAULT_REQUEST, *,
                  join: PayloadJoin | None = None) -> SettledRun:
    """``settle.settle`` over a file's scored blocks (scored as ``request`` asked, with ``join``)."""
    digests = scored.digests if scored.digests is not None else [digest(b) for b in scored.blocks]
    return settle(scored.header, digests, file_sha256=scored.file_sha256,
                  first_line=scored.first_line, prior_rejections=scored.prior_rejections, side_log=join,
                  request=request, format_metrics=scored.format_metrics, terminations=scored.terminations,
                  proof_sha256=scored.proof_sha256)


@contextlib.contextmanager
def loaded_classifier(spec: str | None) -> Iterator[Any]:
    """The re-classifier of ``spec`` started for the duration (None: none)."""
    if spec is None:
        yield None
        return
    from .classifiers import load_classifier  # optional: starts a plugin only when one is given

    with load_classifier(spec) as plugin:
        yield plugin


@contextlib.contextmanager
def loaded(request: ScoringRequest) -> Iterator[tuple[PayloadJoin | None, Any]]:
    """(the request's side log loaded, its re-classifier started) for the duration."""
    join = PayloadJoin(request.payloads) if request.payloads is not None else None
    with loaded_classifier(request.reclassifier) as plugin:
        yield join, plugin


def settle_file(path: str | Path, request: ScoringRequest | None = None, *, keep_rows: bool = True,
                **options: Unpack[ScoringOptions]) -> tuple[SettledRun, Scored]:
    """A run file, scored as ``request`` (or ``options``) asks and settled (the ``score FILE``
    door); the scored blocks beside it."""
    request = ScoringRequest.of(request, **options)
    with loaded(request) as (join, plugin):
        scored = score_file(path, request, join=join, plugin=plugin, keep_rows=keep_rows)
    return settle_scored(scored, request, join=join), scored
