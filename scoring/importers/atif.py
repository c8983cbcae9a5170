"""ATIF trajectories (Agent Trajectory Interchange Format; Harbor / terminal-bench).

``steps[source=agent].tool_calls[] {tool_call_id, function_name, arguments}``, results in
``observation.results[] {source_call_id, content}``. ``continued_trajectory_ref`` segments that
sit beside the file are followed and joined. ATIF has no scores, limits or truncation fields;
an in-band ``<response clipped>`` marks a cut result. No verdict. Structural standard.
"""

from __future__ import annotations

import json
from pathlib import Path

from ..model import EvidenceStandard, Message, RunHeader, Termination, Trajectory
from ._chat import CallBuilder, text_of
from ._common import build_run, load_json_document

NAME = "atif"
MAX_SEGMENTS = 100


def sniff(head: bytes) -> bool:
    return head.lstrip().startswith(b"{") and b'"ATIF' in head


def _segments(doc: dict, source: str) -> list[dict]:
    out, seen = [doc], {source}
    here = Path(source)
    while out[-1].get("continued_trajectory_ref") and len(out) < MAX_SEGMENTS:
        ref = str(out[-1]["continued_trajectory_ref"])
        stem = here.name.split("trajectory")[0]
        candidates = [here.with_name(Path(ref).name), here.with_name(stem + Path(ref).name)]
        nxt = next((c for c in candidates if c.is_file() and str(c) not in seen), None)
        if nxt is None:
            break  # the segment is not beside the file: import what is here, say so below
        seen.add(str(nxt))
        out.append(load_json_document(nxt.read_bytes(), str(nxt)))
    return out


def parse(data: bytes, source: str):
    doc = load_json_document(data, source)
    segments = _segments(doc, source)
    agent = doc.get("agent") or {}
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
        unresolved = segments[-1].get("continued_trajectory_ref")
        detail = f"continuation {unresolved!r} not found beside the file" if unresolved else ""
        return Trajectory(id=str(doc.get("session_id", Path(source).stem)), task_id=Path(source).stem,
                          messages=tuple(messages), tool_calls=calls.build(), final_output=final, verdict=None,
                          termination=Termination.ERROR if unresolved else Termination.COMPLETED,
                          termination_detail=detail)

    return build_run(header=header, items=[(None, None, make)], source=source, data=data)
