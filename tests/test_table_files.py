"""A score table's own JSON files and a run's header line are read within bounds (issue 34
item 2, attack finding F4): an ``index.json``, ``summary.json`` or aggregates file that is huge
but compresses to little (150 MB of blanks in a 200 KB zip) was parsed at the upload and again
on every listing in a fresh process; a run file whose header line is hundreds of megabytes with
no newline was read whole on every render. Each test lowers the bound it crosses (a module
constant) so the files are small; benches/zip_floods.py measures the full-size upload."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import pytest

from scoring import ingest
from scoring.dask_engine import table_layout, table_reader, table_zip
from scoring.errors import InputError
from scoring.importers import _zip
from scoring.workspace import views

from .test_table_upload import listed_after_checks, zip_folder
from .test_table_upload_rows import vet_here  # noqa: F401 - the fixture: vetting in this process
from .test_team_tables import SAMPLES, make_table

CAP = 64 * 1024


@pytest.fixture(scope="module")
def scored(tmp_path_factory) -> Path:
    """A score table written by the engine (scored once for the module), in its folder."""
    out, _run = make_table(tmp_path_factory.mktemp("scored") / "nightly", "table")
    return out.parent


@pytest.fixture
def table(scored, tmp_path) -> Path:
    """A copy of its own of the table (with the run it scored beside it)."""
    shutil.copytree(scored, tmp_path / "nightly")
    return tmp_path / "nightly" / "table"


@pytest.fixture
def small_cap(monkeypatch):
    monkeypatch.setattr(table_layout, "TABLE_FILE_BYTES", CAP, raising=False)


def padded(path: Path, extra: int) -> None:
    """``path``'s JSON with ``extra`` blanks after it: still the same JSON, and as valid."""
    path.write_bytes(path.read_bytes() + b" " * extra)


def run_file(table: Path, folder: str) -> Path:
    (found,) = sorted((table / folder).glob("*.json"))
    return found


