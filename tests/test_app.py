"""AppTest: every page runs without exception and shows the numbers the core computes."""

from __future__ import annotations

import json
import re

import pytest
from streamlit.testing.v1 import AppTest

from pages._shared import loaders, state
from scoring.workspace import Workspace, evaluation, views

from .conftest import ROOT


def ws_for(tmp_path) -> Workspace:
    return Workspace(tmp_path / "app.db")


def plain(markdown: str) -> str:
    """What an inert markdown string reads as: escapes resolved, word joiners dropped."""
    return re.sub(r"\\(.)", r"\1", markdown).replace("\u2060", "")


def set_reviewer(at, name: str) -> None:
    """Type a reviewer name and set it (the form's button): it is set on purpose, not per key."""
    at.text_input(key=state.REVIEWER_INPUT).input(name)
    next(b for b in at.button if b.label == "Set reviewer").click().run()
    assert not at.exception, at.exception
    assert at.session_state[state.REVIEWER] == name


def label_button(at, label: str):
    """The label button drawn for the trace on screen (its key names the trace)."""
    return at.button(key=f"label-{label}-{at.session_state[state.REVIEW_CURRENT]}")


def metric(at, label: str) -> str:
    return next(m.value for m in at.metric if m.label.startswith(label))


def test_safe_rates_numbers_equal_the_aggregates(app, tmp_path):
    ws = ws_for(tmp_path)
    keys = app.session_state[state.SELECTED_RUNS]
    assert len(keys) == 2  # the two sample runs, with their side logs
    s = evaluation(ws, keys[0]).summary
    assert metric(app, "Lenient") == f"{100 * s.lenient.value:.2f}%"
    assert metric(app, "Strict") == f"{100 * s.strict.value:.2f}%"
    assert metric(app, "UNSCORED") == f"{s.unscored:,}"
    # The headline "Phantom safety": hidden harm + not judged, a bound while 24 trajectories are
    # UNSCORED (issue 33: it was a point, capture loss counted in); pending review shown apart.
    assert s.phantom_safety_pp is None and metric(app, "Phantom") == s.phantom_safety_short == "2.34–3.55"
    captions = plain(" ".join(c.value for c in app.caption))  # as markdown reads it
    assert f"apart: capture loss {s.phantom.capture_loss_pp:+.2f} pp, pending review " \
           f"{s.phantom.pending_review_pp:+.2f} pp" in captions
    assert f"{100 * s.unscored_share:.2f}% of {s.unscored_share_of:,} asked a safety question" in captions
    assert "t × ĥ = 2.44 pp" in captions and "taxonomy_rules" in captions  # t over the 1,980 judged (3.0)
    assert f"{s.judged:,} judged by the harness" in captions
    charts = app.get("plotly_chart")
    assert len(charts) == 6
    spec = json.loads(charts[0].proto.spec)
    lenient_bar = next(t for t in spec["data"] if t["name"].startswith("Lenient"))
    assert lenient_bar["base"] + lenient_bar["y"][0] == pytest.approx(100 * s.lenient.value)


def test_runs_page_lists_imported_runs(app):
    app.switch_page("pages/runs.py").run()
    assert not app.exception
    table = app.dataframe[-1].value
    assert set(table["run"]) == {"model-alpha-2026-10 · observed-m1 · with side log",
                                 "model-beta-2026-11 · compare-m2 · with side log"}


def test_trajectories_page_filters_and_replays(app, tmp_path):
    app.switch_page("pages/trajectories.py").run()
    assert not app.exception
    # an empty filter means all (Streamlit's "Choose options" was cut to "Choose optio" in six columns)
    filters = ("status", "reason", "category", "termination", "tool", "model")
    assert {app.multiselect(key=f"filter_{f}").proto.placeholder for f in filters} == {"all"}
    app.multiselect(key="filter_status").select("unscored").run()
    assert all(app.dataframe[0].value["status"] == "unscored")
    app.session_state[state.TRAJ_TABLE] = {"selection": {"rows": [0], "columns": [], "cells": []}}
    app.run()
    assert not app.exception
    assert any("UNSCORED" in c.value for c in app.code)


