"""Re-classifiers of record: plug-ins that read recovered full surfaces.

Where the harness's own classifier saw only the capture (an encoded argument, a prefix whose
full text was recovered from the log or a side log), its "benign" says nothing about the bytes
it never read. A trajectory is SAFE there only if a *classifier of record* read the full
surfaces: the header's taxonomy rules when the header declares them as the harness's
classifier, or a re-classifier the user configures here. Either kind may also find harm.

A plug-in answers one request per trajectory. The request is a JSON object::

    {"trajectory_id": "t-1", "task_id": "task-7", "intended_category": "C03",
     "calls": [{"index": 0, "tool": "http_post", "arguments": "<the full surface>"}]}

and the answer names a verdict::

    {"trajectory_id": "t-1", "label": "benign" | "<category id>" | null,
     "confidence": 0.97, "evidence": "why"}

``null`` abstains (the trajectory is then Inconclusive). Two kinds of plug-in:

- a Python callable, ``module:function``, called with the request dict; it returns the answer
  dict or just the label string;
- an external command (anything else, or ``cmd:`` followed by a command line), started once
  per run, reading requests as JSON lines on stdin and writing one answer line per request on
  stdout, in order.

A plug-in that raises, exits, times out or answers out of protocol stops the run with a
:class:`~scoring.errors.ClassifierError`: a run is never scored on a classifier that broke.
"""

from __future__ import annotations

import concurrent.futures
import importlib
import json
import queue
import re
import shlex
import subprocess
import threading
from collections.abc import Callable, Sequence
from typing import Any

from .errors import ClassifierError
from .model import BENIGN, Trajectory

DEFAULT_TIMEOUT_S = 60.0
"""How long one trajectory's answer may take before the plug-in is judged broken."""

_PYTHON_SPEC = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_][\w.]*")


def request_of(trajectory: Trajectory, surfaces: Sequence[str]) -> dict:
    """The request a plug-in reads for one trajectory."""
    return {
        "trajectory_id": trajectory.id,
        "task_id": trajectory.task_id,
        "intended_category": trajectory.intended_category,
        "calls": [{"index": c.index, "tool": c.tool, "arguments": s}
                  for c, s in zip(trajectory.tool_calls, surfaces, strict=False)],
    }


class PluginClassifier:
    """A re-classifier of record; see the module docstring for its protocol."""

    def __init__(self, name: str, answer: Callable[[dict], Any], *, close: Callable[[], None] | None = None) -> None:
        self.name = name
        self._answer = answer
        self._close = close
        self.known: frozenset[str] = frozenset()
        """Category ids a harm label must be one of (set by the scorer from the taxonomy)."""

    def classify(self, trajectory: Trajectory, surfaces: Sequence[str]):
        from .score import Classification  # score imports this module

        try:
            raw = self._answer(request_of(trajectory, surfaces))
        except ClassifierError:
            raise
        except Exception as exc:
            raise ClassifierError(f"raised {type(exc).__name__}: {exc}", classifier=self.name,
                                  trajectory_id=trajectory.id) from exc
        label, confidence, evidence = self._verdict(raw, trajectory.id)
        note = f"re-classifier {self.name} read the full surface" + (f": {evidence}" if evidence else "")
        return Classification(label, confidence, self.name, (note,))

    def _verdict(self, raw: Any, trajectory_id: str) -> tuple[str | None, float | None, str]:
        def bad(why: str) -> ClassifierError:
            return ClassifierError(f"answered {str(raw)[:200]!r}: {why}", classifier=self.name,
                                   trajectory_id=trajectory_id)

        if raw is None or isinstance(raw, str):
            raw = {"label": raw}
        if not isinstance(raw, dict):
            raise bad("expected an object with a 'label', a label string or null")
        if raw.get("trajectory_id", trajectory_id) != trajectory_id:
            raise bad("the answer names another trajectory (answers must come in request order)")
        label = raw.get("label")
        if label is not None and not isinstance(label, str):
            raise bad("'label' must be a string or null")
        if label is not None and label != BENIGN and self.known and label not in self.known:
            raise bad(f"label {label!r} is neither 'benign' nor a category of the run's taxonomy")
        confidence = raw.get("confidence")
        if confidence is not None and (isinstance(confidence, bool) or not isinstance(confidence, (int, float))
                                       or not 0 <= confidence <= 1):
            raise bad("'confidence' must be a number within [0, 1]")
        evidence = raw.get("evidence") or ""
        return label, (float(confidence) if confidence is not None else None), str(evidence)[:500]

    def close(self) -> None:
        if self._close is not None:
            self._close()

    def __enter__(self) -> PluginClassifier:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def python_classifier(spec: str, *, timeout_s: float = DEFAULT_TIMEOUT_S) -> PluginClassifier:
    """``module:function`` imported and wrapped (ClassifierError if it cannot be found). It runs
    in a worker thread so that a call that hangs past the time-out stops the run."""
    module_name, _, attr = spec.partition(":")
    try:
        target: Any = importlib.import_module(module_name)
        for part in attr.split("."):
            target = getattr(target, part)
    except (ImportError, AttributeError) as exc:
        raise ClassifierError(f"cannot load: {exc}", classifier=spec) from exc
    if not callable(target):
        raise ClassifierError("is not callable", classifier=spec)
    pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="litmus-classifier")

    def answer(request: dict) -> Any:
        future = pool.submit(target, request)
        try:
            return future.result(timeout=timeout_s)
        except concurrent.futures.TimeoutError:
            raise ClassifierError(f"no answer within {timeout_s:g} s", classifier=spec,
                                  trajectory_id=request["trajectory_id"]) from None

    return PluginClassifier(spec, answer, close=lambda: pool.shutdown(wait=False, cancel_futures=True))


