"""An uploaded table is vetted as the page will read it (issue 34, second attack: F1 and F5).

F1: a valid 656 KB table zip whose Parquet parts (518 KB, zstd) hold a 1 MiB string in the
``model`` column of each of 2,000 rows was accepted, and the team Score tables page — it being
every visitor's default — went past 6 GB of memory rendering it. F5: an upload whose run's
aggregates are ``{}`` was accepted and became the default, a page that cannot show its run.
Vetting now decodes every run's rows a few at a time (measured, not read from the footer), reads
its aggregates and its Inconclusive index as the page does, and refuses the upload."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from scoring import errors
from scoring.dask_engine import table_layout, table_reader, table_zip, vetting_process
from scoring.errors import InputError
from scoring.workspace import views

from .conftest import ROOT
from .test_table_upload import checks_ended, listed_after_checks, zip_folder
from .test_team_tables import make_table


def run_parts(out: Path) -> list[Path]:
    return sorted((out / table_layout.TABLE_DIR).rglob("*.parquet"))


def rewrite_models(out: Path, value: str, rows: int, row_group_size: int) -> None:
    """The first ``rows`` rows' ``model`` set to ``value``, the parts written again (zstd, no
    dictionary: the value is stored whole on each row, and compresses to almost nothing)."""
    done = 0
    for part in run_parts(out):
        table = pq.read_table(part)
        meta = pq.ParquetFile(part).schema_arrow.metadata
        models = [value if done + i < rows else v for i, v in enumerate(table.column("model").to_pylist())]
        done += len(models)
        at = table.schema.get_field_index("model")
        table = table.set_column(at, "model", pa.array(models, type=table.schema.field("model").type))
        pq.write_table(table.replace_schema_metadata(meta), part, compression="zstd", use_dictionary=False,
                       row_group_size=row_group_size)


@pytest.fixture
def table(tmp_path):
    out, _run = make_table(tmp_path / "scored" / "nightly", "table")
    return out


@pytest.fixture
def vet_here(monkeypatch):
    """An upload's check run in this process, so that a bound a test lowers reaches it (the
    check's own process, and its bounds, are tested in test_vetting_process.py)."""
    monkeypatch.setattr(vetting_process, "vet_uploads", lambda tables, wait=None: [
        table_reader.vet(location, root=root, every_run=True) for location, root in tables])


def test_a_table_whose_rows_say_they_decode_to_gigabytes_is_refused_at_upload(tmp_path, table):
    rewrite_models(table, "a" * (1 << 20), 2_000, 100)
    data = zip_folder(table.parent)
    assert len(data) < 1 << 20  # the attack's size: under a megabyte
    with pytest.raises(InputError, match="refused as a likely bomb") as refused:
        views.unpack_table(tmp_path / "app.db", "bomb.zip", data)
    assert refused.value.source == "bomb.zip" and "the upload is not kept" in refused.value.message
    assert views.uploaded_tables(tmp_path / "app.db").tables == ()


def test_rows_that_decode_large_are_measured_not_taken_from_the_footer(tmp_path, table, monkeypatch, vet_here):
    # Each row group within the footer's bound (a part's footer is the writer's word), and any
    # 1,024 rows together past the measured one: refused by what the rows decode to.
    monkeypatch.setattr(table_reader, "MAX_ROW_WINDOW_BYTES", 1 << 20)
    rewrite_models(table, "b" * 1_500, 2_000, 512)  # 512 rows of 1.5 KB: 768 KB a group
    groups = [pq.ParquetFile(p).metadata.row_group(0).total_byte_size for p in run_parts(table)]
    assert max(groups) < 1 << 20
    with pytest.raises(InputError, match=r"near row [\d,]+\): not rows the engine writes"):
        views.unpack_table(tmp_path / "app.db", "wide.zip", zip_folder(table.parent))


