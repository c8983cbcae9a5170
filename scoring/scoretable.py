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

Needs the ``dask`` extra's pyarrow and fsspec (importing this module fails without them, which
the app reports with the command to install them).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import gc
import json
import os
import posixpath
import tempfile
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds

from . import engine, table_zip
from .aggregate import (
    Claims,
    GapCounts,
    Interval,
    PhantomParts,
    Rate,
    ScoreColumns,
    Summary,
    TruncationEstimate,
    WaterfallStep,
    waterfall_of,
    with_review,
)
from .errors import InputError, StoreError
from .importers.inspect_log import VerdictMap
from .model import ReviewLabel, RunHeader, Status, Trajectory, judge_unseen
from .proof import proof_path_of
from .report import Evaluation
from .stored import StoredRun, summary_proof
from .workspace import ImportResult, Workspace
from .workspace.labels import label_refusal
from .workspace.settings import Settings

INCONCLUSIVE = Status.INCONCLUSIVE.value


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

    @property
    def aggregates(self) -> dict | None:
        """The engine's aggregates for the charts (None in a table written before they were):
        read (once per process) when asked, for a table that keeps them per run."""
        if not self.lazy:
            return self.preloaded
        return _run_file(self.location, engine.RUN_AGGREGATES_DIR, self.run_key, self.options)

    @property
    def summary(self) -> dict:
        """The run's ``score --json`` object, as the engine computed it (read, once per process,
        when asked, for a table that lists its runs in ``index.json``)."""
        if "trajectories" in self.entry:
            return self.entry
        got = _run_file(self.location, engine.SUMMARIES_DIR, self.run_key, self.options)
        if got is None:  # a run published before its summary was kept on its own
            got = dict(_summaries(self.location, self.options)).get(self.run_key)
        if got is None:
            raise InputError(f"no summary for run {self.run_key[:12]} in the table", source=self.location)
        return got

    @property
    def run_id(self) -> str:
        return self.entry["run_id"]

    @property
    def model(self) -> str:
        return self.entry["model"]

    @property
    def storage_options(self) -> dict:
        return json.loads(self.options)


def _options(run: TableRun | None, storage_options: dict | None) -> dict | None:
    """``storage_options`` when given, else those the run's table was opened with."""
    return storage_options if storage_options is not None or run is None else run.storage_options


TABLE_PROTOCOLS = engine.PROTOCOLS - {"http", "https"}
"""Where a score table is read from: the engine's protocols but HTTP (a table is a folder, which
HTTP cannot list). Anything else is refused with a message before fsspec is called."""
OBJECT_STORES = TABLE_PROTOCOLS - {"file", "local"}
"""The protocols whose fsspec backend is a package to import (s3fs, gcsfs, adlfs...): what
``warm_up`` imports ahead of the first table."""
ROOT_DEPTH = 3
"""How deep under a root score tables are looked for (a root's own folder is depth 0)."""
MAX_LISTED_TABLES = 500


def object_stores(settings: Settings) -> list[str]:
    """The protocols of the object stores a workspace's ``settings`` name (its storage profiles'
    prefixes, its score table roots that are URLs) that tables are read from; sorted, each once."""
    locations = [*settings.score_table_roots, *(p for prof in settings.storage_profiles for p in prof.prefixes)]
    return sorted({engine.protocol(loc) for loc in locations} & OBJECT_STORES)


def warm_up(settings: Settings) -> list[str]:
    """Import the fsspec backend (its file system's class) of each object store ``settings``
    name: the app's start does it in a background thread, so that the first table a server opens
    there does not wait for s3fs, aiobotocore and botocore to import. Modules only: no file
    system is made, so no credential is read and no connection started. Returns the protocols
    imported; one that fails (its package not installed) is skipped, and opening a table there
    imports it again and reports that import's own error."""
    import fsspec

    done = []
    for name in object_stores(settings):
        with contextlib.suppress(Exception):  # reported when a table is opened, by that import
            fsspec.get_filesystem_class(name)
            done.append(name)
    return done


def _fs(location: str, storage_options: dict | None = None):
    return engine._fs(engine._url(location), dict(storage_options or {}), TABLE_PROTOCOLS)


def _normal(location: str) -> tuple[str, str]:
    """(protocol, normalised path) of a location: a local path resolved (symbolic links
    followed), a URL's path with ``.`` and ``..`` folded."""
    proto = engine.protocol(location)
    if proto in ("file", "local"):
        path = location.split("://", 1)[1] if engine._URL.match(location) else location
        return "file", os.path.realpath(path)
    return proto, posixpath.normpath("/" + location.split("://", 1)[1]).lstrip("/")


