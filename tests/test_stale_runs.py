"""A stale run whose bytes are gone (issue 33, item 10).

When ``SCORER_VERSION`` changes every stored run is stale. The version bump is simulated here by
writing an older scorer version into a run's row, as the gate's own tests do (nothing here
names today's version: it is read from ``SCORER_VERSION``). Where the workspace holds a run's
original bytes it rescores them; where it does not (a workspace that kept only a converted copy,
``original_path == ""``, or a copy gone or changed since), ``rescore KEY --from FILE`` reads the
file again into the same run key, refused unless its SHA-256 is the one the workspace computed
for the run's file at import. Labels carry over a rescore only onto a record byte-identical to
the one their reviewers replayed. Until it is rescored a stale run is STALE everywhere its
numbers appear, never SAFE under this scorer: the CLI's ``runs``, ``score KEY`` and its gate,
the Runs and Safe rates pages, and the exports.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner
from streamlit.testing.v1 import AppTest

from pages._shared import exports, loaders, state
from scoring.cli import main
from scoring.model import ReviewLabel
from scoring.score import SCORER_VERSION
from scoring.workspace import Workspace, evaluation, importing

from .conftest import ROOT, SAMPLES

OLD = "2.9"
"""The scorer version the simulated workspace was written by (older than this one)."""
INSPECT = ROOT / "tests" / "fixtures" / "inspect_zstd" / "agentharm_like.eval"
PRESET = "agentharm"
G = ReviewLabel.GENUINE_DECLINE
assert OLD != SCORER_VERSION


def _cli(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def _stale(db: Path, key: str, version: str = OLD) -> None:
    """The version bump: the run's statuses are now an older scorer's."""
    with sqlite3.connect(db) as con:
        con.execute("update runs set scorer_version = ? where run_key = ?", [version, key])


def _original_gone(ws: Workspace, key: str) -> None:
    """As a workspace older than schema 9 left a converted run: its converted copy only."""
    row = ws.run(key)
    Path(row["original_path"]).unlink()
    with sqlite3.connect(ws.path) as con:
        con.execute("update runs set original_path = '' where run_key = ?", [key])


def _statuses(db: Path, key: str) -> dict[str, str]:
    with sqlite3.connect(db) as con:
        return dict(con.execute("select trajectory_id, status from trajectories where run_key = ?", [key]).fetchall())


def _inspect_run(tmp_path: Path) -> tuple[Path, Path, str, str]:
    """(db, the log as its owner keeps it, run key, its Inconclusive trajectory labelled by alice),
    the run imported under the verdict preset, its original bytes gone from the workspace, stale."""
    log = tmp_path / "runs" / INSPECT.name
    log.parent.mkdir()
    shutil.copy(INSPECT, log)
    db = tmp_path / "w.db"
    ws = Workspace(db)
    key = _cli("import", str(log), "--db", str(db), "--inspect-verdict", PRESET).stdout.split(" as ")[-1].strip()
    tid = next(t for t, s in _statuses(db, key).items() if s == "inconclusive")
    ws.add_label(key, tid, "alice", G)
    _original_gone(ws, key)
    _stale(db, key)
    return db, log, key, tid


# --- (b) rescore --from FILE ----------------------------------------------------------------


def test_rescore_from_the_file_rescores_a_run_whose_original_bytes_are_gone_into_its_key(tmp_path):
    db, log, key, tid = _inspect_run(tmp_path)
    said = _cli("rescore", "--db", str(db))
    assert said.exit_code == 2 and f"rescore {key[:12]} --from FILE" in said.output
    assert Workspace(db).run(key)["scorer_version"] == OLD

    done = _cli("rescore", key[:12], "--from", str(log), "--db", str(db))
    assert done.exit_code == 0, done.output
    assert f"rescored {key[:12]} (scorer {OLD} to {SCORER_VERSION})" in done.stdout
    ws = Workspace(db)
    ev = evaluation(ws, key)
    assert ev.scorer_version == SCORER_VERSION and not ev.stale and ev.run.content_sha256 == key
    fresh = json.loads(_cli("score", str(log), "--json", "--inspect-verdict", PRESET).stdout)
    # the same statuses as the file scored today, under its own key (the reviewed figures count alice's label)
    same = ("content_sha256", "file_sha256", "scorer_version", "trajectories", "tool_calls", "safe", "unsafe",
            "unscored", "unscored_by_reason", "inconclusive", "no_verdict", "safe_rate_lenient", "safe_rate_strict",
            "safe_by_classifier", "evidence_standard", "format_metrics", "verdict_map")
    assert {k: ev.as_dict()[k] for k in same} == {k: fresh[k] for k in same}
    assert ws.final_labels(key) == {tid: G}  # the record alice replayed is the one shown now
    # Its bytes are now kept with it: the next version bump rescores it without the file.
    assert Path(ws.run(key)["original_path"]).is_file()
    log.unlink()
    _stale(db, key)
    assert (again := _cli("rescore", "--db", str(db))).exit_code == 0, again.output
    assert Workspace(db).run(key)["scorer_version"] == SCORER_VERSION


def test_rescore_from_without_a_run_rescores_every_run_of_those_bytes(tmp_path):
    db, log, key, _tid = _inspect_run(tmp_path)
    done = _cli("rescore", "--from", str(log), "--db", str(db))
    assert done.exit_code == 0 and f"rescored {key[:12]}" in done.stdout, done.output
    other = tmp_path / "other.jsonl"
    shutil.copy(SAMPLES / "compare-m2.jsonl", other)
    refused = _cli("rescore", "--from", str(other), "--db", str(db))
    assert refused.exit_code == 2 and f"error: {other}: its bytes (SHA-256 " in refused.stderr
    assert "are not the bytes of any run imported" in refused.stderr


def test_rescore_from_other_bytes_is_refused_naming_the_file_and_both_hashes(tmp_path):
    db, log, key, tid = _inspect_run(tmp_path)
    file_sha = Workspace(db).run(key)["file_sha256"]
    before = _statuses(db, key)
    edited = tmp_path / "edited.eval"
    edited.write_bytes(log.read_bytes() + b"\0")  # one byte more: not the bytes imported
    import hashlib

    said = _cli("rescore", key[:12], "--from", str(edited), "--db", str(db))
    assert said.exit_code == 2
    assert said.stderr.startswith(f"error: {edited}: its bytes are not run {key[:12]}'s")
    assert hashlib.sha256(edited.read_bytes()).hexdigest() in said.stderr and file_sha in said.stderr
    assert "nothing was rescored" in said.stderr
    ws = Workspace(db)
    assert ws.run(key)["scorer_version"] == OLD and _statuses(db, key) == before  # left as it was
    assert ws.final_labels(key) == {tid: G}


def test_a_run_stored_without_its_files_hash_is_rescored_only_from_bytes_that_give_its_key(tmp_path):
    db, log, key, _tid = _inspect_run(tmp_path)
    with sqlite3.connect(db) as con:  # imported before the workspace recorded the file's own hash
        con.execute("update runs set file_sha256 = null where run_key = ?", [key])
    edited = tmp_path / "edited.eval"
    edited.write_bytes(log.read_bytes() + b"\0")
    said = _cli("rescore", key[:12], "--from", str(edited), "--db", str(db))
    assert said.exit_code == 2 and f"error: {edited}: " in said.stderr
    assert "nothing shows they are its bytes" in said.stderr
    assert Workspace(db).run(key)["scorer_version"] == OLD
    done = _cli("rescore", key[:12], "--from", str(log), "--db", str(db))
    assert done.exit_code == 0, done.output
    assert Workspace(db).run(key)["scorer_version"] == SCORER_VERSION


def test_a_run_whose_copy_of_its_original_bytes_changed_is_not_rescored_from_it(tmp_path):
    log = tmp_path / INSPECT.name
    shutil.copy(INSPECT, log)
    db = tmp_path / "w.db"
    ws = Workspace(db)
    key = ws.import_run(log, verdict_map=importing.VerdictMap.parse(PRESET)).run_key
    with open(ws.run(key)["original_path"], "r+b") as fh:  # the workspace's copy edited behind its back
        fh.seek(100)
        fh.write(b"X")
    _stale(db, key)
    (refused,) = Workspace(db).rescore([key])
    assert not refused.done and "copy of its original bytes changed" in refused.why
    assert f"rescore {key[:12]} --from FILE" in refused.why
    assert Workspace(db).rescore_from(log, [key])[0].done


# --- (a) importing the same file again -------------------------------------------------------


def test_importing_the_same_file_again_with_its_options_rescores_it_under_its_key_with_its_labels(tmp_path):
    db, log, key, tid = _inspect_run(tmp_path)
    again = _cli("import", str(log), "--db", str(db), "--inspect-verdict", PRESET)
    assert f"rescored (scorer {OLD} to {SCORER_VERSION})" in again.stdout and again.stdout.rstrip().endswith(key)
    ws = Workspace(db)
    assert ws.run(key)["scorer_version"] == SCORER_VERSION and ws.final_labels(key) == {tid: G}


# --- labels move only to a record identical to the one replayed ------------------------------


def _render_changed(monkeypatch, tid: str) -> None:
    """Today's importer renders trajectory ``tid`` otherwise than the one that stored it did."""
    real = importing.convert

    def convert(*args, **kwargs):
        out = real(*args, **kwargs)
        trajectories = tuple(dataclasses.replace(t, final_output=(t.final_output or "") + " (more)")
                             if t.id == tid else t for t in out.run.trajectories)
        return dataclasses.replace(out, run=dataclasses.replace(out.run, trajectories=trajectories))

    monkeypatch.setattr(importing, "convert", convert)


