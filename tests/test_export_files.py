"""Issue 35, item 6, exports that stand alone: the paired comparison in the CSV, JSON and HTML
report; a labels export of one row per trace with its final label, beside the event log as its own
file; every file naming its run, key, scorer version and export time inside it; file names unique
per run; no empty charts exported; small bars carrying their value."""

from __future__ import annotations

import dataclasses
import io
import json
import zipfile
from datetime import datetime

import pandas as pd
import pytest
from click.testing import CliRunner
from streamlit.runtime.memory_media_file_storage import MemoryMediaFileStorage

from pages._shared import charts, exports, state
from pages._shared.inert import md
from scoring.aggregate import Interval, PairedDifference, summarize
from scoring.cli import main
from scoring.export_files import (
    FINAL_LABEL_COLUMNS,
    META_COLUMNS,
    PairedComparison,
    RunMeta,
    export_file_name,
    file_slug,
    paired_csv,
    run_pairs,
)
from scoring.model import Category, ReviewLabel
from scoring.report import evaluate
from scoring.workspace import Workspace, views

from .conftest import SAMPLES
from .test_stale_runs import _cli as stale_cli  # the set-aside scenario, as the stale-run tests build it
from .test_stale_runs import _inspect_run, _render_changed

EXPORTED_AT = "2026-05-01T09:30:00+00:00"


@pytest.fixture(scope="module")
def evs():
    """The two bundled sample runs (they share their tasks), scored with their side logs."""
    return [evaluate(SAMPLES / f"{name}.jsonl", payloads=SAMPLES / f"{name}.payloads.jsonl")
            for name in ("observed-m1", "compare-m2")]


@pytest.fixture(scope="module")
def comparison(evs):
    a, b = evs
    return PairedComparison(exports.run_meta(a), exports.run_meta(b), views.paired_difference(a.scored, b.scored))


def key(ev) -> str:
    return ev.run.content_sha256


# --- (a) the paired comparison is in the CSV, the JSON and the HTML report -------------------------


def test_the_paired_comparison_is_in_its_csv_with_both_runs_named(evs, comparison):
    d = comparison.difference
    assert d.tasks > 1 and d.mean_diff is not None  # the samples share their tasks: a difference to export
    frame = pd.read_csv(io.StringIO(paired_csv([comparison], EXPORTED_AT)))
    assert len(frame) == 1
    row = frame.iloc[0]
    assert (row["run_key_a"], row["run_key_b"]) == (key(evs[0]), key(evs[1]))
    assert row["run_a"] == exports.run_identity(evs[0]) and row["run_b"] == exports.run_identity(evs[1])
    assert str(row["scorer_version_a"]) == evs[0].scorer_version and row["exported_at"] == EXPORTED_AT
    assert row["shared_tasks"] == d.tasks
    assert row["strict_difference_b_minus_a_pp"] == pytest.approx(100 * d.mean_diff)
    assert (row["ci95_low_pp"], row["ci95_high_pp"]) == (pytest.approx(100 * d.low), pytest.approx(100 * d.high))


def test_a_pair_with_nothing_to_compare_says_why_in_its_row():
    meta = RunMeta("r", "k" * 64, "4.0")
    rows = pd.read_csv(io.StringIO(paired_csv([PairedComparison(meta, meta, PairedDifference(0, None, None, None)),
                                                PairedComparison(meta, meta, PairedDifference(1, None, None, None))],
                                               EXPORTED_AT)))
    assert rows["strict_difference_b_minus_a_pp"].isna().all()
    assert list(rows["note"]) == ["no task has a strict rate in both runs: nothing to pair",
                                  "only one task has a strict rate in both runs: an interval needs two"]


def test_every_pair_of_the_runs_is_compared_in_their_order():
    assert run_pairs(["a", "b", "c"]) == [("a", "b"), ("a", "c"), ("b", "c")]
    assert run_pairs(["a"]) == []


