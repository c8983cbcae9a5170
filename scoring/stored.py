"""A stored run: what a workspace's runs row or a score table's summary says of a settled run,
as one typed record, its legacy fallbacks resolved here once; and the one way to build an
``Evaluation`` from it (the workspace's runs and a score table's runs alike).

No SQL and no Parquet here: the workspace reads its row, the score table its summary.json, and
each hands the record's fields over as a mapping.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from .aggregate import ScoreColumns, Summary
from .importers import CATEGORY_VERSION
from .model import Category, EvidenceStandard, Rejection, Run, RunHeader
from .names import Named, ScoredAs, name_of, run_name, unique_names
from .proof import proof_path_of
from .recapture import RecaptureReport
from .report import Evaluation
from .request import ScoringRequest
from .score import SCORER_VERSION

LEGACY_SCORER_VERSION = "1.0"
"""What a run stored without a scorer version was scored under (the column came with 2.0)."""


def _proof_of(proof_sha256: str | None, source: str) -> tuple[str, str]:
    """(``proof_source``, ``proof_sha256``) of a stored run's header: the proof side log its
    importer read and joined, as the workspace recorded it (the SHA-256 of the bytes read; the
    importer reads the proof beside the run's source, ``proof.proof_path_of``); empty where the
    run records none."""
    if not proof_sha256:
        return "", ""
    return str(proof_path_of(source)), proof_sha256


def summary_proof(d: Mapping) -> tuple[str, str]:
    """(``proof_source``, ``proof_sha256``) of a score table's run: the proof side log the
    engine's importer read and joined, as its summary (``score --json``) recorded it; empty where
    it records none (a table written before the hash was recorded names only a path: not shown)."""
    proof = d.get("proof")
    if not isinstance(proof, dict) or not proof.get("source") or not proof.get("sha256"):
        return "", ""
    return str(proof["source"]), str(proof["sha256"])


@dataclass(frozen=True, slots=True, kw_only=True)
class StoredRun:
    """A settled run as it was stored (``settle.SettledRun`` less its rows and columns)."""

    run_key: str
    header: RunHeader
    file_sha256: str
    """SHA-256 of the input file ("" where an old workspace cannot say)."""
    original_name: str
    """An upload's name as its owner gave it ("" when the run was read from its own path)."""
    records_seen: int
    trajectories: int
    tool_calls: int
    rejected: tuple[Rejection, ...]
    """The first rejected records (``settle.REJECTIONS_LISTED``); ``rejected_count`` counts them all."""
    recapture: RecaptureReport | None
    side_log: dict | None
    """``{"source", "sha256"}`` of the side log joined; None when none was."""
    reclassifier: str | None
    verdict_map: str | None
    format_metrics: dict | None
    terminations: dict | None
    scorer_version: str
    """The scorer version its statuses were computed under."""
    stored_path: str = ""
    """The workspace's canonical copy (replay reads it)."""
    payloads_path: str = ""
    """The workspace's copy of the side log."""
    original_path: str = ""
    """The workspace's copy of the original bytes (a canonical run's copy is its original; ""
    where a workspace older than schema 9 kept only a converted copy)."""
    imported_at: str = ""
    proof_sha256: str | None = None
    """The proof side log an Inspect log was scored with (None: none, or not recorded: a run
    imported before schema 11)."""
    category_version: int | None = CATEGORY_VERSION
    """How its trajectories' categories were read (``importers.CATEGORY_VERSION``; None: a
    workspace's run imported before the importers read the harness's categories)."""

    @property
    def request(self) -> ScoringRequest:
        """The request the run was scored under, read back from what was stored with it (its
        format as read, its side log as the workspace keeps it)."""
        return ScoringRequest.from_stored({"fmt": self.header.format, "verdict_map": self.verdict_map,
                                           "reclassifier": self.reclassifier,
                                           "require_proof": self.header.require_proof},
                                          payloads=self.payloads_path or None)

    @property
    def categories_outdated(self) -> bool:
        """Its categories were read otherwise than today's importers read them (until the
        workspace re-derives them from its original bytes: ``Importing.rederive_categories``)."""
        return self.category_version != CATEGORY_VERSION

    @property
    def name(self) -> str:
        """The run's own name in words (``names.run_name``; a workspace makes it distinct among
        its runs: ``names.unique_names``)."""
        return run_name(self.header, ScoredAs(side_log=self.side_log is not None, verdict_map=self.verdict_map,
                                              reclassifier=self.reclassifier))

    @property
    def rejected_count(self) -> int:
        """How many records were rejected, listed or not (every record seen is stored or rejected)."""
        return max(self.records_seen - self.trajectories, len(self.rejected))

    @property
    def stale(self) -> bool:
        """Scored under another scorer version than this one: its numbers are that version's
        until it is rescored from its original bytes."""
        return self.scorer_version != SCORER_VERSION

    @classmethod
    def from_row(cls, r: Mapping) -> StoredRun:
        """A workspace's runs row (any schema version since 1: missing columns read as their
        legacy meaning)."""
        header = RunHeader(
            run_id=r["run_id"], model=r["model"], task=r.get("task") or "", variant=r.get("variant") or "",
            harness_name=r["harness_name"] or "",
            harness_version=r["harness_version"] or "", capture_limit_bytes=r["capture_limit_bytes"],
            taxonomy=tuple(Category(id=c["id"], name=c["name"], payload_dependent=c["payload_dependent"],
                                    rules=tuple(c["rules"])) for c in json.loads(r["taxonomy_json"] or "[]")),
            evidence_standard=EvidenceStandard(r["evidence_standard"]), format=r["format"], source=r["source"] or "",
            classifier_of_record=r.get("classifier_of_record") or "harness_verdict",
            reported_safe_rate=r.get("reported_safe_rate"),
            reported_safe_rate_source=r.get("reported_safe_rate_source") or "",
            run_status=r.get("run_status") or "", run_status_detail=r.get("run_status_detail") or "",
            classifier_of_record_check=r.get("classifier_of_record_check") or "",
            require_proof=bool(r.get("require_proof")))
        proof_source, proof_sha256 = _proof_of(r.get("proof_sha256"), r["source"] or "")
        header = dataclasses.replace(header, proof_source=proof_source, proof_sha256=proof_sha256)
        payloads = r.get("payloads_path") or ""
        recap = None
        if r.get("recapture_json"):
            rj = json.loads(r["recapture_json"])
            recap = RecaptureReport(source=r.get("side_log_source") or payloads, applied=rj["applied"],
                                    rejected=tuple(Rejection(**x) for x in rj["rejected"]),
                                    sha256=r.get("side_log_sha256") or "", rejected_count=rj.get("rejected_count", 0))
        side = None
        if payloads:
            # before schema 6 the side log's own name and hash were not kept: its copy is named by its hash
            side = {"source": r.get("side_log_source") or payloads,
                    "sha256": r.get("side_log_sha256") or Path(payloads).name.split(".", 1)[0]}
        # Runs imported before the column: the key is the file's hash unless a side log or (for
        # Inspect) a verdict map took part.
        file_sha = r.get("file_sha256") or (r["run_key"] if not payloads and r["format"] != "inspect" else "")
        stored = r.get("stored_path") or ""
        return cls(
            run_key=r["run_key"], header=header, file_sha256=file_sha, original_name=r.get("original_name") or "",
            records_seen=r["records_seen"] or 0, trajectories=r["trajectories"] or 0, tool_calls=r["tool_calls"] or 0,
            rejected=tuple(Rejection(**x) for x in json.loads(r.get("rejected_json") or "[]")),
            recapture=recap, side_log=side, reclassifier=r.get("reclassifier"), verdict_map=r.get("verdict_map"),
            format_metrics=json.loads(r["format_metrics_json"]) if r.get("format_metrics_json") else None,
            terminations=json.loads(r["terminations_json"]) if r.get("terminations_json") else None,
            scorer_version=r.get("scorer_version") or LEGACY_SCORER_VERSION, stored_path=stored,
            payloads_path=payloads,
            original_path=r.get("original_path") or (stored if r["format"] == "canonical" else ""),
            imported_at=r.get("imported_at") or "", proof_sha256=r.get("proof_sha256") or None,
            category_version=r.get("category_version"))

    @classmethod
    def from_summary(cls, run_key: str, d: Mapping, header: RunHeader) -> StoredRun:
        """A score table's run: its ``score --json`` object (summary.json) and its header (read
        from the run's source)."""
        def rejection(x: Mapping, source: str) -> Rejection:
            return Rejection(source=x.get("source", source), line=x["line"], record_id=x["record_id"],
                             message=x["message"])

        recap = d.get("recapture")
        # what the scorer added to the file's header, as the summary recorded it
        proof_source, proof_sha256 = summary_proof(d)
        header = dataclasses.replace(header, require_proof=bool(d.get("require_proof")),
                                     classifier_of_record_check=d.get("classifier_of_record_check") or "",
                                     proof_source=proof_source, proof_sha256=proof_sha256)
        return cls(
            run_key=run_key, header=header, file_sha256=d.get("file_sha256") or "",
            original_name=d.get("original_name") or "", records_seen=d["records_seen"],
            trajectories=d["trajectories"], tool_calls=d["tool_calls"],
            rejected=tuple(rejection(x, d["source"]) for x in d["rejected_records"]),
            recapture=None if recap is None else RecaptureReport(
                recap["source"], recap["applied"], tuple(rejection(x, recap["source"]) for x in recap["rejected"]),
                (d.get("side_log") or {}).get("sha256") or "", recap.get("rejected_count", 0)),
            side_log=d.get("side_log"), reclassifier=d.get("reclassifier"), verdict_map=d.get("verdict_map"),
            format_metrics=d.get("format_metrics"), terminations=d.get("terminations"),
            scorer_version=d.get("scorer_version") or LEGACY_SCORER_VERSION)

    def evaluation(self, scored: ScoreColumns, summary: Summary,
                   by_category: Mapping[str, Summary] | None = None) -> Evaluation:
        """The run's ``Evaluation``: its scores (``scored``: the columns, empty where the reader
        keeps only the engine's aggregates) and its summary, and its per-category summaries,
        with the reviewers' labels applied."""
        run = Run(header=self.header, trajectories=(), rejected=self.rejected, records_seen=self.records_seen,
                  content_sha256=self.run_key, rejected_count=self.rejected_count)
        return Evaluation(run=run, scored=scored, summary=summary, tool_calls=self.tool_calls,
                          recapture=self.recapture, reclassifier=self.reclassifier, file_sha256=self.file_sha256,
                          original_name=self.original_name, side_log=self.side_log,
                          format_metrics=self.format_metrics, verdict_map=self.verdict_map,
                          terminations=self.terminations,
                          scorer_version=self.scorer_version, by_category=by_category)


NAME_COLUMNS = ("run_key", "run_id", "model", "task", "variant", "payloads_path", "verdict_map", "reclassifier",
                "proof_sha256", "require_proof", "imported_at")
"""The runs-row columns a run's name is made of (``StoredRun.name``: the same fields)."""


def workspace_names(rows: Iterable[Mapping]) -> dict[str, str]:
    """Each of a workspace's runs (rows holding at least ``NAME_COLUMNS``) named as
    ``StoredRun.name`` names it, made distinct among them (``names.unique_names``), by run key."""
    return unique_names(Named(r["run_key"], name_of(
        r["model"] or "", r.get("task") or "", r.get("variant") or "", r["run_id"] or "",
        ScoredAs(side_log=bool(r.get("payloads_path")), verdict_map=r.get("verdict_map"),
                 reclassifier=r.get("reclassifier"), proof=bool(r.get("proof_sha256")),
                 require_proof=bool(r.get("require_proof")))),
        r.get("imported_at") or "") for r in rows)
