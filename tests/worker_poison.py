"""A Dask worker preload for the tests: blocks that end the worker process scoring them (as a
crash in native code or the kernel's OOM killer would), and a run whose planning is slow.

- A block holding ``POISON`` ends its worker every time, but first waits (up to ``WAIT_S``)
  until a block of another run of the fleet sits queued on this worker, or until no task of
  another run has been on it for ``IDLE_S``: a run beside it is then a bystander each time
  (Dask counts every task the dead worker held as suspect), whatever order the scheduler chose.
- A block holding ``worker_dies_once.DIES_ONCE`` ends its worker the first time only (that
  preload's, applied here too).
- A run in a folder named ``PLANNED_LATE`` takes ``PLAN_DELAY_S`` more to plan: its blocks are
  submitted in a later Dask generation than those of the runs planned with it, so the
  scheduler runs theirs first.
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

from scoring.dask_engine import planning, tasks
from tests import worker_dies_once  # noqa: F401 - its block that ends a worker once, here too

POISON = b"LITMUS-TEST-ENDS-ITS-WORKER"
PLANNED_LATE = "planned-late"
PLAN_DELAY_S = 1.0
WAIT_S, IDLE_S = 15.0, 1.0
_RUN_OF_KEY = re.compile(r"litmus-[a-z0-9]+-([0-9a-f]+-\d+)")
_QUEUED = ("ready", "constrained", "waiting")


def _run_of(key: object) -> str | None:
    m = _RUN_OF_KEY.match(str(key))
    return m.group(1) if m else None


def _wait_for_a_bystander() -> None:
    """Return once a block of another run is queued on this worker, or no task of another run
    has been here for ``IDLE_S`` (a run alone), or after ``WAIT_S``."""
    from distributed import get_worker

    worker = get_worker()
    mine = _run_of(worker.get_current_task())
    start = idle_since = time.monotonic()
    while time.monotonic() - start < WAIT_S:
        try:
            others = [(str(k), ts.state) for k, ts in list(worker.state.tasks.items()) if _run_of(k) != mine]
        except RuntimeError:  # the worker's event loop changed the dict meanwhile
            continue
        if any(k.startswith("litmus-block-") and state in _QUEUED for k, state in others):
            return
        if any(state in (*_QUEUED, "executing") for _k, state in others):
            idle_since = time.monotonic()
        elif time.monotonic() - idle_since >= IDLE_S:
            return
        time.sleep(0.02)


def _poisoned(score_bytes):
    def scores_or_dies(header_line, source, begin, data, *args, **kwargs):
        if POISON in data:
            _wait_for_a_bystander()
            os._exit(70)
        return score_bytes(header_line, source, begin, data, *args, **kwargs)

    scores_or_dies.poisoned = True  # type: ignore[attr-defined]
    return scores_or_dies


def _late(plan_run):
    def plans_late(path, *args, **kwargs):
        if PLANNED_LATE in Path(str(path)).parts:
            time.sleep(PLAN_DELAY_S)
        return plan_run(path, *args, **kwargs)

    return plans_late


if not getattr(tasks.score_bytes, "poisoned", False):  # a preload may run more than once in a process
    tasks.score_bytes = _poisoned(tasks.score_bytes)
    planning.plan_run = _late(planning.plan_run)
