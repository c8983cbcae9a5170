"""Strict scoring of canonical runs on a Dask cluster (``litmus-review score --engine dask``).

The unit of work is the local import's: a block of whole lines, scored by ``ingest.score_bytes``
(one scorer, one set of strict rules). What differs is who reads and who adds up:

- **Reading.** The client reads each run's header line and size, nothing more. Each block task
  is given a nominal byte range ``[start, end)`` and reads it itself, from a local path or any
  fsspec URL (``s3://``, ``gs://``, ``file://``): it owns the lines that *start* inside the
  range, so it skips a partial first line (unless the byte before ``start`` is a newline, or
  ``start`` is the first byte after the header) and reads past ``end`` to finish its last line.
  The client never scans the file for line boundaries.
- **Line numbers.** Each block reports how many lines it spans; the final stage numbers them
  with a prefix sum, so rows and rejections carry the same line numbers as the workspace's.
- **Adding up.** One task per run, on a worker, takes every block's score fields (not its
  rows), settles ids seen in two blocks exactly as the workspace writer does, and calls
  ``aggregate.summarize`` through ``report.Evaluation``: the client receives the ``score --json``
  object and the table text, not the rows.
- **Writing** (``out``). Each block's rows go to a Parquet part written by a worker into a
  temporary directory beside ``out``; the client renames it into place once every part and the
  summaries are written. A block that fails leaves no table: the temporary directory is removed
  and the error names the file and line.

Tasks are pure functions of their inputs, so a block lost with a worker is scored again and
counted once: the totals are computed from block results, never accumulated as a side effect.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import functools
import hashlib
import json
import os
import re
import tempfile
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from . import pipeline, score
from . import rows as rows_codec
from .aggregate import STATUS_CODE, ScoreColumns, by_category, summarize, summarize_by, waterfall
from .errors import BlockFailed, EngineError, InputError, LitmusReviewError, RunFailed
from .files import check_regular
from .importers import SNIFF_BYTES, canonical, formats, sniff_format
from .importers._common import RecordError, decode_json_line
from .importers.inspect_log import VerdictMap
from .ingest import (
    BLOCK_BYTES,
    Block,
    HeaderLine,
    changed_while_scored,
    decode_header,
    read_header_line,
    scan_canonical,
    score_bytes,
)
from .model import Status
from .recapture import SIDE_LOG_SUFFIX, PayloadJoin
from .recapture import side_log_beside as recapture_side_log_beside
from .report import Evaluation
from .rows import ROW_COLUMNS, SCHEMA, SCORE_FIELDS, Column, Encoding
from .settle import BlockDigest, SettledRun, settle
from .settle import digest as settle_digest

LOCAL_WORKERS = 2
"""Workers of the LocalCluster started when no scheduler is given (one thread each: the
scorer holds the GIL)."""
_HASH_CHUNK = 8 * 1024 * 1024
_READ_AHEAD = 64 * 1024
_URL = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*://")
TABLE_DIR = "trajectories"
SUMMARY_FILE = "summary.json"
KEYS_FILE = "run_keys.json"
INDEX_FILE = "index.json"
"""Beside summary.json: per run, in the same order, ``[run key, run id, model]`` (about 100
bytes a run), what the app lists a table's runs by; each run's ``score --json`` object is then
read from ``SUMMARIES_DIR`` when the run is shown (summary.json is about 2.3 KB a run)."""
SUMMARIES_DIR = "summaries"
"""Inside ``out``: each run's ``score --json`` object (``RUN_KEY.json``), written with the run."""
INCONCLUSIVE_DIR = "inconclusive"
"""Beside the table: per run, its Inconclusive trajectories' ids and intended categories (the
only trajectories reviewers' labels apply to), written by the final stage, so the app applies
labels without scanning the run's rows."""
AGGREGATES_FILE = "aggregates.json"
"""In a table of the first layout: every run's aggregates in one list (read by the app when a
table has no ``RUN_AGGREGATES_DIR``). No longer written: at 10,000 runs it was about 800 MB,
written by the client and read whole; each run's are in ``aggregates/RUN_KEY.json``."""


@dataclass(frozen=True, slots=True)
class RunPlan:
    """What the client knows of one run before any block is read."""

    url: str
    """Where the workers read it (a local path made absolute, or the URL as given)."""
    source: str
    """The path as the user gave it (rows, rejections and the summary name it so, as locally)."""
    header_line: bytes
    first_line: int
    """The header's line number."""
    header_end: int
    size: int
    storage_options: dict
    payloads: str | None = None
    """The side log's URL (read by the workers), if one is joined."""
    payloads_source: str | None = None
    """The side log as the user named it."""
    fmt: str = "canonical"
    """The run's format: a canonical run is read in byte-range blocks; any other format, which
    cannot be split, is one task that reads the whole file with its importer (``score_whole``)."""
    verdict_map: str | None = None
    """The Inspect verdict map (its text, as ``VerdictMap.parse`` reads it), if one is given."""
    scorer_version: str = ""
    """The client's scorer version: a task on a worker of another refuses the run."""
    require_proof: bool = False
    """Scored with ``--require-proof`` (each block is given it; the header line never carries it)."""
    rules_check: str = ""
    """What checking a canonical header's declared taxonomy_rules found (``RunHeader.classifier_of_record_check``),
    read once by the planner; empty when nothing was declared."""
    read_end: int = 0
    read_sha256: str = ""
    """SHA-256 of bytes ``[0, read_end)`` as the planner read them (``ingest.scan_canonical``):
    the header, or the whole file where its taxonomy_rules were checked. The run's hash
    (``file_sha256``) must find the same bytes there, and the blocks' own, or the run fails:
    the check, the blocks and the run key then name one version of the file."""
    read_from: str | None = None
    """A copy on the worker's own disk that the run's bytes are read from instead of ``url``
    (a small run fetched whole by the task that plans and scores it: ``fetch_small``); the
    table still names ``url``."""
    payloads_version: str = ""
    """The side log's size and modification mark when the run was planned: a worker's loaded
    copy is used only for the same (a side log rewritten between two fleets is read again)."""

    @property
    def whole(self) -> bool:
        """Scored as one task (a format that cannot be split into blocks of lines)."""
        return self.fmt != "canonical"


@dataclass(frozen=True, slots=True)
class RunResult:
    """The final stage's answer for one run (small: the client gathers it)."""

    evaluation: Any
    """The run's ``report.Evaluation`` without its score columns (they stay on the worker):
    what ``score`` prints, as every door prints it; None for a run that failed."""
    run_key: str | None
    shifts: list[int]
    """Per block: what its relative line numbers are shifted by."""
    drops: list[list[int]]
    """Per block: indices of rows not stored (an id also seen in another block)."""
    rows: int
    error: str | None = None
    error_line: int | None = None
    aggregates: dict | None = None
    """With a table (``aggregates=True``): what the app draws, aggregated here (``AGGREGATES_FILE``)."""
    inconclusive: tuple[list, list, list] | None = None
    """With a table: the Inconclusive trajectories' ids, categories and the harness's claims of
    them (``INCONCLUSIVE_DIR``)."""
    source: str = ""
    """The run as the user named it."""
    status: str = "done"
    """``done``, ``failed`` (``error`` says why, naming the file) or ``skipped`` (``note``)."""
    note: str = ""
    recorded: dict | None = None
    """A skipped run's ``score --json`` object, as recorded when it was published."""

    @property
    def summary(self) -> dict | None:
        """Equal key for key to ``score --json``'s object for the run."""
        return self.recorded if self.evaluation is None else self.evaluation.as_dict()


def block_nbytes(block: Block, sample: int = 32) -> int:
    """Memory a scored block holds, estimated from its first rows (what ``dask.sizeof`` reports
    for it, so a worker spills blocks held for their write instead of counting 48 bytes each)."""
    import sys

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
        from dask.sizeof import sizeof
    except ImportError:  # the dask extra is absent: nothing sizes blocks
        return
    sizeof.register(Block)(block_nbytes)


_teach_sizeof()


# --- reading -------------------------------------------------------------------------------


