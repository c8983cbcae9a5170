"""litmus-review: the router (``streamlit run app.py``): the page config, the bundled samples,
the run picker in the sidebar and ``st.navigation`` over the pages in ``pages/``.

Pages never import this file: one opened before the router ran in the process runs it as a
script (``pages/_shared/router.require_router``). A worker process spawned from it (the parallel
importer) re-imports it as ``__mp_main__``, where nothing starts.
"""

from __future__ import annotations

import streamlit as st

from pages._shared import loaders, router, state
from pages._shared.errors import show_error
from scoring.errors import LitmusReviewError

LAST_PAGE_KEY = "_router_last_page"

# No icons: ":material/…:" icons are fetched from a font CDN (the app must make no request off
# this machine; the hostile-run browser test checks it) and emoji need fonts servers often lack.
PAGES = [
    ("pages/runs.py", "Runs", "runs"),
    ("pages/safe_rates.py", "Safe rates", "safe_rates"),
    ("pages/trajectories.py", "Trajectories", "trajectories"),
    ("pages/review.py", "Review", "review"),
    ("pages/report.py", "Report", "report"),
    ("pages/score_tables.py", "Score tables", "score_tables"),
]
DEFAULT_PAGE = "pages/safe_rates.py"


def main() -> None:
    """Import the bundled samples once, draw the run picker, route to the chosen page."""
    st.set_page_config(page_title="litmus-review", layout="wide")
    identity = router.logged_in_identity()
    st.session_state[state.IDENTITY] = identity
    if identity:
        st.session_state[state.REVIEWER] = identity
    loaders.warm_up_storage()  # a background thread, once per process: the page does not wait
    try:
        loaders.check_workspace()  # a damaged file would show wrong figures without a word
        loaders.ensure_samples()
    except LitmusReviewError as exc:
        show_error(exc, before="The workspace database cannot be used: ")
        st.stop()
    # Every page has its own address (/safe_rates too): the root is a hidden page that opens
    # the default one, keeping the address's parameters.
    pages = {path: st.Page(path, title=title, url_path=url) for path, title, url in PAGES}
    home = st.Page(lambda: st.switch_page(pages[DEFAULT_PAGE], query_params=st.query_params.to_dict()),
                   title="litmus-review", url_path="home", default=True, visibility="hidden")
    nav = st.navigation([home, *pages.values()])

    if not identity:
        router.reviewer_from_address()
    # Widget values vanish when their widget is not drawn; re-assigning keeps them across pages.
    for key, default in ((state.REVIEWER, ""), (state.BLIND, True)):
        st.session_state[key] = st.session_state.get(key, default)

    all_runs = loaders.runs()
    by_key = {r.run_key: r for r in all_runs}
    if state.SELECTED_RUNS not in st.session_state:
        # The address names the runs (a reload, a shared link); else every run scored with its
        # side log where one exists, else everything.
        linked = [k for p in (st.query_params.get(router.RUNS_PARAM) or "").split(",") if p
                  for k in (router.resolve_run(p, by_key),) if k]
        with_side = [r.run_key for r in all_runs if r.side_log]
        st.session_state[state.SELECTED_RUNS] = (
            list(dict.fromkeys(linked)) or with_side or [r.run_key for r in all_runs]
        )
    pending = st.session_state.pop(state.PENDING_SELECT, [])
    selected = [*st.session_state[state.SELECTED_RUNS], *(k for k in pending
                                                          if k not in st.session_state[state.SELECTED_RUNS])]
    st.session_state[state.SELECTED_RUNS] = [k for k in selected if k in by_key]
    with st.sidebar:
        if identity:
            st.text(f"Signed in as {identity}")
            st.button("Sign out", on_click=st.logout)
        st.multiselect("Runs", options=list(by_key), key=state.SELECTED_RUNS,
                       format_func=lambda k: loaders.run_chip(by_key[k]),
                       help="The runs every page shows. Import more on the Runs page.")
        # A chip cuts a name past ~25 characters, and runs of one model start alike: each
        # selected run's whole name, one per line, as plain text (names come from the logs).
        if st.session_state[state.SELECTED_RUNS]:
            st.text("\n".join(f"• {loaders.run_label(by_key[k])}" for k in st.session_state[state.SELECTED_RUNS]))
        st.caption("Trajectory text is attacker-controlled; it is shown as plain text only.")
    # The selection lives in the address too: a reload or a shared link opens the same runs.
    # Page-specific parameters (a trajectory, a review item) belong to the page that set them.
    last = st.session_state.get(LAST_PAGE_KEY)
    if nav.url_path:  # not the root, which only opens the default page
        if last is not None and nav.url_path != last:
            for name in list(st.query_params):
                if name not in (router.RUNS_PARAM, router.REVIEWER_PARAM):
                    del st.query_params[name]
        st.session_state[LAST_PAGE_KEY] = nav.url_path
    st.query_params[router.RUNS_PARAM] = ",".join(k[:router.KEY_CHARS] for k in st.session_state[state.SELECTED_RUNS])
    # The reviewer's name too, where nobody signs in: a reload or a bookmark opens as the same
    # reviewer (Streamlit keeps nothing of a session across a reload, and the app sets no cookie).
    router.to_address(router.REVIEWER_PARAM, None if identity else st.session_state[state.REVIEWER])
    nav.run()


if __name__ == "__main__":
    main()
