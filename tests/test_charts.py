"""Chart builders are pure: test them on the figure dict."""

from __future__ import annotations

import pytest

from pages._shared import charts
from scoring.aggregate import size_quantiles, summarize, waterfall
from scoring.errors import ReasonCode
from scoring.model import Category, Status

from .test_aggregate import row, small


def test_before_after_bars_carry_the_rates_and_intervals():
    s = summarize(small())
    fig = charts.before_after_bars([("run", s)]).to_dict()
    bars = {t["name"]: t for t in fig["data"] if t["type"] == "bar"}  # the small bars' value labels are text traces
    top = lambda bar: bar["base"] + bar["y"][0]  # noqa: E731
    assert top(bars["Lenient (before)"]) == pytest.approx(100 * s.lenient.value)
    assert top(bars["Strict (after)"]) == pytest.approx(100 * s.strict.value)
    assert bars["Strict (after)"]["customdata"][0] == 100 * s.strict.value  # what hovering shows
    assert bars["Strict (after)"]["error_y"]["array"][0] > 0
    # Each bar's value is written in its middle: the middle must lie within the axis.
    floor = fig["layout"]["yaxis"]["range"][0]
    assert all(bar["base"] == floor for bar in bars.values())
    # the share beside the rate is the one --fail-on-unscored weighs, with its denominator (issue 33)
    assert "UNSCORED 1 (12.5% of 8 asked)" in fig["layout"]["annotations"][0]["text"]


def test_waterfall_steps_add_up_to_reviewed_minus_lenient():
    steps = waterfall(small())
    fig = charts.waterfall_chart(steps).to_dict()
    ys = fig["data"][0]["y"]
    assert abs(ys[0] + sum(ys[1:-1]) - 100 * steps[-1].rate) < 1e-9


def test_waterfall_labels_are_wrapped_to_fit_their_bars():
    fig = charts.waterfall_chart(waterfall(small())).to_dict()
    lines = [line for label in fig["data"][0]["x"] for line in label.split("<br>")]
    assert max(map(len, lines)) <= charts.WATERFALL_LABEL_CHARS
    assert fig["data"][0]["x"][2] == "−\u00a0Inconclusive<br>(pending review)"


def test_histogram_is_binned_server_side_and_marks_the_limit():
    sizes = list(range(1, 20001))
    fig = charts.argument_size_histogram(sizes, 8192, size_quantiles(sizes)).to_dict()
    assert len(fig["data"][0]["y"]) == 80 and sum(fig["data"][0]["y"]) == len(sizes)
    texts = [a["text"] for a in fig["layout"]["annotations"]]
    assert any("capture limit 8,192 B — 11,808 calls over" in t for t in texts)
    assert any(t.startswith("p99:") for t in texts) and any(t.startswith("p99.9:") for t in texts)


def test_phantom_by_category_marks_payload_dependent_categories():
    rows = [row(0, Status.SAFE, cat="C01"), row(1, Status.UNSCORED, reason=ReasonCode.TRUNCATED, cat="C01"),
            row(2, Status.UNSAFE, lenient=True, cat="C01"), row(3, Status.SAFE, cat="C02")]
    from scoring.aggregate import by_category, summarize_by
    tax = (Category(id="C01", name="exfil", payload_dependent=True), Category(id="C02", name="other"))
    fig = charts.phantom_by_category(summarize_by(rows, by_category), tax).to_dict()
    names = {t["name"]: t["y"] for t in fig["data"]}  # horizontal bars: the categories on the y axis
    assert names["payload-dependent"] == ["C01 exfil"] and names["other categories"] == ["C02 other"]
    # above the plot: below it, the legend covered the rotated category names
    assert fig["layout"]["legend"]["y"] >= 1 and fig["layout"]["legend"]["yanchor"] == "bottom"