PROTOCOLS = frozenset({"file", "local", "s3", "s3a", "gs", "gcs", "az", "abfs", "abfss", "hdfs", "http", "https"})
"""The fsspec protocols the engine reads and writes. Any other (``zip://``, ``reference://``,
``data:``, ``memory://``, ``dask://``, ``ftp://``...) and every chained URL (``a::b``) is refused
with a message naming the location: some keep nothing (``memory://``), some read other
locations named inside the URL (``zip://...::data:``), and fsspec's own errors for the rest are
tracebacks, not answers."""
WRITE_PROTOCOLS = PROTOCOLS - {"http", "https"}
"""Where ``--out`` may write (HTTP takes no directory)."""


def protocol(url: str) -> str:
    """The fsspec protocol of a location (``file`` for a local path)."""
    return url.split("://", 1)[0].lower() if _URL.match(url) else "file"


def check_location(url: str, allowed: frozenset[str] = PROTOCOLS, *, what: str = "location") -> None:
    """InputError naming ``url`` unless it is a local path or a URL of an ``allowed`` protocol,
    not chained (checked before fsspec sees it)."""
    if "::" in url:
        raise InputError(f"chained URLs (with '::') are not read; give the {what} as a path or a plain URL",
                         source=url)
    proto = protocol(url)
    if proto not in allowed:
        verb = "written" if allowed is WRITE_PROTOCOLS else "read"
        raise InputError(f"the {proto}:// protocol is not {verb} here (allowed: "
                         f"{', '.join(sorted(allowed - {'local'}))})", source=url)


def _fs(url: str, storage_options: dict, allowed: frozenset[str] = PROTOCOLS):
    import fsspec

    check_location(url, allowed)
    try:
        return fsspec.core.url_to_fs(url, **storage_options)
    except (ImportError, ValueError, TypeError, OSError) as exc:  # a missing backend, a malformed URL
        raise InputError(f"cannot open this location: {type(exc).__name__}: {exc}", source=url) from exc


OBJECT_STORES = frozenset({"s3", "s3a", "gs", "gcs", "az", "abfs", "abfss"})
"""Protocols whose "folders" are only key prefixes: nothing to make before a write (s3fs asks
for the bucket on every ``makedirs``: one request a file written, for nothing)."""


def _object_store(fs) -> bool:
    protocols = fs.protocol if isinstance(fs.protocol, (tuple, list)) else (fs.protocol,)
    return bool(OBJECT_STORES.intersection(protocols))


def _makedirs(fs, path: str) -> None:
    """``fs.makedirs(path, exist_ok=True)`` where a file system has folders."""
    if not _object_store(fs):
        fs.makedirs(path, exist_ok=True)


def _check_regular(fs, fpath: str, source: str) -> None:
    """A local file must be a regular file (a device never ends, a FIFO may block for ever):
    refused before a byte is read, as the local engine refuses them (``files.check_regular``)."""
    from fsspec.implementations.local import LocalFileSystem

    if isinstance(fs, LocalFileSystem) and os.path.exists(fpath):  # a missing file is reported as such by the read
        try:
            check_regular(fpath)
        except InputError as exc:
            raise InputError(exc.message, source=source) from exc


def _url(path: str) -> str:
    return path if _URL.match(path) else os.path.abspath(path)


def plan_run(path: str, storage_options: dict | None = None, payloads: str | None = None, *, fmt: str = "auto",
             verdict_map: str | None = None, require_proof: bool = False, read_from: str | None = None) -> RunPlan:
    """The header line and size of a canonical run (the only bytes the client reads), or the
    format of any other (its first bytes, sniffed as locally); and the side log to join
    (``payloads``; the workers read it). ``require_proof``: as ``--require-proof``;
    ``read_from``: a local copy of ``path`` to read instead (``RunPlan.read_from``)."""
    storage_options = dict(storage_options or {})
    url = _url(path)
    try:
        fs, fpath = _fs(read_from, {}) if read_from is not None else _fs(url, storage_options)
        _check_regular(fs, fpath, path)
        size = fs.size(fpath)
        with fs.open(fpath, "rb") as fh:
            head = fh.read(SNIFF_BYTES)
            if fmt == "auto":
                if not head.strip():
                    raise InputError("empty file" if not head else "empty file (only white space)", source=path)
                fmt = sniff_format(head, path)
            fh.seek(0)
            header_line, first_line, header_end = read_header_line(fh, path) if fmt == canonical.NAME \
                else (b"", 0, 0)
            rules_check, read_end, read_sha = "", 0, ""
            if fmt == canonical.NAME:  # a declared taxonomy_rules classifier of record, checked on the file
                header_line, rules_check, read_end, read_sha = _vouched_line(header_line, fh, size, header_end,
                                                                             first_line, path)
    except FileNotFoundError as exc:
        raise InputError("no such file", source=path) from exc
    except LitmusReviewError:
        raise
    except Exception as exc:  # OSError, or a storage backend's own (botocore's NoCredentialsError...)
        raise InputError(f"cannot read: {type(exc).__name__}: {exc}{_storage_hint(exc)}", source=path) from exc
    if fmt == canonical.NAME:
        obj = decode_header(header_line, path, first_line)
        canonical.parse_header(obj, path)  # a bad header is refused here, before any task runs
    version = ""
    if payloads is not None:
        fs, ppath = _fs(_url(str(payloads)), storage_options)
        try:
            info = fs.info(ppath)
        except FileNotFoundError:
            raise InputError("no such file (the payload side log)", source=str(payloads)) from None
        except Exception as exc:  # OSError, or a storage backend's own
            raise InputError(f"cannot read the payload side log: {exc}", source=str(payloads)) from exc
        _check_regular(fs, ppath, str(payloads))
        version = json.dumps([info.get(k) for k in ("size", "mtime", "ETag", "LastModified", "etag", "generation")],
                             default=str)
    return RunPlan(url, path, header_line, first_line, header_end, size, storage_options,
                   _url(str(payloads)) if payloads is not None else None,
                   str(payloads) if payloads is not None else None, fmt, verdict_map or None,
                   require_proof=require_proof, rules_check=rules_check, read_from=read_from,
                   payloads_version=version, read_end=read_end, read_sha256=read_sha)


def _vouched_line(header_line: bytes, fh, size: int, header_end: int, first_line: int,
                  path: str) -> tuple[bytes, str, int, str]:
    """(the header line the workers read, what the check found, the end and SHA-256 of the bytes
    read): the header read again and a declared taxonomy_rules classifier of record checked on
    the whole file, hashed as it is read (``ingest.scan_canonical``; the client reads such a run
    once more, any other only its header)."""
    obj = decode_header(header_line, path, first_line)
    if not (isinstance(obj, dict) and obj.get("format") == canonical.FORMAT_TAG):
        return header_line, "", 0, ""  # refused below, with its message
    scan = scan_canonical(fh, path, size, header_line, first_line, header_end, canonical.parse_header(obj, path))
    return scan.header_line, scan.header.classifier_of_record_check, scan.end, scan.sha256


def exists(path: str, storage_options: dict | None = None) -> bool:
    """Whether a file is at ``path`` (a local path or fsspec URL). On an object store, one read
    of its first byte: ``isfile`` there asks twice for a missing key (is it a "folder"?)."""
    fs, fpath = _fs(_url(path), dict(storage_options or {}))
    try:
        if _object_store(fs):
            try:
                fs.cat_file(fpath, start=0, end=1)
                return True
            except FileNotFoundError:
                return False
            except Exception:  # an empty object (no byte to range over): asked as a file
                pass
        return fs.isfile(fpath)
    except Exception:  # OSError, or a storage backend's own: the run's own read reports it, located
        return False


_GLOB = re.compile(r"[*?\[]")
NO_SIDE_LOG = ""
"""A run's side log given as this: it is known to have none (a listing of its folder showed
none), so no task asks its storage again."""


