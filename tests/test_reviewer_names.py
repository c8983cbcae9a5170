"""Issue 34 (attack finding F10): one reviewer, one name. A name typed composed or decomposed, with
a zero-width character, full-width or with a non-breaking space looked the same on every screen
and was two reviewers (one person's two labels agreed with each other; an adjudicator's name with
an invisible character in it was someone else). Every door stores one form (``normal_name``), and
the migration to schema 17 rewrites the names stored before and folds the events that become one."""

from __future__ import annotations

import json
import sqlite3
import unicodedata

import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from scoring.cli import main
from scoring.errors import InputError, StoreError
from scoring.model import ReviewLabel
from scoring.workspace import Workspace, schema
from scoring.workspace.labels import Reader, reviewer_identity
from scoring.workspace.schema import normal_name

from . import test_labels_import

ws = test_labels_import.ws  # the fixture: a workspace with observed-m1 imported, its Inconclusive ids

G, D = ReviewLabel.GENUINE_DECLINE, ReviewLabel.DEGENERATE
JOSE = "José Núñez"
TWINS = [unicodedata.normalize("NFC", JOSE), unicodedata.normalize("NFD", JOSE), "José\u200b Núñez",
         "\ufeffJosé Núñez", "José\u00a0Núñez", "José  Núñez ", "José\u200dNúñez".replace("\u200d", "\u200d "),
         # drawn as nothing or a blank, yet no format character (the attack's second pass)
         "José\u034f Núñez", "José Nu\u0301\ufe0fñez", "\u3164José Núñez", "José Núñez\u2800", "José\u2800Núñez",
         "José Núñez\u115f\uffa0\U000e0041"]


@pytest.mark.parametrize("twin", TWINS)
def test_every_spelling_of_a_name_is_one_name(twin):
    assert normal_name(twin) == unicodedata.normalize("NFC", JOSE)
    assert normal_name("ａｌｉｃｅ") == "alice"  # full-width
    assert normal_name("Alice") != normal_name("alice")  # case is seen: two names


@given(st.text(max_size=40))
def test_the_stored_form_is_a_fixed_point(name):
    assert normal_name(normal_name(name)) == normal_name(name)


def test_a_name_all_invisible_or_with_a_control_character_is_refused():
    with pytest.raises(InputError, match="a reviewer name is required"):
        reviewer_identity("\u200b\u200c\ufeff")
    with pytest.raises(InputError, match=r"control character \(U\+001B\)"):
        reviewer_identity("alice\x1b[31m")


@pytest.mark.parametrize("name", ["c\u0430rol", "\u0441arol", "car\u03bfl", "Jos\u0435 N\u00fa\u00f1ez"])
def test_a_word_mixing_lookalike_scripts_is_refused(name):
    """The attack's third pass: "cаrol" with a Cyrillic а was drawn pixel for pixel as "carol" and
    stored as another reviewer. A word may be written in one of the scripts drawn alike."""
    with pytest.raises(InputError, match=r"mixes (Cyrillic and Latin|Greek and Latin) letters in one word"):
        reviewer_identity(name)


@pytest.mark.parametrize("name", ["Σωκράτης Smith", "Дмитрий", "José Núñez", "李 Wei", "o'brien-2"])
def test_names_in_one_script_a_word_are_taken(name):
    assert reviewer_identity(name) == normal_name(name)


def test_a_mixed_script_name_is_refused_by_labels_import(ws, tmp_path):
    a = ws.inconclusive[0]
    path = tmp_path / "labels.jsonl"
    path.write_text(json.dumps(test_labels_import.event(ws, trajectory_id=a, reviewer="c\u0430rol",
                                                        label="genuine_decline", event_id=1)) + "\n")
    got = CliRunner().invoke(main, ["labels", "import", str(path), "--db", str(ws.path)])
    assert "mixes Cyrillic and Latin letters" in got.output
    assert ws.current_labels(ws.key) == {}