def test_the_paired_comparison_is_in_the_aggregates_json(evs, comparison):
    data = json.loads(exports.aggregates_json(evs, exports.make_stamp(evs, None), [comparison]))
    (pair,) = data["paired_comparisons"]
    assert (pair["run_key_a"], pair["run_key_b"]) == (key(evs[0]), key(evs[1]))
    assert pair["strict_difference_b_minus_a_pp"] == pytest.approx(100 * comparison.difference.mean_diff)
    assert pair["exported_at"] == data["stamp"]["exported_at"]


def test_the_paired_comparison_is_in_the_html_report(evs, comparison):
    d = comparison.difference
    html = exports.html_report(evs, [], exports.make_stamp(evs, None), paired=[comparison])
    at = html.index("<h2>Paired comparison</h2>")
    table = html[at:html.index("</table>", at)]
    assert f"{100 * d.mean_diff:+.2f} pp ({100 * d.low:+.2f} to {100 * d.high:+.2f})" in table
    # each run named by its readable name ("model · task · how it was scored") and short key
    assert f"<td>{d.tasks:,}</td>" in table
    assert all(f"<td class='run'>{exports.run_identity(ev)}</td>" in table for ev in evs), table
    # one run: no comparison section at all (it needs two)
    assert "Paired comparison" not in exports.html_report(evs[:1], [], exports.make_stamp(evs[:1], None))


def test_the_paired_chart_draws_one_row_per_pair_and_names_those_it_cannot_draw():
    ok = PairedDifference(5, 0.1, -0.05, 0.25)
    fig = charts.paired_comparison_chart([("a", "b", ok), ("a", "c", PairedDifference(1, None, None, None)),
                                          ("b", "c", PairedDifference(4, -0.2, -0.3, -0.1))]).to_dict()
    (points,) = fig["data"]
    assert points["x"] == pytest.approx([10.0, -20.0]) and list(points["text"]) == ["+10.00 pp", "-20.00 pp"]
    assert [y.split(" (")[0] for y in points["y"]] == ["b − a", "c − b"]
    assert "c − a (1 shared)" in fig["layout"]["annotations"][-1]["text"]
    assert charts.nothing_drawn(charts.paired_comparison_chart([("a", "b", PairedDifference(0, None, None, None)),
                                                                ("a", "c", PairedDifference(0, None, None, None))]))


# --- (b) labels: one row per trace with its final label; the event log its own file ---------------


@pytest.fixture(scope="module")
def labelled(tmp_path_factory):
    """A sample run with every case of a final label: unanimous after an undo, disputed then
    adjudicated, disputed, withdrawn (its only label undone), two reviewers agreeing (read, not
    changed, by the tests)."""
    ws = Workspace(tmp_path_factory.mktemp("labelled") / "w.db")
    run_key = ws.import_run(SAMPLES / "observed-m1.jsonl", payloads=SAMPLES / "observed-m1.payloads.jsonl").run_key
    t = [r["trajectory_id"] for r in ws.trajectory_rows(run_key, "status = 'inconclusive'")[:5]]
    ws.add_label(run_key, t[0], "alice", ReviewLabel.DEGENERATE)
    ws.undo(run_key, t[0], "alice")
    ws.add_label(run_key, t[0], "alice", ReviewLabel.GENUINE_DECLINE)  # undo, then labelled again
    ws.add_label(run_key, t[1], "alice", ReviewLabel.DEGENERATE)
    ws.add_label(run_key, t[1], "bob", ReviewLabel.HARM_FOUND, note="call 2 posts the key")
    ws.adjudicators_file.parent.mkdir(exist_ok=True)
    ws.adjudicators_file.write_text("carol\n")
    ws.adjudicate(run_key, t[1], "carol", ReviewLabel.HARM_FOUND, note="bob is right")
    ws.add_label(run_key, t[2], "alice", ReviewLabel.EARLY_STOP)
    ws.add_label(run_key, t[2], "bob", ReviewLabel.DEGENERATE)
    ws.add_label(run_key, t[3], "alice", ReviewLabel.EARLY_STOP)
    ws.undo(run_key, t[3], "alice")
    ws.add_label(run_key, t[4], "alice", ReviewLabel.EARLY_STOP)
    ws.add_label(run_key, t[4], "bob", ReviewLabel.EARLY_STOP)
    return ws, run_key, t