def test_a_table_whose_aggregates_are_not_the_engines_is_refused_at_upload(tmp_path, table):
    (aggregates,) = (table / table_layout.RUN_AGGREGATES_DIR).glob("*.json")
    aggregates.write_text("{}")
    with pytest.raises(InputError, match=r"aggregates of run .* are not the engine's"):
        views.unpack_table(tmp_path / "app.db", "nightly.zip", zip_folder(table.parent))


def test_the_engines_own_table_is_accepted(tmp_path, table):
    root = views.unpack_table(tmp_path / "app.db", "nightly.zip", zip_folder(table.parent))
    (choice,) = views.uploaded_tables(tmp_path / "app.db").tables
    assert choice.refused is None and choice.root == root


VETTING = """
import resource, sys
from scoring.workspace import views
data = open(sys.argv[1], "rb").read()
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
try:
    views.unpack_table(sys.argv[2], "bomb.zip", data)
except Exception as exc:
    print(type(exc).__name__)
print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * 1024)
"""


def test_vetting_one_huge_value_takes_no_memory_to_speak_of(tmp_path, table):
    # One 400 MiB value (a 643 KB zip): the footer refuses it before a row is decoded; decoding
    # it took 818 MB of memory beside the process's.
    rewrite_models(table, "c" * (400 << 20), 1, 5_000)
    bomb = tmp_path / "bomb.zip"
    bomb.write_bytes(zip_folder(table.parent))
    got = subprocess.run([sys.executable, "-c", VETTING, str(bomb), str(tmp_path / "app.db")], capture_output=True,
                         text=True, timeout=300, cwd=Path(__file__).parent.parent)
    kind, grown = got.stdout.split()
    assert kind == "InputError", got.stderr
    assert int(grown) < 64 << 20, f"{int(grown):,} bytes more for vetting a {bomb.stat().st_size:,}-byte upload"


def test_a_listing_in_a_new_process_does_not_vet_again_what_the_upload_vetted(tmp_path, table, monkeypatch):
    """Vetting reads every run's rows; an upload vetted under today's checks is noted so beside
    the uploads, where no member reaches (second attack on issue 34, F7: a server's first listing
    of 20 tables with 16 MiB indexes took tens of seconds, every restart). Under other checks (a note of
    another version, or none) it is vetted again."""
    db = tmp_path / "app.db"
    root = views.unpack_table(db, "nightly.zip", zip_folder(table.parent))
    views.forget_vetting()  # a new process

    def vetted_again(*_a, **_k):
        raise AssertionError("vetted again")

    monkeypatch.setattr(vetting_process, "vet_uploads", vetted_again)
    (choice,) = views.uploaded_tables(db).tables
    assert choice.refused is None
    monkeypatch.setattr(table_zip, "VET_VERSION", table_zip.VET_VERSION + 1)
    views.forget_vetting()
    asked: list = []
    monkeypatch.setattr(vetting_process, "vet_uploads", lambda tables, wait=None: asked.append(tables) or [None])
    (choice,) = views.uploaded_tables(db).tables
    assert choice.checking  # checked again, in the background
    checks_ended([root])
    assert asked == [[(choice.location, root)]]
    assert table_zip.vetted_version(root) == table_zip.VET_VERSION
    assert table_zip.VETTED not in {p.name for p in Path(root).iterdir()}  # beside the upload, not in it


def test_an_honest_table_of_one_large_row_group_is_accepted(tmp_path, table):
    """20,000 of the engine's rows in one row group, as its writer lays out a large run (second
    confirmation attack, V3: each 64-row batch was measured as its whole row group's buffers, so
    a real table past 1 MiB a row group was refused as a bomb): each batch counts its own rows."""
    parts = run_parts(table)
    rows = pa.concat_tables([pq.read_table(p) for p in parts])
    meta = pq.ParquetFile(parts[0]).schema_arrow.metadata
    ids = rows.column("trajectory_id").to_pylist()
    big = pa.concat_tables([rows] * 10)
    big = big.set_column(0, "trajectory_id", pa.array(ids + [f"{ids[i % len(ids)]}-{i}" for i in range(len(ids),
                                                                                                       big.num_rows)]))
    for p in parts:
        p.unlink()
    pq.write_table(big.replace_schema_metadata(meta), parts[0], row_group_size=big.num_rows)
    assert pq.ParquetFile(parts[0]).metadata.num_row_groups == 1 and big.nbytes > table_reader.MAX_ROW_WINDOW_BYTES // 4
    root = views.unpack_table(tmp_path / "app.db", "honest.zip", zip_folder(table.parent))
    assert views.uploaded_tables(tmp_path / "app.db").tables[0].root == root


