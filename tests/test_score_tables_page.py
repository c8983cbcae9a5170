"""AppTest: the Score tables page opens a table written by the Dask engine as a run."""

from __future__ import annotations

import json
import os
import re
import shutil
import statistics
import time
from pathlib import Path

import pytest
import streamlit as st

from pages._shared import loaders, state
from scoring.dask_engine import planning, table_layout, table_reader, table_workspace, table_writer, tasks
from scoring.workspace import Workspace
from scoring.workspace.settings import settings_path

from .conftest import SAMPLES
from .s3_tables import CREDENTIALS, fleet_table, moto_server, profile_toml
from .test_engine import run_inline


@pytest.fixture
def table(tmp_path):
    """A score table of a copy of the observed sample (as ``score --out`` leaves it)."""
    run = tmp_path / "observed-m1.jsonl"
    shutil.copyfile(SAMPLES / "observed-m1.jsonl", run)
    results = run_inline([run], tmp_path, 1 << 16)
    out = tmp_path / "out"
    table_writer.commit_results(str(out), str(out), {}, results)
    return out, results[0], run


@pytest.fixture
def page(app):
    """The app (conftest's ``app``) on the Score tables page."""
    app.switch_page("pages/score_tables.py").run()
    assert not app.exception, app.exception
    return app


def metric(at, label: str) -> str:
    return next(m.value for m in at.metric if m.label.startswith(label))


def test_a_score_table_opens_with_the_engines_rates_and_charts_without_reading_every_row(page, table,
                                                                                       monkeypatch):
    """Rates and charts from the engine's aggregates; the trajectory list is the table's first
    rows: nothing reads a run's whole table (the readers that would are made to fail)."""
    out, res, _run = table

    def whole(*_a, **_k):
        raise AssertionError("the page read a whole run of the table")

    for name in ("table_run", "read_table", "table_summary"):
        monkeypatch.setattr(table_reader, name, whole)
    page.text_input(key="score_table_location").input(str(out)).run()
    assert not page.exception, page.exception
    s = res.summary
    assert metric(page, "Strict") == f"{100 * s['safe_rate_strict']:.2f}%"
    assert metric(page, "Lenient") == f"{100 * s['safe_rate_lenient']:.2f}%"
    assert metric(page, "UNSCORED") == f"{s['unscored']:,}"
    # a bound while trajectories are UNSCORED (issue 33): "0–4.21" (pp) on the card
    bounds = s["phantom_safety_bounds_pp"]
    assert s["phantom_safety_pp"] is None and bounds["low"] == 0
    assert metric(page, "Phantom") == f"0–{bounds['high']:.2f}"
    assert metric(page, "Reviewed") == f"{100 * s['safe_rate_reviewed']:.2f}%"
    charts = [json.loads(c.proto.spec) for c in page.get("plotly_chart")]
    assert len(charts) == 3  # the waterfall, UNSCORED by reason, phantom safety by category
    bars = charts[1]["data"][0]
    assert dict(zip(bars["y"], bars["x"], strict=True)) == s["unscored_by_reason"]  # the engine's aggregate
    assert charts[0]["data"][0]["y"][0] == pytest.approx(100 * s["safe_rate_lenient"])  # the waterfall starts there
    assert len(page.dataframe[-1].value) == s["trajectories"]  # fewer than the page's row cap
    page.selectbox(key="score_table_show").select("Inconclusive (to review)").run()
    assert set(page.dataframe[-1].value["status"]) == {"inconclusive"}
    assert len(page.dataframe[-1].value) == s["inconclusive"]


def test_the_first_rows_are_read_once_and_never_copied_through_pickle(page, table, monkeypatch):
    """The list's rows (up to 10,000) are a shared cached object: pickled into a cache_data
    entry they cost a copy when read and another on every rerun (benches/RESULTS.md)."""
    import pandas as pd
    from streamlit.runtime.caching import cache_data_api

    out, _res, _run = table
    pickled = []
    dumps = cache_data_api.pickle.dumps
    monkeypatch.setattr(cache_data_api.pickle, "dumps",
                        lambda entry, *a, **k: pickled.append(type(getattr(entry, "value", entry)))
                        or dumps(entry, *a, **k))
    reads = []
    first_rows = table_reader.first_rows
    monkeypatch.setattr(table_reader, "first_rows",
                        lambda *a, **k: reads.append(k.get("status")) or first_rows(*a, **k))
    page.text_input(key="score_table_location").input(str(out)).run()
    page.run()
    assert not page.exception, page.exception
    assert len(page.dataframe[-1].value) > 0
    assert pd.DataFrame not in pickled
    assert reads.count(None) == 2  # the list's, once; the report's one row of source


