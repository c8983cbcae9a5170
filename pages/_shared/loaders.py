"""Cached loaders: the only place pages get data from scoring/.

The workspace database is ``LITMUS_REVIEW_DB`` or ``./litmus-review.db``; tests patch
``DB_PATH``. Aggregates are cached by (run key, label-event count), so labelling invalidates
exactly the runs it touched and nothing else recomputes.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pandas as pd
import streamlit as st

from pages._shared import charts
from pages._shared.inert import reveal_id
from pages._shared.runtext import run_name, stale_mark, status_badge
from scoring.workspace import views
from scoring.workspace.views import Evaluation, RunInfo

SAMPLES = Path(__file__).resolve().parents[2] / "sample_runs"
DB_PATH: Path | None = None  # None: the default path (tests set a temporary one)
MAX_UPLOAD_MB = 200
MAX_TABLE_ROWS = 10_000  # rows the Trajectories table sends to the browser at most


def db_path() -> Path:
    return DB_PATH or views.default_db_path()


def db() -> str:
    """The workspace database every ``views`` call of the pages takes."""
    return str(db_path())


def sample_files() -> list[tuple[Path, Path | None]]:
    out = []
    for path in sorted(SAMPLES.glob("*-m[0-9].jsonl")):
        side = path.with_name(path.name.replace(".jsonl", ".payloads.jsonl"))
        out.append((path, side if side.exists() else None))
    return out


@st.cache_resource(show_spinner=False)
def _samples_lock(db: str) -> threading.Lock:
    return threading.Lock()


def check_workspace() -> None:
    """Refuse a damaged workspace once per session, before any page reads it (the CLI's
    message: ``views.check_workspace``); a sound one is not checked again in the session."""
    key = f"workspace_checked::{db_path()}"
    if st.session_state.get(key):
        return
    views.check_workspace(db())
    st.session_state[key] = True


def ensure_samples() -> None:
    """Import the bundled sample runs (with their side logs) once per workspace.

    Sessions of one server wait for each other here: a tab opened while another was between
    two sample imports saw some of the samples and kept them as its selection of runs.
    """
    key = f"samples_imported::{db_path()}"
    if st.session_state.get(key):
        return
    with _samples_lock(str(db_path())):
        if not views.runs(db()):
            with st.spinner("Importing the bundled sample runs…"):
                for path, side in sample_files():
                    views.import_run(db(), path, payloads=side)
    st.session_state[key] = True


def label_version(run_key: str) -> int:
    return views.label_version(db(), run_key)


def scores_version(run_key: str) -> str:
    """Changes when a rescore rewrites the run's scores (another process's ``rescore --from``,
    this one's re-import of a stale run) or sets labels aside: every cache of its rows is keyed
    by it, so an older scorer's statuses are never shown under the newer one's version."""
    return views.scores_version(db(), run_key)


def run_version(run_key: str) -> str:
    """The labels' and the scores' versions: what an evaluation of the run is cached by."""
    return f"{label_version(run_key)}|{scores_version(run_key)}"


@st.cache_resource(max_entries=32, show_spinner=False)
def _scored(db: str, run_key: str, scores: str) -> views.ScoreColumns:
    # Scores change only when the run is rescored (``scores``): a label costs re-aggregating,
    # not re-reading 200 k scores. Columns: the aggregates read nothing else, and they load
    # much faster than score objects.
    return views.score_columns(db, run_key)


@st.cache_resource(max_entries=32, show_spinner=False)
def _evaluation(db: str, run_key: str, version: str) -> Evaluation:
    return views.evaluation(db, run_key, scored=_scored(db, run_key, version.split("|", 1)[1]))


def run_evaluation(run_key: str) -> Evaluation:
    """The run's evaluation with the current final labels (cached until a label changes or the
    run is rescored)."""
    return _evaluation(db(), run_key, run_version(run_key))


@st.cache_resource(max_entries=32, show_spinner=False)
def _frame(db: str, run_key: str, scores: str) -> pd.DataFrame:
    return views.trajectory_table(db, run_key)


def trajectory_frame(run_key: str) -> pd.DataFrame:
    """The cheap summary view of a run's trajectories (``views.TrajectorySummary`` columns)."""
    return _frame(db(), run_key, scores_version(run_key))


