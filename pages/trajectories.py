"""Trajectories: a filterable, searchable table of one run; selecting a row opens its replay."""

from __future__ import annotations

import streamlit as st

from pages._shared import loaders, router, state
from pages._shared.errors import SHOWN, show_error
from pages._shared.inert import reveal_id
from pages._shared.render import render_trajectory
from scoring.workspace import views

_FROM_TABLE = "_trajectory_from_table"  # the trajectory last opened by picking its row
keys, rows = router.page("Trajectories")
linked_run = router.linked_run(keys)
run_key = st.selectbox("Run", keys, key=state.TRAJ_RUN, format_func=lambda k: loaders.run_label(rows[k]),
                       index=keys.index(linked_run) if linked_run else 0)
df = loaders.trajectory_frame(run_key)
router.link(run=run_key)  # the filters below are this run's: a link names it with them

# Three filters a row: in six columns at 1,280 px a chosen value's chip read "u…".
# Filters and search live in the address: a reload or a shared link shows the same rows.
ADDRESS = {"filter_status": "status", "filter_reason": "reason", "filter_category": "category",
           "filter_termination": "termination", "filter_tool": "tool", "filter_model": "model"}
OPTIONS = {"filter_status": df["status"].unique(), "filter_reason": df["reason"].dropna().unique(),
           "filter_category": df["intended_category"].dropna().unique(),
           "filter_termination": df["termination"].unique(),
           "filter_tool": views.tool_names(df["tools"].dropna().unique()),
           "filter_model": df["model"].dropna().unique()}
for widget, param in ADDRESS.items():
    router.from_address(widget, param, [str(o) for o in OPTIONS[widget]])
if "filter_search" not in st.session_state and router.linked_param("q"):
    st.session_state["filter_search"] = router.linked_param("q")
f = [*st.columns(3), *st.columns(3)]
status = f[0].multiselect("Status", placeholder="all", key="filter_status", options=sorted(df["status"].unique()))
reason = f[1].multiselect(
    "Reason", placeholder="all", key="filter_reason", options=sorted(r for r in df["reason"].dropna().unique())
)
category = f[2].multiselect("Category", placeholder="all", key="filter_category", format_func=reveal_id,
                            options=sorted(c for c in df["intended_category"].dropna().unique()))
termination = f[3].multiselect("Termination", placeholder="all", key="filter_termination", format_func=reveal_id,
                               options=sorted(df["termination"].unique()))
tools = views.tool_names(df["tools"].dropna().unique())  # few distinct lists
tool = f[4].multiselect("Tool", placeholder="all", key="filter_tool", format_func=reveal_id, options=tools)
model = f[5].multiselect("Model", placeholder="all", key="filter_model", format_func=reveal_id,
                         options=sorted(df["model"].dropna().unique()))
query = st.text_input(key="filter_search", label="Search arguments, results and outputs (full text)",
                      placeholder="e.g. exfil, /etc/passwd")

for widget, param in ADDRESS.items():
    router.to_address(param, st.session_state.get(widget))
router.to_address("q", query)
view = df
if status:
    view = view[view["status"].isin(status)]
if reason:
    view = view[view["reason"].isin(reason)]
if category:
    view = view[view["intended_category"].isin(category)]
if termination:
    view = view[view["termination"].isin(termination)]
if tool:
    view = view[views.has_any_tool(view["tools"], tool)]
if model:
    view = view[view["model"].isin(model)]
if query:
    try:
        hits = loaders.search(run_key, query)
    except SHOWN as exc:  # the workspace's copy changed or is gone
        show_error(exc, before="The run cannot be searched: ")
        hits = frozenset()
    view = view[view["trajectory_id"].isin(hits)]

matching = len(view)
cap = loaders.MAX_TABLE_ROWS
view = view.head(cap)  # a 200k-row table would ship every row to the browser on each rerun
st.caption(f"{matching:,} of {len(df):,} trajectories"
           + (f" — showing the first {cap:,}; filter or search to narrow" if matching > cap else ""))
columns = ["trajectory_id", "task_id", "status", "reason", "intended_category", "fired_category", "termination",
           "tool_call_count", "max_raw_bytes", "tools", "suggestion", "model"]
shown = view[columns].reset_index(drop=True)
shown["final output"] = loaders.output_previews(run_key, shown["trajectory_id"].tolist())
# Ids, names, categories and text as the run wrote them, invisible and bidi characters shown.
for col in ("trajectory_id", "task_id", "intended_category", "fired_category", "tools", "model", "final output"):
    shown[col] = shown[col].map(lambda v: v if v is None or v != v else reveal_id(v))
event = st.dataframe(shown, hide_index=True, width="stretch",
                     height=380 if len(view) > 10 else "auto",  # no blank rows under a short result
                     on_select="rerun", selection_mode="single-row", key=state.TRAJ_TABLE,
                     column_config={"max_raw_bytes": st.column_config.NumberColumn("largest call (B)", format="%d"),
                                    # the harness's own category where its format records one
                                    "intended_category": st.column_config.TextColumn("category")})
selected = event.selection.rows if event is not None else []
linked = router.linked_param("trajectory")
if selected:
    row = view.iloc[selected[0]]
    st.session_state[_FROM_TABLE] = row["trajectory_id"]
elif linked and linked != st.session_state.get(_FROM_TABLE) and (df["trajectory_id"] == linked).any():
    # An address naming a trajectory (a bookmark, a colleague's link) opens its replay.
    row = df.loc[df["trajectory_id"] == linked].iloc[0]
else:
    row = None
    if linked:
        del st.query_params["trajectory"]  # the row was deselected: so is the address
if row is not None:
    tid = row["trajectory_id"]
    if router.linked_param("message") is not None and router.linked_param("trajectory") != tid:
        del st.query_params["message"]  # a linked message belongs to its trajectory: another opens at its top
    router.link(run=run_key, trajectory=tid)
    st.subheader("Replay")
    row_reason = row["reason"] if isinstance(row["reason"], str) else ""
    st.code(reveal_id(f"{tid} · {row['status'].upper()}" + (f" · {row_reason}" if row_reason else "")), language=None)
    try:
        render_trajectory(loaders.replay(run_key, tid), key=f"traj-{tid}", page="pages/trajectories.py",
                          highlight=(query or "").strip())
    except SHOWN as exc:  # the workspace's copy changed or is gone: said so, the table stands
        show_error(exc, before="This trajectory cannot be replayed: ")
else:
    st.caption("Select a row to replay the trajectory.")
