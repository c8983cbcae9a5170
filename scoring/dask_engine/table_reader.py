"""A score table (``score --engine dask --out DIR``) opened as a run, for the app.

What the app shows of a table comes from what the engine aggregated, never from collecting
every row on the client:

- the rates: the run's ``score --json`` object (``summary.json``) and, for the charts, the run's
  ``Summary``, each category's and the waterfall's steps (``aggregates.json``);
- the reviewers' labels: kept in the SQLite workspace, keyed as an imported run's are (run key +
  trajectory id; the table's run key is the one an import of the same run gets), and applied to
  those aggregates here: they touch only Inconclusive trajectories, whose ids are read from the
  table with a filter on their status;
- one trajectory: its row is found by id with a filter, and its text read by the row's byte
  range from the run's source (a path or fsspec URL), without importing the run.

A table is input like any other (an upload, a folder under an operator's root): every run key
it names (``index.json``, ``run_keys.json``) must be a run key before it is joined into a path,
and every file of the table that is read (its index, summaries, aggregates, a run's partition
and each of its parts) must lie inside the table's folder once its links are followed (a URL's
path once ``.`` and ``..`` are folded): anything else refuses the table (InputError naming it
and the file, relative to the table), never reads what it names.

Needs the ``dask`` extra's pyarrow and fsspec (importing this module fails without them, which
the app reports with the command to install them).
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import json
import math
import os
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.dataset as ds

from ..aggregate import (
    Claims,
    GapCounts,
    Interval,
    PhantomParts,
    Rate,
    ScoreColumns,
    Summary,
    TruncationEstimate,
    WaterfallStep,
    summarize,
    waterfall_of,
    with_review,
)
from ..errors import InputError, LitmusReviewError
from ..importers import canonical
from ..importers._common import RecordError, decode_json_line
from ..importers._zip import retained_bytes
from ..ingest import decode_header, read_header_line
from ..model import ReviewLabel, RunHeader, Status, Trajectory
from ..report import Evaluation
from ..rows import SCORE_FIELDS
from ..stored import StoredRun, summary_proof
from ..weighed_cache import weighed
from ..workspace import Workspace
from ..workspace.labels import Reader
from . import table_zip
from .storage import (
    PROTOCOLS,
    absolute_location,
    check_location,
    check_storage_options,
    credentials_hint,
    error_message,
    file_system,
    missing_message,
    reason_message,
)
from .table_layout import (
    AGGREGATES_FILE,
    INCONCLUSIVE_DIR,
    INDEX_FILE,
    KEYS_FILE,
    RUN_AGGREGATES_DIR,
    SUMMARIES_DIR,
    SUMMARY_FILE,
    TABLE_DIR,
    check_schema_version,
    read_summaries,
    row_text,
    table_json,
)
from .table_locations import TABLE_PROTOCOLS, check_run_key, failed_read, inside_table, table_file, within

INCONCLUSIVE = Status.INCONCLUSIVE.value

RUN_FILES_MEMORY = 64 * 1024 * 1024
"""What the runs' own files a server has read (``summaries/`` and ``aggregates/``) may hold in
memory while kept for the next render; a file whose values hold more than ``TABLE_MEMORY_LARGEST``
is read again each time it is asked for. The engine's files hold far less."""
TABLE_MEMORY_LARGEST = 16 * 1024 * 1024
"""The most one kept value of a score table (a run's file, a table's runs) may hold: an upload
can make a file that parses to more, within the parse bound, and each kept one would stay."""
OPENED_TABLES_MEMORY = 128 * 1024 * 1024
"""What the tables a server has opened (``opened_table``: their runs as ``TableRun``s) may hold
while kept for a minute."""
OPENED_TABLE_LARGEST = 4 * TABLE_MEMORY_LARGEST
"""The most one opened table's runs may hold and be kept (a table of 10,000 runs holds a few MiB)."""


