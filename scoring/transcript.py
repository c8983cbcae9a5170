"""What a harness logged around a trajectory's messages, kept for the replay: its events in
order with their timing (Inspect's model and tool events, LITMUS's Prosecutor, Verifier, Analyzer
and Recoverer events), its scorers' scores with their explanations, the sample's metadata, the
tools the agent was offered (their definitions, where the format records them), and what the
harness calls the conversation's roles.

Importers keep them in ``Trajectory.extra`` as JSON text under the keys below (the canonical
format stores ``extra`` as written, so a replay read back from the workspace has them); nothing
here is scored. The text comes from the log: hostile, shown only as plain text.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from .model import Trajectory

TIMELINE = "timeline"
SCORE = "score"
METADATA = "metadata"
ROLES = "roles"
TOOLS = "tools"


@dataclass(frozen=True, slots=True)
class HarnessEvent:
    """One event of the harness's log, in the order logged."""

    agent: str
    """Who acted: ``model`` or ``tool`` (Inspect), ``Prosecutor``, ``Verifier``, ``Analyzer``,
    ``Recoverer`` (LITMUS)."""
    event: str
    """What happened, in the log's word (``conversation_turn``, ``execute_command``, a model's
    name, a tool's function)."""
    detail: str = ""
    """The event's content in words (a turn's text, a command and its result, a judgement)."""
    at: str = ""
    """The log's timestamp as written ("" where it has none)."""
    start: float | None = None
    """Seconds from the episode's start, where the log says."""
    seconds: float | None = None
    """How long the event took, where the log says."""


@dataclass(frozen=True, slots=True)
class HarnessScore:
    """A scorer's score of the sample, with what the scorer said of it."""

    scorer: str
    value: str
    answer: str = ""
    explanation: str = ""


@dataclass(frozen=True, slots=True)
class ToolDefinition:
    """A tool as the agent was offered it: its name, its description and its parameters' schema
    (JSON text, as logged)."""

    name: str
    description: str = ""
    parameters: str = ""


def tool_definition(raw: Any, name: str | None = None) -> ToolDefinition | None:
    """One tool's definition in any of the logged shapes: OpenAI's ``{type: function, function:
    {name, description, parameters}}``, Inspect's ``ToolInfo`` ``{name, description, parameters}``,
    tau2's ``{name, short_desc, long_desc, params}``; ``name``: the key it was logged under (a dict
    of definitions by name). None for anything without a name."""
    if not isinstance(raw, dict):
        return None
    if isinstance(raw.get("function"), dict):
        raw = raw["function"]
    tool = raw.get("name", name)
    if not isinstance(tool, str) or not tool:
        return None
    said = [raw.get(k) for k in ("description", "short_desc", "long_desc")]
    description = "\n".join(dict.fromkeys(text(d) for d in said if d))
    params = next((raw[k] for k in ("parameters", "params", "input_schema") if raw.get(k) is not None), None)
    return ToolDefinition(tool, description, "" if params is None else json.dumps(params, ensure_ascii=False,
                                                                                  indent=2, default=str))


def tool_definitions_of(raw: Any) -> list[ToolDefinition]:
    """The definitions of a logged list of tools, or of a dict of them by name (each name once:
    the first kept, as a model event logs the same tools on every turn)."""
    items = raw.items() if isinstance(raw, dict) else ((None, r) for r in raw) if isinstance(raw, list) else ()
    seen: dict[str, ToolDefinition] = {}
    for key, r in items:
        if (d := tool_definition(r, key if isinstance(key, str) else None)) is not None:
            seen.setdefault(d.name, d)
    return list(seen.values())


def tools_extra(definitions: Iterable[ToolDefinition]) -> tuple[tuple[str, str], ...]:
    """The ``extra`` pair that keeps the tools the agent was offered (none when none is known)."""
    rows = [asdict(d) for d in definitions]
    return ((TOOLS, json.dumps(rows, ensure_ascii=False)),) if rows else ()


def timeline_extra(events: Iterable[HarnessEvent]) -> tuple[tuple[str, str], ...]:
    """The ``extra`` pair that keeps ``events`` (none when there are none)."""
    rows = [asdict(e) for e in events]
    return ((TIMELINE, json.dumps(rows, ensure_ascii=False)),) if rows else ()


def scores_extra(scores: Iterable[HarnessScore]) -> tuple[tuple[str, str], ...]:
    """One ``extra`` pair per score."""
    return tuple((SCORE, json.dumps(asdict(s), ensure_ascii=False)) for s in scores)


def metadata_extra(metadata: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    """The ``extra`` pair that keeps the sample's metadata (none when it has none)."""
    return ((METADATA, json.dumps(dict(metadata), ensure_ascii=False, default=str)),) if metadata else ()


def roles_extra(roles: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """The ``extra`` pair naming the conversation's roles as the harness does (``user`` →
    ``Prosecutor``)."""
    return ((ROLES, json.dumps(dict(roles), ensure_ascii=False)),)


def _loads(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def timeline(t: Trajectory) -> list[HarnessEvent]:
    """The harness's events kept with ``t`` ([] where its importer kept none); a malformed
    entry (an edited canonical file) is skipped, never raised: the replay must still draw."""
    out: list[HarnessEvent] = []
    for key, text in t.extra:
        if key != TIMELINE or not isinstance(rows := _loads(text), list):
            continue
        for r in rows:
            if isinstance(r, dict):
                out.append(HarnessEvent(agent=str(r.get("agent", "")), event=str(r.get("event", "")),
                                        detail=str(r.get("detail", "")), at=str(r.get("at", "")),
                                        start=_number(r.get("start")), seconds=_number(r.get("seconds"))))
    return out


def scores(t: Trajectory) -> list[HarnessScore]:
    """The scorers' scores kept with ``t``, in the order logged."""
    out = []
    for key, text in t.extra:
        if key == SCORE and isinstance(r := _loads(text), dict):
            out.append(HarnessScore(scorer=str(r.get("scorer", "")), value=str(r.get("value", "")),
                                    answer=str(r.get("answer", "")), explanation=str(r.get("explanation", ""))))
    return out


def metadata(t: Trajectory) -> dict[str, str]:
    """The sample's metadata kept with ``t``, each value as text (lists and objects as JSON)."""
    for key, text in t.extra:
        if key == METADATA and isinstance(r := _loads(text), dict):
            return {str(k): v if isinstance(v, str) else json.dumps(v, ensure_ascii=False) for k, v in r.items()}
    return {}


def role_names(t: Trajectory) -> dict[str, str]:
    """What the harness calls each role of the conversation ({} where the roles are its own)."""
    for key, text in t.extra:
        if key == ROLES and isinstance(r := _loads(text), dict):
            return {str(k): str(v) for k, v in r.items()}
    return {}


def tool_definitions(t: Trajectory) -> list[ToolDefinition]:
    """The tools the agent was offered, as kept with ``t`` ([] where the format records none)."""
    for key, value in t.extra:
        if key == TOOLS and isinstance(rows := _loads(value), list):
            return [ToolDefinition(str(r.get("name", "")), str(r.get("description", "")),
                                   str(r.get("parameters", ""))) for r in rows if isinstance(r, dict)]
    return []


SHOWN_KEYS = frozenset((TIMELINE, SCORE, METADATA, ROLES, TOOLS))
"""The ``extra`` keys this module reads (the replay draws them in their own sections)."""


def text(value: Any) -> str:
    """A logged value as one line of text: a string as written, anything else as compact JSON."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
