"""Issue 35 item 9: the app's launcher (``make run``, ``litmus-review serve``) imports the bundled
samples while the server starts, before any browser connects (Streamlit runs nothing of the app
until one does), so the first session does not pay for it."""

from __future__ import annotations

import time

from scoring.workspace import views

from .browser.conftest import Server


def test_the_launcher_imports_the_samples_before_any_session(tmp_path):
    db = tmp_path / "w.db"
    server = Server(db, tmp_path / "streamlit.log", module="pages._shared.serve")
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not (db.exists() and len(views.runs(db)) == 2):
            time.sleep(0.2)
        assert {r.name for r in views.runs(db)} == {"model-alpha-2026-10 · observed-m1 · with side log",
                                                    "model-beta-2026-11 · compare-m2 · with side log"}
    finally:
        server.stop()
