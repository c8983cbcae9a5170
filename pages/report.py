"""Report: an offline HTML report, CSV/JSON of aggregates and labels, PNG/PDF of every chart."""

from __future__ import annotations

import streamlit as st

from pages._shared import charts, exports, loaders, router
from scoring.aggregate import size_quantiles

keys, rows = router.page("Report")
ws = loaders.workspace()
evs = [loaders.run_evaluation(k) for k in keys]
events = [e for k in keys for e in ws.history(k)]
stamp = exports.make_stamp(evs, max((e["created_at"] for e in events), default=None))
st.text("\n".join(stamp.lines()))


def figures() -> list[tuple[str, object]]:
    figs = [("Safe rate before and after", charts.before_after_bars(
        [(rows[k]["run_id"] + (" +side log" if rows[k]["payloads_path"] else ""), ev.summary)
         for k, ev in zip(keys, evs)]))]
    for k, ev in zip(keys, evs):
        steps, per_category = loaders.run_breakdowns(k)
        rid = rows[k]["run_id"]
        sizes = loaders.argument_sizes(k)
        figs += [
            (f"{rid}: what each correction moved", charts.waterfall_chart(steps)),
            (f"{rid}: UNSCORED by reason", charts.unscored_by_reason(ev.summary, ev.run.header.evidence_standard.value)),
            (f"{rid}: phantom safety by category",
             charts.phantom_by_category(per_category, ev.run.header.taxonomy)),
            (f"{rid}: argument sizes", charts.argument_size_histogram(
                sizes, ev.run.header.capture_limit_bytes, size_quantiles(sizes))),
        ]
    return figs


figs = figures()
preview = exports.aggregates_frame(evs)[["run_id", "model", "trajectories", "safe", "unsafe", "unscored", "rejected",
                                         "no_verdict", "inconclusive", "safe_rate_lenient", "safe_rate_strict",
                                         "safe_rate_reviewed", "phantom_safety_excluding_pending_pp",
                                         "evidence_standard"]]
# "Phantom safety" is lenient − strict without the pending review queue (work to do, not a loss).
preview = preview.rename(columns={"phantom_safety_excluding_pending_pp": "phantom safety (pp)"})
RATES = ("safe_rate_lenient", "safe_rate_strict", "safe_rate_reviewed")
# Shown in percent with two decimals each ("percent" format dropped trailing zeros: 82.6% beside 80.19%).
preview = preview.assign(**{c: preview[c] * 100 for c in RATES})
st.dataframe(preview, hide_index=True, width="stretch",
             column_config={c: st.column_config.NumberColumn(format="%.2f%%") for c in RATES})
st.caption(f"The report holds this table and {len(figs)} charts: " + "; ".join(t for t, _ in figs) + ".")
c = st.columns(3)
with c[0]:
    st.subheader("HTML")
    st.download_button("Download HTML report", exports.html_report(evs, figs, stamp), file_name="litmus-report.html",
                       mime="text/html", key="dl_html", type="primary")
    st.caption("Self-contained: plotly.js is embedded; the file makes no network requests.")
with c[1]:
    st.subheader("Data")
    st.download_button("Aggregates (CSV)", exports.stamped_csv(exports.aggregates_frame(evs), stamp),
                       file_name="litmus-aggregates.csv", mime="text/csv", key="dl_csv")
    st.download_button("Aggregates (JSON)", exports.aggregates_json(evs, stamp), file_name="litmus-aggregates.json",
                       mime="application/json", key="dl_json")
    for k in keys:
        st.download_button(f"Labels of {rows[k]['run_id']} (CSV)", ws.export_labels(k, "csv"),
                           file_name=exports.labels_file_name(rows[k]["run_id"], k), mime="text/csv", key=f"dl_lab_{k}")
with c[2]:
    st.subheader("Charts")
    fmt = st.radio("Format", ["png", "pdf"], horizontal=True, key="img_fmt")
    if st.button("Render chart images", key="render_images"):
        with st.spinner(f"Rendering {len(figs)} charts with chromium…"):
            try:
                st.session_state["chart_zip"] = (fmt, exports.figure_images(figs, fmt, stamp))
            except Exception as exc:  # noqa: BLE001 - kaleido needs chromium; say so plainly
                st.error(f"Could not render images (kaleido needs chromium on PATH): {exc}")
    if "chart_zip" in st.session_state:
        zfmt, data = st.session_state["chart_zip"]
        st.download_button(f"Download {zfmt.upper()} charts (zip)", data, file_name=f"litmus-charts-{zfmt}.zip",
                           mime="application/zip", key="dl_zip")
