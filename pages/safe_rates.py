"""Safe rates: lenient (before), strict (after) and reviewed, UNSCORED beside the rate."""

from __future__ import annotations

import streamlit as st

from pages._shared import charts, exports, loaders, router, state
from pages._shared.inert import md, reveal_id
from pages._shared.runtext import stale_mark
from scoring.workspace import views

# How long after this run's last message the browser's timer asks for the charts (a page script's
# bare string would be drawn): the image's paint needs Streamlit's small image chunk fetched and
# the SVG decoded; the timer fires no sooner than the browser is free.
PAINT_WAIT_SECONDS = 0.5

keys, rows = router.page("Safe rates")
evs = {k: loaders.run_evaluation(k) for k in keys}
if view := loaders.labels_view():  # the reviewed rate and the pending counts are this reviewer's view
    st.caption(md(f"Labels counted: {view}."))


all_runs = list(rows.values())
legends = [(loaders.run_legend(rows[k], all_runs), ev.summary) for k, ev in evs.items()]
# Each chart is built once per process for what it shows (``loaders.figure``): the runs with their
# label and score versions, and the names drawn in it.
before_after = loaders.figure(lambda: charts.before_after_bars(legends), "before_after",
                              *((k, loaders.run_version(k), name) for k, (name, _) in zip(evs, legends, strict=True)))
# The headline chart first, as an image of the same figure: it is on screen as soon as the script
# sends it, where a plotly chart first waits for the browser to evaluate plotly.js, a long task on
# a busy laptop. The interactive chart of the same figure is a click away.
st.image(charts.headline_svg(before_after), width="content")
# The plotly charts wait for the browser's timer below: evaluating plotly.js is one long task, and
# an image still to be painted when it starts waits for its end. Only a session's first run of the
# page waits (every later one, the timer's or a widget's, draws them), and a session without a
# browser (AppTest) has no paint to wait for.
painted = bool(st.session_state.get(state.CHARTS_PAINT_TICK)) or not loaders.has_browser()


def interactive(fig, key: str) -> None:
    """``fig`` as a plotly chart, or until the headline image is painted, room of its height."""
    if painted:
        st.plotly_chart(fig, width="stretch", key=key)
    else:
        with st.container(height=int(fig.layout.height or 450), border=False):
            st.caption("Interactive chart: drawn once the chart at the top is on screen.")


with st.expander("Interactive chart: hover for each rate and its interval, zoom, save as PNG"):
    interactive(before_after, "chart_before_after")


def pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:.2f}%"


def ci(rate) -> str:
    c = rate.ci95
    return "" if c is None else f"95% CI {100 * c.low:.1f}–{100 * c.high:.1f}%"


def pp(x: float | None) -> str:
    return "—" if x is None else f"{x:+.2f} pp"


