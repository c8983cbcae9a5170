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

from scoring.export_files import file_slug
from scoring.workspace import Workspace, views

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
    # The two runs named "gpt-x · agentharm" are told apart on the chart by their import times or
    # keys (the error one with its badge); the axis labels wrap: look at the names unwrapped.
    names = views.run_names(server.db)
    assert names[keys[0]] != names[keys[1]] and all(n.startswith("gpt-x · agentharm · ") for n in names.values())
    figure = html[html.index("<div class='live'>"):].replace("<br>", " ").replace("\\u003cbr\\u003e", " ")
    assert f"{names[keys[0]]} [error — 88 of 176 samples]" in figure and names[keys[1]] in figure


def test_the_aggregates_csv_reads_back_with_a_plain_read_csv_and_names_each_run(twins, page):
    server, keys = twins
    open_page(page, server, keys, "report", "Download HTML report")
    with page.expect_download() as dl:
        page.get_by_role("button", name="Aggregates (CSV)").click()
    frame = pd.read_csv(dl.value.path())
    assert len(frame) == 2 and list(frame["content_sha256"]) == keys
    assert list(frame["run_status_badge"].fillna("")) == ["error — 88 of 176 samples", ""]
    names = views.run_names(server.db)
    assert frame.loc[0, "run"].startswith(names[keys[0]]) and frame.loc[0, "run"].endswith(
        f"key {keys[0][:12]} · file agentharm-error.jsonl · error — 88 of 176 samples")
    assert frame.loc[1, "run"].startswith(names[keys[1]]) and frame.loc[1, "run"].endswith(
        f"key {keys[1][:12]} · file agentharm-ok.jsonl")


def test_every_png_names_its_runs(twins, page):
    server, keys = twins
    open_page(page, server, keys, "report", "Download HTML report")
    page.get_by_role("button", name="Render chart images").click()
    page.get_by_role("button", name="Download PNG charts (zip)").wait_for(timeout=180_000)
    with page.expect_download() as dl:
        page.get_by_role("button", name="Download PNG charts (zip)").click()
    error_run = f"key {keys[0][:12]} · file agentharm-error.jsonl · error — 88 of 176 samples"
    ok_run = f"key {keys[1][:12]} · file agentharm-ok.jsonl"
    with zipfile.ZipFile(dl.value.path()) as z:
        pngs = sorted(n for n in z.namelist() if n.endswith(".png"))
        # The two comparisons (rates, paired difference), then two charts of each run: its
        # trajectories have no category and none is UNSCORED, so neither chart of empty axes
        # (issues 26, 35): STAMP.txt says why each is not drawn.
        assert len(pngs) == 2 + 2 * 2 and not any("category" in n or "unscored" in n for n in pngs), pngs
        stamp = z.read("STAMP.txt").decode()
        names = views.run_names(server.db)
        for key in keys:  # each chart left out is named by its run's name and its title, with why
            assert f"not drawn: {names[key]}: phantom safety by category: No category data" in stamp, stamp
            assert f"not drawn: {names[key]}: UNSCORED by reason: No trajectory is UNSCORED" in stamp, stamp
        named = []
        for name in pngs:
            with Image.open(io.BytesIO(z.read(name))) as image:
                source = image.text["Source"]
            named.append((error_run in source, ok_run in source))
    # The comparison names both runs; a chart of one run names that run alone (issue 26: each
    # image carried both, so a waterfall on a slide did not say whose it was).
    assert named == [(True, True)] * 2 + [(True, False)] * 2 + [(False, True)] * 2, list(zip(pngs, named, strict=True))


# --- issue 35, item 6: every download names its run inside it, and its name is the run's own --------


@pytest.fixture(scope="module")
def labelled(tmp_path_factory):
    """The two bundled sample runs, each with a label and an undone one (so the label exports have
    rows), on a server of their own."""
    from pages._shared import loaders
    from scoring.model import ReviewLabel

    d = tmp_path_factory.mktemp("labelled")
    ws = Workspace(d / "labelled.db")
    keys = [ws.import_run(path, payloads=side).run_key for path, side in loaders.sample_files()]
    for key in keys:
        first, second = (r["trajectory_id"] for r in ws.trajectory_rows(key, "status = 'inconclusive'")[:2])
        ws.add_label(key, first, "alice", ReviewLabel.GENUINE_DECLINE)
        ws.add_label(key, second, "alice", ReviewLabel.DEGENERATE)
        ws.undo(key, second, "alice")
    server = Server(d / "labelled.db", d / "streamlit.log")
    try:
        yield server, keys, ws
    finally:
        server.stop()