def test_a_trajectory_replays_from_the_runs_source(page, table):
    out, _res, run = table
    page.text_input(key="score_table_location").input(str(out)).run()
    page.text_input(key="score_table_replay").input("observed-m1-t00079").run()
    assert not page.exception, page.exception
    shown = " ".join(c.value for c in page.code) + " ".join(t.value for t in page.text)
    assert "observed-m1-t00079" in shown and "task " in shown
    # The source rewritten since: reported, never misread.
    run.write_bytes(b"\n" * 3 + run.read_bytes())
    page.text_input(key="score_table_replay").input("observed-m1-t00080").run()
    assert not page.exception
    assert any("cannot be read back" in e.value or "source changed" in e.value for e in page.error)


def test_a_directory_that_is_not_a_score_table_is_refused(page, tmp_path):
    page.text_input(key="score_table_location").input(str(tmp_path)).run()
    assert not page.exception
    assert any("not a score table" in e.value for e in page.error)
    assert "no summary.json" in " ".join(c.value for c in page.code)


def test_a_label_given_on_a_table_is_the_workspaces_and_moves_the_reviewed_rate(page, table):
    """Review from the table: an Inconclusive trajectory replayed from its source takes a label;
    it is stored in the workspace under the table's run key and the reviewed rate shown for
    the table is the one ``summarize`` gives with it."""
    from pages._shared import loaders, state
    from scoring.aggregate import ScoreColumns, summarize
    from scoring.model import ReviewLabel
    from scoring.rows import SCORE_FIELDS

    out, res, _run = table
    page.session_state[state.REVIEWER] = "ana"
    page.text_input(key="score_table_location").input(str(out)).run()
    tid = next(r["trajectory_id"] for r in table_reader.read_table(str(out)).to_pylist()
               if r["status"] == "inconclusive")
    page.text_input(key="score_table_replay").input(tid).run()
    assert not page.exception, page.exception
    assert "Labels: hidden until you label this trace (blind review)" in [t.value for t in page.text]
    page.button(key="score_table_label_genuine_decline").click().run()
    assert not page.exception, page.exception
    ws = Workspace(loaders.db())
    assert ws.final_labels(res.run_key) == {tid: ReviewLabel.GENUINE_DECLINE}
    rows = table_reader.read_table(str(out)).to_pylist()
    cols = ScoreColumns.build(*([r[c] for r in rows] for c in SCORE_FIELDS))
    want = summarize(cols, ws.final_labels(res.run_key))
    assert want.reviewed.value != res.summary["safe_rate_reviewed"]
    assert metric(page, "Reviewed") == f"{100 * want.reviewed.value:.2f}%"
    assert "ana: genuine_decline" in " ".join(t.value for t in page.text)
    assert any("29 pending review" in c.value for c in page.caption)
    # Undone: the label is withdrawn in the workspace and the rate is the engine's again.
    page.button(key="score_table_undo").click().run()
    assert not page.exception, page.exception
    assert ws.final_labels(res.run_key) == {}
    assert metric(page, "Reviewed") == f"{100 * res.summary['safe_rate_reviewed']:.2f}%"
    assert f"withdrawn: {tid} (genuine_decline)" in [t.value for t in page.text]


def test_without_the_dask_extra_the_page_says_how_to_install_it(app, monkeypatch):
    import sys

    from scoring import dask_engine

    monkeypatch.setitem(sys.modules, "scoring.dask_engine.table_reader", None)  # as if pyarrow/fsspec were absent
    monkeypatch.delattr(dask_engine, "table_reader", raising=False)
    app.switch_page("pages/score_tables.py").run()
    assert not app.exception
    assert any("pip install 'litmus-review[dask]'" in i.value for i in app.info)


