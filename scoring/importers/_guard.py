"""The Inspect scorer guard's scores (``litmus_inspect.strict``), as litmus-review reads them.

Where the guard refuses a verdict it writes ``Score.unscored`` (value NaN, which a log may hold as
``null``) with ``reason`` ``litmus_review:<code>``, the calls it concerns in ``explanation`` and
the inner scorer's value in ``metadata.inner_value``. Where it keeps a value although the proof
failed (harm found, or a value it does not call benign) it lists the problems in
``metadata.litmus_review.problems`` (``"<code>: <detail>"``).

litmus-review never takes the guard's word that a value is harm or benign: the verdict map reads
the inner value (``inspect_log.VerdictMap``). A value it maps safe that the guard refused, or kept
with problems, is a benign the harness itself withheld: UNSCORED with the guard's reason
(``HarnessVerdict.refused_reason``). A refusal can only withhold SAFE, never make it, so the
guard's reason is read as written; a code this release does not know as a blocking reason is
``guard_refused``, naming the code.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ..errors import BLOCKING_REASONS, ReasonCode
from ..model import HarnessVerdict

REASON_PREFIX = "litmus_review:"
"""What starts the ``reason`` of a score the guard refused (the reason code follows it)."""


@dataclass(frozen=True, slots=True)
class GuardRefusal:
    """A guarded score whose value the guard did not let stand as proven."""

    reason: ReasonCode
    detail: str
    value: Any
    """The inner scorer's value (what the verdict map reads)."""
    value_known: bool
    """The guard recorded the inner value (a refusal without it cannot be read benign, or harm)."""


def _unscored(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _code(code: str, detail: str) -> tuple[ReasonCode, str]:
    try:
        known = ReasonCode(code)
    except ValueError:
        known = None
    if known is not None and known in BLOCKING_REASONS:
        return known, detail
    return ReasonCode.GUARD_REFUSED, f"the guard's reason {code!r}" + (f": {detail}" if detail else "")


def guard_refusal(score: Any) -> GuardRefusal | None:
    """What the guard withheld in one Inspect score (a ``scores`` entry), or None where nothing
    was: a score it refused (unscored, ``litmus_review:<code>``), or a value it kept while listing
    problems. Any other score, a guarded one whose proof held included, is None."""
    if not isinstance(score, dict):
        return None
    found = score.get("metadata")
    metadata: dict = found if isinstance(found, dict) else {}
    reason = score.get("reason")
    if isinstance(reason, str) and reason.startswith(REASON_PREFIX) and _unscored(score.get("value")):
        explanation = score.get("explanation")
        code, detail = _code(reason[len(REASON_PREFIX):].strip(), explanation if isinstance(explanation, str) else "")
        return GuardRefusal(code, detail, metadata.get("inner_value"), "inner_value" in metadata)
    attestation = metadata.get("litmus_review")
    problems = attestation.get("problems") if isinstance(attestation, dict) else None
    if isinstance(problems, list) and problems and all(isinstance(p, str) for p in problems):
        code, detail = _code(problems[0].partition(":")[0].strip(), "; ".join(problems))
        return GuardRefusal(code, detail, score.get("value"), True)
    return None


def refused_verdict(refused: GuardRefusal | None, where: str) -> HarnessVerdict:
    """The harness verdict of a benign the guard withheld (``where``: the scorer and value, as the
    verdict map names them): benign where the inner value is known, carrying the guard's reason,
    so the strict scorer makes it UNSCORED with it unless harm is found; a refusal that did not
    record the inner value is no verdict of the judge's (abnormal), with the reason all the same."""
    if refused is None:
        raise ValueError("refused_verdict needs a guard refusal")
    known = refused.value_known
    return HarnessVerdict(label="benign" if known else None, confidence=1.0 if known else None, abnormal=not known,
                          refused_reason=refused.reason, refused_detail=refused.detail[:1000],
                          source=f"{where} (refused by the harness's strict() guard: {refused.reason.value})"[:300])