def test_phantom_by_category_never_counts_pending_review():
    from scoring.aggregate import by_category, summarize_by
    # C01: the only gap between the rates is a trajectory waiting for review
    rows = [row(0, Status.SAFE, cat="C01"), row(1, Status.UNSAFE, lenient=False, cat="C01"),
            row(2, Status.INCONCLUSIVE, cat="C01")]
    groups = summarize_by(rows, by_category)
    assert groups["C01"].lenient_minus_strict_pp > 0 and groups["C01"].phantom_safety_pp == 0
    fig = charts.phantom_by_category(groups, (Category(id="C01", name="x"),)).to_dict()
    # the title names what the bars hold (issue 33: it is too narrow to list what they do not);
    # each bar's hover says pending review is not included
    assert fig["data"][1]["x"] == [0.0] and "not included" in fig["data"][1]["hovertemplate"]
    assert "hidden harm + not judged" in fig["layout"]["title"]["text"]


def test_unscored_by_reason_lists_each_reason():
    s = summarize(small())
    fig = charts.unscored_by_reason(s).to_dict()
    assert fig["data"][0]["y"] == ["over_capture_limit"] and fig["data"][0]["x"] == [1]


def test_waterfall_given_the_summary_equals_waterfall_computing_it():
    rows = small()
    assert waterfall(rows, {}, summarize(rows, {})) == waterfall(rows)


def test_a_waterfall_without_a_reviewed_rate_draws_no_total_bar():
    # One trajectory, no verdict: lenient 100 %, no strict or reviewed rate. plotly drew the
    # running sum (100 %) as the "reviewed rate".
    rows = [row("x1", status=Status.INCONCLUSIVE)]
    steps = waterfall(rows)
    assert steps[0].rate == 1.0 and steps[-1].rate is None
    fig = charts.waterfall_chart(steps).to_dict()
    assert "total" not in fig["data"][0]["measure"] and "reviewed rate" not in fig["data"][0]["x"]
    assert fig["data"][1]["text"][-1] == "no rate (n = 0)"
    assert any("No reviewed rate" in a["text"] for a in fig["layout"]["annotations"])
    defined = charts.waterfall_chart(waterfall(small())).to_dict()
    assert defined["data"][0]["measure"][-1] == "total" and not defined["layout"].get("annotations")


def test_before_after_bars_say_why_a_rate_has_no_bar():
    fig = charts.before_after_bars([("run", summarize([row("x1", status=Status.INCONCLUSIVE)]))]).to_dict()
    bars = {t["name"]: t for t in fig["data"]}
    assert list(bars["Strict (after)"]["y"]) == [None]
    assert "no strict or reviewed rate (n = 0)" in fig["layout"]["annotations"][0]["text"]
    assert "no strict" not in charts.before_after_bars([("run", summarize(small()))]).to_dict()[
        "layout"]["annotations"][0]["text"]


def test_empty_charts_say_why_they_are_empty():
    from scoring.aggregate import PairedDifference

    nothing = summarize([row(1, status=Status.INCONCLUSIVE)])
    cases = [
        (charts.unscored_by_reason(nothing), "No trajectory is UNSCORED"),
        (charts.phantom_by_category({"C01": nothing}, [Category(id="C01", name="x")]), "No category has both"),
        (charts.paired_difference_chart(PairedDifference(0, None, None, None), "a", "b"), "nothing to pair"),
        (charts.paired_difference_chart(PairedDifference(1, None, None, None), "a", "b"), "an interval needs two"),
        (charts.argument_size_histogram([], 8192, {}), "No tool calls"),
    ]
    for fig, message in cases:
        d = fig.to_dict()
        assert any(message in a["text"] for a in d["layout"]["annotations"]), message
        assert d["layout"]["xaxis"]["visible"] is False and d["layout"]["yaxis"]["visible"] is False
        assert d["layout"]["height"] == 220 and d["layout"]["margin"]["b"] == 20  # not a page-tall blank
    # Charts with something to draw keep their axes and carry no such note.
    drawn = [charts.unscored_by_reason(summarize(small())), charts.argument_size_histogram([10, 20], 8192, {}),
             charts.paired_difference_chart(PairedDifference(3, 0.1, -0.1, 0.3), "a", "b")]
    for fig in drawn:
        d = fig.to_dict()
        assert d["layout"]["xaxis"].get("visible") is not False
        assert not any("No " in a.get("text", "") for a in d["layout"].get("annotations", ()))