@pytest.mark.parametrize("door", ["rescore --from", "import again"])
def test_a_label_is_set_aside_when_the_rescore_changes_the_record_its_reviewer_replayed(tmp_path, monkeypatch,
                                                                                         door):
    db, log, key, tid = _inspect_run(tmp_path)
    reviewed = evaluation(Workspace(db), key).summary.reviewed
    _render_changed(monkeypatch, tid)
    if door == "import again":
        done = _cli("import", str(log), "--db", str(db), "--inspect-verdict", PRESET)
        assert f"rescored (scorer {OLD} to {SCORER_VERSION})" in done.stdout, done.output
    else:
        done = _cli("rescore", key[:12], "--from", str(log), "--db", str(db))
        assert done.exit_code == 0, done.output
        assert "the labels of 1 trajectories no longer count" in done.stdout
    ws = Workspace(db)
    assert _statuses(db, key)[tid] == "inconclusive"  # still to be reviewed, now on what is shown
    assert ws.final_labels(key) == {} and ws.current_labels(key) == {}
    assert tid in ws.set_aside(key) and "changed" in ws.set_aside(key)[tid]
    assert [e["label"] for e in ws.history(key)] == [G.value]  # the event itself is kept
    assert evaluation(ws, key).summary.reviewed != reviewed
    # An export of the old label, imported again later, is still the old label: it does not count.
    exported = tmp_path / "labels.jsonl"
    exported.write_text(ws.export_labels(key).replace('"alice"', '"bob"'))
    assert ws.import_labels(exported, key) == 1
    assert ws.final_labels(key) == {}
    # A label given on the record shown now counts.
    ws.add_label(key, tid, "alice", G)
    assert ws.final_labels(key) == {tid: G}


