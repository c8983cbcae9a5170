"""The pages' API to a workspace: typed read models and the few acts a reviewer takes.

The pages (``pages/``) import this module, ``scoring.model``, ``scoring.errors`` and
``scoring.text`` only (``tests/test_layers.py`` holds them to it; the Score tables page also
reads the Dask engine's Parquet tables through ``scoring.dask_engine``): nothing here hands them a
stored encoding (comma-joined lists, JSON evidence) or a database row. Every function takes the
workspace's database path; a ``Workspace`` is cheap to make (its schema is checked once per
process), and every call opens its own connection.

Read models are frozen dataclasses. A run's trajectory table stays a pandas frame (a run can
hold hundreds of thousands of rows; the pages filter and sort it): ``TrajectorySummary``
documents its columns, and ``has_any_tool``/``tool_names`` read its one list column.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any, Unpack

import pandas as pd

from .. import rows as codec
from ..aggregate import (
    NO_GROUP,
    PairedDifference,
    Rate,
    ScoreColumns,
    Summary,
    WaterfallStep,
    by_category,
    paired_difference,
    size_quantiles,
    summarize_by,
    waterfall,
)
from ..agreement import Agreement
from ..dask_engine import table_locations, table_zip, vetting_process
from ..errors import BLOCKING_REASONS, CheckInterrupted, InputError, ReasonCode, UploadWaiting
from ..export_files import (
    META_COLUMNS,
    PairedComparison,
    RunMeta,
    export_file_name,
    exported_now,
    paired_csv,
    paired_rows,
    run_pairs,
)
from ..files import count_lines
from ..importers import formats
from ..importers import holds_runs as _holds_runs
from ..importers.inspect_log import PRESETS, VerdictMap, refusal_judge
from ..model import Gap, Rejection, ReviewLabel, RunHeader, Status, Trajectory
from ..recapture import side_log_beside
from ..report import Evaluation, category_figures
from ..request import ScoringOptions, ScoringRequest, paired_side_log
from ..score import SCORER_VERSION, assess_calls
from ..settle import unlisted_note
from ..stored import StoredRun, workspace_names
from ..suggest import SuggestionTrust
from ..suggest import suggestion_trust as _suggestion_trust
from ..transcript import (
    HarnessEvent,
    HarnessScore,
    ToolDefinition,
    metadata,
    role_names,
    scores,
    timeline,
    tool_definitions,
)
from . import Workspace
from .evaluations import evaluation as _evaluation
from .importing import ImportResult
from .labels import Reader
from .queue import QueueMode, QueueSort, has_any_tool, next_pending, review_queue, tool_names
from .reads import read_back
from .schema import BUSY_TIMEOUT_S as _SCHEMA_BUSY_TIMEOUT_S
from .schema import default_db_path
from .search import search_run
from .settings import read_settings

__all__ = [
    "BUSY_TIMEOUT_S", "META_COLUMNS", "NO_GROUP", "ROOT_LISTING_FRESH_S", "ROOT_LISTING_WAIT_S", "SCORER_VERSION",
    "SUMMARY_COLUMNS", "VERDICT_PRESETS", "WARM_UP_THREAD", "Agreement", "CallReplay", "Evaluation", "HarnessEvent",
    "HarnessScore", "ImportReport", "LabelEvent", "PairedComparison", "PairedDifference", "QueueMode", "QueueSort",
    "Rate", "Reader", "Replay", "RootListing", "RunInfo", "RunMeta", "ScoreColumns", "ScoringRequest",
    "SuggestionTrust", "Summary",
    "TableChoice", "ToolDefinition", "TrajectorySummary", "Undone", "UploadedTables", "WaterfallStep", "add_label",
    "add_labels", "adjudicate", "adjudicators", "adjudicators_file", "agreement", "argument_sizes", "breakdowns",
    "category_figures", "check_workspace", "count_lines", "current_labels", "default_db_path", "disputed",
    "evaluation", "export_file_name", "export_final_labels", "export_labels", "exported_now", "final_labels",
    "formats", "has_any_tool", "history", "import_run", "label_version", "metadata", "named_evaluation",
    "next_pending", "output_previews", "paired", "paired_csv", "paired_rows", "parse_verdict_map", "replay",
    "replay_of", "review_queue", "role_names", "root_listing", "root_tables", "run", "run_names", "run_pairs", "runs",
    "score_columns", "scores", "scores_version", "search", "side_log_beside", "size_quantiles", "suggestion_trust",
    "table_roots", "tables_under", "timeline", "tool_definitions", "tool_names", "trajectory_table", "undo_last",
    "unlisted_note", "unpack_table", "uploaded_tables", "warm_up_storage", "workspace_folder"
]


BUSY_TIMEOUT_S = _SCHEMA_BUSY_TIMEOUT_S
"""How long the pages' writes wait for another writer before a clear error."""


def _ws(db: str | Path) -> Workspace:
    return Workspace(db, busy_timeout_s=BUSY_TIMEOUT_S)


