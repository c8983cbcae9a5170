"""Storage profiles in the workspace's settings: how the app reaches a score table in object
storage, never with a credential written in the workspace."""

from __future__ import annotations

import pytest

from scoring import engine
from scoring.errors import InputError
from scoring.workspace import views
from scoring.workspace.settings import read_settings, settings_path


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
    engine.check_storage_options("s3://evals/t1", views.table_storage(db, "s3://evals/nightly/t1")[1])


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
