"""Score tables: a table written by ``score --engine dask --out`` opened as a run.

The rates and charts are the engine's aggregates (summary.json, aggregates.json) with the
workspace's labels applied (scoring.scoretable); no page reads every row. Replay and review
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
from scoring.errors import LitmusReviewError
from scoring.model import ReviewLabel
from scoring.workspace import views

router.require_router()
st.title("Score tables")
st.caption("A Parquet score table written by `litmus-review score --engine dask --out DIR`: rates from the "
           "engine's aggregates, replay straight from the run's source. Labels stay in the workspace.")

try:
    from scoring import scoretable
except ImportError:
    st.info("Score tables need the dask extra: pip install 'litmus-review[dask]'.")
    st.stop()

SHOW = {"all": None, "Inconclusive (to review)": "inconclusive", "UNSCORED": "unscored", "SAFE": "safe",
        "UNSAFE": "unsafe"}
COLUMNS = ["trajectory_id", "task_id", "status", "reason", "intended_category", "fired_category", "termination",
           "tool_call_count", "max_raw_bytes", "tools", "model"]


@st.cache_resource(ttl=60, show_spinner=False, max_entries=8)
def _runs(location: str, root: str | None, options: str) -> list:
    """The table's runs (shared, not copied on each rerun: a table of 10,000 runs is 10,000
    summaries); each run's aggregates are read when that run is shown. ``options``: the storage
    options (JSON) of the workspace's profile for the location, never the page's address."""
    return scoretable.open_table(location, json.loads(options), root=root)


def _open(location: str, root: str | None) -> list:
    """The table's runs, opened with the storage profile the workspace's settings give its
    location (credentials from the server's environment); the profile's name is shown."""
    profile, options = loaders.table_storage(location)
    runs = _runs(location, root, json.dumps(options, sort_keys=True))
    if profile is not None:
        st.caption(f"storage profile: {profile} (the workspace's settings)")
    return runs


@st.cache_resource(ttl=60, show_spinner=False, max_entries=8)
def _rates(run, labels: int):
    """The run's rates with the workspace's labels (``labels``: their version, for the cache)."""
    return loaders.table_rates(run)


@st.cache_resource(ttl=60, show_spinner=False, max_entries=8)
def _evaluation(run, labels: int, _rates):
    """The run as the report and exports see it (its header read from the run's source)."""
    return scoretable.evaluation(run, _rates)


@st.cache_resource(ttl=60, show_spinner=False, max_entries=16)
def _first_rows(_run, run_key: str, location: str, status: str | None):
    """The run's first rows of a status (read once a minute, not on every rerun); shared, not
    copied: as st.cache_data, the 10,000 rows were pickled when read and unpickled on every
    rerun (the page only shows them)."""
    return scoretable.first_rows(_run, COLUMNS, loaders.MAX_TABLE_ROWS, status=status).to_pandas()


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
        st.session_state["score_table_message"] = ("error", str(exc))


def _undo(run) -> None:
    try:
        undone = loaders.undo_last(run.run_key, _reviewer())
    except LitmusReviewError as exc:
        st.session_state["score_table_message"] = ("error", str(exc))
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
    except LitmusReviewError as exc:
        st.error("This upload is not a score table that can be opened:")
        st.code(error_text(exc), language=None)
        return
    if not views.tables_under([root]):
        st.warning("The upload holds no score table (no summary.json written by `score --out`).")
        return
    st.session_state["score_table_uploaded"] = root  # picked below


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
if router.team_mode():
    # A shared server opens no location a browser user types (it would read any file the server
    # can, fetch any URL, and its errors would tell which paths exist): tables are uploaded, or
    # chosen from the folders the operator listed in the workspace's settings.
    _upload_table()
    tables = views.uploaded_tables(loaders.db()) + [
        (r, loc, loc) for r, loc in loaders.tables_under(loaders.table_roots())]
    if not tables:
        st.info("No score table to open. On a shared server, upload one (a zip of the folder `score --out` "
                "wrote), or pick one from the folders the operator lists as score_table_roots in the "
                "workspace's settings.toml; none is listed, or none holds a table written by `score --out`.")
        st.stop()
    if (fresh := st.session_state.pop("score_table_uploaded", None)) is not None:
        st.session_state["score_table_pick"] = next((i for i, t in enumerate(tables) if t[0] == fresh), 0)
    at = st.selectbox("Score table", range(len(tables)), key="score_table_pick",
                      format_func=lambda i: reveal_id(tables[i][2]))
    root, location, _name = tables[at]
else:
    location = st.text_input("Score table (directory or URL)", key="score_table_location",
                             placeholder="/data/scores/nightly or s3://bucket/scores/nightly").strip()
    if not location:
        st.info("Give the directory (or URL) that `score --out` wrote.")
        st.stop()
try:
    runs = _open(location, root)
except LitmusReviewError as exc:
    st.error("This is not a score table that can be opened:")
    st.code(error_text(exc), language=None)
    st.stop()
if not runs:
    st.info("The table holds no runs.")
    st.stop()

pick = st.selectbox("Run", range(len(runs)), key="score_table_run",
                    format_func=lambda i: reveal_id(f"{runs[i].run_id} · {runs[i].model} · "
                                                    f"{runs[i].run_key[:12]}"))
run = runs[pick]
d = run.summary
# a table written before issue 23's keys says only the standard's name
evidence = d.get("evidence_claim") or d["evidence_standard"]
st.text(reveal_id(f"source {d['source']} · {d['format']} · evidence: {evidence}"
                  + (" · proof required (--require-proof)" if d.get("require_proof") else "")
                  + f" · scorer {d['scorer_version']}"))
rates = _rates(run, loaders.label_version(run.run_key))
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
        ev = _evaluation(run, loaders.label_version(run.run_key), rates)
    except LitmusReviewError as exc:  # the rates stand without the source; its header and replay do not
        ev = None
        st.warning("The run's source cannot be read (its categories' names, the report and replay need it):")
        st.code(str(exc), language=None)
    taxonomy = ev.run.header.taxonomy if ev is not None else ()
    figs = [(f"{run.run_id}: what each correction moved", charts.waterfall_chart(rates.waterfall)),
            (f"{run.run_id}: UNSCORED by reason", charts.unscored_by_reason(s, d["evidence_standard"])),
            (f"{run.run_id}: phantom safety by category", charts.phantom_by_category(rates.by_category, taxonomy))]
    for (_title, fig), key in zip(figs, ("waterfall", "unscored", "categories"), strict=True):
        st.plotly_chart(fig, key=f"score_table_{key}")
    # The report and exports of this run, as the Report page makes them for an imported run.
    r = st.columns(3)
    if ev is not None:
        events = loaders.history(run.run_key)
        stamp = exports.make_stamp([ev], max((e.created_at for e in events), default=None))
        r[0].download_button("Download HTML report", lambda: exports.offline_report([ev], figs, stamp),
                             file_name="litmus-report.html", mime="text/html", key="score_table_dl_html")
        r[1].download_button("Aggregates (JSON)", exports.aggregates_json([ev], stamp),
                             file_name="litmus-aggregates.json", mime="application/json", key="score_table_dl_json")
    blind_export = st.session_state.get(state.BLIND, True)
    r[2].download_button("Labels (CSV)", "" if blind_export else loaders.export_labels(run.run_key, "csv"),
                         file_name=exports.labels_file_name(run.run_id, run.run_key), mime="text/csv",
                         key="score_table_dl_labels", disabled=blind_export,
                         help="Every reviewer's labels: turn Blind off on the Review page to export them."
                         if blind_export else None)

show = st.selectbox("Show", list(SHOW), key="score_table_show")
cap = loaders.MAX_TABLE_ROWS
frame = _first_rows(run, run.run_key, run.location, SHOW[show])
st.caption(f"the first {len(frame):,} trajectories" + (" (in file order)" if len(frame) == cap else ""))
st.dataframe(frame, hide_index=True, width="stretch", height=380 if len(frame) > 10 else "auto")

tid = st.text_input("Replay a trajectory (its id)", key="score_table_replay").strip()
if tid:
    row = scoretable.find_row(run, tid)
    if row is None:
        st.warning("No trajectory with this id in the run.")
        st.stop()
    st.subheader("Replay")
    st.code(reveal_id(f"{tid} · {row['status'].upper()}" + (f" · {row['reason']}" if row["reason"] else "")),
            language=None)
    try:
        traj, header = scoretable.read_trajectory(row, run=run)
    except LitmusReviewError as exc:
        st.error("The trajectory cannot be read back from its source:")
        st.code(error_text(exc), language=None)
        st.stop()
    if row["status"] == "inconclusive":
        # Blind (the Review page's switch, on unless turned off): others' labels only after yours.
        blind = st.session_state.get(state.BLIND, True)
        labels = loaders.visible_labels(run.run_key, tid, _reviewer(), blind=blind)
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
    render_trajectory(views.replay_of(traj, header, row), key=f"table-{tid}")