def test_the_labels_export_is_one_row_per_trace_with_its_final_label(labelled):
    ws, run_key, t = labelled
    meta = RunMeta("observed-m1 · model m1 · key …", run_key, "4.0")
    frame = pd.read_csv(io.StringIO(ws.export_final_labels(run_key, run=meta, exported_at=EXPORTED_AT)),
                        keep_default_na=False)
    assert list(frame.columns) == list(FINAL_LABEL_COLUMNS)
    assert list(frame["trajectory_id"]) == t  # one row per trace, in the run's order (not one per event)
    final = ws.final_labels(run_key)
    assert {tid: lab for tid, lab in zip(frame["trajectory_id"], frame["final_label"], strict=True) if lab} == {
        tid: lab.value for tid, lab in final.items()}  # exactly as the workspace derives it
    by = frame.set_index("trajectory_id")
    assert (by.loc[t[0], "final_label"], by.loc[t[0], "decided_by"]) == ("genuine_decline", "unanimous")
    assert by.loc[t[0], "labels"] == "alice: genuine_decline"  # the undone degenerate is no label of hers
    assert (by.loc[t[1], "final_label"], by.loc[t[1], "decided_by"], by.loc[t[1], "adjudicator"]) == (
        "harm_found", "adjudication", "carol")
    assert by.loc[t[1], "labels"] == "alice: degenerate; bob: harm_found"
    assert by.loc[t[1], "notes"] == "bob: call 2 posts the key; carol: bob is right"
    assert (by.loc[t[2], "final_label"], by.loc[t[2], "decided_by"]) == ("", "disputed")
    assert (by.loc[t[3], "final_label"], by.loc[t[3], "decided_by"], by.loc[t[3], "reviewers"]) == ("", "withdrawn", 0)
    assert (by.loc[t[4], "final_label"], by.loc[t[4], "reviewers"]) == ("early_stop", 2)
    assert set(by["status"]) == {"inconclusive"}
    (verdict,) = [e for e in ws.history(run_key) if e["action"] == "adjudicate"]
    assert by.loc[t[1], "decided_at"] == verdict["created_at"]  # decided when the adjudicator decided it
    assert by.loc[t[4], "decided_at"] == max(e["created_at"] for e in ws.history(run_key, t[4]))  # the last vote
    assert {by.loc[t[2], "decided_at"], by.loc[t[3], "decided_at"]} == {""}


def test_the_event_log_is_its_own_file_with_every_undo_and_adjudication_and_imports_back(labelled, tmp_path):
    ws, run_key, _t = labelled
    log = ws.export_labels(run_key, "csv", exported_at=EXPORTED_AT)
    events = pd.read_csv(io.StringIO(log), keep_default_na=False)
    assert list(events["action"]) == ["label", "undo", "label", "label", "label", "adjudicate", "label", "label",
                                      "label", "undo", "label", "label"]
    assert list(events.columns[-3:]) == ["run", "scorer_version", "exported_at"] and events.columns[0] == "run_key"
    assert "final_label" not in events.columns
    # still the file `labels import` reads: the run's columns do not stand in its way
    (tmp_path / "events.csv").write_text(log)
    other = Workspace(tmp_path / "other.db")
    other.import_run(SAMPLES / "observed-m1.jsonl", payloads=SAMPLES / "observed-m1.payloads.jsonl")
    other.adjudicators_file.parent.mkdir(exist_ok=True)
    other.adjudicators_file.write_text("carol\n")  # an import takes only the adjudications of those named
    assert other.import_labels(tmp_path / "events.csv") == 12
    assert other.final_labels(run_key) == ws.final_labels(run_key)
    # the final-labels file is not an event log, and importing it says so
    (tmp_path / "final.csv").write_text(ws.export_final_labels(run_key))
    with pytest.raises(Exception, match="final-labels export"):
        other.import_labels(tmp_path / "final.csv")


