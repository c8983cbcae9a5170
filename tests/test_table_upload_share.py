"""One upload cannot crowd the others out of the Score tables picker (issue 34, attack finding
F5): an upload holds at most ``table_zip.MAX_UPLOAD_TABLES`` score tables (refused at upload
past it); the listing shares its room out evenly among uploads (one kept before the bound lists
only its first ones); the operator's roots are listed apart; and the page says how many uploaded
tables it does not list."""

from __future__ import annotations

from pathlib import Path

import pytest

from scoring.dask_engine import table_locations, table_zip
from scoring.errors import InputError
from scoring.workspace import views
from scoring.workspace.settings import settings_path

from . import test_team_tables
from .conftest import ROOT
from .test_table_upload import _left_behind, zip_folder, zip_of
from .test_team_tables import make_table

team_page = test_team_tables.team_page  # the fixture: the Score tables page in team mode
FLOOD = 600
"""The attack's upload: more tables than the picker lists (``table_locations.MAX_LISTED_TABLES``)."""
KEPT_FLOOD = 40
"""A flood kept before the bound: every table of it is vetted as it is kept (a child process reads
each), so it is kept smaller than the attack's and the listing's room made smaller than it
(``LISTING_ROOM``): the attack's shape, one upload holding more tables than the picker lists."""
LISTING_ROOM = 30
"""``table_locations.MAX_LISTED_TABLES`` while a ``KEPT_FLOOD`` is listed: below the flood, above an
upload's bound and the colleague's table."""


def flood_kept_before_the_bound(db: Path, monkeypatch) -> None:
    """The attack's order: a colleague's table, then one upload of ``KEPT_FLOOD`` tables kept by an
    older version, more than the listing's room (``LISTING_ROOM``, set for the rest of the test)."""
    monkeypatch.setattr(table_locations, "MAX_LISTED_TABLES", LISTING_ROOM)
    assert table_zip.MAX_UPLOAD_TABLES + 1 < LISTING_ROOM < KEPT_FLOOD
    views.unpack_table(db, "colleague.zip", tables_zip(1, "mine"))
    keep_unbounded(db, tables_zip(KEPT_FLOOD), "flood.zip", monkeypatch)


def tables_zip(count: int, prefix: str = "t") -> bytes:
    """A zip of ``count`` score tables as small as one can be and still open (no runs)."""
    members: list[tuple[str, bytes]] = []
    for i in range(count):
        members += [(f"{prefix}{i:03}/summary.json", b"[]"), (f"{prefix}{i:03}/run_keys.json", b"[]")]
    return zip_of(members)


def keep_unbounded(db: Path, data: bytes, name: str, monkeypatch) -> None:
    """An upload kept as a version without the per-upload bound kept it (however many tables)."""
    with monkeypatch.context() as m:
        m.setattr(table_zip, "MAX_UPLOAD_TABLES", 10**6, raising=False)
        views.unpack_table(db, name, data)


def test_an_upload_of_hundreds_of_tables_is_refused_before_anything_is_kept(tmp_path):
    db = tmp_path / "ws.db"
    assert FLOOD > table_locations.MAX_LISTED_TABLES
    with pytest.raises(InputError, match=f"holds {FLOOD} score tables .*at most") as err:
        views.unpack_table(db, "flood.zip", tables_zip(FLOOD))
    assert err.value.source == "flood.zip" and str(tmp_path) not in str(err.value)
    assert _left_behind(Path(f"{db}.d")) == []
    assert views.uploaded_tables(db).tables == ()


def test_an_upload_holds_at_most_its_bound_of_tables(tmp_path):
    assert table_zip.MAX_UPLOAD_TABLES * 10 <= table_locations.MAX_LISTED_TABLES  # far below the listing's cap
    db = tmp_path / "ws.db"
    with pytest.raises(InputError, match=f"holds {table_zip.MAX_UPLOAD_TABLES + 1} score tables"):
        views.unpack_table(db, "over.zip", tables_zip(table_zip.MAX_UPLOAD_TABLES + 1))
    views.unpack_table(db, "at.zip", tables_zip(table_zip.MAX_UPLOAD_TABLES))
    listed = views.uploaded_tables(db)
    assert (len(listed.tables), listed.not_listed) == (table_zip.MAX_UPLOAD_TABLES, 0)


def test_an_upload_kept_before_the_bound_pushes_no_one_out(tmp_path, monkeypatch):
    """The attack's order: a colleague's table, then one upload of more tables than the listing
    has room for (kept by an older version)."""
    db = tmp_path / "ws.db"
    flood_kept_before_the_bound(db, monkeypatch)
    listed = views.uploaded_tables(db)
    labels = [c.label for c in listed.tables]
    assert labels == [f"flood.zip (uploaded): t{i:03}" for i in range(table_zip.MAX_UPLOAD_TABLES)] + [
        "colleague.zip (uploaded): mine000"]
    assert listed.not_listed == KEPT_FLOOD - table_zip.MAX_UPLOAD_TABLES
    assert all(c.refused is None for c in listed.tables)