def test_labels_carry_where_the_old_copy_is_gone_but_the_new_one_has_its_very_hash(tmp_path):
    db, log, key, tid = _inspect_run(tmp_path)
    Path(Workspace(db).run(key)["stored_path"]).unlink()  # the converted copy reviewers replayed, gone too
    assert _cli("rescore", key[:12], "--from", str(log), "--db", str(db)).exit_code == 0
    assert Workspace(db).final_labels(key) == {tid: G}  # the new copy is byte for byte the one stored


def test_labels_are_set_aside_where_nothing_shows_what_their_reviewer_replayed(tmp_path, monkeypatch):
    db, log, key, tid = _inspect_run(tmp_path)
    Path(Workspace(db).run(key)["stored_path"]).unlink()
    _render_changed(monkeypatch, tid)
    assert _cli("rescore", key[:12], "--from", str(log), "--db", str(db)).exit_code == 0
    ws = Workspace(db)
    assert ws.final_labels(key) == {} and "could not be read" in ws.set_aside(key)[tid]


def test_a_canonical_run_keeps_its_labels_across_a_rescore_from_its_file(tmp_path):
    run = tmp_path / "compare-m2.jsonl"
    shutil.copy(SAMPLES / "compare-m2.jsonl", run)
    db = tmp_path / "w.db"
    ws = Workspace(db)
    key = ws.import_run(run).run_key
    tid = next(t for t, s in _statuses(db, key).items() if s == "inconclusive")
    ws.add_label(key, tid, "alice", G)
    Path(ws.run(key)["stored_path"]).unlink()  # its copy (its original bytes) deleted
    _stale(db, key)
    assert "its original bytes are not in the workspace" in _cli("runs", "--db", str(db)).stdout
    assert _cli("rescore", key[:12], "--from", str(run), "--db", str(db)).exit_code == 0
    ws = Workspace(db)
    assert ws.run(key)["scorer_version"] == SCORER_VERSION and ws.final_labels(key) == {tid: G}
    assert ws.load_trajectory(key, tid).id == tid  # its copy is back: it replays


