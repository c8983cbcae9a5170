"""Score tables: a table written by ``score --engine dask --out`` opened as a run.

The rates and charts are the engine's aggregates (summary.json, aggregates.json) with the
workspace's labels applied (scoring.dask_engine.table_reader); no page reads every row. Replay and review
read one trajectory by its byte range from the run's source (a path or URL), without
importing the run; labels are stored in the workspace, keyed as an imported run's.
"""

from __future__ import annotations

import json

import streamlit as st

from pages._shared import charts, exports, loaders, router, state
from pages._shared.errors import error_text
from pages._shared.inert import md, reveal_id
from pages._shared.render import render_trajectory
from pages._shared.runtext import run_line
from scoring.errors import LitmusReviewError, UploadWaiting
from scoring.model import ReviewLabel
from scoring.workspace import views

router.require_router()
st.title("Score tables")
st.caption("A Parquet score table written by `litmus-review score --engine dask --out DIR`: rates from the "
           "engine's aggregates, replay straight from the run's source. Labels stay in the workspace.")

try:
    from scoring.dask_engine import table_reader  # optional: the dask extra (said below when absent)
except ImportError:
    st.info("Score tables need the dask extra: pip install 'litmus-review[dask]'.")
    st.stop()

SHOW = {"all": None, "Inconclusive (to review)": "inconclusive", "UNSCORED": "unscored", "SAFE": "safe",
        "UNSAFE": "unsafe"}
ROOT_LISTING_POLL_S = 2.0  # how often a page waiting on the roots' listing asks whether it has ended
COLUMNS = ["trajectory_id", "task_id", "status", "reason", "intended_category", "fired_category", "termination",
           "tool_call_count", "max_raw_bytes", "tools", "model"]


def _open(location: str, root: str | None) -> list:
    """The table's runs, opened with the storage profile the workspace's settings give its
    location (credentials from the server's environment); the profile's name is shown."""
    profile, options = loaders.table_storage(location)
    # shared, not copied on each rerun; kept by the reader within a bound of memory (each run's
    # aggregates are read when that run is shown); the options are the workspace profile's for
    # the location, never the page's address
    runs = table_reader.opened_table(location, json.dumps(options, sort_keys=True), root)
    if profile is not None:
        st.caption(f"storage profile: {profile} (the workspace's settings)")
    return runs


@st.cache_resource(ttl=60, show_spinner=False, max_entries=8)
def _rates(run, labels: int, name: str, blind: bool):
    """The run's rates with the workspace's labels (``labels``: their version, for the cache) as
    the reader (``name``, ``blind``: ``loaders.reader()``) may know them."""
    return loaders.table_rates(run, name, blind)


@st.cache_resource(ttl=60, show_spinner=False, max_entries=8)
def _evaluation(run, labels: int, name: str, blind: bool, _rates):
    """The run as the report and exports see it (its header read from the run's source), with
    the rates of the same reader."""
    return table_reader.evaluation(run, _rates)


@st.cache_resource(ttl=60, show_spinner=False, max_entries=16)
def _first_rows(_run, run_key: str, location: str, status: str | None):
    """The run's first rows of a status (read once a minute, not on every rerun); shared, not
    copied: as st.cache_data, the 10,000 rows were pickled when read and unpickled on every
    rerun (the page only shows them)."""
    return table_reader.first_rows(_run, COLUMNS, loaders.MAX_TABLE_ROWS, status=status).to_pandas()


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:.2f}%"


def _reviewer() -> str:
    return (st.session_state.get(state.IDENTITY) or st.session_state.get(state.REVIEWER) or "").strip()


def _set_reviewer() -> None:
    st.session_state[state.REVIEWER] = (st.session_state.get(state.REVIEWER_INPUT) or "").strip()


def _label(run, tid: str, label: ReviewLabel) -> None:
    try:
        loaders.table_add_label(run, tid, _reviewer(), label)
        st.session_state["score_table_message"] = ("ok", f"{tid}: labelled {label.value} by {_reviewer()}")
    except LitmusReviewError as exc:
        st.session_state["score_table_message"] = ("error", error_text(exc))


def _undo(run) -> None:
    try:
        undone = loaders.undo_last(run.run_key, _reviewer())
    except LitmusReviewError as exc:
        st.session_state["score_table_message"] = ("error", error_text(exc))
        return
    st.session_state["score_table_message"] = (
        ("ok", f"withdrawn: {', '.join(undone.trajectory_ids)} ({undone.label})") if undone
        else ("error", "Nothing of yours to undo in this run."))