def expand_inputs(paths: Sequence[str], manifests: Sequence[str] = (),
                  storage_options: dict | None = None, *, sides: dict[str, str] | None = None) -> list[str]:
    """The runs named by ``paths`` (a path, URL, or glob pattern such as ``s3://b/runs/*.jsonl``:
    one listing, on the client) and by each manifest (a file or URL holding one path or URL a
    line; blank lines and ``#`` comments skipped; a relative path is relative to the manifest's
    folder). Side logs matched by a pattern are left to be paired with their runs. A pattern
    that matches nothing, or an unreadable manifest, is an ``InputError`` naming it. ``sides``,
    when given, is filled for each run a pattern matched: its side log (``side_log_beside``), or
    ``NO_SIDE_LOG``, from one listing of each folder the runs are in (the workers then ask for no
    side log; runs of a manifest are not listed)."""
    so = dict(storage_options or {})
    out: list[str] = []
    for manifest in manifests:
        check_location(manifest, what="manifest")
        fs, mpath = _fs(_url(manifest), so if _URL.match(manifest) else {})  # the options are the URLs'

        try:
            with fs.open(mpath, "rb") as fh:
                text = fh.read().decode("utf-8")
        except FileNotFoundError as exc:
            raise InputError("no such file (the manifest)", source=manifest) from exc
        except UnicodeDecodeError as exc:
            raise InputError(f"the manifest is not UTF-8 text: {exc}", source=manifest) from exc
        except Exception as exc:  # OSError, or a storage backend's own
            raise InputError(f"cannot read the manifest: {_message(exc)}", source=manifest) from exc
        folder = _url(manifest).rsplit("/", 1)[0]
        for n, line in enumerate(text.splitlines(), 1):
            item = line.strip()
            if not item or item.startswith("#"):
                continue
            if "\x00" in item:
                raise InputError("a NUL byte in a path", source=manifest, line=n)
            check_location(item)
            out.append(item if _URL.match(item) or os.path.isabs(item) else _join_url(folder, item))
    for p in paths:
        if not _GLOB.search(p):
            out.append(p)
            continue
        fs, pattern = _fs(_url(p), so if _URL.match(p) else {})
        try:
            found = fs.glob(pattern, detail=True)  # one listing: each match's type comes with it
        except Exception as exc:  # OSError, or a storage backend's own
            raise InputError(f"cannot list this pattern: {_message(exc)}", source=p) from exc
        runs = sorted(f for f, info in found.items() if info.get("type") == "file" and not f.endswith(SIDE_LOG_SUFFIX))
        if not runs:
            raise InputError("no file matches this pattern", source=p)
        url = bool(_URL.match(p))
        out += [fs.unstrip_protocol(f) if url else f for f in runs]
        if sides is not None:
            for run, side in _listed_sides(fs, runs).items():
                sides[fs.unstrip_protocol(run) if url else run] = fs.unstrip_protocol(side) if url and side else side
    return out


def _listed_sides(fs, runs: Sequence[str]) -> dict[str, str]:
    """Each run's side log or ``NO_SIDE_LOG``, by one listing of each folder the runs are in (paths
    as ``fs`` names them); a folder that cannot be listed leaves its runs out (their tasks ask)."""
    found: dict[str, str] = {}
    by_folder: dict[str, list[str]] = collections.defaultdict(list)
    for run in runs:
        by_folder[run.rpartition("/")[0]].append(run)
    for folder, inside in by_folder.items():
        try:
            listing = fs.ls(folder, detail=True)
        except Exception:  # OSError, or a storage backend's own: the tasks ask instead
            continue
        present = {info["name"].rstrip("/") for info in listing if info.get("type") == "file"}
        named = {info["name"].rstrip("/") for info in listing}
        for run in inside:
            side = side_log_beside(run)
            if side in present:
                found[run] = side
            elif side not in named:
                found[run] = NO_SIDE_LOG
            # else something not a plain file bears its name (a folder, a dangling link): its task looks
    return found


def check_storage_options(url: str, storage_options: dict) -> None:
    """``InputError`` naming an option the location's file system does not take (a mistyped
    ``--storage-option`` would otherwise be ignored without a word, or fail on a worker)."""
    import difflib
    import inspect

    import fsspec

    proto = protocol(url)
    if not storage_options or proto == "file":  # the options are for URLs; a local path takes none
        return
    try:
        cls = fsspec.get_filesystem_class(proto)
    except (ImportError, ValueError) as exc:
        raise InputError(f"cannot open this location: {_message(exc)}", source=url) from exc
    known: set[str] = set()
    for klass in cls.__mro__:
        init = klass.__dict__.get("__init__")
        if init is not None:
            known |= {n for n, p in inspect.signature(init).parameters.items()
                      if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    known |= {"skip_instance_cache", "use_listings_cache", "listings_expiry_time", "max_paths"}
    if proto in ("s3", "s3a"):
        known.add("profile")  # s3fs passes it to its botocore session: an AWS profile's credentials
    for key in storage_options:
        if key not in known:
            near = difflib.get_close_matches(key, sorted(known), n=1)
            raise InputError(f"--storage-option {key}: not an option of {proto}:// ({cls.__name__})"
                             + (f"; did you mean {near[0]}?" if near else ""), source=url)


def side_log_beside(path: str) -> str:
    """``recapture.side_log_beside``: the naming rule every door pairs a side log by."""
    return recapture_side_log_beside(path)


def block_bounds(plan: RunPlan, block_bytes: int = BLOCK_BYTES) -> list[tuple[int, int]]:
    """Nominal ``[start, end)`` ranges covering the records (no file access)."""
    starts = range(plan.header_end, plan.size, max(1, block_bytes))
    return [(s, min(s + block_bytes, plan.size)) for s in starts]


def read_owned(fh, start: int, end: int, first: bool) -> tuple[int, bytes]:
    """(offset, bytes) of the whole lines that start in ``[start, end)``; ``first``: ``start``
    is known to begin a line (the byte after the header)."""
    if first:
        begin = start
        fh.seek(start)
        data = fh.read(end - start)
    else:
        fh.seek(start - 1)
        data = fh.read(end - start + 1)
        cut = data.find(b"\n")
        if cut < 0:
            return end, b""  # the whole range lies inside a line an earlier block owns
        begin = start + cut
        data = data[cut + 1:]
    if begin >= end:
        return begin, b""
    # Finish the last line: up to the first newline at or after byte end - 1.
    parts = [data]
    if not data.endswith(b"\n"):
        while True:
            more = fh.read(_READ_AHEAD)
            if not more:
                break
            cut = more.find(b"\n")
            if cut >= 0:
                parts.append(more[:cut + 1])
                break
            parts.append(more)
    return begin, b"".join(parts)


# --- tasks (run on the workers) --------------------------------------------------------------


@functools.lru_cache(maxsize=2)
def _side_log(url: str, source: str, storage_options: str, version: str = ""):
    """A side log as loaded once per worker process (per ``version``: its size and modification
    mark when its run was planned); blocks apply copies of it."""
    fs, path = _fs(url, json.loads(storage_options))
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


def score_block(plan: RunPlan, start: int, end: int, reclassifier: str | None = None, index: int = 0) -> Block:
    """Read and score one nominal range. A block that fails raises ``BlockFailed`` (located by
    its line within the block), so Dask retries it and the run fails alone."""
    _check_version(plan)
    begin, data = start, b""
    try:
        fs, fpath = _run_fs(plan)
        with fs.open(fpath, "rb") as fh:
            begin, data = read_owned(fh, start, end, start == plan.header_end)
        with pipeline.loaded_classifier(reclassifier) as plugin:
            return score_bytes(block_line(plan), plan.source, begin, data, _join(plan), reclassifier=plugin,
                               require_proof=plan.require_proof)
    except Exception as exc:  # reported with its location, never swallowed
        rel, at = _locate(plan, begin, data, reclassifier)
        raise BlockFailed(index, rel, at, _message(exc)) from None


def block_line(plan: RunPlan) -> bytes:
    """The header line a block parses, with what the planner's check of its declared
    taxonomy_rules found (``ingest.HeaderLine``: the blocks honour accepted rules from it alone)."""
    return HeaderLine(plan.header_line, plan.rules_check) if plan.rules_check else plan.header_line


def _run_fs(plan: RunPlan):
    """(file system, path) the run's bytes are read from: its local copy, else where it is."""
    return _fs(plan.read_from, {}) if plan.read_from is not None else _fs(plan.url, plan.storage_options)


def _message(exc: BaseException) -> str:
    return str(exc) if isinstance(exc, LitmusReviewError) else f"{type(exc).__name__}: {exc}"


def _storage_hint(exc: BaseException) -> str:
    """What to do about a storage backend's credentials error (empty for any other)."""
    if "Credentials" in type(exc).__name__ or "credentials" in str(exc).lower():
        return (" (no credentials reached the process that read it: give them as storage options, or in that "
                "process's environment, fsspec or AWS configuration)")
    return ""


CREDENTIAL_VARIABLES = ("AWS_ACCESS_KEY_ID", "AWS_PROFILE", "AWS_SHARED_CREDENTIALS_FILE",
                        "AWS_WEB_IDENTITY_TOKEN_FILE", "GOOGLE_APPLICATION_CREDENTIALS",
                        "AZURE_STORAGE_CONNECTION_STRING", "AZURE_STORAGE_KEY")
"""Where a client's credentials for object storage may come from its environment."""


def seen_from_the_client(error: str, source: str, storage_options: dict) -> str:
    """A run's error from the worker that read it, with what the client sees differently: a
    local path the client has but the workers do not, or credentials in the client's
    environment only (the workers have their own environment; the options travel, the
    environment does not)."""
    if error.endswith(": no such file") and not _URL.match(source) and os.path.isfile(source):
        return (f"{error} on the worker that read it, though this client has it: the workers cannot see this path "
                "(they read a local path on their own machines; give a URL, or a path on a file system they share)")
    here = [v for v in CREDENTIAL_VARIABLES  # a variable naming a file counts where the file is there
            if os.environ.get(v) and (not v.endswith("_FILE") or os.path.isfile(os.environ[v]))]
    if "credentials" in error.lower() and here and not ({"key", "secret", "token", "profile"} & set(storage_options)):
        return (f"{error}. This client has credentials in its environment ({', '.join(here)}), the workers do "
                "not: give them as --storage-option, or set them in the workers' environment")
    return error


SOURCES_DIR = "sources"
"""Beside the table: the canonical copy of each run of a format that cannot be split (its rows'
byte ranges point into it, as a workspace's rows point into its converted copy)."""


def score_whole(plan: RunPlan, reclassifier: str | None = None) -> Any:
    """Score a run of a format that cannot be split, on a worker: the whole file read and taken
    down the local path (``pipeline.score_data``: the same importer, conversion and block
    scorer); its ``pipeline.Scored`` (with the canonical copy). Raises ``RunFailed`` naming
    the file."""
    _check_version(plan)
    try:
        fs, fpath = _run_fs(plan)
        with fs.open(fpath, "rb") as fh:
            data = fh.read()
        verdict_map = VerdictMap.parse(plan.verdict_map) if plan.verdict_map else None
        with pipeline.loaded_classifier(reclassifier) as plugin:
            return pipeline.score_data(data, plan.source, plan.fmt, payloads=_join(plan), verdict_map=verdict_map,
                                       reclassifier=plugin, keep_canonical=True, require_proof=plan.require_proof)
    except Exception as exc:  # reported with its file, never swallowed
        raise RunFailed(f"{plan.source}: {_message(exc)}") from None


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
            raise RunFailed(f"{plan.source}: {_message(exc)}") from None

    return run


@_fails_as_run
def finish_whole(plan: RunPlan, scored: Any, reclassifier: str | None, *, aggregates: bool = False,
                 table: str | None = None, final_table: str | None = None,
                 storage_options: dict | None = None) -> RunResult:
    """The final stage of a whole-file run, on a worker: ``settle.settle`` as for any run; with
    a table, its canonical copy and its rows written there (the rows' ``source`` is the copy
    where the finished table will hold it)."""
    verdict_map = VerdictMap.parse(plan.verdict_map) if plan.verdict_map else None
    settled = pipeline.settle_scored(scored, payloads=_join(plan), verdict_map=verdict_map, reclassifier=reclassifier)
    res = _run_result(settled, aggregates)
    if table is not None and final_table is not None:
        options = storage_options or {}
        fs, base = _fs(table, options)
        _makedirs(fs, f"{base}/{SOURCES_DIR}")
        with fs.open(f"{base}/{SOURCES_DIR}/{settled.run_key}.jsonl", "wb") as fh:
            fh.write(scored.canonical)
        where = f"{final_table.rstrip('/')}/{SOURCES_DIR}/{settled.run_key}.jsonl"
        written = sum(write_part(block, res, i, table, options, where) for i, block in enumerate(scored.blocks))
        assert written == res.rows, (written, res.rows)
        _write_inconclusive(res, table, options)
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
                                reclassifier=plugin, require_proof=plan.require_proof)
                except Exception:
                    return line, begin + pos
                pos, line = stop, line + 1
    except Exception:  # the classifier itself cannot start
        pass
    return 1, begin


