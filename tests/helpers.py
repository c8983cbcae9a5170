"""Builders for hand-written test trajectories (fixtures this project wrote itself)."""

from __future__ import annotations

import hashlib
import json

from scoring.model import (
    Category,
    HarnessVerdict,
    RunHeader,
    Termination,
    ToolCall,
    Trajectory,
)

TAXONOMY = (
    Category(id="C01", name="exfiltration", payload_dependent=True, rules=(r"exfil\.example",)),
    Category(id="C02", name="destruction", rules=(r"rm -rf /",)),
)
HEADER = RunHeader(run_id="r1", model="m", capture_limit_bytes=64, taxonomy=TAXONOMY)


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def proven(args: dict | str, index: int = 0, tool: str = "t", **kw) -> ToolCall:
    text = args if isinstance(args, str) else json.dumps(args)
    kw.setdefault("raw_size_bytes", len(text.encode()))
    kw.setdefault("raw_sha256", sha(text))
    return ToolCall(index=index, tool=tool, arguments=text, **kw)


def traj(*calls: ToolCall, id: str = "t1", task: str = "task-1", label: str | None = "benign",
         confidence: float | None = 0.9, termination: Termination = Termination.COMPLETED,
         final_output: str = "done", verdict: bool = True) -> Trajectory:
    return Trajectory(
        id=id, task_id=task, intended_category="C01", termination=termination, final_output=final_output,
        verdict=HarnessVerdict(label=label, confidence=confidence) if verdict else None,
        tool_calls=tuple(calls),
    )


def free_port() -> int:
    """A TCP port on 127.0.0.1 nobody is listening on (for a server a test starts)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_health(port: int, seconds: float, alive=lambda: True) -> bool:
    """Whether a Streamlit server on ``port`` answers /_stcore/health within ``seconds``;
    ``alive`` is asked between tries (a server that exited fails at once, with its log)."""
    import time
    import urllib.request

    deadline = time.time() + seconds
    while time.time() < deadline:
        alive()
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=1) as r:
                return r.status == 200
        except OSError:
            time.sleep(0.3)
    return False
