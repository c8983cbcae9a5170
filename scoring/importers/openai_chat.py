"""OpenAI chat messages: tau-bench ``historical_trajectories`` lists, and JSONL of message lists.

Tool calls: ``messages[role=assistant].tool_calls[].function{name, arguments}`` (a JSON string);
results: ``role: tool`` by ``tool_call_id``. ``finish_reason: "length"`` marks that turn's calls
as possibly cut (``truncated``). The format records no harm verdict, so nothing is safe without a
reviewer: trajectories end Inconclusive unless the taxonomy rules fire. Structural standard.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

from ..errors import InputError, OverBudgetError
from ..model import EvidenceStandard, Run, RunHeader, Termination, Trajectory
from ..transcript import tool_definitions_of, tools_extra
from ._chat import openai_messages
from ._common import (
    LINE_SLOTS,
    Item,
    RecordError,
    array_first_keys,
    build_run,
    file_budget,
    first_line,
    iter_json_lines,
    load_json_document,
    released,
)
from ._zip import Budget, released_bytes
from .base import DEFAULT_OPTIONS, ParseOptions, no_continuations

NAME = "openai_chat"
#: Keys this format writes (the closest-format hint of an unrecognised file).
HINTS = (b'"tool_calls"', b'"tool_call_id"', b'"function"', b'"finish_reason"', b'"traj"')
continuations = no_continuations


#: What the format needs to recognise a file (said when it refuses one).
NEEDS = ("tau-bench's list of {task_id, traj} records, JSON lines of {messages} records or of message lists, or "
         "one JSON array whose elements are messages (objects with a role)")


def _is_message(x: Any) -> bool:
    return isinstance(x, dict) and isinstance(x.get("role"), str)


def sniff(head: bytes) -> bool:
    """tau-bench's historical list, a line ``{messages: [...], role...}``, or an array whose first
    element is a message (a whole-file message list, or a line of JSON lines), or an array of
    such arrays. An array of anything else is not chat (a list of tau2 simulations has
    ``messages`` inside its elements but no ``role`` of its own)."""
    first = array_first_keys(head)
    if first is not None and "task_id" in first and b'"traj"' in head:
        return True
    if first is not None:
        return "role" in first
    inner = head.lstrip()[1:] if head.lstrip().startswith(b"[") else b""
    if inner.lstrip().startswith(b"["):
        nested = array_first_keys(inner)
        return nested is not None and "role" in nested
    line = first_line(head)
    return line.startswith(b"{") and b'"messages"' in line and b'"role"' in line


def _trajectory(tid: str, task: str, messages: Any, model: str | None = None, tools: Any = None) -> Trajectory:
    if not isinstance(messages, list):
        raise RecordError(f"messages is {type(messages).__name__}, expected a list of messages", tid)
    if not messages:
        raise RecordError("no messages (an empty conversation is not a trajectory)", tid)
    for i, m in enumerate(messages):
        if not _is_message(m):
            raise RecordError(f"messages[{i}] is not a message (an object with a role): "
                              f"{type(m).__name__}" + (f" with keys {', '.join(sorted(map(str, m))[:6])}"
                                                       if isinstance(m, dict) else ""), tid)
    msgs, calls, final, cut = openai_messages(messages)
    return Trajectory(id=tid, task_id=task, messages=msgs, tool_calls=calls.build(), final_output=final,
                      termination=Termination.TOKEN_LIMIT if cut else Termination.COMPLETED,
                      termination_detail="finish_reason: length" if cut else "", verdict=None, model=model,
                      extra=tools_extra(tool_definitions_of(tools)))  # a request's ``tools``, where recorded


def _historical(r: Any) -> Trajectory:
    """A tau-bench historical record ``{task_id, trial, reward, info, traj}``."""
    if not isinstance(r, dict) or "traj" not in r:
        raise RecordError("not a tau-bench record {task_id, trial, traj}")
    return _trajectory(f"task{r.get('task_id')}-trial{r.get('trial', 0)}", str(r.get("task_id")), r["traj"])


def _array_items(doc: list, source: str, budget: Budget) -> Iterable[Item]:
    """The records of a whole-file JSON array: tau-bench's historical records, one message
    list, or a list of message lists (each made as ``build_run`` asks for it, and let go once
    made); anything else is not chat and is refused."""
    if doc and isinstance(doc[0], dict) and "traj" in doc[0]:
        # tau-bench historical: [{task_id, trial, reward, info, traj}]; model only in the file name
        return ((None, f"{r.get('task_id')}-{r.get('trial')}" if isinstance(r, dict) else f"[{i}]",
                 partial(_historical, r)) for i, r in released(doc, budget))
    if doc and all(_is_message(m) for m in doc):
        return [(None, "conversation", partial(_trajectory, "conversation", "conversation", doc))]
    if doc and all(isinstance(m, list) for m in doc):
        return ((None, f"[{i}]", partial(_trajectory, f"conversation{i}", f"conversation{i}", m))
                for i, m in released(doc, budget))
    first = doc[0] if doc else None
    seen = ("it is empty" if not doc else f"its first element is {type(first).__name__}"
            + (f" with keys {', '.join(sorted(map(str, first))[:8])}" if isinstance(first, dict) else ""))
    raise InputError(f"not chat: a JSON array whose elements are not messages (objects with a role); {seen}",
                     source=source)


def parse(data: bytes, source: str, options: ParseOptions = DEFAULT_OPTIONS) -> Run:
    model = Path(source).stem
    header = RunHeader(run_id=Path(source).stem, model=model, harness_name="openai-chat",
                       evidence_standard=EvidenceStandard.STRUCTURAL, format=NAME, source=source)
    budget = file_budget(data, source, options.decode_budget)
    if data.lstrip().startswith(b"["):
        try:
            doc = load_json_document(data, source, budget)
        except OverBudgetError:
            raise  # refused whole: never read again as lines
        except InputError:
            doc = None  # not one document: JSON lines of message lists, each line read on its own
        if isinstance(doc, list):
            return build_run(header=header, items=_array_items(doc, source, budget), source=source, data=data,
                             budget=budget)
    return build_run(header=header, items=_line_items(data, source, budget), source=source, data=data, budget=budget)


def _line_items(data: bytes, source: str, budget: Budget) -> Iterator[Item]:
    """The records of JSON lines, each made as ``build_run`` asks for it: a line's objects are
    let go (and taken off ``budget``'s count) once its record is made."""
    for line, obj in iter_json_lines(data, source, budget):
        if isinstance(obj, RecordError):
            yield line, None, obj
        elif isinstance(obj, dict):
            rid = str(obj.get("id", f"line{line}"))
            task = str(obj.get("task_id", rid))
            yield line, rid, partial(_trajectory, rid, task, obj.get("messages"), tools=obj.get("tools"))
        elif isinstance(obj, list):
            yield line, f"line{line}", partial(_trajectory, f"line{line}", f"line{line}", obj)
        else:
            yield line, None, RecordError(f"line is a JSON {type(obj).__name__}, expected a record "
                                          "{messages} or a list of messages")
        # a rejection keeps the error's message (counted as it is kept): the rest is let go
        budget.release(LINE_SLOTS + (sys.getsizeof(obj) if isinstance(obj, RecordError) else released_bytes(obj)))