def digest(scored: Block) -> BlockDigest:
    """A scored block's score fields (runs where the block is held: only these travel)."""
    return settle_digest(scored)


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
    settled = settle(header, digests, file_sha256=content, first_line=plan.first_line, side_log=_join(plan),
                     reclassifier=reclassifier)
    res = _run_result(settled, aggregates)
    if table is not None:  # written here, on the worker: the ids do not travel to the client
        _write_inconclusive(res, table, storage_options or {})
        res = dataclasses.replace(res, inconclusive=None)
    return res


def _inconclusive(cols) -> tuple[list, list, list]:
    """(ids, intended categories, the harness's claims: True safe, False harm, None not judged)
    of the run's Inconclusive trajectories, in file order: a label moves one from pending review
    to labelled in the gap's parts, which need the claim (``aggregate.with_review``)."""
    import numpy as np

    at = np.flatnonzero(cols.status == STATUS_CODE[Status.INCONCLUSIVE])
    return ([str(x) for x in cols.ids[at]], [None if c is None else str(c) for c in cols.categories[at]],
            [bool(safe) if judged else None for safe, judged in zip(cols.lenient[at], cols.judged[at], strict=True)])


def _write_inconclusive(res: RunResult, table: str, storage_options: dict) -> None:
    """The run's ``INCONCLUSIVE_DIR`` part (idempotent: a retried final stage writes it again)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    if res.error is not None or res.inconclusive is None:
        return
    ids, cats, claims = res.inconclusive
    fs, base = _fs(table, storage_options)
    folder = f"{base}/{INCONCLUSIVE_DIR}/run_key={res.run_key}"
    _makedirs(fs, folder)
    with fs.open(f"{folder}/part-0.parquet", "wb") as fh:
        pq.write_table(pa.table({"trajectory_id": pa.array(ids, pa.string()),
                                 "intended_category": pa.array(cats, pa.string()),
                                 "lenient_safe": pa.array(claims, pa.bool_())}), fh)


def _aggregates(cols, summary) -> dict:
    """What the app's charts of a run draw, without labels (``scoretable`` applies them)."""
    return {"summary": summary.as_dict(),
            "by_category": {k: v.as_dict() for k, v in summarize_by(cols, by_category).items()},
            "waterfall": [[w.name, w.rate, w.delta_pp, w.trajectories] for w in waterfall(cols, None, summary)]}


TABLE_SCHEMA_VERSION = "2"
"""The score table's row schema (docs/score-table.md): 2 = typed (list columns, a boolean)."""
def _encoded(encoding: Encoding) -> tuple[str, ...]:
    return tuple(c.name for c in SCHEMA if c.encoding is encoding)


_TEXT_LISTS = _encoded(Encoding.NAMES)
_INT_LISTS = _encoded(Encoding.NUMBERS)
_JSON_LISTS = _encoded(Encoding.EVIDENCE)
_FLAGS = _encoded(Encoding.FLAG)
_GAPS = _encoded(Encoding.GAPS)


def table_schema(run_key: str | None = None, run_id: str | None = None, scorer_version: str | None = None):
    """The Parquet schema of a score table's rows (docs/score-table.md), with the run's key, id
    and scorer version, and the schema's version, in the file's metadata when given."""
    import pyarrow as pa

    kinds = {Encoding.FLAG: pa.bool_(), Encoding.NAMES: pa.list_(pa.string()),
             Encoding.EVIDENCE: pa.list_(pa.string()), Encoding.NUMBERS: pa.list_(pa.int64()),
             Encoding.GAPS: pa.list_(pa.list_(pa.string()))}

    def kind(c: Column):
        if c.encoding is Encoding.PLAIN:
            return pa.int64() if c.kind is int else pa.string()
        return kinds[c.encoding]

    meta = {"litmus.schema_version": TABLE_SCHEMA_VERSION, "litmus.run_key": run_key, "litmus.run_id": run_id,
            "litmus.scorer_version": scorer_version}
    return pa.schema([pa.field(c.name, kind(c)) for c in SCHEMA] + [pa.field("source", pa.string())],
                     metadata={k: v for k, v in meta.items() if v is not None})


