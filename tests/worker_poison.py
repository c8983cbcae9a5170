"""A Dask worker preload for the tests: a block holding ``POISON`` ends the worker process that
scores it (as a crash in native code or the kernel's OOM killer would), every time."""

from __future__ import annotations

import os

from scoring import engine

POISON = b"LITMUS-TEST-ENDS-ITS-WORKER"


def _poisoned(score_bytes):
    def scores_or_dies(header_line, source, begin, data, *args, **kwargs):
        if POISON in data:
            os._exit(70)
        return score_bytes(header_line, source, begin, data, *args, **kwargs)

    scores_or_dies.poisoned = True  # type: ignore[attr-defined]
    return scores_or_dies


if not getattr(engine.score_bytes, "poisoned", False):  # a preload may run more than once in a process
    engine.score_bytes = _poisoned(engine.score_bytes)
