"""Run-level reports: one call that imports, recaptures, scores and summarises a run.

The CLI, the app and the benchmarks all go through ``evaluate`` so they can never disagree.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from .aggregate import ScoreColumns, Summary, summarize
from .importers import load_run
from .model import ReviewLabel, Run, ScoredTrajectory
from .recapture import RecaptureReport, recapture
from .score import SCORER_VERSION, score_run


@dataclass(frozen=True, slots=True)
class Evaluation:
    """A run with its scores and summary (what every view of a run starts from)."""

    run: Run
    """The run; loaded from a workspace it holds the header and rejections, not the trajectories."""
    scored: "tuple[ScoredTrajectory, ...] | ScoreColumns"
    """The scores: objects from a file; in the app, the columns the aggregates read (a run's
    score objects cost more to load than everything the pages compute from them)."""
    summary: Summary
    tool_calls: int
    recapture: RecaptureReport | None = None
    file_sha256: str = ""
    """SHA-256 of the input file's bytes (what ``sha256sum`` prints); empty when unknown."""
    original_name: str = ""
    """The file's name as its owner gave it, when the run was read from a copy (an upload)."""
    side_log: dict | None = None
    """The payload side log used for recapture, ``{"source", "sha256"}``; None when none was."""

    def as_dict(self) -> dict:
        """The stable JSON shape of ``litmus-review score --json`` (one object per run)."""
        s = self.summary
        h = self.run.header
        out = {
            "run_id": h.run_id,
            "source": h.source,
            "format": h.format,
            "model": h.model,
            "content_sha256": self.run.content_sha256,
            # content_sha256 is the run's identity in a workspace: the file's SHA-256, or, when a
            # side log or an Inspect verdict map changed the scores, SHA-256 of "FILE:SIDE[:MAP]";
            # file_sha256 is always the file's own (what sha256sum prints)
            "file_sha256": self.file_sha256 or None,
            "original_name": self.original_name or None,
            "side_log": self.side_log,
            "run_status": h.run_status or None,
            "run_status_detail": h.run_status_detail or None,
            "scorer_version": SCORER_VERSION,
            "evidence_standard": h.evidence_standard.value,
            "capture_limit_bytes": h.capture_limit_bytes,
            "trajectories": s.total,
            "tool_calls": self.tool_calls,
            "scored": s.scored,
            "safe": s.safe,
            "unsafe": s.unsafe,
            "unscored": s.unscored,
            "unscored_rate": s.unscored_rate,
            "unscored_by_reason": s.unscored_by_reason,
            "inconclusive": s.inconclusive,
            "inconclusive_pending": s.inconclusive_pending,
            "inconclusive_by_label": s.inconclusive_by_label,
            "safe_rate_lenient": s.lenient.value,
            "safe_rate_strict": s.strict.value,
            "safe_rate_reviewed": s.reviewed.value,
            "phantom_safety_pp": s.phantom_safety_pp,
            "ci95": {
                name: ({"low": r.ci95.low, "high": r.ci95.high, "method": r.ci95.method} if r.ci95 else None)
                for name, r in (("lenient", s.lenient), ("strict", s.strict), ("reviewed", s.reviewed))
            },
            "strict_bounds": {"if_unscored_unsafe": s.strict_if_unscored_unsafe,
                              "if_unscored_safe": s.strict_if_unscored_safe},
            "records_seen": self.run.records_seen,
            "rejected_records": [
                {"source": r.source, "line": r.line, "record_id": r.record_id, "message": r.message}
                for r in self.run.rejected
            ],
        }
        if h.format == "litmus" and self.run.trajectories:
            from dataclasses import asdict

            from .importers.litmus_log import litmus_metrics

            out["format_metrics"] = {"litmus": asdict(litmus_metrics(self.run))}
        if h.format == "inspect" and self.run.trajectories:
            from .importers.inspect_log import verdict_summary

            summary = verdict_summary(self.run)
            if summary is not None:
                out.setdefault("format_metrics", {})["inspect"] = summary
        if self.recapture is not None:
            out["recapture"] = {
                "source": self.recapture.source,
                "applied": self.recapture.applied,
                "rejected": [
                    {"line": r.line, "record_id": r.record_id, "message": r.message}
                    for r in self.recapture.rejected
                ],
            }
        return out


def evaluate_run(
    run: Run,
    *,
    payloads: str | Path | None = None,
    labels: Mapping[str, ReviewLabel] | None = None,
) -> Evaluation:
    """Recapture (optional), score strictly and leniently, and summarise a parsed run."""
    report = None
    side = None
    if payloads is not None:
        run, report = recapture(run, payloads)
        side = {"source": str(payloads), "sha256": report.sha256 or None}
    scored = score_run(run)
    return Evaluation(run=run, scored=scored, summary=summarize(scored, labels, group=run.header.run_id),
                      tool_calls=run.tool_call_count, recapture=report, file_sha256=run.content_sha256,
                      side_log=side)


def evaluate(
    path: str | Path,
    *,
    fmt: str = "auto",
    payloads: str | Path | None = None,
    labels: Mapping[str, ReviewLabel] | None = None,
    verdict_map=None,
) -> Evaluation:
    """Import a run file and evaluate it."""
    return evaluate_run(load_run(path, fmt, verdict_map=verdict_map), payloads=payloads, labels=labels)
