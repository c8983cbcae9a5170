"""The router, as a function so a page opened before it ever ran can call it (see require_router)."""

from __future__ import annotations

import os

import streamlit as st

from pages._shared import loaders, state
from scoring.errors import LitmusReviewError

# No icons: ":material/…:" icons are fetched from a font CDN (the app must make no request off
# this machine; the hostile-run browser test checks it) and emoji need fonts servers often lack.
PAGES = [
    ("pages/runs.py", "Runs"),
    ("pages/safe_rates.py", "Safe rates"),
    ("pages/trajectories.py", "Trajectories"),
    ("pages/review.py", "Review"),
    ("pages/report.py", "Report"),
    ("pages/score_tables.py", "Score tables"),
]
DEFAULT_PAGE = "pages/safe_rates.py"


def auth_configured() -> bool:
    """True when secrets.toml has an [auth] section (Streamlit's built-in OIDC login)."""
    from streamlit.auth_util import get_secrets_auth_section

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


def main() -> None:
    """Import the bundled samples once, draw the run picker, route to the chosen page."""
    st.set_page_config(page_title="litmus-review", layout="wide")
    identity = logged_in_identity()
    st.session_state[state.IDENTITY] = identity
    if identity:
        st.session_state[state.REVIEWER] = identity
    try:
        loaders.ensure_samples()
    except LitmusReviewError as exc:
        st.error(f"The workspace database cannot be used: {exc}")
        st.stop()
    nav = st.navigation([st.Page(path, title=title, default=path == DEFAULT_PAGE) for path, title in PAGES])

    # Widget values vanish when their widget is not drawn; re-assigning keeps them across pages.
    for key, default in ((state.REVIEWER, ""), (state.BLIND, True)):
        st.session_state[key] = st.session_state.get(key, default)

    all_runs = loaders.runs()
    by_key = {r["run_key"]: r for r in all_runs}
    if state.SELECTED_RUNS not in st.session_state:
        # Default: every run scored with its side log where one exists, else everything.
        with_side = [r["run_key"] for r in all_runs if r["payloads_path"]]
        st.session_state[state.SELECTED_RUNS] = with_side or [r["run_key"] for r in all_runs]
    pending = st.session_state.pop(state.PENDING_SELECT, [])
    selected = [*st.session_state[state.SELECTED_RUNS], *(k for k in pending
                                                          if k not in st.session_state[state.SELECTED_RUNS])]
    st.session_state[state.SELECTED_RUNS] = [k for k in selected if k in by_key]
    with st.sidebar:
        if identity:
            st.text(f"Signed in as {identity}")
            st.button("Sign out", on_click=st.logout)
        st.multiselect("Runs", options=list(by_key), key=state.SELECTED_RUNS,
                       format_func=lambda k: loaders.run_label(by_key[k]),
                       help="The runs every page shows. Import more on the Runs page.")
        st.caption("Trajectory text is attacker-controlled; it is shown as plain text only.")
    nav.run()


def require_router() -> None:
    """Make sure the router drew this page.

    Streamlit treats a folder named ``pages/`` as a v1 multipage app until the first
    ``st.navigation`` call in the process, so a bookmarked URL on a fresh server (and every
    AppTest run) would execute the page alone: no run picker, no samples. Running the router
    here routes to this same page through ``st.navigation``; then this outer run stops.
    """
    from streamlit.runtime.pages_manager import PagesManager

    if PagesManager.uses_pages_directory:
        main()
        st.stop()


def page(title: str, *, caption: str | None = None) -> tuple[list[str], dict[str, dict]]:
    """Start a page: route through the router, title it, and return the selected run keys with
    every imported run's row by key. Stops with a hint when no run is selected."""
    require_router()
    st.title(title)
    if caption:
        st.caption(caption)
    keys = st.session_state.get(state.SELECTED_RUNS, [])
    if not keys:
        st.info("Pick one or more runs in the sidebar (import them on the Runs page).")
        st.stop()
    return keys, {r["run_key"]: r for r in loaders.runs()}
