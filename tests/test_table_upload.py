"""A score table uploaded as a zip in team mode (issue 24): unpacked into the workspace with
bounds and no member outside its folder, opened with its upload as its root, so its rows read
nothing of the server's but what the zip carried."""

from __future__ import annotations

import contextlib
import io
import json
import shutil
import stat
import struct
import time
import zipfile
from pathlib import Path

import pytest

from scoring.dask_engine import table_locations, table_reader, table_zip, vetting_process
from scoring.errors import InputError
from scoring.workspace import views

from . import test_team_tables
from .test_team_tables import make_table

TRAJECTORY = "observed-m1-t00079"
team_page = test_team_tables.team_page  # the fixture: the Score tables page in team mode


def zip_folder(folder: Path, *, without: str = "") -> bytes:
    """A zip of ``folder`` as ``zip -r`` makes it (deflate), its members named from the folder's
    own name down; files named ``without`` left out."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for path in sorted(folder.rglob("*")):
            if path.is_file() and path.name != without:
                zf.write(path, str(path.relative_to(folder.parent)))
    return buf.getvalue()


def checks_ended(roots, limit: float = 120.0) -> None:
    """Wait until the background checks of these uploads' folders have ended (a listing starts
    them and never waits for them)."""
    deadline = time.monotonic() + limit
    while views.still_checking(map(str, roots)):
        assert time.monotonic() < deadline, "the upload's check never ended"
        time.sleep(0.05)


def listed_after_checks(db) -> tuple:
    """The uploaded tables listed, once the checks the listing started have ended."""
    first = views.uploaded_tables(db).tables
    checks_ended({c.root for c in first})
    return views.uploaded_tables(db).tables


def zip_of(members: list[tuple[str | zipfile.ZipInfo, bytes]], method: int = zipfile.ZIP_DEFLATED) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", method) as zf:
        for name, data in members:
            zf.writestr(name, data)
    return buf.getvalue()


def _left_behind(folder: Path) -> list[str]:
    base = folder / table_zip.UPLOADS_DIR
    return sorted(p.name for p in base.iterdir() if p.name != table_zip.LOCK) if base.is_dir() else []


def test_an_uploaded_table_replays_from_the_run_the_zip_carried(tmp_path):
    out, run = make_table(tmp_path / "scored" / "nightly-data", "table")
    ws = tmp_path / "ws"
    root = table_zip.unpack(zip_folder(out.parent), "nightly.zip", ws)
    assert root.parent == ws / table_zip.UPLOADS_DIR and (root / table_zip.MARK).is_file()
    assert table_zip.unpack(zip_folder(out.parent), "again.zip", ws) == root  # the same bytes: unpacked once
    [(found, location)] = table_locations.tables_under([str(root)])
    (t,) = table_reader.open_table(location, root=found)
    row = table_reader.find_row(t, TRAJECTORY)
    assert row["source"] == str(run)  # the row names where it was scored ...
    run.unlink()  # ... and the server's file is not what is read
    traj, header = table_reader.read_trajectory(row, run=t)
    assert traj.id == TRAJECTORY and header.run_id
    assert table_reader.evaluation(t).as_dict()["run_id"] == header.run_id  # the report reads it too


def test_an_uploaded_table_without_its_run_reads_no_file_of_the_server(tmp_path):
    """The run the rows name exists on this machine; the zip did not carry it: nothing is read."""
    out, run = make_table(tmp_path / "scored", "table")
    root = table_zip.unpack(zip_folder(out), "table.zip", tmp_path / "ws")
    (t,) = table_reader.open_table(str(root / "table"), root=str(root))
    row = table_reader.find_row(t, TRAJECTORY)
    assert Path(row["source"]).is_file()
    with pytest.raises(InputError, match="outside its root") as err:
        table_reader.read_trajectory(row, run=t)
    assert str(run) not in str(err.value)
    with pytest.raises(InputError, match="outside its root"):
        table_reader.evaluation(t)


def _link(name: str, target: str) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name)
    info.external_attr = (stat.S_IFLNK | 0o777) << 16
    return info


@pytest.mark.parametrize("members, method, expect", [
    ([("../escape.json", b"{}")], zipfile.ZIP_DEFLATED, "unsafe member path"),
    ([("t/../../escape.json", b"{}")], zipfile.ZIP_DEFLATED, "unsafe member path"),
    ([("/etc/cron.d/x", b"{}")], zipfile.ZIP_DEFLATED, "unsafe member path"),
    ([("C:/x/summary.json", b"{}")], zipfile.ZIP_DEFLATED, "unsafe member path"),
    ([("t\\..\\..\\x", b"{}")], zipfile.ZIP_DEFLATED, "unsafe member path"),
    ([("t/summary.json", b"{}")], zipfile.ZIP_BZIP2, "only stored and deflated"),
    ([("t/summary.json", b"{}")], zipfile.ZIP_LZMA, "only stored and deflated"),
    ([("t/a", b"1"), ("t/a", b"2")], zipfile.ZIP_DEFLATED, "twice"),
    # names the attack on this fixes crashed the page with (an OSError out of unpack):
    ([("t/a", b"1"), ("t/a/b", b"2")], zipfile.ZIP_DEFLATED, "runs through another member's file"),
    ([("t/" + "d" * 300 + "/x", b"1")], zipfile.ZIP_DEFLATED, "cannot keep the upload"),
    ([("/".join(["d"] * 2100) + "/x", b"1")], zipfile.ZIP_DEFLATED, "cannot keep the upload"),
    ([(".uploaded.json/x", b"{}")], zipfile.ZIP_DEFLATED, "unsafe member path"),
])
def test_a_hostile_zip_is_refused_and_leaves_nothing(tmp_path, members, method, expect):
    with pytest.warns(UserWarning) if expect == "twice" else contextlib.nullcontext():
        data = zip_of(members, method)
    with pytest.raises(InputError, match=expect) as err:
        table_zip.unpack(data, "evil.zip", tmp_path)
    assert "evil.zip" in str(err.value)
    assert _left_behind(tmp_path) == []
    assert not (tmp_path.parent / "escape.json").exists()


def test_a_zip_is_bounded_by_its_size_members_and_decoded_bytes(tmp_path, monkeypatch):
    monkeypatch.setattr(table_zip, "MAX_UNPACKED_BYTES", 1 << 20)
    bomb = zip_of([("t/summary.json", b"0" * (8 << 20))])  # 8 MiB of zeros: 8 KB compressed
    with pytest.raises(InputError, match="compression bomb"):
        table_zip.unpack(bomb, "bomb.zip", tmp_path)
    assert _left_behind(tmp_path) == []
    monkeypatch.setattr(table_zip, "MAX_UNPACKED_BYTES", 4 << 20)
    monkeypatch.setattr(table_zip, "MAX_KEPT_BYTES", 3 << 20)  # 3 MiB for every upload together
    out, _run = make_table(tmp_path / "scored", "table")  # about 2.3 MB with its run
    table_zip.unpack(zip_folder(out.parent), "first.zip", tmp_path / "ws")
    with pytest.raises(InputError, match="expand past what an upload may unpack"):
        table_zip.unpack(zip_of([("t/a", b"0" * (2 << 20))]), "second.zip", tmp_path / "ws")
    (tmp_path / "ws" / table_zip.UPLOADS_DIR / "extra").write_bytes(b"0" * (1 << 20))
    with pytest.raises(InputError, match="already keeps") as err:
        table_zip.unpack(zip_of([("t/a", b"0")]), "third.zip", tmp_path / "ws")
    assert str(tmp_path) not in str(err.value)  # no server path told to a browser user
    monkeypatch.setattr(table_zip, "MAX_MEMBERS", 10)
    with pytest.raises(InputError, match="at most 10"):
        table_zip.unpack(zip_of([(f"t/{i}", b"x") for i in range(11)]), "many.zip", tmp_path)
    monkeypatch.setattr(table_zip, "MAX_ZIP_BYTES", 100)
    with pytest.raises(InputError, match="at most 100"):
        table_zip.unpack(b"PK" + b"\0" * 200, "big.zip", tmp_path)
    with pytest.raises(InputError, match="not a readable zip"):
        table_zip.unpack(b"not a zip", "plain.zip", tmp_path)
    assert _left_behind(tmp_path) == []


def test_a_link_in_the_zip_is_written_as_a_file_of_its_own_bytes(tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("the server's")
    root = table_zip.unpack(zip_of([(_link("t/run.jsonl", str(secret)), str(secret).encode())]), "l.zip",
                            tmp_path / "ws")
    got = root / "t" / "run.jsonl"
    assert not got.is_symlink() and got.read_bytes() == str(secret).encode()


# --- the page (AppTest) -----------------------------------------------------------------------


def test_in_team_mode_a_table_is_uploaded_and_replayed(team_page, tmp_path):
    at = team_page
    assert [t.key for t in at.text_input] == []  # still no field that takes a location
    out, _run = make_table(tmp_path / "scored" / "nightly", "table")
    at.file_uploader(key="score_table_upload").upload("nightly.zip", zip_folder(out.parent)).run()
    assert not at.exception, at.exception
    pick = at.selectbox(key="score_table_pick")
    assert pick.options == ["nightly.zip (uploaded): nightly/table"]
    assert any(m.label.startswith("Strict") for m in at.metric)
    at.text_input(key="score_table_replay").input(TRAJECTORY).run()
    assert not at.exception, at.exception
    assert [e.value for e in at.error] == []
    assert any(TRAJECTORY in c.value for c in at.code)


def test_in_team_mode_a_hostile_upload_is_a_message(team_page, tmp_path):
    at = team_page
    at.file_uploader(key="score_table_upload").upload("evil.zip", zip_of([("../../x.json", b"{}")])).run()
    assert not at.exception, at.exception
    assert any("not a score table that can be opened" in e.value for e in at.error)
    assert any("unsafe member path" in c.value for c in at.code)
    at.file_uploader(key="score_table_upload").set_value(("empty.zip", zip_of([("notes.txt", b"hi")]),
                                                         "application/zip")).run()
    assert not at.exception, at.exception
    assert any("holds no score table" in w.value for w in at.warning)


# --- bounds read from the zip's end before it is parsed (issue 34) ---------------------------


def _eocd_at(data: bytes) -> int:
    return data.rindex(b"PK\x05\x06")


def with_directory_claiming(data: bytes, *, count: int | None = None, size: int | None = None,
                            zip64: bool = False) -> bytes:
    """``data`` (a zip) with its end-of-central-directory record claiming ``count`` entries and a
    directory of ``size`` bytes; ``zip64``: the claim made by a zip64 record and locator put
    before it (the classic record's fields then say 0xFFFF / 0xFFFFFFFF)."""
    end = _eocd_at(data)
    sig, disk, first, _here, total, cd_size, cd_offset, comment = struct.unpack_from("<4s4H2LH", data, end)
    count = total if count is None else count
    size = cd_size if size is None else size
    if not zip64:
        return data[:end] + struct.pack("<4s4H2LH", sig, disk, first, min(count, 0xFFFF), min(count, 0xFFFF),
                                        size, cd_offset, comment) + data[end + 22:]
    record = struct.pack("<4sQ2H2L4Q", b"PK\x06\x06", 44, 45, 45, 0, 0, count, count, size, cd_offset)
    locator = struct.pack("<4sLQL", b"PK\x06\x07", 0, end, 1)
    classic = struct.pack("<4s4H2LH", sig, disk, first, 0xFFFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF, comment)
    return data[:end] + record + locator + classic + data[end + 22:]


@pytest.fixture
def no_zipfile_parse(monkeypatch):
    """Call it once the test's zips are made: from then on ``zipfile.ZipFile`` refuses to be
    made, so what is refused is refused before parsing."""
    def refuse(*_a, **_k):
        raise AssertionError("zipfile.ZipFile was asked to parse the zip")

    return lambda: monkeypatch.setattr(table_zip.zipfile, "ZipFile", refuse)


@pytest.mark.parametrize("claim, expect", [
    ({"count": 3_850_000, "zip64": True}, "lists 3,850,000 members"),
    ({"count": 65_535}, "lists 65,535 members"),
    ({"size": 199 << 20}, "directory is 208,666,624 bytes"),
    ({"count": 5, "size": 1 << 40, "zip64": True}, "directory is 1,099,511,627,776 bytes"),
])
def test_a_directory_claiming_millions_of_entries_is_refused_before_it_is_parsed(tmp_path, no_zipfile_parse,
                                                                                  claim, expect):
    data = with_directory_claiming(zip_of([("t/summary.json", b"[]"), ("t/run_keys.json", b"[]")]), **claim)
    assert len(data) < 1_000  # a small zip: the claim is what is refused
    no_zipfile_parse()
    with pytest.raises(InputError, match=f"{expect}.*refused before reading it") as err:
        table_zip.unpack(data, "flood.zip", tmp_path)
    assert err.value.source == "flood.zip"
    assert _left_behind(tmp_path) == []


def test_a_directory_holding_more_entries_than_it_declares_is_refused_before_it_is_parsed(
        tmp_path, monkeypatch, no_zipfile_parse):
    """zipfile builds a member for every entry the directory holds, whatever count the record
    declares: the entries are counted by walking their fixed headers."""
    monkeypatch.setattr(table_zip, "MAX_MEMBERS", 10)
    data = with_directory_claiming(zip_of([(f"t/{i}", b"") for i in range(50)]), count=1)
    no_zipfile_parse()
    with pytest.raises(InputError, match=r"more than 10 members \(it declares 1\)"):
        table_zip.unpack(data, "liar.zip", tmp_path)


def test_the_directory_is_read_where_zipfile_reads_it(tmp_path):
    """A zip with a comment, one after other bytes, a zip64 one: counted as zipfile counts them."""
    plain = zip_of([(f"t/{i}", b"x") for i in range(7)])
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.comment = b"PK\x05\x06 is not in a comment zipfile can read, but other bytes are" * 10
        for i in range(3):
            zf.writestr(f"t/{i}", b"x")
    buf64 = io.BytesIO()
    with zipfile.ZipFile(buf64, "w", allowZip64=True) as zf:
        for i in range(4):
            with zf.open(f"t/{i}", "w", force_zip64=True) as fh:
                fh.write(b"x")
    commented = buf.getvalue().replace(b"PK\x05\x06 is", b"PK\x05\x07 is")
    for data, n in ((plain, 7), (b"#!/bin/sh\n" + plain, 7), (commented, 3), (buf64.getvalue(), 4), (b"not a zip", 0)):
        assert table_zip.directory_entries(data, "z.zip") == n
        if n:
            assert len(zipfile.ZipFile(io.BytesIO(data)).infolist()) == n


def test_files_kept_across_uploads_are_capped(tmp_path, monkeypatch):
    """Empty files cost no bytes: the files every upload keeps are counted too."""
    monkeypatch.setattr(table_zip, "MAX_KEPT_FILES", 25)
    ws = tmp_path / "ws"
    table_zip.unpack(zip_of([(f"a/{i}", b"") for i in range(20)]), "first.zip", ws)
    with pytest.raises(InputError, match=r"already keeps 20 files .* holds 6 \(at most 25 together\)") as err:
        table_zip.unpack(zip_of([(f"b/{i}", b"") for i in range(6)]), "second.zip", ws)
    assert str(tmp_path) not in str(err.value)
    table_zip.unpack(zip_of([(f"c/{i}", b"") for i in range(5)]), "third.zip", ws)  # 25: at the cap
    assert table_zip.kept_in(ws / table_zip.UPLOADS_DIR) == table_zip.Kept(25, 0, 2)


def test_uploads_kept_are_capped_in_number(tmp_path, monkeypatch):
    """A zip of no file costs no file of the count (second attack on issue 34, F8: 9,350 zips of
    30 bytes each were kept, a folder and a manifest each): the uploads are counted too."""
    monkeypatch.setattr(table_zip, "MAX_KEPT_UPLOADS", 3)
    ws = tmp_path / "ws"
    empty = [zip_of([]) + b"comment %d" % i for i in range(4)]
    for data in empty[:3]:
        table_zip.unpack(data, "empty.zip", ws)
    with pytest.raises(InputError, match=r"already keeps 3 uploads of score tables \(at most 3\)"):
        table_zip.unpack(empty[3], "empty.zip", ws)
    assert table_zip.kept_in(ws / table_zip.UPLOADS_DIR) == table_zip.Kept(0, 0, 3)


def test_listing_uploads_reads_one_folder_and_each_manifest_once(tmp_path, monkeypatch):
    ws = tmp_path / "ws"
    files = 12
    first = table_zip.unpack(zip_of([("nightly/run.jsonl", b"{}"), ("nightly/table/summary.json", b"[]")] +
                                    [(f"nightly/table/trajectories/part-{i}.parquet", b"") for i in range(files - 2)]),
                             "nightly.zip", ws)
    second = table_zip.unpack(zip_of([(f"flood/{i}", b"") for i in range(500)] + [("t/summary.json", b"[]")]),
                              "flood.zip", ws)
    table_zip._manifests.clear()  # as in a fresh process
    reads: list[Path] = []
    real = table_zip._read_manifest
    monkeypatch.setattr(table_zip, "_read_manifest", lambda sub: reads.append(sub) or real(sub))

    def no_walk(*_a, **_k):
        raise AssertionError("an upload's files were walked to list it")

    monkeypatch.setattr(table_zip.os, "walk", no_walk)
    monkeypatch.setattr(Path, "rglob", no_walk)
    monkeypatch.setattr(table_locations, "tables_under", no_walk)  # nor globbed for its tables
    for _ in range(3):
        listed = table_zip.uploads(ws)
    assert [(u.root, u.name, u.files, u.tables) for u in listed] == [
        (str(second), "flood.zip", 501, ("t",)), (str(first), "nightly.zip", files, ("nightly/table",))]
    assert sorted(reads) == sorted([first, second])  # each manifest read once, not on every listing
    assert table_zip.kept_in(ws / table_zip.UPLOADS_DIR).files == 501 + files  # from the manifests: nothing walked
    shutil.rmtree(second)  # the operator removes an upload: the next listing knows
    assert [u.root for u in table_zip.uploads(ws)] == [str(first)]


def test_an_upload_kept_before_manifests_is_walked_once(tmp_path, monkeypatch):
    ws = tmp_path / "ws"
    root = table_zip.unpack(zip_of([(f"t/{i}", b"ab") for i in range(4)] + [("t/summary.json", b"[]")]), "old.zip", ws)
    (root / table_zip.MARK).write_text(json.dumps({"name": "old.zip"}))  # as an older version wrote it
    (up,) = table_zip.uploads(ws)
    assert (up.name, up.files, up.bytes, up.tables) == ("old.zip", 5, 10, ("t",))


def test_the_page_lists_uploads_without_globbing_them_and_vets_each_table_once(tmp_path, monkeypatch):
    db = tmp_path / "ws.db"
    table_zip.unpack(zip_of([("t/summary.json", b"[]"), ("t/run_keys.json", b"[]")]), "empty.zip", Path(f"{db}.d"))

    def no_glob(*_a, **_k):
        raise AssertionError("an upload was globbed for its tables")

    monkeypatch.setattr(table_locations, "tables_under", no_glob)
    vets: list[tuple] = []
    real = vetting_process.vet_uploads
    monkeypatch.setattr(vetting_process, "vet_uploads",
                        lambda tables, wait=None: vets.extend(tables) or real(tables, wait))
    views.forget_vetting()
    for _ in range(3):  # three renders of the page while it is checked: one check
        views.uploaded_tables(db)
    for _ in range(3):  # and after
        listed = listed_after_checks(db)
    assert [(c.label, c.refused) for c in listed] == [("empty.zip (uploaded): t", None)]
    assert len(vets) == 1