# --- runs ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RunInfo:
    """An imported run, as the run pickers and the Runs table show it."""

    run_key: str
    """The run's identity in the workspace (the content SHA-256; see ``Evaluation.as_dict``)."""
    run_id: str
    """The id the run's file gave it (hostile text: reveal before showing)."""
    model: str
    name: str
    """The run's name in words, "model · task · variant" and how it was scored, distinct among
    the workspace's runs (``names``; plain text its file wrote most of: escape it where it is
    shown as markup)."""
    format: str
    evidence_standard: str
    side_log: bool
    """Scored with a payload side log joined."""
    trajectories: int
    tool_calls: int
    rejected: int
    """Records read but not imported (each is listed in the evaluation's rejections)."""
    run_status: str
    """How the harness says the run ended ("" where it does not say)."""
    imported_at: str
    """ISO 8601, UTC."""
    source: str
    """The path the run was imported from."""
    run_status_detail: str = ""
    """What the harness recorded with the status (its error message, samples written of planned)."""
    scorer_version: str = SCORER_VERSION
    """The scorer version its statuses were computed under (its own: older until it is rescored)."""
    original_held: bool = True
    """The workspace has a copy of its original bytes to rescore it from (present: a rescore
    still checks its hash)."""
    verdict_map: str | None = None
    """The Inspect verdict map it was scored with (``VerdictMap`` as text), if any."""
    categories_outdated: bool = False
    """Its categories were read otherwise than today's importers read them, and the workspace
    has not re-derived them (its original bytes gone or changed, or the workspace read-only):
    they are as then read."""

    @property
    def stale(self) -> bool:
        """Scored under another scorer version: every status and rate of it is that version's."""
        return self.scorer_version != SCORER_VERSION

    @classmethod
    def _of(cls, r: dict, name: str | None = None) -> RunInfo:
        stored = StoredRun.from_row(r)
        return cls(run_key=r["run_key"], run_id=r["run_id"], model=r["model"], name=name or stored.name,
                   format=r["format"],
                   evidence_standard=r["evidence_standard"], side_log=bool(r["payloads_path"]),
                   trajectories=r["trajectories"], tool_calls=r["tool_calls"],
                   rejected=r["records_seen"] - r["trajectories"], run_status=r.get("run_status") or "",
                   imported_at=r["imported_at"], source=r["source"] or "",
                   run_status_detail=r.get("run_status_detail") or "", scorer_version=stored.scorer_version,
                   original_held=bool(stored.original_path) and os.path.isfile(stored.original_path),
                   verdict_map=stored.verdict_map,
                   categories_outdated=stored.categories_outdated)


def runs(db: str | Path) -> list[RunInfo]:
    """Every imported run, newest first."""
    rows = _ws(db).runs()
    names = workspace_names(rows)
    return [RunInfo._of(r, names[r["run_key"]]) for r in rows]


def run(db: str | Path, run_key: str) -> RunInfo | None:
    r = _ws(db).run(run_key)
    return None if r is None else RunInfo._of(r, run_names(db).get(run_key))


def _named_run(db: str | Path, row: dict) -> RunInfo:
    return RunInfo._of(row, run_names(db).get(row["run_key"]))


def run_names(db: str | Path) -> dict[str, str]:
    """Every imported run's name (``RunInfo.name``) by run key: distinct in the workspace, the
    same at every door and on every reload while the workspace holds the same runs."""
    return _ws(db).run_names()


@dataclass(frozen=True, slots=True)
class ImportReport:
    """What an import did."""

    run: RunInfo
    already_present: bool
    """The same content (and side log, map, classifier) was imported before: nothing changed."""
    rejected: tuple[Rejection, ...]
    """The first rejected records (``settle.REJECTIONS_LISTED``)."""
    side_log: str | None = None
    """The side log joined (its path as given), if any."""
    side_log_how: str = ""
    """How it was paired: "given", or "found beside it" (``RUN.payloads.jsonl`` beside ``RUN``)."""
    rescored_from: str | None = None
    """The run was present under this older scorer version and was rescored from the bytes given."""
    rejected_count: int = 0
    """How many records were rejected, listed or not."""


VERDICT_PRESETS: dict[str, str] = {name: str(vmap) for name, vmap in PRESETS.items()}
"""The Inspect verdict map presets (``--inspect-verdict PRESET``): name → the rules they stand for."""


def suggestion_trust(run: RunInfo) -> SuggestionTrust:
    """Whether the Review page shows the suggestion for ``run``'s traces: only where, for its kind
    of harness (its format, and a refusal judge's verdict map), the suggestion agreed with a
    person's labels more often than a fixed answer did (``scoring.suggest``)."""
    judged = bool(run.verdict_map) and refusal_judge(VerdictMap.parse(run.verdict_map or "")) is not None
    return _suggestion_trust(run.format, judged)


def parse_verdict_map(spec: str) -> VerdictMap:
    """A verdict map as ``--inspect-verdict`` reads it (a preset, ``PRESET@SCORER``, or rules);
    ``SpecError`` saying what is wrong."""
    return VerdictMap.parse(spec)


def import_run(db: str | Path, path: str | Path, request: ScoringRequest | None = None, *, progress=None,
               original_name: str | None = None, pair_side_log: bool = True,
               **options: Unpack[ScoringOptions]) -> ImportReport:
    """Import (and score) a run file as ``litmus-review import`` does (``Workspace.import_run``),
    as ``request`` (or ``options``: a verdict map as ``--inspect-verdict`` reads it) asks: with
    no side log given, ``RUN.payloads.jsonl`` beside it is joined (unless ``pair_side_log`` is
    off) and the report says so."""
    request = ScoringRequest.of(request, **options)
    request, how = paired_side_log(request, str(path)) if pair_side_log else \
        (request, "given" if request.payloads is not None else "")
    res: ImportResult = _ws(db).import_run(path, request, progress=progress, original_name=original_name)
    return ImportReport(run=_named_run(db, res.run), already_present=res.already_present, rejected=res.rejected,
                        rejected_count=res.rejected_count, side_log=request.payloads, side_log_how=how,
                        rescored_from=res.rescored.was if res.rescored is not None and res.rescored.done else None)


def import_runs(db: str | Path, path: str | Path, request: ScoringRequest | None = None, *, progress=None,
                original_name: str | None = None, **options: Unpack[ScoringOptions]) -> list[ImportReport]:
    """Import every run a path holds (an AgentDojo run directory, or a zip of one, holds one
    per pipeline and attack); see ``Workspace.import_runs``."""
    results = _ws(db).import_runs(path, ScoringRequest.of(request, **options), progress=progress,
                                  original_name=original_name)
    names = run_names(db)
    return [ImportReport(run=RunInfo._of(r.run, names.get(r.run_key)), already_present=r.already_present,
                         rejected=r.rejected, rejected_count=r.rejected_count) for r in results]