def run_line(ws: Workspace, key: str) -> str:
    """The line every exported file of the run names it by (``exports.run_identity``)."""
    from pages._shared import exports
    from scoring.workspace import evaluation

    return exports.run_identity(views.named_evaluation(ws.path, evaluation(ws, key)))


def download(page, button: str) -> tuple[str, str]:
    """(the file name the browser saves, its text) of a download button's file."""
    with page.expect_download(timeout=120_000) as dl:  # an HTML report renders its charts first
        page.get_by_role("button", name=button, exact=True).click()
    return dl.value.suggested_filename, Path(dl.value.path()).read_text(encoding="utf-8")


def test_the_downloads_of_two_runs_have_names_of_their_own_and_name_their_run_inside(labelled, page, artifacts):
    server, keys, ws = labelled
    version = {k: ws.run(k)["scorer_version"] for k in keys}
    names = views.run_names(server.db)
    files: dict[str, tuple[str, str]] = {}  # file name -> (run key, text)
    for key in keys:  # (the HTML report of each would render its charts: the one of both is below)
        page.goto(server.url + f"/report?runs={key[:12]}")
        wait_app(page, "Download HTML report", timeout=90_000)
        for button in ("Aggregates (CSV)", "Aggregates (JSON)"):
            name, text = download(page, button)
            assert name not in files, (name, "the other run's file has the same name")
            files[name] = (key, text)
    assert len(files) == 4
    for name, (key, text) in files.items():
        other = next(k for k in keys if k != key)
        # the run's readable name and short key: the two runs' files never share a name
        assert name.startswith("aggregates--" + file_slug(names[key]) + "--" + key[:12] + "."), name
        assert other[:8] not in name, name
        assert key in text and other not in text, name  # the run's full key inside, not the other run's
        assert version[key] in text, name
    for name, (key, text) in files.items():
        if name.endswith(".csv"):
            frame = pd.read_csv(io.StringIO(text))
            assert list(frame["run_key"]) == [key] and str(frame.loc[0, "scorer_version"]) == version[key]
            assert pd.Timestamp(frame.loc[0, "exported_at"]).tzname() == "UTC"
        else:
            stamp = json.loads(text)["stamp"]
            assert stamp["run_keys"] == [key] and stamp["scorer_version"] == version[key] and stamp["exported_at"]

    # Both runs in one report, Blind off (on the Review page): the paired comparison and each run's
    # two label files (final labels, and the event log with its undo), each its own name.
    page.goto(server.url + "/review?runs=" + ",".join(k[:12] for k in keys))
    wait_app(page, "Keyboard:", timeout=90_000)
    page.get_by_text("Blind", exact=True).click()
    wait_app(page)
    page.get_by_role("link", name="Report").click()
    wait_app(page, "Paired comparison (CSV)", timeout=90_000)
    name, text = download(page, "Paired comparison (CSV)")
    paired = pd.read_csv(io.StringIO(text))
    assert name == f"paired--2-runs--{keys[0][:8]}-{keys[1][:8]}.csv"
    assert list(paired[["run_key_a", "run_key_b"]].iloc[0]) == keys and paired.loc[0, "shared_tasks"] > 0
    saved = set()
    for key in keys:
        named = names[key]  # the run's readable name, unique in the workspace
        for kind, button in (("labels-final", f"Labels of {named} (CSV)"),
                             ("labels-events", f"Label events of {named} (CSV)")):
            name, text = download(page, button)
            assert name == f"{kind}--{file_slug(named)}--{key[:12]}.csv"
            frame = pd.read_csv(io.StringIO(text))
            assert set(frame["run_key"]) == {key} and set(frame["scorer_version"].astype(str)) == {version[key]}
            assert set(frame["run"]) == {run_line(ws, key)}, set(frame["run"])  # the run named inside
            assert len(set(frame["exported_at"])) == 1
            saved.add(name)
            labelled_traces = {e["trajectory_id"] for e in ws.history(key)}
            if kind == "labels-final":  # one row per trace: the undone one withdrawn, not a second label
                assert len(frame) == len(labelled_traces) == frame["trajectory_id"].nunique() == 2
                assert set(frame["trajectory_id"]) == labelled_traces
                assert list(frame["decided_by"]) == ["unanimous", "withdrawn"]
            else:
                assert list(frame["action"]) == ["label", "label", "undo"]
    assert len(saved) == 4  # two runs × two files, no name twice
    name, html = download(page, "Download HTML report")
    assert "Paired comparison" in html and all(k in html for k in keys)
    report = artifacts / name
    report.write_text(html, encoding="utf-8")
    page.goto(report.as_uri())
    page.locator(".live .main-svg").first.wait_for(timeout=60_000)
    page.screenshot(path=str(artifacts / "report_html.png"), full_page=True)
