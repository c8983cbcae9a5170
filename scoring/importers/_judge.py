"""The judge-input audit of an Inspect sample, from its own events (``judge_audit`` decides
what "shown" means; this module finds the deciding model call and its input in the log).

The deciding call of a verdict is looked for in the span of the scorer the verdict map reads
(``span_begin`` of type scorer in current logs, ``step`` events of type scorer in 0.3.79-era
logs): a model call there *links* when the score's explanation is its output, or its output
states the score's value as a whole token. Where several link, each must show every call.
Where the scorer made model calls and none links, every one of them is a candidate: nothing in
the log says which one decided, so none may be left out. Where the scorer made none, a judge
run in a solver (a model call whose output the agent never spoke) links the same way; where
nothing links, the verdict is ``programmatic``.
"""

from __future__ import annotations

import json
import re
import struct
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import accumulate
from typing import Any

from ..errors import RecordError
from ..judge_audit import AuditedCall, input_digest, message_text, rendered_input, shown_calls, text_join_digest
from ..model import JudgeAttestation
from ._zip import Charged, attachment, retained_bytes_each

STAMP = "judge input checked against the logged arguments"
"""What the audit certifies: the judge saw the arguments the log holds. Whether the log holds
them whole is the capture rules' question (structural, or proven by a proof side log)."""
STATE_CHECKING_PRESETS = frozenset({"side_task_success", "side_task_correctness"})
"""Presets whose scorer decides from the environment's state, not from a model's reading."""
_ATTACH = re.compile(r"attachment://([0-9a-f]{32})")
_PTR = struct.calcsize("P")