def holds_runs(path: str | Path) -> bool:
    """Whether a path is an AgentDojo run directory (a folder, or a zip of one): several runs."""
    try:
        return _holds_runs(path)
    except OSError:
        return False  # unreadable: import_run says so, with the path


def workspace_folder(db: str | Path) -> Path:
    """The folder beside the database where the workspace keeps its files (and the rubric)."""
    return _ws(db).files


# --- scores --------------------------------------------------------------------------------


def score_columns(db: str | Path, run_key: str) -> ScoreColumns:
    """What the aggregates read of a run's scores (fixed at import: cache it per run)."""
    return _ws(db).score_columns(run_key)


def evaluation(db: str | Path, run_key: str, scored: ScoreColumns | None = None, *,
               reader: Reader | None) -> Evaluation:
    """The run's evaluation with the reviewers' current final labels, as ``reader`` may know them
    (``Reader``: a page's reader is its session's; None: every label, for a caller that shows no
    reviewer anything)."""
    return _evaluation(_ws(db), run_key, scored, reader=reader)


def named_evaluation(db: str | Path, ev: Evaluation) -> Evaluation:
    """``ev`` named as the workspace names its run now (another run imported since may have
    made its name take its import time: ``names.unique_names``)."""
    name = run_names(db).get(ev.run.content_sha256, "")
    return ev if ev.workspace_name == name else replace(ev, workspace_name=name)


def breakdowns(db: str | Path, run_key: str, ev: Evaluation, *,
               reader: Reader | None) -> tuple[list[WaterfallStep], dict[str, Summary]]:
    """(the waterfall from the lenient to the reviewed rate, per-category summaries) of ``ev``
    (evaluated for the same ``reader``)."""
    labels = _ws(db).final_labels(run_key, reader=reader)
    per_category = ev.by_category if ev.by_category is not None else summarize_by(ev.scored, by_category, labels)
    return waterfall(ev.scored, labels, ev.summary), dict(per_category)


def paired(a: Evaluation, b: Evaluation) -> PairedDifference:
    """B's strict safe rate minus A's, paired by task."""
    return paired_difference(a.scored, b.scored)


def argument_sizes(db: str | Path, run_key: str) -> list[int]:
    """Every tool call's argument size (raw where recorded, else captured), in no order."""
    return _ws(db).call_sizes(run_key)


# --- trajectories --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TrajectorySummary:
    """One row of ``trajectory_table`` (its columns are these fields, in this order)."""

    trajectory_id: str
    task_id: str
    status: str
    """A ``Status`` value."""
    reason: str | None
    """UNSCORED: the first blocking reason's code."""
    intended_category: str | None
    fired_category: str | None
    termination: str
    tool_call_count: int
    max_raw_bytes: int
    tools: str | None
    """The distinct tools called, in a stored encoding: read it with ``tool_names``/``has_any_tool``."""
    suggestion: str | None
    """Inconclusive: the evidence's hint (a ``ReviewLabel`` value; never a label)."""
    model: str | None


SUMMARY_COLUMNS = tuple(f.name for f in fields(TrajectorySummary))


def trajectory_table(db: str | Path, run_key: str) -> pd.DataFrame:
    """A run's trajectories, one ``TrajectorySummary`` per row, in file order (no argument text)."""
    return pd.DataFrame.from_records(_ws(db).trajectory_table(run_key, SUMMARY_COLUMNS), columns=SUMMARY_COLUMNS)


def output_previews(db: str | Path, run_key: str, trajectory_ids: Sequence[str]) -> list[str]:
    """The first characters of each trajectory's final output (``rows.PREVIEW_CHARS``), in the
    order of ``trajectory_ids``: for the rows a table shows."""
    found = _ws(db).output_previews(run_key, trajectory_ids)
    return [found.get(tid) or "" for tid in trajectory_ids]


def search(db: str | Path, run_key: str, query: str) -> frozenset[str]:
    """Ids of the trajectories whose record or joined side-log payload contains ``query``."""
    return frozenset(search_run(_ws(db), run_key, query))


@dataclass(frozen=True, slots=True)
class CallReplay:
    """One tool call of a replay: what scoring found at import, and what its capture shows."""

    scored_gaps: tuple[ReasonCode, ...] | None
    """The gaps scoring found in this call's capture when the run was scored (stored at
    import): what the trajectory's status rests on. None for rows that did not record them."""
    complete: bool
    """The capture was proven complete when scored (no blocking gap)."""
    surface: str | None
    """The full argument text where the capture proves it (decoded or recaptured)."""
    recovered_from: str | None
    """``"raw_text"`` where the surface came from the raw text rather than the capture."""
    gaps: tuple[Gap, ...]
    """The capture's gaps with their details (for display)."""
    cured: tuple[Gap, ...]
    """Gaps of the capture itself that a proven raw text made irrelevant."""
    rules_differ: bool
    """The rules of this version find other blocking gaps than scoring did (scored before a
    rule change): the status shown is the stored one."""


@dataclass(frozen=True, slots=True)
class Replay:
    """A trajectory as it was scored: the full record, its stored score and the evidence."""

    trajectory: Trajectory
    """Read back from the workspace's copy by byte range (side-log payloads joined)."""
    status: Status
    reason: ReasonCode | None
    classifier: str
    """The classifier whose verdict decided ("" where none did)."""
    classifier_evidence: tuple[str, ...]
    """Why the classifier decided as it did (for UNSAFE: what fired)."""
    suggestion: ReviewLabel | None
    suggestion_evidence: tuple[str, ...]
    final_output_preview: str
    calls: tuple[CallReplay, ...]
    """One per ``trajectory.tool_calls``, in order."""
    proof_read: bool = False
    """The run's importer read and joined a proof side log (``RunHeader.proof_read``): only then
    are the trajectory's ``proof`` facts shown as a proof recorded at the source (a canonical
    file's own ``extra`` may name one)."""