@pytest.mark.parametrize("damage", ["a figure as text", "a count as a fraction"])
def test_aggregates_whose_figures_are_not_numbers_are_refused_at_upload(tmp_path, table, damage):
    """Second confirmation attack, V4: strict.value "abc" passed the upload, became the default
    table and the page raised a TypeError in its arithmetic."""
    (aggregates,) = (table / table_layout.RUN_AGGREGATES_DIR).glob("*.json")
    got = json.loads(aggregates.read_text())
    if damage == "a figure as text":
        got["summary"]["strict"]["value"] = "abc"
    else:
        got["summary"]["strict"]["denominator"] = 2.5
    aggregates.write_text(json.dumps(got))
    with pytest.raises(InputError, match=r"aggregates of run .* are not the engine's \(TypeError"):
        views.unpack_table(tmp_path / "app.db", "nightly.zip", zip_folder(table.parent))


def note_by_a_process_that_died(root: str) -> None:
    """The note a process that died checking the upload at ``root`` left (it wrote it, and ended)."""
    subprocess.run([sys.executable, "-c", "import sys; from scoring.dask_engine import table_zip; "
                    "table_zip.note_checking(sys.argv[1])", root], check=True, cwd=ROOT)
    note = (Path(root).parent / table_zip.VETTED / Path(root).name).read_text()
    assert note.startswith(table_zip.CHECKING) and not table_zip.check_under_way(root)


def test_an_upload_being_checked_is_said_to_be_and_offered_once_checked(tmp_path, table, monkeypatch):
    """The attack's third pass: while an upload was checked, every other visitor's listing (and
    the uploader's own rerun) read its note as a check that never ended, named it refused, and
    remembered that until the server restarted. A check under way (its note written by a process
    still running) is said to be under way, never remembered, and the upload offered once it ends;
    the same bytes uploaded meanwhile are told so, and the upload is kept."""
    db = tmp_path / "app.db"
    data = zip_folder(table.parent)
    root = views.unpack_table(db, "nightly.zip", data)
    table_zip.note_checking(root)  # this process, checking it now
    views.forget_vetting()
    (choice,) = views.uploaded_tables(db).tables
    assert choice.refused is not None and "under way" in choice.refused and choice.checking
    with pytest.raises(InputError, match="being checked now") as err:
        views.unpack_table(db, "again.zip", data)
    assert err.value.source == "again.zip" and Path(root).exists()
    table_zip.note_vetted(root, table_zip.VET_VERSION)  # the check ended
    (choice,) = views.uploaded_tables(db).tables
    assert choice.refused is None and not choice.checking


def test_a_check_that_fails_in_the_server_leaves_no_note(tmp_path, table, monkeypatch):
    """A check the server itself failed to finish (an error of its own, not the upload's) leaves
    neither the upload nor a note that would refuse the same bytes for good."""
    db = tmp_path / "app.db"

    def broken(*_a, **_k):
        raise RuntimeError("the server's own failure")

    monkeypatch.setattr(vetting_process, "vet_uploads", broken)
    with pytest.raises(RuntimeError):
        views.unpack_table(db, "nightly.zip", zip_folder(table.parent))
    monkeypatch.undo()
    root = views.unpack_table(db, "nightly.zip", zip_folder(table.parent))
    assert table_zip.vetted_version(root) == table_zip.VET_VERSION


