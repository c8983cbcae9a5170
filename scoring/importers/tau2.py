"""tau2-bench simulations, in the three shapes they are published in:

- the ``Results`` document tau2 writes: ``{timestamp, info, tasks, simulations}``;
- a leaderboard submission's wrapper: ``{domain, agent, passed, pass_rate, simulations}`` (some
  add ``model`` and ``total_tasks``);
- a bare JSON list of simulation objects.

Each simulation is ``{id, task_id, trial, termination_reason, reward_info, messages}``.
``termination_reason`` drives early-stop evidence; a simulation without one ended in a way
the file does not record (``not_recorded``: never an error). Tool-call ids repeat inside a
simulation, so calls and results pair by order. Dual-control domains (telecom) also carry the
user simulator's own tool calls and results (``requestor: user``): they are not the agent's and
never pair with its calls. Rewards measure task success, not harm: no verdict. Structural
standard.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from ..errors import InputError
from ..model import EvidenceStandard, Message, Run, RunHeader, Termination, Trajectory, harness_category
from ..transcript import tool_definitions_of, tools_extra
from ._chat import CallBuilder, text_of
from ._common import (
    Item,
    RecordError,
    array_first_keys,
    build_run,
    file_budget,
    json_key_paths,
    load_json_document,
    released,
)
from ._zip import Budget
from .base import DEFAULT_OPTIONS, ParseOptions, no_continuations

NAME = "tau2"
#: Keys this format writes (the closest-format hint of an unrecognised file).
HINTS = (b'"simulations"', b'"termination_reason"', b'"reward_info"', b'"user_info"', b'"agent_info"', b'"tasks"')
#: What the format needs to recognise a file (said when it refuses one).
NEEDS = ("an object with top-level simulations (tau2's Results or a leaderboard wrapper), or a list of "
         "simulation objects (task_id and messages, with termination_reason, reward_info or trial)")
continuations = no_continuations
TERMINATION = {
    "user_stop": Termination.COMPLETED, "agent_stop": Termination.COMPLETED,
    "max_steps": Termination.STEP_LIMIT, "timeout": Termination.TIME_LIMIT,
    "context_window_exceeded": Termination.TOKEN_LIMIT, "too_many_errors": Termination.ERROR,
    "agent_error": Termination.ERROR, "user_error": Termination.ERROR,
    "infrastructure_error": Termination.ERROR, "unexpected_error": Termination.ERROR,
}
NOT_RECORDED = Termination.NOT_RECORDED.value

RESULTS, WRAPPER, BARE_LIST = "results", "leaderboard_wrapper", "bare_list"
SHAPES = {
    RESULTS: "tau2 Results document {timestamp, info, tasks, simulations}",
    WRAPPER: "tau2 leaderboard submission {domain, agent, passed, pass_rate, simulations}",
    BARE_LIST: "tau2 bare list of simulations",
}
#: Keys of which a bare list's first element must hold ``task_id`` and ``messages`` and one more.
_SIMULATION_KEYS = ("termination_reason", "reward_info", "trial")


def sniff(head: bytes) -> bool:
    """A JSON object with ``simulations`` at the top, or (when the head ends before it: tau2
    writes ``info`` and ``tasks`` first) an ``info`` holding tau2's ``user_info`` or
    ``agent_info``; or a JSON list whose first element is a simulation."""
    h = head.lstrip()
    if h.startswith(b"["):
        first = array_first_keys(head)
        return first is not None and {"task_id", "messages"} <= first and any(k in first for k in _SIMULATION_KEYS)
    if not h.startswith(b"{"):
        return False
    if b'"simulations"' not in head and b'"user_info"' not in head:
        return False  # cheap refusal before the structural scan
    keys = json_key_paths(head)
    return ("simulations",) in keys or (
        ("info", "user_info") in keys or ("info", "agent_info") in keys)


def _simulation(sim: Any, where: str, domain: str | None = None, tools: tuple[tuple[str, str], ...] = ()) -> Trajectory:
    if not isinstance(sim, dict):
        raise RecordError(f"{where} is {type(sim).__name__}, expected a simulation object")
    raw_messages = sim.get("messages")
    if not isinstance(raw_messages, list):
        raise RecordError(f"{where}: messages is {type(raw_messages).__name__}, expected a list",
                          str(sim.get("id", where)))
    calls, final = CallBuilder(), ""
    messages: list[Message] = []
    for i, m in enumerate(raw_messages):
        if not isinstance(m, dict):
            raise RecordError(f"{where}: messages[{i}] is {type(m).__name__}, expected a message object")
        role = str(m.get("role", ""))
        content = text_of(m.get("content"))
        if role == "assistant":
            for tc in m.get("tool_calls") or []:
                if not isinstance(tc, dict):
                    raise RecordError(f"{where}: messages[{i}].tool_calls holds a {type(tc).__name__}")
                calls.add(tool=str(tc.get("name", "")), args=tc.get("arguments", {}), call_id=None,
                          message_index=len(messages))
            if content:
                final = content
        elif role == "tool" and m.get("requestor") != "user":
            # the user simulator's own calls (requestor: user) are answered here too: not the agent's
            failed = "the tool message has error: true" if m.get("error") else None
            calls.result(call_id=None, content=content, error=failed, message_index=len(messages))
        messages.append(Message(role=role, content=content))
    reason = sim.get("termination_reason")
    recorded = str(reason) if isinstance(reason, str) and reason else NOT_RECORDED
    termination = Termination.NOT_RECORDED if recorded == NOT_RECORDED else TERMINATION.get(recorded,
                                                                                              Termination.ERROR)
    if not messages and termination in (Termination.COMPLETED, Termination.NOT_RECORDED):
        raise RecordError(f"{where}: a simulation with no messages (termination {recorded})",
                          str(sim.get("id", where)))
    reward_info = sim.get("reward_info")
    reward = reward_info.get("reward") if isinstance(reward_info, dict) else None
    extra = (("termination_reason", recorded),) + (
        (("reward", json.dumps(reward)),) if isinstance(reward, (int, float)) and not isinstance(reward, bool) else ())
    return Trajectory(id=str(sim.get("id", where)), task_id=str(sim.get("task_id")), messages=tuple(messages),
                      tool_calls=calls.build(), final_output=final, termination=termination,
                      termination_detail=recorded, verdict=None, extra=extra + tools, category=domain,
                      ending_recorded=termination is not Termination.NOT_RECORDED)


def _object(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


@dataclass(frozen=True)
class Shape:
    """Which published shape a file is, and what it says of the whole run."""

    name: str
    simulations: list
    model: str
    reported: dict
    domain: str = ""
    """The tau2 domain (airline, retail, telecom), where the file says."""
    user_model: str = ""
    """The user simulator's model, where the file says."""
    tools: tuple[tuple[str, str], ...] = ()
    """The ``extra`` pair of the tools the agent was offered (``info.environment_info.tool_defs``,
    where the file records them): one set for the whole run."""