def replay(db: str | Path, run_key: str, trajectory_id: str) -> Replay:
    """The trajectory with what was scored (stored at import) and its calls' capture evidence."""
    ws = _ws(db)
    run_row = ws._run_or_raise(run_key)
    found = ws.trajectory_rows(run_key, "trajectory_id = ?", [trajectory_id])
    if not found:
        raise InputError(f"no trajectory {trajectory_id!r} in run {run_row['run_id']!r}", source=str(ws.path))
    return replay_of(read_back(run_row, found[0]), ws.header(run_key), found[0])


def replay_of(t: Trajectory, header: RunHeader, stored: Mapping[str, Any]) -> Replay:
    """A replay of ``t`` from its stored row (``stored``: its ``scoring.rows`` columns by name,
    from the workspace or a score table) under its run's ``header``."""
    captures = assess_calls(t, header)
    scored = None if stored["call_gaps"] is None else codec.call_gaps(stored["call_gaps"], len(t.tool_calls))
    calls = []
    for i, cap in enumerate(captures):
        live = {g.reason for g in cap.blocking}
        gaps = scored[i] if scored is not None and i < len(scored) else None
        stored_blocking = None if gaps is None else {g for g in gaps if g in BLOCKING_REASONS}
        calls.append(CallReplay(
            scored_gaps=gaps, complete=cap.is_complete if stored_blocking is None else not stored_blocking,
            surface=cap.surface, recovered_from=cap.recovered_from, gaps=cap.gaps, cured=cap.cured,
            rules_differ=stored_blocking is not None and stored_blocking != live))
    return Replay(
        trajectory=t, status=Status(stored["status"]),
        reason=ReasonCode(stored["reason"]) if stored["reason"] else None,
        classifier=stored["classifier"] or "", classifier_evidence=codec.evidence(stored["classifier_evidence"]),
        suggestion=ReviewLabel(stored["suggestion"]) if stored["suggestion"] else None,
        suggestion_evidence=codec.evidence(stored["suggestion_evidence"]),
        final_output_preview=stored["final_output_preview"] or "", calls=tuple(calls), proof_read=header.proof_read)


# --- labels --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LabelEvent:
    """One event of a run's label history (append-only)."""

    id: int
    trajectory_id: str
    reviewer: str
    action: str
    """``label``, ``adjudicate`` or ``undo``."""
    label: str | None
    """A ``ReviewLabel`` value (None for an undo)."""
    note: str
    created_at: str
    batch_id: str | None
    """The bulk act this event belongs to, if any."""


@dataclass(frozen=True, slots=True)
class Undone:
    """What ``undo_last`` withdrew."""

    trajectory_ids: tuple[str, ...]
    label: str
    batch_id: str | None


def label_version(db: str | Path, run_key: str) -> int:
    """How many label events the run has (changes with every label, bulk act or undo)."""
    return _ws(db).label_count(run_key)


def scores_version(db: str | Path, run_key: str) -> str:
    """A token that changes whenever a rescore rewrites a run's scores or sets labels aside
    (``Labels.scores_version``): a cache of anything read from its rows is keyed by it."""
    return _ws(db).scores_version(run_key)


def history(db: str | Path, run_key: str, *, reader: Reader | None) -> list[LabelEvent]:
    """The run's label events, those ``reader`` may know (blind: its own, and others' on the
    traces it labelled)."""
    return [LabelEvent(id=e["id"], trajectory_id=e["trajectory_id"], reviewer=e["reviewer"], action=e["action"],
                       label=e["label"], note=e["note"] or "", created_at=e["created_at"], batch_id=e.get("batch_id"))
            for e in _ws(db).history(run_key, reader=reader)]


def current_labels(db: str | Path, run_key: str, *, reader: Reader | None) -> dict[str, dict[str, ReviewLabel]]:
    """trajectory id → reviewer → that reviewer's current label, as ``reader`` may know them."""
    return _ws(db).current_labels(run_key, reader=reader)


def final_labels(db: str | Path, run_key: str, *, reader: Reader | None) -> dict[str, ReviewLabel]:
    return _ws(db).final_labels(run_key, reader=reader)


def disputed(db: str | Path, run_key: str, *, reader: Reader | None) -> list[str]:
    """The traces whose reviewers disagree, as ``reader`` may know them (an adjudicator: all)."""
    return _ws(db).disputed(run_key, reader=reader)


def agreement(db: str | Path, run_key: str, *, reader: Reader | None) -> Mapping[str, Agreement]:
    """Agreement between reviewers over the traces ``reader`` may know others' labels on."""
    return _ws(db).agreement(run_key, reader=reader)


def add_label(db: str | Path, run_key: str, trajectory_id: str, reviewer: str, label: ReviewLabel | str,
              note: str = "") -> int:
    return _ws(db).add_label(run_key, trajectory_id, reviewer, label, note)


def adjudicators_file(db: str | Path) -> Path:
    """The roles file: one adjudicator's name a line, in the folder beside the database."""
    return _ws(db).adjudicators_file


def adjudicators(db: str | Path) -> frozenset[str]:
    """The reviewers with the adjudicator role (the workspace's adjudicators file)."""
    return _ws(db).adjudicators()


def adjudicate(db: str | Path, run_key: str, trajectory_id: str, adjudicator: str, label: ReviewLabel | str,
               note: str = "") -> int:
    """Resolve a disputed trace (an ``adjudicate`` event); refused without the role."""
    return _ws(db).adjudicate(run_key, trajectory_id, adjudicator, label, note)