for k, ev in evs.items():
    s, h = ev.summary, ev.run.header
    st.subheader(md(loaders.run_label(rows[k])))
    badge = exports.run_badge(ev)
    if badge:
        # A run that did not finish: its rates describe the samples written, not the task.
        st.warning(md(f"Run status: {reveal_id(badge)}. These rates describe only the samples the harness "
                      "wrote before it stopped, not the task."))
        if h.run_status_detail:
            with st.expander("The harness's full status message"):
                st.code(reveal_id(h.run_status_detail), language=None, wrap_lines=True)
    st.text(reveal_id(exports.source_line(ev)))  # run status and provenance, as inert text
    # A stale run's figures are its own older scorer's (the banner above says so): each says whose.
    tag = f" · {stale_mark(ev.scorer_version)}" if ev.stale else ""
    c = st.columns([1, 1.1, 1, 0.85, 1.15])  # a range ("2.34–3.55") is wider than a count
    c[0].metric("Lenient rate (before)" + tag, pct(s.lenient.value),
                help="The harness's own claim: the share it judged safe among the trajectories it judged "
                     "(a verdict, not abnormal), as in its reported figure (1 − ASR). Trajectories never asked "
                     "a safety question are in no rate.")
    c[0].caption(ci(s.lenient) + f" · {s.judged:,} judged by the harness" if s.lenient.value is not None
                 else "no lenient rate: the harness judged none of these trajectories")
    moved = s.lenient_minus_strict_pp
    # No arrow for no change: "-0.00 pp" under a red arrow read as a drop.
    changed = moved is not None and round(moved, 2) != 0
    c[1].metric("Strict safe rate (after)" + tag, pct(s.strict.value),
                delta=None if moved is None else f"{-moved:+.2f} pp" if changed else "0.00 pp",
                delta_color="normal" if changed else "off", delta_arrow="auto" if changed else "off",
                help="SAFE only where a classifier of record read every full surface; UNSCORED, Inconclusive "
                     "and no-verdict trajectories are out of the denominator.")
    c[1].caption(ci(s.strict) + f" · n={s.strict.denominator:,}"
                 + (f" · PROVISIONAL: {s.inconclusive_pending:,} pending review (over 5% of the judged)"
                    if s.strict_rate_provisional else ""))
    c[2].metric("Reviewed safe rate" + tag, pct(s.reviewed.value))
    c[2].caption(ci(s.reviewed) + f" · {s.inconclusive_pending:,} of {s.inconclusive:,} Inconclusive pending")
    c[3].metric("UNSCORED" + tag, f"{s.unscored:,}", help="Capture not proven complete: left out of the rate. The "
                "share beside it is what --fail-on-unscored weighs: UNSCORED and rejected records among the "
                "trajectories asked a safety question plus the rejected records.")
    c[3].caption(f"{pct(s.unscored_share)} of {s.unscored_share_of:,} asked a safety question"
                 + (" + rejected records" if s.rejected else "") + f" · rejected records {s.rejected:,} · "
                 f"no safety verdict {s.no_verdict:,} · if all UNSCORED and pending were unsafe "
                 f"{pct(s.strict_if_undecided_unsafe)}, if all safe {pct(s.strict_if_undecided_safe)}"
                 + (" (labelled ones as the reviewed rate counts them)" if s.inconclusive_pending != s.inconclusive
                    else ""))
    parts = s.phantom
    c[4].metric("Phantom safety (pp)" + tag, s.phantom_safety_short,
                help="What the harness's figure claimed that the evidence does not support: hidden harm found on "
                     "full surfaces + trajectories the harness did not judge, measured on the decided ones. Where "
                     "some are UNSCORED their harm was never read: a bound, what it would be had they been scored "
                     "(each SAFE, UNSAFE or Inconclusive). Capture loss and pending review (Inconclusive: work "
                     "to do) are parts of lenient − strict, not of phantom safety, and are shown apart.")
    if parts:
        unknown = s.phantom_safety_pp is None and parts.unscored_low_pp is not None
        c[4].caption(f"hidden harm {pp(parts.hidden_harm_pp)} · not judged {pp(parts.unjudged_pp)}"
                     + (f" · UNSCORED {parts.unscored_text}"
                        f" (unknown: {s.unscored:,} not scored)" if unknown else "")
                     + f" · apart: capture loss {pp(parts.capture_loss_pp)}, pending review "
                       f"{pp(parts.pending_review_pp)}"
                     + (f", labelled {pp(parts.labelled_pp)}" if s.inconclusive_pending != s.inconclusive else ""))
    t = s.truncation
    facts = [f"evidence standard: {h.evidence_claim}", *map(md, h.proof_terms)]
    if t is not None and t.truncated:
        facts.append(f"t × ĥ = {t.pp:.2f} pp (95% CI {t.low_pp:.2f}–{t.high_pp:.2f}): {t.truncated:,} of {t.judged:,} "
                     f"judged cut, {t.recovered_unsafe:,} of {t.recovered_decided:,} recovered ones the harness "
                     "called benign unsafe" if t.pp is not None
                     else f"t × ĥ = {t.bounds_text} (ĥ unknown): {t.truncated:,} of {t.judged:,} "
                          "judged cut, none recovered that the harness called benign (add the side log)"
                     if t.pp_bounds else f"t × ĥ: {t.truncated:,} of {t.judged:,} judged cut")
    if s.safe_by_classifier:
        facts.append(
            "SAFE certified by " + ", ".join(f"{md(name or '?')} {n:,}" for name, n in s.safe_by_classifier.items())
            + (f" under scorer {ev.scorer_version} ({stale_mark(ev.scorer_version)})" if ev.stale else "")
        )
    st.caption(" · ".join(facts))
    if h.reported_safe_rate is not None:
        # The source text comes from the log: shown as plain text, never as markdown.
        diff = None if s.lenient.value is None else 100 * (s.lenient.value - h.reported_safe_rate)
        agree = "agrees with the lenient rate" if diff is not None and abs(diff) < 5e-5 else \
            f"DIFFERS from the lenient rate by {pp(diff)}" if diff is not None else "no lenient rate to compare"
        st.text(f"Harness reported {pct(h.reported_safe_rate)} ({reveal_id(h.reported_safe_rate_source)}): {agree}")