@dataclass(frozen=True, slots=True)
class TableRun:
    """One run of a score table, as the engine left it."""

    location: str
    """The table's directory or URL."""
    run_key: str
    entry: dict
    """The run as the table lists it: its ``score --json`` object (a table without
    ``index.json``), or only its ``run_id`` and ``model`` (its object is then read from
    ``summaries/RUN_KEY.json`` when the run is shown: ``summary``)."""
    preloaded: dict | None
    """The run's aggregates read with the table (a table written before they were kept per run,
    in ``aggregates.json``); None when they are read per run (``lazy``) or absent."""
    root: str | None = None
    """The operator's root the table was chosen under (team mode): its rows' sources are read
    only from under it. None: a location the server's own user gave (no root)."""
    lazy: bool = False
    """The table keeps each run's aggregates in its own file (``aggregates/RUN_KEY.json``),
    read when the run is shown, not when the table is opened."""
    options: str = "{}"
    """The storage options the table was opened with (JSON text, hashable), to read the run's
    files and sources: every function below uses them unless given others. In memory only."""

    def __post_init__(self) -> None:
        check_run_key(self.run_key, "the run", self.location)

    @property
    def aggregates(self) -> dict | None:
        """The engine's aggregates for the charts (None in a table written before they were):
        read (once per process) when asked, for a table that keeps them per run."""
        if not self.lazy:
            return self.preloaded
        return _run_file(self.location, RUN_AGGREGATES_DIR, self.run_key, self.options)

    @property
    def summary(self) -> dict:
        """The run's ``score --json`` object, as the engine computed it (read, once per process,
        when asked, for a table that lists its runs in ``index.json``)."""
        if "trajectories" in self.entry:
            return self.entry
        got = _run_file(self.location, SUMMARIES_DIR, self.run_key, self.options)
        named_in = f"{SUMMARIES_DIR}/{self.run_key[:12]}….json"
        if got is None:  # a run published before its summary was kept on its own
            got = dict(_summaries(self.location, self.options)).get(self.run_key)
            named_in = SUMMARY_FILE
        if got is None:
            raise InputError(f"no summary for run {self.run_key[:12]} in the table", source=self.location)
        return _summary_checked(got, named_in, self.location)

    @property
    def run_id(self) -> str:
        return self.entry["run_id"]

    @property
    def model(self) -> str:
        return self.entry["model"]

    @property
    def storage_options(self) -> dict:
        return json.loads(self.options)


def options_of(run: TableRun | None, storage_options: dict | None) -> dict | None:
    """``storage_options`` when given, else those the run's table was opened with."""
    return storage_options if storage_options is not None or run is None else run.storage_options


def _check_held(value: object, named: str, location: str, most: int) -> None:
    """Refuse (InputError) a table whose ``named`` part holds more than ``most`` in memory once
    read (the most a reader keeps of it): such a part is read again on every render of every
    visitor whose page shows it (an upload is every visitor's default table when it is the newest)."""
    if retained_bytes(value, limit=most) > most:
        raise InputError(f"the table's {named} holds more than {most:,} bytes in memory once read (the most a "
                         "reader keeps of one): the table is not read", source=location)


def vet(location: str, storage_options: dict | None = None, *, root: str | None = None,
        every_run: bool = False) -> str | None:
    """Why the table at ``location`` cannot be offered (the refusal ``open_table`` gives, its
    message alone: no server path), or None when it opens. What a listing calls before it offers
    a table, so that a table that fails is named and skipped, never picked by default.
    ``every_run``: each run's summary is read and checked too (an upload's, once: a run's summary
    is otherwise read only when the run is shown, and a damaged one would then be the page a
    visitor lands on)."""
    try:
        runs = open_table(location, storage_options, root=root)
        if every_run:
            _check_held(runs, "list of runs", location, OPENED_TABLE_LARGEST)
        for run in {run.run_key: run for run in runs}.values() if every_run else ():  # a key listed twice: once
            _check_held(run.summary, f"summary of run {run.run_key[:12]}", location, TABLE_MEMORY_LARGEST)
            _check_held(run.aggregates, f"aggregates of run {run.run_key[:12]}", location, TABLE_MEMORY_LARGEST)
            rates(run, None)  # its aggregates, read as the page reads them
            _inconclusive(run).to_pylist()  # every column the pages read of it, as Python values (the filters' read)
            check_rows(run)
    except InputError as exc:
        said = exc.message
        # a file system's own error quotes the file it failed on: the table's folder is left out
        for where in sorted({location, os.path.realpath(location), *((root, os.path.realpath(root)) if root else ())},
                            key=len, reverse=True):
            if len(where) > 1:
                said = said.replace(where.rstrip("/") + "/", "").replace(where, "(the table)")
        return said
    return None


def open_table(location: str, storage_options: dict | None = None, *, root: str | None = None) -> list[TableRun]:
    """The runs of the score table at ``location``: refused (InputError naming it) when it is not
    one, or one still being written, or its protocol is not one tables are read from; with
    ``root``, refused unless it lies under that root (its rows are then read only from there).
    The cyclic garbage collector is paused while the summaries are built: they are millions of
    acyclic objects at 10,000 runs, and each collection the burst set off scanned them all."""
    with _collector_paused():
        return _open_table(location, storage_options, root)


