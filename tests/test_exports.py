"""Report exports are pure functions: offline HTML, stamped data, chart images."""

from __future__ import annotations

import dataclasses
import io
import re
import shutil
import zipfile

import pandas as pd
import pytest

from pages._shared import charts, exports
from pages._shared.runtext import status_badge
from scoring.report import evaluate
from scoring.score import SCORER_VERSION

from .conftest import SAMPLES


@pytest.fixture(scope="module")
def ev():
    return evaluate(SAMPLES / "observed-m1.jsonl", payloads=SAMPLES / "observed-m1.payloads.jsonl")


def test_html_report_is_offline_stamped_and_escapes_run_text(ev):
    hostile = dataclasses.replace(ev, run=dataclasses.replace(
        ev.run, header=dataclasses.replace(ev.run.header, run_id="<script>alert(1)</script>")))
    stamp = exports.make_stamp([hostile], "2026-11-29T00:00:00+00:00")
    html = exports.html_report([hostile], [("Before/after", charts.before_after_bars([("r", ev.summary)]))], stamp)
    assert "<script>alert(1)</script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert not re.search(r"<script[^>]+src=", html)  # plotly.js inline, no CDN
    assert "Content-Security-Policy" in html
    assert ev.run.content_sha256 in html and "scorer version" in html and "labels as of 2026-11-29" in html
    assert f"{100 * ev.summary.strict.value:.2f}%" in html


def test_csv_and_json_exports_carry_the_stamp_and_the_numbers(ev):
    stamp = exports.make_stamp([ev], None)
    text = exports.stamped_csv(exports.aggregates_frame([ev]), stamp)
    frame = pd.read_csv(io.StringIO(text))  # as written: no comment lines to skip (issue 26)
    assert frame.loc[0, "safe_rate_strict"] == pytest.approx(ev.summary.strict.value)
    assert frame.loc[0, "run"] == (f"{ev.run.header.model} · observed-m1 · with side log · key "
                                   f"{ev.run.content_sha256[:12]} · file observed-m1.jsonl")
    assert frame.loc[0, "name"] == f"{ev.run.header.model} · observed-m1 · with side log"
    assert str(frame.loc[0, "scorer_version"]) == SCORER_VERSION and frame.loc[0, "exported_at"] == stamp.exported_at
    assert '"scorer_version"' in exports.aggregates_json([ev], stamp)


@pytest.mark.skipif(not shutil.which("chromium"), reason="kaleido needs Debian's chromium on PATH")
def test_chart_images_render_through_kaleido(ev):
    figs = [("before after", charts.before_after_bars([("r", ev.summary)]))]
    stamp = exports.make_stamp([ev], None)
    for fmt, magic in (("png", b"\x89PNG"), ("pdf", b"%PDF")):
        with zipfile.ZipFile(io.BytesIO(exports.figure_images(figs, fmt, stamp))) as z:
            names = sorted(z.namelist())
            assert names[0] == "01-before-after." + fmt and names[1] == "STAMP.txt"
            assert z.read(names[0]).startswith(magic)
            assert ev.run.content_sha256 in z.read("STAMP.txt").decode()


def test_stamped_figure_names_the_runs_and_scorer(ev):
    stamp = exports.make_stamp([ev], "2026-11-29T10:00:00+00:00")
    fig = exports.stamp_figure(charts.before_after_bars([("r", ev.summary)]), stamp).to_dict()
    text = fig["layout"]["annotations"][-1]["text"]
    assert ev.run.content_sha256[:12] in text and f"scorer {SCORER_VERSION}" in text and "2026-11-29T10:00:00" in text


def test_report_stamp_names_the_file_hash_the_side_log_and_the_run_status(ev):
    import hashlib

    want = hashlib.sha256((SAMPLES / "observed-m1.jsonl").read_bytes()).hexdigest()
    side = hashlib.sha256((SAMPLES / "observed-m1.payloads.jsonl").read_bytes()).hexdigest()
    status = dataclasses.replace(ev, run=dataclasses.replace(ev.run, header=dataclasses.replace(
        ev.run.header, run_status="cancelled", run_status_detail="39 of 176 samples written")))
    stamp = exports.make_stamp([status], None)
    lines = stamp.lines()
    assert f"run observed-m1: file sha256 {want}" in lines
    # by its file name (the sha256 says which bytes; its folder is the server's)
    assert f"run observed-m1: side log observed-m1.payloads.jsonl (sha256 {side})" in lines
    assert "run observed-m1: harness run status cancelled (39 of 176 samples written)" in lines
    html = exports.html_report([status], [], stamp)
    assert f"file sha256 {want}" in html and "harness run status cancelled" in html


def test_the_stamp_sits_below_everything_a_figure_draws_at_its_bottom(ev):
    # It was drawn inside the figure's bottom margin: clipped at the edge, crossed by the
    # phantom chart's rotated category labels.
    stamp = exports.make_stamp([ev], None)
    for fig in (charts.phantom_by_category({}, ()), charts.argument_size_histogram([10, 20], 8192, {}),
                charts.before_after_bars([("r", ev.summary)])):
        own = fig.layout.margin.b
        out = exports.stamp_figure(fig, stamp)
        note = out.layout.annotations[-1]
        assert out.layout.margin.b == own + exports.STAMP_ROOM
        assert note.yanchor == "bottom" and note.y == 0 and -own - exports.STAMP_ROOM < note.yshift < -own
        assert out.layout.height == exports.image_height(fig) + exports.STAMP_ROOM


