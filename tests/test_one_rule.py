"""Issue 34, items 4 and 7: one rule for labels at every door. ``labels import`` refuses what the
app refuses (an adjudication by no role holder, or of no disagreement; a trajectory that takes
no label; a name that is no name), both doors go through one checker, an event is stored once
however many imports of its file race (a UNIQUE identity, schema 14, whose migration folds the
copies old races left), and a lone surrogate in a labels file is a located error."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from scoring.cli import main
from scoring.errors import InputError, StoreError
from scoring.model import ReviewLabel
from scoring.workspace import Workspace, evaluation, schema
from scoring.workspace import labels as labels_module

from . import test_labels_import
from .conftest import SAMPLES

ROOT = Path(__file__).resolve().parents[1]
G, D = ReviewLabel.GENUINE_DECLINE, ReviewLabel.DEGENERATE


ws = test_labels_import.ws  # the fixture: a workspace with observed-m1 imported, its Inconclusive ids


def event(ws, n: int, **fields) -> dict:
    return {"run_key": ws.key, "trajectory_id": ws.inconclusive[0], "reviewer": "alice", "action": "label",
            "label": "genuine_decline", "note": "", "created_at": f"2026-12-01T10:00:{n:02d}+00:00", "event_id": n,
            "supersedes": "", "batch_id": "", **fields}


def write_jsonl(path: Path, events: list[dict]) -> Path:
    path.write_text("".join(json.dumps(e) + "\n" for e in events))
    return path


def cli(*args: str):
    return CliRunner().invoke(main, list(args))


def grant(ws, *names: str) -> None:
    ws.adjudicators_file.parent.mkdir(exist_ok=True)
    ws.adjudicators_file.write_text("".join(f"{n}\n" for n in names))


# --- roles, at the import door and the app door ---------------------------------------------


def test_an_adjudication_in_a_labels_file_by_no_role_holder_is_refused_and_moves_no_rate(ws, tmp_path):
    """The issue's case: one adjudicate event by anyone, no one holding the role, became the final
    label (reviewed rate none → 100 %). Refused whole, the line named; with the role but no
    disagreement, refused too; a real disagreement then settled by the role holder is taken."""
    tid = ws.inconclusive[0]
    before = evaluation(ws, ws.key).summary.reviewed
    lone = write_jsonl(tmp_path / "lone.jsonl", [event(ws, 1, reviewer="mallory", action="adjudicate")])
    res = cli("labels", "import", str(lone), "--db", str(ws.path))
    assert res.exit_code == 2, res.output
    assert f"{lone}:1" in res.output and "adjudicator role" in res.output and "Traceback" not in res.output
    assert ws.history(ws.key) == [] and evaluation(ws, ws.key).summary.reviewed == before

    grant(ws, "mallory")
    res = cli("labels", "import", str(lone), "--db", str(ws.path))
    assert res.exit_code == 2 and f"{lone}:1" in res.output and "not disputed" in res.output, res.output
    assert ws.history(ws.key) == []

    disputed = write_jsonl(tmp_path / "disputed.jsonl", [
        event(ws, 1), event(ws, 2, reviewer="bob", label="degenerate"),
        event(ws, 3, reviewer="  mallory ", action="adjudicate", label="degenerate")])
    res = cli("labels", "import", str(disputed), "--db", str(ws.path))
    assert res.exit_code == 0, res.output
    assert ws.final_labels(ws.key) == {tid: D}
    assert ws.history(ws.key)[-1]["reviewer"] == "mallory"  # the name read as the app reads it


def test_a_file_s_adjudication_is_checked_against_the_labels_before_it_in_write_order(ws, tmp_path):
    """Whether a trace is disputed when the adjudication is written: the workspace's labels and
    the file's lines before it (an undo in the file withdraws a vote as it does in the app)."""
    grant(ws, "carol")
    ws.add_label(ws.key, ws.inconclusive[0], "bob", D)  # in the workspace: bob says degenerate
    settled = write_jsonl(tmp_path / "a.jsonl", [
        event(ws, 1),  # alice: genuine decline, so alice and bob disagree
        event(ws, 2, action="undo", label="", supersedes=1),  # alice withdraws it: no disagreement left
        event(ws, 3, reviewer="carol", action="adjudicate", label="degenerate")])
    res = cli("labels", "import", str(settled), "--db", str(ws.path))
    assert res.exit_code == 2 and f"{settled}:3" in res.output and "not disputed" in res.output, res.output
    assert len(ws.history(ws.key)) == 1
    kept = write_jsonl(tmp_path / "b.jsonl", [event(ws, 1), event(ws, 3, reviewer="carol", action="adjudicate",
                                                                    label="degenerate")])
    assert cli("labels", "import", str(kept), "--db", str(ws.path)).exit_code == 0
    assert ws.final_labels(ws.key) == {ws.inconclusive[0]: D}