def test_labelling_writes_to_the_store_and_moves_the_reviewed_rate(app, tmp_path):
    ws = ws_for(tmp_path)
    key = app.session_state[state.SELECTED_RUNS][0]
    before = evaluation(ws, key).summary
    app.switch_page("pages/review.py").run()
    assert not app.exception
    assert label_button(app, "genuine_decline").disabled  # no reviewer yet
    set_reviewer(app, "alice")
    label_button(app, "genuine_decline").click().run()
    assert not app.exception
    events = ws.history(key)
    assert [(e["reviewer"], e["label"]) for e in events] == [("alice", "genuine_decline")]
    after = evaluation(ws, key).summary
    assert after.reviewed.numerator == before.reviewed.numerator + 1
    app.switch_page("pages/safe_rates.py").run()
    assert metric(app, "Reviewed") == f"{100 * after.reviewed.value:.2f}%"


def test_a_reviewer_can_mark_harm_found_and_it_counts_unsafe_with_the_note(app, tmp_path):
    # Issue 23 item 10 (failed on c28bc5b: no such label, no button).
    ws = ws_for(tmp_path)
    key = app.session_state[state.SELECTED_RUNS][0]
    before = evaluation(ws, key).summary
    app.switch_page("pages/review.py").run()
    set_reviewer(app, "carol")
    app.text_input(key=state.NOTE_INPUT).input("call 2 posts the stolen key before the refusal")
    next(b for b in app.button if b.label == "Attach").click().run()
    button = label_button(app, "harm_found")
    assert button.label == "Harm found (4)" and "UNSAFE" in button.help  # key 4, from the type
    button.click().run()
    assert not app.exception, app.exception
    (event,) = ws.history(key)
    assert (event["label"], event["note"]) == ("harm_found", "call 2 posts the stolen key before the refusal")
    after = evaluation(ws, key).summary
    assert after.reviewed.numerator == before.reviewed.numerator
    assert after.reviewed.denominator == before.reviewed.denominator + 1
    assert after.inconclusive_by_label["harm_found"] == 1


def test_review_undo_appends_an_event(app, tmp_path):
    ws = ws_for(tmp_path)
    key = app.session_state[state.SELECTED_RUNS][0]
    app.switch_page("pages/review.py").run()
    set_reviewer(app, "bob")
    first = app.session_state[state.REVIEW_CURRENT]
    label_button(app, "degenerate").click().run()
    assert app.session_state[state.REVIEW_CURRENT] != first  # moved on to the next trace
    app.button(key="undo").click().run()
    assert [e["action"] for e in ws.history(key)] == ["label", "undo"]
    assert app.session_state[state.REVIEW_CURRENT] == first  # back to the trace whose label was undone
    assert ws.current_labels(key) == {}


def test_report_page_offers_every_export(app):
    app.switch_page("pages/report.py").run()
    assert not app.exception
    text = "\n".join(t.value for t in app.text)
    assert "content sha256" in text and "scorer version" in text
    # rates in percent, each shown with two decimals (the table's format is "%.2f%%")
    table = app.dataframe[0].value
    assert table["safe_rate_strict"].between(50, 100).all()
    assert table["safe_rate_lenient"].between(50, 100).all()


def test_a_locked_database_gives_a_clear_error_in_the_review_page(app, tmp_path, monkeypatch):
    import sqlite3

    monkeypatch.setattr(views, "BUSY_TIMEOUT_S", 0.2)
    app.switch_page("pages/review.py").run()
    set_reviewer(app, "alice")
    blocker = sqlite3.connect(str(tmp_path / "app.db"))
    blocker.execute("BEGIN EXCLUSIVE")
    try:
        label_button(app, "genuine_decline").click().run()
    finally:
        blocker.rollback()
        blocker.close()
    assert not app.exception
    assert any("cannot be written" in plain(e.value) for e in app.error)
    assert ws_for(tmp_path).history(app.session_state[state.SELECTED_RUNS][0]) == []


def test_a_read_only_workspace_is_a_clear_error_not_a_traceback(tmp_path, monkeypatch):
    monkeypatch.setattr(loaders, "DB_PATH", tmp_path / "missing-folder" / "app.db")
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60).run()
    assert not at.exception
    assert any("cannot be used" in plain(e.value) and "does not exist" in plain(e.value) for e in at.error)


def test_under_oidc_labels_carry_the_signed_in_identity(app, tmp_path, monkeypatch):
    from pages._shared import router

    monkeypatch.setattr(router, "logged_in_identity", lambda: "carol@example.org")
    app.session_state[state.REVIEWER] = "mallory"  # whatever was typed before cannot be used
    app.switch_page("pages/review.py").run()
    assert not app.exception
    assert app.text_input[0].disabled and app.text_input[0].value == "carol@example.org"
    label_button(app, "early_stop").click().run()
    key = app.session_state[state.SELECTED_RUNS][0]
    assert [e["reviewer"] for e in ws_for(tmp_path).history(key)] == ["carol@example.org"]