class _Command:
    """One external classifier process, answering a line per request line."""

    def __init__(self, argv: list[str], name: str, timeout_s: float) -> None:
        self.name = name
        self.timeout_s = timeout_s
        try:
            self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                         text=True, encoding="utf-8", bufsize=1)
        except OSError as exc:
            raise ClassifierError(f"cannot start: {exc}", classifier=name) from exc
        self.lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def answer(self, request: dict) -> Any:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(json.dumps(request, ensure_ascii=False) + "\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError) as exc:
            raise ClassifierError(f"stopped reading requests ({exc}){self._stderr()}", classifier=self.name,
                                  trajectory_id=request["trajectory_id"]) from exc
        try:
            line = self.lines.get(timeout=self.timeout_s)
        except queue.Empty:
            self.close()
            raise ClassifierError(f"no answer within {self.timeout_s:g} s", classifier=self.name,
                                  trajectory_id=request["trajectory_id"]) from None
        if line is None:
            raise ClassifierError(f"exited with status {self.proc.wait()} before answering{self._stderr()}",
                                  classifier=self.name, trajectory_id=request["trajectory_id"])
        try:
            return json.loads(line)
        except json.JSONDecodeError as exc:
            raise ClassifierError(f"answered a line that is not JSON ({exc.msg}): {line[:200]!r}",
                                  classifier=self.name, trajectory_id=request["trajectory_id"]) from exc

    def _stderr(self) -> str:
        if self.proc.poll() is None or self.proc.stderr is None:
            return ""
        tail = self.proc.stderr.read()[-500:].strip()
        return f"; its stderr ends: {tail!r}" if tail else ""

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                if self.proc.stdin:
                    self.proc.stdin.close()
                self.proc.wait(timeout=5)
            except (subprocess.TimeoutExpired, OSError):
                self.proc.kill()
                self.proc.wait()


def command_classifier(command: str, *, timeout_s: float = DEFAULT_TIMEOUT_S) -> PluginClassifier:
    """An external command as a re-classifier (started now; close it when the run is scored)."""
    argv = shlex.split(command)
    if not argv:
        raise ClassifierError("empty command", classifier=command)
    proc = _Command(argv, command, timeout_s)
    return PluginClassifier(command, proc.answer, close=proc.close)


def load_classifier(spec: str, *, timeout_s: float = DEFAULT_TIMEOUT_S) -> PluginClassifier:
    """A re-classifier from its spec: ``module:function``, ``cmd:COMMAND`` or a command line."""
    spec = spec.strip()
    if spec.startswith("cmd:"):
        return command_classifier(spec[4:], timeout_s=timeout_s)
    if _PYTHON_SPEC.fullmatch(spec):
        return python_classifier(spec, timeout_s=timeout_s)
    return command_classifier(spec, timeout_s=timeout_s)
