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
from scoring.report import evaluate

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
    assert text.startswith("# run observed-m1: content sha256 ")
    frame = pd.read_csv(io.StringIO(text), comment="#")
    assert frame.loc[0, "safe_rate_strict"] == pytest.approx(ev.summary.strict.value)
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
    assert ev.run.content_sha256[:12] in text and "scorer 2.0" in text and "2026-11-29T10:00:00" in text


def test_report_stamp_names_the_file_hash_the_side_log_and_the_run_status(ev):
    import hashlib

    want = hashlib.sha256((SAMPLES / "observed-m1.jsonl").read_bytes()).hexdigest()
    side = hashlib.sha256((SAMPLES / "observed-m1.payloads.jsonl").read_bytes()).hexdigest()
    status = dataclasses.replace(ev, run=dataclasses.replace(ev.run, header=dataclasses.replace(
        ev.run.header, run_status="cancelled", run_status_detail="39 of 176 samples written")))
    stamp = exports.make_stamp([status], None)
    lines = stamp.lines()
    assert f"run observed-m1: file sha256 {want}" in lines
    assert f"run observed-m1: side log {SAMPLES / 'observed-m1.payloads.jsonl'} (sha256 {side})" in lines
    assert "run observed-m1: harness run status cancelled (39 of 176 samples written)" in lines
    html = exports.html_report([status], [], stamp)
    assert f"file sha256 {want}" in html and "harness run status cancelled" in html
