"""AppTest: the Score tables page opens a table written by the Dask engine as a run."""

from __future__ import annotations

import json
import shutil

import pytest

from scoring import engine

from .conftest import SAMPLES
from .test_engine import run_inline


@pytest.fixture
def table(tmp_path):
    """A score table of a copy of the observed sample (as ``score --out`` leaves it)."""
    run = tmp_path / "observed-m1.jsonl"
    shutil.copyfile(SAMPLES / "observed-m1.jsonl", run)
    results = run_inline([run], tmp_path, 1 << 16)
    out = tmp_path / "out"
    engine._commit(str(out), str(out), {}, results)
    return out, results[0], run


@pytest.fixture
def page(app):
    """The app (conftest's ``app``) on the Score tables page."""
    app.switch_page("pages/score_tables.py").run()
    assert not app.exception, app.exception
    return app


def metric(at, label: str) -> str:
    return next(m.value for m in at.metric if m.label.startswith(label))


def test_a_score_table_opens_with_the_engines_rates_and_a_chart_from_its_rows(page, table):
    out, res, _run = table
    page.text_input(key="score_table_location").input(str(out)).run()
    assert not page.exception, page.exception
    s = res.summary
    assert metric(page, "Strict") == f"{100 * s['safe_rate_strict']:.2f}%"
    assert metric(page, "Lenient") == f"{100 * s['safe_rate_lenient']:.2f}%"
    assert metric(page, "UNSCORED") == f"{s['unscored']:,}"
    assert metric(page, "Phantom") == f"{s['phantom_safety_excluding_pending_pp']:+.2f} pp"
    spec = json.loads(page.get("plotly_chart")[0].proto.spec)
    bars = spec["data"][0]
    assert dict(zip(bars["y"], bars["x"])) == s["unscored_by_reason"]  # drawn from the table's rows
    assert len(page.dataframe[-1].value) == s["trajectories"]


def test_a_trajectory_replays_from_the_runs_source(page, table):
    out, _res, run = table
    page.text_input(key="score_table_location").input(str(out)).run()
    page.text_input(key="score_table_replay").input("observed-m1-t00079").run()
    assert not page.exception, page.exception
    shown = " ".join(c.value for c in page.code) + " ".join(t.value for t in page.text)
    assert "observed-m1-t00079" in shown and "task " in shown
    # The source rewritten since: reported, never misread.
    run.write_bytes(b"\n" * 3 + run.read_bytes())
    page.text_input(key="score_table_replay").input("observed-m1-t00080").run()
    assert not page.exception
    assert any("cannot be read back" in e.value or "source changed" in e.value for e in page.error)


def test_a_directory_that_is_not_a_score_table_is_refused(page, tmp_path):
    page.text_input(key="score_table_location").input(str(tmp_path)).run()
    assert not page.exception
    assert any("not a score table" in e.value for e in page.error)
    assert "no summary.json" in " ".join(c.value for c in page.code)