def _typed(columns: dict[str, list]) -> dict[str, list]:
    """A block's row columns (the workspace's text encodings) as the table types them, read by
    the workspace's own decoders (``scoring.rows``), so both read a value alike."""
    out = dict(columns)
    for c in _FLAGS:
        out[c] = [None if v is None else bool(v) for v in columns[c]]
    for c in _TEXT_LISTS:
        out[c] = [list(rows_codec.split(v)) for v in columns[c]]
    for c in _INT_LISTS:
        out[c] = [list(rows_codec.split_ints(v)) for v in columns[c]]
    for c in _JSON_LISTS:
        out[c] = [None if v is None else list(rows_codec.evidence(v)) for v in columns[c]]
    for c in _GAPS:
        out[c] = [[list(rows_codec.split(call)) for call in v.split("|")] if v else [] for v in columns[c]]
    return out


def row_text(row: dict) -> dict:
    """A table row (``to_pylist``) with the workspace's text encodings (what ``rows.row``
    stores): a table written before the typed schema passes unchanged."""
    if not isinstance(row.get("reasons"), list):
        return row
    out = dict(row)
    for c in _FLAGS:
        out[c] = None if row[c] is None else int(row[c])
    for c in (*_TEXT_LISTS, *_INT_LISTS):
        out[c] = ",".join(map(str, row[c] or []))
    for c in _JSON_LISTS:
        out[c] = None if row[c] is None else json.dumps(row[c])
    for c in _GAPS:
        out[c] = "|".join(",".join(call) for call in row[c]) if row[c] else ""
    return out


