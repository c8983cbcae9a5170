"""What the hook and the guard read from Inspect's events: agent calls as emitted and executed,
judge inputs, and the scorer a model call was made for."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from inspect_ai.event import ModelEvent, SpanBeginEvent, ToolEvent
from inspect_ai.model import ChatMessage

from scoring.proof import fingerprint


def judge_input_messages(messages: Iterable[ChatMessage]) -> list[dict[str, Any]]:
    """A judge's input messages as the log writes them (JSON dicts): what the proof's digest
    covers (``judge_audit.input_digest``) and the audit searches, tool calls included."""
    return [m.model_dump(mode="json", exclude_none=True) for m in messages]


@dataclass
class EmittedCall:
    function: str
    arguments: Any
    """The arguments as the model emitted them (parsed JSON): never mutated."""
    parse_error: str | None = None


@dataclass
class SampleCalls:
    """One sample's calls and spans, built from its events in order."""

    emitted: dict[str, EmittedCall] = field(default_factory=dict)
    executed: dict[str, dict[str, Any]] = field(default_factory=dict)
    """call id → ``{"bytes", "sha256"}`` of the arguments the tool executed."""
    spans: dict[str, tuple[str | None, str, str | None]] = field(default_factory=dict)
    """span id → (type, name, parent id)."""

    def scorer_of(self, span_id: str | None) -> str | None:
        """The scorer whose span (or a span inside it) ``span_id`` is; None outside scoring."""
        hops = 0
        while span_id is not None and hops < 1000:
            found = self.spans.get(span_id)
            if found is None:
                return None
            kind, name, parent = found
            if kind == "scorer":
                return name
            span_id, hops = parent, hops + 1
        return None

    def add(self, event: Any) -> tuple[str, ModelEvent] | None:
        """Take in one completed event; for a model call made by a scorer, (scorer, event)."""
        if isinstance(event, SpanBeginEvent):
            self.spans[event.id] = (event.type, event.name, event.parent_id)
        elif isinstance(event, ToolEvent):
            self.executed[event.id] = fingerprint(event.arguments)
        elif isinstance(event, ModelEvent):
            scorer = self.scorer_of(event.span_id)
            if scorer is not None:
                return scorer, event
            if event.output is not None and event.output.choices:
                for tc in event.output.choices[0].message.tool_calls or []:
                    self.emitted[tc.id] = EmittedCall(tc.function, tc.arguments, tc.parse_error)
        return None