def add_labels(db: str | Path, run_key: str, trajectory_ids: Sequence[str], reviewer: str, label: ReviewLabel | str,
               note: str = "") -> str:
    return _ws(db).add_labels(run_key, trajectory_ids, reviewer, label, note)


def undo_last(db: str | Path, run_key: str, reviewer: str) -> Undone | None:
    u = _ws(db).undo_last(run_key, reviewer)
    return None if u is None else Undone(tuple(u["trajectory_ids"]), u["label"], u["batch_id"])


def export_labels(db: str | Path, run_key: str, fmt: str = "jsonl", *, reader: Reader | None,
                  run: RunMeta | None = None, exported_at: str | None = None) -> str:
    """The run's label events ``reader`` may know, as a labels file (``labels import`` reads it):
    the event log (undo and adjudication events included), each event naming its run (``run``:
    as the page names it; else the imported run's id)."""
    return _ws(db).export_labels(run_key, fmt, reader=reader, run=run, exported_at=exported_at)


def export_final_labels(db: str | Path, run_key: str, *, reader: Reader | None, run: RunMeta | None = None,
                        exported_at: str | None = None) -> str:
    """The run's final labels ``reader`` may know as CSV: one row per labelled trace
    (``Labels.final_label_rows``)."""
    return _ws(db).export_final_labels(run_key, reader=reader, run=run, exported_at=exported_at)




# --- score tables (the Dask engine's Parquet tables): labels stay in the workspace -----------


def table_rates(db: str | Path, run: Any, *, reader: Reader | None) -> Any:
    """A score table's run (``table_reader.TableRun``) with this workspace's labels applied, as
    ``reader`` may know them (``table_reader.rates``); needs the dask extra."""
    from ..dask_engine import table_reader  # optional: score tables need the dask extra (pyarrow, fsspec)

    return table_reader.rates(run, _ws(db), reader=reader)


def table_add_label(db: str | Path, run: Any, trajectory_id: str, reviewer: str, label: ReviewLabel | str) -> int:
    """A reviewer's label on a score table's Inconclusive trajectory, kept in this workspace
    under the table's run key (``table_workspace.add_label``)."""
    from ..dask_engine import table_workspace  # optional: score tables need the dask extra (pyarrow, fsspec)

    return table_workspace.add_label(_ws(db), run, trajectory_id, reviewer, label)


def import_table_run(db: str | Path, run: Any) -> ImportReport:
    """A score table's run made a run of this workspace like any other (``table_workspace.import_into``:
    its source scored here with its options, under the table's run key)."""
    from ..dask_engine import table_workspace  # optional: score tables need the dask extra (pyarrow, fsspec)

    res = table_workspace.import_into(_ws(db), run)
    return ImportReport(run=_named_run(db, res.run), already_present=res.already_present, rejected=res.rejected,
                        rejected_count=res.rejected_count)


def check_workspace(db: str | Path) -> None:
    """DatabaseUnavailableError (the CLI's message) unless the workspace is sound: SQLite's
    quick_check, its schema and tables (``Connection.check_workspace``)."""
    _ws(db).check_workspace()


def table_roots(db: str | Path) -> tuple[str, ...]:
    """The folders the operator allows score tables to be chosen from (the workspace's
    settings: ``score_table_roots``)."""
    return read_settings(db).score_table_roots


WARM_UP_THREAD = "litmus-storage-warm-up"
_warm_ups: dict[str, threading.Thread] = {}
_warm_ups_lock = threading.Lock()


def warm_up_storage(db: str | Path, then: Callable[[], object] | None = None) -> threading.Thread:
    """Start importing, in a daemon thread, the fsspec backends of the object stores the
    workspace's settings name (``table_locations.warm_up``: its storage profiles' prefixes, its score
    table roots given as URLs), so that the first score table the server opens there does not
    wait for them; then call ``then`` (the pages' own warm-up: their charts), only where the
    settings name such a store. Once per process and workspace; returns at once with the thread
    (running or ended). Nothing is read but the settings file: no credential, no connection. An
    error is not raised here: opening a table imports the backend again and reports its own."""
    key = str(db)
    with _warm_ups_lock:
        thread = _warm_ups.get(key)
        if thread is None:
            thread = threading.Thread(target=_warm_up, args=(key, then), name=WARM_UP_THREAD, daemon=True)
            _warm_ups[key] = thread
            thread.start()
    return thread


def _warm_up(db: str, then: Callable[[], object] | None) -> None:
    try:
        settings = read_settings(db)
    except InputError:  # the Score tables page names the file and what is wrong when it reads it
        return
    if not (settings.storage_profiles or settings.score_table_roots):
        return
    try:
        from ..dask_engine import table_reader  # noqa: F401 # optional: the dask extra (pyarrow imported ahead too)
    except ImportError:  # the Score tables page says how to install it
        return
    if not table_locations.warm_up(settings) or then is None:
        return
    with contextlib.suppress(Exception):  # the page that draws a chart meets its own error
        then()


def table_storage(db: str | Path, location: str) -> tuple[str | None, dict]:
    """(profile name, storage options) to open ``location`` with: the workspace's storage
    profile whose prefix covers it (its credentials read from the server's environment now,
    never stored), else (None, {})."""
    profile = read_settings(db).profile_for(location)
    return (None, {}) if profile is None else (profile.name, profile.storage_options())