def test_runs_page_imports_from_a_path_and_reports_rejections(app, tmp_path):
    fixture = ROOT / "tests" / "fixtures" / "importers" / "litmus_pipeline.jsonl"
    app.switch_page("pages/runs.py").run()
    app.text_input(key=state.IMPORT_PATH).input(str(fixture)).run()
    app.button[[b.label for b in app.button].index("Import path")].click().run()
    assert not app.exception
    imported = "Imported litmus_pipeline.jsonl as model unknown · litmus_pipeline"
    assert any(imported in plain(s.value) for s in app.success)
    assert any("1 record was rejected" in w.value for w in app.warning)  # in the singular
    rejected = app.dataframe[0].value
    assert list(rejected["line"]) == [6]  # line 7 has no judgement: imported, Inconclusive
    assert app.multiselect(key=state.SELECTED_RUNS).value[-1] == ws_for(tmp_path).find_run("litmus_pipeline")["run_key"]
    key = ws_for(tmp_path).find_run("litmus_pipeline")["run_key"]
    assert key in app.session_state[state.SELECTED_RUNS]


def test_runs_page_pairs_the_side_log_beside_a_path_and_takes_a_verdict_preset(app, tmp_path):
    # The app's import is the CLI's door: RUN.payloads.jsonl beside RUN is joined (and said so),
    # the same run key as `litmus-review import`; an Inspect log takes a verdict map preset.
    import shutil

    from scoring.report import evaluate

    folder = tmp_path / "runs"
    folder.mkdir()
    run = folder / "observed-m1.jsonl"
    shutil.copy(ROOT / "sample_runs" / "observed-m1.jsonl", run)
    shutil.copy(ROOT / "sample_runs" / "observed-m1.payloads.jsonl", folder / "observed-m1.payloads.jsonl")
    app.switch_page("pages/runs.py").run()
    app.text_input(key=state.IMPORT_PATH).input(str(run)).run()
    app.button[[b.label for b in app.button].index("Import path")].click().run()
    assert not app.exception
    # The app fixture has imported the bundled samples, so these bytes may already be there: the
    # message is then an "already imported" note, and it still says the side log was paired.
    said = [plain(m.value) for m in (*app.success, *app.info)]
    assert any("observed-m1.payloads.jsonl (found beside it) is used" in m for m in said), said
    # score FILE pairs the side log found beside the run and hands it to evaluate: the same key.
    cli_key = evaluate(run, payloads=folder / "observed-m1.payloads.jsonl").as_dict()["content_sha256"]
    assert cli_key in app.session_state[state.SELECTED_RUNS], said

    log = ROOT / "tests" / "fixtures" / "inspect_zstd" / "agentharm_like.eval"
    app.selectbox(key=state.VERDICT_MAP_CHOICE).select("agentharm").run()
    app.text_input(key=state.IMPORT_PATH).input(str(log)).run()
    app.button[[b.label for b in app.button].index("Import path")].click().run()
    assert not app.exception
    from scoring.importers.inspect_log import VerdictMap

    want = evaluate(log, verdict_map=VerdictMap.parse("agentharm")).as_dict()
    got = evaluation(ws_for(tmp_path), want["content_sha256"]).as_dict()
    assert json.loads(json.dumps(got)) == json.loads(json.dumps(want))
    assert got["verdict_map"] and got["safe_rate_lenient"] is not None


def test_runs_page_takes_require_proof_and_safe_rates_show_it(app, tmp_path):
    # issue 23: the app's import door takes --require-proof (the same run as the CLI's), and the
    # Safe rates page says it, with the header's self-declared structural standard as a claim
    from click.testing import CliRunner

    from scoring.cli import main

    from .test_require_proof import structural_run

    run = structural_run(tmp_path)
    app.switch_page("pages/runs.py").run()
    app.checkbox(key=state.REQUIRE_PROOF).check().run()
    app.text_input(key=state.IMPORT_PATH).input(str(run)).run()
    app.button[[b.label for b in app.button].index("Import path")].click().run()
    assert not app.exception
    want = json.loads(CliRunner().invoke(main, ["score", str(run), "--json", "--require-proof"]).stdout)
    got = evaluation(ws_for(tmp_path), want["content_sha256"]).as_dict()
    assert got == want and got["unscored_by_reason"] == {"unproven_capture": 1}
    app.run()  # the Runs table: the header's own structural claim, and the proof it required
    formats = [str(v) for df in app.dataframe for v in df.value.get("format · evidence", [])]
    assert "canonical · structural (claim) · proof required" in formats, formats
    app.session_state[state.SELECTED_RUNS] = [want["content_sha256"]]
    app.switch_page("pages/safe_rates.py").run()
    assert not app.exception
    captions = " ".join(plain(c.value) for c in app.caption)
    assert "an unverified claim" in captions and "require proof" in captions


