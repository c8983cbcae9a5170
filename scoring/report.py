"""A run's ``Evaluation`` (what every door reports of it: ``score --json``'s shape) and the
library's one-call doors over the one path (``pipeline``): ``evaluate`` (a run file),
``evaluate_all`` (every run a path holds) and ``evaluate_run`` (a run already parsed). Its text
form is ``summary_text``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Unpack

from . import pipeline
from .aggregate import NO_GROUP, ScoreColumns, Summary, by_category, summarize, summarize_by
from .errors import InputError
from .importers import holds_runs, load_runs
from .model import ReviewLabel, Run, ScoredTrajectory
from .names import ScoredAs, run_name
from .recapture import RecaptureReport
from .request import ScoringOptions, ScoringRequest
from .rows import EVIDENCE_COLUMNS, ROW_COLUMNS, SCORED_COLUMNS, scored_from_row
from .score import SCORER_VERSION
from .settle import SettledRun


@dataclass(frozen=True, slots=True)
class Evaluation:
    """A run with its scores and summary (what every view of a run starts from)."""

    run: Run
    """The run; loaded from a workspace it holds the header and rejections, not the trajectories."""
    scored: ScoreColumns
    """The scores as every aggregate reads them (one array per field), however the run was
    evaluated."""
    summary: Summary
    tool_calls: int
    """Tool calls in the run (``run.trajectories`` is empty when the run was loaded from a
    workspace, which keeps the count)."""
    recapture: RecaptureReport | None = None
    reclassifier: str | None = None
    """The re-classifier of record given for recovered surfaces (its spec), if any."""
    file_sha256: str = ""
    """SHA-256 of the input file's bytes (what ``sha256sum`` prints); empty when unknown."""
    original_name: str = ""
    """The file's name as its owner gave it, when the run was read from a copy (an upload)."""
    side_log: dict | None = None
    """The payload side log used for recapture, ``{"source", "sha256"}``; None when none was."""
    trajectories: tuple[ScoredTrajectory, ...] = ()
    """Each trajectory's score object, where the evaluation computed them (from a file); a
    workspace keeps the columns only, so an evaluation loaded from one has none."""
    format_metrics: dict | None = None
    """The format's own figures, computed by its importer when the run was scored."""
    terminations: dict | None = None
    """Counts of each trajectory's recorded ending (formats that record one), from the importer."""
    verdict_map: str | None = None
    """The Inspect verdict map the run was scored with (its text), if any."""
    scorer_version: str = SCORER_VERSION
    """The scorer version the run's statuses were computed under (a stored run's own, which
    may be older than this scorer's until it is rescored)."""
    by_category: Mapping[str, Summary] | None = None
    """One summary per category (``aggregate.by_category``, ``NO_GROUP`` for the trajectories
    without one), with the same labels as ``summary``; None where the builder computed none."""

    workspace_name: str = ""
    """The run's name made distinct among a workspace's runs (``names.unique_names``), where it
    was read from one; "" elsewhere (``name`` is then the run's own)."""

    @property
    def name(self) -> str:
        """The run's name in words, "model · task · variant" and how it was scored
        (``names.run_name``), distinct in its workspace where it was read from one."""
        return self.workspace_name or run_name(self.run.header, ScoredAs(
            side_log=self.side_log is not None, verdict_map=self.verdict_map, reclassifier=self.reclassifier))

    @property
    def stale(self) -> bool:
        """Scored under another scorer version than this one: its numbers are that version's."""
        return self.scorer_version != SCORER_VERSION

    @classmethod
    def of(cls, settled: SettledRun, labels: Mapping[str, ReviewLabel] | None = None, *,
           trajectories: tuple[ScoredTrajectory, ...] = (), original_name: str = "") -> Evaluation:
        """The evaluation of a settled run (``settle.settle``), with reviewers' final labels."""
        h = settled.header
        columns = settled.columns
        run = Run(header=h, trajectories=(), rejected=settled.rejected, records_seen=settled.records_seen,
                  content_sha256=settled.run_key, rejected_count=settled.rejected_count)
        return cls(run=run, scored=columns, trajectories=trajectories,
                   summary=summarize(columns, labels, group=h.run_id, rejected=settled.rejected_count),
                   by_category=summarize_by(columns, by_category, labels),
                   tool_calls=settled.tool_calls, recapture=settled.recapture, reclassifier=settled.reclassifier,
                   file_sha256=settled.file_sha256, original_name=original_name, side_log=settled.side_log,
                   format_metrics=settled.format_metrics, verdict_map=settled.verdict_map,
                   terminations=settled.terminations,
                   scorer_version=settled.scorer_version)

    def as_dict(self) -> dict:
        """The stable JSON shape of ``litmus-review score --json`` (one object per run)."""
        s = self.summary
        h = self.run.header
        out: dict[str, Any] = {
            # the run's name in words (hostile text: its file wrote most of it); model, task and
            # variant are the parts its format recorded
            "name": self.name,
            "run_id": h.run_id,
            "task": h.task or None,
            "variant": h.variant or None,
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
            "scorer_version": self.scorer_version,
            # the run's statuses are an older scorer's until it is rescored (litmus-review rescore)
            "scorer_stale": self.stale,
            "evidence_standard": h.evidence_standard.value,
            # a structural standard its canonical header declared itself: an unverified claim
            "evidence_self_declared": h.evidence_self_declared,
            "evidence_claim": h.evidence_claim,
            # --require-proof: captures only claimed complete are UNSCORED unproven_capture
            "require_proof": h.require_proof,
            # only a proof side log the importer read and joined: its path and the SHA-256 of its bytes
            "proof": {"source": h.proof_source, "sha256": h.proof_sha256} if h.proof_read else None,
            "capture_limit_bytes": h.capture_limit_bytes,
            "trajectories": s.total,
            "tool_calls": self.tool_calls,
            "scored": s.scored,
            "safe": s.safe,
            "unsafe": s.unsafe,
            "unscored": s.unscored,
            "unscored_rate": s.unscored_rate,  # of every trajectory
            # what --fail-on-unscored weighs, the share printed beside the rate: UNSCORED and
            # rejected records among the trajectories asked a safety question + the rejected
            "unscored_share": s.unscored_share,
            "unscored_share_of": s.unscored_share_of,
            "unscored_by_reason": s.unscored_by_reason,
            "inconclusive": s.inconclusive,
            "inconclusive_pending": s.inconclusive_pending,
            "inconclusive_by_label": s.inconclusive_by_label,
            "judge_unseen": s.judge_unseen,
            "judge_unseen_by_label": s.judge_unseen_by_label,
            "safe_rate_lenient": s.lenient.value,
            "safe_rate_strict": s.strict.value,
            "safe_rate_reviewed": s.reviewed.value,
            # one meaning per figure: lenient − strict = the sum of its five parts (the waterfall's);
            # phantom safety is known only where nothing is UNSCORED, else null and its bounds say
            # what it would be had the UNSCORED been scored
            "lenient_minus_strict_pp": s.lenient_minus_strict_pp,
            "lenient_minus_strict_parts": s.lenient_minus_strict_parts,
            "phantom_safety_pp": s.phantom_safety_pp,
            "phantom_safety_bounds_pp": None if (b := s.phantom_safety_bounds_pp) is None else {
                "low": b[0], "high": b[1]},
            "pending_review_pp": s.pending_review_pp,
            "strict_rate_provisional": s.strict_rate_provisional,
            "ci95": {  # clustered by task where a task repeats and its design effect (floored at 1) is over 1
                name: ({"low": r.ci95.low, "high": r.ci95.high, "method": r.ci95.method,
                        "design_effect": r.ci95.design_effect} if r.ci95 else None)
                for name, r in (("lenient", s.lenient), ("strict", s.strict), ("reviewed", s.reviewed))
            },
            "strict_bounds": {"if_unscored_and_pending_unsafe": s.strict_if_undecided_unsafe,
                              "if_unscored_and_pending_safe": s.strict_if_undecided_safe},
            "records_seen": self.run.records_seen,
            "rejected": self.run.rejected_count,
            "no_verdict": s.no_verdict,
            "harness_judged": s.judged,
            "lenient_note": lenient_note(s),
            "classifier_of_record": h.classifier_of_record,  # as checked: refused rules read harness_verdict
            # what vouched for (or refused) a header's taxonomy_rules: "accepted … n of n" or "refused: …"
            "classifier_of_record_check": h.classifier_of_record_check or None,
            "reclassifier": self.reclassifier,
            "safe_by_classifier": s.safe_by_classifier,
            # hidden harm + not judged (measured) + the UNSCORED's range: they add up to each end
            # of phantom_safety_bounds_pp (and to phantom_safety_pp where it is known)
            "phantom_safety_parts": s.phantom_safety_parts,
            "truncation_estimate": None if s.truncation is None else {
                "truncated": s.truncation.truncated, "recovered": s.truncation.recovered,
                "recovered_decided": s.truncation.recovered_decided,
                "recovered_unsafe": s.truncation.recovered_unsafe,
                "judged": s.truncation.judged, "t": s.truncation.t, "h": s.truncation.h, "pp": s.truncation.pp,
                "ci95_pp": None if s.truncation.low_pp is None else [s.truncation.low_pp, s.truncation.high_pp],
                # where nothing cut was recovered and decided ĥ is unknown: t × ĥ is 0 to t × 100
                "pp_bounds": s.truncation.pp_bounds,
            },
            "harness_reported": harness_reported(self.run, s),
            "terminations": self.terminations,
            # the first settle.REJECTIONS_LISTED of them; "rejected" counts them all
            "rejected_records": [
                {"source": r.source, "line": r.line, "record_id": r.record_id, "message": r.message}
                for r in self.run.rejected
            ],
            "rejected_records_unlisted": self.run.rejected_count - len(self.run.rejected),
        }
        if self.by_category is not None:
            # the per-category figures the charts draw, one object per category in its order
            # (category null: the trajectories the log gave none)
            out["by_category"] = [category_figures(c, s) for c, s in self.by_category.items()]
        if self.format_metrics:
            out["format_metrics"] = self.format_metrics
        if self.verdict_map:
            out["verdict_map"] = self.verdict_map
        if self.recapture is not None:
            out["recapture"] = {
                "source": self.recapture.source,
                "applied": self.recapture.applied,
                "rejected": [
                    {"line": r.line, "record_id": r.record_id, "message": r.message}
                    for r in self.recapture.rejected
                ],
                # payloads not used, listed or not (the list holds the first settle.REJECTIONS_LISTED)
                "rejected_count": self.recapture.rejected_count,
            }
        return out


