"""Team mode on the Score tables page lets no one in (issue 24): locations are chosen from the
operator's roots, never typed; protocols off the allowlist refused with a message; a table's
rows read only from under its root; labels through a table obey the workspace's own rules."""

from __future__ import annotations

import http.server
import shutil
import threading
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from scoring.dask_engine import table_layout, table_locations, table_reader, table_workspace, table_writer
from scoring.errors import InputError, StoreError
from scoring.model import ReviewLabel
from scoring.workspace import Workspace
from scoring.workspace.settings import read_settings, settings_path

from .conftest import SAMPLES
from .test_engine import run_inline


def make_table(folder: Path, name: str = "out") -> tuple[Path, Path]:
    """A score table of a copy of the observed sample: (the table, the run), both in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    run = folder / "observed-m1.jsonl"
    shutil.copyfile(SAMPLES / "observed-m1.jsonl", run)
    results = run_inline([run], folder, 1 << 16)
    out = folder / name
    if name != "out":
        (folder / "out").rename(out)
    table_writer.commit_results(str(out), str(out), {}, results)
    return out, run


class Listener:
    """A local HTTP server that records every request it is sent (none must arrive)."""

    def __init__(self) -> None:
        self.requests: list[str] = []
        seen = self.requests

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                seen.append(self.path)
                self.send_response(404)
                self.end_headers()

            do_HEAD = do_GET

            def log_message(self, *_a) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def listener():
    s = Listener()
    try:
        yield s
    finally:
        s.close()


def hostile_locations(listener: Listener, tmp_path: Path) -> list[str]:
    return [f"zip://summary.json::data:text/plain;base64,{'A' * 64}", "dask://127.0.0.1:8786/x", "reference://x",
            "ftp://127.0.0.1:21/x", "s3a::file:///etc", "memory://x", f"{listener.url}/table",
            f"https://127.0.0.1:{listener.url.rsplit(':', 1)[1]}/table", "unknownproto://x", "gopher://x"]


def test_every_protocol_off_the_allowlist_is_refused_with_a_message_and_nothing_is_fetched(tmp_path, listener):
    for location in hostile_locations(listener, tmp_path):
        with pytest.raises(InputError) as err:
            table_reader.open_table(location)
        assert "not read here" in str(err.value) or "chained" in str(err.value), location
    assert listener.requests == []


def test_out_to_a_protocol_that_keeps_nothing_is_refused(tmp_path):
    for out in ("memory://table", "zip://x::file:///tmp/t", f"http://127.0.0.1:9/{tmp_path.name}"):
        with pytest.raises(InputError):
            table_writer.prepare_out(out, {})


def test_a_table_under_a_root_reads_only_sources_under_that_root(tmp_path):
    """The sample's run lies beside the table: read with the folder as root; with the table's
    own folder as root, its rows name a source outside it and nothing is read."""
    out, _run = make_table(tmp_path / "data")
    (t,) = table_reader.open_table(str(out), root=str(tmp_path / "data"))
    row = table_reader.find_row(t, "observed-m1-t00079")
    traj, _header = table_reader.read_trajectory(row, run=t)
    assert traj.id == "observed-m1-t00079"
    (narrow,) = table_reader.open_table(str(out), root=str(out))
    with pytest.raises(InputError, match="outside its root") as err:
        table_reader.read_trajectory(row, run=narrow)
    assert str(_run) not in str(err.value)  # the message names the table, not the server path it refused
    with pytest.raises(InputError, match="outside its root"):
        table_reader.evaluation(narrow)
    with pytest.raises(InputError, match="not under the score table roots"):
        table_reader.open_table(str(out), root=str(tmp_path / "elsewhere"))
    with pytest.raises(InputError, match="not under the score table roots"):
        table_reader.open_table(str(tmp_path / "data" / ".." / "data" / "out" / ".." / ".."),
                                root=str(tmp_path / "data"))


def test_a_symbolic_link_cannot_lead_out_of_a_root(tmp_path):
    out, _run = make_table(tmp_path / "outside")
    root = tmp_path / "root"
    root.mkdir()
    (root / "linked").symlink_to(out)
    assert table_locations.tables_under([str(root)]) == []
    with pytest.raises(InputError, match="not under"):
        table_reader.open_table(str(root / "linked"), root=str(root))


def test_tables_are_listed_under_the_operators_roots(tmp_path):
    out, _run = make_table(tmp_path / "data", "nightly")
    hidden = tmp_path / "data" / ".nightly.tmp-1"
    shutil.copytree(out, hidden)  # a table still being written
    found = table_locations.tables_under([str(tmp_path / "data"), str(tmp_path / "missing"), "zip://x::memory://"])
    assert found == [(str(tmp_path / "data"), str(tmp_path / "data" / "nightly"))]


def test_a_forged_table_cannot_label_what_the_workspace_refuses(tmp_path):
    """A table carrying an imported run's key and rows that call an UNSCORED and an UNSAFE
    trajectory Inconclusive: labels through it are refused, as on the run itself."""
    out, run = make_table(tmp_path)
    ws = Workspace(tmp_path / "ws.db")
    key = ws.import_run(run).run_key
    rows = ws.trajectory_rows(key)
    unscored = next(r["trajectory_id"] for r in rows if r["status"] == "unscored")
    unsafe = next(r["trajectory_id"] for r in rows if r["status"] == "unsafe")
    for part in (out / table_layout.TABLE_DIR / f"run_key={key}").glob("*.parquet"):
        table = pq.read_table(part)
        status = ["inconclusive" if tid in (unscored, unsafe) else s for tid, s in
                  zip(table.column("trajectory_id").to_pylist(), table.column("status").to_pylist(), strict=True)]
        pq.write_table(table.set_column(table.schema.get_field_index("status"), "status", [status]), part)
    (t,) = table_reader.open_table(str(out))
    assert table_reader.find_row(t, unscored)["status"] == "inconclusive"  # the forgery reads as Inconclusive
    for tid in (unscored, unsafe):
        with pytest.raises(StoreError, match="not Inconclusive"):
            table_workspace.add_label(ws, t, tid, "mallory", ReviewLabel.GENUINE_DECLINE)
    assert ws.history(key) == []


def test_settings_name_the_roots_and_a_bad_file_is_located(tmp_path):
    db = tmp_path / "ws.db"
    assert read_settings(db).score_table_roots == ()
    settings_path(db).parent.mkdir()
    settings_path(db).write_text('score_table_roots = ["/data/scores", "s3://bucket/scores"]\n')
    assert read_settings(db).score_table_roots == ("/data/scores", "s3://bucket/scores")
    settings_path(db).write_text("score_table_roots = 3\n")
    with pytest.raises(InputError, match="score_table_roots") as err:
        read_settings(db)
    assert str(settings_path(db)) in str(err.value)


# --- the page (AppTest) -----------------------------------------------------------------------


@pytest.fixture
def team_page(app, tmp_path, monkeypatch):
    monkeypatch.setenv("LITMUS_REVIEW_TEAM_MODE", "1")
    app.switch_page("pages/score_tables.py").run()
    assert not app.exception, app.exception
    return app


def test_in_team_mode_no_location_is_typed_and_tables_are_chosen_from_the_roots(team_page, tmp_path):
    at = team_page
    assert [t.key for t in at.text_input] == []  # no field takes a location
    assert "score_table_roots" in " ".join(i.value for i in at.info)
    out, _run = make_table(tmp_path / "scores", "nightly")
    settings_path(tmp_path / "app.db").write_text(f'score_table_roots = ["{tmp_path / "scores"}"]\n')
    at.run()
    assert not at.exception, at.exception
    assert "score_table_location" not in [t.key for t in at.text_input]
    assert at.selectbox(key="score_table_pick").options == [str(out)]
    assert any(m.label.startswith("Strict") for m in at.metric)
    at.text_input(key="score_table_replay").input("observed-m1-t00079").run()
    assert not at.exception, at.exception
    assert "observed-m1-t00079" in " ".join(c.value for c in at.code)
