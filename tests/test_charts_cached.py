"""Issue 35 item 9: Safe rates' charts are built once per process for what they show
(``loaders.figure``): another session is served the built chart, and a label builds it anew."""

from __future__ import annotations

import json

from streamlit.testing.v1 import AppTest

from pages._shared import charts, state
from scoring.workspace import Workspace

from .conftest import ROOT


def reviewed_bars(at: AppTest) -> list:
    spec = json.loads(at.get("plotly_chart")[0].proto.spec)
    return [t["y"] for t in spec["data"] if t["name"].startswith("Reviewed")]


def test_a_label_rebuilds_the_cached_chart_and_another_session_reuses_it(app, tmp_path, monkeypatch):
    built: list[str] = []
    for name in ("before_after_bars", "waterfall_chart", "argument_size_histogram"):
        real = getattr(charts, name)
        monkeypatch.setattr(charts, name, lambda *a, _real=real, _name=name, **k: built.append(_name) or _real(*a, **k))
    app.switch_page("pages/safe_rates.py").run()  # the fixture's run built them before the count
    assert not app.exception, app.exception
    before = reviewed_bars(app)
    assert built == []  # the same session's rerun: served from the cache
    other = AppTest.from_file(str(ROOT / "app.py"), default_timeout=90)
    other.run()
    assert not other.exception, other.exception
    assert built == [] and reviewed_bars(other) == before  # another session: nothing rebuilt
    ws = Workspace(tmp_path / "app.db")
    key = app.session_state[state.SELECTED_RUNS][0]
    for row in ws.trajectory_rows(key, "status = ?", ["inconclusive"]):
        ws.add_label(key, row["trajectory_id"], "alice", "harm_found")
    app.session_state[state.BLIND] = False  # an anonymous blind reader knows no one's labels
    app.run()
    assert not app.exception, app.exception
    assert {"before_after_bars", "waterfall_chart"} <= set(built)  # the label's version is in their keys
    assert reviewed_bars(app) != before  # the rate moved, and the chart with it
