"""``litmus-review labels import`` in a process of its own that, before its first write, waits
until every process of a race has reached its first write (a folder barrier: each touches a file
in it): two imports of one file then race as two people starting them at once can, every time,
rather than only when their start-up happens to line up.

    python -m tests.labels_import_barrier BARRIER_DIR PARTIES labels import FILE --db DB
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from scoring.cli import main
from scoring.workspace import labels

BARRIER_TIMEOUT_S = 60


def _barrier_then(original):
    """``labels.immediate`` that waits at the barrier the first time it is called (the import's
    first write transaction: every event has been checked by then)."""
    folder, parties = Path(sys.argv[1]), int(sys.argv[2])
    waited = False

    def immediate(db):
        nonlocal waited
        if not waited:
            waited = True
            (folder / str(os.getpid())).touch()
            deadline = time.monotonic() + BARRIER_TIMEOUT_S
            while len(list(folder.iterdir())) < parties and time.monotonic() < deadline:
                time.sleep(0.005)
        return original(db)

    return immediate


if __name__ == "__main__":
    labels.immediate = _barrier_then(labels.immediate)  # type: ignore[assignment]
    main(sys.argv[3:], prog_name="litmus-review")
