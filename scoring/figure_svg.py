"""A bar chart drawn as a standalone SVG image from the figure a chart builder made for plotly.

The pages' chart builders are pure functions returning plotly figures; the figure's JSON
(``fig.to_plotly_json()``: plain dicts and lists) is the one description of what a chart shows.
``grouped_bars_svg`` reads that description, never plotly itself (scoring imports no plotly), and
draws it without JavaScript: a page shows it as an image the moment its script sends it, before
the browser has evaluated plotly.js, and what is on screen is what the interactive chart and an
exported slide show (the same bars, values, whiskers, names and notes).

What it draws of the figure: grouped vertical ``bar`` traces (``x`` categories, ``y`` values,
``base``, ``text`` at the bar's base, ``error_y`` whiskers, ``marker.color``, ``name`` in the
legend), ``scatter`` traces in ``mode="text"`` (values written above a whisker, in their
``offsetgroup``'s slot), the title and its subtitle, paper-anchored annotations above the plot
(notes), and the y axis's range, tick values, tick suffix and title. Anything else in a figure is
refused (``UnsupportedFigure``) rather than drawn wrong.

Text is hostile (run names come from the files): a label is plotly text (``<br>`` breaks its
lines, ``&lt;`` is a ``<`` it shows), read as plotly shows it, then escaped for XML; it is only
ever element content, never an attribute, a style or a link. An SVG shown as an image runs no
script and loads nothing, which is why a page shows it with ``st.image``.
"""

from __future__ import annotations

import html
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from xml.sax.saxutils import escape

from scoring.errors import UnsupportedFigure

__all__ = ["UnsupportedFigure", "grouped_bars_svg", "plotly_text_lines"]


_BREAK = re.compile(r"<br\s*/?>", re.IGNORECASE)
_TAG = re.compile(r"<[^>]*>")
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
"""Code points XML 1.0 cannot hold at all (C0 controls, surrogates, U+FFFE/U+FFFF)."""


def plotly_text_lines(text: object) -> list[str]:
    """Plotly text as plotly shows it, one string per line: ``<br>`` ends a line, its other tags
    (``<b>``, ``<span style>``, ``<a href>``) style text and are not shown, entities are the
    characters they name. A code point XML cannot hold is shown as ⟨U+XXXX⟩."""
    if text is None:
        return []
    lines = [html.unescape(_TAG.sub("", part)) for part in _BREAK.split(str(text))]
    return [_NOT_XML.sub(lambda m: f"⟨U+{ord(m.group()):04X}⟩", line) for line in lines]


def _text(value: object) -> str:
    """One line of shown text as SVG element content."""
    return escape(str(value))


_STYLE = """
.bg{fill:#ffffff}.fg{fill:#31333f}.muted{fill:#5f6470}.grid{stroke:#e3e5e8}.axis{stroke:#9aa0a6}
.frame{fill:none;stroke:#d5d8dc}
@media (prefers-color-scheme: dark){.bg{fill:#171614}.fg{fill:#fafafa}.muted{fill:#aeaba6}
.grid{stroke:#34322e}.axis{stroke:#77736c}.frame{stroke:#3d3a36}}
"""
"""Light text on a dark card where the browser prefers dark (Streamlit's dark theme follows the
same preference by default), dark on white elsewhere (a slide, a print). Either way the image
draws its own background, so its text reads on whichever page it lands."""

_FONT_FAMILY = "Helvetica, Arial, sans-serif"
_CHAR_EM = 0.56
"""A character's mean advance in ems (Helvetica/Arial, mixed case): no font metrics here, so
widths are estimated where they only space things (the legend), never where they would cut."""


@dataclass(frozen=True, slots=True, kw_only=True)
class _Bars:
    name: str
    color: str
    values: list[float | None]
    bases: list[float]
    text: list[str]
    up: list[float]
    down: list[float]
    whisker: str
    legend: bool
    group: str


def _listed(value: Any, n: int, default: Any) -> list:
    if value is None:
        return [default] * n
    if isinstance(value, str | int | float):
        return [value] * n
    out = list(value)
    return out + [default] * (n - len(out))