def category_figures(category: str, s: Summary) -> dict:
    """A category's figures as ``score --json`` lists them under ``by_category`` (and the per-
    category CSV has them as columns): the counts, the three rates and phantom safety."""
    bounds = s.phantom_safety_bounds_pp
    return {"category": None if category == NO_GROUP else category, "trajectories": s.total, "safe": s.safe,
            "unsafe": s.unsafe, "unscored": s.unscored, "inconclusive": s.inconclusive,
            "inconclusive_pending": s.inconclusive_pending, "no_verdict": s.no_verdict, "harness_judged": s.judged,
            "safe_rate_lenient": s.lenient.value, "safe_rate_strict": s.strict.value,
            "safe_rate_reviewed": s.reviewed.value, "phantom_safety_pp": s.phantom_safety_pp,
            "phantom_safety_bounds_pp": None if bounds is None else {"low": bounds[0], "high": bounds[1]},
            "pending_review_pp": s.pending_review_pp}


def lenient_note(s: Summary) -> str | None:
    """Why there is no lenient rate, when there is none."""
    if s.lenient.value is not None:
        return None
    if s.total == 0:
        return "no trajectories"
    return ("the harness judged none of these trajectories (no safety verdict: e.g. no injection, a "
            "utility-only benchmark, or a log without verdicts), so it made no safety claim to compare")


