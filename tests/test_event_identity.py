"""Issue 34, item 4 (attack finding F9): one label event, one identity. The identity holds an
event's time as text, so the same instant spelled two ways (``Z`` or ``+00:00``, fractional zeros
or none, another offset) was two events: a re-import of an export that another tool re-serialised
doubled the votes, and turned a reviewer's later label back. Every door writes one canonical UTC
text (``schema.canonical_time``), the schema refuses any other (schema 16), and the migration to
schema 16 rewrites the times stored before and folds the events that become one."""

from __future__ import annotations

import json
import re
import sqlite3
import zoneinfo
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from scoring.cli import main
from scoring.dask_engine import table_reader, table_workspace
from scoring.errors import InputError
from scoring.model import ReviewLabel
from scoring.workspace import Workspace, schema
from scoring.workspace import labels as labels_module

from . import test_labels_import
from .test_scoretable import table  # noqa: F401 - the fixture: a score table and a workspace

G, D = ReviewLabel.GENUINE_DECLINE, ReviewLabel.DEGENERATE
CANONICAL = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}\+00:00", re.ASCII)

ws = test_labels_import.ws  # the fixture: a workspace with observed-m1 imported, its Inconclusive ids

# One instant, 2026-01-01 00:00:00 UTC, as tools write it.
SPELLINGS = ["2026-01-01T00:00:00Z", "2026-01-01T00:00:00+00:00", "2026-01-01T00:00:00.000000+00:00",
             "2026-01-01T00:00:00.000Z", "2026-01-01T01:00:00+01:00", "2025-12-31T19:00:00-05:00",
             "2026-01-01T05:30:00.000000000+05:30", "2026-01-01 00:00:00+00:00", "20260101T000000Z"]


def event(ws, created_at: str, **fields) -> dict:
    return {"run_key": ws.key, "trajectory_id": ws.inconclusive[0], "reviewer": "alice", "action": "label",
            "label": "genuine_decline", "note": "", "created_at": created_at, "event_id": 1, "supersedes": "",
            "batch_id": "", **fields}


def write_jsonl(path: Path, events: list[dict]) -> Path:
    path.write_text("".join(json.dumps(e) + "\n" for e in events))
    return path


def stored_times(ws) -> list[str]:
    return [e["created_at"] for e in ws.history(ws.key)]


# --- the normaliser -------------------------------------------------------------------------


def test_every_spelling_of_one_instant_is_one_text():
    assert {schema.canonical_time(s) for s in SPELLINGS} == {"2026-01-01T00:00:00.000000+00:00"}
    assert schema.canonical_time("2026-01-01T00:00:00") == "2026-01-01T00:00:00.000000+00:00"  # no zone: UTC
    assert CANONICAL.fullmatch(schema.utc_now())


offsets = st.integers(-(24 * 60 - 1), 24 * 60 - 1).map(lambda m: timezone(timedelta(minutes=m)))
# the system's zones too, where it has them (their offsets in seconds, their folds and gaps); no tzdata wheel on Linux
zones = st.timezones() if zoneinfo.available_timezones() else st.nothing()
aware = st.datetimes(timezones=st.one_of(offsets, zones))
GLOB = sqlite3.connect(":memory:")


@settings(max_examples=400, deadline=None)
@given(aware, offsets, st.sampled_from(["auto", "seconds", "milliseconds", "microseconds"]), st.booleans())
def test_the_normaliser_round_trips_any_aware_time(t, other, timespec, zulu):
    """Whatever the offset it is written in and however it is spelled (fractional digits that
    drop nothing, ``Z``), an aware time names one text: the same instant read back, stable under
    the normaliser, in the shape the schema admits (its triggers' GLOB). An instant that
    UTC cannot write (before year 1 or after 9999 once moved to UTC) is a ValueError, never
    another exception."""
    exact = {"seconds": t.microsecond == 0, "milliseconds": t.microsecond % 1000 == 0}.get(timespec, True)
    spelled = t.isoformat(timespec=timespec if exact else "microseconds")
    if zulu and t.utcoffset() == timedelta(0):
        spelled = spelled.removesuffix("+00:00") + "Z"
    try:
        t.astimezone(UTC)
    except OverflowError:
        with pytest.raises(ValueError):
            schema.canonical_time(spelled)
        return
    text = schema.canonical_time(spelled)
    # compared in UTC: an aware time in a fold or gap of its zone is never equal to one of another zone (PEP 495)
    assert datetime.fromisoformat(text).astimezone(UTC) == t.astimezone(UTC) and CANONICAL.fullmatch(text)
    assert schema.canonical_time(text) == text
    assert GLOB.execute("SELECT ? GLOB ?", [text, schema._CANONICAL_TIME_GLOB]).fetchone() == (1,)
    try:
        elsewhere = t.astimezone(other)
    except OverflowError:
        return
    assert schema.canonical_time(elsewhere.isoformat()) == text
    assert schema.utc_text(t) == text