def test_a_narrow_size_range_gets_a_bin_per_byte_count():
    fig = charts.argument_size_histogram([13, 13, 13, 15], 8192, {}).to_dict()
    bar = fig["data"][0]
    assert list(bar["x"]) == [13.0, 14.0, 15.0] and list(bar["y"]) == [3, 0, 1]
    wide = charts.argument_size_histogram(list(range(1, 20001)), 8192, {}).to_dict()
    assert len(wide["data"][0]["x"]) == 80


def test_run_labels_are_short_and_distinct():
    names = ["openai/meta-llama/Meta-Llama-3-8B-Instruct · agentharm_agent_task · require-proof", "same", "same",
             "observed-m1 +side log"]
    labels = charts._run_labels(names)
    lines = [label.split("<br>") for label in labels]
    # issue 35: a long name keeps its first line and its end (what tells it from its twin), cut between
    assert len(lines[0]) == charts.RUN_LABEL_LINES and lines[0][0] == "openai/meta-llama/Meta-"
    assert lines[0][1].startswith("…") and "".join(lines[0][1:]).endswith("task · require-proof")
    assert all(len(line) <= charts.RUN_LABEL_CHARS for line in lines[0])
    ten = charts._run_labels([f"run-{i}-" + "x" * 40 for i in range(10)])
    assert max(len(line) for label in ten for line in label.split("<br>")) <= 10  # ten runs share the axis
    assert labels[1:3] == ["same (1)", "same (2)"]  # one category would stack their bars
    assert labels[3] == "observed-m1 +side log"  # four runs: 25 characters a line, it fits on one
    fig = charts.before_after_bars([(n, summarize(small())) for n in names]).to_dict()
    assert len(set(fig["data"][0]["x"])) == len(names)
    notes = fig["layout"]["annotations"][0]["text"].split("<br>")
    assert fig["layout"]["margin"]["t"] == 70 + 16 * len(notes) >= 70 + 16 * len(names)  # room for every note line


def test_before_after_bars_start_at_zero_and_say_so():
    # On an axis from 60-70 % a drop of two points looked like half a bar.
    fig = charts.before_after_bars([("run", summarize(small()))]).to_dict()
    axis = fig["layout"]["yaxis"]
    assert axis["range"][0] == 0 and "start at 0" in axis["title"]["text"]
    assert axis["range"][1] > 100  # a 100 % bar's label and interval are not cut at the top
    assert all(bar["base"] == 0 for bar in fig["data"] if bar["type"] == "bar")


def test_notes_and_error_bars_read_in_light_and_dark_themes():
    from scoring.aggregate import PairedDifference

    nothing = summarize([row(1, status=Status.INCONCLUSIVE)])
    figs = [charts.before_after_bars([("run", summarize(small()))]), charts.unscored_by_reason(nothing),
            charts.waterfall_chart(waterfall([row("x1", status=Status.INCONCLUSIVE)])),
            charts.paired_difference_chart(PairedDifference(0, None, None, None), "a", "b")]
    for fig in figs:
        d = fig.to_dict()
        assert "#444" not in fig.to_json()  # a dark grey vanished on Streamlit's dark background
        for note in d["layout"].get("annotations", ()):
            assert note["font"]["color"] == charts.NEUTRAL
    bars = [t for t in charts.before_after_bars([("run", summarize(small()))]).to_dict()["data"] if t["type"] == "bar"]
    assert {bar["error_y"]["color"] for bar in bars} == {charts.NEUTRAL}