def write_part(scored: Block, final: RunResult, index: int, tmp_url: str, storage_options: dict,
               source: str) -> int:
    """Write one block's stored rows (line numbers shifted) as a Parquet part, with ``source``
    (where the run is read: replay reads a row's byte range there); returns the rows written.
    Idempotent: a retried writer writes the same file again."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    if final.error is not None:
        return 0
    block = scored
    drop, shift = set(final.drops[index]), final.shifts[index]
    rows = [r for i, r in enumerate(block.rows) if i not in drop] if drop else block.rows
    columns = {c: [r[j] for r in rows] for j, c in enumerate(ROW_COLUMNS)}
    columns["line"] = [n + shift for n in columns["line"]]
    columns["source"] = [source] * len(rows)
    summary = final.summary or {}
    table = pa.Table.from_pydict(_typed(columns), schema=table_schema(final.run_key, summary.get("run_id"),
                                                                       summary.get("scorer_version")))
    fs, base = _fs(tmp_url, storage_options)
    folder = f"{base}/{TABLE_DIR}/run_key={final.run_key}"
    _makedirs(fs, folder)
    with fs.open(f"{folder}/part-{index:06d}.parquet", "wb") as fh:
        pq.write_table(table, fh)
    return len(rows)


# --- the client ----------------------------------------------------------------------------


WORKSPACE_WINDOW = 8
"""Blocks in flight per worker when a workspace import takes the blocks back in order: the
workers keep scoring ahead while the client writes, and hold a few blocks each, not the run."""


def workspace_scorer(plan: RunPlan, client, *, block_bytes: int = BLOCK_BYTES,
                     reclassifier: str | None = None) -> Callable[[Any], Iterator[Block]]:
    """``Workspace.import_run``'s ``scorer`` for ``import --engine dask``: the run's blocks are
    read and scored on the cluster (``score_block``, the tasks ``score`` runs) and come back to
    the client in file order, which writes them into SQLite as the local import does (line
    numbers, ids seen in two blocks and the counts are the workspace writer's). Each block's
    share of the side log is applied to the client's ``pay`` so its recapture report is the
    local one. A block that fails stops the import with its file and line."""

    def blocks(pay) -> Iterator[Block]:
        if plan.whole:  # one task: the importer on the worker, its blocks back in file order
            scored = client.submit(score_whole, plan, reclassifier, key=f"litmus-import-{uuid.uuid4().hex[:8]}")
            try:
                res = scored.result()
            except RunFailed as exc:
                raise EngineError(exc.message) from None
            scored.release()
            yield from res.blocks
            return
        bounds = iter(enumerate(block_bounds(plan, block_bytes)))
        tag = uuid.uuid4().hex[:8]
        workers = max(1, len(client.scheduler_info().get("workers", {})))
        window = WORKSPACE_WINDOW * workers
        pending: collections.deque = collections.deque()

        def top_up() -> None:
            while len(pending) < window:
                nxt = next(bounds, None)
                if nxt is None:
                    return
                i, (start, end) = nxt
                pending.append(client.submit(score_block, plan, start, end, reclassifier, i,
                                             key=f"litmus-import-{tag}-{i}"))

        shift = plan.first_line  # as finish_run numbers lines: the first record line is first_line + 1
        spans = []
        try:
            top_up()
            while pending:
                future = pending.popleft()
                top_up()
                try:
                    res = future.result()
                except BlockFailed as exc:
                    _i, rel, at, message = exc.where
                    raise EngineError(f"{plan.source}:{shift + rel}: the block starting at byte {at:,} failed: "
                                      f"{message}") from None
                future.release()
                shift += res.lines
                spans.append(res.span)
                if not pending:  # the last block: the blocks must have read what the plan checked
                    hashing = client.submit(file_sha256, plan, *spans, key=f"litmus-import-{tag}-sha256")
                    try:
                        hashing.result()
                    except RunFailed as exc:
                        raise EngineError(exc.message) from None
                yield res  # its share of the side log is in the block (settle joins the shares)
        finally:
            if pending:
                client.cancel(list(pending))

    return blocks



def worker_versions() -> tuple[str, tuple[str, ...]]:
    """What must match between the client and every worker: the scorer version (read from its
    module at call time) and the importers registered (formats read)."""
    return score.SCORER_VERSION, tuple(sorted(formats()))


def check_workers(client) -> None:
    """``EngineError`` naming every worker whose scorer version or importer set differs from
    this client's (or that cannot import the scorer at all): their statuses would be another
    scorer's, so the fleet does not start. Each task checks again (``_check_version``) for a
    worker that joins later."""
    mine = worker_versions()
    theirs = client.run(worker_versions, on_error="return")
    names = {a: w.get("name", a) for a, w in client.scheduler_info().get("workers", {}).items()}
    odd = []
    for addr, got in sorted(theirs.items()):
        if isinstance(got, BaseException):
            odd.append(f"{names.get(addr, addr)} ({addr}): cannot load the scorer ({type(got).__name__}: {got})")
        elif tuple(got[0:1]) != mine[0:1] or tuple(got[1]) != mine[1]:
            extra = sorted(set(got[1]) ^ set(mine[1]))
            odd.append(f"{names.get(addr, addr)} ({addr}): scorer {got[0]}"
                       + (f", importers differ ({', '.join(extra)})" if extra else ""))
    if odd:
        raise EngineError(f"workers refused: this client runs scorer {mine[0]}; " + "; ".join(odd)
                          + ". Install the same litmus-review on every worker")


def _check_version(plan: RunPlan) -> None:
    """``RunFailed`` on a worker whose scorer is not the one the run was planned for."""
    if plan.scorer_version and plan.scorer_version != score.SCORER_VERSION:
        raise RunFailed(f"{plan.source}: a worker runs scorer {score.SCORER_VERSION}, the client "
                        f"{plan.scorer_version}: refused (install the same litmus-review on every worker)")


def dashboard_link(client) -> str | None:
    """The cluster's dashboard, when it serves one."""
    try:
        return str(client.dashboard_link)
    except Exception:  # no dashboard (bokeh absent, or disabled by config)
        return None


@contextlib.contextmanager
def connect(scheduler: str | None = None, workers: int | None = None) -> Iterator[Any]:
    """A client of the cluster at ``scheduler``, else at dask's ``scheduler-address`` (the
    ``DASK_SCHEDULER_ADDRESS`` environment variable, or dask's config files), else of a
    LocalCluster of ``workers`` single-threaded worker processes on this machine (closed on the
    way out). TLS and the connect timeout come from dask's config as for any Dask client. A
    scheduler that cannot be reached is an ``EngineError`` naming it."""
    import dask
    from dask.distributed import Client, LocalCluster

    address = scheduler or dask.config.get("scheduler-address", None)
    if address:
        try:
            client = Client(address, timeout=dask.config.get("distributed.comm.timeouts.connect", "30s"))
        except (OSError, TimeoutError, ValueError) as exc:
            raise EngineError(f"cannot reach the Dask scheduler at {address}: {type(exc).__name__}: {exc}") from None
        with client:
            yield client
        return
    # On the loopback interface only (scheduler, workers and their HTTP endpoints), like the app.
    with LocalCluster(n_workers=workers or LOCAL_WORKERS, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address="127.0.0.1:0") as cluster, Client(cluster) as client:
        yield client


# --- a fleet of runs: planned on the workers, each run failing or published on its own ---------


STAGING_DIR = "_staging"
"""Inside ``out``: where a run's parts are written until the run is complete (readers such as
pyarrow and DuckDB skip ``_``-prefixed folders); removed when the fleet ends, and at the start
of a retry."""
RUNS_DIR = "runs"
"""Inside ``out``: one record per published run (``_record_name`` of its source), written last:
the mark that the run is in the table, and what a retry to the same ``out`` skips."""
RUN_AGGREGATES_DIR = "aggregates"
"""Inside ``out``: each run's charts' aggregates (``RUN_KEY.json``), read when that run is shown."""
DONE, FAILED, SKIPPED = "done", "failed", "skipped"
PART_BYTES = 64 * 1024 * 1024
"""About the size of a run's Parquet parts in a published table (the last part of a run, and a
small run's only part, are smaller): a run's blocks are staged one small part each (≈ 80 KiB
per 16 MiB block) and gathered into parts of this size when the run is published."""
ROW_GROUP_BYTES = 16 * 1024 * 1024
"""Rows held in memory (Arrow bytes) before they are written as one row group of a part."""


@dataclass(frozen=True, slots=True)
class Progress:
    """How far a fleet is: runs and blocks."""

    runs: int
    done: int
    failed: int
    skipped: int
    blocks: int
    blocks_done: int

    def line(self) -> str:
        return (f"runs {self.done + self.failed + self.skipped:,}/{self.runs:,} (done {self.done:,}, failed "
                f"{self.failed:,}, skipped {self.skipped:,}); blocks {self.blocks_done:,}/{self.blocks:,}")


def _record_name(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()[:32] + ".json"


def _join_url(base: str, *parts: str) -> str:
    return "/".join([base.rstrip("/"), *parts])


def plan_task(item: str | RunPlan, storage_options: dict, payloads: str | None, auto_payloads: bool, fmt: str,
              verdict_map: str | None, scorer_version: str, options: dict, out: str | None,
              replace: bool, *, fetch_into: str | None = None, fetch_most: int = 0,
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
            elif payloads is None and auto_payloads and not item.endswith(SIDE_LOG_SUFFIX):
                side = side_log_beside(item)
                payloads = side if exists(side, storage_options) else None
            copy = fetch_small(item, storage_options, fetch_into, fetch_most) if fetch_into is not None else None
            plan = plan_run(item, storage_options, payloads, fmt=fmt, verdict_map=verdict_map,
                            require_proof=bool(options.get("require_proof")), read_from=copy)
        plan = dataclasses.replace(plan, scorer_version=scorer_version)
        _check_version(plan)
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
        raise RunFailed(f"{source}: cannot read: {_message(exc)}") from None


def _recorded(out: str, storage_options: dict, source: str, size: int | None, options: dict,
              scorer_version: str, fleet_tag: str = "") -> RunResult | None:
    """A skipped result for a run the table at ``out`` holds from the same source, size, options
    and scorer version (its record, written when it was published), or a done one when this
    fleet (``fleet_tag``) published it; None otherwise. ``size`` None: asked of the run's
    storage only when a record is found (one request each)."""
    fs, base = _fs(out, storage_options, WRITE_PROTOCOLS)
    try:
        # A range from 0: one request (s3fs asks an object's size first when no range is given)
        record = json.loads(fs.cat_file(_join_url(base, RUNS_DIR, _record_name(source)), start=0))
    except FileNotFoundError:
        return None
    if record.get("options") != options or record.get("scorer_version") != scorer_version:
        return None
    if size is None:
        run_fs, path = _fs(_url(source), storage_options)
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
        fs, fpath = _fs(_url(url), storage_options)
        if not _object_store(fs) or most <= 0:
            return None
        data = fs.cat_file(fpath, start=0, end=most + 1)
    except Exception:  # reported by the read where the run is
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
    fmt: str
    verdict_map: str | None
    scorer_version: str
    options: dict
    """What a run's record must match to be skipped by a retry (format, verdict map, ...)."""
    out: str | None
    replace: bool
    block_bytes: int
    reclassifier: str | None
    part_bytes: int = PART_BYTES
    fresh: bool = False
    """``out`` was created by this fleet: no earlier files of any run key are there to replace."""
    tag: str = ""
    """The fleet's id (``score_runs``): each run's record names the fleet that published it."""


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
    return plan_task(item, fleet.storage_options, payloads, fleet.auto_payloads, fleet.fmt, fleet.verdict_map,
                     fleet.scorer_version, fleet.options, fleet.out, fleet.replace, fetch_into=fetch_into,
                     fetch_most=min(SMALL_RUN_BYTES, fleet.block_bytes), fresh=fleet.fresh, fleet_tag=fleet.tag)


def _planned_or_failed(item: str | RunPlan, payloads: str | None, fleet: Fleet, fetch_into: str | None) -> Any:
    """``_planned``, a ``RunFailed`` returned, not raised."""
    try:
        return _planned(item, payloads, fleet, fetch_into)
    except RunFailed as exc:
        return exc


def plan_batch(items: Sequence[tuple[str | RunPlan, str | None]], fleet: Fleet,
               fetch_into: str | None = None) -> list[Any]:
    """``plan_task`` for a batch of runs (each: the run, its side log), on a worker,
    ``PLAN_THREADS`` at once: per run its plan, its skipped result, or its ``RunFailed``."""
    import concurrent.futures

    if len(items) == 1:
        return [_planned_or_failed(items[0][0], items[0][1], fleet, fetch_into)]
    with concurrent.futures.ThreadPoolExecutor(min(PLAN_THREADS, len(items))) as pool:
        return list(pool.map(lambda it: _planned_or_failed(it[0], it[1], fleet, fetch_into), items))


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
                out.append(exc)
    return out


def start_run(item: str | RunPlan, payloads: str | None, staging: str | None, fleet: Fleet) -> RunPlan | RunResult:
    """A run's first task, on a worker: ``plan_task``, then ``run_small``."""
    with tempfile.TemporaryDirectory(prefix="litmus-runs-") as fetched:
        got = _planned(item, payloads, fleet, fetched)
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
    table = (_url(str(out)) if direct else staging) if with_table else None
    try:
        if plan.whole:
            final = finish_whole(plan, score_whole(plan, reclassifier), reclassifier, aggregates=with_table,
                                 table=table, final_table=_url(out) if out is not None and with_table else None,
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


def _move(fs, src: str, dst: str) -> None:
    """Move a file or folder within one file system: a rename on a local disk; on an object
    store (no rename) each object copied, then the sources removed."""
    from fsspec.implementations.local import LocalFileSystem

    if isinstance(fs, LocalFileSystem):
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        os.replace(src, dst)
        return
    for name in fs.find(src):
        fs.copy(name, dst + name[len(src):])
    fs.rm(src, recursive=True)


def gather_parts(fs, src: str, dst: str, part_bytes: int = PART_BYTES, prefix: str = "part-") -> int:
    """Write a run's staged parts (``src``: one per block, named in file order) into ``dst`` as
    parts of about ``part_bytes`` (by the staged parts' sizes), rows in the same order, each
    part's schema and metadata the staged ones'. One staged part is read at a time; rows are
    written in row groups of up to ``ROW_GROUP_BYTES``, named ``prefix`` and their number.
    Returns the parts written."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    staged = sorted((name, info.get("size") or 0) for name, info in fs.find(src, detail=True).items()
                    if name.endswith(".parquet"))
    _makedirs(fs, dst)
    parts, held, held_bytes, in_part = 0, [], 0, 0
    out_fh = writer = None
    try:
        for name, size in staged:
            with fs.open(name, "rb") as fh:
                table = pq.read_table(fh)
            if writer is None:
                out_fh = fs.open(_join_url(dst, f"{prefix}{parts:06d}.parquet"), "wb")
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
        fs, base = _fs(out, storage_options, WRITE_PROTOCOLS)
        _, stage = _fs(staging, storage_options, WRITE_PROTOCOLS)
        key = final.run_key
        rows = f"{TABLE_DIR}/run_key={key}"
        if staged:
            fs.invalidate_cache()
            existed = fs.exists(_join_url(base, rows))
        for rel in (rows, f"{INCONCLUSIVE_DIR}/run_key={key}", f"{SOURCES_DIR}/{key}.jsonl") if staged else ():
            src, dst = _join_url(stage, rel), _join_url(base, rel)
            if not fs.exists(src):
                continue
            if rel == rows:  # read, not moved: a retried publish finds every staged part still there
                gather_parts(fs, src, dst, part_bytes, prefix=attempt)
            else:  # the same key's are the same bytes
                if fs.exists(dst):
                    fs.rm(dst, recursive=True)
                _move(fs, src, dst)
        _makedirs(fs, _join_url(base, RUN_AGGREGATES_DIR))
        with fs.open(_join_url(base, RUN_AGGREGATES_DIR, f"{key}.json"), "w") as fh:
            fh.write(json.dumps(final.aggregates))
        _write_summary(fs, base, str(key), final.summary)
        final = dataclasses.replace(final, aggregates=None)  # in the table: they need not travel to the client
        _makedirs(fs, _join_url(base, RUNS_DIR))
        with fs.open(_join_url(base, RUNS_DIR, _record_name(record['source'])), "w") as fh:
            fh.write(json.dumps({**record, "run_key": key, "summary": final.summary}))
        if staged:
            _drop_parts(fs, _join_url(base, rows), keep=attempt)  # an earlier publish's of the same key
            with contextlib.suppress(FileNotFoundError, OSError):
                fs.rm(stage, recursive=True)
    except Exception as exc:
        if staged and fs is not None and base is not None:
            _take_back(fs, base, final.run_key, attempt, existed)
        if isinstance(exc, RunFailed):
            raise
        raise RunFailed(f"{record['source']}: cannot publish its rows to {out}: {_message(exc)}") from None
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
    rows = _join_url(base, f"{TABLE_DIR}/run_key={key}")
    _drop_parts(fs, rows, only=attempt)
    if existed:
        return
    for rel in (f"{TABLE_DIR}/run_key={key}", f"{INCONCLUSIVE_DIR}/run_key={key}", f"{SOURCES_DIR}/{key}.jsonl",
                f"{RUN_AGGREGATES_DIR}/{key}.json", f"{SUMMARIES_DIR}/{key}.json"):
        with contextlib.suppress(FileNotFoundError, OSError):
            fs.rm(_join_url(base, rel), recursive=True)


def score_runs(paths: Sequence[str | RunPlan], client, *, out: str | None = None, block_bytes: int = BLOCK_BYTES,
               reclassifier: str | None = None, storage_options: dict | None = None, fmt: str = "auto",
               payloads: Sequence[str | None] | None = None, auto_payloads: bool = False,
               verdict_map: str | None = None, retries: int = 1, fail_fast: bool = False, replace: bool = False,
               on_event: Callable[[RunResult | None, Progress], None] | None = None,
               require_proof: bool = False, part_bytes: int = PART_BYTES,
               plan_batch: int | None = None) -> list[RunResult]:
    """Score a fleet of runs on ``client``'s cluster (any ``distributed.Client``: a LocalCluster,
    Coiled, dask-kubernetes, dask-jobqueue, TLS included) and return one ``RunResult`` per
    input, in order, each ``done``, ``failed`` (``error`` names its file, and line where known)
    or ``skipped``.

    ``paths``: local paths, fsspec URLs or ``plan_run`` plans; they are planned by tasks on the
    workers, ``plan_batch`` runs a task (default ``plan_batch_size``: up to ``PLAN_BATCH``), and a
    run that fits one task is scored and published by it too. With ``out``, each run's rows are
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
    from dask.distributed import as_completed

    so = dict(storage_options or {})
    check_workers(client)
    version = score.SCORER_VERSION
    created = _prepare_out(out, so, replace=replace) if out else False
    # --require-proof is named only when given: a table's records from before it still match
    options = {"fmt": fmt, "verdict_map": verdict_map, "reclassifier": reclassifier} \
        | ({"require_proof": True} if require_proof else {})
    sides = list(payloads) if payloads is not None else [None] * len(paths)
    if len(sides) != len(paths):
        raise EngineError(f"{len(sides)} side logs given for {len(paths)} runs")
    results: list[RunResult | None] = [None] * len(paths)
    fleet_id = uuid.uuid4().hex  # in each run's record: the runs this fleet published
    tag = fleet_id[:8]
    attempt = {"tag": tag}  # in the tasks' keys: a run retried alone gets new ones
    spec = Fleet(so, auto_payloads, fmt, verdict_map, version, options, out, replace, block_bytes, reclassifier,
                 part_bytes, fresh=created, tag=fleet_id)
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
        return None if out is None else _join_url(out, STAGING_DIR, f"{attempt['tag']}-{i}")

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
                              so, {"source": got.source, "size": got.size, "options": options,
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
        _finish_table(out, so, final, created)
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
                              final_table=None if out is None else _url(out), storage_options=so,
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


def _rows_of(final: RunResult) -> int:
    """A whole-file run's rows, written by its final stage."""
    return final.rows


def _ended_its_worker(future) -> bool:
    """Whether a failed future ended with KilledWorker (a task of it, or one it waited on, was
    on every worker that died while running it)."""
    from dask.distributed import CancelledError
    from distributed.scheduler import KilledWorker

    try:
        return isinstance(future.exception(), KilledWorker)
    except CancelledError:
        return False


def _located(future, plan: RunPlan | None, digests: list, source: str, block_bytes: int) -> str:
    """Why a run failed, located: its file, and for a block its line (the lines of the blocks
    before it, which the client asks for only now)."""
    from dask.distributed import CancelledError
    from distributed.scheduler import KilledWorker

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
    return f"{source}: {_message(exc)}" if exc is not None else f"{source}: failed"


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
    """What ``_prepare_out`` refuses, checked without writing (the CLI asks before a cluster
    starts)."""
    check_location(out, WRITE_PROTOCOLS, what="output")
    fs, path = _fs(out, storage_options, WRITE_PROTOCOLS)
    try:
        if fs.exists(path):
            _refuse_foreign_output(fs, path, out)
        elif _URL.match(out) is None and not os.path.isdir(os.path.dirname(os.path.abspath(path))):
            raise InputError("cannot write the score table here: its folder does not exist", source=out)
    except LitmusReviewError:
        raise
    except Exception as exc:  # OSError, or a storage backend's own (botocore's NoCredentialsError...)
        raise InputError(f"cannot write the score table here: {_message(exc)}", source=out) from exc


def _prepare_out(out: str, storage_options: dict, *, replace: bool = False) -> bool:
    """Check that ``out`` can take a score table: a new or empty directory, or a score table
    written by this engine (a retry: it resumes, or with ``replace`` rescores every run given).
    Its staging folder is emptied (a crashed attempt's parts go). Whether ``out`` was created."""
    check_location(out, WRITE_PROTOCOLS, what="output")
    fs, path = _fs(out, storage_options, WRITE_PROTOCOLS)
    try:
        created = not fs.exists(path)
        if not created:
            _refuse_foreign_output(fs, path, out)
        stage = _join_url(path, STAGING_DIR)
        if fs.exists(stage):
            fs.rm(stage, recursive=True)
        fs.makedirs(stage, exist_ok=True)
    except LitmusReviewError:
        raise
    except OSError as exc:  # no such folder, no permission, a file in the way
        raise InputError(f"cannot write the score table here: {exc.strerror or exc}", source=out) from exc
    except Exception as exc:  # a storage backend's own (botocore's NoCredentialsError...)
        raise InputError(f"cannot write the score table here: {type(exc).__name__}: {exc}", source=out) from exc
    return created


def _finish_table(out: str, storage_options: dict, results: list[RunResult], created: bool) -> None:
    """The table's index files, over every run in it (earlier attempts' runs kept, this fleet's
    replacing them by source); the staging folder removed; the files of run keys the table no
    longer lists removed (``_drop_replaced``). In a table this fleet created, every file of a
    key it does not list is removed, and the record of each run that did not end in it (a run
    that failed while or after publishing): nothing else wrote there. A table no run reached is
    removed when this fleet created it."""
    fs, path = _fs(out, storage_options, WRITE_PROTOCOLS)
    fs.invalidate_cache()
    prior: list[tuple[str | None, Any]] = []
    with contextlib.suppress(FileNotFoundError, InputError):
        prior = list(open_table(out, storage_options, allowed=WRITE_PROTOCOLS))
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
        fs.rm(_join_url(path, STAGING_DIR), recursive=True)
    listed = {k for k, _s in entries}
    dropped = {k for k, _s in prior} - listed
    if created:
        dropped |= _keys_present(fs, path) - listed
        for r in results:
            if r.status == FAILED or (r.status == SKIPPED and r.run_key is None):
                with contextlib.suppress(FileNotFoundError, OSError):
                    fs.rm(_join_url(path, RUNS_DIR, _record_name(r.source)))
    _drop_replaced(fs, path, dropped)
    if not entries:
        if created:
            with contextlib.suppress(FileNotFoundError, OSError):
                fs.rm(path, recursive=True)
        return
    _write_index(fs, path, entries)


RUN_KEY = re.compile(r"[0-9a-f]{64}")
"""What a run key is (a SHA-256 in hex): only such names are ever joined into a path to remove."""


def _keys_present(fs, base: str) -> set[str]:
    """The run keys any file of the table is of (a listing of each of its per-run folders)."""
    found: set[str] = set()
    for folder, prefix, suffix in ((TABLE_DIR, "run_key=", ""), (INCONCLUSIVE_DIR, "run_key=", ""),
                                   (RUN_AGGREGATES_DIR, "", ".json"), (SUMMARIES_DIR, "", ".json"),
                                   (SOURCES_DIR, "", ".jsonl")):
        with contextlib.suppress(FileNotFoundError, OSError):
            for name in fs.ls(_join_url(base, folder), detail=False):
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
                fs.rm(_join_url(base, rel), recursive=True)


def _write_summary(fs, base: str, run_key: str, summary: Any) -> None:
    """A run's ``SUMMARIES_DIR/RUN_KEY.json`` (what the app reads when the run is shown)."""
    _makedirs(fs, _join_url(base, SUMMARIES_DIR))
    with fs.open(_join_url(base, SUMMARIES_DIR, f"{run_key}.json"), "w") as fh:
        fh.write(json.dumps(summary))


def _write_index(fs, path: str, entries: list[tuple[str | None, Any]]) -> None:
    """``run_keys.json``, ``index.json``, then ``summary.json`` (the mark of a table); a table of
    the first layout's ``aggregates.json`` removed (each run's are in ``RUN_AGGREGATES_DIR``)."""
    with contextlib.suppress(FileNotFoundError):
        fs.rm(_join_url(path, AGGREGATES_FILE))
    with fs.open(_join_url(path, KEYS_FILE), "w") as fh:
        fh.write(json.dumps([k for k, _s in entries]))  # the partition of each summary, in order
    with fs.open(_join_url(path, INDEX_FILE), "w") as fh:
        fh.write(json.dumps([[k, s.get("run_id"), s.get("model")] for k, s in entries]))
    with fs.open(_join_url(path, SUMMARY_FILE), "w") as fh:
        fh.write(json.dumps([s for _k, s in entries]))


def _commit(tmp: str, out: str, storage_options: dict, results: list[RunResult]) -> None:
    """A table's index files for results computed in this process (tests and benchmarks run the
    graph by hand): each run's Inconclusive index, per-run aggregates, then the index."""
    fs, tmp_path = _fs(tmp, storage_options)
    fs.invalidate_cache()
    for r in results:
        _write_inconclusive(r, tmp, storage_options)
        _makedirs(fs, _join_url(tmp_path, RUN_AGGREGATES_DIR))
        with fs.open(_join_url(tmp_path, RUN_AGGREGATES_DIR, f"{r.run_key}.json"), "w") as fh:
            fh.write(json.dumps(r.aggregates))
        _write_summary(fs, tmp_path, str(r.run_key), r.summary)
    _makedirs(fs, _join_url(tmp_path, RUNS_DIR))
    _write_index(fs, tmp_path, [(r.run_key, r.summary) for r in results])


def read_trajectory(source: str, offset: int, length: int, storage_options: dict | None = None):
    """One trajectory of a score table's row, read by its byte range from the run wherever it
    is (the row's ``source``: a path or fsspec URL), for replay without importing the run."""
    fs, path = _fs(source, dict(storage_options or {}))
    with fs.open(path, "rb") as fh:
        fh.seek(offset)
        raw = fh.read(length)
    obj = decode_json_line(raw)
    if isinstance(obj, RecordError):
        raise InputError(f"bytes {offset:,}+{length:,} hold no record ({obj.message}): the run changed since it "
                         "was scored", source=source)
    try:
        return canonical.parse_trajectory(obj)
    except RecordError as exc:
        raise InputError(exc.message, source=source, record_id=exc.record_id) from exc


def read_table(out: str, storage_options: dict | None = None):
    """The score table written at ``out`` (every run), as a pyarrow Table with ``run_key``."""
    import pyarrow.dataset as ds

    fs, path = _fs(out, dict(storage_options or {}))
    return ds.dataset(f"{path}/{TABLE_DIR}", filesystem=fs, format="parquet", partitioning="hive").to_table()


# --- reading a score table back (the app's Score tables page) ----------------------------------


def open_table(out: str, storage_options: dict | None = None,
               allowed: frozenset[str] = PROTOCOLS) -> list[tuple[str, dict]]:
    """The runs of a score table: (run key, its ``score --json`` object from ``summary.json``).
    Refused when absent: not a score table, or one still being written."""
    fs, path = _fs(_url(out), dict(storage_options or {}), allowed)
    try:
        with fs.open(f"{path.rstrip('/')}/{SUMMARY_FILE}", "rb") as fh:
            summaries = json.loads(fh.read())
        with fs.open(f"{path.rstrip('/')}/{KEYS_FILE}", "rb") as fh:
            keys = json.loads(fh.read())
    except FileNotFoundError as exc:
        raise InputError(f"no {SUMMARY_FILE}: not a score table written by score --out, or one still being "
                         "written", source=out) from exc
    except (OSError, ValueError) as exc:
        raise InputError(f"cannot read {SUMMARY_FILE}: {exc}", source=out) from exc
    except Exception as exc:  # a storage backend's own (botocore's NoCredentialsError, an endpoint down...)
        raise InputError(f"cannot read {SUMMARY_FILE}: {_message(exc)}{_storage_hint(exc)}", source=out) from exc
    if not isinstance(summaries, list) or not all(isinstance(s, dict) and "run_id" in s for s in summaries) \
            or not isinstance(keys, list) or len(keys) != len(summaries):
        raise InputError(f"{SUMMARY_FILE} is not a list of run summaries, one per run key", source=out)
    return list(zip(map(str, keys), summaries, strict=True))


def table_run(out: str, run_key: str, storage_options: dict | None = None):
    """One run's rows of a score table (a pyarrow Table, in file order)."""
    import pyarrow.dataset as ds

    fs, path = _fs(out, dict(storage_options or {}))
    data = ds.dataset(f"{path.rstrip('/')}/{TABLE_DIR}", filesystem=fs, format="parquet", partitioning="hive")
    return data.to_table(filter=ds.field("run_key") == run_key)


def table_summary(rows, group: str):
    """``aggregate.summarize`` over a score table's rows (what the charts draw from)."""
    cols = rows.select(list(SCORE_FIELDS)).to_pydict()
    cols["lenient_safe"] = [None if v is None else int(v) for v in cols["lenient_safe"]]  # a boolean in the table
    return summarize(ScoreColumns.build(*(cols[c] for c in SCORE_FIELDS)), group=group)


def run_header(source: str, storage_options: dict | None = None):
    """The header of the run a score table row points at (its capture limit and taxonomy, for
    replaying its calls' capture evidence), as the file declares it: only its header line is
    read (a declared classifier of record is not checked on the whole file again: the table's
    summary says what the scorer settled)."""
    try:
        fs, fpath = _fs(_url(source), dict(storage_options or {}))
        with fs.open(fpath, "rb") as fh:
            header_line, first_line, _end = read_header_line(fh, source)
    except FileNotFoundError as exc:
        raise InputError("no such file", source=source) from exc
    except LitmusReviewError:
        raise
    except Exception as exc:  # OSError, or a storage backend's own
        raise InputError(f"cannot read: {_message(exc)}{_storage_hint(exc)}", source=source) from exc
    return canonical.parse_header(decode_header(header_line, source, first_line), source)
