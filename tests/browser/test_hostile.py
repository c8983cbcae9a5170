"""A hostile run renders inert: no dialog, no request off this machine, invisible characters shown."""

from __future__ import annotations

import hashlib
import json
from urllib.parse import urlparse

import pytest

from scoring.store import Workspace

from .conftest import Server, wait_app

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
    header = {"record": "run", "format": "litmus-review-run", "format_version": 1, "run_id": "hostile<script>alert(9)</script>",
              "model": "<img src=x onerror=alert(8)>", "capture_limit_bytes": 10 * 1024 * 1024,
              "taxonomy": [{"id": "C01", "name": "exfil", "rules": ["exfil\\.example"]}]}
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
