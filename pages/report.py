"""Report: an offline HTML report, CSV/JSON of aggregates and labels, PNG/PDF of every chart."""

from __future__ import annotations

import plotly.graph_objects as go
import streamlit as st

from pages._shared import charts, exports, loaders, router, state
from pages._shared.inert import md, reveal_id
from pages._shared.runtext import stale_mark
from scoring.workspace import views

keys, rows = router.page("Report")
evs = [loaders.run_evaluation(k) for k in keys]
events = [e for k in keys for e in loaders.history(k)]
stamp = exports.make_stamp(evs, max((e.created_at for e in events), default=None))
st.text(reveal_id("\n".join(stamp.lines()), lines=True))


def figures() -> tuple[list[tuple[str, go.Figure]], list[exports.Stamp]]:
    """The report's charts, and each one's stamp: a chart of one run names that run alone (under
    its title and in its stamp), so its image stands alone on a slide; the comparison names all."""
    all_runs = list(rows.values())
    figs = [("Safe rate before and after", charts.before_after_bars(
        [(loaders.run_legend(rows[k], all_runs), ev.summary) for k, ev in zip(keys, evs, strict=False)]))]
    stamps = [stamp]
    for k, ev in zip(keys, evs, strict=False):
        steps, per_category = loaders.run_breakdowns(k)
        rid = rows[k].run_id
        sizes = loaders.argument_sizes(k)
        own = [
            (f"{rid}: what each correction moved", charts.waterfall_chart(steps)),
            (f"{rid}: UNSCORED by reason",
             charts.unscored_by_reason(ev.summary, ev.run.header.evidence_standard.value)),
            (f"{rid}: argument sizes",
             charts.argument_size_histogram(sizes, ev.run.header.capture_limit_bytes, views.size_quantiles(sizes))),
        ]
        if charts.has_category_data(per_category):  # AgentHarm's logs give none: no chart of empty axes
            own.insert(2, (f"{rid}: phantom safety by category",
                           charts.phantom_by_category(per_category, ev.run.header.taxonomy)))
        figs += [(title, charts.for_run(fig, exports.run_identity(ev))) for title, fig in own]
        own_labels = max((e.created_at for e in loaders.history(k)), default=None)
        stamps += [exports.make_stamp([ev], own_labels)] * len(own)
    return figs, stamps


figs, fig_stamps = figures()
exports.warm_renderer()
# The rates and what is left out of them; safe/unsafe counts, the evidence standard and the
# provenance are in the CSV and JSON. Twelve narrow columns fit 1,280 px beside the sidebar.
preview = exports.aggregates_frame(evs)[["run_id", "run_status_badge", "model", "trajectories", "unscored", "rejected",
                                         "no_verdict", "inconclusive", "safe_rate_lenient", "safe_rate_strict",
                                         "safe_rate_reviewed"]]
RATES = ("safe_rate_lenient", "safe_rate_strict", "safe_rate_reviewed")
# Shown in percent with two decimals each ("percent" format dropped trailing zeros: 82.6% beside 80.19%).
preview = preview.assign(**{c: preview[c] * 100 for c in RATES},
                         **{c: preview[c].map(reveal_id) for c in ("run_id", "model")},
                         run_status_badge=preview["run_status_badge"].map(lambda b: reveal_id(b) if b else "finished"))
# A stale run's rates are its own older scorer's: its row says so where it is named.
preview["run_id"] = [rid + (f" · {stale_mark(ev.scorer_version)}" if ev.stale else "")
                     for rid, ev in zip(preview["run_id"], evs, strict=True)]
