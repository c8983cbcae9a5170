"""The stored trajectory row, defined once: its columns (names, order, meaning), how a scored
trajectory becomes one, and how its stored encodings read back.

The import's workers build rows (``scoring.ingest``), the workspace writes them to SQLite and
reads them back (``scoring.workspace``), the Dask engine writes them to Parquet
(``scoring.dask_engine``): all three take the layout from here. Worker processes import this
module, so it needs only the model and the standard library (no sqlite_utils, no pandas).

The columns, their types and encodings are ``SCHEMA`` (the database's encodings never change).
"""

from __future__ import annotations

import enum
import json
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from .errors import ReasonCode
from .model import (
    EvidenceStandard,
    ReviewLabel,
    ScoredTrajectory,
    Status,
    Suggestion,
    Termination,
    Trajectory,
    Truncation,
)


class Encoding(enum.Enum):
    """How a column's value is stored in a workspace row (SQLite), and so how a score table's
    Parquet types it (``scoring.dask_engine.table_layout.table_schema``)."""

    PLAIN = "plain"
    """The value itself: text, an integer or NULL."""
    FLAG = "flag"
    """1 / 0 / NULL in the workspace; a nullable boolean in a table."""
    NAMES = "names"
    """Names comma-joined, ``""`` for none; a list of strings in a table."""
    NUMBERS = "numbers"
    """Integers comma-joined, ``""`` for none; a list of integers in a table."""
    EVIDENCE = "evidence"
    """A JSON array of strings (NULL: none); a list of strings in a table."""
    GAPS = "gaps"
    """Per call, its gap reason codes comma-joined, the calls joined by ``|`` (``""``: no call
    has a gap); a list (per call) of lists of strings in a table."""


@dataclass(frozen=True, slots=True)
class Column:
    """One column of the stored trajectory row."""

    name: str
    kind: type
    """``int`` or ``str``: what SQLite stores (NULL allowed where ``nullable``)."""
    meaning: str
    nullable: bool = False
    encoding: Encoding = Encoding.PLAIN


SCHEMA: tuple[Column, ...] = (
    Column("trajectory_id", str, "the trajectory's id, unique in its run"),
    Column("task_id", str, "the benchmark task it ran"),
    Column("model", str, "the agent's model (the trajectory's, else the run's)", nullable=True),
    Column("intended_category", str, "the trajectory's category (``model.grouping_category``: the harness's own "
                                     "where its format records one, else the harm category the task probes)",
           nullable=True),
    Column("fired_category", str, "the category the classifier of record found", nullable=True),
    Column("status", str, "the strict status (``model.Status`` value)"),
    Column("reason", str, "why UNSCORED or Inconclusive: the first blocking reason code", nullable=True),
    Column("reasons", str, "every blocking reason code", encoding=Encoding.NAMES),
    Column("lenient_safe", int, "what the harness claimed (1 safe, 0 harm); NULL where it did not judge",
           nullable=True, encoding=Encoding.FLAG),
    Column("termination", str, "how the episode ended (``model.Termination`` value)"),
    Column("tool_call_count", int, "its tool calls"),
    Column("max_raw_bytes", int, "the largest call's argument size (raw where recorded, else captured)"),
    Column("tools", str, "the distinct tool names, in call order", encoding=Encoding.NAMES),
    Column("suggestion", str, "the hint for a reviewer (``model.ReviewLabel`` value)", nullable=True),
    Column("suggestion_evidence", str, "why the hint", nullable=True, encoding=Encoding.EVIDENCE),
    Column("classifier", str, 'the classifier whose verdict decided ("" where none did)'),
    Column("classifier_evidence", str, "why it decided", encoding=Encoding.EVIDENCE),
    Column("incomplete_call", int, "the first call whose capture is not proven complete (UNSCORED)",
           nullable=True),
    Column("recaptured_calls", str, "the calls whose full surface was recovered", encoding=Encoding.NUMBERS),
    Column("evidence_standard", str, "how capture was proven (``model.EvidenceStandard`` value)"),
    Column("final_output_preview", str, "the first characters of the final output"),
    Column("line", int, "the record's line in the run's stored file (relative to its block while a "
                        "worker builds it; the writer shifts it)"),
    Column("offset", int, "the record's byte offset in the run's stored file"),
    Column("length", int, "the record's length in bytes"),
    Column("call_sizes", str, "every call's argument size (raw where recorded, else captured)",
           encoding=Encoding.NUMBERS),
    Column("call_gaps", str, "the capture gaps scoring found, per call", encoding=Encoding.GAPS),
    Column("truncation", str, "where the harness said it cut (``model.Truncation`` value)"),
)
"""The stored trajectory row, the one place a column is defined: name, type, encoding and
meaning, in the row's order. The workspace's ``trajectories`` table holds ``run_key`` and then
these (a new column also needs a migration in ``workspace/schema.py``, which keeps history, and
a value from each row builder: ``encode`` here and the import's lean path); a score table's
Parquet schema is derived from it."""

