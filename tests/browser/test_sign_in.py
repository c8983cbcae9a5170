"""Sign-in that works (issue 24): a server configured with [auth] against a small OIDC issuer
started by this test; Sign in, come back signed in, and label as that identity."""

from __future__ import annotations

import re
import secrets

import pytest
from playwright.sync_api import expect

from scoring.workspace import Workspace

from ..conftest import SAMPLES
from ..oidc_issuer import Issuer
from .conftest import Server, free_port, wait_app
from .test_flows import label_events

pytestmark = pytest.mark.browser


def test_sign_in_with_oidc_and_label_as_that_identity(tmp_path, page, artifacts):
    db = tmp_path / "auth.db"
    Workspace(db).import_run(SAMPLES / "observed-m1.jsonl", payloads=SAMPLES / "observed-m1.payloads.jsonl")
    issuer = Issuer(email="rita@lab.example", name="Rita")
    port = free_port()
    secrets_file = tmp_path / "secrets.toml"
    secrets_file.write_text(
        "[auth]\n"
        f'redirect_uri = "http://127.0.0.1:{port}/oauth2callback"\n'
        f'cookie_secret = "{secrets.token_hex(16)}"\n'
        f'client_id = "{issuer.client_id}"\n'
        'client_secret = "test-secret"\n'
        f'server_metadata_url = "{issuer.url}/.well-known/openid-configuration"\n')
    server = Server(db, tmp_path / "streamlit.log", args=("--secrets.files", str(secrets_file)), port=port)
    try:
        page.goto(server.url + "/review")
        wait_app(page, "Sign in to review")
        page.get_by_role("button", name="Sign in").click()
        # To the issuer and back: the callback sets the session cookie, then the app opens signed in.
        page.wait_for_url(re.compile(rf"^http://127\.0\.0\.1:{port}/$"), timeout=60_000)
        wait_app(page)
        # Signed in, the account is the name: a name in the address (issue 35's ?reviewer=) is not
        # taken, and the address never carries the account.
        page.goto(server.url + "/review?reviewer=mallory")
        wait_app(page, "Keyboard:")
        page.wait_for_url(lambda url: "reviewer=" not in url, timeout=30_000)
        # Streamlit may mount the field empty and fill it a moment later: wait for the value.
        expect(page.get_by_label("Reviewer (your signed-in account)")).to_have_value("rita@lab.example",
                                                                                   timeout=30_000)
        page.get_by_role("button", name=re.compile("Genuine decline")).first.click()
        page.get_by_text("labelled genuine_decline by rita@lab.example").first.wait_for(timeout=30_000)
        page.screenshot(path=str(artifacts / "signed_in_review.png"), full_page=True)
        assert label_events(db) == [("rita@lab.example", "label", "genuine_decline")]
        assert any(p.startswith("/token") for p in issuer.requests)  # the code was exchanged at the issuer
    finally:
        server.stop()
        issuer.close()