def test_a_trace_whose_labels_a_rescore_set_aside_is_a_row_saying_so(tmp_path, monkeypatch):
    db, log, key, tid = _inspect_run(tmp_path)
    _render_changed(monkeypatch, tid)
    assert stale_cli("rescore", key[:12], "--from", str(log), "--db", str(db)).exit_code == 0
    ws = Workspace(db)
    (row,) = ws.final_label_rows(key)
    assert (row["trajectory_id"], row["final_label"], row["decided_by"]) == (tid, "", "set_aside")
    assert "changed" in row["labels_set_aside"] and row["labels"] == ""  # its old label does not count


def test_the_cli_exports_the_final_labels_too(labelled):
    ws, run_key, t = labelled
    done = CliRunner().invoke(main, ["labels", "export", run_key[:12], "--db", str(ws.path), "--format", "csv",
                                     "--final"])
    assert done.exit_code == 0, done.output
    frame = pd.read_csv(io.StringIO(done.output))
    assert list(frame["trajectory_id"]) == t and set(frame["run_key"]) == {run_key}
    refused = CliRunner().invoke(main, ["labels", "export", run_key[:12], "--db", str(ws.path), "--final"])
    assert refused.exit_code != 0 and "--format csv" in refused.output


# --- (c) every exported file names its run, key, scorer version and export time inside it --------


def test_every_csv_names_its_run_in_every_row(evs, labelled):
    ws, run_key, _t = labelled
    stamp = exports.make_stamp(evs, None)
    aggregates = pd.read_csv(io.StringIO(exports.stamped_csv(exports.aggregates_frame(evs), stamp)))
    assert set(META_COLUMNS) <= set(aggregates.columns)
    assert list(aggregates["run_key"]) == [key(ev) for ev in evs]
    assert list(aggregates["run"]) == [exports.run_identity(ev) for ev in evs]
    assert list(aggregates["scorer_version"].astype(str)) == [ev.scorer_version for ev in evs]
    assert set(aggregates["exported_at"]) == {stamp.exported_at}
    version = ws.run(run_key)["scorer_version"]
    for text in (ws.export_final_labels(run_key), ws.export_labels(run_key, "csv")):
        frame = pd.read_csv(io.StringIO(text))
        assert set(META_COLUMNS) <= set(frame.columns)
        assert set(frame["run_key"]) == {run_key} and set(frame["scorer_version"].astype(str)) == {version}
        assert set(frame["run"]) == {ws.run_names()[run_key]}  # the CLI's name of the run: the workspace's
        (when,) = set(frame["exported_at"])
        assert datetime.fromisoformat(when).utcoffset().total_seconds() == 0  # UTC, ISO 8601
    for line in ws.export_labels(run_key, "jsonl").splitlines():
        event = json.loads(line)
        assert (event["run_key"], event["scorer_version"], event["run"]) == (run_key, version,
                                                                              ws.run_names()[run_key])


def test_the_json_and_the_html_report_name_every_run_its_key_scorer_and_export_time(evs):
    stamp = exports.make_stamp(evs, None)
    data = json.loads(exports.aggregates_json(evs, stamp))
    assert data["stamp"]["run_keys"] == [key(ev) for ev in evs]
    assert data["stamp"]["runs"] == [exports.run_identity(ev) for ev in evs]
    assert data["stamp"]["scorer_version"] == evs[0].scorer_version
    assert datetime.fromisoformat(data["stamp"]["exported_at"]).utcoffset().total_seconds() == 0
    html = exports.html_report(evs, [], stamp)
    head = html[:html.index("<h2>Safe rates</h2>")]
    assert all(key(ev) in head and exports.run_identity(ev) in head.replace("&#x27;", "'") for ev in evs)
    assert f"scorer version {evs[0].scorer_version}" in head and f"exported {stamp.exported_at}" in head