def _upload_table() -> None:
    """Team mode: a score table arrives as a zip of the folder ``score --out`` wrote (with the
    run files it scored, for replay), unpacked into the workspace once per upload and opened
    from there (``views.unpack_table``: bounded, no member outside its folder)."""
    up = st.file_uploader("Upload a score table (a .zip of the folder `score --out` wrote; put the run files it "
                          f"scored in the zip to replay them; up to {loaders.MAX_UPLOAD_MB} MB)", type=["zip"],
                          key="score_table_upload")
    if up is None or st.session_state.get("score_table_unpacked") == up.file_id:
        return
    st.session_state["score_table_unpacked"] = up.file_id  # once per upload, not on every rerun
    if up.size > loaders.MAX_UPLOAD_MB * 1024 * 1024:
        st.error(f"{md(up.name)} is {up.size / 1e6:.0f} MB; the upload limit is {loaders.MAX_UPLOAD_MB} MB.")
        return
    try:
        root = views.unpack_table(loaders.db(), up.name, up.getvalue())
    except UploadWaiting as exc:  # kept, not refused: checked on a later visit
        st.info("This upload is kept but not checked yet:")
        st.code(error_text(exc, names={up.name: up.name}), language=None, wrap_lines=True)
        return
    except LitmusReviewError as exc:
        st.error("This upload is not a score table that can be opened:")
        st.code(error_text(exc, names={up.name: up.name}), language=None)  # the upload named as its user named it
        return
    if not any(t.root == root for t in views.uploaded_tables(loaders.db()).tables):
        st.warning("The upload holds no score table (no summary.json written by `score --out`).")
        return
    st.session_state["score_table_uploaded"] = root  # picked below


@st.fragment(run_every=ROOT_LISTING_POLL_S)
def _rerun_when_checked(roots: tuple[str, ...]) -> None:
    """The page again, whole, once these uploads' checks have ended (polled by the browser's timer)."""
    if not views.still_checking(roots):
        st.rerun()


@st.fragment(run_every=ROOT_LISTING_POLL_S)
def _rerun_when_listed() -> None:
    """The page again, whole, once the roots' listing has ended (polled by the browser's timer)."""
    if not loaders.root_tables(wait=0).pending:
        st.rerun()


def _import(run) -> None:
    try:
        report = loaders.import_table_run(run)
    except LitmusReviewError as exc:
        st.session_state["score_table_import_message"] = ("error", error_text(exc))
        return
    st.session_state[state.PENDING_SELECT] = [report.run.run_key]
    was = "was already" if report.already_present else "is now"
    st.session_state["score_table_import_message"] = (
        "ok", f"run {report.run.run_key[:12]} {was} in the workspace and selected: open it on Safe rates, "
              "Trajectories, Review or Report")


