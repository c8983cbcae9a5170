"""Issue 34, item 5: blind means blind on every surface. With Blind on, no other reviewer's
label, name or count for a trace reaches a reviewer before their own label on it: not the
agreement panel, the progress bar, the history, the queues, the rates (Safe rates, Report, Score
tables) nor any export; all of it derived in one place (``labels.Reader``), and visible after."""

from __future__ import annotations

import io
import json

import pandas as pd
import pytest

from pages._shared import exports, state
from scoring.model import ReviewLabel
from scoring.workspace import Workspace, evaluation
from scoring.workspace.labels import Reader

from .conftest import SAMPLES
from .test_app import set_reviewer

G, D = ReviewLabel.GENUINE_DECLINE, ReviewLabel.DEGENERATE


def others_label(ws: Workspace, key: str) -> tuple[str, str, str]:
    """bob and carol label three Inconclusive traces: they disagree on the first, agree on the
    second, and bob alone labels the third (a note by bob on the second)."""
    t1, t2, t3 = [r["trajectory_id"] for r in ws.trajectory_rows(key, "status = 'inconclusive'")][:3]
    ws.add_label(key, t1, "bob", G)
    ws.add_label(key, t1, "carol", D)
    ws.add_label(key, t2, "bob", G, note="bob-was-here")
    ws.add_label(key, t2, "carol", G)
    ws.add_label(key, t3, "bob", G)
    return t1, t2, t3


def test_a_blind_reader_knows_no_other_reviewer_s_label_name_or_count_before_their_own(tmp_path):
    ws = Workspace(tmp_path / "w.db")
    key = ws.import_run(SAMPLES / "observed-m1.jsonl").run_key
    bare = evaluation(ws, key).summary
    t1, t2, _t3 = others_label(ws, key)
    alice = Reader("alice", blind=True)
    assert ws.current_labels(key, reader=alice) == {} and ws.final_labels(key, reader=alice) == {}
    assert ws.disputed(key, reader=alice) == [] and ws.history(key, reader=alice) == []
    assert ws.export_labels(key, reader=alice) == ""
    assert all(a.items == 0 and a.reviewers == () for a in ws.agreement(key, reader=alice).values())
    assert evaluation(ws, key, reader=alice).summary == bare  # the rates count nobody's labels
    assert evaluation(ws, key).summary != bare  # (they are there: the team's figures count them)

    ws.add_label(key, t2, "alice", D)  # alice labels the second trace: its labels are hers to see
    assert ws.current_labels(key, reader=alice) == {t2: {"bob": G, "carol": G, "alice": D}}
    assert {e["trajectory_id"] for e in ws.history(key, reader=alice)} == {t2}
    assert "bob-was-here" in ws.export_labels(key, reader=alice)
    assert ws.agreement(key, reader=alice)["all"].reviewers == ("alice", "bob", "carol")
    assert ws.disputed(key, reader=alice) == [t2]
    assert ws.current_labels(key, reader=Reader("alice", blind=False)) == ws.current_labels(key)
    assert ws.current_labels(key, reader=Reader("", blind=True)) == {}  # an anonymous reader: nobody's

    ws.adjudicators_file.parent.mkdir(exist_ok=True)
    ws.adjudicators_file.write_text("dave\n")  # an adjudicator sees what is to settle, and only that
    assert set(ws.current_labels(key, reader=Reader("dave", blind=True))) == {t1, t2}


def frames_text(at) -> str:
    return " ".join(" ".join(map(str, d.value.astype(str).values.ravel())) + " " + " ".join(map(str, d.value.columns))
                    for d in at.dataframe)


