"""Report: an offline HTML report, CSV/JSON of aggregates and labels, PNG/PDF of every chart."""

from __future__ import annotations

import plotly.graph_objects as go
import streamlit as st

from pages._shared import charts, exports, loaders, router
from pages._shared.errors import error_text
from pages._shared.inert import md, reveal_id
from pages._shared.runtext import stale_mark
from scoring.workspace import views

keys, rows = router.page("Report")
evs = [loaders.run_evaluation(k) for k in keys]
histories = {k: loaders.history(k) for k in keys}
events = [e for k in keys for e in histories[k]]
# Every figure counts the labels this session may know (blind review: others' only on the traces
# this reviewer labelled), and the stamp of every export says whose they are.
view = loaders.reader()
stamp = exports.make_stamp(evs, max((e.created_at for e in events), default=None), view)
st.text(reveal_id("\n".join(stamp.lines()), lines=True))


# Every pair of the runs, B − A (the Safe rates page's comparison), in the report and the data.
paired = [views.PairedComparison(exports.run_meta(evs[keys.index(a)]), exports.run_meta(evs[keys.index(b)]),
                                 loaders.paired(a, b)) for a, b in views.run_pairs(keys)]


def figures() -> tuple[list[tuple[str, go.Figure]], list[exports.Stamp]]:
    """The report's charts, and each one's stamp: a chart of one run names that run alone (under
    its title and in its stamp), so its image stands alone on a slide; the comparisons name all.
    A chart with nothing to draw stays in the list: the exports leave it out and say why."""
    all_runs = list(rows.values())
    figs = [("Safe rate before and after", charts.before_after_bars(
        [(loaders.run_legend(rows[k], all_runs), ev.summary) for k, ev in zip(keys, evs, strict=False)]))]
    if len(keys) >= 2:
        legend = {k: loaders.run_legend(rows[k], all_runs) for k in keys}
        figs.append(("Paired comparison", charts.paired_comparison_chart(
            [(legend[a], legend[b], c.difference) for (a, b), c in zip(views.run_pairs(keys), paired, strict=True)])))
    stamps = [stamp] * len(figs)
    for k, ev in zip(keys, evs, strict=False):
        steps, per_category = loaders.run_breakdowns(k)
        rid = rows[k].name
        sizes = loaders.argument_sizes(k)
        own = [
            (f"{rid}: what each correction moved", charts.waterfall_chart(steps)),
            (f"{rid}: UNSCORED by reason",
             charts.unscored_by_reason(ev.summary, ev.run.header.evidence_standard.value)),
            # A log that gives no category (tau-bench's): the exports say so, no empty axes
            (f"{rid}: phantom safety by category", charts.phantom_by_category(per_category, ev.run.header.taxonomy)),
            (f"{rid}: argument sizes",
             charts.argument_size_histogram(sizes, ev.run.header.capture_limit_bytes, views.size_quantiles(sizes))),
        ]
        figs += [(title, charts.for_run(fig, exports.run_identity(ev))) for title, fig in own]
        own_labels = max((e.created_at for e in histories[k]), default=None)
        stamps += [exports.make_stamp([ev], own_labels, view, exported_at=stamp.exported_at)] * len(own)
    return figs, stamps


figs, fig_stamps = figures()
exports.warm_renderer()
# The rates and what is left out of them; safe/unsafe counts, the evidence standard and the
# provenance are in the CSV and JSON. Eleven narrow columns fit 1,280 px beside the sidebar.
preview = exports.aggregates_frame(evs)[["name", "run_status_badge", "trajectories", "unscored", "rejected",
                                         "no_verdict", "inconclusive", "safe_rate_lenient", "safe_rate_strict",
                                         "safe_rate_reviewed"]]
RATES = ("safe_rate_lenient", "safe_rate_strict", "safe_rate_reviewed")
# Shown in percent with two decimals each ("percent" format dropped trailing zeros: 82.6% beside 80.19%).
preview = preview.assign(**{c: preview[c] * 100 for c in RATES},
                         name=preview["name"].map(reveal_id),
                         run_status_badge=preview["run_status_badge"].map(lambda b: reveal_id(b) if b else "finished"))
# A stale run's rates are its own older scorer's: its row says so where it is named.
preview["name"] = [name + (f" · {stale_mark(ev.scorer_version)}" if ev.stale else "")
                   for name, ev in zip(preview["name"], evs, strict=True)]