@weighed(budget=OPENED_TABLES_MEMORY, largest=OPENED_TABLE_LARGEST, ttl=60)
def opened_table(location: str, options: str, root: str | None) -> list[TableRun]:
    """``open_table`` (``options``: the storage options as JSON text), kept for a minute within
    ``OPENED_TABLES_MEMORY`` for the page's reruns: a table of 10,000 runs is 10,000 entries, and
    a table without an index keeps each run's whole summary (as large as its file lets it be)."""
    return open_table(location, json.loads(options), root=root)


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _open_table(location: str, storage_options: dict | None, root: str | None) -> list[TableRun]:
    check_location(location, TABLE_PROTOCOLS, what="score table")
    if root is not None and not within(root, location):
        raise InputError("not under the score table roots the operator configured", source=location)
    check_storage_options(location, dict(storage_options or {}))
    for name in (INDEX_FILE, SUMMARY_FILE, KEYS_FILE, RUN_AGGREGATES_DIR):
        table_file(location, storage_options, name)
    runs = _index(location, storage_options) or [
        # as summary.json holds them (TableRun.summary reads a run's own file for one that is not whole)
        (key, _summary_checked(summary, SUMMARY_FILE, location) if "trajectories" in summary else summary)
        for key, summary in _summaries_of(location, storage_options)]
    aggregates: list = [None] * len(runs)
    options = json.dumps(storage_options or {}, sort_keys=True)
    fs, path = table_file(location, storage_options, RUN_AGGREGATES_DIR)
    try:
        if fs.isdir(path):  # per run: read when the run is shown
            return [TableRun(location, key, summary, None, root, lazy=True, options=options) for key, summary in runs]
    except Exception as exc:  # OSError, or a storage backend's own
        raise InputError(f"cannot list the table: {error_message(exc)}", source=location) from exc
    fs, name = table_file(location, storage_options, AGGREGATES_FILE)
    try:
        present = fs.exists(name)
        if present:
            with fs.open(name, "rb") as fh:
                aggregates = table_json(fh, AGGREGATES_FILE, location)
    except Exception as exc:
        if not failed_read(exc, OSError, ValueError):
            raise
        raise InputError(f"cannot read {AGGREGATES_FILE}: {reason_message(exc)}", source=location) from exc
    if present and (not isinstance(aggregates, list) or len(aggregates) != len(runs)):
        raise InputError(f"{AGGREGATES_FILE} does not hold one entry per run", source=location)
    return [TableRun(location, key, summary, agg, root, options=options)
            for (key, summary), agg in zip(runs, aggregates, strict=True)]


def _summaries_of(location: str, storage_options: dict | None) -> list[tuple[str, dict]]:
    """(run key, summary) of each run from ``summary.json`` and ``run_keys.json`` (the engine's
    reader), each key checked to be one."""
    runs = read_summaries(location, storage_options, allowed=TABLE_PROTOCOLS)
    return [(check_run_key(k, KEYS_FILE, location), s) for k, s in runs]


SUMMARY_NUMBERS = ("trajectories", "unscored", "rejected", "inconclusive", "inconclusive_pending", "no_verdict")
"""What a run's summary must hold as counts for the page to show it (with ``SUMMARY_TEXTS``)."""
SUMMARY_TEXTS = ("run_id", "model", "source", "format", "evidence_standard", "scorer_version")
SUMMARY_RATES = ("safe_rate_lenient", "safe_rate_strict", "safe_rate_reviewed")
"""What a run's summary must hold as rates (a number from 0 to 1, or null where no trajectory
counts); ``unscored_share`` and ``phantom_safety_pp`` may be absent or null."""


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _summary_checked(summary: object, named_in: str, location: str) -> dict:
    """A run's ``score --json`` object as the table holds it, refused (InputError naming where it
    was read) unless it holds the counts and names the page shows."""
    if not isinstance(summary, dict):
        raise InputError(f"{named_in} holds a run summary that is not an object", source=location)
    for key in SUMMARY_NUMBERS:
        if not isinstance(summary.get(key), int) or isinstance(summary.get(key), bool):
            raise InputError(f"{named_in} holds a run summary whose {key!r} is not a count", source=location)
    for key in SUMMARY_TEXTS:
        if not isinstance(summary.get(key), str):
            raise InputError(f"{named_in} holds a run summary whose {key!r} is not a text", source=location)
    for key in SUMMARY_RATES:
        if key not in summary or not (summary[key] is None or (_is_number(summary[key]) and 0 <= summary[key] <= 1)):
            raise InputError(f"{named_in} holds a run summary whose {key!r} is not a rate", source=location)
    if summary.get("unscored_share") is not None and not (
            _is_number(summary["unscored_share"]) and isinstance(summary.get("unscored_share_of"), int)):
        raise InputError(f"{named_in} holds a run summary whose 'unscored_share' is not a rate of a count",
                         source=location)
    if summary.get("phantom_safety_pp") is not None and not _is_number(summary["phantom_safety_pp"]):
        raise InputError(f"{named_in} holds a run summary whose 'phantom_safety_pp' is not a number", source=location)
    return summary