@st.cache_resource(max_entries=32, show_spinner=False)
def _sizes(db: str, run_key: str, scores: str) -> list[int]:
    return views.argument_sizes(db, run_key)


@st.cache_resource(max_entries=16, show_spinner=False)
def _previews(db: str, run_key: str, ids: tuple[str, ...], scores: str) -> list[str]:
    return views.output_previews(db, run_key, ids)


def output_previews(run_key: str, trajectory_ids: list[str]) -> list[str]:
    """The start of each shown trajectory's final output (a run's rows change only when it is rescored)."""
    return _previews(db(), run_key, tuple(trajectory_ids), scores_version(run_key))


def argument_sizes(run_key: str) -> list[int]:
    return _sizes(db(), run_key, scores_version(run_key))


@st.cache_resource(max_entries=64, show_spinner="Searching the run…")
def _search(db: str, run_key: str, query: str, scores: str) -> frozenset[str]:
    # A run's copy changes only when it is rescored (``scores``), so neither do the hits; a
    # search reads the whole run, and selecting a row reruns the page.
    return views.search(db, run_key, query)


def search(run_key: str, query: str) -> frozenset[str]:
    """Trajectory ids whose record or joined side-log payload contains ``query``."""
    return _search(db(), run_key, query, scores_version(run_key))


RUBRIC_ENV = "LITMUS_REVIEW_RUBRIC"
RUBRIC_MAX_BYTES = 256 * 1024


def rubric_path() -> Path:
    """The team's labelling instructions: ``LITMUS_REVIEW_RUBRIC``, else ``<db>.d/rubric.md``."""
    env = os.environ.get(RUBRIC_ENV)
    return Path(env).expanduser() if env else views.workspace_folder(db()) / "rubric.md"


def rubric_text() -> str | None:
    """The rubric's text (its first 256 KiB), None when there is no rubric file."""
    path = rubric_path()
    if not path.exists():
        return None
    if not path.is_file():  # a FIFO or a device would block or never end
        raise OSError(f"{path} is not a regular file")
    with path.open("rb") as fh:
        data = fh.read(RUBRIC_MAX_BYTES + 1)
    text = data[:RUBRIC_MAX_BYTES].decode("utf-8", "replace")
    cut = len(data) > RUBRIC_MAX_BYTES
    return text + ("\n… [the rubric is longer than 256 KiB: the rest is not shown]" if cut else "")


def runs() -> list[RunInfo]:
    return views.runs(db())


def run_label(run: RunInfo) -> str:
    """A run in words (id, model, side log, key, STALE); invisible and bidi characters shown. Not
    markdown-safe: wrap it in ``inert.md`` where Streamlit renders markdown."""
    pay = " + side log" if run.side_log else ""
    badge = status_badge(run.run_status, run.run_status_detail)
    return reveal_id(f"{run.run_id} · {run.model}{pay} · {run.run_key[:8]}" + (f" · {badge}" if badge else "")
                     + (f" · {stale_mark(run.scorer_version)}" if run.stale else ""))


def run_legend(run: RunInfo, runs: list[RunInfo]) -> str:
    """A run's name in a chart legend: its id, its key where another run has the same id, "+side
    log", its status badge where it did not finish, its STALE mark. Hostile text: the chart builders escape it."""
    twins = sum(1 for r in runs if r.run_id == run.run_id) > 1
    return reveal_id(run_name(run.run_id, run.run_key, twins=twins, side_log=run.side_log,
                              run_status=run.run_status, detail=run.run_status_detail)
                     + (f" [{stale_mark(run.scorer_version)}]" if run.stale else ""))


def run_chip(run: RunInfo, runs: list[RunInfo]) -> str:
    """A run's short name for the sidebar's chips, which cut past ~25 characters: its id (with
    its key where two runs share an id), and "+side" when scored with a side log."""
    twins = sum(1 for r in runs if r.run_id == run.run_id) > 1
    return reveal_id(run.run_id + (" +side" if run.side_log else "") + (f" ·{run.run_key[:6]}" if twins else ""))



@st.cache_resource(max_entries=32, show_spinner=False)
def _breakdowns(db: str, run_key: str, version: str):
    return views.breakdowns(db, run_key, _evaluation(db, run_key, version))