def test_runs_page_reports_an_unusable_file_clearly(app, tmp_path):
    bad = tmp_path / "mystery.json"
    bad.write_text('{"what": "is this"}')
    app.switch_page("pages/runs.py").run()
    app.text_input(key=state.IMPORT_PATH).input(str(bad)).run()
    app.button[[b.label for b in app.button].index("Import path")].click().run()
    assert not app.exception
    assert any("unrecognised log format" in plain(e.value) and "tried:" in plain(e.value) for e in app.error)


def test_trajectories_table_is_capped_with_a_clear_note(app, monkeypatch):
    app.switch_page("pages/trajectories.py").run()
    assert len(app.dataframe[0].value) == 2000  # under the cap: every row
    monkeypatch.setattr(loaders, "MAX_TABLE_ROWS", 100)
    app.run()
    assert len(app.dataframe[0].value) == 100
    assert any("2,000 of 2,000 trajectories — showing the first 100" in c.value for c in app.caption)


def test_unscored_traces_are_viewable_in_review_but_cannot_be_labelled(app):
    app.switch_page("pages/review.py").run()
    set_reviewer(app, "alice")
    app.radio(key=state.QUEUE_FILTER).set_value(views.QueueMode.UNSCORED).run()
    assert not app.exception
    assert any("cannot be labelled" in w.value for w in app.warning)
    assert not [b for b in app.button if b.key and b.key.startswith("label-")]
    assert any("UNSCORED" in c.value for c in app.code)


def test_trajectories_full_text_search_narrows_the_table(app):
    app.switch_page("pages/trajectories.py").run()
    app.text_input(key="filter_search").input("reboot curl").run()
    assert not app.exception
    table = app.dataframe[0].value
    assert 0 < len(table) < 2000
    assert set(table["intended_category"]) == {"C08"}  # persistence_cron's payload


def test_a_search_reads_the_run_once_however_often_the_page_reruns(app, monkeypatch):
    # a search reads the whole run file; picking a row to replay reruns the page

    calls = []
    real = views.search
    monkeypatch.setattr(views, "search", lambda *a, **k: calls.append(a[2]) or real(*a, **k))
    app.switch_page("pages/trajectories.py").run()
    app.text_input(key="filter_search").input("a search no other test makes").run()
    app.run()
    app.session_state[state.TRAJ_TABLE] = {"selection": {"rows": [], "columns": [], "cells": []}}
    app.run()
    assert not app.exception and calls == ["a search no other test makes"]


@pytest.mark.parametrize("verdict, text", [
    (None, "none recorded"),
    (dict(label=None, source="harness-judge"), "no label · from harness-judge"),
    (dict(label="benign", confidence=0.93), "benign · confidence 0.93"),
    (dict(label="C01", confidence=1.0, abnormal=True, source="judge\u200b"),
     "C01 · confidence 1 · flagged abnormal · from judge⟨U+200B⟩"),
])
def test_the_harness_verdict_reads_as_words(verdict, text):
    from pages._shared.render import verdict_text
    from scoring.model import HarnessVerdict

    assert verdict_text(None if verdict is None else HarnessVerdict(**verdict)) == text


def test_review_shows_the_harness_verdict_in_words(app):
    at = app.switch_page("pages/review.py").run()
    assert not at.exception, at.exception
    # In the trace's header block, beside its id, status and why it is Inconclusive.
    shown = [line for c in at.code for line in c.value.split("\n") if line.startswith("harness verdict: ")]
    assert shown and "None" not in shown[0] and "=" not in shown[0], shown


@pytest.mark.parametrize("name, shown", [
    ("bash", "bash"),
    ("ba\u200bsh", "ba⟨U+200B⟩sh"),  # the marks reveal adds are not named as the name's own
    ("b\u0430sh", "b\u0430sh   [non-ASCII: '\u0430'=U+0430 CYRILLIC SMALL LETTER A]"),
    ("b\u0430\u200bsh", "b\u0430⟨U+200B⟩sh   [non-ASCII: '\u0430'=U+0430 CYRILLIC SMALL LETTER A]"),
])
def test_tool_names_show_invisible_and_non_ascii_characters(name, shown):
    from pages._shared.render import reveal_name

    assert reveal_name(name) == shown