def test_the_app_door_refuses_an_adjudication_by_no_role_holder(ws):
    """``add_label(adjudicate=True)`` (what the app's adjudicate writes through) took anyone's."""
    tid = ws.inconclusive[0]
    ws.add_label(ws.key, tid, "alice", G)
    ws.add_label(ws.key, tid, "bob", D)
    with pytest.raises(StoreError, match="adjudicator role"):
        ws.add_label(ws.key, tid, "mallory", G, adjudicate=True)
    assert [e["reviewer"] for e in ws.history(ws.key)] == ["alice", "bob"] and ws.final_labels(ws.key) == {}
    grant(ws, "mallory")
    ws.add_label(ws.key, tid, " mallory ", G, adjudicate=True)
    assert ws.final_labels(ws.key) == {tid: G}


def test_both_doors_ask_one_checker(ws, tmp_path, monkeypatch):
    """The rule is written once, below both doors: a checker that refuses everything refuses the
    app's label, bulk label and adjudication and the file's event alike."""
    monkeypatch.setattr(labels_module, "event_refusal", lambda *a, **k: labels_module.Refusal("the one rule", "rule"))
    tid = ws.inconclusive[0]
    for act in (lambda: ws.add_label(ws.key, tid, "alice", G), lambda: ws.add_labels(ws.key, [tid], "alice", G),
                lambda: ws.adjudicate(ws.key, tid, "alice", G)):
        with pytest.raises(StoreError, match="the one rule"):
            act()
    path = write_jsonl(tmp_path / "one.jsonl", [event(ws, 1)])
    with pytest.raises(InputError, match="the one rule") as refused:
        ws.import_labels(path)
    assert refused.value.line == 1 and ws.history(ws.key) == []


def test_the_app_and_a_labels_file_take_and_refuse_the_same_events(ws, tmp_path):
    """Exactly the rules the app applies: every status of the run, the role and the dispute, the
    reviewer's name (empty, too long, not storable text). Two workspaces alike, one event at a
    time at each door; the adjudication that is taken comes last, so both stay alike."""
    app, file = ws, Workspace(tmp_path / "file.db")
    file.import_run(SAMPLES / "observed-m1.jsonl")
    first, second = ws.inconclusive[:2]
    for w in (app, file):
        grant(w, "carol")
        w.add_label(ws.key, first, "alice", G)
        w.add_label(ws.key, first, "bob", D)  # a disagreement on the first Inconclusive trace
    one_of_each = {r["status"]: r["trajectory_id"] for r in ws.trajectory_rows(ws.key)}
    cases = [(tid, "dave", "label") for tid in one_of_each.values()]
    cases += [(first, "mallory", "adjudicate"), (second, "carol", "adjudicate"), (second, "x" * 257, "label"),
              (second, "  ", "label"), (second, "al\ud800ice", "label"), (first, "carol", "adjudicate")]
    verdicts = {}
    for n, (tid, reviewer, action) in enumerate(cases):
        try:
            app.add_label(ws.key, tid, reviewer, G, adjudicate=action == "adjudicate")
            by_app = True
        except (InputError, StoreError):
            by_app = False
        path = write_jsonl(tmp_path / f"one{n}.jsonl", [event(ws, n, trajectory_id=tid, reviewer=reviewer,
                                                              action=action)])
        by_file = cli("labels", "import", str(path), "--db", str(file.path)).exit_code == 0
        verdicts[(tid, reviewer[:8], action)] = (by_app, by_file)
    assert all(a == f for a, f in verdicts.values()), verdicts
    assert {case for case, (a, _f) in verdicts.items() if a} == {(one_of_each["inconclusive"], "dave", "label"),
                                                                  (first, "carol", "adjudicate")}
    assert app.final_labels(ws.key) == file.final_labels(ws.key)


