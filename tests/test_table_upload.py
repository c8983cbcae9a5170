"""A score table uploaded as a zip in team mode (issue 24): unpacked into the workspace with
bounds and no member outside its folder, opened with its upload as its root, so its rows read
nothing of the server's but what the zip carried."""

from __future__ import annotations

import contextlib
import io
import stat
import zipfile
from pathlib import Path

import pytest

from scoring import scoretable, table_zip
from scoring.errors import InputError

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


def zip_of(members: list[tuple[str | zipfile.ZipInfo, bytes]], method: int = zipfile.ZIP_DEFLATED) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", method) as zf:
        for name, data in members:
            zf.writestr(name, data)
    return buf.getvalue()


def _left_behind(folder: Path) -> list[str]:
    base = folder / table_zip.UPLOADS_DIR
    return sorted(p.name for p in base.iterdir()) if base.is_dir() else []


def test_an_uploaded_table_replays_from_the_run_the_zip_carried(tmp_path):
    out, run = make_table(tmp_path / "scored" / "nightly-data", "table")
    ws = tmp_path / "ws"
    root = table_zip.unpack(zip_folder(out.parent), "nightly.zip", ws)
    assert root.parent == ws / table_zip.UPLOADS_DIR and (root / table_zip.MARK).is_file()
    assert table_zip.unpack(zip_folder(out.parent), "again.zip", ws) == root  # the same bytes: unpacked once
    [(found, location)] = scoretable.tables_under([str(root)])
    (t,) = scoretable.open_table(location, root=found)
    row = scoretable.find_row(t, TRAJECTORY)
    assert row["source"] == str(run)  # the row names where it was scored ...
    run.unlink()  # ... and the server's file is not what is read
    traj, header = scoretable.read_trajectory(row, run=t)
    assert traj.id == TRAJECTORY and header.run_id
    assert scoretable.evaluation(t).as_dict()["run_id"] == header.run_id  # the report reads it too


def test_an_uploaded_table_without_its_run_reads_no_file_of_the_server(tmp_path):
    """The run the rows name exists on this machine; the zip did not carry it: nothing is read."""
    out, run = make_table(tmp_path / "scored", "table")
    root = table_zip.unpack(zip_folder(out), "table.zip", tmp_path / "ws")
    (t,) = scoretable.open_table(str(root / "table"), root=str(root))
    row = scoretable.find_row(t, TRAJECTORY)
    assert Path(row["source"]).is_file()
    with pytest.raises(InputError, match="outside its root") as err:
        scoretable.read_trajectory(row, run=t)
    assert str(run) not in str(err.value)
    with pytest.raises(InputError, match="outside its root"):
        scoretable.evaluation(t)


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
