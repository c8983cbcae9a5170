"""litmus-review's functional core: strict, capture-aware scoring of agent safety runs.

Never imports streamlit or plotly. The light pieces are imported here; the heavier ones
(the SQLite workspace pulls in sqlite-utils and pandas) load on first use, so a spawned import
worker that needs only ``scoring.ingest`` starts fast.

    >>> from scoring import evaluate
    >>> ev = evaluate("sample_runs/observed-m1.jsonl")          # doctest: +SKIP
    >>> ev.summary.unscored_by_reason["over_capture_limit"]      # doctest: +SKIP
    62
"""

from __future__ import annotations

import importlib

from .capture import assess, gaps, is_complete
from .errors import (
    DatabaseUnavailableError,
    FormatVersionError,
    IncompleteCaptureError,
    InputError,
    LitmusReviewError,
    OverBudgetError,
    ReasonCode,
    RunMismatchError,
    StoreError,
    UnknownFormatError,
)
from .model import EvidenceStandard, ReviewLabel, Run, ScoredTrajectory, Status, Termination, ToolCall, Trajectory
from .score import SCORER_VERSION, score_run, score_strict

_LAZY = {
    "evaluate": "report", "evaluate_run": "report", "Evaluation": "report",
    "summarize": "aggregate", "summarize_by": "aggregate", "Summary": "aggregate", "ScoreColumns": "aggregate",
    "load_run": "importers", "parse_run": "importers", "formats": "importers",
    "recapture": "recapture", "Workspace": "workspace",
}


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module 'scoring' has no attribute {name!r}")


__all__ = [
    "DatabaseUnavailableError", "EvidenceStandard", "FormatVersionError", "IncompleteCaptureError", "InputError",
    "LitmusReviewError", "OverBudgetError", "ReasonCode", "ReviewLabel", "Run", "RunMismatchError", "SCORER_VERSION",
    "ScoredTrajectory", "Status", "StoreError", "Termination", "ToolCall", "Trajectory", "UnknownFormatError",
    "assess", "gaps", "is_complete", "score_run", "score_strict", *_LAZY,
]