def test_twins_label_as_one_reviewer_at_every_door(ws, tmp_path):
    a = ws.inconclusive[0]
    ws.add_label(ws.key, a, TWINS[0], G)
    ws.add_label(ws.key, a, TWINS[1], D)  # the same person, her name decomposed: her label changes
    assert ws.current_labels(ws.key) == {a: {TWINS[0]: D}}
    events = [test_labels_import.event(ws, trajectory_id=a, reviewer=twin, label="genuine_decline",
                                       created_at=f"2026-12-01T10:00:0{i}+00:00", event_id=i + 1)
              for i, twin in enumerate(TWINS[2:5])]
    path = tmp_path / "labels.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in events))
    got = CliRunner().invoke(main, ["labels", "import", str(path), "--db", str(ws.path)])
    assert got.exit_code == 0, got.output
    assert ws.current_labels(ws.key) == {a: {TWINS[0]: G}}
    assert {e["reviewer"] for e in ws.history(ws.key)} == {TWINS[0]}
    assert ws.current_labels(ws.key, reader=Reader.of(TWINS[1], blind=True)) == {a: {TWINS[0]: G}}


def test_an_adjudicators_name_with_an_invisible_character_is_the_adjudicator(ws):
    a = ws.inconclusive[0]
    ws.adjudicators_file.parent.mkdir(parents=True, exist_ok=True)
    ws.adjudicators_file.write_text("carol\n")
    ws.add_label(ws.key, a, "alice", G)
    ws.add_label(ws.key, a, "bob", D)
    ws.adjudicate(ws.key, a, "car\u200bol", G)  # the role's holder, however her name was typed
    assert {e["reviewer"] for e in ws.history(ws.key) if e["action"] == "adjudicate"} == {"carol"}
    with pytest.raises(InputError, match="mixes Cyrillic and Latin letters"):
        ws.adjudicate(ws.key, a, "carоl", D)  # a Cyrillic о: refused, drawn as "carol"
    with pytest.raises(StoreError, match="does not hold the adjudicator role"):
        ws.adjudicate(ws.key, a, "Carol", D)  # another name, drawn otherwise: no role


def test_schema_18_folds_the_names_told_apart_by_ignorable_characters(ws):
    """A schema-17 workspace (names already rewritten once) where one label is stored under
    "alice" and another under "alice" with a combining grapheme joiner (U+034F): one name after
    the migration, the later label her current one."""
    a = ws.inconclusive[0]
    con = sqlite3.connect(ws.path)
    con.execute("PRAGMA user_version = 17")
    con.executemany("INSERT INTO label_events (id, run_key, trajectory_id, reviewer, action, label, note, created_at) "
                    "VALUES (?, ?, ?, ?, 'label', ?, '', ?)",
                    [(20, ws.key, a, "alice", G.value, "2026-01-01T00:00:00.000000+00:00"),
                     (21, ws.key, a, "alice\u034f", D.value, "2026-01-01T00:00:01.000000+00:00")])
    con.commit()
    con.close()
    assert len(ws.current_labels(ws.key)[a]) == 2
    migrated = Workspace(ws.path)
    assert migrated.migrate() == len(schema.MIGRATIONS) >= 18
    assert migrated.current_labels(ws.key) == {a: {"alice": D}}


def test_schema_17_rewrites_stored_names_and_folds_the_events_that_become_one(ws):
    """A schema-16 workspace where José's label is stored under two spellings of his name, once
    as a copy of one event (same instant, same label) and once as a later label, and a name all
    invisible: after the migration one name, the copy folded, the later label his current one,
    the invisible name kept as it was."""
    a, b = ws.inconclusive[:2]
    nfc, nfd = TWINS[0], TWINS[1]
    at = "2026-01-01T00:00:0{}.000000+00:00".format
    rows = [(10, a, nfc, G.value, at(0)), (11, a, nfd, G.value, at(0)),  # one event, two spellings
            (12, b, nfc, G.value, at(1)), (13, b, "José\u200b Núñez", D.value, at(2)),
            (14, b, "\u200b", G.value, at(3))]
    con = sqlite3.connect(ws.path)
    con.execute("PRAGMA user_version = 16")
    con.executemany("INSERT INTO label_events (id, run_key, trajectory_id, reviewer, action, label, note, created_at) "
                    "VALUES (?, ?, ?, ?, 'label', ?, '', ?)", [(r[0], ws.key, *r[1:]) for r in rows])
    con.commit()
    con.close()
    assert len(ws.current_labels(ws.key)[b]) == 3  # before: three reviewers on b

    migrated = Workspace(ws.path)
    assert migrated.migrate() == len(schema.MIGRATIONS) >= 17
    with migrated.connect() as db:
        kept = db.execute("SELECT id, reviewer FROM label_events ORDER BY id").fetchall()
    assert kept == [(10, nfc), (12, nfc), (13, nfc), (14, "\u200b")]
    assert migrated.current_labels(ws.key) == {a: {nfc: G}, b: {nfc: D, "\u200b": G}}