ROW_COLUMNS: tuple[str, ...] = tuple(c.name for c in SCHEMA)
"""The columns of a trajectory row as a worker builds it; the writer adds ``run_key`` (the
workers start before the file's content hash, the run key, is known)."""


def _tuple_builder(names: tuple[str, ...]) -> Callable[..., tuple]:
    # Generated from the schema (as ``collections.namedtuple`` generates its ``__new__``) so the
    # builder's parameters are the columns without being written twice. It returns a plain
    # tuple: rows cross processes by marshal and pickle, where a tuple subclass is refused or
    # costs a constructor call per row.
    if not all(n.isidentifier() and not n.startswith("_") for n in names):
        raise ValueError(f"a column name is not a plain identifier: {names}")
    params = ", ".join(names)
    namespace: dict[str, Any] = {}
    exec(f"def row({params}):\n    return ({params},)\n", namespace)
    return namespace["row"]


row: Callable[..., tuple] = _tuple_builder(ROW_COLUMNS)
"""One stored trajectory row as a plain tuple in ``ROW_COLUMNS`` order, its parameters the
columns. The import's lean path calls it positionally (a keyword call costs several times as
much, per row); everything else by keyword."""
COL = {c: i for i, c in enumerate(ROW_COLUMNS)}
"""Column name → its position in a row."""
INTEGER_COLUMNS = frozenset(c.name for c in SCHEMA if c.kind is int)
"""The columns that hold integers (the rest hold text or NULL)."""
SCORE_FIELDS = ("trajectory_id", "task_id", "model", "intended_category", "reason", "status", "lenient_safe",
                "truncation", "classifier")
"""The columns ``ScoreColumns.build`` is built from, in its argument order."""
SCORE_INDEX = tuple(COL[c] for c in SCORE_FIELDS)
PREVIEW_CHARS = 200

# --- encode --------------------------------------------------------------------------------

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def join(values: Iterable[object]) -> str:
    """A list column's text (comma-joined; "" for none)."""
    return ",".join(map(str, values))


def evidence_json(evidence: Sequence[str]) -> str:
    return json.dumps(list(evidence))


def preview(final_output: str) -> str:
    """The stored preview of a final output. A lone surrogate (JSON can spell one) is not text
    SQLite can store: the preview shows U+FFFD."""
    return _LONE_SURROGATE.sub("\ufffd", final_output[:PREVIEW_CHARS])


def gaps_text(captures: Sequence[Any]) -> str:
    """``call_gaps`` of the calls' captures (``capture.Capture``, in call order)."""
    if not any(cap.gaps for cap in captures):
        return ""
    return "|".join(",".join(g.reason.value for g in cap.gaps) for cap in captures)


