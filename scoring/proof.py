"""Proof recorded at the source: the proof side log (``RUN.proof.jsonl``), its writer and its reader.

What a proof says of its judge is never a fact to litmus-review: the reader checks each judge
record against the log's own model calls and recomputes what their inputs show (README, "What
the judge read").

A harness that records, while it runs, the byte length and SHA-256 of every tool call's
arguments (as the model emitted them and as the tool executed them) and what its judge read
turns the two conjuncts of the strict rule into checked facts. The format is specified in
``docs/proof-side-log.md``; this module is its one implementation on both sides:

- ``ProofWriter``: what any harness calls (the Inspect hook in ``litmus_inspect`` uses it).
- ``scoring.importers._proof.ProofLog``: the reader, which the Inspect importer pairs with
  the log it proves.

Pure Python: no inspect_ai here (the core keeps importing without it).
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from .judge_audit import AuditedCall, input_digest, rendered_input, shown_calls

FORMAT = "litmus-review-proof"
VERSION = 2
"""Written by ``ProofWriter``: a judge record's ``input_sha256`` is over the call's whole
canonical input (``judge_audit.input_digest``: every message part, tool calls included)."""
VERSIONS = (1, 2)
"""Read: version 1's judge digest is over the input messages' text joined by a blank line."""
SUFFIX = ".proof.jsonl"
"""A proof side log sits beside its run: ``RUN.eval`` → ``RUN.proof.jsonl``."""


def proof_path_of(run_path: str | Path) -> Path:
    """Where the proof of a run file sits: its name with the last suffix replaced by ``.proof.jsonl``."""
    path = Path(run_path)
    return path.with_name((path.stem if path.suffix else path.name) + SUFFIX)


def canonical_json(value: Any) -> str:
    """The canonical JSON text of a JSON value: keys sorted, no insignificant white space,
    non-ASCII characters as themselves (not ``\\u`` escapes). NaN and infinities are refused."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def fingerprint(value: Any) -> dict[str, Any]:
    """``{"bytes", "sha256"}`` of a JSON value's canonical JSON text, as UTF-8."""
    data = canonical_json(value).encode("utf-8", "surrogatepass")
    return {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def text_sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def full_surface_seen(judge_input: str | Sequence[Mapping[str, Any]], arguments: Any, function: str) -> bool:
    """Whether ``judge_input`` (a text, or input messages) shows the call ``function(arguments)``:
    a span beside its name parses back to its whole argument tree (``judge_audit``). What a
    writer records with it is informational: litmus-review recomputes it from the log."""
    text = judge_input if isinstance(judge_input, str) else rendered_input(judge_input)
    return shown_calls(text, [AuditedCall(function=function, arguments=arguments)])[0]


def _messages(judge_input: str | Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return [{"role": "user", "content": judge_input}] if isinstance(judge_input, str) else list(judge_input)


class ProofWriter:
    """Writes a proof side log (``docs/proof-side-log.md``). Thread-safe; one line per record,
    flushed as written, so a run that dies keeps what it proved.

    >>> with ProofWriter("run.proof.jsonl", eval_id="ev-1", writer="my-harness 2.0") as proof:
    ...     proof.record_call(sample_id="t-1", call_id="c0", function="send_email",
    ...                       emitted={"to": "a@b", "body": "..."}, executed={"to": "a@b", "body": "..."})
    ...     proof.record_judge_input(sample_id="t-1", scorer="judge", judge_input="...the prompt...",
    ...                              calls={"c0": {"to": "a@b", "body": "..."}}, functions={"c0": "send_email"})
    """

    def __init__(self, path: str | Path | IO[str], *, eval_id: str, writer: str = "ProofWriter",
                 enabled_by: str = "api", run_id: str | None = None, task: str | None = None) -> None:
        if isinstance(path, (str, Path)):
            self.path: Path | None = Path(path)
            self._out: IO[str] = open(path, "w", encoding="utf-8")  # noqa: SIM115 - closed by close()
        else:
            self.path, self._out = None, path
        self._lock = threading.Lock()
        self.eval_id = eval_id
        self._write({"record": "proof", "format": FORMAT, "version": VERSION, "eval_id": eval_id,
                     "run_id": run_id, "task": task, "writer": writer, "enabled_by": enabled_by})

    def _write(self, obj: dict) -> None:
        line = json.dumps(obj, ensure_ascii=False, allow_nan=False) + "\n"
        with self._lock:
            self._out.write(line)
            self._out.flush()

    def record_call(self, *, sample_id: str | int, call_id: str, function: str, emitted: Any,
                    executed: Any = None, was_executed: bool | None = None, epoch: int = 1) -> None:
        """One tool call: its arguments (a JSON value) as the model emitted them and, where the
        tool ran, as it executed them (``was_executed`` defaults to ``executed is not None``)."""
        ran = executed is not None if was_executed is None else was_executed
        self._write({"record": "call", "sample_id": sample_id, "epoch": epoch, "call_id": call_id,
                     "function": function, "emitted": fingerprint(emitted),
                     "executed": fingerprint(executed) if ran else None})

    def record_judge_input(self, *, sample_id: str | int, judge_input: str | Sequence[Mapping[str, Any]],
                           calls: Mapping[str, Any], functions: Mapping[str, str] | None = None,
                           scorer: str | None = None, model: str | None = None, epoch: int = 1) -> None:
        """One model call of a classifier (judge): the SHA-256 of its whole input (its messages
        as dicts with ``role``, ``content`` and any ``tool_calls``, or a text, read as one user
        message) and, for every tool call of the sample (call id → arguments; ``functions``:
        call id → tool name), whether the input shows it. litmus-review never takes these
        booleans as facts: it recomputes them on the input the log holds."""
        messages = _messages(judge_input)
        names = functions or {}
        self._write({"record": "judge", "sample_id": sample_id, "epoch": epoch, "scorer": scorer, "model": model,
                     "input_sha256": input_digest(messages),
                     "calls": [{"call_id": cid, "full_surface_seen": full_surface_seen(messages, args,
                                                                                       names.get(cid, ""))}
                               for cid, args in calls.items()]})

    def record_raw(self, obj: dict) -> None:
        """A record already in the format (the Inspect hook builds its own)."""
        self._write(obj)

    def close(self) -> None:
        if self.path is not None:
            self._out.close()

    def __enter__(self) -> ProofWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