def within(root: str, location: str) -> bool:
    """Whether ``location`` is ``root`` or lies under it (same protocol; a local path after its
    links are followed, so a link cannot lead out)."""
    rp, rpath = _normal(root)
    lp, lpath = _normal(location)
    if rp != lp:
        return False
    rpath = rpath.rstrip("/") or "/"
    return lpath == rpath or lpath.startswith(rpath if rpath.endswith("/") else rpath + "/")


def tables_under(roots: Sequence[str], storage_options: dict | None = None) -> list[tuple[str, str]]:
    """(root, location) of every score table (a folder holding ``summary.json``) found under the
    operator's ``roots``, down to ``ROOT_DEPTH`` (hidden folders, such as a table still being
    written, skipped; at most ``MAX_LISTED_TABLES``). A root that cannot be listed is skipped."""
    found: list[tuple[str, str]] = []
    for root in roots:
        try:
            fs, base = _fs(root, storage_options)
            base = base.rstrip("/")
            names = []
            for depth in range(ROOT_DEPTH + 1):
                names += fs.glob("/".join([base, *(["*"] * depth), engine.SUMMARY_FILE]))
        except Exception:  # an unreachable root (or one fsspec cannot list) lists nothing
            continue
        for name in sorted(names):
            folder = name.rsplit("/", 1)[0]
            rel = folder[len(base):].strip("/")
            if any(part.startswith(".") for part in rel.split("/") if part):
                continue
            location = root.rstrip("/") + ("/" + rel if rel else "")
            if within(root, location):
                found.append((root, location))
            if len(found) >= MAX_LISTED_TABLES:
                return found
    return found


def open_table(location: str, storage_options: dict | None = None, *, root: str | None = None) -> list[TableRun]:
    """The runs of the score table at ``location``: refused (InputError naming it) when it is not
    one, or one still being written, or its protocol is not one tables are read from; with
    ``root``, refused unless it lies under that root (its rows are then read only from there).
    The cyclic garbage collector is paused while the summaries are built: they are millions of
    acyclic objects at 10,000 runs, and each collection the burst set off scanned them all."""
    with _collector_paused():
        return _open_table(location, storage_options, root)


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
    engine.check_location(location, TABLE_PROTOCOLS, what="score table")
    if root is not None and not within(root, location):
        raise InputError("not under the score table roots the operator configured", source=location)
    engine.check_storage_options(location, dict(storage_options or {}))
    runs = _index(location, storage_options) or engine.open_table(location, storage_options, allowed=TABLE_PROTOCOLS)
    aggregates: list = [None] * len(runs)
    fs, path = _fs(location, storage_options)
    options = json.dumps(storage_options or {}, sort_keys=True)
    try:
        if fs.isdir(f"{path.rstrip('/')}/{engine.RUN_AGGREGATES_DIR}"):  # per run: read when the run is shown
            return [TableRun(location, key, summary, None, root, lazy=True, options=options) for key, summary in runs]
    except Exception as exc:  # OSError, or a storage backend's own
        raise InputError(f"cannot list the table: {engine._message(exc)}", source=location) from exc
    name = f"{path.rstrip('/')}/{engine.AGGREGATES_FILE}"
    try:
        present = fs.exists(name)
        if present:
            with fs.open(name, "rb") as fh:
                aggregates = json.loads(fh.read())
    except (OSError, ValueError) as exc:
        raise InputError(f"cannot read {engine.AGGREGATES_FILE}: {exc}", source=location) from exc
    if present and (not isinstance(aggregates, list) or len(aggregates) != len(runs)):
        raise InputError(f"{engine.AGGREGATES_FILE} does not hold one entry per run", source=location)
    return [TableRun(location, key, summary, agg, root, options=options)
            for (key, summary), agg in zip(runs, aggregates, strict=True)]


@functools.lru_cache(maxsize=512)
def _run_file(location: str, folder: str, run_key: str, options: str) -> dict | None:
    """One run's ``FOLDER/RUN_KEY.json`` (its aggregates or its summary; None when absent)."""
    fs, path = _fs(location, json.loads(options))
    name = f"{path.rstrip('/')}/{folder}/{run_key}.json"
    try:
        with fs.open(name, "rb") as fh:
            got = json.loads(fh.read())
    except FileNotFoundError:
        return None
    except Exception as exc:  # OSError, a bad JSON, or a storage backend's own
        raise InputError(f"cannot read {folder}/{run_key}.json: {engine._message(exc)}", source=location) from exc
    return got if isinstance(got, dict) else None