def tables_under(roots: Sequence[str], db: str | Path | None = None, *,
                 unlisted: list[InputError] | None = None) -> list[tuple[str, str]]:
    """(root, location) of the score tables under ``roots`` (``table_locations.tables_under``), each
    root listed with its storage profile (the workspace's at ``db``). A root that cannot be
    listed (unreachable, its profile's credentials not set) lists nothing; its error, naming
    it, is added to ``unlisted`` when given."""

    found: list[tuple[str, str]] = []
    for root in roots:
        try:
            options = table_storage(db, root)[1] if db is not None else {}
        except InputError as exc:  # a profile whose credentials are not set: the root lists nothing
            if unlisted is not None:
                unlisted.append(InputError(f"cannot list it: {exc}", source=root))
            continue
        found += table_locations.tables_under([root], options, unlisted=unlisted)
    return found


def unpack_table(db: str | Path, name: str, data: bytes) -> str:
    """An uploaded zip of a score table unpacked into the workspace's folder (``table_zip.unpack``):
    the folder it is opened from, its root. An upload holding a table that cannot be opened
    (``table_reader.vet``, run in a process of its own whose memory and time are bounded:
    ``vetting_process``; a name for a run key that is not one, a file leading out of the table, rows
    that decode to more than their bound) is refused, InputError naming the upload and the
    table, and not kept."""

    root = table_zip.unpack(data, name, _ws(db).files)
    up = table_zip.read_upload(root)
    if up is None:  # removed under us (an operator's clean-up): nothing to open
        raise InputError("the upload was removed from the workspace while it was unpacked", source=name)
    passed_before = table_zip.vetted_version(root)
    if passed_before == table_zip.VET_VERSION:  # these bytes, kept and checked under today's checks
        return str(root)
    with _checking_lock:  # two sessions of this server uploading the same bytes: one checks them
        if table_zip.check_under_way(root):
            raise InputError("these bytes are being checked now (uploaded a moment ago); if they pass, the upload "
                             "is offered when the check ends", source=name)
        # a note whose process is gone (the server stopped mid-check) is checked again: the check
        # runs in a process of its own, bounded, so no upload can take the server down with it
        table_zip.note_checking(root)
    try:
        answers = vetting_process.vet_uploads([(_upload_location(up, rel), up.root) for rel in up.tables],
                                              wait=UPLOAD_CHECK_WAIT_S)
    except CheckInterrupted as exc:  # stopped from outside, not checked: kept, checked by a later listing
        if passed_before is None:
            table_zip.note_waiting(root)  # refused by that check: removed, as here
        else:
            table_zip.forget_note(root)
        raise UploadWaiting(f"{exc.message}; kept, it is checked again when the Score tables page is next opened, "
                            "and offered once it passes", source=name) from None
    except BaseException:  # this server's own failure, not the upload's (its check's process is bounded)
        _check_failed(root, passed_before)
        raise
    if answers is None:  # every slot held by other members' checks: kept, checked by a later listing
        if passed_before is None:
            table_zip.note_waiting(root)  # refused by that check: removed, as here
        else:
            table_zip.forget_note(root)
        raise UploadWaiting(f"kept, and waiting its turn to be checked ({vetting_process.MAX_CHECKS_AT_ONCE} other "
                            "uploads are being checked): it is checked when the Score tables page is next "
                            "opened with a check free, and offered once it passes", source=name)
    for rel, why in zip(up.tables, answers, strict=True):
        if why is not None:
            _check_failed(root, passed_before)
            raise InputError(f"its score table {rel} cannot be opened: {why}; the upload is not kept"
                             if passed_before is None else
                             f"its score table {rel} cannot be opened: {why}", source=name)
    table_zip.note_vetted(root, table_zip.VET_VERSION)
    return str(root)


def _check_failed(root: Path | str, passed_before: int | None) -> None:
    """An upload's check ended without a pass: removed, unless it passed an earlier version's
    checks when it was uploaded (another member's upload, offered since: it is only forgotten, so
    each listing checks it again and names it refused if it still fails)."""
    if passed_before is None:
        shutil.rmtree(root, ignore_errors=True)
    table_zip.forget_note(root)


@dataclass(frozen=True, slots=True)
class TableChoice:
    """A score table a team-mode server offers (an upload's, or one under an operator's root)."""

    root: str
    """What its rows are read from under: the upload's folder, or the operator's root."""
    location: str
    label: str
    """What the page calls it (an upload's name and the table's folder in it; a root's table by
    its location, which the operator configured)."""
    refused: str | None
    """Why it cannot be opened (``table_reader.vet``'s message, naming no server path); None
    when it opens. A refused table is named beside the list, never offered in it."""
    checking: bool = False
    """Not offered yet: its upload's check is under way (``refused`` says so)."""


def _upload_location(up: table_zip.Upload, rel: str) -> str:
    return up.root if rel == "." else os.path.join(up.root, *rel.split("/"))


_VETTED: dict[tuple[str, str, str], str | None] = {}
"""(upload's folder, table's location, upload's SHA-256) → ``table_reader.vet``'s answer, once per
process: an upload's folder is named by its bytes' SHA-256 and never changes."""
_MAX_VETTED = 4_096
CHECK_UNDER_WAY = ("its check is under way, or waiting for a free check (uploaded a moment ago, or kept from before "
                   "this server's checks); it is offered once the check passes")
"""``TableChoice.refused`` of an upload whose check has not ended yet (``TableChoice.checking``)."""
UPLOAD_CHECK_WAIT_S = 20.0
"""The longest an upload's own request waits for a free check (others' slow uploads hold them):
past it the upload is kept unchecked, the uploader told so, and a later listing checks it."""
MAX_INTERRUPTED_CHECKS = 3
"""How many times a listing checks an upload again whose check was stopped from outside the
server (``CheckInterrupted``) before it refuses it: a file that gets its checker killed every
time is refused, not checked for ever."""
_checking_lock = threading.Lock()
_log = logging.getLogger("litmus_review.uploads")
_checking_here: set[str] = set()
"""The uploads' folders this process is checking in the background (``_check_in_background``)."""
_interrupted: Counter[str] = Counter()


