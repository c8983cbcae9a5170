"""OpenAI chat messages: tau-bench ``historical_trajectories`` lists, and JSONL of message lists.

Tool calls: ``messages[role=assistant].tool_calls[].function{name, arguments}`` (a JSON string);
results: ``role: tool`` by ``tool_call_id``. ``finish_reason: "length"`` marks that turn's calls
as possibly cut (``truncated``). The format records no harm verdict, so nothing is safe without a
reviewer: trajectories end Inconclusive unless the taxonomy rules fire. Structural standard.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any

from ..model import EvidenceStandard, Run, RunHeader, Termination, Trajectory
from ._chat import openai_messages
from ._common import (
    Item,
    RecordError,
    build_run,
    first_line,
    iter_json_lines,
    load_json_document,
)
from .base import DEFAULT_OPTIONS, ParseOptions, no_continuations

NAME = "openai_chat"
#: Keys this format writes (the closest-format hint of an unrecognised file).
HINTS = (b'"tool_calls"', b'"tool_call_id"', b'"function"', b'"finish_reason"', b'"traj"')
continuations = no_continuations


def sniff(head: bytes) -> bool:
    h = head.lstrip()
    if h.startswith(b"[") and b'"traj"' in head and b'"task_id"' in head:
        return True
    line = first_line(head)
    return (line.startswith(b"{") and b'"messages"' in line and b'"role"' in line) or \
        (line.startswith(b"[") and b'"role"' in line)


def _trajectory(tid: str, task: str, messages: Any, model: str | None = None) -> Trajectory:
    if not isinstance(messages, list):
        raise RecordError("messages is not a list", tid)
    msgs, calls, final, cut = openai_messages(messages)
    return Trajectory(id=tid, task_id=task, messages=msgs, tool_calls=calls.build(), final_output=final,
                      termination=Termination.TOKEN_LIMIT if cut else Termination.COMPLETED,
                      termination_detail="finish_reason: length" if cut else "", verdict=None, model=model)


def _historical(r: dict) -> Trajectory:
    """A tau-bench historical record ``{task_id, trial, reward, info, traj}``."""
    return _trajectory(f"task{r['task_id']}-trial{r.get('trial', 0)}", str(r["task_id"]), r["traj"])


def parse(data: bytes, source: str, options: ParseOptions = DEFAULT_OPTIONS) -> Run:
    model = Path(source).stem
    header = RunHeader(run_id=Path(source).stem, model=model, harness_name="openai-chat",
                       evidence_standard=EvidenceStandard.STRUCTURAL, format=NAME, source=source)
    if data.lstrip().startswith(b"["):
        doc = load_json_document(data, source)
        if doc and isinstance(doc[0], dict) and "traj" in doc[0]:
            # tau-bench historical: [{task_id, trial, reward, info, traj}]; model only in the file name
            records: list[Item] = [(None, f"{r.get('task_id')}-{r.get('trial')}", partial(_historical, r))
                                   for r in doc]
            return build_run(header=header, items=records, source=source, data=data)
    items: list[Item] = []
    for line, obj in iter_json_lines(data, source):
        if isinstance(obj, RecordError):
            items.append((line, None, obj))
            continue
        msgs = obj.get("messages") if isinstance(obj, dict) else obj
        rid = str(obj.get("id", f"line{line}")) if isinstance(obj, dict) else f"line{line}"
        task = str(obj.get("task_id", rid)) if isinstance(obj, dict) else rid
        items.append((line, rid, partial(_trajectory, rid, task, msgs)))
    return build_run(header=header, items=items, source=source, data=data)
