"""Pure chart builders: data in, plotly figure out. No Streamlit here (unit-tested on the dict)."""

from __future__ import annotations

import re
import textwrap
from collections import Counter
from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from pages._shared.inert import plot, reveal_id
from pages._shared.runtext import middle_cut
from scoring import figure_svg
from scoring.model import Category
from scoring.workspace.views import PairedDifference, Rate, Summary, WaterfallStep

COLORS = {"lenient": "#9e9e9e", "strict": "#1f5fa8", "reviewed": "#2e8b57",
          "payload": "#d9662b", "other": "#6b7b8c", "limit": "#d32f2f", "q": "#9c4dcc"}  # both themes
FONT = dict(family="Inter, Helvetica, Arial, sans-serif", size=14)
NEUTRAL = "#8a8a8a"
"""Notes and error bars: a mid grey that reads on a white and on a dark (Streamlit dark theme)
background alike; a fixed dark grey (#444) vanished in dark mode."""
WATERFALL_LABEL_CHARS = 16  # per line of a waterfall bar's label: six bars on a 1,280 px screen


def _layout(fig: go.Figure, title: str, **kw) -> go.Figure:
    kw.setdefault("margin", dict(l=60, r=30, t=70, b=60))
    kw.setdefault("legend", dict(orientation="h", y=-0.18))
    fig.update_layout(title=dict(text=title, x=0.01, xanchor="left"), font=FONT, template="plotly_white", **kw)
    return fig


def warm_up() -> None:
    """Build a throwaway figure of the charts' trace types in their layout: plotly imports its
    trace classes and loads the layout's template on first use, which the process's first chart
    paid for (the app does this in the background: ``loaders.warm_up_storage``)."""
    _layout(go.Figure([go.Waterfall(), go.Bar(), go.Scatter()]), "")


def for_run(fig: go.Figure, run: str) -> go.Figure:
    """The figure with the run it shows named under its title (a chart of one run, exported or
    pasted on a slide, says which run it is): ``run`` as the run wrote its names, escaped."""
    lines = _wrap(reveal_id(run), SUBTITLE_CHARS)  # plotly never wraps: a long file name was cut at the edge
    # At the top of the figure: plotly centres a title in the top margin, which put the run's name
    # under a legend drawn above the plot.
    fig.update_layout(title=dict(subtitle=dict(text="<br>".join(map(plot, lines)),
                                               font=dict(size=12, color=NEUTRAL)),
                                 yref="container", y=1, yanchor="top", pad=dict(t=14)))
    margin = fig.layout.margin
    fig.update_layout(margin=dict(t=(margin.t if margin.t is not None else 70) + 16 * len(lines) + 4))
    return fig


SUBTITLE_CHARS = 110
"""Characters per line of the run's name under a chart's title (12 px): the width of a chart
beside the sidebar at 1,280 px."""


def _nothing_to_draw(fig: go.Figure, message: str) -> go.Figure:
    """An empty chart says why it is empty: bare axes (−1 to 6 by default) read as a fault."""
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    fig.add_annotation(text=message, xref="paper", yref="paper", x=0.5, y=0.5, showarrow=False,
                       font=dict(size=14, color=NEUTRAL))
    # No empty plot area a page's height tall: a short figure, margins for the title only.
    fig.update_layout(height=220, margin=dict(l=30, r=30, t=60, b=20), showlegend=False,
                      meta={NOTHING_DRAWN: message.replace("<br>", " ")})
    return fig


NOTHING_DRAWN = "nothing_drawn"
"""The key under the figure's ``layout.meta`` of why a chart has nothing to draw (its message):
an export leaves such a chart out and writes the sentence instead (``nothing_drawn``)."""


def nothing_drawn(fig: go.Figure) -> str | None:
    """Why the chart has no data to draw (the sentence it shows), None when it draws some."""
    meta = fig.layout.meta
    return meta.get(NOTHING_DRAWN) if isinstance(meta, dict) else None


def _pct(rate: Rate) -> tuple[float | None, float, float]:
    if rate.value is None:
        return None, 0.0, 0.0
    ci = rate.ci95
    v = 100 * rate.value
    return v, (100 * ci.high - v) if ci else 0.0, (v - 100 * ci.low) if ci else 0.0


