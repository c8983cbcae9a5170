"""Safe rates: lenient (before), strict (after) and reviewed, UNSCORED beside the rate."""

from __future__ import annotations

import streamlit as st

from pages._shared import charts, exports, loaders, router
from scoring.aggregate import size_quantiles

keys, rows = router.page("Safe rates")
evs = {k: loaders.run_evaluation(k) for k in keys}


def pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:.2f}%"


def ci(rate) -> str:
    c = rate.ci95
    return "" if c is None else f"95% CI {100 * c.low:.1f}–{100 * c.high:.1f}%"


for k, ev in evs.items():
    s = ev.summary
    st.subheader(loaders.run_label(rows[k]))
    st.text(exports.source_line(ev))  # run status and provenance, as inert text
    c = st.columns(5)
    c[0].metric("Lenient rate (before)", pct(s.lenient.value), help="The old safe rate: everything not flagged counts safe; "
                "denominator: all trajectories.")
    c[0].caption(ci(s.lenient))
    moved = s.phantom_safety_pp
    # No arrow for no change: "-0.00 pp" under a red arrow read as a drop.
    changed = moved is not None and round(moved, 2) != 0
    c[1].metric("Strict safe rate (after)", pct(s.strict.value),
                delta=None if moved is None else f"{-moved:+.2f} pp" if changed else "0.00 pp",
                delta_color="normal" if changed else "off", delta_arrow="auto" if changed else "off")
    c[1].caption(ci(s.strict) + f" · n={s.strict.denominator:,}")
    c[2].metric("Reviewed safe rate", pct(s.reviewed.value))
    c[2].caption(ci(s.reviewed) + f" · {s.inconclusive_pending:,} of {s.inconclusive:,} Inconclusive pending")
    c[3].metric("UNSCORED", f"{s.unscored:,}", help="Capture not proven complete: left out of the rate.")
    c[3].caption(f"{pct(s.unscored_rate)} of {s.total:,} · strict if all unsafe {pct(s.strict_if_unscored_unsafe)}, "
                 f"if all safe {pct(s.strict_if_unscored_safe)}")
    c[4].metric("Phantom safety", f"{s.phantom_safety_pp:+.2f} pp" if s.phantom_safety_pp is not None else "—",
                help="100 × (lenient − strict)")
    c[4].caption(f"evidence standard: {ev.run.header.evidence_standard.value}")

st.plotly_chart(charts.before_after_bars([(rows[k]["run_id"] + (" +side log" if rows[k]["payloads_path"] else ""),
                                           ev.summary) for k, ev in evs.items()]),
                width="stretch", key="chart_before_after")

focus = st.selectbox("Details for run", keys, format_func=lambda k: loaders.run_label(rows[k]))
ev = evs[focus]
steps, per_category = loaders.run_breakdowns(focus)
# Full width: in half a page the six waterfall labels ran into each other below ~1,500 px.
st.plotly_chart(charts.waterfall_chart(steps), width="stretch", key="chart_waterfall")
st.plotly_chart(charts.unscored_by_reason(ev.summary), width="stretch", key="chart_unscored")
st.plotly_chart(charts.phantom_by_category(per_category, ev.run.header.taxonomy),
                width="stretch", key="chart_phantom")
sizes = loaders.argument_sizes(focus)
q = size_quantiles(sizes)
st.plotly_chart(charts.argument_size_histogram(sizes, ev.run.header.capture_limit_bytes, q), width="stretch",
                key="chart_sizes")
if q:
    limit = ev.run.header.capture_limit_bytes
    st.caption(f"To capture 99% of calls whole the limit must be ≥ {q[0.99]:,} B; 99.9%: ≥ {q[0.999]:,} B"
               + (f" (current limit {limit:,} B)." if limit else "."))

if len(keys) >= 2:
    st.subheader("Comparing two models")
    a, b = st.columns(2)
    ka = a.selectbox("Model A", keys, index=0, format_func=lambda k: loaders.run_label(rows[k]))
    kb = b.selectbox("Model B", keys, index=1, format_func=lambda k: loaders.run_label(rows[k]))
    diff = loaders.paired(ka, kb)
    st.plotly_chart(charts.paired_difference_chart(diff, rows[ka]["run_id"], rows[kb]["run_id"]),
                    width="stretch", key="chart_paired")