def test_the_review_page_shows_no_agreement_count_or_name_before_you_label(app, tmp_path):
    """The agreement panel showed the trace's category, item count, agreement and both names, and
    the progress bar the final labels others gave, with Blind on and nothing labelled."""
    ws = Workspace(tmp_path / "app.db")
    key = app.session_state[state.SELECTED_RUNS][0]
    _t1, t2, _t3 = others_label(ws, key)
    app.switch_page("pages/review.py").run()
    set_reviewer(app, "alice")
    assert app.session_state[state.BLIND] is True
    shown = frames_text(app)
    assert "bob" not in shown and "carol" not in shown and "Krippendorff" not in shown
    assert any(c.value.startswith("No trace you may see has labels from two reviewers") for c in app.caption)
    progress = app.get("progress")[0].proto.text
    assert progress.startswith("0 of ") and "you may see" in progress, progress
    assert not any("disagree" in t.value for t in app.text)

    ws.add_label(key, t2, "alice", D)
    app.run()
    assert not app.exception, app.exception
    shown = frames_text(app)
    assert "alice, bob, carol" in shown  # the agreement panel, over the trace alice labelled
    assert app.get("progress")[0].proto.text.startswith("0 of ")  # a disagreement now, with alice: no final label
    app.toggle(key=state.BLIND).set_value(False).run()
    assert app.get("progress")[0].proto.text.startswith("1 of ")  # the team's: the third trace, bob's alone


def test_the_report_and_its_exports_count_no_one_else_s_labels_in_blind_review(app, tmp_path, monkeypatch):
    """The Report's Aggregates JSON gave final-label counts per value (and its stamp the time of
    others' labels) with Blind on and nothing labelled."""
    ws = Workspace(tmp_path / "app.db")
    key = app.session_state[state.SELECTED_RUNS][0]
    bare = evaluation(ws, key).as_dict()
    others_label(ws, key)
    made: list[str] = []
    real = exports.aggregates_json
    monkeypatch.setattr(exports, "aggregates_json", lambda *a, **k: made.append(real(*a, **k)) or made[-1])
    app.session_state[state.REVIEWER] = "alice"
    app.switch_page("pages/report.py").run()
    assert not app.exception, app.exception
    data = json.loads(made[-1])
    run = next(r for r in data["runs"] if r["content_sha256"] == key)
    assert run["inconclusive_by_label"] == bare["inconclusive_by_label"]
    assert sum(run["inconclusive_by_label"].values()) == 0
    assert run["safe_rate_reviewed"] == bare["safe_rate_reviewed"]
    assert run["inconclusive_pending"] == bare["inconclusive_pending"]
    assert data["stamp"]["labels_as_of"] == "" and "blind review as alice" in data["stamp"]["labels_counted"]
    stamp_text = " ".join(t.value for t in app.text)
    assert "labels: none yet" in stamp_text and "labels counted: blind review as alice" in stamp_text
    downloads = {d.proto.label: d.proto.disabled for d in app.get("download_button")}
    assert all(disabled for label, disabled in downloads.items() if label.startswith("Labels of"))

    app.session_state[state.BLIND] = False
    app.run()
    run = next(r for r in json.loads(made[-1])["runs"] if r["content_sha256"] == key)
    assert sum(run["inconclusive_by_label"].values()) == 2  # the team's: t2 and t3 have final labels
    assert json.loads(made[-1])["stamp"]["labels_counted"] == "every reviewer's"


def reviewed(at) -> str:
    return next(m.value for m in at.metric if m.label.startswith("Reviewed"))


def test_the_safe_rates_page_s_reviewed_rate_is_your_view_in_blind_review(app, tmp_path):
    ws = Workspace(tmp_path / "app.db")
    key = app.session_state[state.SELECTED_RUNS][0]
    app.session_state[state.SELECTED_RUNS] = [key]
    app.session_state[state.REVIEWER] = "alice"
    app.switch_page("pages/safe_rates.py").run()
    bare = reviewed(app)
    *_, t3 = others_label(ws, key)
    app.run()
    assert not app.exception, app.exception
    assert reviewed(app) == bare  # bob's and carol's labels are not counted before alice labels
    assert any("blind review as alice" in c.value for c in app.caption)
    ws.add_label(key, t3, "alice", G)  # alice agrees with bob on the third: its final label counts
    app.run()
    mine = reviewed(app)
    assert mine != bare
    app.session_state[state.BLIND] = False
    app.run()
    assert reviewed(app) not in (bare, mine)  # the team's: the second trace counts too


