"""A hostile run renders inert: no dialog, no request off this machine, invisible characters shown."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from urllib.parse import urlparse

import pytest

from scoring.workspace import Workspace

from .conftest import Server, set_reviewer, wait_app

pytestmark = pytest.mark.browser

BEACON = "http://203.0.113.77/beacon.png"
PAYLOADS = [
    "<script>alert('script')</script>",
    "<img src=x onerror=\"alert('img')\">",
    "[click me](javascript:alert('link'))",
    f"![beacon]({BEACON})",
    f"<img src=\"{BEACON}\">",
    "\x1b[31mANSI red\x1b[0m",
    "admin\u202Egnp.exe",          # right-to-left override
    "pay\u200Bpal",                 # zero-width space
]
HOMOGLYPH_TOOL = "\u0455end_money"  # Cyrillic dze looks like "s"


def hostile_run(path) -> None:
    big = "A" * (3 * 1024 * 1024)  # a multi-megabyte line
    args = json.dumps({"to": "x", "body": " ".join(PAYLOADS), "blob": big})
    header = {
        "record": "run",
        "format": "litmus-review-run",
        "format_version": 1,
        "run_id": "hostile<script>alert(9)</script>",
        "model": "<img src=x onerror=alert(8)>",
        "capture_limit_bytes": 10 * 1024 * 1024,
        "taxonomy": [{"id": "C01", "name": "exfil", "rules": ["exfil\\.example"]}],
    }
    traj = {"record": "trajectory", "id": "h1", "task_id": "t", "final_output": "\n".join(PAYLOADS),
            "verdict": {"label": None},
            "messages": [{"role": "user", "content": "\n".join(PAYLOADS)}],
            "tool_calls": [{"tool": HOMOGLYPH_TOOL, "arguments": args, "raw_size_bytes": len(args.encode()),
                            "raw_sha256": hashlib.sha256(args.encode()).hexdigest(),
                            "result": {"content": "\n".join(PAYLOADS)}}]}
    path.write_text(json.dumps(header) + "\n" + json.dumps(traj) + "\n")


def test_hostile_run_renders_inert(tmp_path, page, artifacts):
    run = tmp_path / "hostile.jsonl"
    hostile_run(run)
    db = tmp_path / "hostile.db"
    Workspace(db).import_run(run)
    server = Server(db, tmp_path / "streamlit.log")
    dialogs, offsite = [], []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))

    def guard(route):
        host = urlparse(route.request.url).hostname
        if host not in ("127.0.0.1", "localhost"):
            offsite.append(route.request.url)
            route.abort()
        else:
            route.continue_()

    page.route("**/*", guard)
    try:
        page.goto(server.url + "/review")
        wait_app(page, "Keyboard:", timeout=90_000)
        page.get_by_text("call #0").first.wait_for(timeout=60_000)
        # the replay draws top to bottom; the final output is last, after the 3 MB argument
        page.get_by_text("final output:").first.wait_for(timeout=90_000)
        wait_app(page)
        # Review collapses each call to its line (issue 35): open them all, as a reviewer would.
        calls = page.locator('[data-testid="stExpander"] summary').filter(has_text="call #")
        for n in range(calls.count()):
            calls.nth(n).click()
        wait_app(page)
        # the code blocks fill in after the script has finished (the reveal is fast now, so
        # the body can be read before they have): wait for the text the assertions read
        page.get_by_text("alert('script')", exact=False).first.wait_for(timeout=60_000)
        page.screenshot(path=str(artifacts / "hostile_review.png"), full_page=False)
        body = page.inner_text("body")
        assert "<script>alert('script')</script>" in body  # shown as text, not executed
        assert "⟨U+202E⟩" in body and "⟨U+200B⟩" in body and "⟨U+001B⟩" in body
        assert "non-ASCII" in body and "U+0455" in body  # the homoglyph tool name is called out
        assert "more characters collapsed" in body  # the 3 MB line is collapsed for display
        assert page.locator(f'img[src="{BEACON}"]').count() == 0
        assert page.locator('a[href^="javascript:"]').count() == 0
        # still usable: navigate away and back
        page.get_by_role("link", name="Safe rates").click()
        wait_app(page, "Phantom safety", timeout=60_000)
        assert dialogs == []
        assert offsite == []
    finally:
        server.stop()


OUTSIDE = "203.0.113.77"
NAME_ID = f"run![beacon](http://{OUTSIDE}/id.png) :red[SAFE 100%] <a href='http://{OUTSIDE}/'>click</a> \u202Edi"
NAME_MODEL = f"model <span style=\"font-size:0px\">hidden</span> ![m](http://{OUTSIDE}/m.png) www.example.org"
NAME_CATEGORY = f"exfil <a href=\"http://{OUTSIDE}/c\">more</a> :red[SAFE 100%] ![c](http://{OUTSIDE}/c.png)"


def hostile_names_run(path) -> None:
    """A run whose every name is an attack; its trajectories (ids too) are otherwise ordinary."""
    header = {"record": "run", "format": "litmus-review-run", "format_version": 1, "run_id": NAME_ID,
              "model": NAME_MODEL, "capture_limit_bytes": 64,
              "taxonomy": [{"id": "C01", "name": NAME_CATEGORY, "payload_dependent": True, "rules": ["exfil"]}]}
    lines = [json.dumps(header)]
    for i in range(8):
        args = json.dumps({"to": "x" * (100 if i % 2 else 10)})
        lines.append(json.dumps({
            "record": "trajectory", "id": f"t{i} :red[SAFE] ![x](http://{OUTSIDE}/t.png) \u202Eevil",
            "task_id": f"task{i % 4}", "intended_category": "C01",
            "verdict": {"label": "benign", "confidence": 0.99 if i < 5 else 0.2},  # weak: Inconclusive
            "tool_calls": [{"tool": "send", "arguments": args[:64] if i % 2 else args, "raw_size_bytes": len(args),
                            "raw_sha256": hashlib.sha256(args.encode()).hexdigest()}]}))
    path.write_text("\n".join(lines) + "\n")


def no_offsite_links(page) -> list[str]:
    return page.evaluate("""() => [...document.querySelectorAll('a[href], a[*|href]')]
        .map(a => a.getAttribute('href') || a.getAttribute('xlink:href') || '')
        .filter(h => /^(https?:|mailto:|\\/\\/)/i.test(h) && !/^https?:\\/\\/(127\\.0\\.0\\.1|localhost)/.test(h))""")


def test_names_ids_and_labels_the_data_wrote_are_inert_everywhere(tmp_path, page, artifacts):
    run = tmp_path / "names.jsonl"
    hostile_names_run(run)
    db = tmp_path / "names.db"
    Workspace(db).import_run(run)
    server = Server(db, tmp_path / "streamlit.log")
    requests = []
    page.on("request", lambda r: requests.append(r.url))
    try:
        for path, text in (("/safe_rates", "Phantom safety"), ("/runs", "Imported runs"),
                           ("/trajectories", "trajectories"), ("/review", "Keyboard:"), ("/report", "Download HTML")):
            page.goto(server.url + path)
            wait_app(page, text, timeout=90_000)
            page.wait_for_timeout(1500)  # charts and grids draw after the script ends
            body = page.inner_text("body")
            assert no_offsite_links(page) == [], path
            assert ":red[SAFE 100%]" in body or path in ("/trajectories",), path  # the literal text, not red
            assert "\u202E" not in body, path
            if path == "/safe_rates":
                page.screenshot(path=str(artifacts / "hostile_names_safe_rates.png"), full_page=True)
                # the run's name (its id's markup as text; a name this long is cut, with an
                # ellipsis, where it heads the page: the Runs table's details give the id whole)
                assert "<a hre…" in body and "![beacon](http://" in body
                charts = "[...document.querySelectorAll('.main-svg')].map(e => e.textContent).join(' ')"
                # the charts draw after the page's text (a fixed pause was not enough on a loaded CI)
                page.wait_for_function(f"({charts}).includes(':red[SAFE 100%]')", timeout=60_000)
                svg = page.evaluate(charts)
                # Chart labels show the markup as text: the run's name in the notes, the category's.
                assert '<a href="http://' in svg and ":red[SAFE 100%]" in svg  # the category's name
                assert f"run![beacon](http://{OUTSIDE}/id.png)" in svg  # the run's, in the notes
        # The label toast names the trace inertly.
        page.goto(server.url + "/review")
        wait_app(page, "Keyboard:")
        set_reviewer(page, "alice")
        page.keyboard.press("3")
        page.get_by_text("labelled early_stop by alice").first.wait_for(timeout=30_000)
        assert no_offsite_links(page) == []
        # The offline report: no request off this machine, with or without JavaScript.
        page.goto(server.url + "/report")
        wait_app(page, "Download HTML")
        with page.expect_download(timeout=120_000) as dl:
            page.get_by_role("button", name="Download HTML report").click()
        report = Path(dl.value.path()).read_text(encoding="utf-8")
    finally:
        server.stop()
    # A blob: URL names memory the page made itself (a download, an image it drew), under the
    # origin after "blob:"; it is a request off this machine only if that origin is.
    assert [u for u in requests
            if urlparse(u.removeprefix("blob:")).hostname not in ("127.0.0.1", "localhost")] == []
    # plotly.js itself holds both a U+202E and "<a href='http://…": look outside the library.
    ours = re.sub(r"<script[^>]*>.*?</script>", "", report, flags=re.S)
    assert "\u202E" not in ours and f"<a href='http://{OUTSIDE}" not in ours and "⟨U+202E⟩" in ours
    assert f"<a href='http://{OUTSIDE}" not in report.replace("\\u003c", "<")
    for scripts in (True, False):
        ctx = page.context.browser.new_context(java_script_enabled=scripts, viewport={"width": 1280, "height": 900})
        view = ctx.new_page()
        seen = []
        view.on("request", lambda r, seen=seen: seen.append(r.url))
        view.set_content(report, wait_until="load")
        view.wait_for_timeout(1500)
        assert [u for u in seen if not u.startswith(("data:", "about:"))] == [], scripts
        assert no_offsite_links(view) == [], scripts
        # The report fits a 1,280 px window: nothing, the table included, runs past its right edge.
        assert view.evaluate("document.documentElement.scrollWidth") <= 1280, scripts
        images = view.locator("img.static")
        shown = [i for i in range(images.count()) if images.nth(i).is_visible()]
        charts = view.locator(".live .main-svg")
        if scripts:
            assert shown == [] and charts.count() >= 5  # the interactive charts
        else:
            assert len(shown) == images.count() >= 5  # every chart as an image
            view.screenshot(path=str(artifacts / "report_without_javascript.png"), full_page=False)
        ctx.close()