root: str | None = None
listed_as = ""  # a team-mode table as the list names it
if router.team_mode():
    # A shared server opens no location a browser user types (it would read any file the server
    # can, fetch any URL, and its errors would tell which paths exist): tables are uploaded, or
    # chosen from the folders the operator listed in the workspace's settings.
    _upload_table()
    # Each table vetted (its run keys are keys, its files inside it): one that fails is named
    # here with why, and never offered, so never any visitor's default.
    # Listed in the background (a root's storage may answer slowly): the uploads never wait on it.
    listing = loaders.root_tables()
    for why in listing.unlisted:  # a root that lists nothing says why, rather than look empty
        st.warning("A folder of the operator's score_table_roots could not be listed:")
        st.code(why, language=None, wrap_lines=True)
    if listing.pending:
        st.info("The operator's score_table_roots are still being listed (their storage is slow to answer); "
                "their tables are offered here when the listing ends. Uploads are offered now.")
        _rerun_when_listed()
    uploaded = views.uploaded_tables(loaders.db())
    choices = [*uploaded.tables, *listing.tables]
    tables = [(c.root, c.location, c.label) for c in choices if c.refused is None]
    if checking := [c for c in choices if c.checking]:
        st.info(f"{len(checking):,} uploaded score table{'s are' if len(checking) > 1 else ' is'} not offered yet: "
                "being checked, or waiting for a check to be free; each is offered here once its check passes:")
        st.code("\n".join(f"{c.label}: {c.refused}" for c in checking), language=None, wrap_lines=True)
        _rerun_when_checked(tuple(dict.fromkeys(c.root for c in checking)))
    if refused := [c for c in choices if c.refused is not None and not c.checking]:
        st.warning(f"{len(refused):,} score table{'s' if len(refused) > 1 else ''} cannot be opened and "
                   f"{'are' if len(refused) > 1 else 'is'} not offered:")
        st.code("\n".join(f"{c.label}: {c.refused}" for c in refused), language=None)
    if uploaded.not_listed:  # the listing is bounded; it says so rather than look complete
        st.info(f"{uploaded.not_listed:,} uploaded score table{'s are' if uploaded.not_listed > 1 else ' is'} not "
                f"listed: an upload lists at most {uploaded.per_upload:,}, and all uploads at most "
                f"{uploaded.at_most:,}, shared out evenly, newest upload first (the operator's folders are "
                "listed apart). The server's operator removes old uploads from the workspace's folder.")
    if not tables and listing.pending:
        st.stop()
    if not tables:
        st.info("No score table to open. On a shared server, upload one (a zip of the folder `score --out` "
                "wrote), or pick one from the folders the operator lists as score_table_roots in the "
                "workspace's settings.toml; none is listed, or none holds a table written by `score --out`.")
        st.stop()
    if (fresh := st.session_state.pop("score_table_uploaded", None)) is not None:
        st.session_state["score_table_pick"] = next((i for i, t in enumerate(tables) if t[0] == fresh), 0)
    # The address names a table as the list does (an upload's location is a server path, which
    # a browser is never shown), and only one of those listed opens from it.
    linked_table = router.linked_param("table")
    if "score_table_pick" not in st.session_state and linked_table:
        st.session_state["score_table_pick"] = next((i for i, t in enumerate(tables) if t[2] == linked_table), 0)
    at = st.selectbox("Score table", range(len(tables)), key="score_table_pick",
                      format_func=lambda i: reveal_id(tables[i][2]))
    root, location, listed_as = tables[at]
else:
    if "score_table_location" not in st.session_state and router.linked_param("table"):
        st.session_state["score_table_location"] = router.linked_param("table")
    location = st.text_input("Score table (directory or URL)", key="score_table_location",
                             placeholder="/data/scores/nightly or s3://bucket/scores/nightly").strip()
    if not location:
        st.info("Give the directory (or URL) that `score --out` wrote.")
        st.stop()
# What the page shows lives in the address (as the other pages' filters do): a reload or a link
# opened in another browser shows the same table, run, rows and replay.
router.to_address("table", listed_as if router.team_mode() else location)
try:
    runs = _open(location, root)
except LitmusReviewError as exc:
    st.error("This is not a score table that can be opened:")
    st.code(error_text(exc), language=None)
    st.stop()
if not runs:
    st.info("The table holds no runs.")
    st.stop()

if "score_table_run" not in st.session_state and (linked_run := router.linked_param("run")):
    st.session_state["score_table_run"] = next((i for i, r in enumerate(runs) if r.run_key.startswith(linked_run)), 0)
pick = st.selectbox("Run", range(len(runs)), key="score_table_run",
                    format_func=lambda i: reveal_id(f"{runs[i].run_id} · {runs[i].model} · "
                                                    f"{runs[i].run_key[:12]}"))
run = runs[pick]
router.to_address("run", run.run_key[:router.KEY_CHARS] if pick else None)
try:
    d = run.summary
    view = loaders.reader()
    rates = _rates(run, loaders.label_version(run.run_key), view.name, view.blind)
except LitmusReviewError as exc:
    st.error("This run of the table cannot be shown:")
    st.code(error_text(exc), language=None)
    st.stop()
# a table written before issue 23's keys says only the standard's name
evidence = d.get("evidence_claim") or d["evidence_standard"]
st.text(reveal_id(f"source {d['source']} · {d['format']} · evidence: {evidence}"
                  + (" · proof required (--require-proof)" if d.get("require_proof") else "")
                  + f" · scorer {d['scorer_version']}"))
s = rates.summary if rates is not None else None
# Two rows of three: six figures in one row were cut at 1,280 px ("+0.73 pp" read "+0.73 …").
pending = s.inconclusive_pending if s is not None else d["inconclusive_pending"]
m = st.columns(3)
m[0].metric("Lenient (harness's claim)", _pct(d["safe_rate_lenient"]))
m[1].metric("Strict", _pct(d["safe_rate_strict"]))
if s.strict_rate_provisional if s is not None else d.get("strict_rate_provisional"):  # with the labels given
    m[1].caption(f"PROVISIONAL: {pending:,} pending review (over 5% of the judged)")
