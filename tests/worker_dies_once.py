"""A Dask worker preload for the fleet test: the first block holding ``DIES_ONCE`` ends the
worker process that scores it (as a spot instance reclaimed or a node lost would), once in the
whole cluster: the flag file named by ``LITMUS_TEST_DIES_ONCE`` marks that it happened, so the
task started again on another worker scores it."""

from __future__ import annotations

import os

from scoring.dask_engine import tasks

DIES_ONCE = b"LITMUS-TEST-WORKER-DIES-ONCE"


def _dies_once(score_bytes):
    def scores_or_dies(header_line, source, begin, data, *args, **kwargs):
        flag = os.environ.get("LITMUS_TEST_DIES_ONCE")
        if flag and DIES_ONCE in data:
            try:
                fd = os.open(flag, os.O_CREAT | os.O_EXCL | os.O_WRONLY)  # one worker wins, once
            except FileExistsError:
                pass
            else:
                os.write(fd, str(os.getpid()).encode())
                os.close(fd)
                os._exit(70)
        return score_bytes(header_line, source, begin, data, *args, **kwargs)

    scores_or_dies.dies_once = True  # type: ignore[attr-defined]
    return scores_or_dies


if not getattr(tasks.score_bytes, "dies_once", False):  # a preload may run more than once in a process
    tasks.score_bytes = _dies_once(tasks.score_bytes)