@settings(max_examples=200, deadline=None)
@given(st.datetimes(timezones=st.just(UTC)), st.datetimes(timezones=st.just(UTC)))
def test_canonical_texts_sort_as_their_times(a, b):
    x, y = schema.utc_text(a), schema.utc_text(b)
    assert (x < y) == (a < b) and (x == y) == (a == b)


# --- the import door ------------------------------------------------------------------------


@pytest.mark.parametrize("spelling", SPELLINGS[1:])
def test_the_same_event_imported_in_two_spellings_is_stored_once(ws, tmp_path, spelling):
    """The attack: the same event with ``Z`` and then re-spelled was stored twice."""
    assert ws.import_labels(write_jsonl(tmp_path / "a.jsonl", [event(ws, SPELLINGS[0])])) == 1
    again = ws.import_label_file(write_jsonl(tmp_path / "b.jsonl", [event(ws, spelling)]))
    assert again == labels_module.LabelImport(0, 1)
    assert stored_times(ws) == ["2026-01-01T00:00:00.000000+00:00"]
    both = ws.import_label_file(write_jsonl(tmp_path / "c.jsonl", [event(ws, spelling, reviewer="bob"),
                                                                  event(ws, SPELLINGS[0], reviewer="bob")]))
    assert both == labels_module.LabelImport(1, 1)  # one file, two spellings: one event
    assert len(ws.history(ws.key)) == 2


def test_a_re_spelled_event_that_says_something_else_is_refused_as_a_contradiction(ws, tmp_path):
    """Re-spelled, an event of the same instant with another label is the contradiction it is."""
    ws.import_labels(write_jsonl(tmp_path / "a.jsonl", [event(ws, SPELLINGS[0])]))
    with pytest.raises(InputError, match="another label, note or bulk act") as refused:
        ws.import_labels(write_jsonl(tmp_path / "b.jsonl", [event(ws, SPELLINGS[4], label="degenerate")]))
    assert refused.value.line == 1 and len(ws.history(ws.key)) == 1


def test_a_re_serialised_export_re_imported_adds_nothing_and_turns_no_label_back(ws, tmp_path):
    """An export of the app's labels, re-serialised by another tool (each time moved to +02:00,
    the CSV's and the JSONL's), imported after the reviewer changed her mind: nothing new, and
    her current label stays her latest (the copy of her first label, newest by id, made it
    current again)."""
    tid = ws.inconclusive[0]
    ws.add_label(ws.key, tid, "alice", G)
    ws.add_labels(ws.key, ws.inconclusive[1:3], "bob", D)
    exported = {fmt: ws.export_labels(ws.key, fmt) for fmt in ("jsonl", "csv")}
    ws.add_label(ws.key, tid, "alice", D)
    plus_two = timezone(timedelta(hours=2))

    def moved(match: re.Match) -> str:
        return datetime.fromisoformat(match.group(0)).astimezone(plus_two).isoformat()

    for fmt, text in exported.items():
        path = tmp_path / f"respelled.{fmt}"
        path.write_text(re.sub(r"\d{4}-\d\d-\d\dT[0-9:.]+\+00:00", moved, text))
        assert "+02:00" in path.read_text()
        assert ws.import_label_file(path) == labels_module.LabelImport(0, 3), fmt
    assert len(ws.history(ws.key)) == 4
    assert ws.current_labels(ws.key) == {tid: {"alice": D}, ws.inconclusive[1]: {"bob": D},
                                         ws.inconclusive[2]: {"bob": D}}


def test_an_export_imported_elsewhere_and_back_dedupes(ws, tmp_path):
    """Export → import into another workspace → its export imported back, and the first export
    again, in both formats: every event is held already; the exported times are canonical."""
    ws.import_labels(write_jsonl(tmp_path / "a.jsonl", [event(ws, "2026-01-01T01:00:00+01:00"),
                                                        event(ws, "2026-01-02T00:00:00Z", reviewer="bob",
                                                              event_id=2)]))
    ws.add_label(ws.key, ws.inconclusive[1], "carol", D)
    for fmt in ("jsonl", "csv"):
        out = tmp_path / f"out.{fmt}"
        out.write_text(ws.export_labels(ws.key, fmt))
        other = Workspace(tmp_path / f"other-{fmt}.db")
        other.import_run(test_labels_import.SAMPLES / "observed-m1.jsonl")
        assert other.import_labels(out) == 3
        back = tmp_path / f"back.{fmt}"
        back.write_text(other.export_labels(ws.key, fmt))
        assert ws.import_label_file(back) == labels_module.LabelImport(0, 3)
        assert other.import_label_file(out) == labels_module.LabelImport(0, 3)
    assert all(CANONICAL.fullmatch(json.loads(line)["created_at"])
               for line in ws.export_labels(ws.key).splitlines())


