"""Issue 26, exports that stand alone: a run that did not finish wears its status badge on its
card, in the report and in every export; two runs with the same id are told apart; the CSV reads
back with a plain pandas.read_csv; every PNG names its run."""

from __future__ import annotations

import hashlib
import io
import json
import zipfile
from pathlib import Path

import pandas as pd
import pytest
from PIL import Image

from scoring.workspace import Workspace

from .conftest import Server, wait_app

pytestmark = pytest.mark.browser

ERROR_DETAIL = ("RuntimeError('the provider returned 529 Overloaded after 5 retries while the agent was calling "
                + "the tool get_webpage with a very long argument list " * 4 + "'); 88 of 176 samples written")


def write_run(path: Path, status: str, detail: str, n: int) -> None:
    args = '{"cmd": "ls"}'
    header = {"record": "run", "format": "litmus-review-run", "format_version": 1, "run_id": "agentharm",
              "model": "gpt-x", "taxonomy": [{"id": "C01", "name": "x", "rules": []}],
              "run_status": status, "run_status_detail": detail}
    lines = [json.dumps(header)]
    for i in range(n):
        lines.append(json.dumps({
            "record": "trajectory", "id": f"s{i}", "task_id": f"t{i}", "verdict": {"label": "benign"},
            "messages": [{"role": "user", "content": "go"}],
            "tool_calls": [{"tool": "shell", "arguments": args, "raw_size_bytes": len(args),
                            "raw_sha256": hashlib.sha256(args.encode()).hexdigest()}]}))
    path.write_text("\n".join(lines) + "\n")


@pytest.fixture(scope="module")
def twins(tmp_path_factory):
    d = tmp_path_factory.mktemp("twins")
    write_run(d / "agentharm-error.jsonl", "error", ERROR_DETAIL, 3)
    write_run(d / "agentharm-ok.jsonl", "success", "176 of 176 samples written", 4)
    ws = Workspace(d / "twins.db")
    keys = [ws.import_run(d / "agentharm-error.jsonl").run_key, ws.import_run(d / "agentharm-ok.jsonl").run_key]
    server = Server(d / "twins.db", d / "streamlit.log")
    try:
        yield server, keys
    finally:
        server.stop()


def open_page(page, server, keys, name: str, text: str) -> None:
    page.goto(server.url + f"/{name}?runs=" + ",".join(k[:12] for k in keys))
    wait_app(page, text, timeout=90_000)


def test_an_error_runs_badge_is_on_its_card_and_in_the_report(twins, page):
    server, keys = twins
    open_page(page, server, keys, "safe_rates", "Phantom safety")
    page.get_by_text("Run status: error — 88 of 176 samples").first.wait_for(timeout=30_000)
    page.get_by_text("The harness's full status message").first.click()
    page.locator('[data-testid="stCode"]').filter(has_text="provider returned 529").first.wait_for(timeout=30_000)
    open_page(page, server, keys, "report", "Download HTML report")
    with page.expect_download() as dl:
        page.get_by_role("button", name="Download HTML report").click()
    html = Path(dl.value.path()).read_text(encoding="utf-8")
    assert "<b class='badge'>error — 88 of 176 samples</b>" in html
    # The two runs called "agentharm" are told apart on the chart by their keys (the error one
    # with its badge); the axis labels wrap, so look at the figure's run names unwrapped.
    figure = html[html.index("<div class='live'>"):].replace("<br>", " ")
    assert f"agentharm ·{keys[0][:6]} [error — 88 of" in figure and f"agentharm ·{keys[1][:6]}" in figure


def test_the_aggregates_csv_reads_back_with_a_plain_read_csv_and_names_each_run(twins, page):
    server, keys = twins
    open_page(page, server, keys, "report", "Download HTML report")
    with page.expect_download() as dl:
        page.get_by_role("button", name="Aggregates (CSV)").click()
    frame = pd.read_csv(dl.value.path())
    assert len(frame) == 2 and list(frame["content_sha256"]) == keys
    assert list(frame["run_status_badge"].fillna("")) == ["error — 88 of 176 samples", ""]
    assert frame.loc[0, "run"] == (f"agentharm · model gpt-x · key {keys[0][:12]} · file agentharm-error.jsonl "
                                   "· error — 88 of 176 samples")
    assert frame.loc[1, "run"].endswith("file agentharm-ok.jsonl")


def test_every_png_names_its_runs(twins, page):
    server, keys = twins
    open_page(page, server, keys, "report", "Download HTML report")
    page.get_by_role("button", name="Render chart images").click()
    page.get_by_role("button", name="Download PNG charts (zip)").wait_for(timeout=180_000)
    with page.expect_download() as dl:
        page.get_by_role("button", name="Download PNG charts (zip)").click()
    error_run = (f"agentharm · model gpt-x · key {keys[0][:12]} · file agentharm-error.jsonl · error — 88 of 176 "
                 "samples")
    ok_run = f"key {keys[1][:12]} · file agentharm-ok.jsonl"
    with zipfile.ZipFile(dl.value.path()) as z:
        pngs = sorted(n for n in z.namelist() if n.endswith(".png"))
        # The comparison, then three charts of each run: its trajectories have no category, so
        # no category chart of empty axes (issue 26).
        assert len(pngs) == 1 + 2 * 3 and not any("category" in n for n in pngs), pngs
        named = []
        for name in pngs:
            with Image.open(io.BytesIO(z.read(name))) as image:
                source = image.text["Source"]
            named.append((error_run in source, ok_run in source))
    # The comparison names both runs; a chart of one run names that run alone (issue 26: each
    # image carried both, so a waterfall on a slide did not say whose it was).
    assert named == [(True, True), *[(True, False)] * 3, *[(False, True)] * 3], list(zip(pngs, named, strict=True))