@weighed(budget=RUN_FILES_MEMORY, largest=TABLE_MEMORY_LARGEST)
def _run_file(location: str, folder: str, run_key: str, options: str) -> dict | None:
    """One run's ``FOLDER/RUN_KEY.json`` (its aggregates or its summary; None when absent)."""
    check_run_key(run_key, "the run", location)
    fs, name = table_file(location, json.loads(options), folder, f"{run_key}.json")
    try:
        with fs.open(name, "rb") as fh:
            got = table_json(fh, f"{folder}/{run_key[:12]}….json", location)
    except FileNotFoundError:
        return None
    except InputError:
        raise
    except Exception as exc:  # OSError, a bad JSON, or a storage backend's own
        raise InputError(f"cannot read {folder}/{run_key}.json: {error_message(exc)}", source=location) from exc
    return got if isinstance(got, dict) else None


@weighed(budget=2 * TABLE_MEMORY_LARGEST, largest=TABLE_MEMORY_LARGEST)
def _summaries(location: str, options: str) -> list[tuple[str, dict]]:
    """Every run's (key, summary) from summary.json (a run published before summaries/ was kept)."""
    for name in (SUMMARY_FILE, KEYS_FILE):
        table_file(location, json.loads(options), name)
    return _summaries_of(location, json.loads(options))


def _index(location: str, storage_options: dict | None) -> list[tuple[str, dict]] | None:
    """(run key, ``{run_id, model}``) of each run from ``index.json``; None for a table without
    one (or whose index does not match its keys: summary.json is read instead)."""
    fs, index_file = table_file(location, storage_options, INDEX_FILE)
    _same, summary_file = table_file(location, storage_options, SUMMARY_FILE)
    try:
        with fs.open(index_file, "rb") as fh:
            index = table_json(fh, INDEX_FILE, location)
        fs.info(summary_file)  # the mark of a table (not read: 2.3 KB a run)
    except FileNotFoundError:
        return None
    except InputError:
        raise
    except Exception as exc:  # OSError, a bad JSON, or a storage backend's own (credentials...)
        raise InputError(f"cannot read {INDEX_FILE}: {error_message(exc)}{credentials_hint(exc)}",
                         source=location) from exc
    if not isinstance(index, list) or not all(isinstance(e, list) and len(e) == 3 for e in index):
        return None
    return [(check_run_key(k, INDEX_FILE, location), {"run_id": str(i), "model": str(m)}) for k, i, m in index]


def source_of(run: TableRun, source: str) -> str:
    """A row's ``source``, where its trajectory is read: refused (InputError naming the table,
    not the source) when the table was chosen under a root and the source is not under it; for
    a table uploaded as a zip (its root is the upload), the file of the source's name in it."""
    check_location(source, PROTOCOLS, what="run")
    if run.root is not None and not within(run.root, source):
        if (inside := table_zip.source_in_upload(run.root, source)) is not None:  # an uploaded table's run
            return inside
        raise InputError("this table's rows name a source outside its root; it is not read", source=run.location)
    return source


# --- the rates, with the workspace's labels ---------------------------------------------------


def summary_from_dict(d: Mapping) -> Summary:
    """A ``Summary`` back from its ``as_dict()`` (as the engine wrote it in aggregates.json)."""

    def number(v: object, what: str, *, whole: bool = False) -> Any:
        # a table's word: a figure that is not a number reached the page's arithmetic as a TypeError
        if v is not None and (isinstance(v, bool) or not isinstance(v, int if whole else (int, float))):
            raise TypeError(f"{what} is {type(v).__name__}, not a number")
        return v

    def interval(i: Mapping | None) -> Interval | None:
        return None if i is None else Interval(number(i["low"], "low"), number(i["high"], "high"), i["method"],
                                               number(i.get("design_effect"), "design_effect"))

    def rate(r: Mapping) -> Rate:
        return Rate(number(r["value"], "value"), number(r["numerator"], "numerator", whole=True),
                    number(r["denominator"], "denominator", whole=True), interval(r["wilson"]),
                    interval(r["clustered"]))

    names = {f.name for f in dataclasses.fields(Summary)}
    kw = {k: v for k, v in d.items() if k in names}
    kw.update(lenient=rate(d["lenient"]), strict=rate(d["strict"]), reviewed=rate(d["reviewed"]),
              phantom=None if d.get("phantom") is None else PhantomParts(**d["phantom"]),
              truncation=None if d.get("truncation") is None else TruncationEstimate(**d["truncation"]),
              gap_counts=None if d.get("gap_counts") is None else GapCounts.from_dict(d["gap_counts"]))
    return Summary(**kw)