def _vetted_uploads(tables: Sequence[tuple[str, str, str]],
                    tables_of: Mapping[str, Sequence[str]]) -> list[str | None]:
    """``table_reader.vet`` of uploaded tables ((upload's folder, location, SHA-256) each), once per
    process. An upload the server vetted under today's checks (``table_zip.vetted_version``: its
    every table passed) is not vetted again. An upload not checked yet is never checked in the
    listing's own thread (every render of the page lists): its check, of every table it holds
    (``tables_of``), starts in the background, unless this process or another is checking it
    already, and its tables are said to be under way until it ends."""

    known: dict[tuple[str, str, str], str | None] = {}
    for key in dict.fromkeys(tables):
        root = key[0]
        if key in _VETTED:
            known[key] = _VETTED[key]
        elif table_zip.vetted_version(root) == table_zip.VET_VERSION:
            known[key] = None
        else:  # never checked in this process, or its check's process is gone: checked (bounded) apart
            _check_in_background(root, key[2], tables_of.get(root, [key[1]]))
            known[key] = CHECK_UNDER_WAY
    return [known[key] for key in tables]


def _check_in_background(root: str, sha256: str, locations: Sequence[str]) -> None:
    """Start checking every table of the upload at ``root`` in a thread of its own (which waits for
    a free check: no render does), unless one is checking it already, in this process or in
    another (its note). Its answers are remembered; the upload is noted passed only when every
    one of its tables passed (a note is the whole upload's), and a check stopped from outside is
    not an answer (checked again on a later listing, ``MAX_INTERRUPTED_CHECKS`` times)."""
    with _checking_lock:
        if root in _checking_here or table_zip.check_under_way(root):
            return
        _checking_here.add(root)
        waited = table_zip.kept_waiting(root)  # kept at its door unchecked: removed if refused
        table_zip.note_checking(root)
    threading.Thread(target=_check_upload, args=(root, sha256, tuple(locations), waited), name="upload-check",
                     daemon=True).start()


def _check_upload(root: str, sha256: str, locations: tuple[str, ...], waited: bool = False) -> None:
    """One upload's background check (``_check_in_background``); ``waited``: kept at its door
    without a check, so removed when refused (the door removes a new upload that fails)."""

    def unanswered() -> None:  # not checked: the next listing checks it again
        if waited:
            table_zip.note_waiting(root)
        else:
            table_zip.forget_note(root)

    try:
        try:
            answers = vetting_process.vet_uploads([(location, root) for location in locations])
        except CheckInterrupted as exc:
            _interrupted[root] += 1
            if _interrupted[root] < MAX_INTERRUPTED_CHECKS:
                unanswered()
                return
            answers = [f"{exc.message}, {MAX_INTERRUPTED_CHECKS} times: refused"] * len(locations)
        assert answers is not None  # waited for a free check as long as it took
        if len(_VETTED) + len(answers) > _MAX_VETTED:
            _VETTED.clear()  # a bound on what a long-lived server remembers; what it forgets is checked again
        _VETTED.update(((root, location, sha256), why) for location, why in zip(locations, answers, strict=True))
        if all(why is None for why in answers):  # every table passed: no later process checks it again
            table_zip.note_vetted(root, table_zip.VET_VERSION)
        elif waited:  # a new upload refused, as its door would have: not kept
            _check_failed(root, None)
        else:  # kept before: its refused tables are not offered; a new process checks it again
            table_zip.forget_note(root)
    except Exception:  # this server's own failure: nothing noted, the next listing checks it again
        _log.exception("checking the upload at %s failed", root)
        unanswered()
    finally:
        with _checking_lock:
            _checking_here.discard(root)


def still_checking(roots: Iterable[str]) -> bool:
    """Whether any of these uploads' folders is being checked now, by this process or another (the
    page polls it, to list the uploads again once their checks end)."""
    return any(root in _checking_here or table_zip.check_under_way(root) for root in roots)


def forget_vetting() -> None:
    """Forget the answers ``_vetted_uploads`` remembers (as a new process starts without them)."""
    _VETTED.clear()
    _interrupted.clear()


@dataclass(frozen=True, slots=True)
class UploadedTables:
    """The uploaded score tables a team-mode server lists, and how many it leaves out."""

    tables: tuple[TableChoice, ...]
    """Newest upload first, each upload's tables in their folders' order."""
    not_listed: int
    """Uploaded tables left out: past an upload's first ``per_upload`` (one kept before uploads
    were bounded so), or past ``at_most`` in all."""
    per_upload: int
    at_most: int


def uploaded_tables(db: str | Path) -> UploadedTables:
    """The score tables uploaded to the workspace, each vetted (a table that cannot be opened is
    listed with why: the page names it and offers the others); the root is the upload's own
    folder (its rows read nothing outside it). One read of the uploads' folder: each upload's
    manifest says where its tables are (``table_zip.uploads``).

    Listed fairly: at most ``table_zip.MAX_UPLOAD_TABLES`` of an upload (one kept before uploads
    were bounded so may hold more), and when all of them are more than
    ``table_locations.MAX_LISTED_TABLES``, shared out a table an upload at a time, newest upload
    first, until the room runs out: no upload has two fewer listed than another while it holds
    more, so one upload of many tables cannot push the others out, and the newest upload is
    always listed. The operator's roots are listed apart (``root_tables``), never counted here."""

    ups = table_zip.uploads(_ws(db).files)
    shares = [0] * len(ups)
    left = table_locations.MAX_LISTED_TABLES
    waiting = [i for i, up in enumerate(ups) if up.tables]
    for rank in range(table_zip.MAX_UPLOAD_TABLES):
        for i in waiting:
            if left == 0:
                break
            shares[i] += 1
            left -= 1
        waiting = [i for i in waiting if len(ups[i].tables) > rank + 1]
        if left == 0 or not waiting:
            break
    names = Counter(_skeleton(up.name) for up, share in zip(ups, shares, strict=True) if share)
    listed = [(up, rel, _upload_location(up, rel)) for up, share in zip(ups, shares, strict=True)
              for rel in up.tables[:share]]
    refusals = _vetted_uploads([(up.root, location, up.sha256 or up.root) for up, _rel, location in listed],
                               {up.root: [_upload_location(up, rel) for rel in up.tables] for up in ups})
    out = [TableChoice(up.root, location, f"{up.name} ({_uploaded(up, names)})" + ("" if rel == "." else f": {rel}"),
                       refused, checking=refused is CHECK_UNDER_WAY)
           for (up, rel, location), refused in zip(listed, refusals, strict=True)]
    return UploadedTables(tuple(out), sum(len(up.tables) for up in ups) - len(out), table_zip.MAX_UPLOAD_TABLES,
                          table_locations.MAX_LISTED_TABLES)