def test_the_tables_report_and_exports_are_made_from_its_summary(page, table):
    """The run's report data from the table: the aggregates JSON holds the engine's summary
    object (what the Report page exports for an imported run), stamped with its run hash; the
    HTML report holds its rates."""
    out, res, _run = table
    page.text_input(key="score_table_location").input(str(out)).run()
    assert not page.exception, page.exception
    buttons = {b.proto.label: b for b in page.get("download_button")}
    assert {"Download HTML report", "Aggregates (JSON)", "Labels (CSV)"} <= set(buttons)
    from pages._shared import exports

    (t,) = table_reader.open_table(str(out))
    ev = table_reader.evaluation(t)
    assert ev.as_dict() == res.summary
    data = json.loads(exports.aggregates_json([ev], exports.make_stamp([ev], None)))
    assert data["runs"] == [res.summary] and data["stamp"]["run_hashes"] == {t.run_id: res.summary["content_sha256"]}
    html = exports.html_report([ev], [], exports.make_stamp([ev], None))
    assert f"{100 * res.summary['safe_rate_strict']:.2f}" in html


def test_without_its_source_the_table_still_shows_its_rates(page, table):
    """The rates and charts are the table's own: a source moved away costs the report and the
    replay (said so), not the page."""
    out, res, run = table
    run.unlink()
    page.text_input(key="score_table_location").input(str(out)).run()
    assert not page.exception, page.exception
    assert metric(page, "Strict") == f"{100 * res.summary['safe_rate_strict']:.2f}%"
    assert len(page.get("plotly_chart")) == 3
    assert any("source cannot be read" in w.value for w in page.warning)
    assert "no such file" in " ".join(c.value for c in page.code)


def test_ids_the_data_wrote_are_never_markdown_on_the_table_page(page, tmp_path):
    """A hostile trajectory id (markdown, HTML, a link) in a table: the label message quotes it
    as inert markdown and as text, never as markup."""
    from pages._shared import state
    from pages._shared.inert import md

    hostile = "[click](https://evil.example) **x** <b>y</b>"
    run = tmp_path / "hostile.jsonl"
    run.write_bytes((SAMPLES / "observed-m1.jsonl").read_bytes().replace(
        b'"observed-m1-t00025"', json.dumps(hostile).encode()))
    results = run_inline([run], tmp_path, 1 << 16)
    out = tmp_path / "out"
    table_writer.commit_results(str(out), str(out), {}, results)
    page.session_state[state.REVIEWER] = "ana"
    page.text_input(key="score_table_location").input(str(out)).run()
    page.text_input(key="score_table_replay").input(hostile).run()
    assert not page.exception, page.exception
    page.button(key="score_table_label_genuine_decline").click().run()
    assert not page.exception, page.exception
    message = f"{hostile}: labelled genuine_decline by ana"
    assert [s.value for s in page.success] == [md(message)] and md(message) != message
    assert message in [t.value for t in page.text]


# --- a table in object storage, opened by the workspace's storage profile ---------------------

FLEET_RUNS = 10_000


@pytest.fixture(scope="module")
def s3_fleet(tmp_path_factory):
    """A moto S3 server holding a score table of ``FLEET_RUNS`` runs (``s3_tables.fleet_table``)."""
    tmp = tmp_path_factory.mktemp("s3fleet")
    with moto_server(tmp / "moto.log") as s3:
        location, ids, first = fleet_table(s3, "evals", tmp, FLEET_RUNS)
        yield s3, location, ids, first, tmp / "moto.log"


def _gets(log: Path, folder: str) -> int:
    """Files the moto server logged a GET of, in the table's ``folder`` (listings not counted)."""
    return len(re.findall(rf"GET /[^ ?]*/{re.escape(folder)}[/ ]", log.read_text(errors="replace")))