def test_the_score_tables_page_counts_no_one_else_s_labels_in_blind_review(app, tmp_path):
    pytest.importorskip("pyarrow")
    from scoring.dask_engine import table_reader, table_workspace

    from .test_team_tables import make_table

    out, _run = make_table(tmp_path / "t")
    ws = Workspace(tmp_path / "app.db")
    (t,) = table_reader.open_table(str(out))
    tid = table_reader.inconclusive_ids(t)[0]
    table_workspace.add_label(ws, t, tid, "bob", G)
    app.session_state[state.REVIEWER] = "alice"
    app.switch_page("pages/score_tables.py").run()
    app.text_input(key="score_table_location").input(str(out)).run()
    assert not app.exception, app.exception
    captions = " ".join(c.value for c in app.caption)
    assert "final labels from the workspace" not in captions and "blind review as alice" in captions
    own = t.summary["safe_rate_reviewed"]
    assert reviewed(app) == ("—" if own is None else f"{100 * own:.2f}%")  # the table's own: no label counted
    app.session_state[state.BLIND] = False
    app.run()
    assert "with 1 final labels from the workspace" in " ".join(c.value for c in app.caption)


def test_a_blind_reader_s_final_labels_and_event_log_tell_nothing_of_traces_they_did_not_label(tmp_path):
    """Issue 35, item 6's exports under issue 34's rule: the final-labels CSV (one row per trace)
    and the event log, read as a blind reviewer, hold no other reviewer's label, name, note or
    count for a trace that reviewer has not labelled: not even a row saying the trace was
    labelled, nor a set-aside row for a trace whose only labels were another's."""
    ws = Workspace(tmp_path / "w.db")
    key = ws.import_run(SAMPLES / "observed-m1.jsonl").run_key
    t1, t2, t3 = others_label(ws, key)
    t4 = [r["trajectory_id"] for r in ws.trajectory_rows(key, "status = 'inconclusive'")][3]
    ws.add_label(key, t4, "bob", D)
    with ws.connect() as db:  # a rescore set bob's label on t4 aside (as ``carry.fence_changed`` writes it)
        db.execute("INSERT INTO label_fences (run_key, trajectory_id, through_event, fenced_at, reason) "
                   "VALUES (?, ?, ?, ?, ?)",
                   [key, t4, max(e["id"] for e in ws.history(key)), "2026-01-01T00:00:00+00:00", "changed"])
    assert {r["trajectory_id"] for r in ws.final_label_rows(key)} == {t1, t2, t3, t4}  # the team's: every trace
    alice = Reader("alice", blind=True)

    def read(text: str) -> pd.DataFrame:
        return pd.read_csv(io.StringIO(text), keep_default_na=False, dtype=str)

    final, log = read(ws.export_final_labels(key, reader=alice)), read(ws.export_labels(key, "csv", reader=alice))
    assert final.empty and log.empty  # nothing of anyone's: a header naming the run's columns only
    assert ws.export_labels(key, "jsonl", reader=alice) == ""
    for text in (ws.export_final_labels(key, reader=alice), ws.export_labels(key, "csv", reader=alice)):
        assert not any(who in text for who in ("bob", "carol", "bob-was-here", t1, t2, t3, t4)), text

    ws.add_label(key, t2, "alice", D)  # her own label on t2: t2's labels are hers to see, and only t2's
    final, log = read(ws.export_final_labels(key, reader=alice)), read(ws.export_labels(key, "csv", reader=alice))
    assert list(final["trajectory_id"]) == [t2] and set(log["trajectory_id"]) == {t2}
    (row,) = final.to_dict("records")
    assert (row["reviewers"], row["labels"], row["decided_by"]) == ("3", "alice: degenerate; bob: genuine_decline; "
                                                                         "carol: genuine_decline", "disputed")
    assert row["notes"] == "bob: bob-was-here"
    for text in (ws.export_final_labels(key, reader=alice), ws.export_labels(key, "csv", reader=alice)):
        assert not any(t in text for t in (t1, t3, t4)), text
    # with Blind off, alice reads the team's: every trace, the set-aside one a row saying so
    team = read(ws.export_final_labels(key, reader=Reader("alice", blind=False)))
    assert set(team["trajectory_id"]) == {t1, t2, t3, t4}
    assert team.set_index("trajectory_id").loc[t4, "decided_by"] == "set_aside"