@pytest.mark.parametrize(("created_at", "why"), [
    ("2026-13-01T00:00:00Z", "not an ISO 8601 time"),
    ("yesterday", "not an ISO 8601 time"),
    ("0001-01-01T00:30:00+01:00", "outside the years UTC can write"),
    ("9999-12-31T23:30:00-01:00", "outside the years UTC can write"),
    ("2026-01-01T00:00:00.0000001Z", "finer than a microsecond"),
    ("2026-01-01T00:00:00+00:00:00.5", "fraction of a second"),
])
def test_a_time_that_names_no_storable_instant_is_a_located_error(ws, tmp_path, created_at, why):
    """Refused as it is read, the file and line named, nothing imported (an offset that moves a
    time past year 1 or 9999 was stored as written; a tenth of a microsecond was cut off)."""
    path = write_jsonl(tmp_path / "labels.jsonl", [event(ws, "2026-01-01T00:00:00Z"),
                                                    event(ws, created_at, event_id=2, reviewer="bob")])
    res = CliRunner().invoke(main, ["labels", "import", str(path), "--db", str(ws.path)])
    assert res.exit_code == 2, (res.output, res.exception)
    assert f"{path}:2" in res.output and why in res.output and "Traceback" not in res.output
    assert ws.history(ws.key) == []


def test_sub_microsecond_zeros_are_a_spelling_not_a_refusal(ws, tmp_path):
    path = write_jsonl(tmp_path / "labels.jsonl", [event(ws, "2026-01-01T00:00:00.123456000Z")])
    assert ws.import_labels(path) == 1
    assert stored_times(ws) == ["2026-01-01T00:00:00.123456+00:00"]


# --- every door writes the one text; the schema admits no other ------------------------------


def test_every_door_stores_the_canonical_text(ws, table, tmp_path):  # noqa: F811 - the fixture
    """The app's label, bulk label, adjudication, undo and bulk undo, a labels file and a score
    table's label all store one text for a time."""
    tid, other = ws.inconclusive[:2]
    ws.adjudicators_file.parent.mkdir(exist_ok=True)
    ws.adjudicators_file.write_text("carol\n")
    doors = [
        lambda: ws.add_label(ws.key, tid, "alice", G),
        lambda: ws.add_labels(ws.key, [tid, other], "bob", D),
        lambda: ws.adjudicate(ws.key, tid, "carol", D),
        lambda: ws.undo(ws.key, tid, "alice"),
        lambda: ws.undo_last(ws.key, "bob"),
        lambda: ws.import_labels(write_jsonl(tmp_path / "x.jsonl", [event(ws, "2026-01-01T01:00:00+01:00",
                                                                          reviewer="dave")])),
    ]
    for door in doors:
        door()
    t, _run, table_ws = table
    table_workspace.add_label(table_ws, t, table_reader.inconclusive_ids(t)[0], "ana", G)
    times = stored_times(ws) + [e["created_at"] for e in table_ws.history(t.run_key)]
    assert len(times) == 9 and all(CANONICAL.fullmatch(x) for x in times), times


@pytest.mark.parametrize("spelling", ["2026-01-01T00:00:00Z", "2026-01-01T00:00:00+00:00", "2026-01-01T00:00:00.0Z",
                                      "2026-01-01T01:00:00.000000+01:00", None])
def test_the_schema_refuses_a_time_that_is_not_the_canonical_text(ws, spelling):
    """A door that forgot the normaliser could store the instant twice; the store says no."""
    with pytest.raises(sqlite3.IntegrityError, match="canonical"), ws.connect() as db:
        db.execute("INSERT INTO label_events (run_key, trajectory_id, reviewer, action, label, note, created_at) "
                   "VALUES (?, ?, 'x', 'label', 'degenerate', '', ?)", [ws.key, ws.inconclusive[0], spelling])
    ws.add_label(ws.key, ws.inconclusive[0], "alice", G)
    with pytest.raises(sqlite3.IntegrityError, match="canonical"), ws.connect() as db:
        db.execute("UPDATE label_events SET created_at = ?", [spelling])
    assert CANONICAL.fullmatch(stored_times(ws)[0])


