"""Blind means blind (issue 24): in blind review no other reviewer's label, note or count for a
trace shows before the reviewer labels it: not in the Review page's history expander, its
"reviewers disagree" queue, the Score tables page's labels, nor a labels export."""

from __future__ import annotations

from pages._shared import state
from scoring.model import ReviewLabel
from scoring.workspace import Workspace

from .test_app import set_reviewer
from .test_team_tables import make_table


def history_cells(at) -> str:
    frames = [d.value for d in at.dataframe if "reviewer" in getattr(d.value, "columns", [])]
    return " ".join(" ".join(map(str, f.astype(str).values.ravel())) for f in frames)


def test_the_history_expander_hides_others_labels_until_you_label_the_trace(app, tmp_path):
    ws = Workspace(tmp_path / "app.db")
    key = app.session_state[state.SELECTED_RUNS][0]
    inconclusive = [r["trajectory_id"] for r in ws.trajectory_rows(key, "status = 'inconclusive'")]
    first, second = inconclusive[:2]
    ws.add_label(key, first, "bob", ReviewLabel.DEGENERATE, note="bob-was-here")
    ws.add_label(key, second, "bob", ReviewLabel.EARLY_STOP)
    ws.add_label(key, second, "carol", ReviewLabel.GENUINE_DECLINE)  # disputed
    app.switch_page("pages/review.py").run()
    set_reviewer(app, "alice")
    assert app.session_state[state.BLIND] is True
    shown = history_cells(app)
    assert "bob" not in shown and "carol" not in shown and "bob-was-here" not in shown
    app.radio(key=state.QUEUE_FILTER).set_value(app.radio(key=state.QUEUE_FILTER).options[3]).run()  # disagree
    assert not app.exception, app.exception
    assert any("this queue is empty" in t.value for t in app.text)  # alice labelled none of them
    # Alice labels the first trace: bob's label on it shows, the second trace's still do not.
    ws.add_label(key, first, "alice", ReviewLabel.GENUINE_DECLINE)
    app.run()
    shown = history_cells(app)
    assert "bob" in shown and "carol" not in shown
    # Blind off: everything.
    app.toggle(key=state.BLIND).set_value(False).run()
    assert "carol" in history_cells(app)


def test_the_score_tables_page_shows_others_labels_only_after_yours(app, tmp_path, monkeypatch):
    out, _run = make_table(tmp_path / "t")
    ws = Workspace(tmp_path / "app.db")
    from scoring.dask_engine import table_reader, table_workspace

    (t,) = table_reader.open_table(str(out))
    tid = table_reader.inconclusive_ids(t)[0]
    table_workspace.add_label(ws, t, tid, "bob", ReviewLabel.DEGENERATE)
    app.session_state[state.REVIEWER] = "alice"
    app.switch_page("pages/score_tables.py").run()
    app.text_input(key="score_table_location").input(str(out)).run()
    app.text_input(key="score_table_replay").input(tid).run()
    assert not app.exception, app.exception
    labels = next(x.value for x in app.text if x.value.startswith("Labels: "))
    assert "bob" not in labels and "hidden" in labels
    downloads = {d.proto.label: d.proto.disabled for d in app.get("download_button")}
    assert downloads["Labels (CSV)"] is True  # every reviewer's labels: not exported in blind review
    app.button(key=f"score_table_label_{ReviewLabel.EARLY_STOP.value}").click().run()
    labels = next(x.value for x in app.text if x.value.startswith("Labels: "))
    assert "bob: degenerate" in labels and "alice: early_stop" in labels