@functools.lru_cache(maxsize=2)
def _summaries(location: str, options: str) -> list[tuple[str, dict]]:
    """Every run's (key, summary) from summary.json (a run published before summaries/ was kept)."""
    return engine.open_table(location, json.loads(options), allowed=TABLE_PROTOCOLS)


def _index(location: str, storage_options: dict | None) -> list[tuple[str, dict]] | None:
    """(run key, ``{run_id, model}``) of each run from ``index.json``; None for a table without
    one (or whose index does not match its keys: summary.json is read instead)."""
    fs, path = _fs(location, storage_options)
    try:
        with fs.open(f"{path.rstrip('/')}/{engine.INDEX_FILE}", "rb") as fh:
            index = json.loads(fh.read())
        fs.info(f"{path.rstrip('/')}/{engine.SUMMARY_FILE}")  # the mark of a table (not read: 2.3 KB a run)
    except FileNotFoundError:
        return None
    except Exception as exc:  # OSError, a bad JSON, or a storage backend's own (credentials...)
        raise InputError(f"cannot read {engine.INDEX_FILE}: {engine._message(exc)}{engine._storage_hint(exc)}",
                         source=location) from exc
    if not isinstance(index, list) or not all(isinstance(e, list) and len(e) == 3 for e in index):
        return None
    return [(str(k), {"run_id": str(i), "model": str(m)}) for k, i, m in index]


def source_of(run: TableRun, source: str) -> str:
    """A row's ``source``, where its trajectory is read: refused (InputError naming the table,
    not the source) when the table was chosen under a root and the source is not under it; for
    a table uploaded as a zip (its root is the upload), the file of the source's name in it."""
    engine.check_location(source, engine.PROTOCOLS, what="run")
    if run.root is not None and not within(run.root, source):
        if (inside := table_zip.source_in_upload(run.root, source)) is not None:  # an uploaded table's run
            return inside
        raise InputError("this table's rows name a source outside its root; it is not read", source=run.location)
    return source


# --- the rates, with the workspace's labels ---------------------------------------------------


def summary_from_dict(d: Mapping) -> Summary:
    """A ``Summary`` back from its ``as_dict()`` (as the engine wrote it in aggregates.json)."""

    def interval(i: Mapping | None) -> Interval | None:
        return None if i is None else Interval(i["low"], i["high"], i["method"], i.get("design_effect"))

    def rate(r: Mapping) -> Rate:
        return Rate(r["value"], r["numerator"], r["denominator"], interval(r["wilson"]), interval(r["clustered"]))

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


def rates(run: TableRun, ws: Workspace | None, storage_options: dict | None = None) -> TableRates | None:
    """The run's rates and chart data from the engine's aggregates, with the final labels the
    workspace holds for its run key (None for a table written without aggregates)."""
    if run.aggregates is None:
        return None
    storage_options = _options(run, storage_options)
    base = summary_from_dict(run.aggregates["summary"])
    labels = ws.final_labels(run.run_key) if ws is not None else {}
    per_category = {k: summary_from_dict(v) for k, v in run.aggregates["by_category"].items()}
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
        steps = [WaterfallStep(n, r, d, t) for n, r, d, t in run.aggregates["waterfall"]]
        if steps:
            last, before = steps[-1], steps[-2].rate if len(steps) > 1 else None
            value = summary.reviewed.value
            delta = None if value is None or before is None else 100 * (value - before)
            steps[-1] = WaterfallStep(last.name, value, delta, summary.reviewed.denominator)
    return TableRates(summary, per_category, steps, sum(1 for t in ids if t in labels))


# --- rows, read with filters ------------------------------------------------------------------


def _dataset(run: TableRun, storage_options: dict | None = None) -> ds.Dataset:
    """The run's own partition of the table (only its parts are listed)."""
    fs, path = _fs(run.location, _options(run, storage_options))
    return ds.dataset(f"{path.rstrip('/')}/{engine.TABLE_DIR}/run_key={run.run_key}", filesystem=fs,
                      format="parquet")