def test_a_table_in_s3_opens_by_the_workspaces_profile_never_the_address(page, s3_fleet, monkeypatch):
    """The page's address cannot give storage options (a link could point the server anywhere,
    with anyone's keys): with options in the query string and no profile, the table is not
    opened; the profile in the workspace's settings opens it, its credentials read from the
    environment variables it names (the error names a variable that is not set, never a value)."""
    s3, location, ids, first, _log = s3_fleet
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")  # no wait for a cloud's metadata service here
    for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE", *CREDENTIALS):
        monkeypatch.delenv(k, raising=False)
    at = page
    for k, v in {**s3, "profile": "lab", "storage_options": json.dumps(s3)}.items():
        at.query_params[k] = v
    at.text_input(key="score_table_location").input(location).run()
    assert not at.exception, at.exception
    assert "This is not a score table that can be opened:" in [e.value for e in at.error]
    assert not at.metric
    settings_path(loaders.DB_PATH).parent.mkdir(exist_ok=True)
    settings_path(loaders.DB_PATH).write_text(profile_toml(s3["endpoint_url"], "s3://evals/"))
    at.run()
    text = " ".join(c.value for c in at.code)
    assert "LITMUS_TEST_S3_KEY" in text and "testing" not in text and not at.metric
    for k, v in CREDENTIALS.items():
        monkeypatch.setenv(k, v)
    at.run()
    assert not at.exception, at.exception
    assert "storage profile: lab (the workspace's settings)" in [c.value for c in at.caption]
    assert metric(at, "Strict") == f"{100 * first['safe_rate_strict']:.2f}%"
    assert len(at.selectbox(key="score_table_run").options) == len(ids)


def test_a_table_of_10000_runs_in_s3_opens_and_reruns_reading_only_the_shown_runs_aggregates(page, s3_fleet,
                                                                                          monkeypatch):
    """At 10,000 runs: the table opens (summaries and keys, one read each), and a run's
    aggregates are read only when that run is shown. The script's time (AppTest runs it in this
    process: server time) is printed for benches/RESULTS.md, not asserted."""
    s3, location, ids, first, log = s3_fleet
    for k, v in CREDENTIALS.items():
        monkeypatch.setenv(k, v)
    settings_path(loaders.DB_PATH).parent.mkdir(exist_ok=True)
    settings_path(loaders.DB_PATH).write_text(profile_toml(s3["endpoint_url"], "s3://evals/"))
    at = page
    st.cache_resource.clear()  # opened by the test before: this one times the first opening
    table_reader._run_file.cache_clear()
    table_reader.opened_table.cache_clear()
    before = _gets(log, table_layout.RUN_AGGREGATES_DIR)
    summaries, whole = _gets(log, table_layout.SUMMARIES_DIR), _gets(log, table_layout.SUMMARY_FILE)
    at.text_input(key="score_table_location").input(location)
    t0 = time.perf_counter()
    at.run()
    opened = time.perf_counter() - t0
    assert not at.exception, at.exception
    assert len(at.selectbox(key="score_table_run").options) == FLEET_RUNS
    assert metric(at, "Trajectories") == f"{first['trajectories']:,}"
    assert _gets(log, table_layout.RUN_AGGREGATES_DIR) - before == 1  # the shown run's, not 10,000
    assert _gets(log, table_layout.SUMMARIES_DIR) - summaries == 1
    assert _gets(log, table_layout.SUMMARY_FILE) - whole == 0  # present (a HEAD), not read
    reruns = []
    for _ in range(5):
        t0 = time.perf_counter()
        at.run()
        reruns.append(time.perf_counter() - t0)
    at.selectbox(key="score_table_run").set_value(FLEET_RUNS - 1)
    t0 = time.perf_counter()
    at.run()
    other = time.perf_counter() - t0
    assert not at.exception, at.exception
    assert at.selectbox(key="score_table_run").format_func(FLEET_RUNS - 1).startswith(ids[-1])
    assert _gets(log, table_layout.RUN_AGGREGATES_DIR) - before == 2  # and now the other run's
    print(f"\nscore table of {FLEET_RUNS:,} runs on moto S3, AppTest script time: open {opened:.2f} s, "
          f"rerun {statistics.median(reruns):.2f} s (median of 5; {min(reruns):.2f}–{max(reruns):.2f}), "
          f"another run shown {other:.2f} s (load {os.getloadavg()[0]:.1f})")