def _object(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def _array(value: Any) -> list:
    return value if isinstance(value, list) else []


def _resolve(value: Any, attachments: dict) -> Any:
    """``value`` with every ``attachment://`` reference replaced; one with nothing behind it raises."""
    if isinstance(value, str):
        def sub(m: re.Match) -> str:
            if m.group(1) not in attachments:
                raise RecordError(f"attachment://{m.group(1)} is not in the sample's attachments")
            return str(attachment(attachments, m.group(1), whole=m.span() == (0, len(value))))
        return _ATTACH.sub(sub, value)
    if isinstance(value, list):
        return [_resolve(v, attachments) for v in value]
    if isinstance(value, dict):
        return {k: _resolve(v, attachments) for k, v in value.items()}
    return value


@dataclass(frozen=True, slots=True)
class ModelCall:
    """One model event of the sample, resolved: its input messages, output text and digests."""

    position: int
    """Its index among the sample's events."""
    scorer: str | None
    """The scorer whose span it ran in; None outside scoring."""
    messages: tuple[dict, ...]
    output_text: str
    output_message_id: str | None
    failed: str
    """Why it did not read its input (an error, stop reason ``model_length``); "" when it did."""
    unresolved: str
    """What of its input or output the log does not hold; "" when everything resolved."""
    emitted: tuple[dict, ...] = ()
    """The tool calls its output emitted (``{"id", "function", "arguments"}``)."""

    @property
    def digest(self) -> str:
        return input_digest(self.messages)

    @property
    def text_digest(self) -> str:
        return text_join_digest(self.messages)


def _pool(sample: dict) -> list:
    pool = sample.get("message_pool")
    if isinstance(pool, list):
        return pool
    return _array(_object(sample.get("events_data")).get("messages"))


class _Inputs:
    """Model events' input messages, read from the event or from the sample's message pool by
    ``input_refs``. With ``charge``, what resolving each input copies is counted before it is
    built: a few bytes of references can name the whole pool again and again."""

    def __init__(self, pool: list, charge: Callable[[int], None] | None) -> None:
        self.pool, self.charge = pool, charge
        self._prefix: list[int] | None = None  # bytes of the pool's first n messages' containers

    def _cost(self, start: int, end: int) -> int:
        if self._prefix is None:
            self._prefix = list(accumulate(retained_bytes_each(self.pool, strings=False), initial=0))
        return self._prefix[end] - self._prefix[start] + (end - start) * _PTR

    def of(self, event: dict) -> list:
        refs = event.get("input_refs")
        if isinstance(refs, list) and refs:
            pool = self.pool
            for ref in refs:
                if not (isinstance(ref, list) and len(ref) == 2 and all(isinstance(x, int) for x in ref)
                        and 0 <= ref[0] <= ref[1] <= len(pool)):
                    raise RecordError(f"input_refs {ref!r} points outside the sample's message pool "
                                      f"({len(pool)} messages)")
                if self.charge is not None:
                    self.charge(self._cost(ref[0], ref[1]))
            out = []
            for ref in refs:
                out.extend(pool[ref[0]:ref[1]])
            return out
        # an input of the event's own is copied once, as the member's other objects: no more
        # than what parsing the member took, which its budget already counts
        return _array(event.get("input"))


def scored_events(sample: dict) -> Iterator[tuple[int, dict, str | None]]:
    """(index, event, the scorer whose span it is in — None outside scoring) for every event."""
    spans: dict[str, tuple[Any, Any, Any]] = {}
    steps: list[tuple[Any, Any]] = []  # 0.3.79-era logs: step begin/end of type scorer bracket a scorer
    for i, e in enumerate(_array(sample.get("events"))):
        if not isinstance(e, dict):
            continue
        kind = e.get("event")
        if kind == "span_begin":
            spans[str(e.get("id"))] = (e.get("type"), e.get("name"), e.get("parent_id"))
        elif kind == "step":
            if e.get("action") == "begin":
                steps.append((e.get("type"), e.get("name")))
            elif e.get("action") == "end" and steps:
                steps.pop()
        scorer = _scorer_of(spans, e.get("span_id"))
        if scorer is None:
            scorer = next((str(n) for t, n in reversed(steps) if t == "scorer"), None)
        yield i, e, scorer


def model_calls(sample: dict, charge: Callable[[int], None] | None = None) -> list[ModelCall]:
    """Every model event of the sample with the scorer it ran for, in order. ``charge``: told
    the bytes each resolved input and attachment copies, before they are copied."""
    attachments = _object(sample.get("attachments"))
    if charge is not None:
        attachments = Charged(attachments, charge)
    inputs = _Inputs(_pool(sample), charge)
    return [_model_call(i, e, scorer, inputs, attachments) for i, e, scorer in scored_events(sample)
            if e.get("event") == "model"]


def _scorer_of(spans: dict, span_id: Any) -> str | None:
    hops = 0
    while span_id is not None and hops < 1000:
        found = spans.get(str(span_id))
        if found is None:
            return None
        kind, name, parent = found
        if kind == "scorer":
            return str(name)
        span_id, hops = parent, hops + 1
    return None


def _model_call(position: int, e: dict, scorer: str | None, inputs: _Inputs, attachments: dict) -> ModelCall:
    unresolved = ""
    try:
        messages = tuple(m for m in _resolve(inputs.of(e), attachments) if isinstance(m, dict))
    except RecordError as exc:
        messages, unresolved = (), exc.message
    output = _object(e.get("output"))
    choice = _object(_array(output.get("choices"))[0]) if _array(output.get("choices")) else {}
    try:
        message = _object(_resolve(choice.get("message"), attachments))
        completion = _resolve(output.get("completion"), attachments)
    except RecordError as exc:
        message, completion, unresolved = {}, "", unresolved or f"its output: {exc.message}"
    text = message_text(message) or (completion if isinstance(completion, str) else "")
    failed = ""
    if e.get("error"):
        failed = f"it ended in error ({str(_object(e.get('error')).get('message', e.get('error')))[:200]})"
    elif choice.get("stop_reason") == "model_length":
        failed = "it stopped at its length limit (stop reason model_length)"
    elif output.get("error"):
        failed = f"its output is an error ({str(output.get('error'))[:200]})"
    emitted = tuple({"id": tc.get("id"), "function": tc.get("function"), "arguments": tc.get("arguments")}
                    for tc in _array(message.get("tool_calls")) if isinstance(tc, dict))
    mid = message.get("id")
    return ModelCall(position=position, scorer=scorer, messages=messages, output_text=text,
                     output_message_id=str(mid) if mid is not None else None, failed=failed,
                     unresolved=unresolved, emitted=emitted)


def _token(value: Any) -> str | None:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (int, float, str)) and str(value).strip():
        return str(value).strip()
    return None