def _inconclusive(run: TableRun, storage_options: dict | None = None) -> pa.Table:
    """The run's Inconclusive trajectories (ids, intended categories, what the harness claimed of
    each): the engine's index of them (``engine.INCONCLUSIVE_DIR``, one small file), else (or
    where an older index lacks the claims) a filtered read of the table's rows."""
    fs, path = _fs(run.location, _options(run, storage_options))
    index = f"{path.rstrip('/')}/{engine.INCONCLUSIVE_DIR}/run_key={run.run_key}/part-0.parquet"
    if fs.exists(index):
        import pyarrow.parquet as pq

        with fs.open(index, "rb") as fh:
            found = pq.read_table(fh)
        if "lenient_safe" in found.column_names:
            return found
    return _dataset(run, storage_options).to_table(
        columns=["trajectory_id", "intended_category", "lenient_safe"], filter=ds.field("status") == INCONCLUSIVE)


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
    return _dataset(run, storage_options).head(
        n, columns=list(columns), filter=where, batch_size=min(max(n, low), high), batch_readahead=1,
        fragment_readahead=1, fragment_scan_options=ds.ParquetFragmentScanOptions(pre_buffer=status is not None))


def find_row(run: TableRun, trajectory_id: str, storage_options: dict | None = None) -> dict | None:
    """The run's row for one trajectory id, or None."""
    rows = _dataset(run, storage_options).to_table(
        filter=ds.field("trajectory_id") == trajectory_id).to_pylist()
    return engine.row_text(rows[0]) if rows else None


def read_trajectory(row: Mapping, storage_options: dict | None = None, *,
                    run: TableRun | None = None) -> tuple[Trajectory, RunHeader]:
    """The trajectory a row points at, read by its byte range from the run's source, and the
    run's header (its capture limit and taxonomy, for its calls' capture evidence). Refused when
    the range no longer holds that trajectory (the source changed since it was scored), and,
    for a ``run`` chosen under a root, when the source is not under that root (``source_of``)."""
    source = source_of(run, row["source"]) if run is not None else row["source"]
    storage_options = _options(run, storage_options)
    traj = engine.read_trajectory(source, row["offset"], row["length"], storage_options)
    if traj.id != row["trajectory_id"]:
        raise InputError(f"the source changed since it was scored: bytes {row['offset']:,}+{row['length']:,} hold "
                         f"another trajectory", source=source)
    header = engine.run_header(source, storage_options)
    if run is not None and run.summary.get("require_proof"):  # scored with --require-proof: replayed so
        header = dataclasses.replace(header, require_proof=True)
    if run is not None:  # the proof its importer read (the copy's header line carries none)
        proof_source, proof_sha256 = summary_proof(run.summary)
        header = dataclasses.replace(header, proof_source=proof_source, proof_sha256=proof_sha256)
    return traj, header


# --- labels -----------------------------------------------------------------------------------


class _TableLabels(Workspace):
    """The workspace, taking labels for a table's run: whether a trajectory takes a label is
    read from the table (the run's rows are not in the workspace); the label events are the
    workspace's own, keyed by run key and trajectory id."""

    def __init__(self, ws: Workspace, run: TableRun, storage_options: dict | None) -> None:
        super().__init__(ws.path, busy_timeout_s=ws.busy_timeout_s)
        self._table, self._options = run, _options(run, storage_options)

    def _check_labellable(self, run_key: str, trajectory_id: str) -> None:
        if self.run(run_key) is not None:
            # The run is imported: the workspace's own rows decide, never a table's word for them
            # (a table naming an imported run's key could otherwise call any trajectory Inconclusive).
            super()._check_labellable(run_key, trajectory_id)
            return
        row = find_row(self._table, trajectory_id, self._options)
        if row is None:
            raise InputError(f"no trajectory {trajectory_id!r} in run {run_key[:12]}", source=self._table.location)
        why = label_refusal(trajectory_id, row["status"], row.get("reason"))
        if why is None and judge_unseen(row["status"], row.get("reason")):
            # A table's reviewed rate is built from its stored summary, which counts Inconclusive
            # labels only: a label here would count in the workspace's rate and not in the table's.
            why = (f"trajectory {trajectory_id!r} is UNSCORED judge_did_not_see_full_surface: import the run into the "
                   "workspace to label it from the judge did not see queue (a score table does not count such labels)")
        if why is not None:
            raise StoreError(why)


def add_label(ws: Workspace, run: TableRun, trajectory_id: str, reviewer: str, label: ReviewLabel | str,
              note: str = "", storage_options: dict | None = None) -> int:
    """A reviewer's label on a table's trajectory, stored in the workspace as an imported run's
    (``Workspace.add_label``); refused unless the table says it is Inconclusive."""
    return _TableLabels(ws, run, storage_options).add_label(run.run_key, trajectory_id, reviewer, label, note)


