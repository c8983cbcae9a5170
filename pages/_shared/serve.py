"""``python -m pages._shared.serve run app.py …``: Streamlit, with the app made ready while the
server starts (``make run`` and ``litmus-review serve`` start it so).

Streamlit runs nothing of the app before a browser connects, so the first session paid for
importing the scorer, pandas, plotly and SciPy and for importing the bundled samples into an empty
workspace before its first chart. Here a background thread does both as the server starts:
a session that connects meanwhile waits for what is under way (Python's import lock, the samples'
lock), never for it twice. Nothing is shown from here: a damaged workspace is reported by the
session's own check, as before."""

from __future__ import annotations

import sys
import threading


def warm_up() -> None:
    """Import what a page needs and the bundled samples (an empty workspace only)."""
    try:
        # in the thread on purpose: this is the import being moved off the first session's path
        from pages._shared import charts, loaders  # optional: imported here, while the server starts
        from scoring.workspace import views  # optional: imported here, while the server starts

        views.check_workspace(loaders.db())
        with loaders.SAMPLES_LOCK:
            loaders.import_samples()
        charts.warm_up()
        from scipy.special import stdtrit  # noqa: F401  lazily: imported here (the paired interval's quantile)
    except Exception:  # the session says what is wrong, in the app's words
        return


if __name__ == "__main__":
    from streamlit.web.cli import main  # lazily: the launcher's alone (the module is imported by warm-up code too)

    threading.Thread(target=warm_up, name="litmus-warm-up", daemon=True).start()
    sys.exit(main())
