"""A message a team-mode page shows names no path on the server (issue 34 item 7): uploads by
the names their users gave, every other server path by a neutral word, whatever the error (its
source, a workspace folder, a library's file); the whole message stays in the server's log."""

from __future__ import annotations

import errno
import json
import logging
import os
import tempfile

import pytest
from streamlit.testing.v1 import AppTest

from pages._shared import state
from scoring.errors import InputError
from scoring.workspace import Workspace

from .conftest import ROOT, SAMPLES
from .test_app import plain
from .test_hostile_core import _immutable

SERVER_FOLDERS = (tempfile.gettempdir(), str(ROOT), os.path.expanduser("~"))


def shown(at) -> list[str]:
    return [plain(m.value) for m in [*at.error, *at.warning]]


@pytest.fixture
def team_runs(app, monkeypatch):
    monkeypatch.setenv("LITMUS_REVIEW_TEAM_MODE", "1")
    app.switch_page("pages/runs.py").run()
    assert not app.exception, app.exception
    return app


def upload(at, name: str, data: bytes):
    at.file_uploader(key=state.UPLOAD).upload(name, data).run()
    next(b for b in at.button if b.label == "Import upload").click().run()
    assert not at.exception, at.exception
    return shown(at)


def no_server_path(messages: list[str], *also: str) -> None:
    for message in messages:
        for folder in (*SERVER_FOLDERS, *also):
            assert folder not in message, (folder, message)


def test_in_team_mode_an_upload_that_fails_is_named_by_its_name_not_its_temporary_file(team_runs, tmp_path,
                                                                                      monkeypatch):
    messages = upload(team_runs, "evil.jsonl", b'{"not": "a run"}\n')
    assert messages and any("evil.jsonl" in m for m in messages), messages
    no_server_path(messages, str(tmp_path))
    # uploads named like paths are shown by the names given, and nothing of the server's
    for name in ("/srv/litmus/ws/app.db.jsonl", "../../../etc/passwd.jsonl", "C:\\x\\run.jsonl"):
        messages = upload(team_runs, name, b"not json at all\n")
        assert messages and any(name in m for m in messages), (name, messages)
        no_server_path(messages, str(tmp_path))
    # outside team mode the same error names the file on this machine: what team mode hides
    monkeypatch.setenv("LITMUS_REVIEW_TEAM_MODE", "0")
    messages = upload(team_runs, "evil2.jsonl", b'{"not": "a run"}\n')
    assert any(tempfile.gettempdir() in m for m in messages), messages


def test_in_team_mode_a_read_only_workspace_is_said_without_its_path(tmp_path, monkeypatch):
    from pages._shared import loaders

    home = tmp_path / "ws"
    home.mkdir()
    Workspace(home / "app.db").import_run(SAMPLES / "compare-m2.jsonl")
    monkeypatch.setattr(loaders, "DB_PATH", home / "app.db")
    monkeypatch.setenv("LITMUS_REVIEW_TEAM_MODE", "1")
    with _immutable(home / "app.db", home):
        at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=90).run()
        at.switch_page("pages/runs.py").run()
        messages = upload(at, "mine.jsonl", (SAMPLES / "observed-m1.jsonl").read_bytes()[:100_000])
    assert any("read-only" in m and "[server path]" in m for m in messages), messages
    no_server_path(messages, str(tmp_path))


def test_an_error_from_deep_in_a_library_is_shown_without_its_paths(team_runs, tmp_path, monkeypatch, caplog):
    from pages._shared import loaders

    site = os.path.dirname(os.__file__)
    deep = InputError(f'Traceback (most recent call last):\n  File "{site}/zipfile.py", line 1, in open\n'
                      f"OSError: [Errno 13] Permission denied: '/var/lib/litmus/uploads/9f/part 2.json' "
                      f"(file:///srv/x/y, {tmp_path}/app.db.d/abc.jsonl)", source=str(tmp_path / "app.db"))

    def fails(*_args, **_kwargs):
        raise deep

    monkeypatch.setattr(loaders, "import_run", fails)
    with caplog.at_level(logging.WARNING, logger="litmus_review.pages"):
        messages = upload(team_runs, "run.jsonl", (SAMPLES / "observed-m1.jsonl").read_bytes()[:10_000])
    assert messages and any("Permission denied" in m for m in messages), messages
    no_server_path(messages, str(tmp_path), site, "/var/lib", "/srv", "file://")
    assert str(tmp_path / "app.db") in caplog.text  # the whole message stays in the server's log

    monkeypatch.setattr(loaders, "import_run", lambda *_a, **_k: (_ for _ in ()).throw(
        OSError(errno.EACCES, "Permission denied", f"{tmp_path}/app.db.d/copy.jsonl")))
    messages = upload(team_runs, "run2.jsonl", b"{}\n")
    assert any("Permission denied" in m for m in messages), messages
    no_server_path(messages, str(tmp_path))