# --- the report -------------------------------------------------------------------------------


def evaluation(run: TableRun, labelled: TableRates | None = None, storage_options: dict | None = None) -> Evaluation:
    """The table's run as an ``Evaluation`` without its trajectories (as a workspace's run is
    loaded): its ``StoredRun`` from summary.json and its header from the run's source, its
    summary the engine's (with the workspace's labels: ``labelled``, from ``rates``). Its
    ``as_dict()`` is the table's summary with the labels applied."""
    d = run.summary
    storage_options = _options(run, storage_options)
    first = first_rows(run, ["source"], 1, storage_options)
    where = source_of(run, first.column("source")[0].as_py() if first.num_rows else engine._url(d["source"]))
    header = dataclasses.replace(engine.run_header(where, storage_options), source=d["source"], format=d["format"],
                                 classifier_of_record=d["classifier_of_record"])  # as the scorer settled it
    labelled = labelled if labelled is not None else rates(run, None, storage_options)
    if labelled is None:
        raise InputError("this table was written before the engine aggregated its summaries: score the run again "
                         "with --out to report it", source=run.location)
    return StoredRun.from_summary(run.run_key, d, header).evaluation(ScoreColumns.of(()), labelled.summary)


# --- a table's run, brought into the workspace ----------------------------------------------


def import_into(ws: Workspace, run: TableRun, storage_options: dict | None = None) -> ImportResult:
    """Make a table's run a run like any other of the workspace (Safe rates, Trajectories,
    Review, Report, ``score KEY``): its source is imported with the options it was scored with
    (side log, verdict map, ``--require-proof``), so the workspace scores the same bytes through the same pipeline,
    and the run key must come out as the table's (checked: labels given through the table carry
    over, being keyed by it). A source that is a URL is fetched first, with its side log and
    proof. Refused for a run scored with a re-classifier (the app runs no code a table names)
    and, for a table chosen under a root, for sources outside it (``source_of``)."""
    d = run.summary
    storage_options = _options(run, storage_options)
    if d.get("reclassifier"):
        raise InputError("this run was scored with a re-classifier: import its file with `litmus-review import "
                         "--reclassifier …` (the app runs no re-classifier a table names)", source=run.location)
    source = source_of(run, engine._url(d["source"]))
    side = (d.get("side_log") or {}).get("source")
    side = source_of(run, engine._url(side)) if side else None
    verdict_map = VerdictMap.parse(d["verdict_map"]) if d.get("verdict_map") else None
    with tempfile.TemporaryDirectory(dir=ws._scratch()) as tmp:
        # A proof side log only where the engine read one (its summary names it): the run key
        # names the proof, so fetching one the engine did not read would give another key.
        path = _local_copy(source, Path(tmp), storage_options, with_proof=bool(d.get("proof")))
        payloads = _local_copy(side, Path(tmp), storage_options) if side else None
        result = ws.import_run(path, fmt=d.get("format") or "auto", payloads=payloads, verdict_map=verdict_map,
                               original_name=d.get("original_name") or d["source"],
                               require_proof=bool(d.get("require_proof")))
    if result.run_key != run.run_key:
        raise StoreError(f"the workspace scored this run's source under another key ({result.run_key[:12]}, the "
                         f"table says {run.run_key[:12]}): the source changed since the table was written, or "
                         "it was scored with options the table does not record; both runs are kept")
    return result


def _local_copy(url: str, folder: Path, storage_options: dict | None, *, with_proof: bool = False) -> Path:
    """A local path holding ``url``'s bytes: a local file itself; a URL's file fetched into
    ``folder`` under its own name (and, ``with_proof``, the proof side log beside it, if any)."""
    if engine.protocol(url) in ("file", "local"):
        return Path(url.split("://", 1)[1] if "://" in url else url)
    fs, path = engine._fs(url, dict(storage_options or {}))
    dest = folder / posixpath.basename(path.rstrip("/"))
    try:
        fs.get_file(path, str(dest))
        # by string: a URL's path is not a file-system path (Path would fold its "//")
        proof = posixpath.join(posixpath.dirname(path), proof_path_of(posixpath.basename(path)).name)
        if with_proof and fs.exists(proof):
            fs.get_file(proof, str(proof_path_of(dest)))
    except (OSError, ValueError) as exc:
        raise InputError(f"cannot fetch the run: {type(exc).__name__}: {exc}", source=url) from exc
    return dest