# --- the migration --------------------------------------------------------------------------


def back_to_schema_14(ws) -> sqlite3.Connection:
    """``ws``'s database as schema 14 left it: no trigger on the time's text."""
    con = sqlite3.connect(ws.path)
    for (name,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'label_events'"
                               ).fetchall():
        con.execute(f"DROP TRIGGER {name}")
    con.execute("PRAGMA user_version = 14")
    return con


def test_schema_16_rewrites_stored_times_and_folds_the_events_that_become_one(ws, tmp_path):
    """A schema-14 workspace where two spellings of one instant are two events — alice's first
    label imported again re-spelled after her second (her current label flipped back to it), an
    undo superseding a copy, two events of one instant that say different things, a time no
    parser reads — is, after the migration: one event each (the earliest kept; what superseded
    a removed copy supersedes it), the distinct ones kept and ranked, the unreadable time kept
    as it was; the labels those events say, not the flipped ones; and an export of it, or one
    written before the migration, imported back adds nothing."""
    a, b, c, d = ws.inconclusive[:4]
    g, dg = "genuine_decline", "degenerate"
    rows = [  # id, trajectory, reviewer, action, label, time, supersedes
        (10, a, "alice", "label", g, "2026-01-01T00:00:00.000000+00:00", None),
        (11, a, "alice", "label", dg, "2026-01-01T00:00:05.000000+00:00", None),
        (12, a, "alice", "label", g, "2026-01-01T01:00:00+01:00", None),  # a copy of 10, after 11
        (13, b, "bob", "label", g, "2026-01-01T00:00:00Z", None),
        (14, b, "bob", "label", g, "2026-01-01T00:00:00.000+00:00", None),  # a copy of 13
        (15, b, "bob", "undo", None, "2026-01-01T00:00:09Z", 14),  # undoes the copy
        (16, c, "carol", "label", g, "2026-01-01T00:00:00Z", None),
        (17, c, "carol", "label", dg, "2026-01-01T00:00:00+00:00", None),  # same instant, says otherwise
        (18, d, "dave", "label", g, "not a time", None),
    ]
    con = back_to_schema_14(ws)
    con.executemany("INSERT INTO label_events (id, run_key, trajectory_id, reviewer, action, label, note, created_at, "
                    "supersedes) VALUES (?, ?, ?, ?, ?, ?, '', ?, ?)", [(r[0], ws.key, *r[1:]) for r in rows])
    con.commit()
    con.close()
    assert ws.current_labels(ws.key) == {a: {"alice": G}, b: {"bob": G}, c: {"carol": D}, d: {"dave": G}}
    before = tmp_path / "before.jsonl"  # an export written before the migration: the times as stored then
    before.write_text("".join(line + "\n" for line in ws.export_labels(ws.key).splitlines()
                              if "not a time" not in line))

    migrated = Workspace(ws.path)
    version = migrated.migrate()
    with migrated.connect() as db:
        kept = db.execute("SELECT id, created_at, supersedes, identity_rank FROM label_events ORDER BY id").fetchall()
    at = "2026-01-01T00:00:0{}.000000+00:00".format
    assert kept == [(10, at(0), None, 0), (11, at(5), None, 0), (13, at(0), None, 0), (15, at(9), 13, 0),
                    (16, at(0), None, 0), (17, at(0), None, 1), (18, "not a time", None, 0)]
    assert migrated.current_labels(ws.key) == {a: {"alice": D}, c: {"carol": D}, d: {"dave": G}}
    assert version == len(schema.MIGRATIONS) >= 16
    exported = tmp_path / "exported.jsonl"
    exported.write_text("".join(line + "\n" for line in migrated.export_labels(ws.key).splitlines()
                                if "not a time" not in line))
    assert migrated.import_label_file(exported) == labels_module.LabelImport(0, 6)
    assert migrated.import_label_file(before) == labels_module.LabelImport(0, 8)
    assert len(migrated.history(ws.key)) == 7
    with pytest.raises(sqlite3.IntegrityError, match="UNIQUE"), migrated.connect() as db:  # one identity from now on
        db.execute("INSERT INTO label_events (run_key, trajectory_id, reviewer, action, label, note, created_at) "
                   "VALUES (?, ?, 'bob', 'label', 'genuine_decline', '', ?)", [ws.key, b, at(0)])