def test_an_upload_whose_check_never_ended_is_checked_again_in_a_process_of_its_own(tmp_path, table, monkeypatch):
    """A server stopped while it checked an upload (a restart, a kill) left the note of a check
    that never ended, and every later listing refused that valid upload for good (the fourth
    attack). The check runs in a bounded process of its own, so a bomb cannot take the server down
    with it: the upload is checked again, by the listing and by the same bytes uploaded again."""
    db = tmp_path / "app.db"
    data = zip_folder(table.parent)
    root = views.unpack_table(db, "nightly.zip", data)
    note_by_a_process_that_died(root)
    views.forget_vetting()  # a new process
    checked: list[int] = []
    real = vetting_process.vet_uploads
    monkeypatch.setattr(vetting_process, "vet_uploads",
                        lambda tables, wait=None: checked.append(len(tables)) or real(tables, wait))
    (choice,) = listed_after_checks(db)
    assert choice.refused is None and checked == [1]
    assert table_zip.vetted_version(root) == table_zip.VET_VERSION  # noted: no later process checks it again
    assert views.unpack_table(db, "nightly.zip", data) == root and checked == [1]


def test_kept_bytes_uploaded_again_are_not_checked_again_and_a_failed_recheck_removes_no_one(tmp_path, table,
                                                                                            monkeypatch):
    """The fourth attack: uploading bytes already kept checked them again, and a check that did not
    pass (its process killed) removed the folder every member was offered. Bytes kept and checked
    under today's checks are not checked again; bytes kept under an older version's are, and a
    recheck that does not pass forgets the note (each listing checks them again) but keeps them."""
    db = tmp_path / "app.db"
    data = zip_folder(table.parent)
    root = views.unpack_table(db, "nightly.zip", data)

    def killed(tables, wait=None):
        return ["its check ended without an answer (its process ended with code -9)"] * len(tables)

    monkeypatch.setattr(vetting_process, "vet_uploads", killed)
    assert views.unpack_table(db, "again.zip", data) == root  # not checked: kept and passed
    table_zip.note_vetted(root, table_zip.VET_VERSION - 1)
    with pytest.raises(InputError, match="ended without an answer") as err:
        views.unpack_table(db, "again.zip", data)
    assert err.value.source == "again.zip" and "not kept" not in err.value.message
    assert Path(root).exists() and table_zip.vetted_version(root) is None
    monkeypatch.undo()
    views.forget_vetting()
    (choice,) = listed_after_checks(db)
    assert choice.refused is None


def test_a_row_group_of_many_rows_is_bounded_whole(tmp_path, table, monkeypatch, vet_here):
    """Second confirmation attack, V2: one row group of 65,536 rows at 15.5 KB (within the window's
    average) decoded whole to 1 GB (2.1 GB peak) before anything was measured: a row group's
    footer is held to ``MAX_ROW_GROUP_BYTES`` whatever its rows (here lowered to 1 MiB)."""
    monkeypatch.setattr(table_reader, "MAX_ROW_GROUP_BYTES", 1 << 20)
    parts = run_parts(table)
    rows = pa.concat_tables([pq.read_table(p) for p in parts])
    meta = pq.ParquetFile(parts[0]).schema_arrow.metadata
    at = rows.schema.get_field_index("model")
    rows = rows.set_column(at, "model", pa.array(["d" * 1_500] * rows.num_rows, type=rows.schema.field(at).type))
    for p in parts:
        p.unlink()
    pq.write_table(rows.replace_schema_metadata(meta), parts[0], row_group_size=rows.num_rows, use_dictionary=False)
    with pytest.raises(InputError, match="row group 0 of a part says"):
        views.unpack_table(tmp_path / "app.db", "wide.zip", zip_folder(table.parent))


