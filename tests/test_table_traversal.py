"""A score table names its runs' keys, and the files it holds: a key that is not a run key, or a
file that leads out of the table, refuses the table before anything it names is read (issue 34).

The hostile table is the one the attack used: an upload (or a table under an operator's root)
whose ``index.json`` / ``run_keys.json`` names ``x/../…/VICTIM/trajectories/run_key=KEY`` for a
run key, so that the page read the rows and summaries of another table the server can read.
A table that fails is named beside the list of tables and never offered, so it is never any
visitor's default, and the page stays up.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from scoring.dask_engine import table_layout, table_locations, table_reader, table_writer, table_zip
from scoring.errors import InputError
from scoring.workspace import views

from . import test_team_tables
from .conftest import SAMPLES
from .test_engine import run_inline
from .test_table_upload import listed_after_checks, zip_folder
from .test_team_tables import make_table

team_page = test_team_tables.team_page  # the fixture: the Score tables page in team mode
VICTIM_SAMPLE = "compare-m2.jsonl"
VICTIM_RUN = "victim-p2q"
"""The victim's run: the sample's, renamed (the app imports the bundled samples on start, so the
sample's own names are on every page)."""
VICTIM_ID = f"{VICTIM_RUN}-t00000"  # a trajectory of the victim's table only
GOOD_ID = "observed-m1-t00079"


def victim_table(folder: Path) -> tuple[Path, str]:
    """Another team's table, on the same server, under no root and never uploaded: (the table,
    its run key)."""
    folder.mkdir(parents=True, exist_ok=True)
    run = folder / f"{VICTIM_RUN}.jsonl"
    run.write_bytes((SAMPLES / VICTIM_SAMPLE).read_bytes().replace(b"compare-m2", VICTIM_RUN.encode()))
    results = run_inline([run], folder, 1 << 16)
    out = folder / "out"
    table_writer.commit_results(str(out), str(out), {}, results)
    return out, str(results[0].run_key)


def climbing_key(table: Path, target: Path, folder: str = table_layout.TABLE_DIR, prefix: str = "run_key=",
                 suffix: str = "") -> str:
    """The name a hostile index gives for a run key so that ``TABLE/FOLDER/PREFIX NAME SUFFIX``
    is ``target`` (``x/``, then the climb out of ``FOLDER/PREFIX x``): the attack's
    ``x/../../…/VICTIM/trajectories/run_key=KEY``."""
    return "x/" + os.path.relpath(str(target).removesuffix(suffix), table / folder / f"{prefix}x")


def hostile(table: Path, victim: Path, victim_key: str, where: str) -> str:
    """Rewrite ``table``'s key lists (``where``: index.json, run_keys.json, or both) so that its
    one run's key climbs to the victim's partition; the key."""
    key = climbing_key(table, victim / table_layout.TABLE_DIR / f"run_key={victim_key}")
    if where in ("index", "both"):
        index = json.loads((table / table_layout.INDEX_FILE).read_text())
        index[0][0] = key
        (table / table_layout.INDEX_FILE).write_text(json.dumps(index))
    if where in ("keys", "both"):
        (table / table_layout.KEYS_FILE).write_text(json.dumps([key]))
    if where == "keys":
        (table / table_layout.INDEX_FILE).unlink()  # a table of the layout without an index
    return key


@pytest.fixture(scope="module")
def scored(tmp_path_factory) -> tuple[Path, str, Path]:
    """Scored once for the module: the victim's table (and its key) and a good table."""
    base = tmp_path_factory.mktemp("scored")
    victim, victim_key = victim_table(base / "victim")
    good, _run = make_table(base / "good" / "nightly", "table")
    return victim.parent, victim_key, good.parent


@pytest.fixture
def tables(scored, tmp_path):
    """(the victim's table and key, a good table, the table to make hostile), copies of their
    own (each with the run it scored beside it)."""
    victim, victim_key, good = scored
    shutil.copytree(victim, tmp_path / "victim")
    shutil.copytree(good, tmp_path / "good" / "nightly")
    shutil.copytree(good, tmp_path / "bad" / "evil")
    (tmp_path / "bad" / "evil" / "table").rename(tmp_path / "bad" / "evil" / "t")
    return (tmp_path / "victim" / "out", victim_key, tmp_path / "good" / "nightly" / "table",
            tmp_path / "bad" / "evil" / "t")


def test_the_attack_reads_the_victims_rows_through_the_climb(tables):
    """The climb as the hostile table names it does lead to the victim's partition (what the
    refusals below stop): the same path, read as a folder, holds the victim's rows."""
    victim, victim_key, _good, bad = tables
    key = hostile(bad, victim, victim_key, "both")
    assert key.startswith("x/../../")
    climbed = Path(os.path.normpath(bad / table_layout.TABLE_DIR / f"run_key={key}"))
    assert climbed == victim / table_layout.TABLE_DIR / f"run_key={victim_key}"
    summary = climbing_key(bad, victim / table_layout.SUMMARIES_DIR / f"{victim_key}.json",
                           table_layout.SUMMARIES_DIR, "",
                           ".json")
    assert Path(os.path.normpath(bad / table_layout.SUMMARIES_DIR / f"{summary}.json")).is_file()


@pytest.mark.parametrize("where", ["index", "keys", "both"])
def test_a_key_that_is_not_a_run_key_refuses_the_table(tables, where):
    victim, victim_key, _good, bad = tables
    hostile(bad, victim, victim_key, where)
    named = table_layout.INDEX_FILE if where != "keys" else table_layout.KEYS_FILE
    with pytest.raises(InputError, match=f"{named} names .* which is not one") as err:
        table_reader.open_table(str(bad), root=str(bad.parent))
    why = table_reader.vet(str(bad), root=str(bad.parent))
    assert why is not None and "not a run key" not in why and "64 hex digits" in why
    assert str(victim) not in why and str(bad) not in why  # what a browser is told names no server path
    assert err.value.source == str(bad)


def test_the_engines_reader_refuses_a_name_that_is_not_a_run_key(tables):
    victim, victim_key, _good, bad = tables
    hostile(bad, victim, victim_key, "keys")
    with pytest.raises(InputError, match=r"run_keys\.json names .* which is not one"):
        table_layout.read_summaries(str(bad))
    assert table_layout.read_summaries(str(bad), keys_checked=False)  # the writer still reads a damaged index back


def test_no_run_is_made_of_a_key_that_is_not_one(tables):
    """Every door that joins a key into a path (summaries, aggregates, a run's partition and its
    Inconclusive index) is behind the one check a run is made with."""
    victim, victim_key, _good, bad = tables
    key = climbing_key(bad, victim / table_layout.SUMMARIES_DIR / f"{victim_key}.json", table_layout.SUMMARIES_DIR,
                       "", ".json")
    with pytest.raises(InputError, match="not one"):
        table_reader.TableRun(str(bad), key, {"run_id": "r", "model": "m"}, None, lazy=True)
    with pytest.raises(InputError, match="not one"):
        table_reader._run_file(str(bad), table_layout.SUMMARIES_DIR, key, "{}")
    with pytest.raises(InputError, match="not one"):
        table_reader._run_file(str(bad), table_layout.RUN_AGGREGATES_DIR, "../" * 6 + "etc/passwd", "{}")


def _link(path: Path, target: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path)
    else:
        path.unlink()
    path.symlink_to(target)


@pytest.mark.parametrize("door", ["summaries", "aggregates", "partition", "part", "inconclusive", "index"])
def test_a_file_of_the_table_that_leads_out_of_it_is_not_read(tables, door):
    """Under an operator's root a table may hold links (an upload holds none: its members are
    written as files): each file the reader opens must be inside the table once they are
    followed, so a real run key cannot be made to read another table's files either."""
    victim, victim_key, _good, bad = tables
    (t,) = table_reader.open_table(str(bad), root=str(bad.parent))
    key = t.run_key
    mine = {"summaries": (bad / table_layout.SUMMARIES_DIR / f"{key}.json", victim / table_layout.SUMMARIES_DIR /
                          f"{victim_key}.json"),
            "aggregates": (bad / table_layout.RUN_AGGREGATES_DIR / f"{key}.json",
                           victim / table_layout.RUN_AGGREGATES_DIR / f"{victim_key}.json"),
            "partition": (bad / table_layout.TABLE_DIR / f"run_key={key}",
                          victim / table_layout.TABLE_DIR / f"run_key={victim_key}"),
            "inconclusive": (bad / table_layout.INCONCLUSIVE_DIR / f"run_key={key}" / "part-0.parquet",
                             victim / table_layout.INCONCLUSIVE_DIR / f"run_key={victim_key}" / "part-0.parquet"),
            "index": (bad / table_layout.INDEX_FILE, victim / table_layout.INDEX_FILE)}
    if door == "part":
        part = next((bad / table_layout.TABLE_DIR / f"run_key={key}").glob("*.parquet"))
        mine["part"] = (part, next((victim / table_layout.TABLE_DIR / f"run_key={victim_key}").glob("*.parquet")))
    path, target = mine[door]
    _link(path, target)
    table_reader._run_file.cache_clear()
    with pytest.raises(InputError, match="leads outside the table") as err:
        if door == "index":
            table_reader.open_table(str(bad), root=str(bad.parent))
        (t,) = table_reader.open_table(str(bad), root=str(bad.parent))
        if door == "summaries":
            t.summary  # noqa: B018 (the property reads the file)
        elif door == "aggregates":
            t.aggregates  # noqa: B018
        elif door == "inconclusive":
            table_reader.inconclusive_ids(t)
        else:
            table_reader.first_rows(t, ["trajectory_id"], 10)
    assert str(victim) not in err.value.message and VICTIM_ID not in str(err.value)


def test_a_traversal_upload_is_refused_and_not_kept(tables, tmp_path):
    victim, victim_key, _good, bad = tables
    hostile(bad, victim, victim_key, "both")
    db = tmp_path / "ws.db"
    with pytest.raises(InputError, match="its score table evil/t cannot be opened") as err:
        views.unpack_table(db, "evil.zip", zip_folder(bad.parent))
    assert err.value.source == "evil.zip" and str(tmp_path) not in str(err.value)
    assert views.uploaded_tables(db).tables == ()  # not kept: nothing listed, nothing on the disk
    assert [p.name for p in (tmp_path / "ws.db.d" / table_zip.UPLOADS_DIR).iterdir()] == [table_zip.LOCK]


def _place(db: Path, folder: Path, name: str) -> str:
    """An upload kept before its tables were vetted (as one kept by an older version is): put in
    the workspace's folder as ``table_zip.unpack`` does, without ``views.unpack_table``'s check."""
    return str(table_zip.unpack(zip_folder(folder), name, Path(f"{db}.d")))


def test_a_kept_traversal_upload_is_named_and_never_offered(tables, tmp_path):
    victim, victim_key, good, bad = tables
    hostile(bad, victim, victim_key, "both")
    db = tmp_path / "ws.db"
    _place(db, good.parent, "nightly.zip")
    evil = _place(db, bad.parent, "evil.zip")  # the newest: today's default for every visitor
    listed = listed_after_checks(db)
    assert [(c.label, c.refused is None) for c in listed] == [("evil.zip (uploaded): evil/t", False),
                                                              ("nightly.zip (uploaded): nightly/table", True)]
    assert listed[0].root == evil and str(tmp_path) not in (listed[0].refused or "")


# --- the page (AppTest) -----------------------------------------------------------------------


def _page_text(at) -> str:
    parts = [e.value for e in (*at.error, *at.warning, *at.info, *at.success, *at.code, *at.text, *at.caption,
                               *at.markdown)]
    parts += [str(m.value) for m in at.metric]
    parts += [df.value.to_csv() for df in at.dataframe]
    parts += [" ".join(map(str, s.options)) for s in at.selectbox]
    return "\n".join(parts)


def test_the_team_page_offers_the_good_table_and_names_the_traversal_one(team_page, tables, tmp_path):
    at = team_page
    victim, victim_key, good, bad = tables
    hostile(bad, victim, victim_key, "both")
    _place(tmp_path / "app.db", good.parent, "nightly.zip")
    _place(tmp_path / "app.db", bad.parent, "evil.zip")  # the newest
    at.run()
    assert not at.exception, at.exception
    listed_after_checks(tmp_path / "app.db")  # kept unchecked: the page checks them in the background
    at.run()
    assert at.selectbox(key="score_table_pick").options == ["nightly.zip (uploaded): nightly/table"]
    assert any("cannot be opened and is not offered" in w.value for w in at.warning)
    assert any(c.value.startswith("evil.zip (uploaded): evil/t: index.json names") for c in at.code)
    text = _page_text(at)
    assert GOOD_ID in text  # the good table's rows are shown ...
    assert VICTIM_RUN not in text  # ... and nothing of the victim's
    assert str(victim) not in text and table_zip.UPLOADS_DIR not in text  # no server path of the victim's or ours
    # The same hostile zip uploaded now: refused with a message, the page stays on the good table.
    # the same bytes are the same upload: refused, and its kept copy removed
    at.file_uploader(key="score_table_upload").upload("evil.zip", zip_folder(bad.parent)).run()
    assert not at.exception, at.exception
    assert any("not a score table that can be opened" in e.value for e in at.error)
    assert any("cannot be opened" in c.value and "the upload is not kept" in c.value for c in at.code)
    assert at.selectbox(key="score_table_pick").options == ["nightly.zip (uploaded): nightly/table"]
    assert VICTIM_ID not in _page_text(at)


def test_a_table_under_a_root_whose_partition_leads_out_is_named_and_the_page_stays_up(team_page, tables, tmp_path):
    """An operator's root holding a table whose index climbs out, beside a good one: the good one
    is offered, the other named; a run whose summary file links out is an error on the page."""
    from scoring.workspace.settings import settings_path

    at = team_page
    victim, victim_key, good, bad = tables
    hostile(bad, victim, victim_key, "index")
    settings_path(tmp_path / "app.db").write_text(f'score_table_roots = ["{tmp_path / "bad"}", "{good.parent}"]\n')
    at.run()
    assert not at.exception, at.exception
    assert at.selectbox(key="score_table_pick").options == [str(good)]
    assert any(c.value.startswith(f"{bad}: index.json names") for c in at.code)
    assert VICTIM_ID not in _page_text(at)


def test_a_refusal_told_to_a_browser_names_no_server_path(tables):
    """A file system's error quotes the file it failed on: the reason a listing gives does not."""
    _victim, _key, _good, bad = tables
    (bad / table_layout.INDEX_FILE).unlink()
    (bad / table_layout.INDEX_FILE).mkdir()  # unreadable as a file
    why = table_reader.vet(str(bad), root=str(bad.parent))
    assert why is not None and "index.json" in why, why
    assert str(bad.parent) not in why and "/tmp" not in why, why


def test_a_url_tables_files_are_confined_by_their_folded_path():
    """In an object store there are no links, but a name can still climb: folded, it must stay
    under the table's prefix (and the same bucket)."""
    assert table_locations.inside_table("s3://bucket/scores/t", "bucket/scores/t/summaries/k.json", "summaries/k.json")
    for escaped in ("bucket/scores/t/../other/summary.json", "bucket/scores/t2/summary.json",
                    "other-bucket/scores/t/summary.json", "bucket/scores/t/a/../../../x.json"):
        with pytest.raises(InputError, match="leads outside the table"):
            table_locations.inside_table("s3://bucket/scores/t", escaped, "x")


# --- a run's summary the page cannot show (the attack on this fixes) ------------------


def _damage_summary(table: Path, how: str) -> None:
    [summary] = (table / table_layout.SUMMARIES_DIR).iterdir()
    d = json.loads(summary.read_text())
    if how == "no_lenient":
        del d["safe_rate_lenient"]
    elif how == "text_lenient":
        d["safe_rate_lenient"] = "0.5"
    else:  # a share without what it is a share of
        d["unscored_share"] = 0.5
        d.pop("unscored_share_of", None)
    summary.write_text(json.dumps(d))


@pytest.mark.parametrize("how", ["no_lenient", "text_lenient", "share_of_nothing"])
def test_an_upload_whose_run_summary_the_page_cannot_show_is_refused_and_a_kept_one_never_offered(tables, tmp_path,
                                                                                                  how):
    _victim, _key, good, bad = tables
    _damage_summary(bad, how)
    db = tmp_path / "ws.db"
    with pytest.raises(InputError, match=r"its score table evil/t cannot be opened: .*run summary whose"):
        views.unpack_table(db, "evil.zip", zip_folder(bad.parent))
    _place(db, good.parent, "nightly.zip")
    _place(db, bad.parent, "evil.zip")  # kept before this check: the newest upload
    listed = listed_after_checks(db)
    assert [(c.label, c.refused is None) for c in listed] == [("evil.zip (uploaded): evil/t", False),
                                                              ("nightly.zip (uploaded): nightly/table", True)]