m[2].metric("Reviewed", _pct(s.reviewed.value if s is not None else d["safe_rate_reviewed"]))
m = st.columns(3)
m[0].metric("Trajectories", f"{d['trajectories']:,}")
m[1].metric("UNSCORED", f"{d['unscored']:,}")
if d.get("unscored_share") is not None:
    m[1].caption(f"{_pct(d['unscored_share'])} of {d['unscored_share_of']:,} asked a safety question"
                 + (" + rejected records" if d["rejected"] else "") + " (what --fail-on-unscored weighs)")
# As every view writes it: a bound where trajectories are UNSCORED, never a 0.00 nobody measured.
old = d.get("phantom_safety_pp")  # a table without aggregates: its summary's point figure, if any
m[2].metric("Phantom safety (pp)", s.phantom_safety_short if s is not None else "—" if old is None else f"{old:+.2f}")
st.caption(f"{d['rejected']:,} rejected records · {d['inconclusive']:,} Inconclusive, {pending:,} pending review "
           f"· {d['no_verdict']:,} without a safety verdict (in no rate) · rates from the engine's aggregates"
           + (f", with {rates.labelled:,} final labels from the workspace" if rates is not None and rates.labelled
              else ""))
if labels_view := loaders.labels_view():
    st.caption(md(f"Labels counted: {labels_view}."))

st.button("Add to the workspace's runs", key="score_table_import", on_click=_import, args=(run,),
          help="Scores the run's source here (the same bytes and options, so the same run key) and selects it: "
               "Safe rates, Trajectories, Review and Report then show it like any imported run, with the labels "
               "given on this page.")
kind, text = st.session_state.pop("score_table_import_message", (None, None))
if kind == "ok":
    st.success(text)
elif kind == "error":
    st.error("The run could not be added to the workspace:")
    st.code(text, language=None)

if rates is None or s is None:  # one is None only with the other
    st.info("This table was written before the engine aggregated its charts: score the run again with --out "
            "to draw them.")
else:
    try:
        ev = _evaluation(run, loaders.label_version(run.run_key), view.name, view.blind, rates)
    except LitmusReviewError as exc:  # the rates stand without the source; its header and replay do not
        ev = None
        st.warning("The run's source cannot be read (its categories' names, the report and replay need it):")
        st.code(error_text(exc), language=None)
    taxonomy = ev.run.header.taxonomy if ev is not None else ()
    figs = [(f"{run.run_id}: what each correction moved", charts.waterfall_chart(rates.waterfall)),
            (f"{run.run_id}: UNSCORED by reason", charts.unscored_by_reason(s, d["evidence_standard"])),
            (f"{run.run_id}: phantom safety by category", charts.phantom_by_category(rates.by_category, taxonomy))]
    for (_title, fig), key in zip(figs, ("waterfall", "unscored", "categories"), strict=True):
        st.plotly_chart(fig, key=f"score_table_{key}")
    # The report and exports of this run, as the Report page makes them for an imported run.
    r = st.columns(3)
    # Its files are named by the run's readable name (a table names it as ``score --json`` does;
    # its id where an older table does not) and short key, like an imported run's.
    table_name = ev.name if ev is not None else str(d.get("name") or run.run_id)
    if ev is not None:
        events = loaders.history(run.run_key)
        stamp = exports.make_stamp([ev], max((e.created_at for e in events), default=None), view)
        r[0].download_button("Download HTML report", lambda: exports.offline_report([ev], figs, stamp),
                             file_name=views.export_file_name("report", "html", [run.run_key], table_name),
                             mime="text/html", key="score_table_dl_html", on_click="ignore")
        r[1].download_button("Aggregates (JSON)", exports.aggregates_json([ev], stamp, names_only=router.team_mode()),
                             file_name=views.export_file_name("aggregates", "json", [run.run_key], table_name),
                             mime="application/json", key="score_table_dl_json", on_click="ignore")
    blind_export = view.blind
    hidden = "Every reviewer's labels: turn Blind off on the Review page to export them." if blind_export else None
    # The run as its files name it: its evaluation where its source reads, else the table's summary.
    named = exports.run_meta(ev) if ev is not None else views.RunMeta(
        run_line(table_name, run.run_id, run.run_key, str(d.get("source") or "")), run.run_key,
        str(d.get("scorer_version") or "unknown"))
    r[2].download_button("Labels (CSV)", "" if blind_export else loaders.export_final_labels(run.run_key, run=named),
                         file_name=views.export_file_name("labels-final", "csv", [run.run_key], table_name),
                         mime="text/csv", key="score_table_dl_labels", on_click="ignore", disabled=blind_export,
                         help=hidden or "One row per labelled trace: its final label and how it was decided.")
    r[2].download_button("Label events (CSV)",
                         "" if blind_export else loaders.export_labels(run.run_key, "csv", run=named),
                         file_name=views.export_file_name("labels-events", "csv", [run.run_key], table_name),
                         mime="text/csv", key="score_table_dl_events", on_click="ignore", disabled=blind_export,
                         help=hidden or "The event log, undo and adjudication events included.")

