"""The capture-proof hook: writes ``<log>.proof.jsonl`` beside an Inspect log while it runs.

Registered through the ``inspect_ai`` entry point of litmus-review (so installing
``litmus-review[inspect]`` makes Inspect load it), it stays idle unless turned on for an eval:

- the environment variable ``LITMUS_REVIEW_PROOF=1`` (every eval of the process), or
- the task's metadata ``litmus_review_proof: true`` (that task only).

When on, it says so as the eval starts (a warning in Inspect's output, naming the eval and how it
was turned on), and as the eval ends where it wrote the proof. It never changes the log.

What it records, per sample (``docs/proof-side-log.md``): for every tool call the agent's model
emitted, the byte length and SHA-256 of its arguments' canonical JSON as emitted (the model
event's output) and as executed (the tool event); for every model call a scorer made (a judge),
the SHA-256 of its input text and, per tool call, whether the call's full argument text appears
in it verbatim.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from inspect_ai.hooks import (
    Hooks,
    SampleAttemptStart,
    SampleEnd,
    SampleEvent,
    SampleStart,
    TaskEnd,
    TaskStart,
    hooks,
)

from scoring.judge_audit import input_digest
from scoring.proof import ProofWriter, fingerprint, full_surface_seen, proof_path_of

from ._events import SampleCalls, judge_input_messages

HOOK_NAME = "litmus_review_proof"
HOOK_VERSION = "2"
WRITER = f"litmus_inspect.hook {HOOK_VERSION}"
ENV_VAR = "LITMUS_REVIEW_PROOF"
METADATA_FLAG = "litmus_review_proof"
_ON = {"1", "true", "yes", "on"}
_OFF = {"", "0", "false", "no", "off"}

logger = logging.getLogger(__name__)


def enabled_by(metadata: dict[str, Any] | None) -> str | None:
    """How the proof is turned on for a task with this metadata, or None when it is off."""
    env = os.environ.get(ENV_VAR, "").strip().lower()
    if env in _ON:
        return f"environment {ENV_VAR}={os.environ[ENV_VAR]}"
    if env not in _OFF:
        logger.warning("litmus-review proof hook: %s=%r is neither on (1, true, yes, on) nor off; it stays off "
                       "unless the task's metadata turns it on", ENV_VAR, os.environ[ENV_VAR])
    if (metadata or {}).get(METADATA_FLAG) is True:
        return f"task metadata {METADATA_FLAG}: true"
    return None


@dataclass
class _Eval:
    eval_id: str
    run_id: str
    task: str
    enabled_by: str
    records: list[dict] = field(default_factory=list)


@dataclass
class _Sample:
    eval: _Eval
    calls: SampleCalls = field(default_factory=SampleCalls)
    judges: dict[str, dict] = field(default_factory=dict)
    """Judge records by model event (an event is sent again when it is updated: one record each)."""


class ProofHook(Hooks):
    """Records the proof of each eval it is turned on for; writes it when the eval's log is."""

    def __init__(self) -> None:
        self._evals: dict[str, _Eval] = {}
        self._samples: dict[str, _Sample] = {}

    async def on_task_start(self, data: TaskStart) -> None:
        how = enabled_by(data.spec.metadata)
        if how is None:
            return
        self._evals[data.eval_id] = _Eval(data.eval_id, data.run_id, data.spec.task, how)
        logger.warning("litmus-review proof hook ON for eval %s (task %s, by %s): its proof is written beside the "
                       "log as <log>%s", data.eval_id, data.spec.task, how, ".proof.jsonl")

    async def on_sample_start(self, data: SampleStart) -> None:
        ev = self._evals.get(data.eval_id)
        if ev is not None:
            self._samples[data.sample_id] = _Sample(ev)

    async def on_sample_attempt_start(self, data: SampleAttemptStart) -> None:
        # A retried sample starts again: the calls of a failed attempt are not in its log.
        ev = self._evals.get(data.eval_id)
        if ev is not None and data.attempt > 1:
            self._samples[data.sample_id] = _Sample(ev)

    async def on_sample_event(self, data: SampleEvent) -> None:
        sample = self._samples.get(data.sample_id)
        if sample is None:
            return
        judged = sample.calls.add(data.event)
        if judged is None:
            return
        scorer, event = judged
        messages = judge_input_messages(event.input)
        sample.judges[event.uuid or str(id(event))] = {
            "record": "judge", "scorer": scorer, "model": event.model, "input_sha256": input_digest(messages),
            "calls": [{"call_id": cid, "full_surface_seen": full_surface_seen(messages, call.arguments, call.function)}
                      for cid, call in sample.calls.emitted.items()]}

    async def on_sample_end(self, data: SampleEnd) -> None:
        sample = self._samples.pop(data.sample_id, None)
        if sample is None:
            return
        sid, epoch = data.sample.id, data.sample.epoch
        for cid, call in sample.calls.emitted.items():
            sample.eval.records.append({
                "record": "call", "sample_id": sid, "epoch": epoch, "call_id": cid, "function": call.function,
                "emitted": fingerprint(call.arguments), "executed": sample.calls.executed.get(cid)})
        for judge in sample.judges.values():
            sample.eval.records.append({**judge, "sample_id": sid, "epoch": epoch})

    async def on_task_end(self, data: TaskEnd) -> None:
        ev = self._evals.pop(data.eval_id, None)
        if ev is None:
            return
        location = data.log.location
        if not location or ("://" in location and not location.startswith("file://")):
            logger.warning("litmus-review proof hook: eval %s has no local log file (%r); its proof was NOT written",
                           ev.eval_id, location)
            return
        path = proof_path_of(location.removeprefix("file://"))
        write_proof(path, ev)
        logger.warning("litmus-review proof hook: proof of eval %s written to %s (%d records)",
                       ev.eval_id, path, len(ev.records))


def write_proof(path: Path, ev: _Eval) -> None:
    with ProofWriter(path, eval_id=ev.eval_id, writer=WRITER, enabled_by=ev.enabled_by, run_id=ev.run_id,
                     task=ev.task) as out:
        for record in ev.records:
            out.record_raw(record)


@hooks(name=HOOK_NAME, description=f"litmus-review capture proof: writes <log>.proof.jsonl when {ENV_VAR}=1 "
                                    f"or the task's metadata has {METADATA_FLAG}: true")
def _registered() -> type[ProofHook]:
    return ProofHook