def _number(v: Any) -> float | None:
    if v is None:
        return None
    f = float(v)
    return None if math.isnan(f) else f


def _bars(trace: Mapping[str, Any], categories: list[str], index: int) -> _Bars:
    if trace.get("orientation") not in (None, "v"):
        raise UnsupportedFigure(f"trace {index} ({trace.get('name')!r}): horizontal bars are not drawn")
    if list(trace.get("x") or []) != categories:
        raise UnsupportedFigure(f"trace {index} ({trace.get('name')!r}): its categories differ from the first "
                                "bar trace's")
    n = len(categories)
    err = trace.get("error_y") or {}
    shown = bool(err) and err.get("visible", True) and err.get("type", "data") == "data"
    values = [_number(v) for v in _listed(trace.get("y"), n, None)]
    up = [_number(v) or 0.0 for v in _listed(err.get("array") if shown else None, n, 0.0)]
    down = [_number(v) or 0.0 for v in _listed(err.get("arrayminus", err.get("array")) if shown else None, n, 0.0)]
    return _Bars(name=str(trace.get("name") or ""), color=str((trace.get("marker") or {}).get("color") or "#1f5fa8"),
                 values=values, bases=[_number(b) or 0.0 for b in _listed(trace.get("base"), n, 0.0)],
                 text=[str(t or "") for t in _listed(trace.get("text"), n, "")], up=up, down=down,
                 whisker=str(err.get("color") or "#8a8a8a"), legend=trace.get("showlegend", True) is not False,
                 group=str(trace.get("offsetgroup") or index))


