"""Small logs whose runs' names issue 35's tests read: an Inspect log and a canonical run with the
fields their names are made of, and a long-named run."""

from __future__ import annotations

import json
from pathlib import Path

LONG_MODEL = "openai/meta-llama/Meta-Llama-3.1-70B-Instruct-Turbo"
LONG_TASK = "inspect_evals/agentharm_benign_vs_harmful_split"
LONG_NAME = f"{LONG_MODEL} · {LONG_TASK} · important_instructions"
"""The long run's name (and with " · require-proof", its --require-proof copy's)."""


def inspect_log(path: Path, **eval_fields) -> Path:
    """A small legacy-JSON Inspect log: one sample, the ``eval`` fields given."""
    path.write_text(json.dumps({"version": 2, "status": "success",
                                "eval": {"run_id": "Zq8xR2vTn4QpL9", "created": "2025-03-30T15:24:56+02:00",
                                         **eval_fields},
                                "samples": [{"id": 1, "epoch": 1, "messages": [{"role": "user", "content": "hi"}]}]}))
    return path


def canonical_log(path: Path, model: str, run_id: str, **header) -> Path:
    args = '{"q": "x"}'
    lines = [{"record": "run", "format": "litmus-review-run", "format_version": 1, "run_id": run_id, "model": model,
              "evidence_standard": "structural", **header},
             {"record": "trajectory", "id": "t0", "task_id": "k0", "verdict": {"label": "benign"},
              "messages": [{"role": "user", "content": "go"}], "tool_calls": [{"tool": "search", "arguments": args}]}]
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    return path


def long_named(folder: Path) -> Path:
    """A canonical run with a long name: model, task and variant from its header."""
    return canonical_log(folder / "long.jsonl", LONG_MODEL, "r-1", task=LONG_TASK, variant="important_instructions")