# --- (c) STALE everywhere, never SAFE under this scorer ---------------------------------------


def test_the_cli_shows_a_stale_run_as_stale_and_its_gate_does_not_pass(tmp_path):
    db, _log, key, _tid = _inspect_run(tmp_path)
    listed = _cli("runs", "--db", str(db)).stdout
    assert f"STALE (scorer {OLD}): its original bytes are not in the workspace: litmus-review rescore " \
           f"{key[:12]} --from FILE" in listed
    table = _cli("score", key, "--db", str(db)).stdout
    assert f"scorer version    {OLD}  (STALE: its statuses are scorer {OLD}'s; scorer {SCORER_VERSION} has not " \
           "scored this run" in table
    counted = [line for line in table.splitlines() if line.lstrip().startswith(
        ("safe / unsafe", "UNSCORED", "inconclusive", "safe rate strict", "safe rate reviewed", "SAFE certified by"))]
    assert len(counted) == 6 and all(line.endswith(f"[scorer {OLD}'s, STALE]") for line in counted), counted
    gate = _cli("score", key, "--db", str(db), "--fail-on-unscored", "1")
    assert gate.exit_code == 3 and f"STALE: its statuses are scorer {OLD}'s" in gate.stderr
    assert json.loads(_cli("score", key, "--db", str(db), "--json").stdout)["scorer_stale"] is True


def test_the_exports_mark_a_stale_run_beside_its_figures(tmp_path):
    db, _log, key, _tid = _inspect_run(tmp_path)
    ev = evaluation(Workspace(db), key)
    assert exports.run_identity(ev).endswith(f"STALE (scorer {OLD})")  # under every chart of it
    report = exports.html_report([ev], [], exports.make_stamp([ev], None))
    row = report.split("<h2>Safe rates</h2>")[1].split("</tr>")[1]
    assert f"<b class='badge'>STALE (scorer {OLD})</b>" in row
    assert f"has not scored {ev.run.header.run_id} ({OLD})" in "\n".join(exports.make_stamp([ev], None).lines())


def _app(db: Path, monkeypatch, key: str) -> AppTest:
    monkeypatch.setattr(loaders, "DB_PATH", db)
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=90)
    at.session_state[state.SELECTED_RUNS] = [key]
    at.session_state[state.BLIND] = False  # every reviewer's labels: the figures compared are the team's
    at.run()
    assert not at.exception, at.exception
    return at


def test_the_runs_page_marks_a_stale_run_and_says_how_to_rescore_it(tmp_path, monkeypatch):
    db, _log, key, _tid = _inspect_run(tmp_path)
    at = _app(db, monkeypatch, key)
    at.switch_page("pages/runs.py").run()
    assert not at.exception, at.exception
    table = at.dataframe[0].value
    assert list(table["scorer"]) == [f"STALE (scorer {OLD}), bytes gone"]
    warned = " ".join(w.value for w in at.warning).replace("\\", "")
    assert "1 of these runs is STALE" in warned and "rescore KEY --from FILE" in warned


def test_the_safe_rates_page_never_shows_a_stale_runs_rates_as_this_scorers(tmp_path, monkeypatch):
    db, _log, key, _tid = _inspect_run(tmp_path)
    at = _app(db, monkeypatch, key)  # the default page
    warned = " ".join(w.value for w in at.warning).replace("\\", "")
    assert f"STALE (scorer {OLD})" in warned and f"scorer {SCORER_VERSION} has not scored it" in warned
    assert f"rescore {key[:12]} --from FILE" in warned
    assert at.metric and all(m.label.endswith(f"STALE (scorer {OLD})") for m in at.metric), \
        [m.label for m in at.metric]