def test_the_engines_own_files_fit_the_bounds(table):
    # What the page reads of a table the engine wrote passes both bounds with room: each file,
    # grown to a megabyte or more of the same entries (runs), is parsed within the parse cap at
    # the size cap.
    for path in (table / table_layout.INDEX_FILE, table / table_layout.SUMMARY_FILE, table / table_layout.KEYS_FILE,
                 run_file(table, table_layout.SUMMARIES_DIR), run_file(table, table_layout.RUN_AGGREGATES_DIR)):
        doc = json.loads(path.read_bytes())
        entries = doc if isinstance(doc, list) else [doc]
        grown = json.dumps(entries * (1 + (1 << 20) // len(path.read_bytes()))).encode()
        assert _zip.json_parse_cost(grown) * table_layout.TABLE_FILE_BYTES \
            <= table_layout.TABLE_FILE_PARSE * len(grown), \
            path.name
    assert table_reader.vet(str(table), every_run=True) is None


@pytest.mark.parametrize("name", [table_layout.INDEX_FILE, table_layout.SUMMARY_FILE, table_layout.KEYS_FILE])
def test_a_table_file_past_the_cap_refuses_the_table_named_before_it_is_read(table, small_cap, monkeypatch, name):
    if name != table_layout.INDEX_FILE:
        (table / table_layout.INDEX_FILE).unlink()  # a table of the layout that lists its runs in summary.json
    padded(table / name, 2 * CAP)
    read: list[int] = []
    real = getattr(table_layout, "table_json_bytes", None)

    def counted(fh, rel, source):
        # what is read of the file: at most one byte past the cap (none when its size is known)
        fh_read = fh.read
        fh.read = lambda n=-1: read.append(n) or fh_read(n)
        return real(fh, rel, source)

    monkeypatch.setattr(table_layout, "table_json_bytes", counted, raising=False)
    said = table_reader.vet(str(table))
    assert said is not None and f"the table's {name} is" in said and f"at most {CAP:,}" in said, said
    assert all(0 <= n <= CAP + 1 for n in read), read


def test_a_table_file_that_would_parse_past_its_bound_is_refused_before_it_is_parsed(table, monkeypatch):
    # Small on the disk, gigantic parsed: an index of empty lists (each three bytes, a list of
    # a hundred-odd bytes). The page fell back to summary.json and opened the table.
    (table / table_layout.INDEX_FILE).write_bytes(b"[" + b",".join([b"[]"] * 20_000) + b"]")
    monkeypatch.setattr(table_layout, "TABLE_FILE_PARSE", 1024 * 1024, raising=False)
    parsed, loads = [], json.loads
    monkeypatch.setattr(json, "loads", lambda *a, **k: parsed.append(1) or loads(*a, **k))
    said = table_reader.vet(str(table))
    assert said is not None and "index.json would take up to" in said and "to parse" in said, said
    assert not parsed


def test_a_runs_own_file_past_the_cap_is_refused_where_the_run_is_read(table, small_cap):
    padded(run_file(table, table_layout.RUN_AGGREGATES_DIR), 2 * CAP)
    (run,) = table_reader.open_table(str(table))
    with pytest.raises(InputError, match=r"the table's aggregates/[0-9a-f]{12}….json is") as err:
        _ = run.aggregates
    assert err.value.source == str(table)


def test_an_upload_holding_a_table_file_past_the_cap_is_refused_before_anything_is_written(table, small_cap,
                                                                                            tmp_path):
    # The aggregates of a run are read only when the run is shown: the upload decodes each of a
    # table's own files once (and lets it go) to refuse it before it is kept.
    padded(run_file(table, table_layout.RUN_AGGREGATES_DIR), 2 * CAP)
    db = tmp_path / "ws.db"
    with pytest.raises(InputError, match=r"table's nightly/table/aggregates/[0-9a-f]{64}\.json is more than") as err:
        views.unpack_table(db, "blanks.zip", zip_folder(table.parent))
    assert err.value.source == "blanks.zip" and str(tmp_path) not in str(err.value)
    uploads = tmp_path / "ws.db.d" / table_zip.UPLOADS_DIR
    assert not uploads.is_dir() or [p.name for p in uploads.iterdir()] == [table_zip.LOCK]


def test_an_upload_kept_before_the_cap_is_named_in_the_listing_and_not_offered(table, tmp_path, monkeypatch,
                                                                              vet_here):  # noqa: F811
    db = tmp_path / "ws.db"
    padded(table / table_layout.INDEX_FILE, 2 * CAP)
    table_zip.unpack(zip_folder(table.parent), "blanks.zip", Path(f"{db}.d"))  # kept as an older version kept it
    monkeypatch.setattr(table_layout, "TABLE_FILE_BYTES", CAP, raising=False)
    (listed,) = listed_after_checks(db)
    assert listed.refused is not None and "index.json is" in listed.refused, listed
    assert str(tmp_path) not in listed.refused


HEADER = (SAMPLES / "observed-m1.jsonl").read_bytes().split(b"\n", 1)[0]
"""A canonical run's header line (the bundled sample's)."""


class Counted(io.BytesIO):
    """A file that counts the bytes read from it."""

    read_bytes = 0

    def read(self, n=-1):
        got = super().read(n)
        self.read_bytes += len(got)
        return got

    def readline(self, n=-1):
        got = super().readline(n)
        self.read_bytes += len(got)
        return got

    def __next__(self):
        got = super().__next__()
        self.read_bytes += len(got)
        return got


def test_a_header_line_without_an_end_is_refused_at_its_line_without_reading_it_whole(monkeypatch):
    monkeypatch.setattr(ingest, "MAX_HEADER_BYTES", CAP, raising=False)
    fh = Counted(b"\n" + HEADER + b" " * (16 * CAP))  # a valid header, padded: a line that never ends
    with pytest.raises(InputError, match="does not end within its first") as err:
        ingest.read_header_line(fh, "long.jsonl")
    assert err.value.source == "long.jsonl" and err.value.line == 2
    assert fh.read_bytes <= CAP + 1


def test_the_header_line_is_read_as_before():
    fh = Counted(b"\n  \r\n" + HEADER + b"\r\n" + b'{"record": 1}\n')
    assert ingest.read_header_line(fh, "ok.jsonl") == (HEADER, 3, 5 + len(HEADER) + 2)
    assert fh.tell() == 5 + len(HEADER) + 2  # left where the records start
    last = Counted(HEADER)  # a header without a newline, alone in its file
    assert ingest.read_header_line(last, "one.jsonl") == (HEADER, 1, len(HEADER))
    with pytest.raises(InputError, match="empty file"):
        ingest.read_header_line(Counted(b"\n \n"), "blank.jsonl")


def test_a_replay_reads_no_more_of_a_header_line_than_the_bound(tmp_path, monkeypatch):
    # Every render of a table's replay reads its run's header (table_reader.run_header).
    monkeypatch.setattr(ingest, "MAX_HEADER_BYTES", CAP, raising=False)
    run = tmp_path / "long.jsonl"
    run.write_bytes(HEADER + b" " * (16 * CAP))
    with pytest.raises(InputError, match="does not end within its first") as err:
        table_reader.run_header(str(run))
    assert err.value.line == 1


def test_the_readme_states_the_bounds():
    text = " ".join((Path(__file__).parent.parent / "README.md").read_text().split())
    assert f"hold at most {table_layout.TABLE_FILE_BYTES >> 20} MiB each" in text
    assert f"upper bound of their parse is under {table_layout.TABLE_FILE_PARSE >> 20} MiB" in text
    assert f"a run's header line must end within {ingest.MAX_HEADER_BYTES >> 20} MiB" in text