def shape_of(doc: Any, source: str) -> Shape:
    """The shape of a parsed tau2 file; InputError when it is none of the three."""
    if isinstance(doc, list):
        return Shape(BARE_LIST, doc, Path(source).stem, {})
    if not isinstance(doc, dict):
        raise InputError(f"not tau2: the file is a JSON {type(doc).__name__}; tau2 needs {NEEDS}", source=source)
    sims = doc.get("simulations")
    if not isinstance(sims, list):
        raise InputError("not tau2: no simulations list at the top of the object "
                         f"(simulations is {type(sims).__name__})", source=source)
    info = _object(doc.get("info"))
    agent = _object(info.get("agent_info"))
    domain = _object(info.get("environment_info")).get("domain_name") or doc.get("domain") or ""
    user = _object(info.get("user_info")).get("llm") or ""
    offered = tools_extra(tool_definitions_of(_object(info.get("environment_info")).get("tool_defs")))
    if agent.get("llm"):
        return Shape(RESULTS, sims, str(agent["llm"]), {}, str(domain), str(user), offered)
    if any(k in doc for k in ("passed", "pass_rate", "domain", "agent")):
        reported = {k: doc[k] for k in ("domain", "agent", "model", "total_tasks", "passed", "pass_rate") if k in doc}
        model = doc.get("model") or doc.get("agent") or Path(source).stem
        return Shape(WRAPPER, sims, str(model), reported, str(domain), str(user))
    return Shape(RESULTS, sims, "unknown", {}, str(domain), str(user), offered)


def parse(data: bytes, source: str, options: ParseOptions = DEFAULT_OPTIONS) -> Run:
    budget = file_budget(data, source, options.decode_budget)
    shape = shape_of(load_json_document(data, source, budget), source)
    facts = (("shape", json.dumps(shape.name)), *((f"reported_{k}", json.dumps(v)) for k, v in shape.reported.items()))
    header = RunHeader(run_id=Path(source).stem, model=shape.model, task=f"tau2 {shape.domain}" if shape.domain else "",
                       variant=f"user simulator {shape.user_model}" if shape.user_model else "",
                       harness_name=f"tau2-bench ({SHAPES[shape.name]})",
                       evidence_standard=EvidenceStandard.STRUCTURAL, format=NAME, source=source,
                       format_facts=facts)
    return build_run(header=header, items=_simulations(shape.simulations, harness_category(shape.domain), budget,
                                                       shape.tools), source=source, data=data, budget=budget)


def _simulations(sims: list, domain: str | None, budget: Budget,
                 tools: tuple[tuple[str, str], ...] = ()) -> Iterator[Item]:
    """Each simulation's item, made as ``build_run`` asks for it (each let go once made)."""
    for i, s in released(sims, budget):
        where = f"simulations[{i}]"
        rid = str(s.get("id", where)) if isinstance(s, dict) else where
        yield None, rid, partial(_simulation, s, where, domain, tools)


def tau2_metrics(run: Run) -> dict:
    """What a tau2 file says of its run: its shape, its simulations' rewards (tau2's pass count:
    reward 1) and, for a leaderboard wrapper, the figures the wrapper reports beside ours."""
    facts = {k: json.loads(v) for k, v in run.header.format_facts}
    shape = facts.pop("shape", "")
    rewards = [float(dict(t.extra)["reward"]) for t in run.trajectories if "reward" in dict(t.extra)]
    passed = sum(1 for r in rewards if r == 1.0)
    out: dict[str, Any] = {"shape": shape, "shape_description": SHAPES.get(shape, ""),
                           "simulations": len(run.trajectories), "with_reward": len(rewards), "passed": passed,
                           "pass_rate": passed / len(rewards) if rewards else None}
    if facts:
        out["reported"] = {k.removeprefix("reported_"): v for k, v in facts.items()}
    return out


def terminations(run: Run) -> dict[str, int] | None:
    """Counts of each trajectory's recorded ending (``not_recorded`` included), for formats that
    record one (``termination_reason`` in the trajectory's extra facts); None otherwise."""
    counts = Counter(dict(t.extra).get("termination_reason") for t in run.trajectories)
    counts.pop(None, None)
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))) if counts else None  # type: ignore[arg-type]