def run_breakdowns(run_key: str):
    """(waterfall steps, per-category summaries) with the current labels; cached like the rates."""
    return _breakdowns(db(), run_key, run_version(run_key))


@st.cache_resource(max_entries=32, show_spinner=False)
def _paired(db: str, a: str, va: str, b: str, vb: str):
    return views.paired(_evaluation(db, a, va), _evaluation(db, b, vb))


def paired(a: str, b: str):
    return _paired(db(), a, run_version(a), b, run_version(b))


# --- not cached: a run's labels, one trajectory, and the acts that change them -------------


def import_run(path: Path, **options) -> views.ImportReport:
    return views.import_run(db(), path, **options)


def import_runs(path: Path, **options) -> list[views.ImportReport]:
    return views.import_runs(db(), path, **options)


def holds_runs(path: Path) -> bool:
    """An AgentDojo run directory (a folder, or a zip of one): several runs to import."""
    return views.holds_runs(path)


def replay(run_key: str, trajectory_id: str) -> views.Replay:
    return views.replay(db(), run_key, trajectory_id)


def history(run_key: str) -> list[views.LabelEvent]:
    return views.history(db(), run_key)


def export_labels(run_key: str, fmt: str) -> str:
    return views.export_labels(db(), run_key, fmt)


def current_labels(run_key: str) -> dict:
    return views.current_labels(db(), run_key)


def final_labels(run_key: str) -> dict:
    return views.final_labels(db(), run_key)


def disputed(run_key: str) -> list[str]:
    return views.disputed(db(), run_key)


def visible_history(run_key: str, reviewer: str, *, blind: bool) -> list[views.LabelEvent]:
    return views.visible_history(db(), run_key, reviewer, blind=blind)


def visible_disputed(run_key: str, reviewer: str, *, blind: bool) -> list[str]:
    return views.visible_disputed(db(), run_key, reviewer, blind=blind)


def visible_labels(run_key: str, trajectory_id: str, reviewer: str, *, blind: bool) -> dict:
    return views.visible_labels(db(), run_key, trajectory_id, reviewer, blind=blind)


def agreement(run_key: str):
    return views.agreement(db(), run_key)


def add_label(run_key: str, trajectory_id: str, reviewer: str, label, note: str = "") -> int:
    return views.add_label(db(), run_key, trajectory_id, reviewer, label, note)


def adjudicators() -> frozenset[str]:
    return views.adjudicators(db())


def adjudicate(run_key: str, trajectory_id: str, adjudicator: str, label, note: str = "") -> int:
    return views.adjudicate(db(), run_key, trajectory_id, adjudicator, label, note)


def add_labels(run_key: str, trajectory_ids: list[str], reviewer: str, label, note: str = "") -> str:
    return views.add_labels(db(), run_key, trajectory_ids, reviewer, label, note)


def undo_last(run_key: str, reviewer: str) -> views.Undone | None:
    return views.undo_last(db(), run_key, reviewer)


def table_rates(run):
    return views.table_rates(db(), run)


def table_add_label(run, trajectory_id: str, reviewer: str, label) -> int:
    return views.table_add_label(db(), run, trajectory_id, reviewer, label)


def import_table_run(run) -> views.ImportReport:
    return views.import_table_run(db(), run)


def table_roots() -> tuple[str, ...]:
    return views.table_roots(db())


def warm_up_storage() -> None:
    """The object stores' backends the workspace's settings name, imported in the background
    (``views.warm_up_storage``), then the charts' plotly classes and template: the first S3
    table the server opens waits for neither s3fs nor the process's first chart."""
    views.warm_up_storage(db(), then=charts.warm_up)


def table_storage(location: str) -> tuple[str | None, dict]:
    """(profile name, storage options) of a score table's location: the workspace's settings."""
    return views.table_storage(db(), location)


@st.cache_data(ttl=60, show_spinner=False)
def _tables_under(roots: tuple[str, ...]) -> list[tuple[str, str]]:
    return views.tables_under(roots, db())


def tables_under(roots: tuple[str, ...]) -> list[tuple[str, str]]:
    """The score tables under the operator's roots (listed once a minute)."""
    return _tables_under(tuple(roots))