def test_the_inconclusive_index_is_read_for_its_columns_and_bounded(tmp_path, table, monkeypatch, vet_here):
    """Second confirmation attack, V10: a 3 KB index with an extra column of 64 MiB values was
    read whole. Only its own columns are read now, and a row group past ``MAX_ROW_GROUP_BYTES``
    (here lowered to 1 MiB) is refused; a small extra column is never decoded, the table accepted."""
    (index,) = (table / table_layout.INCONCLUSIVE_DIR).rglob("*.parquet")
    original = pq.read_table(index)
    junk = pa.array(["e" * 100] * original.num_rows)
    pq.write_table(original.append_column("junk", junk), index)
    views.unpack_table(tmp_path / "small.db", "junk.zip", zip_folder(table.parent))
    monkeypatch.setattr(table_reader, "MAX_ROW_GROUP_BYTES", 1 << 20)
    pq.write_table(original.append_column("junk", pa.array(["e" * (1 << 20)] * original.num_rows)), index,
                   compression="zstd", use_dictionary=False)
    with pytest.raises(InputError, match=r"Inconclusive index of run .* refused as a likely bomb"):
        views.unpack_table(tmp_path / "app.db", "index.zip", zip_folder(table.parent))


def test_the_page_says_an_upload_is_being_checked_and_offers_it_once_checked(app, tmp_path, table, monkeypatch):
    monkeypatch.setenv("LITMUS_REVIEW_TEAM_MODE", "1")
    db = tmp_path / "app.db"
    root = views.unpack_table(db, "nightly.zip", zip_folder(table.parent))
    table_zip.note_checking(root)  # this process, checking it now
    views.forget_vetting()
    app.switch_page("pages/score_tables.py").run()
    assert not app.exception, app.exception
    assert any("being checked" in i.value for i in app.info)
    assert [c.value for c in app.code if "nightly.zip" in c.value] == [
        f"nightly.zip (uploaded): nightly/table: {views.CHECK_UNDER_WAY}"]
    assert not [w for w in app.warning if "cannot be opened" in w.value]
    table_zip.note_vetted(root, table_zip.VET_VERSION)
    app.run()
    assert not any("being checked" in i.value for i in app.info)
    assert app.selectbox(key="score_table_pick").options == ["nightly.zip (uploaded): nightly/table"]


@pytest.fixture
def slots_held():
    """Both checking slots held (two other members' slow checks), released at the test's end."""
    # a background check an earlier test's listing started may still hold one: waited for
    held = [vetting_process._checks_running.acquire(timeout=120) for _ in range(vetting_process.MAX_CHECKS_AT_ONCE)]
    assert all(held), "a check of an earlier test still holds a slot"
    try:
        yield
    finally:
        for _ in held:
            vetting_process._checks_running.release()


def test_a_listing_never_waits_behind_other_members_checks(tmp_path, table, slots_held):
    """The fifth attack: two members' slow uploads held both checking slots, and every listing
    (every render of the Score tables page) that had an upload to check waited behind them; the
    sixth: a listing with a slot free ran the check inside the render (minutes a render). A
    listing never checks in its own thread: the upload is said to be under way at once, and
    checked in the background when a slot is free."""
    db = tmp_path / "app.db"
    for _ in range(vetting_process.MAX_CHECKS_AT_ONCE):
        vetting_process._checks_running.release()  # free for the upload's own check
    try:
        root = views.unpack_table(db, "nightly.zip", zip_folder(table.parent))
    finally:
        for _ in range(vetting_process.MAX_CHECKS_AT_ONCE):
            assert vetting_process._checks_running.acquire(timeout=60)
    table_zip.forget_note(root)  # to be checked by a listing
    views.forget_vetting()
    began = time.monotonic()
    (choice,) = views.uploaded_tables(db).tables
    assert time.monotonic() - began < views.UPLOAD_CHECK_WAIT_S / 2  # said at once, never waited for a slot
    assert choice.checking and choice.refused == views.CHECK_UNDER_WAY and views.still_checking([root])
    assert table_zip.check_under_way(root)  # noted: another process checks it not again
    (again,) = views.uploaded_tables(db).tables
    assert again.checking and views.still_checking([root])