# Phantom safety, compact: a point where known, a range where trajectories are UNSCORED (their
# harm was never read), never a 0.00 nobody measured.
preview = preview.assign(**{"phantom safety": [ev.summary.phantom_safety_short for ev in evs]})
columns = {
    "run_id": st.column_config.TextColumn("run", width=84),
    "run_status_badge": st.column_config.TextColumn("status", width=76,
                                                    help="How the harness says the run ended: a run that did not "
                                                         "finish has rates over the samples it wrote only."),
    "model": st.column_config.TextColumn("model", width=64),
    "trajectories": st.column_config.NumberColumn("trajectories", width=70, format="localized"),
    "unscored": st.column_config.NumberColumn("UNSCORED", width=72, format="localized"),
    "rejected": st.column_config.NumberColumn("rejected", width=58, format="localized"),
    "no_verdict": st.column_config.NumberColumn("no verdict", width=66, format="localized"),
    "inconclusive": st.column_config.NumberColumn("Inconclusive", width=78, format="localized"),
    "phantom safety": st.column_config.TextColumn(
        "phantom pp", width=70, help="Phantom safety in points: hidden harm + not judged, measured on the decided "
                                     "trajectories; where some are UNSCORED, a range: the bound of what it would "
                                     "be had they been scored (never a 0.00 nobody measured)."),
    "evidence_standard": st.column_config.TextColumn("evidence", width=60),
    **{c: st.column_config.NumberColumn(c.removeprefix("safe_rate_"), format="%.2f%%", width=w)
       for c, w in zip(RATES, (56, 52, 60), strict=False)}}
st.dataframe(preview, hide_index=True, width="stretch", column_config=columns)
for ev in evs:  # the badge: a strict rate that rests on too little says so (inert text: ids are data)
    if ev.summary.strict_rate_provisional:
        st.text(reveal_id(f"Strict rate PROVISIONAL for {ev.run.header.run_id}: {ev.summary.inconclusive_pending:,} "
                          f"trajectories pending review (over 5% of the {ev.summary.judged:,} judged)"))
st.caption(f"The report holds this table and {len(figs)} charts: " + md("; ".join(t for t, _ in figs)) + ".")
c = st.columns(3)
with c[0]:
    st.subheader("HTML")
    # Built when clicked (a static image of each chart takes a moment), not on every rerun.
    st.download_button("Download HTML report", lambda: exports.offline_report(evs, figs, stamp),
                       file_name="litmus-report.html", mime="text/html", key="dl_html", type="primary")
    st.caption(f"Self-contained: plotly.js is embedded, and a static image of each of the {len(figs)} charts "
               "for readers without JavaScript; the file makes no network requests.")
with c[1]:
    st.subheader("Data")
    st.download_button("Aggregates (CSV)", exports.stamped_csv(exports.aggregates_frame(evs), stamp),
                       file_name="litmus-aggregates.csv", mime="text/csv", key="dl_csv")
    st.download_button("Aggregates (JSON)", exports.aggregates_json(evs, stamp), file_name="litmus-aggregates.json",
                       mime="application/json", key="dl_json")
    blind = st.session_state.get(state.BLIND, True)  # every reviewer's labels, per trace: not in blind review
    for k in keys:
        st.download_button(f"Labels of {md(rows[k].run_id)} (CSV)", "" if blind else loaders.export_labels(k, "csv"),
                           file_name=exports.labels_file_name(rows[k].run_id, k), mime="text/csv", key=f"dl_lab_{k}",
                           disabled=blind, help="Every reviewer's labels: turn Blind off on the Review page to export "
                           "them." if blind else None)
with c[2]:
    st.subheader("Charts")
    fmt = st.radio("Format", ["png", "pdf"], horizontal=True, key="img_fmt")
    if st.button("Render chart images", key="render_images"):
        bar = st.progress(0.0, text=f"Rendering {len(figs)} charts with chromium…")

        def advance(done: int, total: int) -> None:
            bar.progress(done / total, text=f"Rendered {done} of {total} charts")

        try:
            st.session_state["chart_zip"] = (fmt, exports.figure_images(figs, fmt, stamp, progress=advance,
                                                                               stamps=fig_stamps))
        except Exception as exc:
            st.error("Could not render images (kaleido needs chromium on PATH): " + md(str(exc), lines=True))
        bar.empty()
    if "chart_zip" in st.session_state:
        zfmt, data = st.session_state["chart_zip"]
        st.download_button(f"Download {zfmt.upper()} charts (zip)", data, file_name=f"litmus-charts-{zfmt}.zip",
                           mime="application/zip", key="dl_zip")
