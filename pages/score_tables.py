"""Score tables: a table written by ``score --engine dask --out`` opened as a run.

The rates are the engine's own summary (summary.json); the chart is drawn from the table's
rows; replay reads a trajectory by its byte range from the run's source (a path or URL),
without importing the run.
"""

from __future__ import annotations

import streamlit as st

from pages._shared import charts, loaders, router
from pages._shared.errors import error_text
from pages._shared.inert import reveal_id
from pages._shared.render import render_trajectory
from scoring.errors import LitmusReviewError
from scoring.workspace import views

router.require_router()
st.title("Score tables")
st.caption("A Parquet score table written by `litmus-review score --engine dask --out DIR`: rates from the "
           "engine's summary, replay straight from the run's source. Labels stay in the workspace.")

try:
    from scoring import engine
except ImportError:
    st.info("Score tables need the dask extra: pip install 'litmus-review[dask]'.")
    st.stop()


@st.cache_data(ttl=60, show_spinner=False)
def _runs(location: str) -> list[tuple[str, dict]]:
    return engine.open_table(location)


@st.cache_resource(ttl=60, show_spinner=False, max_entries=4)
def _rows(location: str, run_key: str):
    return engine.table_run(location, run_key)


@st.cache_resource(ttl=60, show_spinner=False, max_entries=8)
def _header(source: str):
    return engine.run_header(source)


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:.2f}%"


location = st.text_input("Score table (directory or URL)", key="score_table_location",
                         placeholder="/data/scores/nightly or s3://bucket/scores/nightly").strip()
if not location:
    st.info("Give the directory (or URL) that `score --out` wrote.")
    st.stop()
try:
    runs = _runs(location)
except LitmusReviewError as exc:
    st.error("This is not a score table that can be opened:")
    st.code(error_text(exc), language=None)
    st.stop()
if not runs:
    st.info("The table holds no runs.")
    st.stop()

pick = st.selectbox("Run", range(len(runs)), key="score_table_run",
                    format_func=lambda i: reveal_id(f"{runs[i][1]['run_id']} · {runs[i][1]['model']} · {runs[i][0][:12]}"))
run_key, s = runs[pick]
st.text(reveal_id(f"source {s['source']} · {s['format']} · evidence: {s['evidence_standard']} · scorer {s['scorer_version']}"))
m = st.columns(5)
m[0].metric("Trajectories", f"{s['trajectories']:,}")
m[1].metric("Lenient (harness's claim)", _pct(s["safe_rate_lenient"]))
m[2].metric("Strict", _pct(s["safe_rate_strict"]))
m[3].metric("UNSCORED", f"{s['unscored']:,}")
phantom = s["phantom_safety_excluding_pending_pp"]
m[4].metric("Phantom safety", "—" if phantom is None else f"{phantom:+.2f} pp")
st.caption(f"{s['rejected']:,} rejected records · {s['inconclusive']:,} Inconclusive · {s['no_verdict']:,} without "
           "a safety verdict (in no rate) · rates from the engine's summary")

rows = _rows(location, run_key)
summary = engine.table_summary(rows, s["run_id"])
st.plotly_chart(charts.unscored_by_reason(summary, s["evidence_standard"]), key="score_table_unscored")

frame = rows.select(["trajectory_id", "task_id", "status", "reason", "intended_category", "fired_category",
                     "termination", "tool_call_count", "max_raw_bytes", "tools", "model"]).to_pandas()
cap = loaders.MAX_TABLE_ROWS
st.caption(f"{len(frame):,} trajectories" + (f" — showing the first {cap:,}" if len(frame) > cap else ""))
st.dataframe(frame.head(cap), hide_index=True, width="stretch", height=380 if len(frame) > 10 else "auto")

tid = st.text_input("Replay a trajectory (its id)", key="score_table_replay").strip()
if tid:
    import pyarrow.compute as pc

    hit = rows.filter(pc.equal(rows["trajectory_id"], tid)).to_pylist()
    if not hit:
        st.warning("No trajectory with this id in the run.")
    else:
        row = hit[0]
        st.subheader("Replay")
        st.code(reveal_id(f"{tid} · {row['status'].upper()}" + (f" · {row['reason']}" if row["reason"] else "")), language=None)
        try:
            traj = engine.read_trajectory(row["source"], row["offset"], row["length"])
            header = _header(row["source"])
        except LitmusReviewError as exc:
            st.error("The trajectory cannot be read back from its source:")
            st.code(error_text(exc), language=None)
            st.stop()
        if traj.id != tid:
            st.error("The source changed since it was scored: its byte range holds another trajectory.")
            st.stop()
        render_trajectory(views.replay_of(traj, header, row), key=f"table-{tid}")
