"""What the two AgentDojo formats share (``agentdojo``: one trace file or an Invariant export;
``agentdojo_dir``: a run directory): a case's trajectory and verdict as AgentDojo's own reader
means them, its task ids and its one-category taxonomy. A helper, not a format: the formats
import it and never each other."""

from __future__ import annotations

from collections.abc import Iterable

from ..model import Category, HarnessVerdict, Termination, Trajectory, harness_category
from ._chat import openai_messages
from ._common import RecordError


def task_id(suite, user_task) -> str:
    """``suite/user_task``: user task ids repeat across suites."""
    return f"{suite}/{user_task}"


def suites_text(suites: Iterable) -> str:
    """A run's task in its name: the suites its cases are of, sorted ("banking, slack")."""
    return ", ".join(sorted({str(s) for s in suites if s not in (None, "")}))


NO_ATTACK_TEXT = "no attack"


def attacks_text(attacks: Iterable) -> str:
    """A run's variant in its name: the attacks its cases ran under, sorted, and "no attack"
    (last) where some ran without one (AgentDojo's ``none`` or null)."""
    attacks = list(attacks)
    named = {str(a) for a in attacks if a not in (None, "", "none")}
    plain = any(a in (None, "", "none") for a in attacks)
    return " + ".join([*sorted(named), *([NO_ATTACK_TEXT] if plain else [])])


TAXONOMY = (Category(id="injection_success", name="prompt injection goal achieved", payload_dependent=True),)

CATEGORY_JOIN = " · "
"""Between a case's suite and its injection task in its category (``banking · injection_task_3``)."""


def case_category(suite, injection) -> str | None:
    """A case's category: ``suite · injection_task`` where an injection ran (injection task ids
    repeat across suites, so the suite qualifies it: the per-category figure is each injection
    goal's own ASR), the suite alone where none did (utility only: in no rate, but found by the
    suite's name). None when the file names no suite."""
    suite = harness_category(suite)
    if suite is None:
        return None
    injection = harness_category(injection)
    return harness_category(suite + CATEGORY_JOIN + injection) if injection else suite


#: ``security`` values read as AgentDojo's own reader reads them (the attack succeeded or not).
_SUCCEEDED = (True, "true", 1)
_FAILED = (False, "false", 0)


def _verdict(security, injection, error) -> HarnessVerdict | None:
    if error and injection:
        # AgentDojo forces security=true on an error and counts it in its ASR as an attack
        # success: the lenient rate (its claim) counts it so; the strict rate does not (abnormal)
        return HarnessVerdict(label="injection_success", abnormal=True, harness_counts=True,
                              source=f"agentdojo: error forced security=true (counted in its ASR): {error}"[:300])
    if error:
        return HarnessVerdict(label=None, abnormal=True, source=f"agentdojo: error forced security=true: {error}"[:300])
    if not injection:
        return None  # no attack to succeed: security is vacuous
    value = security.strip().lower() if isinstance(security, str) else security
    if any(value == v and type(value) is type(v) for v in _SUCCEEDED):
        return HarnessVerdict(label="injection_success", confidence=1.0, source=f"agentdojo security={security!r}")
    if any(value == v and type(value) is type(v) for v in _FAILED):
        return HarnessVerdict(label="benign", confidence=1.0, source=f"agentdojo security={security!r}")
    # An injected task was asked the question; a null or malformed answer is a missing
    # verdict (abnormal: Inconclusive, in the review queue), never "no question asked".
    return HarnessVerdict(label=None, abnormal=True, source=f"agentdojo security={str(security)[:80]!r}: "
                                                          "neither true nor false")


def trajectory(tid: str, task: str, messages: list, *, security, injection, error, model, suite) -> Trajectory:
    """One case as AgentDojo's reader means it: injected (``injection`` names its injection task)
    it asks whether the injection succeeded (intended category ``injection_success``)."""
    msgs, calls, final, _cut = openai_messages(messages)
    built = calls.build()
    termination, detail = Termination.COMPLETED, ""
    if error:
        termination, detail = Termination.ERROR, str(error)[:300]
    elif built and not built[-1].executed and messages and messages[-1].get("role") == "assistant":
        termination, detail = Termination.STEP_LIMIT, "ends on unexecuted tool calls (loop cap)"
    verdict = _verdict(security, injection, error)
    if not msgs and verdict is None and termination is Termination.COMPLETED:
        raise RecordError("no messages, no error and no injection: nothing recorded", tid)
    return Trajectory(id=tid, task_id=task, intended_category="injection_success" if injection else None,
                      category=case_category(suite, injection), messages=msgs, tool_calls=built,
                      final_output=final, termination=termination, termination_detail=detail,
                      verdict=verdict, model=model)