def links(call: ModelCall, score: dict) -> bool:
    """The score's grade may have been parsed from this call's output: the output states the
    score's value as a whole token. (An explanation equal to an output is no link: a scorer
    can set its explanation to a summary and decide elsewhere.)"""
    token = _token(score.get("value"))
    out = call.output_text
    return token is not None and re.search(r"(?<![\w])" + re.escape(token) + r"(?![\w])", out) is not None


@dataclass
class Audit:
    """The audit of one sample's verdict: the attestation, and each deciding call's input (by
    digest), which a proof side log's judge records must name."""

    attestation: JudgeAttestation
    deciding: list[ModelCall] = field(default_factory=list)
    scorer_calls: list[ModelCall] = field(default_factory=list)
    calls: tuple[AuditedCall, ...] = ()
    excluded: tuple[str, ...] = ()
    results: tuple[str, ...] = ()
    final_response: str = ""

    def shown_by(self, call: ModelCall) -> tuple[bool, ...]:
        """Which of the sample's calls ``call``'s input shows (nothing, where it did not read)."""
        if call.failed or call.unresolved:
            return (False,) * len(self.calls)
        earlier = tuple(c.output_text for c in self.scorer_calls if c.position < call.position)
        rubric = tuple(message_text(m) for m in call.messages if m.get("role") == "system")
        return shown_calls(rendered_input(call.messages), self.calls, excluded=(*self.excluded, *earlier, *rubric),
                           results=self.results, final_response=self.final_response)


def _target_texts(sample: dict) -> tuple[str, ...]:
    """The sample's target (what a rubric shows the judge as its criterion)."""
    target = sample.get("target")
    if isinstance(target, str):
        return (target,)
    return tuple(str(t) for t in _array(target) if isinstance(t, str))


def _prompt_texts(sample: dict) -> tuple[str, ...]:
    prompt = sample.get("input")
    if isinstance(prompt, str):
        return (prompt,)
    return tuple(message_text(m) for m in _array(prompt) if isinstance(m, dict) and message_text(m))