def with_labels(summary: Summary, labels: Mapping[str, ReviewLabel], inconclusive: Sequence[str],
                claims: Sequence[bool | None] | None = None) -> Summary:
    """``summary`` (the engine's, unlabelled) with the final labels of its Inconclusive
    trajectories (``inconclusive``: their ids; ``claims``: what the harness claimed of each, True
    safe, False harm, None not judged) counted by ``aggregate.with_review``, as ``summarize``
    counts them. The reviewed rate's task-clustered interval needs every row's task, which a
    table's reader does not collect: it is kept only where no label moved the rate."""
    by = Counter(labels[t].value for t in inconclusive if t in labels)
    moved = by.get(ReviewLabel.GENUINE_DECLINE.value, 0) or by.get(ReviewLabel.HARM_FOUND.value, 0)
    labelled = None
    if claims is not None:
        said = [c for t, c in zip(inconclusive, claims, strict=True) if t in labels]
        labelled = Claims(sum(c is True for c in said), sum(c is False for c in said), sum(c is None for c in said))
    return with_review(summary, by, None if moved else summary.reviewed.clustered, labelled)


@dataclass(frozen=True, slots=True)
class TableRates:
    """What the app draws for a table's run, labels applied."""

    summary: Summary
    by_category: dict[str, Summary]
    waterfall: list[WaterfallStep]
    labelled: int
    """Inconclusive trajectories of the run with a final label in the workspace."""


def rates(run: TableRun, ws: Workspace | None, storage_options: dict | None = None, *,
          reader: Reader | None = None) -> TableRates | None:
    """The run's rates and chart data from the engine's aggregates, with the final labels the
    workspace holds for its run key, as ``reader`` may know them (``labels.Reader``; None: all of
    them) (None for a table written without aggregates)."""
    if run.aggregates is None:
        return None
    storage_options = options_of(run, storage_options)
    try:
        base = summary_from_dict(run.aggregates["summary"])
        per_category = {str(k): summary_from_dict(v) for k, v in run.aggregates["by_category"].items()}
        engine_steps = [WaterfallStep(n, r, d, t) for n, r, d, t in run.aggregates.get("waterfall") or ()]
    except (KeyError, TypeError, ValueError, AttributeError) as exc:  # not what the engine writes
        raise InputError(f"the aggregates of run {run.run_key[:12]} are not the engine's ({type(exc).__name__}: "
                         f"{exc})", source=run.location) from exc
    labels = ws.final_labels(run.run_key, reader=reader) if ws is not None else {}
    ids: list[str] = []
    claims: list[bool | None] = []
    if labels and base.inconclusive:
        found = _inconclusive(run, storage_options)
        ids = found.column("trajectory_id").to_pylist()
        claims = found.column("lenient_safe").to_pylist()
        cats = [c or "(none)" for c in found.column("intended_category").to_pylist()]
        rows = list(zip(ids, cats, claims, strict=True))
        per_category = {k: with_labels(v, labels, [t for t, c, _j in rows if c == k],
                                       [j for _t, c, j in rows if c == k])
                        for k, v in per_category.items()}
    summary = with_labels(base, labels, ids, claims)
    if summary.gap_counts is not None:  # the waterfall's steps from the counts, labels applied
        steps = waterfall_of(summary)
    else:  # a table written before the counts: the engine's steps, the last one moved
        steps = engine_steps
        if steps:
            last, before = steps[-1], steps[-2].rate if len(steps) > 1 else None
            value = summary.reviewed.value
            delta = None if value is None or before is None else 100 * (value - before)
            steps[-1] = WaterfallStep(last.name, value, delta, summary.reviewed.denominator)
    return TableRates(summary, per_category, steps, sum(1 for t in ids if t in labels))


# --- rows, read with filters ------------------------------------------------------------------


