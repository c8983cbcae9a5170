"""Storage profiles in the workspace's settings: how the app reaches a score table in object
storage, never with a credential written in the workspace."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import pytest

from scoring.dask_engine import storage, table_locations, table_reader
from scoring.errors import InputError
from scoring.workspace import views
from scoring.workspace.settings import read_settings, settings_path

from .conftest import ROOT
from .s3_tables import free_port


def write(db, text: str) -> None:
    settings_path(db).parent.mkdir(exist_ok=True)
    settings_path(db).write_text(text)


def test_the_longest_prefix_chooses_the_profile_and_credentials_come_from_the_named_variables(tmp_path,
                                                                                           monkeypatch):
    db = tmp_path / "ws.db"
    write(db, '[storage_profiles.lab]\nprefix = "s3://evals/"\noptions = { endpoint_url = "http://s3.lab:9000", '
              'client_kwargs = { region_name = "eu-west-1" } }\nenv = { key = "LAB_KEY", secret = "LAB_SECRET" }\n'
              '[storage_profiles.nightly]\nprefixes = ["s3://evals/nightly/", "gs://other/"]\n'
              'aws_profile = "nightly-ro"\n')
    s = read_settings(db)
    assert s.profile_for("s3://evals/nightly/t1").name == "nightly"
    assert s.profile_for("s3://evals/weekly/t1").name == "lab"
    assert s.profile_for("s3://elsewhere/t1") is None and views.table_storage(db, "/data/t1") == (None, {})
    assert views.table_storage(db, "s3://evals/nightly/t1") == ("nightly", {"profile": "nightly-ro"})
    monkeypatch.delenv("LAB_KEY", raising=False)
    monkeypatch.setenv("LAB_SECRET", "s3cr3t-value")
    with pytest.raises(InputError, match="does not set LAB_KEY") as err:
        views.table_storage(db, "s3://evals/weekly/t1")
    assert "s3cr3t-value" not in str(err.value)
    monkeypatch.setenv("LAB_KEY", "AKIA-value")
    assert views.table_storage(db, "s3://evals/weekly/t1") == ("lab", {
        "endpoint_url": "http://s3.lab:9000", "client_kwargs": {"region_name": "eu-west-1"}, "key": "AKIA-value",
        "secret": "s3cr3t-value"})
    # What the profile gives is what s3fs takes (its AWS profile included).
    storage.check_storage_options("s3://evals/t1", views.table_storage(db, "s3://evals/nightly/t1")[1])


@pytest.mark.parametrize("options", ['{ secret = "x" }', '{ key = "AKIA" }', '{ token = "t" }',
                                     '{ client_kwargs = { aws_secret_access_key = "x" } }',
                                     '{ account_key = "k" }', '{ password = "p" }', '{ sas_token = "s" }'])
def test_a_credential_written_in_a_profile_is_refused_by_name(tmp_path, options):
    db = tmp_path / "ws.db"
    write(db, f'[storage_profiles.lab]\nprefix = "s3://evals/"\noptions = {options}\n')
    with pytest.raises(InputError, match="a credential is never stored in the workspace") as err:
        read_settings(db)
    assert "storage_profiles.lab.options." in str(err.value) and str(settings_path(db)) in str(err.value)


@pytest.mark.parametrize(("text", "says"), [
    ('[storage_profiles.lab]\noptions = {}\n', "give prefix"),
    ('[storage_profiles.lab]\nprefix = "s3://a/"\nenv = { key = "not a name" }\n', "environment variable names"),
    ('[storage_profiles.lab]\nprefix = "s3://a/"\nendpoint = "x"\n', "unknown key 'endpoint'"),
    ('[storage_profiles.lab]\nprefix = "s3://a/"\naws_profile = 3\n', "aws_profile"),
    ('storage_profiles = 3\n', "storage_profiles must be a table"),
])
def test_a_bad_profile_is_located(tmp_path, text, says):
    db = tmp_path / "ws.db"
    write(db, text)
    with pytest.raises(InputError, match=says):
        read_settings(db)


# --- the object stores' backends imported ahead, when the app starts ---------------------------

def test_the_object_stores_a_workspace_names_are_its_profiles_and_roots_given_as_urls(tmp_path):
    db = tmp_path / "ws.db"
    write(db, 'score_table_roots = ["/data/tables", "file:///srv/tables", "S3A://nightly/"]\n'
              '[storage_profiles.lab]\nprefixes = ["s3://evals/", "gs://other/"]\n'
              '[storage_profiles.web]\nprefix = "https://example.org/runs/"\n'
              '[storage_profiles.odd]\nprefix = "memory://x/"\n')
    # https: tables are not read over HTTP; memory://: not a protocol the engine reads.
    assert table_locations.object_stores(read_settings(db)) == ["gs", "s3", "s3a"]
    write(db, 'score_table_roots = ["/data/tables"]\n')
    assert table_locations.object_stores(read_settings(db)) == []


def test_a_backend_that_cannot_be_imported_ahead_is_reported_when_a_table_is_opened(tmp_path):
    """Google Storage's backend (gcsfs) is not installed here: the warm-up skips it without a
    word, and opening a table there still names what is missing (the warm-up hid nothing)."""
    pytest.importorskip("fsspec")
    if importlib.util.find_spec("gcsfs") is not None:
        pytest.skip("gcsfs is installed: this test needs a backend that cannot be imported")
    db = tmp_path / "ws.db"
    write(db, '[storage_profiles.lab]\nprefix = "gs://evals/"\n')
    assert table_locations.warm_up(read_settings(db)) == []
    assert table_locations.warm_up(read_settings(db)) == []
    with pytest.raises(InputError, match="gcsfs") as err:
        table_reader.open_table("gs://evals/tables/t1", {"token": "anon"})
    assert err.value.source == "gs://evals/tables/t1"


WARM_UP_CHILD = r'''
import json, socket, sys, threading
sys.path.insert(0, sys.argv[1])
from pathlib import Path

from streamlit.testing.v1 import AppTest
from pages._shared import loaders
from scoring.workspace import settings, views

asked = []  # a profile's credentials are read from the environment by its storage_options()
profile_options = settings.StorageProfile.storage_options
settings.StorageProfile.storage_options = lambda self, *a: asked.append(self.name) or profile_options(self, *a)
loaders.DB_PATH = Path(sys.argv[2])
listener = socket.create_server(("127.0.0.1", int(sys.argv[3])))  # the profile's endpoint
listener.setblocking(False)
at = AppTest.from_file(sys.argv[1] + "/app.py", default_timeout=120)
at.switch_page("pages/score_tables.py").run()  # the server's first page: no table, no chart
assert not at.exception, at.exception
for thread in threading.enumerate():  # the warm-up the app started, if it still runs
    if thread.name == views.WARM_UP_THREAD:
        thread.join(60)
try:
    listener.accept()
    connected = True
except BlockingIOError:
    connected = False
s3fs = sys.modules.get("s3fs")
print(json.dumps({"title": at.title[0].value, "s3fs": s3fs is not None, "botocore": "botocore" in sys.modules,
                  "chart": type(sys.modules["plotly.io"].templates._templates["plotly_white"]).__name__ == "Template",
                  "file_systems": len(s3fs.S3FileSystem._cache) if s3fs else 0, "credentials_read": asked,
                  "connected": connected}))
'''


@pytest.mark.parametrize("settings", [True, False])
def test_the_app_imports_the_s3_backend_when_it_starts_with_a_profile_for_s3(tmp_path, settings):
    """A fresh server process whose workspace names a storage profile for an S3 bucket: once its
    app has drawn its first page (the Score tables page, no table given), s3fs and botocore are
    imported, and the charts' plotly template loaded, by a thread the first render did not wait for; the
    profile's credentials were not read (no S3 file system made, whose client would look for
    them) and its endpoint was not contacted. Without such a profile (the parameter's other
    case) the app imports none of them: the warm-up is what does."""
    pytest.importorskip("s3fs")
    port = free_port()
    db = tmp_path / "app.db"
    if settings:
        write(db, f'[storage_profiles.lab]\nprefix = "s3://evals/"\n'
                  f'options = {{ endpoint_url = "http://127.0.0.1:{port}" }}\n'
                  'env = { key = "LITMUS_WARM_KEY", secret = "LITMUS_WARM_SECRET" }\n')
    script = tmp_path / "child.py"
    script.write_text(WARM_UP_CHILD)
    out = subprocess.run([sys.executable, str(script), str(ROOT), str(db), str(port)], capture_output=True,
                         text=True, timeout=300, env={**os.environ, "LITMUS_WARM_KEY": "k", "LITMUS_WARM_SECRET": "s"})
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["title"] == "Score tables"
    assert got["s3fs"] is settings and got["botocore"] is settings and got["chart"] is settings
    assert got["credentials_read"] == [] and got["file_systems"] == 0 and got["connected"] is False