def test_two_runs_with_one_id_keep_each_hash_in_the_stamp(evs):
    twin = dataclasses.replace(evs[1], run=dataclasses.replace(evs[1].run, header=dataclasses.replace(
        evs[1].run.header, run_id=evs[0].run.header.run_id)))
    stamp = exports.make_stamp([evs[0], twin], None)
    assert sorted(stamp.run_hashes.values()) == sorted([key(evs[0]), key(twin)])  # one was lost under its id


# --- (d) every download's name is unique per run and kind ------------------------------------------


def test_file_names_are_unique_per_run_and_kind():
    a, b, c, d = ("aa" * 32, "bb" * 32, "cc" * 32, "dd" * 32)
    kinds = [("report", "html"), ("aggregates", "csv"), ("aggregates", "json"), ("aggregates-by-category", "csv"),
             ("paired", "csv"), ("labels-final", "csv"), ("labels-events", "csv"), ("charts-png", "zip")]
    one = {export_file_name(k, ext, [run], "same name") for run in (a, b) for k, ext in kinds}
    assert len(one) == 2 * len(kinds)  # two runs of one name, every kind: no name twice
    assert (export_file_name("labels-final", "csv", [a], "gpt-4o · agentharm")
            == "labels-final--gpt-4o-agentharm--aaaaaaaaaaaa.csv")
    selections = [[a, b], [a, c], [a, b, c], [a, b, c, d], [b, a, c, d], [a, b, d, c]]
    names = [export_file_name("report", "html", s) for s in selections]
    assert len(set(names)) == len(names), names
    assert names[2] == "report--3-runs--aaaaaaaa-bbbbbbbb-cccccccc.html"
    assert names[3].startswith("report--4-runs--") and len(names[3]) < 40


@pytest.mark.parametrize("name", [
    "../../etc/passwd · task", "C:\\Windows\\system32 · x", "model\nline two\r\x00\x1b[31m", "a/b\u202e\u200bgnp.exe",
    "ＧＰＴ－４ｏ · ünïcödé", "·" * 40, "", "x" * 5000, ". · ..", "CON",
])
def test_a_hostile_run_name_makes_a_safe_bounded_file_name(name):
    out = export_file_name("labels-final", "csv", ["ab" * 32], name)
    _stem, sep, ext = out.rpartition(".")
    assert (sep, ext) == (".", "csv") and out.startswith("labels-final--") and out.endswith("--abababababab.csv")
    assert all(ch.isascii() and (ch.isalnum() or ch in "-.") for ch in out), out  # no separator, control, space
    assert ".." not in out and not out.startswith(".") and len(out) <= 100
    slug = out.removeprefix("labels-final--").removesuffix("--abababababab.csv")
    assert slug and len(slug) <= 60 and not slug.startswith("-") and not slug.endswith("-")
    assert file_slug("ＧＰＴ－４ｏ · ünïcödé") == "gpt-4o-unicode"  # read as its ASCII look-alike, not dropped


def test_the_two_sample_runs_files_have_names_of_their_own(labelled, tmp_path):
    ws = Workspace(tmp_path / "two.db")
    keys = [ws.import_run(SAMPLES / f"{n}.jsonl", payloads=SAMPLES / f"{n}.payloads.jsonl").run_key
            for n in ("observed-m1", "compare-m2")]
    names = ws.run_names()
    files = [export_file_name("labels-final", "csv", [k], names[k]) for k in keys]
    assert len(set(files)) == 2 and all(k[:12] in f for k, f in zip(keys, files, strict=True))
    assert files[0].startswith("labels-final--model-alpha-2026-10-observed-m1-with-side-log--"), files


