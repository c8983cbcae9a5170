"""Cached loaders: the only place pages get data from scoring/.

The workspace database is ``LITMUS_REVIEW_DB`` or ``./litmus-review.db``; tests patch
``DB_PATH``. Aggregates are cached by (run key, label-event count, reader), so labelling
invalidates exactly the runs it touched and nothing else recomputes.

Everything derived from the label log (rates, counts, history, disputes, agreement, exports) is
read as this session's ``reader()`` may know it: in blind review, no other reviewer's label, name
or count for a trace before this reviewer has labelled it. The pages never choose: they ask here.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from pages._shared import charts, exports, state
from pages._shared.inert import reveal_id
from pages._shared.runtext import stale_mark, status_badge
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


SAMPLES_LOCK = threading.Lock()
"""Held while the bundled samples are imported: by a session (``ensure_samples``) and by the
server's start (``import_samples``); one per process, as the module is."""


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
    with SAMPLES_LOCK:
        if not views.runs(db()):
            with st.spinner("Importing the bundled sample runs…"):
                import_samples()
    st.session_state[key] = True


def import_samples() -> None:
    """Import the bundled samples into an empty workspace (the caller holds ``SAMPLES_LOCK``)."""
    if not views.runs(db()):
        for path, side in sample_files():
            views.import_run(db(), path, payloads=side)


def has_browser() -> bool:
    """Whether this session is a browser's (its connection's headers); AppTest's has none."""
    return bool(st.context.headers)


def reader() -> views.Reader:
    """Who this session reads the labels as: the signed-in account, else the reviewer name set,
    with the Blind switch (on unless turned off on the Review page)."""
    name = st.session_state.get(state.IDENTITY) or st.session_state.get(state.REVIEWER) or ""
    return views.Reader.of(name, blind=bool(st.session_state.get(state.BLIND, True)))


def labels_view() -> str:
    """What an export's stamp says of whose labels it counts ("" for every reviewer's)."""
    return exports.labels_view(reader())


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
def _evaluation(db: str, run_key: str, version: str, name: str, blind: bool) -> Evaluation:
    return views.evaluation(db, run_key, scored=_scored(db, run_key, version.split("|", 1)[1]),
                            reader=views.Reader(name, blind))


def run_evaluation(run_key: str) -> Evaluation:
    """The run's evaluation with the current final labels as this session may know them (cached
    until a label changes or the run is rescored), named as the workspace names it now (a run
    imported since may have changed its name: ``views.named_evaluation``)."""
    return views.named_evaluation(db(), run_figures(run_key))


def run_figures(run_key: str) -> Evaluation:
    """``run_evaluation`` as cached: its ``name`` may be older than the last import (a page that
    shows every run's figures names them by ``RunInfo.name``, read once for all of them)."""
    r = reader()
    return _evaluation(db(), run_key, run_version(run_key), r.name, r.blind)


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
    """A run in words: its name (``RunInfo.name``: distinct in the workspace), its status badge
    where it did not finish, its STALE mark; invisible and bidi characters shown. Not
    markdown-safe: wrap it in ``inert.md`` where Streamlit renders markdown."""
    badge = status_badge(run.run_status, run.run_status_detail)
    return reveal_id(run.name + (f" · {badge}" if badge else "")
                     + (f" · {stale_mark(run.scorer_version)}" if run.stale else ""))


def run_legend(run: RunInfo, runs: list[RunInfo] | None = None) -> str:
    """A run's name in a chart legend: its name (distinct in the workspace), its status badge
    where it did not finish, its STALE mark. Hostile text: the chart builders escape it."""
    badge = status_badge(run.run_status, run.run_status_detail)
    return reveal_id(run.name + (f" [{badge}]" if badge else "")
                     + (f" [{stale_mark(run.scorer_version)}]" if run.stale else ""))


def run_chip(run: RunInfo, runs: list[RunInfo] | None = None) -> str:
    """A run's name on the sidebar's chips, which cut it past ~25 characters (the chip's
    tooltip and the list under the picker show it whole)."""
    return reveal_id(run.name)


@st.cache_resource(max_entries=32, show_spinner=False)
def _breakdowns(db: str, run_key: str, version: str, name: str, blind: bool):
    return views.breakdowns(db, run_key, _evaluation(db, run_key, version, name, blind),
                            reader=views.Reader(name, blind))


def run_breakdowns(run_key: str):
    """(waterfall steps, per-category summaries) with the current labels; cached like the rates."""
    r = reader()
    return _breakdowns(db(), run_key, run_version(run_key), r.name, r.blind)


@st.cache_resource(max_entries=32, show_spinner=False)
def _paired(db: str, a: str, va: str, b: str, vb: str, name: str, blind: bool):
    return views.paired(_evaluation(db, a, va, name, blind), _evaluation(db, b, vb, name, blind))


