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

from pages._shared.inert import reveal_id
from scoring.aggregate import ScoreColumns
from scoring.report import Evaluation
from scoring.workspace import Workspace, default_db_path, evaluation, search_run

SAMPLES = Path(__file__).resolve().parents[2] / "sample_runs"
DB_PATH: Path | None = None  # None: the default path (tests set a temporary one)
MAX_UPLOAD_MB = 200
MAX_TABLE_ROWS = 10_000  # rows the Trajectories table sends to the browser at most


def db_path() -> Path:
    return DB_PATH or default_db_path()


BUSY_TIMEOUT_S = 10.0  # how long a write waits for another writer before a clear error


def workspace() -> Workspace:
    # A Workspace holds only a path: cheap to create; every operation opens its own connection.
    return Workspace(db_path(), busy_timeout_s=BUSY_TIMEOUT_S)


def sample_files() -> list[tuple[Path, Path | None]]:
    out = []
    for path in sorted(SAMPLES.glob("*-m[0-9].jsonl")):
        side = path.with_name(path.name.replace(".jsonl", ".payloads.jsonl"))
        out.append((path, side if side.exists() else None))
    return out


@st.cache_resource(show_spinner=False)
def _samples_lock(db: str) -> threading.Lock:
    return threading.Lock()


def ensure_samples() -> None:
    """Import the bundled sample runs (with their side logs) once per workspace.

    Sessions of one server wait for each other here: a tab opened while another was between
    two sample imports saw some of the samples and kept them as its selection of runs.
    """
    key = f"samples_imported::{db_path()}"
    if st.session_state.get(key):
        return
    with _samples_lock(str(db_path())):
        ws = workspace()
        if not ws.runs():
            with st.spinner("Importing the bundled sample runs…"):
                for path, side in sample_files():
                    ws.import_run(path, payloads=side)
    st.session_state[key] = True


def label_version(run_key: str) -> int:
    with workspace().connect() as db:
        return db.execute("select count(*) from label_events where run_key = ?", [run_key]).fetchone()[0]


@st.cache_resource(max_entries=32, show_spinner=False)
def _scored(db: str, run_key: str) -> ScoreColumns:
    # Scores are fixed at import (a run is keyed by its content): only labels change, so a
    # label costs re-aggregating, not re-reading 200 k scores. Columns: the aggregates read
    # nothing else, and they load much faster than score objects.
    return Workspace(db).score_columns(run_key)


@st.cache_resource(max_entries=32, show_spinner=False)
def _evaluation(db: str, run_key: str, version: int) -> Evaluation:
    return evaluation(Workspace(db), run_key, scored=_scored(db, run_key))


def run_evaluation(run_key: str) -> Evaluation:
    """The run's evaluation with the current final labels (cached until a label changes)."""
    return _evaluation(str(db_path()), run_key, label_version(run_key))


TABLE_COLUMNS = ("trajectory_id", "task_id", "status", "reason", "intended_category", "fired_category", "termination",
                 "tool_call_count", "max_raw_bytes", "tools", "suggestion", "model", "suggestion_evidence")
"""What the Trajectories table and the Review queue read of each row (the rest stays in SQLite:
every column as dicts was several times slower to become a frame)."""


@st.cache_resource(max_entries=32, show_spinner=False)
def _frame(db: str, run_key: str) -> pd.DataFrame:
    return pd.DataFrame.from_records(Workspace(db).trajectory_table(run_key, TABLE_COLUMNS), columns=TABLE_COLUMNS)


def trajectory_frame(run_key: str) -> pd.DataFrame:
    """The cheap summary view of a run's trajectories (no argument text)."""
    return _frame(str(db_path()), run_key)


@st.cache_resource(max_entries=32, show_spinner=False)
def _sizes(db: str, run_key: str) -> list[int]:
    return Workspace(db).call_sizes(run_key)


def argument_sizes(run_key: str) -> list[int]:
    return _sizes(str(db_path()), run_key)


@st.cache_resource(max_entries=64, show_spinner="Searching the run…")
def _search(db: str, run_key: str, query: str) -> frozenset[str]:
    # A run's file never changes under its key (its content hash), so neither do the hits; a
    # search reads the whole run, and selecting a row reruns the page.
    return frozenset(search_run(Workspace(db), run_key, query))


def search(run_key: str, query: str) -> frozenset[str]:
    """Trajectory ids whose record or joined side-log payload contains ``query``."""
    return _search(str(db_path()), run_key, query)


RUBRIC_ENV = "LITMUS_REVIEW_RUBRIC"
RUBRIC_MAX_BYTES = 256 * 1024


def rubric_path() -> Path:
    """The team's labelling instructions: ``LITMUS_REVIEW_RUBRIC``, else ``<db>.d/rubric.md``."""
    env = os.environ.get(RUBRIC_ENV)
    return Path(env).expanduser() if env else workspace().files / "rubric.md"


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
    return text + ("\n… [the rubric is longer than 256 KiB: the rest is not shown]" if len(data) > RUBRIC_MAX_BYTES else "")


def runs() -> list[dict]:
    return workspace().runs()


def run_label(row: dict) -> str:
    """A run in words (id, model, side log, key); invisible and bidi characters shown. Not
    markdown-safe: wrap it in ``inert.md`` where Streamlit renders markdown."""
    pay = " + side log" if row.get("payloads_path") else ""
    return reveal_id(f"{row['run_id']} · {row['model']}{pay} · {row['run_key'][:8]}")


def run_chip(row: dict, rows: list[dict]) -> str:
    """A run's short name for the sidebar's chips, which cut past ~25 characters: its id (with
    its key where two runs share an id), and "+side" when scored with a side log."""
    twins = sum(1 for r in rows if r["run_id"] == row["run_id"]) > 1
    return reveal_id(row["run_id"] + (" +side" if row.get("payloads_path") else "")
                     + (f" ·{row['run_key'][:6]}" if twins else ""))



@st.cache_resource(max_entries=32, show_spinner=False)
def _breakdowns(db: str, run_key: str, version: int):
    from scoring.aggregate import by_category, summarize_by, waterfall

    ev = _evaluation(db, run_key, version)
    labels = Workspace(db).final_labels(run_key)
    return waterfall(ev.scored, labels, ev.summary), summarize_by(ev.scored, by_category, labels)


def run_breakdowns(run_key: str):
    """(waterfall steps, per-category summaries) with the current labels; cached like the rates."""
    return _breakdowns(str(db_path()), run_key, label_version(run_key))


@st.cache_resource(max_entries=32, show_spinner=False)
def _paired(db: str, a: str, va: int, b: str, vb: int):
    from scoring.aggregate import paired_difference

    return paired_difference(_evaluation(db, a, va).scored, _evaluation(db, b, vb).scored)


def paired(a: str, b: str):
    return _paired(str(db_path()), a, label_version(a), b, label_version(b))