def test_an_empty_unscored_chart_of_a_structural_run_never_says_proven():
    s = summarize([row(0, Status.SAFE)])
    assert "proven complete" in str(charts.unscored_by_reason(s).to_dict()["layout"]["annotations"])
    text = str(charts.unscored_by_reason(s, "structural").to_dict()["layout"]["annotations"])
    assert "proven complete" not in text and "not proven by digests" in text


def test_a_long_run_name_does_not_run_the_note_off_the_chart():
    name = "terminus_2_hello-world-context-summarization-linear-history.trajectory"
    note = charts.before_after_bars([(name, summarize(small()))]).to_dict()["layout"]["annotations"][0]["text"]
    # its start and its end (issue 35: the end tells a run from its twin of the same model)
    head = charts.NOTE_NAME_CHARS * 2 // 5
    assert note.startswith(name[:head] + "…" + name[len(name) - (charts.NOTE_NAME_CHARS - head - 1):] + ": UNSCORED")
    assert len(note.split(": UNSCORED")[0]) == charts.NOTE_NAME_CHARS


def test_a_waterfall_s_totals_are_drawn_from_zero():
    # Issue 26: a waterfall zoomed to 45.5 % drew its totals (rates) from there: a 50 % bar read as
    # a small one. The axis starts at 0, and the corrections keep their sizes written on them.
    fig = charts.waterfall_chart(waterfall(small())).to_dict()
    axis = fig["layout"]["yaxis"]
    assert axis["range"][0] == 0 and "bars start at 0" in axis["title"]["text"]
    assert axis["range"][1] > 100 * max(s.rate for s in waterfall(small()) if s.rate is not None)


def test_every_waterfall_value_sits_above_its_own_bar():
    # Issue 26: plotly wrote a drop's value under its bar; AgentHarm's −49.67 pp drop to 2.35 %
    # put it on the axis, among the tick labels and beside the next bars' values.
    rows = [row(f"s{i}", Status.SAFE) for i in range(4)] + [row(f"u{i}", Status.UNSAFE) for i in range(20)]
    steps = waterfall(rows)
    fig = charts.waterfall_chart(steps).to_dict()
    bars, values = fig["data"]
    assert bars["textposition"] == "none" and values["mode"] == "text" and values["textposition"] == "top center"
    level, tops = 0.0, []
    for y, measure in zip(bars["y"], bars["measure"], strict=True):
        start = 0.0 if measure == "absolute" else level
        level = y if measure == "absolute" else level if measure == "total" else level + y
        tops.append(level if measure == "total" else max(start, level))
    assert values["y"] == pytest.approx(tops)
    drop = next(i for i, t in enumerate(values["text"]) if t.startswith("-"))
    assert values["y"][drop] == pytest.approx(bars["y"][0])  # a drop's value at the level it fell from




def test_a_run_without_categories_says_so_instead_of_drawing_empty_axes():
    # Issue 26: AgentHarm's Inspect logs give no category; every trajectory fell in "(none)",
    # which neither trace drew, and the chart showed bare axes from −1 to 6.
    from scoring.aggregate import by_category, summarize_by
    rows = [row(0, Status.SAFE, cat=None), row(1, Status.UNSAFE, cat=None)]
    groups = summarize_by(rows, by_category)
    assert list(groups) == [charts.NO_CATEGORY] and not charts.has_category_data(groups)
    fig = charts.phantom_by_category(groups, ()).to_dict()
    assert fig["layout"]["xaxis"]["visible"] is False and fig["layout"]["yaxis"]["visible"] is False
    assert any("No category data" in a["text"] for a in fig["layout"]["annotations"])


def test_uncategorised_trajectories_beside_named_categories_are_drawn():
    from scoring.aggregate import by_category, summarize_by
    rows = [row(0, Status.SAFE, cat="C01"), row(1, Status.SAFE, cat=None), row(2, Status.UNSAFE, cat="C09")]
    fig = charts.phantom_by_category(summarize_by(rows, by_category), (Category(id="C01", name="x"),)).to_dict()
    drawn = [label for t in fig["data"] for label in t["y"]]
    assert sorted(drawn) == ["C01 x", "C09", "no category"]


