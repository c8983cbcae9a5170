"""What the pages share with the router (``app.py``): the run-selection address and each page's
own parameters, team mode and the signed-in identity, and ``page``/``require_router`` (a page
opened before the router ever ran in the process routes through it).

The router itself is ``app.py``; a page never imports it (the shell stays above the pages):
``require_router`` runs it as Streamlit does, as a script."""

from __future__ import annotations

import os
import runpy
from pathlib import Path

import streamlit as st

from pages._shared import loaders, state
from pages._shared.inert import md
from pages._shared.runtext import stale_text
from scoring.workspace.views import SCORER_VERSION, RunInfo


def auth_configured() -> bool:
    """True when secrets.toml has an [auth] section (Streamlit's built-in OIDC login)."""
    from streamlit.auth_util import get_secrets_auth_section  # lazily: Streamlit's internals, OIDC only

    return bool(get_secrets_auth_section())


TEAM_MODE_ENV = "LITMUS_REVIEW_TEAM_MODE"


def team_mode() -> bool:
    """Team mode: uploads are the only way in; importing a path on the server is off (it reads
    any file the server's user can, and its errors tell whether a path exists). On with
    ``LITMUS_REVIEW_TEAM_MODE=1``, and always when ``[auth]`` is configured (a signed-in
    server is a shared one)."""
    return os.environ.get(TEAM_MODE_ENV, "").strip().lower() in ("1", "true", "yes", "on") or auth_configured()


def logged_in_identity() -> str | None:
    """The signed-in user's email (or name) under OIDC; None when auth is not configured.

    Under OIDC this is the only reviewer name labels can carry, so nobody can label as, or
    undo the labels of, somebody else.
    """
    if not auth_configured():
        return None
    if not st.user.is_logged_in:
        st.title("litmus-review")
        st.text("Sign in to review: labels are attributed to your account.")
        st.button("Sign in", on_click=st.login, type="primary")
        st.stop()
    return str(st.user.get("email") or st.user.get("name") or st.user.get("sub"))


RUNS_PARAM = "runs"
REVIEWER_PARAM = "reviewer"
REVIEWER_CHARS = 200  # a name, not a document: a longer parameter is cut


def reviewer_from_address() -> None:
    """The reviewer's name from the address (``?reviewer=NAME``) on a session's first run: without
    sign-in a reload starts a new session, which kept no name. Only then: "Change reviewer" clears
    the name, and the address still holding it must not set it back. Under OIDC the router never
    calls this: the account is the only name labels can carry."""
    if state.REVIEWER in st.session_state:
        return
    name = (st.query_params.get(REVIEWER_PARAM) or "").strip()[:REVIEWER_CHARS]
    if name:
        st.session_state[state.REVIEWER] = name
KEY_CHARS = 12  # run-key characters in an address: unique among a workspace's runs in practice

# The router: beside pages/ in the checkout and in the wheel's litmus_review_app/ alike.
APP_SCRIPT = Path(__file__).resolve().parents[2] / "app.py"


def resolve_run(prefix: str, by_key: dict) -> str | None:
    """The run whose key starts with ``prefix`` (None when none does, or several do)."""
    found = [k for k in by_key if k.startswith(prefix)] if len(prefix) >= 6 else []
    return found[0] if len(found) == 1 else None


def linked_param(name: str) -> str | None:
    """A page's own address parameter (``trace``, ``trajectory``, ``run``), if the address has it."""
    return st.query_params.get(name)


def linked_run(keys: list[str]) -> str | None:
    """The selected run the address's ``run`` parameter names, if any."""
    prefix = linked_param("run")
    key = resolve_run(prefix, {k: None for k in keys}) if prefix else None
    return key


def link(**params: str) -> None:
    """Put this view in the address (``run`` as a key prefix), so it can be bookmarked or sent."""
    for name, value in params.items():
        st.query_params[name] = value[:KEY_CHARS] if name == "run" else value


def from_address(key: str, param: str, options, *, many: bool = True) -> None:
    """Seed a widget's value from the address (a reload, a shared link) the first time the page
    draws it: only values among its ``options`` (a stale link cannot break the page)."""
    if key in st.session_state:
        return
    values = [v for v in st.query_params.get_all(param) if v in set(options)]
    if values:
        st.session_state[key] = values if many else values[0]


def to_address(param: str, value) -> None:
    """Keep a widget's value in the address (a list as the parameter repeated); gone when empty."""
    if value in (None, "", [], ()):
        if param in st.query_params:
            del st.query_params[param]
    else:
        st.query_params[param] = list(value) if isinstance(value, list | tuple) else str(value)


def require_router() -> None:
    """Make sure the router drew this page.

    Streamlit treats a folder named ``pages/`` as a v1 multipage app until the first
    ``st.navigation`` call in the process, so a bookmarked URL on a fresh server (and every
    AppTest run) would execute the page alone: no run picker, no samples. Running the router
    script here (as ``__main__``, the way Streamlit runs it) routes to this same page through
    ``st.navigation``; then this outer run stops.
    """
    from streamlit.runtime.pages_manager import PagesManager  # lazily: Streamlit's internals, needed only here

    if PagesManager.uses_pages_directory:
        runpy.run_path(str(APP_SCRIPT), run_name="__main__")
        st.stop()


def page(title: str, *, caption: str | None = None) -> tuple[list[str], dict[str, RunInfo]]:
    """Start a page: route through the router, title it, and return the selected run keys with
    every imported run by key. Stops with a hint when no run is selected."""
    require_router()
    st.title(title)
    if caption:
        st.caption(caption)
    keys = st.session_state.get(state.SELECTED_RUNS, [])
    if not keys:
        st.info("Pick one or more runs in the sidebar (import them on the Runs page).")
        st.stop()
    rows = {r.run_key: r for r in loaders.runs()}
    for k in keys:  # an older scorer's statuses are never shown as this scorer's, on any page
        if k in rows and rows[k].stale:
            st.warning(md(stale_text(loaders.run_label(rows[k]), k, rows[k].scorer_version, SCORER_VERSION,
                                     original_held=rows[k].original_held)))
    return keys, rows