# --- (e) no empty charts exported -----------------------------------------------------------------


def test_a_chart_with_no_data_is_left_out_of_the_html_report_with_why(evs):
    empty = charts.argument_size_histogram([], 8192, {})
    assert charts.nothing_drawn(empty) == "No tool calls in this run."
    drawn = charts.before_after_bars([("r", evs[0].summary)])
    assert charts.nothing_drawn(drawn) is None
    html = exports.html_report(evs[:1], [("rates", drawn), ("r: argument sizes", empty)],
                               exports.make_stamp(evs[:1], None), images=[b"\x89PNG-rates"])
    assert html.count("<div class='live'>") == 1 and html.count("img class='static'") == 1
    assert "<h2>r: argument sizes</h2>\n<p class='omitted'>Not drawn: No tool calls in this run.</p>" in html
    with pytest.raises(ValueError, match="1 images for 2 charts"):  # an image per chart drawn, no more
        exports.html_report(evs[:1], [("a", drawn), ("b", charts.before_after_bars([("r", evs[0].summary)]))],
                            exports.make_stamp(evs[:1], None), images=[b"x"])


def test_every_builders_empty_case_is_known_as_empty():
    nothing = summarize([])
    empties = [charts.unscored_by_reason(nothing), charts.phantom_by_category({}, []),
               charts.phantom_by_category({"C01": nothing}, [Category(id="C01", name="x")]),
               charts.paired_difference_chart(PairedDifference(0, None, None, None), "a", "b"),
               charts.argument_size_histogram([], None, {})]
    assert all(charts.nothing_drawn(fig) for fig in empties)


def test_a_chart_with_no_data_is_left_out_of_the_zip_with_why(evs, monkeypatch):
    rendered = []

    def render(figures, fmt, **_options):  # the renderer is kaleido's (test_exports renders for real)
        rendered.extend(figures)
        return [b"%PDF-1.7 figure"] * len(figures)

    monkeypatch.setattr(exports, "render_images", render)
    figs = [("rates", charts.before_after_bars([("r", evs[0].summary)])),
            ("sizes", charts.argument_size_histogram([], 8192, {}))]
    with zipfile.ZipFile(io.BytesIO(exports.figure_images(figs, "pdf", exports.make_stamp(evs[:1], None)))) as z:
        assert sorted(z.namelist()) == ["01-rates.pdf", "STAMP.txt"]
        assert "not drawn: sizes: No tool calls in this run." in z.read("STAMP.txt").decode()
    assert len(rendered) == 1  # the empty chart was never rendered


# --- (f) small bars carry their value ---------------------------------------------------------------


def test_small_rate_bars_carry_their_value_above_their_whisker(evs):
    s = evs[0].summary

    def rate(r, v):
        return dataclasses.replace(r, value=v, wilson=Interval(max(0.0, v - 0.01), v + 0.02, "wilson", None),
                                   clustered=None)

    small = dataclasses.replace(s, lenient=rate(s.lenient, 0.9), strict=rate(s.strict, 0.0),
                                reviewed=rate(s.reviewed, 0.015))
    fig = charts.before_after_bars([("run", small)]).to_dict()
    bars = {t["name"]: t for t in fig["data"] if t["type"] == "bar"}
    values = {t["name"].removesuffix(": value"): t for t in fig["data"] if t["type"] == "scatter"}
    assert fig["layout"]["scattermode"] == "group"
    for name, bar in bars.items():
        above = values[name]
        assert above["offsetgroup"] == bar["offsetgroup"]  # drawn over its own bar of the group
        shown = [b or a for b, a in zip(bar["text"], above["text"], strict=True)]
        assert all(shown), (name, shown)  # every bar's value is written somewhere
    assert list(values["Strict (after)"]["text"]) == ["0.0%"] and list(bars["Strict (after)"]["text"]) == [""]
    assert list(values["Reviewed"]["text"]) == ["1.5%"]
    assert values["Reviewed"]["y"][0] == pytest.approx(1.5 + 2.0)  # above the whisker's top, not under it
    assert list(bars["Lenient (before)"]["text"]) == ["90.0%"] and list(values["Lenient (before)"]["y"]) == [None]
    assert "color" not in values["Reviewed"]["textfont"]  # the theme's text colour, light and dark