def grouped_bars_svg(figure: Mapping[str, Any], *, width: int = 820, plot_height: int = 250,
                     follow_dark_scheme: bool = True, description: str = "") -> str:
    """The figure's grouped bars as an SVG document ``width`` units wide (it scales to its box),
    the plot ``plot_height`` tall, the rest as tall as its lines need. With
    ``follow_dark_scheme`` its colours follow the browser's dark preference (a page), without
    it the image is always light (a file for a slide). ``description``: the image's accessible
    title (the figure's title by default). Raises ``UnsupportedFigure`` for a figure holding
    what it does not draw."""
    layout: Mapping[str, Any] = figure.get("layout") or {}
    traces: list[Mapping[str, Any]] = list(figure.get("data") or [])
    bar_traces = [t for t in traces if t.get("type", "scatter") == "bar"]
    if not bar_traces:
        raise UnsupportedFigure("the figure has no bar trace")
    categories = [str(x) for x in bar_traces[0].get("x") or []]
    bars = [_bars(t, categories, i) for i, t in enumerate(bar_traces)]
    above: list[tuple[str, list[float | None], list[str]]] = []
    for i, t in enumerate(traces):
        kind = t.get("type", "scatter")
        if kind == "bar":
            continue
        if kind != "scatter" or t.get("mode") != "text":
            raise UnsupportedFigure(f"trace {i} ({t.get('name')!r}): a {kind} trace in mode {t.get('mode')!r} "
                                    "is not drawn")
        if [str(x) for x in t.get("x") or []] != categories:
            raise UnsupportedFigure(f"trace {i} ({t.get('name')!r}): its categories differ from the bars'")
        n = len(categories)
        above.append((str(t.get("offsetgroup") or ""), [_number(v) for v in _listed(t.get("y"), n, None)],
                      [str(v or "") for v in _listed(t.get("text"), n, "")]))
    if layout.get("barmode", "group") != "group":
        raise UnsupportedFigure(f"barmode {layout.get('barmode')!r} is not drawn (grouped bars only)")

    font = layout.get("font") or {}
    size = float(font.get("size") or 14)
    family = _FONT_FAMILY if not font.get("family") else str(font["family"])
    title = layout.get("title") or {}
    title_lines = plotly_text_lines(title.get("text"))
    subtitle_lines = plotly_text_lines((title.get("subtitle") or {}).get("text"))
    notes: list[tuple[list[str], float]] = []
    for i, a in enumerate(layout.get("annotations") or []):
        if a.get("xref") != "paper" or a.get("yref") != "paper" or float(a.get("y", 0)) < 1:
            raise UnsupportedFigure(f"annotation {i}: only notes above the plot (paper, y ≥ 1) are drawn")
        notes.append((plotly_text_lines(a.get("text")), float((a.get("font") or {}).get("size") or 12)))
    yaxis = layout.get("yaxis") or {}
    lo, hi = (float(v) for v in (yaxis.get("range") or _auto_range(bars)))
    ticks = [float(v) for v in yaxis.get("tickvals") or _auto_ticks(lo, hi)]
    suffix = str(yaxis.get("ticksuffix") or "")
    axis_title = plotly_text_lines((yaxis.get("title") or {}).get("text"))

    left, right = 70.0, 20.0
    y = 14.0
    body: list[str] = []
    for line in title_lines:
        y += size * 1.3
        body.append(f'<text class="fg" x="12" y="{y:.1f}" font-size="{size * 1.25:.1f}" font-weight="600">'
                    f"{_text(line)}</text>")
    for line in subtitle_lines:
        y += 16
        body.append(f'<text class="muted" x="12" y="{y:.1f}" font-size="12">{_text(line)}</text>')
    y += 8
    for lines, note_size in notes:
        for line in lines:
            y += note_size * 1.35
            # Leading spaces indent a note's continuation lines: kept, as plotly keeps them.
            body.append(f'<text class="muted" x="{left:.1f}" y="{y:.1f}" font-size="{note_size:.1f}" '
                        f'xml:space="preserve">{_text(line)}</text>')
    plot_top = y + 16
    plot_bottom = plot_top + plot_height
    plot_w = width - left - right

    def ypx(v: float) -> float:
        return plot_bottom - (v - lo) / (hi - lo) * plot_height

    for tick in ticks:
        if lo <= tick <= hi:
            py = ypx(tick)
            body.append(f'<line class="grid" x1="{left:.1f}" x2="{width - right:.1f}" y1="{py:.1f}" y2="{py:.1f}"/>')
            label = f"{tick:g}{suffix}"
            body.append(f'<text class="muted" x="{left - 8:.1f}" y="{py + 4:.1f}" font-size="12" '
                        f'text-anchor="end">{_text(label)}</text>')
    body.append(f'<line class="axis" x1="{left:.1f}" x2="{width - right:.1f}" y1="{ypx(max(lo, min(hi, 0.0))):.1f}" '
                f'y2="{ypx(max(lo, min(hi, 0.0))):.1f}"/>')
    if axis_title:
        cy = (plot_top + plot_bottom) / 2
        body.append(f'<text class="muted" font-size="12" text-anchor="middle" transform="translate(18 {cy:.1f}) '
                    f'rotate(-90)">{_text(" ".join(axis_title))}</text>')

    n = max(1, len(categories))
    band = plot_w / n
    group_w = band * 0.8  # plotly's default bargap (0.2)
    slot_w = group_w / max(1, len(bars))
    slot = {b.group: i for i, b in enumerate(bars)}
    for c in range(len(categories)):
        start = left + c * band + (band - group_w) / 2
        for i, b in enumerate(bars):
            v = b.values[c]
            if v is None:
                continue
            x0 = start + i * slot_w
            top, base = ypx(b.bases[c] + v), ypx(b.bases[c])
            body.append(f'<rect x="{x0:.1f}" y="{min(top, base):.1f}" width="{slot_w:.1f}" '
                        f'height="{abs(base - top):.1f}" fill="{_colour(b.color)}"/>')
            cx = x0 + slot_w / 2
            if b.up[c] or b.down[c]:
                y_hi, y_lo = ypx(b.bases[c] + v + b.up[c]), ypx(b.bases[c] + v - b.down[c])
                stroke = f'stroke="{_colour(b.whisker)}" stroke-width="1.4"'
                body.append(f'<line x1="{cx:.1f}" x2="{cx:.1f}" y1="{y_hi:.1f}" y2="{y_lo:.1f}" {stroke}/>')
                for yy in (y_hi, y_lo):
                    body.append(f'<line x1="{cx - 5:.1f}" x2="{cx + 5:.1f}" y1="{yy:.1f}" y2="{yy:.1f}" {stroke}/>')
            if b.text[c]:
                # At the bar's base, inside it (plotly's "inside" with insidetextanchor "start").
                for k, line in enumerate(plotly_text_lines(b.text[c])):
                    body.append(f'<text x="{cx:.1f}" y="{base - 7 - 15 * k:.1f}" font-size="13" fill="#ffffff" '
                                f'text-anchor="middle">{_text(line)}</text>')
        for group, values, texts in above:
            v = values[c]
            if v is None or not texts[c]:
                continue
            i = slot.get(group, 0)
            cx = start + i * slot_w + slot_w / 2
            for k, line in enumerate(reversed(plotly_text_lines(texts[c]))):
                body.append(f'<text class="fg" x="{cx:.1f}" y="{ypx(v) - 5 - 15 * k:.1f}" font-size="13" '
                            f'text-anchor="middle">{_text(line)}</text>')
    y = plot_bottom + 4
    label_lines = [plotly_text_lines(c) for c in categories]
    for c, lines in enumerate(label_lines):
        cx = left + c * band + band / 2
        for k, line in enumerate(lines):
            body.append(f'<text class="fg" x="{cx:.1f}" y="{y + 16 + 16 * k:.1f}" font-size="12.5" '
                        f'text-anchor="middle">{_text(line)}</text>')
    y += 16 * max([1, *map(len, label_lines)]) + 22
    x = left
    for b in bars:
        if not b.legend:
            continue
        name = " ".join(plotly_text_lines(b.name))
        body.append(f'<rect x="{x:.1f}" y="{y - 10:.1f}" width="12" height="12" fill="{_colour(b.color)}"/>')
        body.append(f'<text class="fg" x="{x + 18:.1f}" y="{y:.1f}" font-size="13">{_text(name)}</text>')
        x += 18 + len(name) * 13 * _CHAR_EM + 28
    height = y + 16
    label = description or " ".join(title_lines)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height:.0f}" width="{width}" '
           f'height="{height:.0f}" font-family="{_attribute_font(family)}" role="img">']
    out.append(f"<title>{_text(label)}</title>")
    out.append(f"<style>{_STYLE if follow_dark_scheme else _STYLE.split('@media')[0]}</style>")
    out.append(f'<rect class="bg" x="0.5" y="0.5" width="{width - 1}" height="{height - 1:.0f}" rx="6"/>')
    out.append(f'<rect class="frame" x="0.5" y="0.5" width="{width - 1}" height="{height - 1:.0f}" rx="6"/>')
    out.extend(body)
    out.append("</svg>")
    return "\n".join(out)