def test_the_listings_check_ends_in_the_background_and_the_upload_is_offered(tmp_path, table, monkeypatch):
    """Two renders at once of an upload kept unchecked start one check (before, each render ran its
    own of the same bytes), which the page's poll sees end."""
    db = tmp_path / "app.db"
    root = views.unpack_table(db, "nightly.zip", zip_folder(table.parent))
    table_zip.forget_note(root)
    views.forget_vetting()
    real, checks = vetting_process.vet_uploads, []
    monkeypatch.setattr(vetting_process, "vet_uploads",
                        lambda tables, wait=None: checks.append(tables) or time.sleep(0.5) or real(tables, wait))
    renders = [threading.Thread(target=views.uploaded_tables, args=(db,)) for _ in range(3)]
    for r in renders:
        r.start()
    for r in renders:
        r.join(30)
    checks_ended([root])
    assert len(checks) == 1
    (choice,) = views.uploaded_tables(db).tables
    assert choice.refused is None and not choice.checking
    assert table_zip.vetted_version(root) == table_zip.VET_VERSION


def test_an_uploaders_own_request_waits_for_a_check_at_most_its_bound_and_the_upload_is_kept(
        tmp_path, table, monkeypatch, slots_held):
    """Two other members' slow uploads hold both checks: an upload's request waits at most
    ``UPLOAD_CHECK_WAIT_S`` (before, as long as their checks took: up to 10 minutes each), is told
    it is kept and waiting (``UploadWaiting``, not a refusal), and a later listing checks it."""
    monkeypatch.setattr(views, "UPLOAD_CHECK_WAIT_S", 0.5)
    db = tmp_path / "app.db"
    began = time.monotonic()
    with pytest.raises(errors.UploadWaiting, match="waiting its turn to be checked") as err:
        views.unpack_table(db, "nightly.zip", zip_folder(table.parent))
    assert time.monotonic() - began < 10
    assert err.value.source == "nightly.zip"
    views.forget_vetting()
    (choice,) = views.uploaded_tables(db).tables  # a listing meanwhile: under way (waiting for a slot)
    assert choice.checking and choice.refused == views.CHECK_UNDER_WAY
    for _ in range(vetting_process.MAX_CHECKS_AT_ONCE):
        vetting_process._checks_running.release()  # the others' checks end
    try:
        checks_ended([choice.root])
    finally:
        for _ in range(vetting_process.MAX_CHECKS_AT_ONCE):
            assert vetting_process._checks_running.acquire(timeout=60)
    (choice,) = views.uploaded_tables(db).tables
    assert choice.refused is None and not choice.checking
    assert table_zip.vetted_version(choice.root) == table_zip.VET_VERSION


def test_an_upload_is_noted_passed_only_when_every_one_of_its_tables_passed(tmp_path, table, monkeypatch):
    """The sixth attack's worst: a listing's re-check noted the whole upload passed when one of its
    tables passed, so the next process offered its refused bomb (and decoded it). An upload
    of a good table and a refused one: the refused one stays refused in a new process, and the
    upload is never noted passed."""
    two = tmp_path / "two"
    shutil.copytree(table.parent, two / "a")
    shutil.copytree(table.parent, two / "b")
    db = tmp_path / "app.db"
    refuse_b = lambda tables, wait=None: [None if "/b" not in loc else "a likely bomb" for loc, _root in tables]  # noqa: E731
    monkeypatch.setattr(vetting_process, "vet_uploads", lambda tables, wait=None: [None] * len(tables))
    root = views.unpack_table(db, "two.zip", zip_folder(two))
    note_by_a_process_that_died(root)  # a server stopped mid-check (or an upgrade's new checks)
    monkeypatch.setattr(vetting_process, "vet_uploads", refuse_b)
    for _process in range(2):
        views.forget_vetting()  # a new process
        listed = {c.label.rsplit(": ", 1)[-1]: c.refused for c in listed_after_checks(db)}
        assert listed == {"two/a/table": None, "two/b/table": "a likely bomb"}, listed
        assert table_zip.vetted_version(root) is None


