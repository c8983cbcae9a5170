"""ATIF trajectories (Agent Trajectory Interchange Format; Harbor / terminal-bench).

``steps[source=agent].tool_calls[] {tool_call_id, function_name, arguments}``, results in
``observation.results[] {source_call_id, content}``. ``continued_trajectory_ref`` segments that
sit beside the file are joined (the registry reads them: see ``continuations``). ATIF has no
scores, limits or truncation fields; an in-band ``<response clipped>`` marks a cut result. No
verdict. Structural standard.
"""

from __future__ import annotations

import json
from pathlib import Path

from ..errors import InputError
from ..model import EvidenceStandard, Message, Run, RunHeader, Termination, Trajectory
from ._chat import CallBuilder, text_of
from ._common import RecordError, build_run, file_budget, load_json_document
from .base import DEFAULT_OPTIONS, ParseOptions

NAME = "atif"
#: Keys this format writes (the closest-format hint of an unrecognised file).
HINTS = (b'"schema_version"', b'"steps"', b'"session_id"', b'"step_id"', b'"observation"', b'"source_call_id"')
#: What the format needs to recognise a file (said when it refuses one).
NEEDS = "a JSON object whose schema_version is ATIF-v1.x"


def sniff(head: bytes) -> bool:
    return head.lstrip().startswith(b"{") and b'"ATIF' in head


def continuations(data: bytes, source: str) -> tuple[str, ...]:
    """Where the segment continuing ``data`` may sit: its ``continued_trajectory_ref`` beside the
    run file ``source``, by the ref's name alone or prefixed with the run file's stem."""
    if b'"continued_trajectory_ref"' not in data:
        return ()  # nothing continues it: the file is not parsed here (``parse`` parses it, within its budget)
    doc = load_json_document(data, source, file_budget(data, source))
    ref = doc.get("continued_trajectory_ref") if isinstance(doc, dict) else None
    if not ref:
        return ()
    here, name = Path(source), Path(str(ref)).name
    stem = here.name.split("trajectory")[0]
    return (str(here.with_name(name)), str(here.with_name(stem + name)))


def parse(data: bytes, source: str, options: ParseOptions = DEFAULT_OPTIONS) -> Run:
    """The trajectory of ``data`` joined with the segments continuing it (``options.continuations``,
    read by the registry); a continuation that was not found ends it with an error termination."""
    budget = file_budget(data, source, options.decode_budget)
    doc = load_json_document(data, source, budget)
    if not isinstance(doc, dict):
        raise InputError(f"not ATIF: the file is a JSON {type(doc).__name__}, expected a trajectory object",
                         source=source)
    # the segments are one trajectory, held together: their parses counted in the first file's budget
    segments = [doc, *(load_json_document(s.data, s.source, budget) for s in options.continuations)]
    agent: dict = doc["agent"] if isinstance(doc.get("agent"), dict) else {}
    header = RunHeader(run_id=Path(source).stem, model=str(agent.get("model_name", "unknown")),
                       harness_name=f"ATIF {agent.get('name', '')}".strip(),
                       harness_version=str(doc.get("schema_version", "")),
                       evidence_standard=EvidenceStandard.STRUCTURAL, format=NAME, source=source)

    def make() -> Trajectory:
        calls, messages, final = CallBuilder(), [], ""
        for seg in segments:
            for step in seg.get("steps") or []:
                text = text_of(step.get("message"))
                messages.append(Message(role=str(step.get("source", "")), content=text))
                for tc in step.get("tool_calls") or []:
                    calls.add(tool=str(tc.get("function_name", "")), args=tc.get("arguments", {}),
                              call_id=tc.get("tool_call_id"), message_index=len(messages) - 1)
                for res in (step.get("observation") or {}).get("results") or []:
                    content = res.get("content")
                    content = content if isinstance(content, str) else json.dumps(content)
                    calls.result(call_id=res.get("source_call_id"), content=content,
                                 truncated="<response clipped>" in content)
                if step.get("source") == "agent" and text:
                    final = text
        if not messages:
            raise RecordError("no steps (an empty trajectory is not a trajectory)")
        unresolved = segments[-1].get("continued_trajectory_ref")
        detail = f"continuation {unresolved!r} not found beside the file" if unresolved else ""
        return Trajectory(id=str(doc.get("session_id", Path(source).stem)), task_id=Path(source).stem,
                          messages=tuple(messages), tool_calls=calls.build(), final_output=final, verdict=None,
                          termination=Termination.ERROR if unresolved else Termination.COMPLETED,
                          termination_detail=detail)

    return build_run(header=header, items=[(None, None, make)], source=source, data=data, budget=budget)