def test_a_table_of_a_run_scored_with_require_proof_says_so_and_names_the_claim(page, tmp_path):
    # issue 23: the header's own structural declaration is a claim, and --require-proof is named,
    # on the table's page as on the Safe rates page (read from the engine's summary)
    from .test_require_proof import structural_run

    run = structural_run(tmp_path)
    plan = planning.plan_run(str(run), require_proof=True)
    blocks = [tasks.score_block(plan, s, e) for s, e in planning.block_bounds(plan, 1 << 16)]
    res = tasks.finish_run(plan, tasks.file_sha256(plan, *blocks), None, *map(tasks.digest, blocks), aggregates=True)
    out = tmp_path / "out"
    assert sum(table_writer.write_part(b, res, i, str(out), {}, plan.url) for i, b in enumerate(blocks)) == res.rows
    table_writer.commit_results(str(out), str(out), {}, [res])
    page.text_input(key="score_table_location").input(str(out)).run()
    assert not page.exception, page.exception
    said = " ".join(t.value for t in page.text)
    assert "an unverified claim" in said and "proof required (--require-proof)" in said
    assert metric(page, "UNSCORED") == "1"
    # its replay assesses the calls as they were scored: with --require-proof
    from scoring.workspace import views

    (table_run,) = table_reader.open_table(str(out))
    row = table_reader.find_row(table_run, "claimed-benign")
    replay = views.replay_of(*table_reader.read_trajectory(row, run=table_run), row)
    assert not any(c.rules_differ for c in replay.calls)
    assert any(g.reason.value == "unproven_capture" for c in replay.calls for g in c.gaps)


def test_a_tables_run_added_to_the_workspace_opens_on_safe_rates_like_an_imported_run(page, table, tmp_path):
    """The button scores the run's source in the workspace under the table's key and selects it;
    Safe rates then draws it as any imported run, with the table's strict rate."""

    out, res, _run = table
    key = res.run_key
    page.text_input(key="score_table_location").input(str(out)).run()
    page.button(key="score_table_import").click().run()
    assert not page.exception, page.exception
    assert any(f"run {key[:12]} is now in the workspace and selected" in s.value for s in page.success)
    assert Workspace(tmp_path / "app.db").run(key)["trajectories"] == res.summary["trajectories"]
    page.switch_page("pages/safe_rates.py").run()
    assert not page.exception, page.exception
    assert key in page.session_state[state.SELECTED_RUNS]
    strict = f"{100 * res.summary['safe_rate_strict']:.2f}%"
    assert any(strict in str(m.value) for m in page.metric), [m.value for m in page.metric]


def test_a_provisional_strict_rate_says_so_beside_it_and_labels_lift_it(page, tmp_path):
    """A run whose Inconclusive trajectories pending review are over 5 % of the judged: the
    strict rate's figure is the rate alone (cut at 1,280 px when a word was added to it) and the
    caption under it says PROVISIONAL with the count pending; labels that bring the pending
    count under the share take it away, as on the Safe rates page."""
    from scoring.importers import canonical

    from .test_one_meaning import _pending_run

    run = _pending_run(pending=3)  # 3 pending of 23 judged
    path = tmp_path / "pending.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in [canonical.dump_header(run.header),
                                                      *map(canonical.dump_trajectory, run.trajectories)]) + "\n")
    (res,) = run_inline([path], tmp_path, 1 << 16)
    out = tmp_path / "out"
    table_writer.commit_results(str(out), str(out), {}, [res])
    assert res.summary["strict_rate_provisional"] is True
    page.text_input(key="score_table_location").input(str(out)).run()
    assert not page.exception, page.exception
    assert metric(page, "Strict") == f"{100 * res.summary['safe_rate_strict']:.2f}%"
    assert "PROVISIONAL: 3 pending review (over 5% of the judged)" in [c.value for c in page.caption]
    (table_run,) = table_reader.open_table(str(out))
    for tid in ("p0", "p1"):
        table_workspace.add_label(Workspace(loaders.db()), table_run, tid, "ana", "genuine_decline")
    page.session_state[state.BLIND] = False  # ana's labels: the team's figures (blind review counts one's own)
    page.run()
    assert not page.exception, page.exception
    assert not [c.value for c in page.caption if c.value.startswith("PROVISIONAL")]