RUN_LABEL_CHARS = 28
"""Characters per line of a run's name under its bars (``RUN_LABEL_LINES`` at most): rotated full
names of ten real runs ran into the legend and off the left edge."""
RUN_LABEL_LINES = 3
"""Lines of a run's name under its bars: "model · task · variant" and how it was scored, whose end
tells apart runs of one model and task (the --require-proof copy of a run)."""


_BREAKS = re.compile(r"(?<=[\s_,/-])")
"""Where a label may break: after a space, an underscore, a comma, a slash or a hyphen (LITMUS
names categories "chain_of_tasks_(data_manipulation,communication_outreach)")."""


def _wrap(text: str, width: int) -> list[str]:
    """``text`` in lines of at most ``width`` characters, broken after ``_BREAKS`` where it can
    be and inside a longer word where it cannot; every character kept."""
    lines: list[str] = []
    line = ""
    for piece in _BREAKS.split(text):
        while len(piece) > width:  # a word longer than a line
            room = width - len(line)
            lines.append(line + piece[:room])
            line, piece = "", piece[room:]
        if len(line) + len(piece.rstrip()) > width:
            lines.append(line)
            line = ""
        line += piece
    return [part.strip() for part in [*lines, line] if part.strip()] or [text]


def _two_lines(name: str, width: int) -> str:
    """A name as the run wrote it (invisible characters shown), wrapped to two lines of ``width``
    characters at most (cut with "…"), escaped for plotly line by line ("<br>" is ours)."""
    lines = _wrap(reveal_id(name), width)
    if len(lines) > 2:
        lines = [lines[0], lines[1][:width - 1] + "…"]
    return "<br>".join(map(plot, lines))


def _run_lines(name: str, width: int) -> str:
    """A run's name under its bars: wrapped to ``RUN_LABEL_LINES`` lines of ``width`` characters;
    a longer one keeps its first line and its end (what tells a run from its twin of the same
    model: its variant, how it was scored, its status badge), "…" between, escaped line by line."""
    text = reveal_id(name)
    lines = _wrap(text, width)
    if len(lines) > RUN_LABEL_LINES:
        tail = _wrap(text[len(text) - (RUN_LABEL_LINES - 1) * width:], width)[-(RUN_LABEL_LINES - 1):]
        tail[0] = "…" + tail[0][max(0, len(tail[0]) - width + 1):]
        lines = [lines[0], *tail]
    return "<br>".join(map(plot, lines))