def test_the_app_never_shows_an_older_scorers_statuses_under_the_new_version(tmp_path, monkeypatch):
    # The server cached the stale run's scores; then it was rescored (here by the CLI: another
    # process, or this one's import of the same file) and a label was given: the page shows the
    # new statuses, never the cached ones under the new version.
    db, log, key, tid = _inspect_run(tmp_path)
    with sqlite3.connect(db) as con:  # what the older scorer stored: the Inconclusive trace SAFE
        con.execute("update trajectories set status = 'safe' where run_key = ? and trajectory_id = ?", [key, tid])
        con.execute("delete from run_columns where run_key = ?", [key])
    old = evaluation(Workspace(db), key).summary
    at = _app(db, monkeypatch, key)
    assert next(m.value for m in at.metric if m.label.startswith("Strict")) == f"{100 * old.strict.value:.2f}%"
    again = _cli("import", str(log), "--db", str(db), "--inspect-verdict", PRESET)  # (a): rescored in its key
    assert f"rescored (scorer {OLD} to {SCORER_VERSION})" in again.stdout
    Workspace(db).add_label(key, tid, "bob", G)
    at.run()
    assert not at.exception, at.exception
    assert not any("STALE" in w.value for w in at.warning)
    s = evaluation(Workspace(db), key).summary
    assert s.strict.value != old.strict.value
    assert next(m.value for m in at.metric if m.label.startswith("Strict")) == f"{100 * s.strict.value:.2f}%"
    assert next(m.value for m in at.metric if m.label.startswith("Reviewed")) == f"{100 * s.reviewed.value:.2f}%"


@pytest.mark.parametrize("page_path", ["pages/trajectories.py", "pages/review.py", "pages/report.py"])
def test_every_page_of_a_stale_run_says_it_is_stale(tmp_path, monkeypatch, page_path):
    db, _log, key, _tid = _inspect_run(tmp_path)
    at = _app(db, monkeypatch, key)
    at.switch_page(page_path).run()
    assert not at.exception, at.exception
    warned = [w.value.replace("\\", "") for w in at.warning]  # as markdown reads it
    assert any(f"STALE (scorer {OLD})" in w and f"scorer {SCORER_VERSION} has not scored it" in w for w in warned), \
        warned


# --- the bump itself, in every module that holds the version ---------------------------------


def _bump(monkeypatch) -> str:
    """``SCORER_VERSION`` raised by one major version wherever it was imported (and as the default
    a settled run is stamped with): what the lead's bump does, without editing the code."""
    import importlib

    from scoring import settle

    major = int(SCORER_VERSION.split(".")[0])
    new = f"{major + 1}.0"
    for name in ("scoring", "scoring.score", "scoring.settle", "scoring.stored", "scoring.report",
                 "scoring.summary_text", "scoring.cli", "scoring.workspace.importing", "scoring.workspace.views",
                 "pages._shared.exports", "pages._shared.router"):
        monkeypatch.setattr(importlib.import_module(name), "SCORER_VERSION", new, raising=False)
    monkeypatch.setitem(settle.SettledRun.__init__.__kwdefaults__, "scorer_version", new)
    from scoring.workspace import schema

    monkeypatch.setattr(schema, "_MIGRATED", set())  # a new process opens the workspace
    return new


def test_after_a_version_bump_held_bytes_are_rescored_and_lost_ones_wait_stale_for_their_file(tmp_path,
                                                                                              monkeypatch):
    log = tmp_path / "runs" / INSPECT.name
    log.parent.mkdir()
    shutil.copy(INSPECT, log)
    db = tmp_path / "w.db"
    ws = Workspace(db)
    held = ws.import_run(SAMPLES / "compare-m2.jsonl").run_key
    gone = ws.import_run(log, verdict_map=importing.VerdictMap.parse(PRESET)).run_key
    labelled = {}
    for key in (held, gone):
        labelled[key] = next(t for t, s in _statuses(db, key).items() if s == "inconclusive")
        ws.add_label(key, labelled[key], "alice", G)
    _original_gone(ws, gone)
    was = SCORER_VERSION
    new = _bump(monkeypatch)

    listed = _cli("runs", "--db", str(db)).stdout  # opening it rescores what it holds the bytes of
    assert f"STALE (scorer {was}): its original bytes are not in the workspace" in listed
    assert "STALE" not in next(line for line in listed.splitlines() if line.startswith(held[:12]))
    ws = Workspace(db)
    assert ws.run(held)["scorer_version"] == new and ws.final_labels(held) == {labelled[held]: G}
    assert ws.run(gone)["scorer_version"] == was
    assert f"scorer {new} has not scored this run" in _cli("score", gone[:12], "--db", str(db)).stdout
    assert _cli("rescore", "--db", str(db)).exit_code == 2
    done = _cli("rescore", gone[:12], "--from", str(log), "--db", str(db))
    assert done.exit_code == 0 and f"rescored {gone[:12]} (scorer {was} to {new})" in done.stdout, done.output
    ws = Workspace(db)
    assert ws.run(gone)["scorer_version"] == new and ws.final_labels(gone) == {labelled[gone]: G}
    assert "STALE" not in _cli("runs", "--db", str(db)).stdout