_LOOKALIKE = str.maketrans({"i": "l", "1": "l", "|": "l", "0": "o"})


def _skeleton(name: str) -> str:
    """What a name looks like on screen, near enough: case folded, its white space and invisible
    characters gone, and the ASCII characters that read alike made one (``I``/``l``/``1``,
    ``O``/``0``)."""
    return "".join(ch for ch in name.casefold().translate(_LOOKALIKE) if ch.isprintable() and not ch.isspace())


def _uploaded(up: table_zip.Upload, names: Counter) -> str:
    """How the listing tells an upload apart: "uploaded", with the start of its bytes' SHA-256 when
    another listed upload's name looks like its own (``_skeleton``), or the name is not plain
    printable ASCII without spaces at its ends (a Cyrillic і, a tab, DEL: the digest, computed
    here, does not look alike)."""
    plain = up.name.isascii() and up.name.isprintable() and up.name == up.name.strip()
    if names[_skeleton(up.name)] > 1 or not plain:
        return f"uploaded, sha256 {(up.sha256 or os.path.basename(up.root))[:8]}"
    return "uploaded"


def root_tables(db: str | Path) -> tuple[list[TableChoice], list[str]]:
    """The score tables under the operator's roots (the workspace's ``score_table_roots``, each
    listed with its storage profile: ``tables_under``), each vetted (a table that cannot be
    opened is listed with why), and a sentence for each root that could not be listed (naming
    the root as the operator configured it: unreachable, its profile's credentials not set)."""
    from ..dask_engine import table_reader  # optional: score tables need the dask extra (pyarrow, fsspec)

    unlisted: list[InputError] = []
    out = []
    for root, location in tables_under(table_roots(db), db, unlisted=unlisted):
        try:
            options = table_storage(db, location)[1]
        except InputError as exc:  # a profile whose credentials are not set
            out.append(TableChoice(root, location, location, exc.message))
            continue
        out.append(TableChoice(root, location, location, table_reader.vet(location, options, root=root)))
    return out, [str(e) for e in unlisted]


ROOT_LISTING_WAIT_S = 2.0
"""How long a page waits for the operator's roots to be listed before it goes on without them:
the listing goes on in the background (a root's storage may answer slowly, within its own
deadlines: ``storage.listed``), and uploads are never held behind it."""
ROOT_LISTING_FRESH_S = 60.0
"""How long a finished listing of the roots serves every page before the next is started (the
older one is served while the new one runs)."""


@dataclass(frozen=True, slots=True)
class RootListing:
    """What ``root_listing`` knows of the tables under the operator's roots."""

    tables: list[TableChoice]
    """Each table found, vetted (``root_tables``)."""
    unlisted: list[str]
    """Why each root that lists nothing could not be listed."""
    pending: bool
    """No listing has finished yet (a root's storage slow to answer): ``tables`` and
    ``unlisted`` are empty until one does."""


@dataclass
class _Listing:
    roots: tuple[str, ...]
    done: threading.Event
    result: tuple[list[TableChoice], list[str]] | None = None
    finished: float = 0.0


_root_listings: dict[str, _Listing] = {}
_root_listings_lock = threading.Lock()


def _list_roots(db: str, listing: _Listing) -> None:
    try:
        listing.result = root_tables(db)
    except InputError as exc:  # the settings themselves unreadable
        listing.result = ([], [str(exc)])
    except Exception as exc:  # a storage backend's own: said, never a thread's silent death
        listing.result = ([], [f"the listing failed: {type(exc).__name__}"])
    listing.finished = time.monotonic()
    listing.done.set()


def root_listing(db: str | Path, *, wait: float = ROOT_LISTING_WAIT_S) -> RootListing:
    """The tables under the operator's roots (``root_tables``), listed in a background thread
    once for the whole server and served for ``ROOT_LISTING_FRESH_S``: waited for at most
    ``wait`` seconds, after which the caller goes on with the last listing that finished (or,
    before the first, ``pending``). Roots changed in the settings are listed at once."""
    key, roots = str(db), table_roots(db)
    with _root_listings_lock:
        kept = _root_listings.get(key)
        previous = kept if kept is not None and kept.roots == roots else None
        if previous is not None and (not previous.done.is_set()
                                     or time.monotonic() - previous.finished < ROOT_LISTING_FRESH_S):
            current = previous
        else:  # the last listing (its roots' own) is served while this one runs
            current = _root_listings[key] = _Listing(roots, threading.Event(),
                                                    previous.result if previous is not None else None)
            threading.Thread(target=_list_roots, args=(key, current), daemon=True,
                             name="litmus-root-listing").start()
    if current.result is None:
        current.done.wait(wait)
    result = current.result
    if result is None:
        return RootListing([], [], pending=True)
    return RootListing(result[0], result[1], pending=False)