def paired(a: str, b: str):
    r = reader()
    return _paired(db(), a, run_version(a), b, run_version(b), r.name, r.blind)


@st.cache_resource(max_entries=64, show_spinner=False)
def _figure(key: tuple, _build: Callable[[], go.Figure]) -> go.Figure:
    return _build()


def figure(build: Callable[[], go.Figure], *key: object) -> go.Figure:
    """``build()``'s chart, built once per server process for ``key`` and this session's reader:
    plotly's validation of every property made building a page's charts most of a new session's
    script time (a reload, a second tab, a link opened). ``key`` names everything the chart
    shows: the chart's kind, each run's key with its ``run_version`` (so a label or a rescore
    builds it anew) and the names drawn in it. Never change the figure returned (it is shared)."""
    r = reader()
    return _figure((db(), r.name, r.blind, *key), build)


# --- not cached: a run's labels, one trajectory, and the acts that change them -------------


def import_run(path: Path, request: views.ScoringRequest, **how) -> views.ImportReport:
    """``views.import_run`` into this app's workspace (``how``: its progress and original name)."""
    return views.import_run(db(), path, request, **how)


def import_runs(path: Path, request: views.ScoringRequest, **how) -> list[views.ImportReport]:
    """``views.import_runs`` into this app's workspace."""
    return views.import_runs(db(), path, request, **how)


def holds_runs(path: Path) -> bool:
    """An AgentDojo run directory (a folder, or a zip of one): several runs to import."""
    return views.holds_runs(path)


def replay(run_key: str, trajectory_id: str) -> views.Replay:
    return views.replay(db(), run_key, trajectory_id)


def history(run_key: str) -> list[views.LabelEvent]:
    """The run's label events this session may know."""
    return views.history(db(), run_key, reader=reader())


def export_labels(run_key: str, fmt: str, *, run: views.RunMeta | None = None, exported_at: str | None = None) -> str:
    """The run's label event log (undo rows included) as this session may know it, each event
    naming its run."""
    return views.export_labels(db(), run_key, fmt, reader=reader(), run=run, exported_at=exported_at)


def export_final_labels(run_key: str, *, run: views.RunMeta | None = None, exported_at: str | None = None) -> str:
    """The run's final labels as this session may know them, one row per labelled trace, each
    naming its run."""
    return views.export_final_labels(db(), run_key, reader=reader(), run=run, exported_at=exported_at)


def current_labels(run_key: str) -> dict:
    return views.current_labels(db(), run_key, reader=reader())


def labels_on(run_key: str, trajectory_id: str) -> dict:
    """reviewer → current label on one trace, as this session may know them (blind: none of
    another reviewer's before this reviewer's own)."""
    return current_labels(run_key).get(trajectory_id, {})


def final_labels(run_key: str) -> dict:
    return views.final_labels(db(), run_key, reader=reader())


def disputed(run_key: str) -> list[str]:
    return views.disputed(db(), run_key, reader=reader())


def agreement(run_key: str):
    return views.agreement(db(), run_key, reader=reader())


def add_label(run_key: str, trajectory_id: str, reviewer: str, label, note: str = "") -> int:
    return views.add_label(db(), run_key, trajectory_id, reviewer, label, note)


def adjudicators() -> frozenset[str]:
    return views.adjudicators(db())


def adjudicators_path() -> Path:
    """The roles file: who holds the adjudicator role (``<db>.d/adjudicators.txt``)."""
    return views.adjudicators_file(db())


def adjudicate(run_key: str, trajectory_id: str, adjudicator: str, label, note: str = "") -> int:
    return views.adjudicate(db(), run_key, trajectory_id, adjudicator, label, note)


def add_labels(run_key: str, trajectory_ids: list[str], reviewer: str, label, note: str = "") -> str:
    return views.add_labels(db(), run_key, trajectory_ids, reviewer, label, note)


def undo_last(run_key: str, reviewer: str) -> views.Undone | None:
    return views.undo_last(db(), run_key, reviewer)


def table_rates(run, name: str, blind: bool):
    """A score table's run with the labels ``views.Reader(name, blind)`` may know (the page caches
    it by the reader: pass ``reader()``'s)."""
    return views.table_rates(db(), run, reader=views.Reader(name, blind))


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


def root_tables(wait: float | None = None) -> views.RootListing:
    """The score tables under the operator's roots, each vetted, and why each root that lists
    nothing could not be listed (unreachable...): listed in the background once a minute for the
    whole server (``views.root_listing``), so a root whose storage does not answer costs the
    page at most ``wait`` seconds (``views.ROOT_LISTING_WAIT_S`` unless given), and the uploads
    are offered without it."""
    return views.root_listing(db(), wait=views.ROOT_LISTING_WAIT_S if wait is None else wait)