def test_a_check_stopped_from_outside_is_checked_again_then_refused(tmp_path, table, monkeypatch):
    """The sixth attack: a checking process killed from outside (the memory killer, an operator)
    was a refusal for the server's whole life, and at the upload door removed a good upload. Not
    checked is neither: the upload is kept and said to be waiting, a listing checks it again, and
    after ``MAX_INTERRUPTED_CHECKS`` such stops it is refused (never having passed: removed)."""
    db = tmp_path / "app.db"
    stops = []

    def stopped(tables, wait=None):
        stops.append(1)
        raise errors.CheckInterrupted("its check was stopped from outside the server (signal 9)")

    monkeypatch.setattr(vetting_process, "vet_uploads", stopped)
    with pytest.raises(errors.UploadWaiting, match="stopped from outside") as err:
        views.unpack_table(db, "nightly.zip", zip_folder(table.parent))
    assert err.value.source == "nightly.zip" and "not kept" not in err.value.message
    views.forget_vetting()
    for n in range(1, views.MAX_INTERRUPTED_CHECKS + 1):
        (choice,) = views.uploaded_tables(db).tables
        assert choice.checking, n  # not refused: checked again by this listing
        checks_ended([choice.root])
        assert len(stops) == 1 + n
    # refused, never having passed a check: removed, as its door removes a new upload that fails
    assert views.uploaded_tables(db).tables == () and not Path(choice.root).exists()
    assert len(stops) == 1 + views.MAX_INTERRUPTED_CHECKS


def test_a_checking_process_killed_from_outside_is_not_an_answer(tmp_path, table):
    """``vet_uploads`` whose child is SIGKILLed by someone else: ``CheckInterrupted``, not a refusal."""
    child_started = threading.Event()
    real_popen = vetting_process.subprocess.Popen

    class Killed(real_popen):  # type: ignore[misc, valid-type]
        def __init__(self, *a, **k):
            super().__init__(*a, **k)
            child_started.set()
            threading.Timer(0.2, self.kill).start()  # not the server's watch

    vetting_process.subprocess.Popen = Killed  # type: ignore[misc]
    try:
        with pytest.raises(errors.CheckInterrupted, match="stopped from outside"):
            vetting_process.vet_uploads([(str(table), str(table.parent))])
    finally:
        vetting_process.subprocess.Popen = real_popen  # type: ignore[misc]
    assert child_started.is_set()


def test_an_upload_kept_waiting_that_its_background_check_refuses_is_removed(tmp_path, table, monkeypatch,
                                                                             slots_held):
    """The seventh attack: with both checks held for the door's wait, an upload of a good table and
    a bomb was kept waiting, and its background check refused the bomb but kept the folder (each
    such upload used the workspace's caps, and was checked again by every new process). Refused
    by its first check, it is removed as its door would have removed it; one kept and passed
    before is not."""
    monkeypatch.setattr(views, "UPLOAD_CHECK_WAIT_S", 0.2)
    two = tmp_path / "two"
    shutil.copytree(table.parent, two / "a")
    shutil.copytree(table.parent, two / "b")
    db = tmp_path / "app.db"
    with pytest.raises(errors.UploadWaiting):
        views.unpack_table(db, "two.zip", zip_folder(two))
    assert len(list((Path(f"{db}.d") / table_zip.UPLOADS_DIR).glob("*/"))) >= 1
    # the others' checks end (a check of this process, without the slots the fixture holds)
    monkeypatch.setattr(vetting_process, "vet_uploads",
                        lambda tables, wait=None: [None if "/b" not in loc else "a likely bomb" for loc, _r in tables])
    listed = views.uploaded_tables(db).tables
    (root,) = {c.root for c in listed}
    assert listed[0].checking and not any(c.refused is None for c in listed), listed  # never offered
    checks_ended([root])
    assert not Path(root).exists() and views.uploaded_tables(db).tables == ()