# Phantom safety, compact: a point where known, a range where trajectories are UNSCORED (their
# harm was never read), never a 0.00 nobody measured.
preview = preview.assign(**{"phantom safety": [ev.summary.phantom_safety_short for ev in evs]})
columns = {
    # the run's name holds its model (whole in the stamp above the table)
    "name": st.column_config.TextColumn("run", width=148),
    "run_status_badge": st.column_config.TextColumn("status", width=76,
                                                    help="How the harness says the run ended: a run that did not "
                                                         "finish has rates over the samples it wrote only."),
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
        st.text(reveal_id(f"Strict rate PROVISIONAL for {ev.name}: {ev.summary.inconclusive_pending:,} "
                          f"trajectories pending review (over 5% of the {ev.summary.judged:,} judged)"))
drawn, omitted = exports.drawn_and_omitted(figs)
st.caption(f"The report holds this table{', the paired comparison of every pair of runs' if paired else ''} and "
           f"{len(drawn)} charts: " + md("; ".join(figs[i][0] for i in drawn)) + "."
           + (" Not drawn, no data: " + md("; ".join(f"{t} ({why})" for t, why in omitted)) + "." if omitted else ""))


def offer(label: str, data, kind: str, ext: str, mime: str, key: str, run_keys: list[str] | None = None,
          **options) -> None:
    """A download named for its runs and kind (``views.export_file_name``: files of two runs never
    overwrite each other). A click does not rerun the page: a rerun replaced the HTML report's
    deferred file, and a second download clicked before it ended got nothing."""
    run_keys = run_keys or keys
    # One run's file: its readable name (unique in the workspace) and short key.
    name = views.export_file_name(kind, ext, run_keys, rows[run_keys[0]].name if len(run_keys) == 1 else "")
    st.download_button(label, data, file_name=name, mime=mime, key=key, on_click="ignore", **options)


c = st.columns(3)
with c[0]:
    st.subheader("HTML")
    # Built when clicked (a static image of each chart takes a moment), not on every rerun.
    offer("Download HTML report", lambda: exports.offline_report(evs, figs, stamp, paired), "report", "html",
          "text/html", "dl_html", type="primary")
    st.caption(f"Self-contained: plotly.js is embedded, and a static image of each of the {len(drawn)} charts "
               "for readers without JavaScript; the file makes no network requests.")
with c[1]:
    st.subheader("Data")
    offer("Aggregates (CSV)", exports.stamped_csv(exports.aggregates_frame(evs), stamp), "aggregates", "csv",
          "text/csv", "dl_csv")
    offer("Aggregates (JSON)", exports.aggregates_json(evs, stamp, paired, names_only=router.team_mode()),
          "aggregates", "json", "application/json", "dl_json",
          help="The runs' figures and the paired comparison of every pair of them.")
    offer("Aggregates by category (CSV)", exports.stamped_csv(exports.categories_frame(evs), stamp),
          "aggregates-by-category", "csv", "text/csv", "dl_csv_categories",
          help="One row per run and category: the counts, the three rates and phantom safety (the JSON has them "
               "under each run's by_category).")
    if paired:
        offer("Paired comparison (CSV)", views.paired_csv(paired, stamp.exported_at), "paired", "csv", "text/csv",
              "dl_paired", help="One row per pair of runs: B's strict safe rate minus A's on the tasks both ran.")
with c[2]:
    st.subheader("Charts")
    router.from_address("img_fmt", "format", ["png", "pdf"], many=False)  # a reload keeps the choice
    fmt = st.radio("Format", ["png", "pdf"], horizontal=True, key="img_fmt")
    router.to_address("format", None if fmt == "png" else fmt)
    if st.button("Render chart images", key="render_images"):
        bar = st.progress(0.0, text=f"Rendering {len(drawn)} charts with chromium…")

        def advance(done: int, total: int) -> None:
            bar.progress(done / total, text=f"Rendered {done} of {total} charts")

        try:
            st.session_state["chart_zip"] = (fmt, tuple(keys), exports.figure_images(
                figs, fmt, stamp, progress=advance, stamps=fig_stamps))
        except Exception as exc:
            st.error("Could not render images (kaleido needs chromium on PATH): " + md(error_text(exc), lines=True))
        bar.empty()
    zfmt, zkeys, data = st.session_state.get("chart_zip", (None, (), b""))
    if zfmt is not None and list(zkeys) == keys:  # images of another selection are not these runs'
        offer(f"Download {zfmt.upper()} charts (zip)", data, f"charts-{zfmt}", "zip", "application/zip", "dl_zip")
st.subheader("Labels")
st.caption("Per run: its final labels, one row per labelled trace (unanimous, or the latest adjudication), and its "
           "label event log, undo and adjudication events included (what `litmus-review labels import` reads back).")
# Every reviewer's labels, per trace: not in blind review (the loaders would give this reader's
# view alone, which a file passed on would not say).
blind = view.blind
for k, ev in zip(keys, evs, strict=True):
    # A file with no labels would be a header naming no run: not offered until there are some.
    why_not = ("Every reviewer's labels: turn Blind off on the Review page to export them." if blind
               else None if histories[k] else "No labels in this run yet.")
    meta, name = exports.run_meta(ev), md(rows[k].name)
    # Side by side, a row per run: in a third of the page a run's name cut the button's label.
    row = st.columns(2)
    with row[0]:
        offer(f"Labels of {name} (CSV)",
              "" if why_not else loaders.export_final_labels(k, run=meta, exported_at=stamp.exported_at),
              "labels-final", "csv", "text/csv", f"dl_lab_{k}", [k], disabled=bool(why_not),
              help=why_not or "One row per labelled trace: its final label, how it was decided and each reviewer's "
                              "label.")
    with row[1]:
        offer(f"Label events of {name} (CSV)",
              "" if why_not else loaders.export_labels(k, "csv", run=meta, exported_at=stamp.exported_at),
              "labels-events", "csv", "text/csv", f"dl_events_{k}", [k], disabled=bool(why_not),
              help=why_not or "The event log, undo and adjudication events included.")
