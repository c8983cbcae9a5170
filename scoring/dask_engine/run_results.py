"""What a run of the Dask engine ended as, and how far a fleet is: the status constants, each
run's ``RunResult`` and the fleet's ``Progress``, shared by the planner, the tasks, the table's
writer and the fleet (a module of their own, so that none of them imports another for these)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from ..errors import EngineError

_Task = TypeVar("_Task", bound=Callable[..., Any])


def detached(error: EngineError) -> EngineError:
    """``error`` without the chain of the error it was raised from, nor its traceback: what a
    task returns or raises to the client travels pickled, and Dask pickles an error's chain
    (tblib), which may hold a storage backend's objects that do not pickle (``travels``)."""
    error.__context__ = error.__cause__ = error.__traceback__ = None
    return error


def travels(task: _Task) -> _Task:
    """A task run on a Dask worker: the engine's error it raises leaves without the chain of the
    error it was raised from. Dask pickles a task's error with its chain (tblib), and a chain may
    hold a storage backend's objects that do not pickle (aiohttp's headers of a malformed answer):
    the client then printed the workers' serialisation tracebacks and exited 1. The engine's
    errors say all that is to be said in their message; a bug's error keeps its chain."""

    @functools.wraps(task)
    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            return task(*args, **kwargs)
        except EngineError as exc:
            failed = exc
        raise detached(failed)  # outside the handler: no chain is set again

    return run  # type: ignore[return-value]


@dataclass(frozen=True, slots=True)
class RunResult:
    """The final stage's answer for one run (small: the client gathers it)."""

    evaluation: Any
    """The run's ``report.Evaluation`` without its score columns (they stay on the worker):
    what ``score`` prints, as every door prints it; None for a run that failed."""
    run_key: str | None
    shifts: list[int]
    """Per block: what its relative line numbers are shifted by."""
    drops: list[list[int]]
    """Per block: indices of rows not stored (an id also seen in another block)."""
    rows: int
    error: str | None = None
    error_line: int | None = None
    aggregates: dict | None = None
    """With a table (``aggregates=True``): what the app draws, aggregated here (``AGGREGATES_FILE``)."""
    inconclusive: tuple[list, list, list] | None = None
    """With a table: the Inconclusive trajectories' ids, categories and the harness's claims of
    them (``INCONCLUSIVE_DIR``)."""
    source: str = ""
    """The run as the user named it."""
    status: str = "done"
    """``done``, ``failed`` (``error`` says why, naming the file) or ``skipped`` (``note``)."""
    note: str = ""
    recorded: dict | None = None
    """A skipped run's ``score --json`` object, as recorded when it was published."""

    @property
    def summary(self) -> dict | None:
        """Equal key for key to ``score --json``'s object for the run."""
        return self.recorded if self.evaluation is None else self.evaluation.as_dict()


DONE, FAILED, SKIPPED = "done", "failed", "skipped"


@dataclass(frozen=True, slots=True)
class Progress:
    """How far a fleet is: runs and blocks."""

    runs: int
    done: int
    failed: int
    skipped: int
    blocks: int
    blocks_done: int

    def line(self) -> str:
        return (f"runs {self.done + self.failed + self.skipped:,}/{self.runs:,} (done {self.done:,}, failed "
                f"{self.failed:,}, skipped {self.skipped:,}); blocks {self.blocks_done:,}/{self.blocks:,}")