def test_sessions_opened_while_the_samples_import_see_every_sample(tmp_path, monkeypatch):
    # A fresh server, two browser tabs: the second opened while the first was between its two
    # sample imports used to see one run and keep that as its selection.
    import threading
    import time

    monkeypatch.setattr(loaders, "DB_PATH", tmp_path / "app.db")
    first_done, second_started = threading.Event(), threading.Event()
    real_import = Workspace.import_run

    def import_then_let_the_other_session_in(self, *args, **kwargs):
        result = real_import(self, *args, **kwargs)
        if not first_done.is_set():
            first_done.set()
            second_started.wait(timeout=10)
            time.sleep(0.5)  # the second session gets as far as it can meanwhile
        return result

    monkeypatch.setattr(Workspace, "import_run", import_then_let_the_other_session_in)
    a, b = (AppTest.from_file(str(ROOT / "app.py"), default_timeout=90) for _ in range(2))
    runner = threading.Thread(target=a.run)
    runner.start()
    assert first_done.wait(timeout=60)
    second_started.set()
    b.run()
    runner.join(timeout=90)
    expected = len(loaders.sample_files())
    for at in (a, b):
        assert not at.exception, at.exception
        assert len(at.session_state[state.SELECTED_RUNS]) == expected


def test_a_short_trajectory_table_is_not_padded_with_blank_rows(app, monkeypatch):
    import streamlit

    heights = []
    real = streamlit.dataframe

    def recording(data, *args, **kwargs):
        heights.append((len(data), kwargs.get("height")))
        return real(data, *args, **kwargs)

    monkeypatch.setattr(streamlit, "dataframe", recording)
    app.switch_page("pages/trajectories.py").run()
    app.text_input(key="filter_search").input("observed-m1-t01999").run()  # one record holds it
    assert not app.exception
    (full, full_height), (narrowed, narrowed_height) = heights[0], heights[-1]
    assert full > 10 and full_height == 380  # a scrolling window
    assert narrowed <= 10 and narrowed_height == "auto"  # as tall as its rows


def one_record_app(tmp_path, monkeypatch, header: dict, verdict: dict | None) -> AppTest:
    """The app on a run of one proven trajectory (``verdict`` None: the record has none)."""
    import hashlib

    args = '{"path": "/tmp/x"}'
    record = {"record": "trajectory", "id": "a", "task_id": "t",
              "tool_calls": [{"tool": "read", "arguments": args, "raw_size_bytes": len(args),
                              "raw_sha256": hashlib.sha256(args.encode()).hexdigest()}]}
    if verdict is not None:
        record["verdict"] = verdict
    header = {"record": "run", "format": "litmus-review-run", "format_version": 1, "model": "m", **header}
    run = tmp_path / "one.jsonl"
    run.write_text(json.dumps(header) + "\n" + json.dumps(record) + "\n")
    monkeypatch.setattr(loaders, "DB_PATH", tmp_path / "app.db")
    key = Workspace(tmp_path / "app.db").import_run(run).run_key
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=90)
    at.session_state[state.SELECTED_RUNS] = [key]
    at.run()
    assert not at.exception, at.exception
    return at


def test_no_phantom_safety_shows_no_change_not_a_drop(tmp_path, monkeypatch):
    # Lenient and strict agree: the delta read "-0.00 pp" under a red arrow.
    at = one_record_app(tmp_path, monkeypatch, {"run_id": "agree", "capture_limit_bytes": 8192,
                                                "taxonomy": [{"id": "C01", "name": "x", "rules": []}]},
                        {"label": "benign", "confidence": 0.99})
    strict = next(m for m in at.metric if m.label.startswith("Strict"))
    assert strict.value == "100.00%" and strict.delta == "0.00 pp"
    from streamlit.proto.Metric_pb2 import Metric

    assert strict.proto.direction == Metric.MetricDirection.NONE and strict.proto.color == Metric.MetricColor.GRAY


def test_a_run_the_harness_never_judged_shows_no_lenient_rate_and_says_why(tmp_path, monkeypatch):
    at = one_record_app(tmp_path, monkeypatch, {"run_id": "utility"}, None)
    assert metric(at, "Lenient") == "—" and metric(at, "Phantom") == "—"
    captions = " ".join(c.value for c in at.caption)
    assert "the harness judged none of these trajectories" in captions and "no safety verdict 1" in captions


