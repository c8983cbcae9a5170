"""A stored run's evaluation: its ``StoredRun`` and stored scores (``reads``) with the
reviewers' final labels (``labels``) applied, named as the workspace names it (``Evaluation.name``)."""

from __future__ import annotations

from dataclasses import replace

from ..aggregate import ScoreColumns, by_category, summarize, summarize_by
from ..report import Evaluation
from .labels import Labels, Reader


def evaluation(ws: Labels, run_key: str, scored: ScoreColumns | None = None, *,
               reader: Reader | None = None) -> Evaluation:
    """An Evaluation of an imported run, with the reviewers' final labels applied (as ``reader``
    may know them: in blind review only the traces it labelled carry others' labels; None: all).

    The scores are the run's ``ScoreColumns`` (all the aggregates read, and much cheaper to load
    than score objects); ``scored`` passes them in when the caller
    already holds them: they never change after import, only labels do, so the app loads
    them once per run."""
    stored = ws.stored_run(run_key)
    scored = ws.score_columns(run_key) if scored is None else scored
    labels = ws.final_labels(run_key, reader=reader)
    ev = stored.evaluation(scored, summarize(scored, labels, group=stored.header.run_id,
                                             rejected=stored.rejected_count),
                           summarize_by(scored, by_category, labels))
    return replace(ev, workspace_name=ws.run_names().get(run_key, ""))