def audit_sample(sample: dict, scorer: str, calls: Sequence[AuditedCall], final_response: str,
                 preset: str = "", every: list[ModelCall] | None = None) -> Audit | None:
    """The audit of ``scorer``'s verdict on ``sample`` (``calls``: the trajectory's calls, as
    logged); None where the log holds no events (what the judge read is not in it)."""
    if not _array(sample.get("events")):
        return None
    score = _object(_object(sample.get("scores")).get(scorer))
    tool_results = [text for m in _array(sample.get("messages")) if isinstance(m, dict) and m.get("role") == "tool"
                    for text in [message_text(m)] if text]
    tool_results += [str(e.get("result")) for _, e, _ in scored_events(sample)
                     if e.get("event") == "tool" and isinstance(e.get("result"), str) and e.get("result")]
    every = model_calls(sample) if every is None else every
    in_scorer = [c for c in every if c.scorer == scorer]
    agent_ids = {str(m.get("id")) for m in _array(sample.get("messages")) if isinstance(m, dict) and m.get("id")}
    audit = Audit(JudgeAttestation(scorer=scorer, input_sha256=()), scorer_calls=in_scorer, calls=tuple(calls),
                  excluded=(*_prompt_texts(sample), *_target_texts(sample)), results=tuple(tool_results),
                  final_response=final_response)
    # Nothing in a log says which of a scorer's model calls its grade came from (a scorer may
    # decide on one call's answer and explain with another's): every one of them may have.
    linked, how = in_scorer, f"every model call of scorer {scorer!r} ({len(in_scorer)}): any of them may have decided"
    sandboxed = any(e.get("event") == "sandbox" for _, e, s in scored_events(sample) if s == scorer)
    if not linked:
        judges = [c for c in every if c.scorer != scorer and c.output_message_id not in agent_ids and not c.emitted]
        copied = [c for c in judges if links(c, score)]
        linked, how = copied, ("a model call outside this scorer (a judge run in a solver or another scorer) whose "
                               "output gives the score")
        outside = [c for c in judges if c.scorer is None]
        if not linked and outside and not sandboxed:
            # The scorer called no model and read no state: it may have copied any judge run in a
            # solver, whatever that judge answered, so each of them is a candidate.
            linked, how = outside, (f"every model call outside the scorers that is not the agent's ({len(outside)}): "
                                    f"scorer {scorer!r} called no model and read no state, so it may have copied any")
    if not linked:
        audit.attestation = JudgeAttestation(
            scorer=scorer, input_sha256=(), kind="programmatic",
            state_checking=preset in STATE_CHECKING_PRESETS and sandboxed,
            source="programmatic: no model call decided the verdict",
            detail=f"scorer {scorer!r} made no model call, and no model call's output gives its score"
            + (f"; preset {preset!r} names a state-checking scorer, and its span "
               + ("reads the sandbox" if sandboxed else "holds no sandbox event: nothing shows it checked any state")
               if preset in STATE_CHECKING_PRESETS else ""))
        return audit
    audit.deciding = linked
    unresolved = [c for c in linked if c.unresolved]
    if unresolved:
        audit.attestation = JudgeAttestation(
            scorer=scorer, input_sha256=(), kind="unresolved", source=STAMP,
            detail=f"the deciding model call (event {unresolved[0].position}): {unresolved[0].unresolved}")
        return audit
    unseen: set[int] = set()
    notes = []
    for c in linked:
        shown = audit.shown_by(c)
        missed = [i for i, ok in enumerate(shown) if not ok]
        unseen.update(missed)
        if c.failed:
            notes.append(f"event {c.position} did not read its input: {c.failed}")
        elif missed:
            notes.append(f"event {c.position}'s input shows no span that parses back to call(s) "
                         f"{', '.join(map(str, missed))}")
    audit.attestation = JudgeAttestation(
        scorer=scorer, input_sha256=tuple(c.digest for c in linked), unseen_calls=tuple(sorted(unseen)),
        source=STAMP, detail=f"deciding: {how} (event(s) {', '.join(str(c.position) for c in linked)})"
        + (f"; {'; '.join(notes)}" if notes else ""))
    return audit


def agent_emitted(sample: dict, every: list[ModelCall] | None = None) -> list[dict]:
    """Tool calls the agent's model emitted (model events outside scoring) and the sample's
    final output emitted, in order, each once by id: what the messages must account for."""
    seen: set[str] = set()
    out = []
    for c in model_calls(sample) if every is None else every:
        if c.scorer is not None:
            continue
        for tc in c.emitted:
            cid = str(tc.get("id"))
            if tc.get("id") is None:
                out.append(tc)  # no id to join it by: the caller compares it by name and arguments
            elif cid not in seen:
                seen.add(cid)
                out.append(tc)
    final = _object(_array(_object(sample.get("output")).get("choices"))[0]) \
        if _array(_object(sample.get("output")).get("choices")) else {}
    for tc in _array(_object(final.get("message")).get("tool_calls")):
        if isinstance(tc, dict) and (tc.get("id") is None or str(tc["id"]) not in seen):
            if tc.get("id") is not None:
                seen.add(str(tc["id"]))
            out.append({"id": tc.get("id"), "function": tc.get("function"), "arguments": tc.get("arguments")})
    return out


def arguments_tree(arguments: Any) -> Any:
    """A logged call's arguments as a tree (a JSON string is parsed; anything else as it is)."""
    if isinstance(arguments, str):
        try:
            return json.loads(arguments)
        except ValueError:
            return arguments
    return arguments