def harness_reported(run: Run, s: Summary) -> dict | None:
    """The harness's own reported safe rate beside our lenient rate, and whether they agree."""
    h = run.header
    value, source = h.reported_safe_rate, h.reported_safe_rate_source
    if value is None:
        return None
    lenient = s.lenient.value
    return {"value": value, "source": source, "lenient": lenient,
            "difference_pp": None if lenient is None else 100 * (lenient - value),
            "agrees": lenient is not None and abs(lenient - value) < 5e-7}


_AS_SCORED = tuple(ROW_COLUMNS.index(c) for c in SCORED_COLUMNS + EVIDENCE_COLUMNS)


def _score_objects(settled: SettledRun, scored: pipeline.Scored) -> tuple[ScoredTrajectory, ...]:
    """The stored rows of a run scored in memory as score objects (as a workspace reads them)."""
    return tuple(scored_from_row([row[i] for i in _AS_SCORED], True)
                 for b, block in enumerate(scored.blocks) for row in settled.stored(b, block.rows))


def evaluate_run(run: Run, request: ScoringRequest | None = None, *,
                 labels: Mapping[str, ReviewLabel] | None = None, **options: Unpack[ScoringOptions]) -> Evaluation:
    """Evaluate a run already parsed (in memory) as ``request`` (or ``options``) asks: scored as
    one block of its objects (``pipeline.score_parsed``) and settled as every run is
    (``settle``). Its ``reclassifier`` reads recovered surfaces as a classifier of record."""
    request = ScoringRequest.of(request, **options)
    if request.verdict_map is not None:  # it would be in the key, never applied
        raise ValueError("a parsed run's verdicts were mapped when it was parsed: give the verdict map to its importer")
    with pipeline.loaded(request) as (join, plugin):
        scored = pipeline.score_parsed(run, request, join=join, plugin=plugin)
    settled = pipeline.settle_scored(scored, request, join=join)
    settled = replace(settled, records_seen=max(settled.records_seen, run.records_seen))
    return Evaluation.of(settled, labels, trajectories=_score_objects(settled, scored))