# --- the Report page's downloads (AppTest) ------------------------------------------------------------


def test_the_report_pages_downloads_have_names_of_their_own_and_name_their_runs(app, tmp_path, monkeypatch):
    files: dict[str, tuple[str | None, bytes]] = {}  # media file id -> (download name, bytes)
    keep = MemoryMediaFileStorage.load_and_get_id

    def recorded(self, data, mimetype, kind, filename=None):
        file_id = keep(self, data, mimetype, kind, filename)
        files[file_id] = (filename, data if isinstance(data, bytes) else b"")
        return file_id

    monkeypatch.setattr(MemoryMediaFileStorage, "load_and_get_id", recorded)
    ws = Workspace(tmp_path / "app.db")
    keys = app.session_state[state.SELECTED_RUNS]
    assert len(keys) == 2
    first = ws.trajectory_rows(keys[0], "status = 'inconclusive'")[0]["trajectory_id"]
    ws.add_label(keys[0], first, "alice", ReviewLabel.EARLY_STOP)  # the other run has no label yet
    app.session_state[state.BLIND] = False
    app.switch_page("pages/report.py").run()
    assert not app.exception, app.exception
    buttons = {b.proto.label: b.proto for b in app.get("download_button")}
    names = ws.run_names()
    labelled, other = (names[k] for k in keys)
    assert {"Download HTML report", "Aggregates (CSV)", "Aggregates (JSON)", "Paired comparison (CSV)",
            f"Labels of {md(labelled)} (CSV)", f"Label events of {md(labelled)} (CSV)"} <= set(buttons)
    assert buttons[f"Labels of {md(other)} (CSV)"].disabled  # no labels: no file naming no run
    offered = {name: data.decode() for b in buttons.values() if b.url and not b.disabled
               for name, data in [files[b.url.rsplit("/", 1)[1].split(".")[0]]]}
    # aggregates ×3 (CSV, JSON, by category), paired, the labelled run's two label files (the HTML: when clicked)
    assert len(offered) == 6
    pair = "-".join(k[:8] for k in keys)
    own = f"{file_slug(labelled)}--{keys[0][:12]}"
    assert set(offered) == {f"aggregates--2-runs--{pair}.csv", f"aggregates--2-runs--{pair}.json",
                            f"aggregates-by-category--2-runs--{pair}.csv", f"paired--2-runs--{pair}.csv",
                            f"labels-final--{own}.csv", f"labels-events--{own}.csv"}
    version = ws.run(keys[0])["scorer_version"]
    for name, text in offered.items():
        assert keys[0] in text and version in text and "exported" in text, name
        if "aggregates" in name or "paired" in name:
            assert keys[1] in text, name
        else:
            assert keys[1] not in text, name
    final = pd.read_csv(io.StringIO(offered[f"labels-final--{own}.csv"]))
    assert list(final["trajectory_id"]) == [first] and list(final["final_label"]) == ["early_stop"]
    # Blind review: no reviewer's labels leave the workspace
    app.session_state[state.BLIND] = True
    app.run()
    buttons = {b.proto.label: b.proto for b in app.get("download_button")}
    assert buttons[f"Labels of {md(labelled)} (CSV)"].disabled
    assert buttons[f"Label events of {md(labelled)} (CSV)"].disabled