def _run_labels(names: Sequence[str]) -> list[str]:
    """Short, distinct axis labels: wrapped to ``RUN_LABEL_LINES`` lines (their middle cut with
    "…"), narrower the more runs share the axis, and numbered where two runs would read alike
    (plotly draws one category's bars on top of each other)."""
    width = max(8, min(RUN_LABEL_CHARS, 100 // max(1, len(names))))  # ~750 px of axis, ~7 px a character
    labels = [_run_lines(name, width) for name in names]
    seen = Counter(labels)
    count: Counter = Counter()
    for i, label in enumerate(labels):
        if seen[label] > 1:
            count[label] += 1
            labels[i] = f"{label} ({count[label]})"
    return labels


NOTE_NAME_CHARS = 56
"""A run's name in the notes above the bars (its full name is on the page): a long name ran the
note off the right edge, where plotly cuts it. Its middle is cut: its start (the model) and its end
(variant, how it was scored, status) tell runs of one model apart."""


NOTE_LINE_CHARS = 100
"""Characters per line of the notes above the bars: about 650 px at their size, inside the plot
of the narrowest page that shows them (1,280 px beside the sidebar)."""


def _short(name: str) -> str:
    return middle_cut(reveal_id(name), NOTE_NAME_CHARS)


def _missing_rates(s: Summary) -> str:
    """Which of the run's bars are missing, and why: a gap with no word reads as a glitch."""
    missing = [name for name, rate in (("strict", s.strict), ("reviewed", s.reviewed)) if rate.value is None]
    out = f"; no {' or '.join(missing)} rate (n = 0)" if missing else ""
    if s.lenient.value is None and s.total:
        out += "; no lenient rate (the harness judged none)"
    return out


INSIDE_LABEL_MIN_PCT = 8.0
"""A rate bar shorter than this holds no readable value: its 13 px label needs about 18 px, and
the plot gives a percentage point under 3 px (plotly shrank the label to a smudge, or to
nothing at 0 %). Such a bar's value is written above its interval's whisker instead."""


def before_after_bars(summaries: Sequence[tuple[str, Summary]]) -> go.Figure:
    """Lenient, strict and reviewed safe rates per run, with 95 % intervals; UNSCORED annotated.
    Every bar carries its value: inside at its base, or for a small bar (under
    ``INSIDE_LABEL_MIN_PCT``) above its whisker, in a text trace grouped with its bars."""
    fig = go.Figure()
    names = _run_labels([name for name, _ in summaries])
    # Bars from zero: on an axis starting at 60-70 % a drop of a few points looked like half the
    # bar. The axis says so, and runs to 106 % so a 100 % bar's label and interval are not cut.
    floor = 0
    above = []
    for kind in ("lenient", "strict", "reviewed"):
        vals, up, down, text = [], [], [], []
        for _, s in summaries:
            v, hi, lo = _pct(getattr(s, kind))
            vals.append(v)
            up.append(hi)
            down.append(lo)
            text.append("—" if v is None else f"{v:.1f}%" + (" provisional" if kind == "strict"
                                                                and s.strict_rate_provisional else ""))
        small = [v is not None and v < INSIDE_LABEL_MIN_PCT for v in vals]
        name = {"lenient": "Lenient (before)", "strict": "Strict (after)", "reviewed": "Reviewed"}[kind]
        fig.add_bar(name=name, x=names, y=[None if v is None else v - floor for v in vals],
                    base=floor, customdata=vals, offsetgroup=kind,
                    hovertemplate="%{x}: %{customdata:.2f}%<extra>%{fullData.name}</extra>",
                    text=["" if tiny else t for t, tiny in zip(text, small, strict=True)],
                    textposition="inside", insidetextanchor="start",  # at the base: clear of the whiskers
                    textfont=dict(color="white", size=13), marker_color=COLORS[kind],
                    error_y=dict(type="data", array=up, arrayminus=down, visible=True, thickness=1.4, width=5,
                                 color=NEUTRAL))
        # Over the whisker's top, in the bar's own slot of the group (scattermode "group"); no
        # colour of its own, so it takes the theme's text colour (light and dark alike).
        above.append(go.Scatter(
            x=names, y=[v + hi if v is not None and tiny else None
                        for v, hi, tiny in zip(vals, up, small, strict=True)],
            text=[t if tiny else "" for t, tiny in zip(text, small, strict=True)], mode="text",
            textposition="top center", textfont=dict(size=13), offsetgroup=kind, cliponaxis=False,
            hoverinfo="skip", showlegend=False, name=f"{name}: value"))
    fig.add_traces(above)
    notes = [f"{_short(name)}: UNSCORED {s.unscored:,} ({100 * (s.unscored_share or 0):.1f}% of "
             f"{s.unscored_share_of:,} asked" + (" + rejected" if s.rejected else "") + "), "
             f"Inconclusive {s.inconclusive:,}" + (f", no safety verdict {s.no_verdict:,}" if s.no_verdict else "")
             + (f", rejected records {s.rejected:,}" if s.rejected else "") + _missing_rates(s)
             + (f"; strict rate PROVISIONAL: {s.inconclusive_pending:,} pending review" if s.strict_rate_provisional
                else "")
             for name, s in summaries]
    fig.update_yaxes(title="safe rate (%) · bars start at 0", range=[floor, 106], ticksuffix="%",
                     tickvals=list(range(0, 101, 20)))
    # Wrapped: plotly never wraps an annotation, and a run's note past the plot's width was cut
    # at the figure's right edge. Continuation lines are indented under their run's name.
    lines = [plot(("" if i == 0 else "   ") + line)
             for note in notes for i, line in enumerate(_wrap(note, NOTE_LINE_CHARS))]
    fig.add_annotation(text="<br>".join(lines), xref="paper", yref="paper", x=0, y=1.0, yanchor="bottom",
                       showarrow=False, align="left", font=dict(size=12, color=NEUTRAL))
    fig.update_xaxes(tickangle=0)
    # The note lines above the plot: the top margin (and the figure) grow with them, so ten
    # runs' notes do not run into the title.
    top = 70 + 16 * len(lines)
    _layout(fig, "Safe rate before and after strict scoring (95% CI)", barmode="group", scattermode="group",
            height=396 + top, margin=dict(l=60, r=30, t=top, b=106),  # three lines of run names
            legend=dict(orientation="h", y=-0.28 if len(summaries) > 4 else -0.24))
    # The title at the very top, the notes between it and the plot (plotly centres a title in
    # the top margin, over the notes).
    fig.update_layout(title=dict(yref="container", y=1, yanchor="top", pad=dict(t=14)))
    return fig


def waterfall_chart(steps: Sequence[WaterfallStep], title: str = "What each correction moved") -> go.Figure:
    """From the lenient rate to the reviewed rate, one correction per bar (percentage points)."""
    xs, ys, measures, text = [], [], [], []
    for i, step in enumerate(steps):
        # Wrapped to fit six bars on a laptop screen: longer lines ran into their neighbours.
        # A no-break space keeps a leading sign with its word.
        xs.append("<br>".join(textwrap.wrap(step.name.replace("− ", "−\u00a0").replace("+ ", "+\u00a0"),
                                            WATERFALL_LABEL_CHARS)))
        if i == 0:
            measures.append("absolute")
            ys.append(100 * (step.rate or 0))
            text.append(f"{100 * (step.rate or 0):.2f}%")
        else:
            measures.append("relative")
            ys.append(step.delta_pp or 0.0)
            text.append("no rate (n = 0)" if step.rate is None else f"{step.delta_pp or 0:+.2f} pp")
    if steps and steps[0].rate is None:
        # No lenient rate: the harness judged nothing, so there is no "before" to correct.
        fig = go.Figure()
        _nothing_to_draw(fig, "No lenient rate: the harness judged none of these trajectories,<br>"
                              "so there is no claim of its own to correct.")
        return _layout(fig, title, showlegend=False, height=220, margin=dict(l=60, r=30, t=70, b=30))
    final = steps[-1].rate if steps else None
    if final is not None:
        xs.append("reviewed rate")
        measures.append("total")
        ys.append(0)
        text.append(f"{100 * final:.2f}%")
    # Without a reviewed rate there is no total bar: plotly would draw the running sum (the
    # lenient rate) there, a rate that does not exist.
    fig = go.Figure(go.Waterfall(x=xs, y=ys, measure=measures, textposition="none", hoverinfo="x+text",
                                 hovertext=text, decreasing=dict(marker_color=COLORS["limit"]),
                                 increasing=dict(marker_color=COLORS["reviewed"]),
                                 totals=dict(marker_color=COLORS["strict"]), connector=dict(line=dict(color="#bbb"))))
    # Every bar's value above its top, whichever way it moved: plotly writes a drop's value under
    # its bar, where a drop to near 0 ran into the axis labels and the next bars' values.
    fig.add_scatter(x=xs, y=_waterfall_tops(ys, measures), mode="text", text=text, textposition="top center",
                    textfont=dict(size=13), cliponaxis=False, hoverinfo="skip", showlegend=False)
    # From zero: the first and last bars are rates, and a rate's bar cut at 45 % read as half of
    # what it is. The corrections keep their size in points, written on each bar.
    top = 100 * max((s.rate for s in steps if s.rate is not None), default=1.0)
    fig.update_yaxes(title="safe rate (%) · bars start at 0", range=[0, min(100, top) * 1.1 + 2], ticksuffix="%")
    fig.update_xaxes(tickangle=0, tickfont=dict(size=11))
    if steps and final is None:
        # Beside the first bar, not over it.
        fig.add_annotation(text="No reviewed rate: no trajectory is left with a decisive verdict<br>"
                                "on a proven capture, nor a reviewer's genuine decline.", xref="paper", yref="paper",
                           x=0.6, y=0.5, showarrow=False, font=dict(size=13, color=NEUTRAL))
    return _layout(fig, title, showlegend=False, margin=dict(l=60, r=30, t=70, b=110))


def _waterfall_tops(ys: Sequence[float], measures: Sequence[str]) -> list[float]:
    """The top of each waterfall bar: the higher of the levels it runs between."""
    tops, level = [], 0.0
    for y, measure in zip(ys, measures, strict=True):
        if measure == "absolute":
            level = y
            tops.append(y)
        elif measure == "total":
            tops.append(level)
        else:
            tops.append(max(level, level + y))
            level += y
    return tops


MAX_CATEGORY_BARS = 12
"""Past this many categories, those at +0.00 pp are listed in a note instead of drawn."""
CATEGORY_LABEL_CHARS = 30
"""Characters per line of a category's name beside its bar (two lines at most)."""
NO_CATEGORY = "(none)"
"""How the breakdowns group the trajectories the log gave no category."""


def _category_label(cid: str, cats: dict[str, Category]) -> str:
    """A category's label: its id and name as the run wrote them, wrapped, escaped for plotly."""
    if cid == NO_CATEGORY:
        return "no category"
    return _two_lines(f"{cid} {cats[cid].name}" if cid in cats else cid, CATEGORY_LABEL_CHARS)


PHANTOM_TITLE = "Phantom safety by category: hidden harm + not judged (hatched: unknown, UNSCORED)"
"""Short enough for the chart's width (plotly never wraps a title); pending review, never part
of it, is named in each bar's hover."""


def phantom_by_category(by_category: dict[str, Summary], taxonomy: Sequence[Category],
                        title: str = PHANTOM_TITLE) -> go.Figure:
    """Phantom safety per category: hidden harm + not judged where it is known, and where some
    trajectories are UNSCORED the bound of what it would be had they been scored, drawn as a
    hatched range (never a bar at 0.00 that nobody measured); the pending review queue is work
    to do, never phantom safety. Payload-dependent categories in their own colour.

    Horizontal bars, one row per category, its name wrapped beside it: rotated names under the
    bars ran into each other and, past the figure's bottom, into an export's stamp."""
    cats = {c.id: c for c in taxonomy}
    items = [(cid, s, s.phantom_safety_bounds_pp) for cid, s in by_category.items()
             if s.phantom_safety_bounds_pp is not None]
    items.sort(key=lambda kv: (kv[2][1], kv[2][0]), reverse=True)
    # Many categories: those with no phantom safety are named in a note, not drawn as bars (41
    # rows, 35 of them at +0.00 pp, made a chart taller than a slide).
    zero = ([cid for cid, s, _b in items if s.phantom_safety_text == "+0.00 pp"]
            if len(items) > MAX_CATEGORY_BARS else [])
    items = [item for item in items if item[0] not in set(zero)]
    fig = go.Figure()
    if not has_category_data(by_category):
        _layout(fig, title)
        return _nothing_to_draw(fig, "No category data: this run's log gives its trajectories no category.")

    def dependent(cid: str) -> bool:  # a category the taxonomy does not name (or none) is one of the others
        return bool(cats.get(cid) and cats[cid].payload_dependent)

    # "other categories" says something only beside payload-dependent ones (a harness's own
    # categories, AgentHarm's, are in no taxonomy): alone, the solid bars are the measured part.
    others = "other categories" if any(dependent(cid) for cid, _s, _b in items) else "measured"

    def hover(s: Summary) -> list:
        return [s.phantom_safety_text, s.total, s.unscored, s.inconclusive,
                (s.phantom and s.phantom.pending_review_pp) or 0.0]

    template = ("%{y}<br>phantom %{customdata[0]}<br>n=%{customdata[1]}, UNSCORED %{customdata[2]}, "
                "Inconclusive %{customdata[3]} (pending review %{customdata[4]:+.2f} pp, not included)<extra></extra>")
    for dep in (True, False):
        # The measured part (the bound's low end where it is a range and not 0), its value written
        # where it is known.
        sel = [(cid, s, b) for cid, s, b in items if dependent(cid) == dep
               and (s.phantom_safety_pp is not None or abs(b[0]) >= 5e-13)]
        fig.add_bar(
            name="payload-dependent" if dep else others, orientation="h",
            y=[_category_label(cid, cats) for cid, _s, _b in sel], x=[b[0] for _c, _s, b in sel],
            text=["" if s.phantom_safety_pp is None else s.phantom_safety_text for _c, s, _b in sel],
            textposition="outside", cliponaxis=False, marker_color=COLORS["payload" if dep else "other"],
            customdata=[hover(s) for _c, s, _b in sel], hovertemplate=template)
    ranged = [(cid, s, b) for cid, s, b in items if s.phantom_safety_pp is None]
    if ranged:
        fig.add_bar(
            name="unknown: UNSCORED (the bound)", orientation="h",
            y=[_category_label(cid, cats) for cid, _s, _b in ranged], x=[b[1] - b[0] for _c, _s, b in ranged],
            base=[b[0] for _c, _s, b in ranged], text=[s.phantom_safety_text for _c, s, _b in ranged],
            textposition="outside", cliponaxis=False,
            marker=dict(color="rgba(0,0,0,0)", line=dict(color=[COLORS["payload" if dependent(cid) else "other"]
                                                               for cid, _s, _b in ranged], width=1.5),
                        pattern=dict(shape="/", fgcolor=[COLORS["payload" if dependent(cid) else "other"]
                                                         for cid, _s, _b in ranged], size=6)),
            customdata=[hover(s) for _c, s, _b in ranged], hovertemplate=template)
    order = [_category_label(cid, cats) for cid, _s, _b in items]
    # The largest at the top; the labels take the room they need on the left.
    fig.update_yaxes(categoryorder="array", categoryarray=order[::-1], automargin=True, tickfont=dict(size=11))
    lows, highs = [b[0] for _c, _s, b in items], [b[1] for _c, _s, b in items]
    span = max([abs(v) for v in lows + highs] + [1.0])
    least, most = min([0.0, *lows, *highs]), max([0.0, *lows, *highs])
    # Room for each bar's value beside it (a range's text is longer), on both sides of zero
    # where a bar is negative.
    # Every category at 0 (AgentDojo's programmatic judge): a whole point of axis, not 0.05-pp
    # ticks under bars of no width.
    fig.update_xaxes(title="phantom safety (pp)", zeroline=True, zerolinecolor="#888",
                     range=[least - (0.25 * span if least < 0 else 0),
                            most + (0.45 if ranged else 0.25) * span if most > least else 1.0])
    rows = max(1, len(items))
    _layout(fig, title, height=150 + 36 * rows, margin=dict(l=30, r=40, t=90, b=60), bargap=0.3, barmode="overlay",
            # On the plot's top edge: a paper offset (1.02) is more pixels the taller the chart, and
            # on a chart of forty categories it ran the legend into the run's name above it.
            legend=dict(orientation="h", x=0, xanchor="left", y=1, yanchor="bottom"))
    if not items:
        _nothing_to_draw(fig, f"All {len(zero):,} categories at +0.00 pp: no phantom safety in any." if zero else
                              "No category has both a lenient and a strict rate<br>"
                              "(a strict rate needs a decisive verdict on a proven capture).")
    elif zero:
        note = (f"{len(zero):,} more categories at +0.00 pp (no phantom safety, nothing UNSCORED): "
                + ", ".join("no category" if c == NO_CATEGORY else reveal_id(c) for c in zero))
        lines = [plot(line) for line in _wrap(note, NOTE_LINE_CHARS)]
        fig.add_annotation(text="<br>".join(lines), xref="paper", yref="paper", x=0, y=0, yanchor="top",
                           yshift=-50, showarrow=False, align="left", font=dict(size=11, color=NEUTRAL))
        fig.update_layout(height=fig.layout.height + 16 * len(lines), margin=dict(b=60 + 16 * len(lines)))
    return fig


def has_category_data(by_category: dict[str, Summary]) -> bool:
    """Some trajectory of the run has a category (tau-bench's, ATIF's and Claude Code's logs give none)."""
    return any(cid != NO_CATEGORY for cid in by_category)


def unscored_by_reason(summary: Summary, standard: str = "proven") -> go.Figure:
    """How many trajectories each reason code kept out of the denominator. ``standard``: the
    run's evidence standard (a structural run's captures are never called proven)."""
    items = sorted(summary.unscored_by_reason.items(), key=lambda kv: kv[1])
    fig = go.Figure(go.Bar(x=[n for _, n in items], y=[plot(r) for r, _ in items], orientation="h",
                           marker_color=COLORS["limit"], text=[f"{n:,}" for _, n in items], textposition="outside"))
    # Counts: whole trajectories on the axis (plotly's own ticks read 0.5 for a count of 2).
    fig.update_xaxes(title="trajectories", dtick=1 if items and max(n for _, n in items) <= 10 else None)
    of = f"{summary.unscored_share_of:,} asked a safety question" + (" + rejected records" if summary.rejected else "")
    _layout(fig, f"UNSCORED by reason ({summary.unscored:,} of {of})", showlegend=False,
            margin=dict(l=190, r=40, t=70, b=60))
    if not items:
        _nothing_to_draw(fig, "No trajectory is UNSCORED: every capture was proven complete." if standard == "proven"
                         else "No trajectory is UNSCORED: no capture signal fired. Structural evidence:<br>"
                              "completeness is inferred from the log's own signals, not proven by digests.")
    return fig


def argument_size_histogram(sizes: Sequence[int], limit: int | None, quantiles: dict[float, int],
                            bins: int = 80) -> go.Figure:
    """Argument sizes with the capture limit and the limits that would keep 99 % / 99.9 % whole.

    Binned here (numpy), not in the browser: a million calls would otherwise ship a million
    points to every viewer.
    """
    arr = np.asarray(sizes, dtype=np.int64)
    if arr.size and arr.max() - arr.min() < bins:
        # Few distinct sizes: a bin per byte count, so the axis reads whole bytes (not 12.6 B).
        counts, edges = np.histogram(arr, bins=np.arange(arr.min(), arr.max() + 2) - 0.5)
    else:
        counts, edges = np.histogram(arr, bins=bins) if arr.size else (np.zeros(0), np.zeros(1))
    fig = go.Figure(go.Bar(x=((edges[:-1] + edges[1:]) / 2).tolist(), y=counts.tolist(), width=np.diff(edges).tolist(),
                           marker_color=COLORS["strict"], name="tool calls",
                           hovertemplate="%{x:,.0f} B: %{y:,} calls<extra></extra>"))
    fig.update_xaxes(title="raw argument size (bytes)")
    fig.update_yaxes(title="tool calls (log scale)", type="log", dtick=1)
    if limit:
        over = int((arr > limit).sum())
        fig.add_vline(x=limit, line=dict(color=COLORS["limit"], width=2, dash="solid"))
        fig.add_annotation(x=limit, y=1.02, yref="paper", showarrow=False, xanchor="left",
                           text=f"capture limit {limit:,} B — {over:,} calls over", font=dict(color=COLORS["limit"]))
    for i, (q, v) in enumerate(sorted(quantiles.items())):
        fig.add_vline(x=v, line=dict(color=COLORS["q"], width=1.5, dash="dash"))
        fig.add_annotation(x=v, y=0.92 - 0.08 * i, yref="paper", showarrow=False, xanchor="left",
                           text=f"p{100 * q:g}: {v:,} B", font=dict(color=COLORS["q"]))
    _layout(fig, "Tool-call argument sizes vs the capture limit", showlegend=False)
    if not arr.size:
        _nothing_to_draw(fig, "No tool calls in this run.")
    return fig


PAIRED_LABEL_CHARS = 36
"""Characters per line of the paired chart's label: its 260 px left margin (two runs' names
ran off the left edge on one line)."""


def paired_difference_chart(diff: PairedDifference, a: str, b: str) -> go.Figure:
    """B − A strict safe rate on shared tasks, with its 95 % interval (``a``, ``b``: the runs'
    names, wrapped to the margin, every character kept)."""
    fig = go.Figure()
    if diff.mean_diff is not None and diff.low is not None and diff.high is not None:  # all three, or none
        v = 100 * diff.mean_diff
        label = "<br>".join(map(plot, _wrap(reveal_id(f"{b} − {a}"), PAIRED_LABEL_CHARS)))
        fig.add_trace(go.Scatter(
            x=[v], y=[label], mode="markers+text", text=[f"{v:+.2f} pp"], textposition="top center",
            marker=dict(size=14, color=COLORS["strict"]),
            error_x=dict(type="data", array=[100 * diff.high - v], arrayminus=[v - 100 * diff.low], thickness=2)))
    fig.update_xaxes(title="difference in strict safe rate (pp), paired by task", ticksuffix=" pp")
    _layout(fig, f"Paired difference on {diff.tasks:,} shared tasks (95% CI)", showlegend=False,
            height=300, margin=dict(l=260, r=30, t=70, b=60))
    if diff.mean_diff is None:
        _nothing_to_draw(fig, "No task has a strict rate in both runs: nothing to pair." if diff.tasks == 0 else
                              "Only one task has a strict rate in both runs: an interval needs two.")
    else:
        fig.add_vline(x=0, line=dict(color="#888", dash="dot"))
    return fig


MAX_PAIRED_ROWS = 20
"""Pairs drawn at most in the report's paired chart (one row each); every pair is in its table."""


def paired_comparison_chart(pairs: Sequence[tuple[str, str, PairedDifference]]) -> go.Figure:
    """Every pair of runs' B − A strict safe rate on their shared tasks with its 95 % interval,
    one row per pair (A and B as the legends name them); the pairs with no difference to draw
    are named in a note. One pair: ``paired_difference_chart``."""
    if len(pairs) == 1:
        a, b, diff = pairs[0]
        return paired_difference_chart(diff, a, b)
    title = "Paired difference in strict safe rate, B − A on shared tasks (95% CI)"
    drawn = [(a, b, d) for a, b, d in pairs if d.mean_diff is not None and d.low is not None and d.high is not None]
    fig = go.Figure()
    if not drawn:
        _layout(fig, title)
        return _nothing_to_draw(fig, "No pair of runs has two tasks with a strict rate in both: nothing to pair."
                                if pairs else "One run: a paired comparison needs two.")
    shown = drawn[:MAX_PAIRED_ROWS]
    labels = [_two_lines(f"{b} − {a}", 44) + f" ({d.tasks:,} tasks)" for a, b, d in shown]
    values = [100 * (d.mean_diff or 0.0) for _a, _b, d in shown]
    highs = [100 * (d.high or 0.0) for _a, _b, d in shown]
    lows = [100 * (d.low or 0.0) for _a, _b, d in shown]
    fig.add_trace(go.Scatter(
        x=values, y=labels, mode="markers+text", text=[f"{v:+.2f} pp" for v in values], textposition="top center",
        marker=dict(size=12, color=COLORS["strict"]), cliponaxis=False, hoverinfo="x+y",
        error_x=dict(type="data", array=[h - v for h, v in zip(highs, values, strict=True)],
                     arrayminus=[v - lo for lo, v in zip(lows, values, strict=True)], thickness=2, color=NEUTRAL)))
    fig.add_vline(x=0, line=dict(color="#888", dash="dot"))
    fig.update_xaxes(title="difference in strict safe rate (pp), paired by task", ticksuffix=" pp")
    # The first pair at the top, as the table lists them.
    fig.update_yaxes(categoryorder="array", categoryarray=labels[::-1], automargin=True, tickfont=dict(size=11))
    undrawable = [f"{reveal_id(b)} − {reveal_id(a)} ({d.tasks:,} shared)" for a, b, d in pairs
                  if d.mean_diff is None or d.low is None or d.high is None]
    parts = ([f"Not drawn, fewer than two shared tasks with a strict rate in both: {'; '.join(undrawable)}."]
             if undrawable else [])
    if len(drawn) > len(shown):
        parts.append(f"{len(drawn) - len(shown):,} more pairs are in the table.")
    lines = [plot(line) for line in _wrap(" ".join(parts), NOTE_LINE_CHARS)] if parts else []
    if lines:
        fig.add_annotation(text="<br>".join(lines), xref="paper", yref="paper", x=0, y=0, yanchor="top",
                           yshift=-60, showarrow=False, align="left", font=dict(size=11, color=NEUTRAL))
    _layout(fig, title, showlegend=False, height=170 + 44 * len(shown) + 16 * len(lines),
            margin=dict(l=30, r=40, t=70, b=70 + 16 * len(lines)))
    return fig


def headline_svg(fig: go.Figure) -> str:
    """``before_after_bars``'s figure drawn as an SVG image (``scoring.figure_svg``): the same
    bars, values, whiskers, names and notes, shown without waiting for plotly.js."""
    return figure_svg.grouped_bars_svg(fig.to_plotly_json())