# --- stored once, however many imports race --------------------------------------------------


def race_file(ws, path: Path, n: int) -> Path:
    """``n`` events by 50 reviewers over the run's Inconclusive traces; every tenth line an undo of
    the line before it (the file's own ids: an undo's target must be found however the race went)."""
    events = []
    for i in range(n):
        tid = ws.inconclusive[i % len(ws.inconclusive)]
        if i % 10 == 9:
            prev = events[-1]
            events.append({**prev, "action": "undo", "label": "", "event_id": i + 1, "supersedes": prev["event_id"],
                           "created_at": f"2026-11-30T00:00:01.{i:06d}+00:00"})
            continue
        events.append(event(ws, 0, trajectory_id=tid, reviewer=f"bulk{i % 50}", event_id=i + 1,
                            created_at=f"2026-11-30T00:00:00.{i:06d}+00:00",
                            label=("genuine_decline", "degenerate")[i % 2]))
    return write_jsonl(path, events)


def test_two_labels_imports_of_one_file_at_once_store_each_event_once(ws, tmp_path):
    """Two real ``labels import`` processes of the same 3,000-event file, each past its checks
    before either writes (a barrier: they stored 6,000 events): each event is stored once, the
    two say together that they stored 3,000, and the labels are those one import gives."""
    path = race_file(ws, tmp_path / "race.jsonl", 3_000)
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    procs = [subprocess.Popen([sys.executable, "-m", "tests.labels_import_barrier", str(barrier), "2", "labels",
                               "import", str(path), "--db", str(ws.path)], cwd=ROOT, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    assert len(list(barrier.iterdir())) == 2  # both were held at the barrier: they raced
    events = ws.history(ws.key)
    assert len(events) == 3_000
    assert len({(e["trajectory_id"], e["reviewer"], e["action"], e["created_at"]) for e in events}) == 3_000
    stored = [int(out.split()[1].replace(",", "")) for out, _err in outs]
    assert sum(stored) == 3_000, outs
    single = Workspace(tmp_path / "single.db")
    single.import_run(SAMPLES / "observed-m1.jsonl")
    assert single.import_labels(path) == 3_000
    assert ws.current_labels(ws.key) == single.current_labels(ws.key)
    assert ws.import_label_file(path) == labels_module.LabelImport(0, 3_000)  # a third: nothing new


def test_an_event_that_contradicts_a_stored_one_or_an_earlier_line_is_refused(ws, tmp_path):
    first = write_jsonl(tmp_path / "a.jsonl", [event(ws, 1)])
    assert ws.import_labels(first) == 1
    other = write_jsonl(tmp_path / "b.jsonl", [event(ws, 2, reviewer="bob"), event(ws, 1, label="degenerate")])
    with pytest.raises(InputError, match="another label, note or bulk act") as refused:
        ws.import_labels(other)
    assert refused.value.line == 2 and len(ws.history(ws.key)) == 1
    twice = write_jsonl(tmp_path / "c.jsonl", [event(ws, 3), event(ws, 3, note="second thoughts")])
    with pytest.raises(InputError, match="event of line 1") as refused:
        ws.import_labels(twice)
    assert refused.value.line == 2 and len(ws.history(ws.key)) == 1
    again = write_jsonl(tmp_path / "d.jsonl", [event(ws, 4), event(ws, 4)])  # a repeated line: one event
    assert ws.import_label_file(again) == labels_module.LabelImport(1, 1)


def test_the_app_door_says_so_when_an_act_would_repeat_a_stored_event(ws, monkeypatch):
    """One reviewer's act on one trace at one instant is one event (the identity is unique): a
    clock set back onto a stored act's very time is refused in words, nothing written."""
    monkeypatch.setattr(labels_module, "utc_now", lambda: "2026-12-01T10:00:00.000000+00:00")
    tid = ws.inconclusive[0]
    ws.add_label(ws.key, tid, "alice", G)
    ws.undo(ws.key, tid, "alice")
    with pytest.raises(StoreError, match="clock set back"):
        ws.add_label(ws.key, tid, "alice", G)
    assert len(ws.history(ws.key)) == 2


def test_only_a_repeated_identity_is_called_a_clock_set_back(ws, monkeypatch):
    """Another constraint an act breaks (here schema 16's canonical-time trigger, fed a time the
    app never writes) is not blamed on the clock: it is said as SQLite says it."""
    monkeypatch.setattr(labels_module, "utc_now", lambda: "2026-12-01 10:00:00")
    with pytest.raises(sqlite3.IntegrityError, match="canonical"):
        ws.add_label(ws.key, ws.inconclusive[0], "alice", G)
    assert ws.history(ws.key) == []


def test_schema_13_folds_the_copies_an_old_race_stored_and_keeps_distinct_events(ws, tmp_path):
    """A schema-12 workspace holding what two racing imports stored (each event twice, each copy
    superseding its own process's copies) and two events of one identity that say different
    things: the migration keeps one of each copy (what supersedes a removed copy supersedes the
    kept one), keeps both distinct events, and the labels derived do not change."""
    a, b, c = ws.inconclusive[:3]
    with ws.connect() as db:  # back to schema 13: no identity_rank, no unique index (nor schema 16's triggers)
        db.execute("DROP TRIGGER label_events_time_on_insert")
        db.execute("DROP TRIGGER label_events_time_on_update")
        db.execute("DROP INDEX idx_label_events_identity")
        db.execute("ALTER TABLE label_events DROP COLUMN identity_rank")
        db.execute("PRAGMA user_version = 13")
        g, d = "genuine_decline", "degenerate"
        rows = [  # id, trajectory, reviewer, action, label, time, supersedes
            (10, a, "alice", "label", g, "t1", None), (11, a, "alice", "label", g, "t1", None),
            (12, a, "alice", "label", d, "t2", 10), (13, a, "alice", "label", d, "t2", 11),
            (14, a, "alice", "undo", None, "t3", 13), (15, a, "alice", "undo", None, "t3", 12),
            (16, b, "bob", "label", g, "t4", None), (17, b, "bob", "label", g, "t4", None),
            (18, c, "carol", "label", g, "t5", None), (19, c, "carol", "label", d, "t5", None),
        ]
        db.conn.executemany("INSERT INTO label_events (id, run_key, trajectory_id, reviewer, action, label, note, "
                            "created_at, supersedes) VALUES (?, ?, ?, ?, ?, ?, '', ?, ?)",
                            [(i, ws.key, t, r, act, lab, f"2026-11-30T00:00:0{at[1]}+00:00", sup)
                             for i, t, r, act, lab, at, sup in rows])
        db.conn.commit()
    before = ws.current_labels(ws.key)
    assert before == {a: {"alice": G}, b: {"bob": G}, c: {"carol": D}}
    migrated = Workspace(ws.path)
    assert migrated.migrate() == len(schema.MIGRATIONS) >= 14
    with migrated.connect() as db:
        kept = db.execute("SELECT id, supersedes, identity_rank FROM label_events ORDER BY id").fetchall()
    assert kept == [(10, None, 0), (12, 10, 0), (14, 12, 0), (16, None, 0), (18, None, 0), (19, None, 1)]
    assert migrated.current_labels(ws.key) == before
    with pytest.raises(sqlite3.IntegrityError, match="UNIQUE"), migrated.connect() as db:  # the identity holds
        db.execute("INSERT INTO label_events (run_key, trajectory_id, reviewer, action, label, note, created_at) "
                   "VALUES (?, ?, 'bob', 'label', 'genuine_decline', '', '2026-11-30T00:00:04.000000+00:00')",
                   [ws.key, b])
    exported = tmp_path / "exported.jsonl"
    exported.write_text(migrated.export_labels(ws.key))
    assert migrated.import_label_file(exported) == labels_module.LabelImport(0, 6)  # every event held already


# --- a lone surrogate: a located error ------------------------------------------------------


@pytest.mark.parametrize("field", ["reviewer", "note", "trajectory_id", "batch_id"])
def test_a_lone_surrogate_in_a_labels_file_is_a_located_error(ws, tmp_path, field):
    """JSON ``"\\ud800"`` decodes to a string UTF-8 cannot encode: SQLite's UnicodeEncodeError
    ended the import with a traceback (exit 1). Refused as it is read, the line named."""
    path = tmp_path / "labels.jsonl"
    good = json.dumps(event(ws, 1))
    bad = json.dumps(event(ws, 2, **{field: "x\ud800"}))  # json.dumps writes the escape "\ud800"
    assert "\\ud800" in bad
    path.write_text(good + "\n" + bad + "\n")
    res = cli("labels", "import", str(path), "--db", str(ws.path))
    assert res.exit_code == 2, (res.output, res.exception)
    assert f"{path}:2" in res.output and "lone surrogate" in res.output and "Traceback" not in res.output
    assert ws.history(ws.key) == []


def test_a_lone_surrogate_typed_at_the_app_door_is_refused_in_words(ws):
    """A terminal's undecodable byte reaches ``--note`` as a lone surrogate: refused, not a traceback."""
    grant(ws, "carol")
    tid = ws.inconclusive[0]
    ws.add_label(ws.key, tid, "alice", G)
    ws.add_label(ws.key, tid, "bob", D)
    res = cli("labels", "adjudicate", ws.key[:12], tid, "degenerate", "--as", "carol", "--note", "bad \udcff",
              "--db", str(ws.path))
    assert res.exit_code == 2 and "lone surrogate" in res.output, (res.output, res.exception)
    with pytest.raises(InputError, match="lone surrogate"):
        ws.add_label(ws.key, tid, "al\udcffice", G)
    assert len(ws.history(ws.key)) == 2


UNDO = {"action": "undo", "label": ""}


@pytest.mark.parametrize("case", ["another reviewer's", "another trajectory's", "none named", "not stored",
                                  "undone twice"])
def test_a_labels_file_undoes_only_what_the_apps_undo_would(ws, tmp_path, case):
    """An undo withdraws one of its own reviewer's live labels on its own trajectory (second
    attack on issue 34, F9: an undo pointing at another trace's event made a trace nobody had
    labelled read "withdrawn" in the final labels); anything else refuses the file at its line."""
    a, b = ws.inconclusive[:2]
    first = event(ws, 1, trajectory_id=b if case == "another trajectory's" else a)
    undo = {"another reviewer's": event(ws, 2, reviewer="mallory", supersedes=1, **UNDO),
            "another trajectory's": event(ws, 2, supersedes=1, **UNDO),
            "none named": event(ws, 2, **UNDO),
            "not stored": event(ws, 2, supersedes=7, **UNDO),
            "undone twice": event(ws, 3, supersedes=1, **UNDO)}[case]
    events = [first, *([event(ws, 2, supersedes=1, **UNDO)] if case == "undone twice" else []), undo]
    with pytest.raises(InputError, match="undo") as refused:
        ws.import_labels(write_jsonl(tmp_path / "l.jsonl", events))
    assert refused.value.line == len(events) and ws.history(ws.key) == []


def test_a_labels_file_of_the_apps_own_undos_imports_whole(ws, tmp_path):
    a, b = ws.inconclusive[:2]
    ws.add_label(ws.key, a, "alice", G)
    ws.undo(ws.key, a, "alice")
    ws.add_labels(ws.key, [a, b], "alice", G)
    ws.undo_last(ws.key, "alice")
    exported = tmp_path / "log.jsonl"
    exported.write_text(ws.export_labels(ws.key, "jsonl"))
    fresh = Workspace(tmp_path / "fresh.db")
    fresh.import_run(SAMPLES / "observed-m1.jsonl")
    assert fresh.import_labels(exported, ws.key) == 6
    assert fresh.final_labels(ws.key) == ws.final_labels(ws.key) == {}