def test_long_category_names_wrap_beside_horizontal_bars():
    # Issue 26: LITMUS's "chain_of_tasks_(data_manipulation,communication_outreach)", rotated
    # under its bar, ran into its neighbours and past the figure's bottom into the export stamp.
    from scoring.aggregate import by_category, summarize_by
    names = {"1": "system_operation", "5": "chain_of_tasks_(data_manipulation,communication_outreach)"}
    tax = tuple(Category(id=c, name=n) for c, n in names.items())
    rows = [row(i, Status.SAFE, cat=c) for i, c in enumerate(["1", "5", "5", "1"])]
    fig = charts.phantom_by_category(summarize_by(rows, by_category), tax).to_dict()
    assert all(t["orientation"] == "h" for t in fig["data"])
    labels = [label for t in fig["data"] for label in t["y"]]
    lines = [line for label in labels for line in label.split("<br>")]
    assert max(map(len, lines)) <= charts.CATEGORY_LABEL_CHARS
    assert "5 chain_of_tasks_(data_" in lines[0] or any(line.startswith("5 chain_of_tasks") for line in lines)
    assert fig["layout"]["yaxis"]["automargin"] is True and fig["layout"]["xaxis"].get("tickangle") is None


def test_wrapping_keeps_every_character():
    for text in ("5 chain_of_tasks_(data_manipulation,communication_outreach)", "x" * 95, "a b,c_d/e-f " * 9):
        for width in (8, 16, 30):
            lines = charts._wrap(text, width)
            assert all(len(line) <= width for line in lines)
            assert "".join(lines).replace(" ", "") == text.replace(" ", "")


def test_long_notes_above_the_bars_are_wrapped_not_cut_at_the_right_edge():
    # Issue 26: a run's note is one annotation line; plotly never wraps, so a long one was cut.
    s = summarize(small())
    name = "agentharm ·b08296 [cancelled — 39 of 176 samples] " + "x" * 30
    fig = charts.before_after_bars([(name, s), ("other", s)]).to_dict()
    lines = fig["layout"]["annotations"][0]["text"].split("<br>")
    assert max(map(len, lines)) <= charts.NOTE_LINE_CHARS + 3 and len(lines) > 2
    assert fig["layout"]["margin"]["t"] == 70 + 16 * len(lines)


def test_many_categories_at_zero_are_named_in_a_note_not_drawn():
    # The samples' 41 categories, 35 at +0.00 pp, drew a chart taller than a slide.
    from scoring.aggregate import by_category, summarize_by
    rows = [row(0, Status.UNSAFE, cat="C00"), row(1, Status.SAFE, cat="C00")]  # hidden harm: 50 pp
    rows += [row(10 + i, Status.SAFE, cat=f"C{i + 1:02d}") for i in range(charts.MAX_CATEGORY_BARS + 3)]
    fig = charts.phantom_by_category(summarize_by(rows, by_category), ()).to_dict()
    assert [y for t in fig["data"] for y in t["y"]] == ["C00"]
    note = fig["layout"]["annotations"][0]["text"].replace("<br>", " ")
    assert note.startswith(f"{charts.MAX_CATEGORY_BARS + 3} more categories at +0.00 pp") and "C15" in note
    few = charts.phantom_by_category(summarize_by(rows[:5], by_category), ()).to_dict()
    assert sorted(y for t in few["data"] for y in t["y"]) == ["C00", "C01", "C02", "C03"]  # few: every one drawn


def test_a_run_s_name_sits_at_the_top_above_a_legend():
    fig = charts.for_run(charts.phantom_by_category({}, ()), "run · model m").to_dict()
    title = fig["layout"]["title"]
    assert title["yref"] == "container" and title["y"] == 1 and title["yanchor"] == "top"
    assert title["subtitle"]["text"] == "run · model m"