def test_the_listing_is_shared_out_evenly_newest_upload_first(tmp_path, monkeypatch):
    """Uploads that together hold more than the listing's room: each gets a table in turn, newest
    first, so none is left out while another has more listed than it."""
    monkeypatch.setattr(table_locations, "MAX_LISTED_TABLES", 10)
    monkeypatch.setattr(table_zip, "MAX_UPLOAD_TABLES", 4)
    db = tmp_path / "ws.db"
    for name, count in (("a", 4), ("b", 1), ("c", 4), ("d", 4)):  # "d" the newest
        views.unpack_table(db, f"{name}.zip", tables_zip(count, name))
    listed = views.uploaded_tables(db)
    shown = [c.label.rsplit(": ", 1)[1] for c in listed.tables]
    assert shown == ["d000", "d001", "d002", "c000", "c001", "c002", "b000", "a000", "a001", "a002"]
    assert (listed.not_listed, listed.per_upload, listed.at_most) == (3, 4, 10)
    monkeypatch.setattr(table_locations, "MAX_LISTED_TABLES", 2)  # room for fewer tables than there are uploads
    assert [c.label for c in views.uploaded_tables(db).tables] == ["d.zip (uploaded): d000", "c.zip (uploaded): c000"]


def test_the_readme_states_the_bounds():
    text = " ".join((ROOT / "README.md").read_text().split())
    assert f"at most {table_zip.MAX_UPLOAD_TABLES} score tables an upload" in text
    assert f"lists at most {table_locations.MAX_LISTED_TABLES} uploaded tables" in text


# --- the page (AppTest) -----------------------------------------------------------------------


def test_the_page_lists_the_roots_and_every_upload_and_says_what_it_leaves_out(team_page, tmp_path, monkeypatch):
    at = team_page
    db = tmp_path / "app.db"
    out, _run = make_table(tmp_path / "scores", "nightly")
    settings_path(db).write_text(f'score_table_roots = ["{tmp_path / "scores"}"]\n')
    flood_kept_before_the_bound(db, monkeypatch)
    at.run()
    assert not at.exception, at.exception
    options = at.selectbox(key="score_table_pick").options
    assert "colleague.zip (uploaded): mine000" in options and str(out) in options  # the root's table too
    assert len(options) == table_zip.MAX_UPLOAD_TABLES + 2
    assert any(f"{KEPT_FLOOD - table_zip.MAX_UPLOAD_TABLES:,} uploaded score tables are not listed" in i.value
               for i in at.info)
    at.file_uploader(key="score_table_upload").upload("again.zip", tables_zip(FLOOD, "x")).run()
    assert not at.exception, at.exception
    assert any("not a score table that can be opened" in e.value for e in at.error)
    assert any(f"holds {FLOOD} score tables" in c.value for c in at.code)


def test_an_upload_of_one_table_is_not_told_of_tables_left_out(team_page, tmp_path):
    at = team_page
    out, _run = make_table(tmp_path / "scored" / "nightly", "table")
    at.file_uploader(key="score_table_upload").upload("nightly.zip", zip_folder(out.parent)).run()
    assert not at.exception, at.exception
    assert not any("not listed" in i.value for i in at.info)


def test_uploads_of_one_name_or_a_lookalike_are_told_apart_by_their_digest(tmp_path):
    """Two uploads named nightly.zip (the second an attacker's, newest, every visitor's default)
    and one whose i is Cyrillic: each listed with the start of its bytes' SHA-256 (second attack
    on issue 34, F6: all read "nightly.zip (uploaded): nightly/table"); a name of its own stays plain."""
    db = tmp_path / "ws.db"
    first = views.unpack_table(db, "nightly.zip", tables_zip(1, "a"))
    second = views.unpack_table(db, "nightly.zip", tables_zip(1, "b"))
    lookalike = views.unpack_table(db, "n\u0456ghtly.zip", tables_zip(1, "c"))
    views.unpack_table(db, "mine.zip", tables_zip(1, "d"))
    labels = {c.root: c.label for c in views.uploaded_tables(db).tables}
    digests = {root: table_zip.read_upload(root).sha256[:8] for root in (first, second, lookalike)}
    for root, digest in digests.items():
        assert f"(uploaded, sha256 {digest})" in labels[root], labels[root]
    assert len(set(digests.values())) == 3
    assert [label for label in labels.values() if "mine.zip" in label] == ["mine.zip (uploaded): d000"]


@pytest.mark.parametrize("twin", ["nightly.zip ", " nightly.zip", "nightly.zip\t", "nightly.zip\x7f", "nightIy.zip",
                                  "NIGHTLY.zip", "n1ghtly.zip"])
def test_names_that_look_like_another_uploads_are_told_apart(tmp_path, twin):
    """Second confirmation attack, V5: names that differ only by white space, DEL, case or an
    ASCII lookalike got no digest."""
    db = tmp_path / "ws.db"
    first = views.unpack_table(db, "nightly.zip", tables_zip(1, "a"))
    second = views.unpack_table(db, twin, tables_zip(1, "b"))
    labels = {c.root: c.label for c in views.uploaded_tables(db).tables}
    for root in (first, second):
        assert f"(uploaded, sha256 {table_zip.read_upload(root).sha256[:8]})" in labels[root], labels