def encode(t: Trajectory, s: ScoredTrajectory, line: int, offset: int, length: int, captures: Sequence[Any]) -> tuple:
    """The row of a trajectory scored on the typed path (``captures``: its calls' captures)."""
    return row(
        trajectory_id=t.id, task_id=t.task_id, model=s.model, intended_category=s.intended_category,
        fired_category=s.fired_category, status=s.status.value, reason=s.reason.value if s.reason else None,
        reasons=join(r.value for r in s.reasons),
        lenient_safe=int(s.lenient_safe) if s.harness_judged else None,  # NULL: the harness did not judge
        termination=s.termination.value, tool_call_count=s.tool_call_count, max_raw_bytes=s.max_raw_bytes,
        tools=join(dict.fromkeys(c.tool for c in t.tool_calls)),
        suggestion=s.suggestion.label.value if s.suggestion else None,
        suggestion_evidence=evidence_json(s.suggestion.evidence) if s.suggestion else None,
        classifier=s.classifier, classifier_evidence=evidence_json(s.classifier_evidence),
        incomplete_call=s.incomplete_call, recaptured_calls=join(s.recaptured_calls),
        evidence_standard=s.evidence_standard.value, final_output_preview=preview(t.final_output),
        line=line, offset=offset, length=length,
        call_sizes=join(c.raw_size_bytes if c.raw_size_bytes is not None else c.captured_bytes for c in t.tool_calls),
        call_gaps=gaps_text(captures), truncation=s.truncation.value,
    )


# --- decode --------------------------------------------------------------------------------


def split(text: str | None) -> tuple[str, ...]:
    """A list column's values ("" or NULL: none)."""
    return tuple(x for x in text.split(",") if x) if text else ()


def split_ints(text: str | None) -> tuple[int, ...]:
    return tuple(int(x) for x in text.split(",") if x) if text else ()


def evidence(text: str | None) -> tuple[str, ...]:
    """An evidence column's lines (NULL or "": none)."""
    return tuple(json.loads(text)) if text else ()


def call_gaps(text: str | None, calls: int) -> tuple[tuple[ReasonCode, ...], ...]:
    """Per call, the gap reasons scoring found (``calls`` entries; none where ``text`` is empty)."""
    if not text:
        return ((),) * calls
    return tuple(tuple(ReasonCode(code) for code in part.split(",") if code) for part in text.split("|"))


# Enum lookups by value through a dict: Enum(value) is slow, and runs a million times per large run.
_STATUS = {s.value: s for s in Status}
_REASON = {r.value: r for r in ReasonCode}
_LABEL = {lab.value: lab for lab in ReviewLabel}
_STANDARD = {e.value: e for e in EvidenceStandard}
_TERMINATION = {t.value: t for t in Termination}
_TRUNCATION = {t.value: t for t in Truncation}

SCORED_COLUMNS = (
    "trajectory_id", "task_id", "model", "status", "lenient_safe", "intended_category", "fired_category", "reason",
    "reasons", "incomplete_call", "classifier", "suggestion", "evidence_standard", "recaptured_calls",
    "termination", "max_raw_bytes", "tool_call_count", "truncation",
)
"""What ``scored_from_row`` reads, in its order (``EVIDENCE_COLUMNS`` after them, if asked)."""
EVIDENCE_COLUMNS = ("classifier_evidence", "suggestion_evidence")


def scored_from_row(r: Sequence[Any], with_evidence: bool = False) -> ScoredTrajectory:
    """A row of ``SCORED_COLUMNS`` (+ ``EVIDENCE_COLUMNS``) as the aggregator's record.
    Positional: building a dict per row cost 40 % of loading a large run."""
    (tid, task, model, status, lenient, intended, fired, reason, reasons, incomplete, classifier, suggestion,
     standard, recaptured, termination, max_raw, n_calls, truncation) = r[:18]
    ev, sev = r[18:20] if with_evidence else (None, None)
    return ScoredTrajectory(
        trajectory_id=tid, task_id=task, model=model, status=_STATUS[status],
        # NULL: the harness did not judge, so it claimed no harm (``score.lenient_safe`` is True there)
        lenient_safe=lenient is None or bool(lenient),
        harness_judged=lenient is not None, truncation=_TRUNCATION[truncation or ""],
        intended_category=intended, fired_category=fired, reason=_REASON[reason] if reason else None,
        reasons=tuple(_REASON[x] for x in reasons.split(",") if x) if reasons else (),
        incomplete_call=incomplete, classifier=classifier or "",
        classifier_evidence=evidence(ev),
        suggestion=Suggestion(label=_LABEL[suggestion], evidence=evidence(sev)) if suggestion else None,
        evidence_standard=_STANDARD[standard], recaptured_calls=split_ints(recaptured),
        termination=_TERMINATION[termination], max_raw_bytes=max_raw, tool_call_count=n_calls,
    )