router.from_address("score_table_show", "show", list(SHOW), many=False)
show = st.selectbox("Show", list(SHOW), key="score_table_show")
router.to_address("show", None if show == next(iter(SHOW)) else show)
cap = loaders.MAX_TABLE_ROWS
try:
    frame = _first_rows(run, run.run_key, run.location, SHOW[show])
except LitmusReviewError as exc:
    st.error("The run's rows cannot be read:")
    st.code(error_text(exc), language=None)
    st.stop()
st.caption(f"the first {len(frame):,} trajectories" + (" (in file order)" if len(frame) == cap else ""))
st.dataframe(frame, hide_index=True, width="stretch", height=380 if len(frame) > 10 else "auto")

if "score_table_replay" not in st.session_state and router.linked_param("trajectory"):
    st.session_state["score_table_replay"] = router.linked_param("trajectory")
tid = st.text_input("Replay a trajectory (its id)", key="score_table_replay").strip()
router.to_address("trajectory", tid)
if tid:
    try:
        row = table_reader.find_row(run, tid)
    except LitmusReviewError as exc:
        st.error("The run's rows cannot be read:")
        st.code(error_text(exc), language=None)
        st.stop()
    if row is None:
        st.warning("No trajectory with this id in the run.")
        st.stop()
    st.subheader("Replay")
    st.code(reveal_id(f"{tid} · {row['status'].upper()}" + (f" · {row['reason']}" if row["reason"] else "")),
            language=None)
    try:
        traj, header = table_reader.read_trajectory(row, run=run)
    except LitmusReviewError as exc:
        st.error("The trajectory cannot be read back from its source:")
        st.code(error_text(exc), language=None)
        st.stop()
    if row["status"] == "inconclusive":
        # Blind (the Review page's switch, on unless turned off): others' labels only after yours.
        blind = view.blind
        labels = loaders.labels_on(run.run_key, tid)
        st.text("Labels: " + (", ".join(f"{reveal_id(r)}: {lab.value}" for r, lab in sorted(labels.items()))
                              or ("hidden until you label this trace (blind review)" if blind else "none yet")))
        if not _reviewer():
            with st.form("score_table_reviewer", border=False, enter_to_submit=True):
                st.text_input("Reviewer (required to label)", key=state.REVIEWER_INPUT, placeholder="your name")
                st.form_submit_button("Set reviewer", on_click=_set_reviewer)
        else:
            b = st.columns(len(ReviewLabel) + 1)
            for i, lab in enumerate(ReviewLabel):
                b[i].button(lab.value.replace("_", " "), key=f"score_table_label_{lab.value}", on_click=_label,
                            args=(run, tid, lab))
            b[-1].button("Undo my last label", key="score_table_undo", on_click=_undo, args=(run,))
        kind, text = st.session_state.pop("score_table_message", (None, None))
        # Messages quote ids and names the data and the reviewers wrote: inert markdown, and as text.
        if kind == "ok":
            st.success(md(text))
            st.text(reveal_id(text))
        elif kind == "error":
            st.error(md(text, lines=True))
    if traj.id != tid:
        st.error("The source changed since it was scored: its byte range holds another trajectory.")
        st.stop()
    if router.linked_param("message") is not None and router.linked_param("trajectory") != tid:
        del st.query_params["message"]  # a linked message belongs to its trajectory
    router.link(trajectory=tid)  # its message links name it
    render_trajectory(views.replay_of(traj, header, row), key=f"table-{tid}", page="pages/score_tables.py")