def linked(param: str, default: int) -> int:
    """The position among the selected runs of the run the address's ``param`` names (a reload or
    a shared link shows the same run's details), else ``default``."""
    prefix = router.linked_param(param)
    key = router.resolve_run(prefix, dict.fromkeys(keys)) if prefix else None
    return keys.index(key) if key else default


focus = st.selectbox("Details for run", keys, format_func=lambda k: loaders.run_label(rows[k]),
                     index=linked("run", 0))
router.link(run=focus)
ev = evs[focus]
steps, per_category = loaders.run_breakdowns(focus)
# Full width: in half a page the six waterfall labels ran into each other below ~1,500 px.
# Each chart names its run under its title: one saved from the page (plotly's camera) says which.
named = exports.run_identity(ev)
shows = (focus, loaders.run_version(focus), named)  # what each of this run's charts is built for
interactive(loaders.figure(lambda: charts.for_run(charts.waterfall_chart(steps), named), "waterfall", *shows),
            "chart_waterfall")
interactive(loaders.figure(lambda: charts.for_run(charts.unscored_by_reason(
    ev.summary, ev.run.header.evidence_standard.value), named), "unscored", *shows), "chart_unscored")
# A run imported before the importers read the harness's categories, not yet re-derived (its bytes
# gone or changed, or the workspace read-only), says so wherever its categories are drawn.
OUTDATED = ("its categories are as read when it was imported, before litmus-review read the harness's own "
            "(AgentHarm's category, AgentDojo's suite and injection task, tau2's domain): opening the workspace "
            "writable re-derives them from its original bytes, and where those are gone or changed, importing its "
            "file again does")
if charts.has_category_data(per_category):
    interactive(loaders.figure(lambda: charts.for_run(charts.phantom_by_category(
        per_category, ev.run.header.taxonomy), named), "phantom", *shows), "chart_phantom")
    if rows[focus].categories_outdated:
        st.caption(f"Phantom safety by category: {OUTDATED}.")
else:  # empty axes said nothing
    st.caption("Phantom safety by category: no category data ("
               + (OUTDATED if rows[focus].categories_outdated else "this run's log gives its trajectories no category")
               + ").")
sizes = loaders.argument_sizes(focus)
q = views.size_quantiles(sizes)
interactive(loaders.figure(lambda: charts.for_run(charts.argument_size_histogram(
    sizes, ev.run.header.capture_limit_bytes, q), named), "sizes", *shows), "chart_sizes")
if q:
    limit = ev.run.header.capture_limit_bytes
    st.caption(f"To capture 99% of calls whole the limit must be ≥ {q[0.99]:,} B; 99.9%: ≥ {q[0.999]:,} B"
               + (f" (current limit {limit:,} B)." if limit else "."))

if len(keys) >= 2:
    st.subheader("Comparing two models")
    a, b = st.columns(2)
    ka = a.selectbox("Model A", keys, index=linked("a", 0), format_func=lambda k: loaders.run_label(rows[k]))
    kb = b.selectbox("Model B", keys, index=linked("b", 1), format_func=lambda k: loaders.run_label(rows[k]))
    router.to_address("a", ka[:router.KEY_CHARS])
    router.to_address("b", kb[:router.KEY_CHARS])
    paired_diff = loaders.paired(ka, kb)
    interactive(loaders.figure(lambda: charts.paired_difference_chart(paired_diff, rows[ka].name, rows[kb].name),
                               "paired", ka, loaders.run_version(ka), rows[ka].name, kb, loaders.run_version(kb),
                               rows[kb].name), "chart_paired")

if not painted:
    @st.fragment(run_every=PAINT_WAIT_SECONDS)
    def after_first_paint() -> None:
        """Called inline at the end of this run, then by the browser's timer, which fires once the
        browser is free after drawing this run: the second call draws the page with its charts (a
        widget changed first draws them too, and its run ends the timer)."""
        if st.session_state.get(state.CHARTS_PAINT_TICK):
            st.rerun()  # the whole page: the frontend drops the timer when a full run starts
        st.session_state[state.CHARTS_PAINT_TICK] = True

    after_first_paint()
