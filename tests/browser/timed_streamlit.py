"""``streamlit`` with each script run's time (server time: the page's script, from start to
finish, on the server) appended to the file named by ``LITMUS_SCRIPT_TIMES`` as one JSON line.
Used by browser tests that measure the server's share of a page's time; the app is unchanged."""

from __future__ import annotations

import json
import os
import sys
import time

from streamlit.runtime.scriptrunner import script_runner
from streamlit.web.cli import main

_run_script = script_runner.ScriptRunner._run_script


def _timed(self, rerun_data):
    start = time.perf_counter()
    try:
        return _run_script(self, rerun_data)
    finally:
        with open(os.environ["LITMUS_SCRIPT_TIMES"], "a") as fh:
            fh.write(json.dumps({"page": getattr(rerun_data, "page_script_hash", ""),
                                 "seconds": time.perf_counter() - start}) + "\n")


script_runner.ScriptRunner._run_script = _timed  # type: ignore[method-assign]

if __name__ == "__main__":
    sys.exit(main())
