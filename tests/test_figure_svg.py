"""scoring.figure_svg: the headline chart drawn as an SVG image from the plotly figure's JSON.

The SVG is parsed back (xml.etree): a label that broke out of its text would not parse, or would
parse as an element; a value drawn wrong would be a bar of the wrong height."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from pages._shared import charts
from scoring.aggregate import summarize
from scoring.figure_svg import UnsupportedFigure, grouped_bars_svg, plotly_text_lines

from .test_aggregate import small

SVG = "{http://www.w3.org/2000/svg}"
HOSTILE = ['<script>alert("x")</script>', "a & b &amp; c", "quote \" and ' apostrophe", "]]> <!-- <![CDATA[",
           '<img src=x onerror="alert(1)">', "<b>bold</b> <a href='javascript:alert(1)'>link</a>"]


def texts(svg: str) -> list[str]:
    root = ET.fromstring(svg)
    return [t.text or "" for t in root.iter(f"{SVG}text")]


def tags(svg: str) -> set[str]:
    return {e.tag.removeprefix(SVG) for e in ET.fromstring(svg).iter()}


def bars_figure(x, ys, *, text=None, names=("A", "B"), **layout):
    return {"data": [{"type": "bar", "name": name, "x": x, "y": y, "base": 0, "marker": {"color": colour},
                      "text": text[i] if text else None, "offsetgroup": name}
                     for i, (name, y, colour) in enumerate(zip(names, ys, ("#9e9e9e", "#1f5fa8"), strict=False))],
            "layout": {"title": {"text": "T"}, "yaxis": {"range": [0, 100], "tickvals": [0, 50, 100]}, **layout}}


def rects(svg: str) -> list[dict]:
    """The bars (rectangles of a data colour), in drawing order."""
    return [r.attrib for r in ET.fromstring(svg).iter(f"{SVG}rect")
            if r.get("fill") in ("#9e9e9e", "#1f5fa8") and r.get("width") != "12"]  # not a legend swatch


def test_bar_heights_are_the_values_on_the_axis():
    svg = grouped_bars_svg(bars_figure(["r1", "r2"], [[50, 25], [100, 0]]), plot_height=200)
    heights = [float(r["height"]) for r in rects(svg)]
    assert heights == [pytest.approx(100), pytest.approx(200), pytest.approx(50), pytest.approx(0)]
    xs = [float(r["x"]) for r in rects(svg)]
    assert xs[0] < xs[1] < xs[2] < xs[3]  # run r1's two bars, then r2's


def test_a_missing_value_draws_no_bar_and_the_values_written_are_the_figures():
    svg = grouped_bars_svg(bars_figure(["r1"], [[None], [40]], text=[["—"], ["40.0%"]]))
    assert len(rects(svg)) == 1
    assert "40.0%" in texts(svg) and "—" not in texts(svg)  # plotly writes no text for a bar it does not draw


def test_the_value_of_a_small_bar_is_written_above_its_whisker():
    fig = bars_figure(["r1"], [[3], [60]])
    fig["data"][0]["error_y"] = {"type": "data", "array": [2], "arrayminus": [1], "visible": True}
    fig["data"].append({"type": "scatter", "mode": "text", "x": ["r1"], "y": [5], "text": ["3.0%"], "offsetgroup": "A"})
    svg = grouped_bars_svg(fig, plot_height=200)
    root = ET.fromstring(svg)
    label = next(t for t in root.iter(f"{SVG}text") if t.text == "3.0%")
    bar = rects(svg)[0]
    assert float(bar["x"]) < float(label.get("x")) < float(bar["x"]) + float(bar["width"])  # over its own bar
    whisker_top = min(float(line.get("y1")) for line in root.iter(f"{SVG}line") if line.get("stroke-width") == "1.4")
    assert float(label.get("y")) < whisker_top


@pytest.mark.parametrize("name", HOSTILE)
def test_hostile_names_are_text_as_plotly_shows_them(name):
    from pages._shared.inert import plot

    fig = bars_figure([plot(name) + "<br>" + plot(name)], [[50], [60]], names=(plot(name), "B"))
    fig["layout"]["title"]["text"] = plot(name)
    fig["layout"]["annotations"] = [{"xref": "paper", "yref": "paper", "y": 1, "text": plot(name)}]
    svg = grouped_bars_svg(fig, description=name)
    assert tags(svg) <= {"svg", "title", "style", "rect", "line", "text"}  # no script, image, link, foreignObject
    shown = texts(svg)
    assert shown.count(name) >= 5  # title, note, both lines of the category, the legend
    assert ET.fromstring(svg).find(f"{SVG}title").text == name
    assert "<script" not in svg and "<img" not in svg
    assert not [v for e in ET.fromstring(svg).iter() for v in e.attrib.values() if "alert" in v or "javascript" in v]


def test_plotly_markup_is_read_as_plotly_shows_it():
    assert plotly_text_lines("a &lt;b&gt; &amp; c<br>d <b>e</b>") == ["a <b> & c", "d e"]
    assert plotly_text_lines("nul\x00 and \ufffe") == ["nul⟨U+0000⟩ and ⟨U+FFFE⟩"]  # XML cannot hold them


def test_a_colour_or_font_from_outside_the_known_shapes_is_not_written_as_given():
    fig = bars_figure(["r1"], [[50], [60]])
    fig["data"][0]["marker"]["color"] = 'red" onload="alert(1)'
    fig["layout"]["font"] = {"family": 'x" onload="alert(1)'}
    svg = grouped_bars_svg(fig)
    assert "onload" not in svg
    ET.fromstring(svg)


def test_what_it_cannot_draw_is_refused_not_drawn_wrong():
    fig = bars_figure(["r1"], [[50], [60]])
    with pytest.raises(UnsupportedFigure, match="horizontal"):
        grouped_bars_svg({**fig, "data": [{**fig["data"][0], "orientation": "h"}]})
    with pytest.raises(UnsupportedFigure, match="waterfall"):
        grouped_bars_svg({**fig, "data": [*fig["data"], {"type": "waterfall", "x": ["r1"]}]})
    with pytest.raises(UnsupportedFigure, match="barmode"):
        grouped_bars_svg({**fig, "layout": {**fig["layout"], "barmode": "stack"}})
    with pytest.raises(UnsupportedFigure, match="annotation"):
        grouped_bars_svg({**fig, "layout": {**fig["layout"], "annotations": [{"x": 1, "y": 2, "text": "arrow"}]}})
    with pytest.raises(UnsupportedFigure, match="no bar"):
        grouped_bars_svg({"data": [], "layout": {}})


def test_the_light_variant_for_a_slide_has_no_dark_scheme():
    fig = bars_figure(["r1"], [[50], [60]])
    assert "prefers-color-scheme: dark" in grouped_bars_svg(fig)
    assert "prefers-color-scheme" not in grouped_bars_svg(fig, follow_dark_scheme=False)


def test_the_headline_svg_shows_every_text_and_bar_of_the_before_after_figure():
    s = summarize(small())
    fig = charts.before_after_bars([("run <one> & \"two\"", s), ("other", s)])
    svg = charts.headline_svg(fig)
    shown = texts(svg)
    spec = fig.to_plotly_json()
    expected = [*plotly_text_lines(spec["layout"]["title"]["text"]),
                *plotly_text_lines(spec["layout"]["annotations"][0]["text"])]
    for trace in spec["data"]:
        expected += [line for t in trace["text"] if t for line in plotly_text_lines(t)]
        expected += [line for x in trace["x"] for line in plotly_text_lines(x)]
        if trace["type"] == "bar":
            expected.append(trace["name"])
    assert set(expected) <= set(shown), set(expected) - set(shown)
    assert 'run <one> & "two"' in " ".join(shown)
    # Three bars per run, each as tall as its rate on the 0-106 % axis.
    plot = 250
    heights = [float(r.get("height")) for r in ET.fromstring(svg).iter(f"{SVG}rect")
               if r.get("fill") in (charts.COLORS["lenient"], charts.COLORS["strict"], charts.COLORS["reviewed"])
               and r.get("width") != "12"]  # the legend's swatches are 12 units square
    rates = [100 * getattr(s, kind).value for _run in (1, 2) for kind in ("lenient", "strict", "reviewed")]
    assert heights == [pytest.approx(r / 106 * plot, abs=0.06) for r in rates]