_COLOUR = re.compile(r"#[0-9a-fA-F]{3,8}|[a-zA-Z]{3,20}|rgba?\([0-9., ]{5,40}\)")
_FAMILY = re.compile(r"[A-Za-z0-9 ,-]{1,120}")


def _colour(value: str) -> str:
    """A colour as an attribute: one of CSS's plain forms, else the builder's blue (a colour is
    the chart builder's, never the data's, but an attribute is written only from a known shape)."""
    return value if _COLOUR.fullmatch(value) else "#1f5fa8"


def _attribute_font(family: str) -> str:
    return family if _FAMILY.fullmatch(family) else _FONT_FAMILY


def _auto_range(bars: Sequence[_Bars]) -> tuple[float, float]:
    tops = [b.bases[c] + v + b.up[c] for b in bars for c, v in enumerate(b.values) if v is not None]
    return 0.0, (max(tops) * 1.05 if tops and max(tops) > 0 else 1.0)


def _auto_ticks(lo: float, hi: float) -> Iterable[float]:
    step = 10 ** math.floor(math.log10((hi - lo) / 2)) if hi > lo else 1.0
    while (hi - lo) / step > 6:
        step *= 2
    first = math.ceil(lo / step) * step
    return [first + k * step for k in range(int((hi - first) / step) + 1)]
