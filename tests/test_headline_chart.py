"""Issue 35 item 9: Safe rates opens with its headline chart as an SVG image of the same figure
the interactive chart draws, above the runs' figures (AppTest; the browser's view of it is in
tests/browser/test_charts_fast.py)."""

from __future__ import annotations

import base64
import json
import xml.etree.ElementTree as ET

from pages._shared import loaders, state
from scoring.figure_svg import grouped_bars_svg, plotly_text_lines
from scoring.workspace import views

from .test_pages import hostile_app  # noqa: F401  (a fixture)

SVG = "{http://www.w3.org/2000/svg}"
DATA_URI = "data:image/svg+xml;base64,"


def page_elements(at):
    """The page's elements in the order they are drawn (the sidebar left out)."""
    return list(at.main)


def first_chart(at):
    """The first chart of the page: the element, and its SVG when it is an SVG image."""
    element = next(e for e in page_elements(at) if e.type in ("image", "plotly_chart"))
    url = element.proto.imgs[0].url if element.type == "image" else ""
    return element, base64.b64decode(url.removeprefix(DATA_URI)).decode() if url.startswith(DATA_URI) else None


def svg_texts(svg: str) -> list[str]:
    return [t.text or "" for t in ET.fromstring(svg).iter(f"{SVG}text")]


def test_the_first_chart_is_the_headline_svg_of_the_interactive_charts_figure(app):
    app.switch_page("pages/safe_rates.py").run()
    assert not app.exception, app.exception
    element, svg = first_chart(app)
    assert element.type == "image" and svg is not None
    # Above the runs' figures: before the first run's heading and its metric cards.
    order = [e.type for e in page_elements(app)]
    assert order.index("image") < order.index("subheader") < order.index("metric")
    # The same figure as the interactive chart under it: drawn from its JSON, it is this SVG.
    spec = json.loads(app.get("plotly_chart")[0].proto.spec)
    assert spec["layout"]["title"]["text"].startswith("Safe rate before and after")
    assert svg == grouped_bars_svg(spec)
    # And it shows the page's figures: each run's rates as the metric cards give them.
    shown = svg_texts(svg)
    for run in views.runs(loaders.DB_PATH):
        s = loaders.run_evaluation(run.run_key).summary
        for rate in (s.lenient, s.strict, s.reviewed):
            assert f"{100 * rate.value:.1f}%" in shown
        assert any(line in " ".join(shown) for line in plotly_text_lines(run.name))
    assert sum("UNSCORED" in t for t in shown) == 2  # each run's note above the bars


def test_the_interactive_chart_is_a_click_away_not_gone(app):
    app.switch_page("pages/safe_rates.py").run()
    expander = next(e for e in app.expander if e.label.startswith("Interactive chart"))
    assert [c.type for c in expander.children.values()] == ["plotly_chart"]


def test_the_headline_svg_of_a_hostile_run_is_text_and_parses(hostile_app):  # noqa: F811
    at, _key = hostile_app
    at.switch_page("pages/safe_rates.py").run()
    assert not at.exception, at.exception
    _element, svg = first_chart(at)
    assert svg is not None
    root = ET.fromstring(svg)  # a name that broke out of its text would not parse
    assert {e.tag.removeprefix(SVG) for e in root.iter()} <= {"svg", "title", "style", "rect", "line", "text"}
    assert not [v for e in root.iter() for v in e.attrib.values() if "203.0.113.77" in v or "font-size:0px" in v]
    shown = " ".join(svg_texts(svg))
    # The run's name as written (its middle cut to fit), not obeyed: no span, no link, no override.
    assert "m<span style=\"font-siz" in shown and ":red[SAFE 100%] <a href='htt" in shown
    assert "\u202E" not in shown


def test_one_run_selected_draws_its_three_bars(app):
    key = views.runs(loaders.DB_PATH)[0].run_key
    app.session_state[state.SELECTED_RUNS] = [key]
    app.switch_page("pages/safe_rates.py").run()
    assert not app.exception, app.exception
    _element, svg = first_chart(app)
    bars = [r for r in ET.fromstring(svg).iter(f"{SVG}rect") if r.get("fill", "").startswith("#")
            and r.get("width") != "12"]
    assert len(bars) == 3


def test_in_a_browser_the_plotly_charts_follow_the_headline_images_first_paint(app, monkeypatch):
    # A browser's session: the first run sends the image and room for each plotly chart, and a
    # fragment the browser's timer reruns; its second call draws the page with the charts.
    monkeypatch.setattr(loaders, "has_browser", lambda: True)
    app.switch_page("pages/safe_rates.py").run()
    assert not app.exception, app.exception
    element, svg = first_chart(app)
    assert element.type == "image" and svg
    assert app.get("plotly_chart") == []
    waiting = [c.value for c in app.caption if c.value.startswith("Interactive chart: drawn once")]
    assert len(waiting) == 6  # the interactive headline, four of the run's charts and the paired one
    assert app.session_state[state.CHARTS_PAINT_TICK]
    app.run()  # the page's next run (the timer's rerun of the page, or a widget's): the charts are drawn
    assert not app.exception, app.exception
    assert len(app.get("plotly_chart")) == 6
    assert first_chart(app)[1] == svg  # the same image at the top
    app.run()  # and from then on, at once
    assert len(app.get("plotly_chart")) == 6