def test_public_text_keeps_what_is_not_a_server_path(monkeypatch, tmp_path):
    from pages._shared import loaders
    from pages._shared.errors import public_text

    monkeypatch.setenv("LITMUS_REVIEW_TEAM_MODE", "1")
    for text in ("s3://bucket/scores/nightly has no index.json", "1/2 of the calls, and/or the rest",
                 "tokens in / out", "line 3: expected an object", "run.jsonl: line 2"):
        assert public_text(text) == text
    # a path with a space is cut there (its rest is read as words) unless it is under a server folder
    assert public_text("/srv/my data/w.db is read-only") == "[server path] data/w.db is read-only"
    monkeypatch.setattr(loaders, "DB_PATH", tmp_path / "my litmus" / "app.db")
    assert public_text(f"{tmp_path}/my litmus/app.db.d/x.jsonl is gone") == "[server path] is gone"
    assert public_text("rel/run.jsonl: bad", carried=["rel/run.jsonl"]) == "[server path]: bad"
    assert public_text("/tmp/x/run.jsonl: bad", names={"/tmp/x/run.jsonl": "/home/me/run.jsonl"}) \
        == "/home/me/run.jsonl: bad"
    monkeypatch.setenv("LITMUS_REVIEW_TEAM_MODE", "0")
    assert public_text("/srv/w.db is read-only") == "/srv/w.db is read-only"


def test_the_runs_table_names_an_upload_by_its_name_not_its_copy_on_the_server(team_runs, tmp_path):
    upload(team_runs, "mine.jsonl", (SAMPLES / "observed-m1.jsonl").read_bytes())
    team_runs.run()
    sources = [v for df in team_runs.dataframe if "source" in df.value.columns for v in df.value["source"]]
    assert "mine.jsonl" in sources, sources
    no_server_path(sources, str(tmp_path))
    assert all("/" not in v for v in sources), sources  # the bundled samples by their names alone


def test_the_report_s_json_names_files_not_their_server_paths_in_team_mode(team_runs, monkeypatch):
    from pages._shared import exports

    made: list[str] = []
    real = exports.aggregates_json
    monkeypatch.setattr(exports, "aggregates_json", lambda *a, **k: made.append(real(*a, **k)) or made[-1])
    team_runs.switch_page("pages/report.py").run()
    assert not team_runs.exception, team_runs.exception
    runs = json.loads(made[-1])["runs"]
    assert runs and all(r["source"] and "/" not in r["source"] for r in runs), [r["source"] for r in runs]
    assert any(r["side_log"] and r["side_log"]["source"].endswith(".jsonl") for r in runs)
    no_server_path([made[-1]], str(ROOT))
    team_runs.switch_page("pages/safe_rates.py").run()  # each run's source line names its side log
    shown_text = [plain(str(e.value)) for e in [*team_runs.caption, *team_runs.markdown, *team_runs.text]]
    assert any("side log: " in t and ".jsonl" in t for t in shown_text), shown_text
    no_server_path(shown_text, str(ROOT))


def test_an_upload_refused_is_named_as_its_user_named_it(monkeypatch):
    """The fourth attack: every refusal of a score table upload named the upload "[server path]"
    (its name is the error's source, which team mode hides as a server path unless the page names
    it): the Score tables page passes the upload's own name."""
    from pages._shared.errors import error_text
    from scoring.errors import InputError

    monkeypatch.setenv("LITMUS_REVIEW_TEAM_MODE", "1")
    refused = InputError("these bytes are being checked now", source="again.zip")
    assert error_text(refused).startswith("[server path]")
    assert error_text(refused, names={"again.zip": "again.zip"}) == "again.zip: these bytes are being checked now"
    page = (ROOT / "pages" / "score_tables.py").read_text()  # the page wires it (AppTest cannot upload a file)
    assert "error_text(exc, names={up.name: up.name})" in page