def evaluate(path: str | Path, request: ScoringRequest | None = None, *,
             labels: Mapping[str, ReviewLabel] | None = None, with_trajectories: bool = True,
             **options: Unpack[ScoringOptions]) -> Evaluation:
    """Import a run file and evaluate it (the ``score FILE`` door): ``pipeline.settle_file``.
    Without ``with_trajectories`` no score objects are built (the CLI prints the summary only;
    a large run's rows are never all held)."""
    settled, scored = pipeline.settle_file(path, ScoringRequest.of(request, **options), keep_rows=with_trajectories)
    return Evaluation.of(settled, labels,
                         trajectories=_score_objects(settled, scored) if with_trajectories else ())


def evaluate_all(path: str | Path, request: ScoringRequest | None = None,
                 **options: Unpack[ScoringOptions]) -> tuple[Evaluation, ...]:
    """Evaluate every run a path holds (an AgentDojo run directory, or a zip of one, holds one
    per pipeline and attack; a run file holds one)."""
    request = ScoringRequest.of(request, **options)
    if not holds_runs(path, request.fmt):
        return (evaluate(path, request),)
    runs = load_runs(path, request.fmt, verdict_map=request.verdict_map)
    if request.payloads is not None:
        raise InputError("a side log pairs with one run file, not with a run directory", source=str(path))
    # each run is parsed already (with the verdict map): it is scored as its objects hold it
    each = replace(request, payloads=None, verdict_map=None)
    return tuple(evaluate_run(run, each) for run in runs)