def test_the_html_report_carries_a_static_image_of_every_chart(ev, monkeypatch):
    figs = [("a", charts.before_after_bars([("r", ev.summary)])), ("b", charts.unscored_by_reason(ev.summary))]
    stamp = exports.make_stamp([ev], None)
    html = exports.html_report([ev], figs, stamp, [b"\x89PNG-a", b"\x89PNG-b"])
    assert html.count("<img class='static'") == 2 and html.count("<div class='live'>") == 2
    assert ".js img.static{display:none}" in html and "className += ' js'" in html
    # Without a renderer the report still stands, and says why it has no images.
    monkeypatch.setattr(exports, "render_images", lambda *a, **k: (_ for _ in ()).throw(RuntimeError("no chromium")))
    fallback = exports.offline_report([ev], figs, stamp)
    assert "<img class='static'" not in fallback and "the renderer failed: no chromium" in fallback


@pytest.mark.skipif(not shutil.which("chromium"), reason="kaleido needs Debian's chromium on PATH")
def test_images_reuse_one_renderer_and_report_progress(ev, monkeypatch):
    import kaleido

    starts = []
    real = kaleido.start_sync_server
    monkeypatch.setattr(kaleido, "start_sync_server", lambda *a, **k: starts.append(1) or real(*a, **k))
    figs = [charts.before_after_bars([("r", ev.summary)]), charts.unscored_by_reason(ev.summary)]
    seen = []
    for _ in range(2):
        images = exports.render_images(figs, "png", progress=lambda done, total: seen.append((done, total)))
        assert all(i.startswith(b"\x89PNG") for i in images)
    assert len(starts) <= 1 and kaleido._global_server.is_running()
    assert seen == [(1, 2), (2, 2)] * 2
    html = exports.offline_report([ev], [("a", figs[0])], exports.make_stamp([ev], None))
    assert html.count("<img class='static' alt='a' src='data:image/png;base64,") == 1


@pytest.mark.skipif(not shutil.which("chromium"), reason="kaleido needs Debian's chromium on PATH")
def test_sessions_rendering_at_once_each_get_their_own_images(ev):
    # kaleido's one server returns results on one queue: two callers at once could swap them.
    import threading

    figs = {fmt: [charts.unscored_by_reason(ev.summary)] * 3 for fmt in ("png", "pdf")}
    got: dict[str, list[bytes]] = {}
    threads = [threading.Thread(target=lambda f=f: got.__setitem__(f, exports.render_images(figs[f], f)))
               for f in figs]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert all(i.startswith(b"\x89PNG") for i in got["png"]) and all(i.startswith(b"%PDF") for i in got["pdf"])


def test_a_run_that_did_not_finish_wears_a_short_badge():
    assert status_badge("cancelled", "39 of 176 samples written") == "cancelled — 39 of 176 samples"
    assert status_badge("error", "RuntimeError('x' * 300); 88 of 176 samples written") == "error — 88 of 176 samples"
    assert status_badge("success", "176 of 176 samples written") == "" and status_badge("", "") == ""
    assert status_badge("started") == "started"


def test_a_stamped_figure_names_each_run_alone(ev):
    stamp = exports.make_stamp([ev], None)
    text = exports.stamp_figure(charts.before_after_bars([("r", ev.summary)]), stamp).layout.annotations[-1].text
    assert (f"{ev.run.header.model} · observed-m1 · with side log · key {ev.run.content_sha256[:12]} "
            "· file observed-m1.jsonl") in text


def test_a_chart_of_one_run_names_that_run_alone_under_its_title_and_in_its_stamp(ev, monkeypatch):
    # Issue 26: every image of a report of two runs carried both runs' stamp, and a waterfall's
    # title named no run: on a slide, nothing said which run it was.
    other = dataclasses.replace(ev, run=dataclasses.replace(ev.run, content_sha256="f" * 64, header=dataclasses.replace(
        ev.run.header, run_id="other-run")))
    both = exports.make_stamp([ev, other], None)
    own = exports.make_stamp([other], None)
    waterfall = charts.for_run(charts.waterfall_chart([]), exports.run_identity(other))
    assert waterfall.layout.title.subtitle.text.startswith(f"{ev.run.header.model} · other-run · with side log · key ")
    blank = io.BytesIO()
    from PIL import Image
    Image.new("RGB", (4, 4)).save(blank, format="png")
    monkeypatch.setattr(exports, "render_images", lambda figs, fmt, **_: [blank.getvalue()] * len(figs))
    figs = [("both", charts.before_after_bars([("a", ev.summary), ("b", other.summary)])), ("other", waterfall)]
    with zipfile.ZipFile(io.BytesIO(exports.figure_images(figs, "png", both, stamps=[both, own]))) as z:
        sources = {}
        for name in ("01-both.png", "02-other.png"):
            with Image.open(io.BytesIO(z.read(name))) as image:
                sources[name] = image.text["Source"]
        assert "STAMP.txt" in z.namelist() and "observed-m1" in z.read("STAMP.txt").decode()
    assert "· observed-m1 · with side log · key" in sources["01-both.png"]
    assert "· other-run · with side log · key" in sources["01-both.png"]
    assert sources["02-other.png"].startswith(f"{ev.run.header.model} · other-run · ")
    assert "observed-m1 · with side log" not in sources["02-other.png"]
    with pytest.raises(ValueError, match="1 stamps for 2 figures"):
        exports.figure_images(figs, "png", both, stamps=[both])


def test_a_long_run_name_under_a_title_is_wrapped_and_given_room():
    fig = charts.for_run(charts.waterfall_chart([]), "run · model m · key abc · file " + "long-name-" * 12)
    lines = fig.layout.title.subtitle.text.split("<br>")
    assert len(lines) == 2 and max(map(len, lines)) <= charts.SUBTITLE_CHARS
    assert fig.layout.margin.t == 70 + 16 * 2 + 4
