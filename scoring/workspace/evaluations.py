"""A stored run's evaluation: its ``StoredRun`` and stored scores (``reads``) with the
reviewers' final labels (``labels``) applied."""

from __future__ import annotations

from ..aggregate import ScoreColumns, summarize
from ..report import Evaluation
from .labels import Labels


def evaluation(ws: Labels, run_key: str, scored: ScoreColumns | None = None) -> Evaluation:
    """An Evaluation of an imported run, with the reviewers' final labels applied.

    The scores are the run's ``ScoreColumns`` (all the aggregates read, and much cheaper to load
    than score objects); ``scored`` passes them in when the caller
    already holds them: they never change after import, only labels do, so the app loads
    them once per run."""
    stored = ws.stored_run(run_key)
    scored = ws.score_columns(run_key) if scored is None else scored
    return stored.evaluation(scored, summarize(scored, ws.final_labels(run_key), group=stored.header.run_id,
                                               rejected=stored.rejected_count))