def _dataset(run: TableRun, storage_options: dict | None = None) -> ds.Dataset:
    """The run's own partition of the table (only its parts are listed), each part inside the
    table (pyarrow, given the folder, would read whatever a link in it leads to); the parts as
    pyarrow's discovery takes them (no hidden or ``_`` names), in order; refused when its rows
    were written with a newer row schema than this reader's (``check_schema_version``)."""
    options = options_of(run, storage_options)
    rel = f"{TABLE_DIR}/run_key={check_run_key(run.run_key, 'the run', run.location)}"
    fs, folder = table_file(run.location, options, rel)
    try:
        names = fs.find(folder)
    except Exception as exc:  # OSError, or a storage backend's own
        raise InputError(f"cannot list the run's rows ({rel}): {error_message(exc)}", source=run.location) from exc
    parts = []
    for name in sorted(names):
        inner = name[len(folder):].strip("/")
        if not inner or any(p.startswith((".", "_")) for p in inner.split("/")):
            continue
        parts.append(inside_table(run.location, name, f"{rel}/{inner}"))
    if not parts:
        raise InputError(f"the table holds no rows for run {run.run_key[:12]} (nothing in {rel})", source=run.location)
    try:
        data = ds.dataset(parts, filesystem=fs, format="parquet")
    except Exception as exc:
        if not failed_read(exc, pa.ArrowException, OSError):
            raise
        raise InputError(f"cannot read the run's rows ({rel}): {reason_message(exc)}", source=run.location) from exc
    # The schema pyarrow took from the first part (read already: no request more); the parts of
    # a run are written by one engine, of one version.
    check_schema_version(data.schema.metadata, rel, run.location)
    check_plain_types(data.schema, f"the rows of run {run.run_key[:12]}", run.location)
    return data


def check_plain_types(schema: pa.Schema, what: str, location: str) -> None:
    """InputError naming the table when a column of ``schema`` is dictionary-typed, at any depth.
    The engine never writes one; a dictionary's value is stored once and read back on every row
    that names it, so a small part decodes to whatever the writer chose (issue 34, V9)."""

    def dictionary_in(kind: pa.DataType) -> bool:
        return pa.types.is_dictionary(kind) or any(dictionary_in(kind.field(i).type) for i in range(kind.num_fields))

    typed = [f.name for f in schema if dictionary_in(f.type)]
    if typed:
        raise InputError(f"dictionary-encoded columns in {what} ({', '.join(typed)[:200]}): not the engine's; refused "
                         "as a likely bomb", source=location)


MAX_ROW_WINDOW_BYTES = 16 << 20
"""The most any ``ROW_WINDOW`` consecutive rows of a run may decode to (16 KiB a row on average;
the engine's rows are a small fraction of that): what a read of the rows the page shows holds."""
ROW_WINDOW = 1_024
MAX_ROW_GROUP_BYTES = 128 << 20
"""The most one row group of a run's rows (or of its Inconclusive index) may say it holds: pyarrow
decodes a row group at a time, so a row group of many rows within the window's average still
took its whole size at once (the engine writes row groups of about ``ROW_GROUP_BYTES``)."""
ROWS_CHECKED_A_BATCH = 64