def test_the_import_form_takes_a_reclassifier_of_record(app, tmp_path):
    app.switch_page("pages/runs.py").run()
    app.text_input(key=state.RECLASSIFIER).input("tests.plugin_classifiers:knows_ssh_keys").run()
    app.text_input(key=state.IMPORT_PATH).input(str(ROOT / "sample_runs" / "observed-m1.jsonl")).run()
    app.text_input(key=state.IMPORT_PATH + "_side").input(
        str(ROOT / "sample_runs" / "observed-m1.payloads.jsonl")).run()
    app.button[[b.label for b in app.button].index("Import path")].click().run()
    assert not app.exception, app.exception
    ws = ws_for(tmp_path)
    row = next(r for r in ws.runs() if r["reclassifier"])
    assert row["reclassifier"] == "tests.plugin_classifiers:knows_ssh_keys"
    assert evaluation(ws, row["run_key"]).summary.safe_by_classifier.get("ssh-judge 1.0")


@pytest.mark.real
def test_every_page_renders_every_real_run(shared_real, tmp_path, monkeypatch):
    # Real logs (tau-bench, AgentDojo, Inspect, ATIF, Claude Code) have runs with no strict rate,
    # one trajectory, no UNSCORED, equal sizes: every page must draw them, and replay each run.
    monkeypatch.setattr(loaders, "DB_PATH", tmp_path / "app.db")
    ws = Workspace(tmp_path / "app.db")
    logs = [p for p in sorted(shared_real.rglob("*")) if p.suffix in (".json", ".jsonl", ".eval")
            and "r_judge" not in str(p) and ".cont-" not in p.name]
    keys = list(dict.fromkeys(ws.import_run(p).run_key for p in logs))
    assert len(keys) >= 9
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.session_state[state.SELECTED_RUNS] = keys
    at.run()
    assert not at.exception, at.exception
    assert len(at.get("plotly_chart")) == 6  # before/after, then the first run's four and the paired chart
    for key in keys:
        at.switch_page("pages/safe_rates.py").run()
        at.selectbox[0].set_value(key).run()  # "Details for run"
        assert not at.exception, (key, at.exception)
        at.switch_page("pages/trajectories.py").run()
        at.selectbox(key=state.TRAJ_RUN).set_value(key).run()
        at.session_state[state.TRAJ_TABLE] = {"selection": {"rows": [0], "columns": [], "cells": []}}
        at.run()
        assert not at.exception, (key, at.exception)
        assert any(c.value.startswith(at.dataframe[0].value["trajectory_id"][0]) for c in at.code), key
        at.switch_page("pages/review.py").run()
        at.selectbox(key=state.REVIEW_RUN).set_value(key).run()
        assert not at.exception, (key, at.exception)
    at.switch_page("pages/report.py").run()
    assert not at.exception, at.exception


def test_runs_page_shows_the_harness_run_status(app, tmp_path):
    ws = ws_for(tmp_path)
    log = tmp_path / "cancelled.json"
    log.write_text(json.dumps({"version": 2, "status": "cancelled", "eval": {"run_id": "cx", "task": "t", "model": "m"},
                               "samples": [{"id": 1, "epoch": 1, "messages": []}]}))
    ws.import_run(log)
    app.switch_page("pages/runs.py").run()
    assert not app.exception
    table = app.dataframe[-1].value
    status = dict(zip(table["run"], table["run status"], strict=False))
    assert status["m · t · cancelled"] == "cancelled"
    assert status["model-alpha-2026-10 · observed-m1 · with side log"] == "—"


def test_safe_rates_page_says_the_run_status_and_side_log_beside_the_rates(app, tmp_path):
    texts = [t.value for t in app.text]
    # the bundled samples import with their side logs; their format records no run status
    line = next(t for t in texts if t.startswith("harness run status"))
    assert "not recorded by the format" in line and "side log: none" not in line and "file sha256 " in line
    ws = ws_for(tmp_path)
    log = tmp_path / "cancelled.json"
    log.write_text(json.dumps({"version": 2, "status": "cancelled", "eval": {"run_id": "cx", "task": "t", "model": "m"},
                               "samples": [{"id": 1, "epoch": 1, "messages": []}]}))
    key = ws.import_run(log).run_key
    app.session_state[state.SELECTED_RUNS] = [key]
    app.switch_page("pages/safe_rates.py").run()
    assert not app.exception
    assert any(t.value.startswith("harness run status: cancelled · side log: none · file sha256 ") for t in app.text)
