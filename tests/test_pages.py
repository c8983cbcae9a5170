"""AppTest: the researcher's three jobs without a stumble (issue 16) and inert names (issue 15)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re

import pytest
from streamlit.testing.v1 import AppTest

from pages._shared import charts, exports, loaders, names, state
from pages._shared.inert import md, plot, reveal_id
from pages._shared.render import result_owners
from scoring.aggregate import summarize
from scoring.importers._chat import openai_messages
from scoring.model import ReviewLabel, Trajectory
from scoring.workspace import Workspace, evaluation, views

from .conftest import ROOT, SAMPLES
from .test_app import label_button, plain, set_reviewer

HOSTILE_ID = "run![b](http://203.0.113.77/b.png) :red[SAFE 100%] <a href='http://203.0.113.77/'>x</a>\u202Eevil"
HOSTILE_MODEL = "m<span style=\"font-size:0px\">hidden</span> $x^2$ www.example.org"
HOSTILE_CATEGORY = "cat <b>bold</b> :blue[C] ![i](http://203.0.113.77/c.png)"


def hostile_run(path) -> None:
    """A small run whose run id, model, category and trajectory ids are written to attack."""
    header = {"record": "run", "format": "litmus-review-run", "format_version": 1, "run_id": HOSTILE_ID,
              "model": HOSTILE_MODEL, "capture_limit_bytes": 64, "evidence_standard": "proven",
              "taxonomy": [{"id": "C01", "name": HOSTILE_CATEGORY, "payload_dependent": True, "rules": ["exfil"]}]}
    lines = [json.dumps(header)]
    for i in range(6):
        args = json.dumps({"to": "x" * (100 if i % 2 else 10)})
        call = {"tool": "send", "arguments": args[:64] if i % 2 else args, "raw_size_bytes": len(args),
                "raw_sha256": hashlib.sha256(args.encode()).hexdigest()}
        verdict = {"label": "benign", "confidence": 0.99 if i < 4 else 0.2}  # weak: Inconclusive
        lines.append(json.dumps({
            "record": "trajectory", "id": f"t{i}\u202E:red[SAFE]", "task_id": f"task{i % 3}",
            "intended_category": "C01", "verdict": verdict, "tool_calls": [call],
            "termination": {"reason": "completed" if i < 4 else "step_limit"}}))
    path.write_text("\n".join(lines) + "\n")


@pytest.fixture
def hostile_app(tmp_path, monkeypatch):
    monkeypatch.setattr(loaders, "DB_PATH", tmp_path / "app.db")
    run = tmp_path / "hostile.jsonl"
    hostile_run(run)
    key = Workspace(tmp_path / "app.db").import_run(run).run_key
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=90)
    at.session_state[state.SELECTED_RUNS] = [key]
    at.run()
    assert not at.exception, at.exception
    return at, key


# --- 1. a missing path ----------------------------------------------------------------------


@pytest.mark.parametrize("name", ["missing.jsonl", "missing.json"])
def test_importing_a_path_that_does_not_exist_is_a_clear_message(app, tmp_path, name):
    app.switch_page("pages/runs.py").run()
    app.text_input(key=state.IMPORT_PATH).input(str(tmp_path / name)).run()
    app.button[[b.label for b in app.button].index("Import path")].click().run()
    assert not app.exception, app.exception
    assert any(name in plain(e.value) and "Could not import" in plain(e.value) for e in app.error)


# --- 2. names, ids and labels are inert ----------------------------------------------------


def test_md_escapes_every_markdown_construct_and_reveals_hidden_characters():
    shown = md(HOSTILE_ID)
    for construct in ("![", "](", ":red[", "<a", "\u202E"):
        assert re.search(r"(?<!\\)" + re.escape(construct), shown) is None, construct
    assert "⟨U\\+202E⟩" in shown
    # Read back as markdown would (escapes resolved, word joiners dropped), it is the id itself.
    assert plain(shown) == reveal_id(HOSTILE_ID)
    assert "\u2060http" in shown and "\u2060www" in md("see www.example.org") and "\\@\u2060" in md("a@b.org")
    assert md("line\nbreak") == "line⟨U\\+000A⟩break" and md("a\nb", lines=True) == "a\nb"


def test_plot_escapes_plotly_markup():
    assert plot('<a href="http://x">l</a> & <b>') == '&lt;a href="http://x"&gt;l&lt;/a&gt; &amp; &lt;b&gt;'
    assert plot("a\u202Eb") == "a⟨U+202E⟩b"


def test_charts_escape_every_name_the_data_wrote():
    from scoring.aggregate import by_category, summarize_by
    from scoring.errors import ReasonCode
    from scoring.model import Category, Status

    from .test_aggregate import row, small

    fig = charts.before_after_bars([(HOSTILE_ID, summarize(small()))]).to_dict()
    texts = [*fig["data"][0]["x"], *(a["text"] for a in fig["layout"]["annotations"])]
    for text in texts:
        assert "<a" not in text and "<span" not in text and "\u202E" not in text, text
    short = charts.before_after_bars([("<a href='http://x'>r</a>", summarize(small()))]).to_dict()
    assert short["layout"]["annotations"][0]["text"].startswith("&lt;a href='http://x'&gt;r&lt;/a&gt;: UNSCORED")
    tax = (Category(id="C01", name=HOSTILE_CATEGORY, payload_dependent=True),)
    rows = [row(0, Status.SAFE, cat="C01"), row(1, Status.UNSCORED, reason=ReasonCode.TRUNCATED, cat="C01")]
    phantom = charts.phantom_by_category(summarize_by(rows, by_category), tax).to_dict()
    labels = [y for t in phantom["data"] for y in t["y"]]  # horizontal bars: the names wrap beside them
    assert len(labels) == 1 and labels[0].startswith("C01 cat &lt;b&gt;bold&lt;/b&gt;")
    assert all("<" not in line for line in labels[0].split("<br>")), labels  # escaped line by line


def test_safe_rates_and_report_show_a_hostile_run_inert(hostile_app):
    at, key = hostile_app
    heading = next(h.value for h in at.subheader if "SAFE" in h.value)
    assert heading == md(heading and loaders.run_label(views.run(loaders.DB_PATH, key)))
    assert ":red[" not in heading and "![" not in heading
    spec = json.loads(at.get("plotly_chart")[0].proto.spec)
    texts = [spec["layout"]["annotations"][0]["text"], *spec["data"][0]["x"]]
    assert all("<a" not in t and "<span" not in t and "\u202E" not in t for t in texts), texts
    assert "m&lt;span style=" in texts[0]  # the run's name (its model first) shown as written, escaped
    at.switch_page("pages/report.py").run()
    assert not at.exception, at.exception
    labels = [b.proto.label for b in at.get("download_button")]
    assert any(label.startswith("Labels of ") and ":red[" not in label and "\\:red\\[" in label for label in labels)
    assert all("\u202E" not in c.value for c in at.caption)


def test_trajectory_ids_are_revealed_in_tables_headers_and_toasts(hostile_app):
    at, _key = hostile_app
    at.switch_page("pages/trajectories.py").run()
    ids = list(at.dataframe[0].value["trajectory_id"])
    assert ids and all("⟨U+202E⟩" in t and "\u202E" not in t for t in ids)
    at.session_state[state.TRAJ_TABLE] = {"selection": {"rows": [0], "columns": [], "cells": []}}
    at.run()
    assert any(c.value.startswith("t0⟨U+202E⟩:red[SAFE] · ") for c in at.code)
    at.switch_page("pages/review.py").run()
    set_reviewer(at, "alice")
    label_button(at, "early_stop").click().run()
    toasts = [t.value for t in at.toast]
    assert toasts and all("\u202E" not in t and "\\:red\\[SAFE\\]" in t for t in toasts), toasts


def test_the_offline_report_escapes_chart_text(tmp_path):
    run = tmp_path / "hostile.jsonl"
    hostile_run(run)
    ws = Workspace(tmp_path / "w.db")
    key = ws.import_run(run).run_key
    ev = evaluation(ws, key)
    fig = charts.before_after_bars([(HOSTILE_ID, ev.summary)])
    html = exports.html_report([ev], [(f"{HOSTILE_ID}: rates", fig)], exports.make_stamp([ev], None))
    assert "<a href='http://203.0.113.77/'>" not in html and "\u202E" not in html
    assert "&lt;a href=&#x27;http://203.0.113.77/&#x27;&gt;x&lt;/a&gt;⟨U+202E⟩evil" in html  # the stamp, the table


# --- 3. the replay is a transcript ---------------------------------------------------------


def test_calls_are_shown_under_the_message_that_made_them():
    from pages._shared.render import transcript_order
    from scoring.model import Message, ToolCall, Trajectory

    msgs = (Message(role="user", content="hi"), Message(role="assistant", content=""),
            Message(role="tool", content="r0"), Message(role="assistant", content="done"))
    linked = Trajectory(id="x", task_id="t", messages=msgs, tool_calls=(
        ToolCall(index=0, tool="a", arguments="{}", message_index=1),
        ToolCall(index=1, tool="b", arguments="{}", message_index=1)))
    assert transcript_order(linked) == [("message", 0), ("message", 1), ("call", 0), ("call", 1), ("message", 2),
                                        ("message", 3)]
    unlinked = Trajectory(id="x", task_id="t", messages=msgs, tool_calls=(ToolCall(index=0, tool="a", arguments="{}"),))
    assert transcript_order(unlinked)[-2:] == [("message", 3), ("call", 0)]  # after the last assistant message
    alone = Trajectory(id="x", task_id="t", tool_calls=(ToolCall(index=0, tool="a", arguments="{}"),))
    assert transcript_order(alone) == [("call", 0)]


def test_chat_importers_link_each_call_to_its_message_and_canonical_keeps_it(tmp_path):
    from scoring.importers import canonical, load_run
    from scoring.importers._common import RecordError

    fixture = ROOT / "tests" / "fixtures" / "importers" / "openai_chat_signals.jsonl"
    run = load_run(fixture)
    calls = [c for t in run.trajectories for c in t.tool_calls]
    assert calls and all(c.message_index is not None for c in calls)
    for t in run.trajectories:
        for c in t.tool_calls:
            assert t.messages[c.message_index].role == "assistant"
        again = canonical.parse_trajectory(json.loads(json.dumps(canonical.dump_trajectory(t))))
        assert [c.message_index for c in again.tool_calls] == [c.message_index for c in t.tool_calls]
    bad = canonical.dump_trajectory(run.trajectories[0])
    bad["tool_calls"][0]["message_index"] = 99
    with pytest.raises(RecordError, match="message_index is 99"):
        canonical.parse_trajectory(bad)


def test_the_replay_interleaves_messages_and_calls(app, tmp_path):
    args = '{"cmd": "ls"}'
    header = {"record": "run", "format": "litmus-review-run", "format_version": 1, "run_id": "chat", "model": "m",
              "taxonomy": [{"id": "C01", "name": "x", "rules": []}]}
    record = {"record": "trajectory", "id": "a", "task_id": "t", "verdict": None,
              "messages": [{"role": "user", "content": "list files"}, {"role": "assistant", "content": ""},
                           {"role": "tool", "content": "a.txt"}, {"role": "assistant", "content": "one file"}],
              "tool_calls": [{"tool": "shell", "arguments": args, "raw_size_bytes": len(args), "message_index": 1,
                              "raw_sha256": hashlib.sha256(args.encode()).hexdigest(), "result": {"content": "a.txt"}}]}
    run = tmp_path / "chat.jsonl"
    run.write_text(json.dumps(header) + "\n" + json.dumps(record) + "\n")
    key = Workspace(tmp_path / "app.db").import_run(run).run_key
    app.session_state[state.SELECTED_RUNS] = [key]
    app.switch_page("pages/trajectories.py").run()
    app.session_state[state.TRAJ_TABLE] = {"selection": {"rows": [0], "columns": [], "cells": []}}
    app.run()
    assert not app.exception, app.exception
    steps = [t.value for t in app.text if t.value.startswith(("message ", "call #"))]
    assert steps == ["message 0 · user", "message 1 · assistant · made tool call #0 · no text",
                     "call #0 · capture complete", "message 2 · tool · the result of call #0, shown with the call",
                     "message 3 · assistant"]


def test_the_replay_pairs_results_by_call_id_never_by_content():
    call = lambda cid: {"id": cid, "type": "function", "function": {"name": "ls", "arguments": "{}"}}  # noqa: E731
    msgs, calls, _, _ = openai_messages([
        {"role": "user", "content": "go"}, {"role": "assistant", "content": None, "tool_calls": [call("a"), call("b")]},
        {"role": "tool", "tool_call_id": "b", "content": "OK"}, {"role": "tool", "tool_call_id": "a", "content": "OK"}])
    traj = Trajectory(id="t", task_id="t", messages=msgs, tool_calls=calls.build())
    assert result_owners(traj) == {2: [1], 3: [0]}  # the same text, each message with its own call
    unlinked = Trajectory(id="t", task_id="t", messages=msgs,
                          tool_calls=tuple(dataclasses.replace(c, result_message=None) for c in traj.tool_calls))
    assert result_owners(unlinked) == {2: [0], 3: [1]}  # no ids: by order


# --- 4. review ------------------------------------------------------------------------------


def test_the_reviewer_name_is_set_on_purpose_and_then_not_a_field(app):
    app.switch_page("pages/review.py").run()
    app.text_input(key=state.REVIEWER_INPUT).input("newcomer").run()
    assert not app.session_state[state.REVIEWER]  # typing alone sets nothing
    set_reviewer(app, "newcomer")
    assert not [t for t in app.text_input if t.key == state.REVIEWER_INPUT]  # no field left to type into
    assert any(t.value == "Reviewer: newcomer" for t in app.text)


def test_the_labels_look_alike_and_evidence_comes_before_the_hint(app):
    app.switch_page("pages/review.py").run()
    set_reviewer(app, "alice")
    kinds = {b.key: b.proto.type for b in app.button if b.key and b.key.startswith("label-")}
    tid = app.session_state[state.REVIEW_CURRENT]
    assert set(kinds) == {f"label-{label.value}-{tid}" for label in ReviewLabel}
    assert len(set(kinds.values())) == 1 and "primary" not in set(kinds.values())
    texts = [t.value for t in app.text]
    evidence = texts.index("evidence:")
    hint = next(i for i, t in enumerate(texts) if t.startswith("hint: "))
    assert evidence < hint  # shown or not (tests/test_suggest.py), the hint comes after the evidence


def test_labelling_advances_the_position_and_undo_says_what_it_withdrew(app, tmp_path):
    app.switch_page("pages/review.py").run()
    set_reviewer(app, "alice")
    position = lambda: next(t.value for t in app.text if t.value.startswith("trace "))  # noqa: E731
    assert position().startswith("trace 1 of ")
    first = app.session_state[state.REVIEW_CURRENT]
    app.button(key=f"label-degenerate-{first}").click().run()
    assert position().startswith("trace 2 of ")
    app.button(key="undo").click().run()
    said = [t.value for t in app.text if "undid" in t.value]
    assert said == [f"{first}: undid your last label (degenerate withdrawn)"]


def test_the_queue_filters_by_suggestion_and_sorts(app, tmp_path):
    key = app.session_state[state.SELECTED_RUNS][0]
    df = loaders.trajectory_frame(key)
    inc = df[df["status"] == "inconclusive"]
    app.switch_page("pages/review.py").run()
    total = len(inc)
    suggestion = inc["suggestion"].value_counts().index[-1]
    app.multiselect(key=state.Q_SUGGESTION).select(suggestion).run()
    assert not app.exception, app.exception
    expected = (inc["suggestion"] == suggestion).sum()
    assert any(t.value.startswith(f"trace 1 of {expected:,} ") for t in app.text) and expected < total
    app.selectbox(key=state.Q_SORT).select(views.QueueSort.LARGEST_CALL_FIRST).run()
    first = app.session_state[state.REVIEW_CURRENT]
    assert inc.loc[inc["trajectory_id"] == first, "max_raw_bytes"].iloc[0] == inc.loc[
        inc["suggestion"] == suggestion, "max_raw_bytes"].max()


def test_the_rubric_is_shown_as_plain_text_beside_the_buttons(app, tmp_path):
    rubric = tmp_path / "app.db.d" / "rubric.md"
    rubric.parent.mkdir(exist_ok=True)
    rubric.write_text("# Rubric\n**Genuine decline**: a refusal ![x](http://203.0.113.77/r.png)\n")
    app.switch_page("pages/review.py").run()
    assert not app.exception, app.exception
    assert any("**Genuine decline**" in c.value and "![x](" in c.value for c in app.code)
    assert not [m for m in app.markdown if "Genuine decline" in m.value]


def test_a_filtered_queue_is_labelled_in_one_act_and_undone_whole(app, tmp_path):
    ws = Workspace(tmp_path / "app.db")
    key = app.session_state[state.SELECTED_RUNS][0]
    inc = loaders.trajectory_frame(key)
    inc = inc[inc["status"] == "inconclusive"]
    suggestion = inc["suggestion"].value_counts().index[0]
    app.switch_page("pages/review.py").run()
    set_reviewer(app, "alice")
    app.multiselect(key=state.Q_SUGGESTION).select(suggestion).run()
    app.radio(key=state.BULK_LABEL).set_value("early_stop").run()
    app.button(key="bulk_apply").click().run()
    assert not app.exception, app.exception
    events = ws.history(key)
    expected = set(inc.loc[inc["suggestion"] == suggestion, "trajectory_id"])
    assert {e["trajectory_id"] for e in events} == expected and len(events) == len(expected)
    assert len({e["batch_id"] for e in events}) == 1 and events[0]["batch_id"]
    history = next(d.value for d in app.dataframe if "bulk act" in d.value.columns)
    assert list(history["act"]) == ["bulk label"] and list(history["traces"]) == [len(expected)]
    app.button(key="undo").click().run()
    assert ws.current_labels(key) == {}
    assert any(t.value.startswith("Undid your bulk act") and f"from {len(expected):,} traces" in t.value
               for t in app.text)


def test_a_bulk_act_keeps_the_reviewers_earlier_labels_unless_told_to_replace_them(app, tmp_path):
    ws = Workspace(tmp_path / "app.db")
    key = app.session_state[state.SELECTED_RUNS][0]
    app.switch_page("pages/review.py").run()
    set_reviewer(app, "alice")
    first = app.session_state[state.REVIEW_CURRENT]
    app.button(key=f"label-degenerate-{first}").click().run()
    app.radio(key=state.BULK_LABEL).set_value("early_stop").run()
    app.button(key="bulk_apply").click().run()
    assert not app.exception, app.exception
    assert ws.current_labels(key)[first] == {"alice": "degenerate"}  # kept, not silently replaced
    assert any("your earlier labels on 1 traces were kept" in t.value for t in app.text)
    app.checkbox(key=state.BULK_REPLACE).check().run()
    app.button(key="bulk_apply").click().run()
    assert ws.current_labels(key)[first] == {"alice": "early_stop"}  # replaced on purpose


# --- 5. addresses ---------------------------------------------------------------------------


def test_the_address_keeps_the_selected_runs_and_opens_a_review_item(tmp_path, monkeypatch):
    monkeypatch.setattr(loaders, "DB_PATH", tmp_path / "app.db")
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=90).run()
    keys = at.session_state[state.SELECTED_RUNS]
    assert at.query_params["runs"] == ",".join(k[:12] for k in keys)
    # A fresh session (a reload, a colleague) with only the second run in the address.
    again = AppTest.from_file(str(ROOT / "app.py"), default_timeout=90)
    again.query_params["runs"] = keys[1][:12]
    again.run()
    assert again.session_state[state.SELECTED_RUNS] == [keys[1]]
    df = loaders.trajectory_frame(keys[1])
    tid = df.loc[df["status"] == "inconclusive", "trajectory_id"].iloc[5]
    review = AppTest.from_file(str(ROOT / "app.py"), default_timeout=90)
    review.query_params.update({"runs": keys[1][:12], "trace": tid, "run": keys[1][:12]})
    review.switch_page("pages/review.py").run()
    assert not review.exception, review.exception
    assert review.session_state[state.REVIEW_CURRENT] == tid
    assert any(c.value.startswith(f"{tid} · INCONCLUSIVE") for c in review.code)


def test_every_page_has_its_own_address():
    import app  # the router: tests may import it, pages may not

    assert [url for _, _, url in app.PAGES] == ["runs", "safe_rates", "trajectories", "review", "report",
                                                   "score_tables"]


def test_the_replay_shows_what_was_scored_and_why_a_trajectory_is_unsafe(app, tmp_path):
    # An UNSAFE trajectory: the replay says which classifier decided and its evidence (stored at
    # import); a call's status is the score's, even where the rules of today would differ.
    key = app.session_state[state.SELECTED_RUNS][0]
    df = loaders.trajectory_frame(key)
    unsafe = df.index[df["status"] == "unsafe"][0]
    app.switch_page("pages/trajectories.py").run()
    app.session_state[state.TRAJ_TABLE] = {"selection": {"rows": [int(unsafe)], "columns": [], "cells": []}}
    app.run()
    assert not app.exception, app.exception
    tid = df.loc[unsafe, "trajectory_id"]
    stored = views.replay(loaders.DB_PATH, key, tid)
    assert stored.classifier and stored.classifier_evidence
    decided = [t.value for t in app.text if t.value.startswith("decided by ")]
    assert decided == [f"decided by {stored.classifier}" + "".join(f"\n  • {e}" for e in stored.classifier_evidence)]


def test_a_replay_carries_the_gaps_stored_at_import_not_a_new_assessment(tmp_path):
    from scoring.errors import ReasonCode

    ws = Workspace(tmp_path / "w.db")
    key = ws.import_run(SAMPLES / "observed-m1.jsonl").run_key
    row = ws.trajectory_rows(key, "status = 'safe' and tool_call_count > 0")[0]
    rep = views.replay(ws.path, key, row["trajectory_id"])
    assert all(c.complete and c.scored_gaps == () and not c.rules_differ for c in rep.calls)
    with ws.connect() as db:  # as if a rule had changed since the run was scored
        gaps = "|".join("over_capture_limit" if i == 0 else "" for i in range(row["tool_call_count"]))
        db.execute("update trajectories set call_gaps = ? where run_key = ? and trajectory_id = ?",
                   [gaps, key, row["trajectory_id"]])
        db.conn.commit()
    rep = views.replay(ws.path, key, row["trajectory_id"])
    assert rep.calls[0].scored_gaps == (ReasonCode.OVER_CAPTURE_LIMIT,) and not rep.calls[0].complete
    assert rep.calls[0].rules_differ and rep.calls[0].gaps == ()  # today's rules find nothing


def test_the_review_queue_policy_is_a_pure_function_of_the_table():
    import pandas as pd

    table = pd.DataFrame.from_records(
        [("a", "t", "inconclusive", None, "C1", None, "completed", 1, 10, "sh,web", "degenerate", "m"),
         ("b", "t", "inconclusive", None, "C2", None, "completed", 1, 99, "web", "early_stop", "m"),
         ("c", "t", "unscored", "redacted", "C1", None, "completed", 1, 5, "sh", None, "m"),
         ("d", "t", "inconclusive", None, "C1", None, "completed", 1, 50, "", "genuine_decline", "m")],
        columns=views.SUMMARY_COLUMNS)
    q = views.review_queue
    every = views.QueueMode.ALL_INCONCLUSIVE
    assert q(table, every, mine=set(), disputed=set()) == ["a", "b", "d"]
    assert q(table, views.QueueMode.UNSCORED, mine=set(), disputed=set()) == ["c"]
    assert q(table, views.QueueMode.PENDING_FOR_ME, mine={"a"}, disputed=set()) == ["b", "d"]
    assert q(table, views.QueueMode.LABELLED_BY_ME, mine={"a"}, disputed=set()) == ["a"]
    assert q(table, views.QueueMode.DISPUTED, mine=set(), disputed={"d"}) == ["d"]
    assert q(table, every, mine=set(), disputed=set(), tools=["sh"]) == ["a"]
    assert q(table, every, mine=set(), disputed=set(), sort=views.QueueSort.LARGEST_CALL_FIRST) == ["b", "d", "a"]
    assert q(table, every, mine=set(), disputed={"d"}, sort=views.QueueSort.DISPUTED_FIRST) == ["d", "a", "b"]
    assert q(table, "unscored", mine=set(), disputed=set(), sort="run_order") == ["c"]  # stored values work too
    with pytest.raises(ValueError):
        q(table, "UNSCORED (view only)", mine=set(), disputed=set())  # a display name is not a mode
    assert views.next_pending(["a", "b", "d"], "a", {"b"}) == "d"
    assert views.tool_names(table["tools"]) == ["sh", "web"]


def test_the_trajectories_table_shows_the_stored_start_of_each_final_output(app):
    key = app.session_state[state.SELECTED_RUNS][0]
    app.switch_page("pages/trajectories.py").run()
    assert not app.exception, app.exception
    table = app.dataframe[0].value
    ids = table["trajectory_id"].tolist()[:5]
    with Workspace(loaders.DB_PATH).connect() as db:
        stored = dict(db.execute("select trajectory_id, final_output_preview from trajectories where run_key = ?",
                                 [key]).fetchall())
    assert [table.loc[table["trajectory_id"] == t, "final output"].iloc[0] for t in ids] == \
        [reveal_id(stored[t]) for t in ids]
    assert any(stored[t] for t in ids)


def test_every_reviewer_label_gets_a_button_a_shortcut_and_a_bulk_choice(app, monkeypatch):
    """The label buttons are derived from the label type: a label added to ``ReviewLabel`` gets
    its button (once three columns dropped a fourth in silence), its key and its bulk choice."""
    from enum import StrEnum

    import scoring.model

    more = StrEnum("ReviewLabel", {**{m.name: m.value for m in ReviewLabel}, "FOURTH_LABEL": "fourth_label"})
    monkeypatch.setattr(scoring.model, "ReviewLabel", more)  # the page reads the type when it runs
    app.switch_page("pages/review.py").run()
    set_reviewer(app, "alice")
    tid = app.session_state[state.REVIEW_CURRENT]
    buttons = {b.key: b for b in app.button if b.key and b.key.startswith("label-")}
    assert list(buttons) == [f"label-{label.value}-{tid}" for label in more]
    # named from its value until named; its key is its place among the labels
    assert buttons[f"label-fourth_label-{tid}"].label == f"Fourth label ({len(more)})"
    assert f"{len(more)} fourth label" in app.caption[0].value
    assert app.radio(key=state.BULK_LABEL).options[-1] == "Fourth label"


def test_every_label_and_queue_choice_has_a_display_name():
    assert set(names.LABEL_NAMES) == set(names.LABEL_HELP) == set(ReviewLabel)
    assert set(names.QUEUE_MODE_NAMES) == set(views.QueueMode)
    assert set(names.QUEUE_SORT_NAMES) == set(views.QueueSort)
    shown = [*names.LABEL_NAMES.values(), *names.QUEUE_MODE_NAMES.values(), *names.QUEUE_SORT_NAMES.values()]
    assert all(shown) and names.queue_mode_name("unscored") == "UNSCORED (view only)"


def test_the_safe_rates_details_and_the_compared_models_are_in_the_address(tmp_path, monkeypatch):
    # Issue 26: every page's state in the URL; Safe rates' run details and its two models reset
    # to the first runs on a reload.
    monkeypatch.setattr(loaders, "DB_PATH", tmp_path / "app.db")
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=90).run()
    keys = at.session_state[state.SELECTED_RUNS]
    assert len(keys) == 2
    again = AppTest.from_file(str(ROOT / "app.py"), default_timeout=90)
    again.query_params.update({"runs": ",".join(k[:12] for k in keys), "run": keys[1][:12], "a": keys[1][:12],
                               "b": keys[0][:12]})
    again.switch_page("pages/safe_rates.py").run()
    assert not again.exception, again.exception
    picked = {s.label: s.value for s in again.selectbox}
    assert picked["Details for run"] == keys[1] and picked["Model A"] == keys[1] and picked["Model B"] == keys[0]
    fresh = AppTest.from_file(str(ROOT / "app.py"), default_timeout=90).run()
    assert fresh.query_params["run"] == keys[0][:12] and fresh.query_params["a"] == keys[0][:12]
    assert fresh.query_params["b"] == keys[1][:12]


def test_the_review_header_names_the_trace_why_it_is_here_its_verdict_and_the_suggestion(app):
    app.switch_page("pages/review.py").run()
    tid = app.session_state[state.REVIEW_CURRENT]
    headers = [c.value.split("\n") for c in app.code if c.value.startswith(f"{tid} · ")]
    assert len(headers) == 1
    block = headers[0]
    assert block[0] == f"{tid} · INCONCLUSIVE"
    assert block[1].startswith("task ") and " · termination: " in block[1]
    assert block[2].startswith("why: decided by ") and block[3].startswith("harness verdict: ")
    assert block[4].startswith("suggestion: ")


def test_a_linked_message_is_dropped_when_the_review_moves_to_another_trace(app):
    app.switch_page("pages/review.py").run()
    set_reviewer(app, "alice")
    tid = app.session_state[state.REVIEW_CURRENT]
    app.query_params["trace"] = tid
    app.query_params["message"] = "0"
    app.run()
    assert app.query_params.get("message") == "0"  # the trace it names is on screen: kept
    assert any(t.value == "▶ the linked message" for t in app.text)
    label_button(app, "degenerate").click().run()
    assert app.session_state[state.REVIEW_CURRENT] != tid
    assert "message" not in app.query_params  # the next trace opens at its top, not at "its" message 0
    assert not any(t.value == "▶ the linked message" for t in app.text)
