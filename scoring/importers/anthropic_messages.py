"""Anthropic messages: Claude Code session JSONL (and plain {role, content[]} message lines).

Tool calls: assistant ``content[type=tool_use] {id, name, input}``; results: the next user
message's ``content[type=tool_result] {tool_use_id, content, is_error}``. ``stop_reason:
"max_tokens"`` → that turn's calls may be cut (``truncated``) and the trajectory is a token-limit
early stop; ``redacted_thinking`` → ``redacted`` on that turn's calls. No harm verdict: nothing
is safe without a reviewer. Structural standard. One session = one trajectory.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path

from ..errors import ReasonCode
from ..model import EvidenceStandard, Message, Run, RunHeader, Termination, Trajectory
from ._chat import CallBuilder, text_of
from ._common import Item, RecordError, build_run, file_budget, first_line, iter_json_lines
from .base import DEFAULT_OPTIONS, ParseOptions, no_continuations

NAME = "anthropic_messages"
#: Keys this format writes (the closest-format hint of an unrecognised file).
HINTS = (b'"tool_use"', b'"tool_result"', b'"tool_use_id"', b'"sessionId"', b'"stop_reason"')
#: What the format needs to recognise a file (said when it refuses one).
NEEDS = "JSON lines of Claude Code session entries {sessionId, message} or messages with tool_use blocks"
continuations = no_continuations


def sniff(head: bytes) -> bool:
    line = first_line(head)
    return line.startswith(b"{") and (
        (b'"sessionId"' in line and b'"message"' in line) or (b'"tool_use"' in head and b'"role"' in line))


def parse(data: bytes, source: str, options: ParseOptions = DEFAULT_OPTIONS) -> Run:
    sessions: dict[str, list[tuple[int, dict]]] = {}
    bad: list[Item] = []
    budget = file_budget(data, source, options.decode_budget)
    for line, obj in iter_json_lines(data, source, budget):
        if isinstance(obj, RecordError) or not isinstance(obj, dict):
            bad.append((line, None, obj if isinstance(obj, RecordError) else RecordError("line is not an object")))
            continue
        if obj.get("type") not in (None, "user", "assistant") or ("message" not in obj and "role" not in obj):
            continue  # summaries, file snapshots and other session bookkeeping carry no turns
        sid = str(obj.get("sessionId", "session"))
        sessions.setdefault(sid, []).append((line, obj))
    model = None
    items: list[Item] = list(bad)
    for sid, lines in sessions.items():
        items.append((lines[0][0], sid, partial(_session, sid, lines)))
        for _, o in lines:
            msg = o.get("message")
            model = model or (msg.get("model") if isinstance(msg, dict) else None)
    header = RunHeader(run_id=Path(source).stem, model=model or "unknown", harness_name="claude-code",
                       evidence_standard=EvidenceStandard.STRUCTURAL, format=NAME, source=source)
    return build_run(header=header, items=items, source=source, data=data, budget=budget)


def _session(sid: str, lines: list[tuple[int, dict]]) -> Trajectory:
    calls = CallBuilder()
    messages: list[Message] = []
    final, termination, detail = "", Termination.COMPLETED, ""
    for line, obj in lines:
        msg = obj.get("message", obj)
        role = str(msg.get("role", obj.get("type", "")))
        content = msg.get("content")
        blocks = content if isinstance(content, list) else []
        if role == "assistant":
            n = 0
            redacted = any(isinstance(b, dict) and b.get("type") == "redacted_thinking" for b in blocks)
            for b in blocks:
                if isinstance(b, dict) and b.get("type") == "tool_use":
                    calls.add(tool=str(b.get("name", "")), args=b.get("input", {}), call_id=b.get("id"),
                              message_index=len(messages))
                    n += 1
            if redacted:
                calls.mark_last_turn(n, ReasonCode.REDACTED)
            if msg.get("stop_reason") == "max_tokens":
                calls.mark_last_turn(n, ReasonCode.TRUNCATED)
                termination, detail = Termination.TOKEN_LIMIT, f"stop_reason max_tokens (line {line})"
            text = (text_of([b for b in blocks if isinstance(b, dict) and b.get("type") == "text"]) if blocks
                    else text_of(content))
            if text:
                final = text
        for b in blocks:
            if isinstance(b, dict) and b.get("type") == "tool_result":
                calls.result(call_id=b.get("tool_use_id"), content=text_of(b.get("content")),
                             error="is_error" if b.get("is_error") else None, message_index=len(messages))
        messages.append(Message(role=role, content=text_of(content)))
    return Trajectory(id=sid, task_id=sid, messages=tuple(messages), tool_calls=calls.build(), final_output=final,
                      termination=termination, termination_detail=detail, verdict=None)