def check_rows(run: TableRun, storage_options: dict | None = None) -> None:
    """Refuse (InputError naming the table) a run whose rows decode to more than
    ``MAX_ROW_WINDOW_BYTES`` in any ``ROW_WINDOW`` consecutive rows. Every part is decoded, a
    few rows at a time, and what the rows decode to is measured, not read from the parts'
    metadata: a part of a few hundred KB whose strings compress a thousandfold decoded to GBs in
    the page's first read. What an upload's vetting reads (``vet``'s ``every_run``)."""
    window: list[int] = []
    rows_seen = 0

    def refused(near: str) -> InputError:
        return InputError(f"the rows of run {run.run_key[:12]} decode to more than {MAX_ROW_WINDOW_BYTES:,} bytes in "
                          f"{ROW_WINDOW:,} rows ({near}): not rows the engine writes; refused as a likely bomb",
                          source=run.location)

    with _rows_read(run):
        dataset = _dataset(run, storage_options)
        for fragment in dataset.get_fragments():  # what a part's footer says first: one large value is refused unread
            for i in range(fragment.metadata.num_row_groups):
                group = fragment.metadata.row_group(i)
                allowed = min(MAX_ROW_GROUP_BYTES, MAX_ROW_WINDOW_BYTES * max(1, -(-group.num_rows // ROW_WINDOW)))
                if group.total_byte_size > allowed:
                    raise refused(f"row group {i} of a part says {group.total_byte_size:,} bytes for "
                                  f"{group.num_rows:,} rows")
        for batch in dataset.to_batches(batch_size=ROWS_CHECKED_A_BATCH, batch_readahead=0,
                                                               fragment_readahead=0):
            window.append(batch.nbytes)  # the batch's own rows (a slice of its row group: not its whole buffers)
            rows_seen += batch.num_rows
            del window[:-(ROW_WINDOW // ROWS_CHECKED_A_BATCH)]
            if sum(window) > MAX_ROW_WINDOW_BYTES:
                raise refused(f"near row {rows_seen:,}")


@contextlib.contextmanager
def _rows_read(run: TableRun) -> Iterator[None]:
    """A read of the run's rows, whose failure (a part that is not Parquet, a column it lacks,
    its storage unreachable) is InputError naming the table."""
    try:
        yield
    except Exception as exc:
        if not failed_read(exc, pa.ArrowException, OSError):
            raise
        raise InputError(f"cannot read the rows of run {run.run_key[:12]}: {reason_message(exc)}",
                         source=run.location) from exc


def _inconclusive(run: TableRun, storage_options: dict | None = None) -> pa.Table:
    """The run's Inconclusive trajectories (ids, intended categories, what the harness claimed of
    each): the engine's index of them (``INCONCLUSIVE_DIR``, one small file), else (or
    where an older index lacks the claims) a filtered read of the table's rows."""
    fs, index = table_file(run.location, options_of(run, storage_options), INCONCLUSIVE_DIR,
                            f"run_key={check_run_key(run.run_key, 'the run', run.location)}", "part-0.parquet")
    with _rows_read(run):
        if fs.exists(index):
            import pyarrow.parquet as pq  # optional: the dask extra

            with fs.open(index, "rb") as fh:
                index_file = pq.ParquetFile(fh)
                # only the columns read here (a column the engine never writes is never decoded), and
                # no row group past what one may hold
                columns = [c for c in INDEX_COLUMNS if c in index_file.schema_arrow.names]
                check_plain_types(index_file.schema_arrow, f"the Inconclusive index of run {run.run_key[:12]}",
                                  run.location)
                for i in range(index_file.metadata.num_row_groups):
                    if index_file.metadata.row_group(i).total_byte_size > MAX_ROW_GROUP_BYTES:
                        raise InputError(f"the Inconclusive index of run {run.run_key[:12]} says a row group holds "
                                         f"more than {MAX_ROW_GROUP_BYTES:,} bytes: not the engine's; refused as a "
                                         "likely bomb", source=run.location)
                found = index_file.read(columns=columns) if "lenient_safe" in columns else None
            if found is not None:
                return found
        return _dataset(run, storage_options).to_table(columns=list(INDEX_COLUMNS),
                                                       filter=ds.field("status") == INCONCLUSIVE)


INDEX_COLUMNS = ("trajectory_id", "intended_category", "lenient_safe")
"""What the Inconclusive index holds of each trajectory (all that is read of it)."""


def inconclusive_ids(run: TableRun, storage_options: dict | None = None) -> list[str]:
    """The ids of the run's Inconclusive trajectories (the only ones labels apply to)."""
    return _inconclusive(run, storage_options).column("trajectory_id").to_pylist()


HEAD_BATCH_ROWS = (1_024, 16_384)
"""The bounds of the batches ``first_rows`` reads (the rows asked for, within them)."""


def first_rows(run: TableRun, columns: Sequence[str], n: int, storage_options: dict | None = None,
               status: str | None = None) -> pa.Table:
    """The run's first ``n`` rows (in file order), only ``columns``; ``status``: of that status.
    Read in batches about ``n`` rows long, one batch and one part read ahead: with pyarrow's
    defaults (batches of 131,072 rows, 16 read ahead) the first rows of a large run's part
    (≈ 64 MiB, many row groups) decoded most of it for nothing. Without a status they are read
    without pre-buffering, which fetches the columns of every row group of the part at once
    (all of it from an object store, for the first rows); a status's rows may lie anywhere in
    the part, so that read is pre-buffered (fewer, coalesced requests) as pyarrow does."""
    where = None if status is None else ds.field("status") == status
    low, high = HEAD_BATCH_ROWS
    with _rows_read(run):
        return _dataset(run, storage_options).head(
            n, columns=list(columns), filter=where, batch_size=min(max(n, low), high), batch_readahead=1,
            fragment_readahead=1, fragment_scan_options=ds.ParquetFragmentScanOptions(pre_buffer=status is not None))


def find_row(run: TableRun, trajectory_id: str, storage_options: dict | None = None) -> dict | None:
    """The run's row for one trajectory id, or None."""
    with _rows_read(run):
        rows = _dataset(run, storage_options).to_table(
            filter=ds.field("trajectory_id") == trajectory_id).to_pylist()
    return row_text(rows[0]) if rows else None


def read_trajectory(row: Mapping, storage_options: dict | None = None, *,
                    run: TableRun | None = None) -> tuple[Trajectory, RunHeader]:
    """The trajectory a row points at, read by its byte range from the run's source, and the
    run's header (its capture limit and taxonomy, for its calls' capture evidence). Refused when
    the range no longer holds that trajectory (the source changed since it was scored), and,
    for a ``run`` chosen under a root, when the source is not under that root (``source_of``)."""
    source = source_of(run, row["source"]) if run is not None else row["source"]
    storage_options = options_of(run, storage_options)
    traj = trajectory_at(source, row["offset"], row["length"], storage_options)
    if traj.id != row["trajectory_id"]:
        raise InputError(f"the source changed since it was scored: bytes {row['offset']:,}+{row['length']:,} hold "
                         f"another trajectory", source=source)
    header = run_header(source, storage_options)
    if run is not None and run.summary.get("require_proof"):  # scored with --require-proof: replayed so
        header = dataclasses.replace(header, require_proof=True)
    if run is not None:  # the proof its importer read (the copy's header line carries none)
        proof_source, proof_sha256 = summary_proof(run.summary)
        header = dataclasses.replace(header, proof_source=proof_source, proof_sha256=proof_sha256)
    return traj, header


# --- the report -------------------------------------------------------------------------------


def evaluation(run: TableRun, labelled: TableRates | None = None, storage_options: dict | None = None) -> Evaluation:
    """The table's run as an ``Evaluation`` without its trajectories (as a workspace's run is
    loaded): its ``StoredRun`` from summary.json and its header from the run's source, its
    summary the engine's (with the workspace's labels: ``labelled``, from ``rates``). Its
    ``as_dict()`` is the table's summary with the labels applied."""
    d = run.summary
    storage_options = options_of(run, storage_options)
    first = first_rows(run, ["source"], 1, storage_options)
    where = source_of(run, first.column("source")[0].as_py() if first.num_rows else absolute_location(d["source"]))
    header = dataclasses.replace(run_header(where, storage_options), source=d["source"], format=d["format"],
                                 classifier_of_record=d["classifier_of_record"])  # as the scorer settled it
    labelled = labelled if labelled is not None else rates(run, None, storage_options)
    if labelled is None:
        raise InputError("this table was written before the engine aggregated its summaries: score the run again "
                         "with --out to report it", source=run.location)
    return StoredRun.from_summary(run.run_key, d, header).evaluation(ScoreColumns.of(()), labelled.summary,
                                                                     labelled.by_category)


# --- the engine's readers: summaries, rows, a run's header and one trajectory by its bytes -------


MAX_REPLAY_BYTES = 64 << 20
"""The longest trajectory a table's replay reads (its row's byte range): a row is a table's word,
and one naming most of a large run took several times its size a replay; a longer one is replayed
by importing the run."""


def trajectory_at(source: str, offset: int, length: int, storage_options: dict | None = None):
    """One trajectory of a score table's row, read by its byte range from the run wherever it
    is (the row's ``source``: a path or fsspec URL), for replay without importing the run; a
    range past ``MAX_REPLAY_BYTES`` is refused unread."""
    if not 0 <= length <= MAX_REPLAY_BYTES or offset < 0:
        raise InputError(f"the row names bytes {offset:,}+{length:,} of its run; a table's replay reads at most "
                         f"{MAX_REPLAY_BYTES:,} bytes a trajectory (import the run to replay a longer one)",
                         source=source)
    fs, path = file_system(source, dict(storage_options or {}))
    try:
        with fs.open(path, "rb") as fh:
            fh.seek(offset)
            raw = fh.read(length)
    except FileNotFoundError as exc:
        raise InputError(missing_message(exc), source=source) from exc
    except Exception as exc:  # OSError, or a storage backend's own (an endpoint that does not answer...)
        raise InputError(f"cannot read: {error_message(exc)}{credentials_hint(exc)}", source=source) from exc
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
    import pyarrow.dataset as ds  # optional: the dask extra

    fs, path = file_system(out, dict(storage_options or {}))
    return ds.dataset(f"{path}/{TABLE_DIR}", filesystem=fs, format="parquet", partitioning="hive").to_table()


def table_run(out: str, run_key: str, storage_options: dict | None = None):
    """One run's rows of a score table (a pyarrow Table, in file order)."""
    import pyarrow.dataset as ds  # optional: the dask extra

    fs, path = file_system(out, dict(storage_options or {}))
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
        fs, fpath = file_system(absolute_location(source), dict(storage_options or {}))
        with fs.open(fpath, "rb") as fh:
            header_line, first_line, _end = read_header_line(fh, source)
    except FileNotFoundError as exc:
        raise InputError(missing_message(exc), source=source) from exc
    except LitmusReviewError:
        raise
    except Exception as exc:  # OSError, or a storage backend's own
        raise InputError(f"cannot read: {error_message(exc)}{credentials_hint(exc)}", source=source) from exc
    return canonical.parse_header(decode_header(header_line, source, first_line), source)
