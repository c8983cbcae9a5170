"""AppTest: the Score tables page opens a table written by the Dask engine as a run."""

from __future__ import annotations

import json
import shutil

import pytest
from streamlit.testing.v1 import AppTest

from pages._shared import loaders
from scoring import engine

from .conftest import ROOT, SAMPLES
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
def app(tmp_path, monkeypatch):
    monkeypatch.setattr(loaders, "DB_PATH", tmp_path / "app.db")
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=90)
    at.run()
    assert not at.exception, at.exception
    at.switch_page("pages/score_tables.py").run()
    assert not at.exception, at.exception
    return at


def metric(at, label: str) -> str:
    return next(m.value for m in at.metric if m.label.startswith(label))


def test_a_score_table_opens_with_the_engines_rates_and_a_chart_from_its_rows(app, table):
    out, res, _run = table
    app.text_input(key="score_table_location").input(str(out)).run()
    assert not app.exception, app.exception
    s = res.summary
    assert metric(app, "Strict") == f"{100 * s['safe_rate_strict']:.2f}%"
    assert metric(app, "Lenient") == f"{100 * s['safe_rate_lenient']:.2f}%"
    assert metric(app, "UNSCORED") == f"{s['unscored']:,}"
    assert metric(app, "Phantom") == f"{s['phantom_safety_excluding_pending_pp']:+.2f} pp"
    spec = json.loads(app.get("plotly_chart")[0].proto.spec)
    bars = spec["data"][0]
    assert dict(zip(bars["y"], bars["x"])) == s["unscored_by_reason"]  # drawn from the table's rows
    assert len(app.dataframe[-1].value) == s["trajectories"]


def test_a_trajectory_replays_from_the_runs_source(app, table):
    out, _res, run = table
    app.text_input(key="score_table_location").input(str(out)).run()
    app.text_input(key="score_table_replay").input("observed-m1-t00079").run()
    assert not app.exception, app.exception
    shown = " ".join(c.value for c in app.code) + " ".join(t.value for t in app.text)
    assert "observed-m1-t00079" in shown and "task " in shown
    # The source rewritten since: reported, never misread.
    run.write_bytes(b"\n" * 3 + run.read_bytes())
    app.text_input(key="score_table_replay").input("observed-m1-t00080").run()
    assert not app.exception
    assert any("cannot be read back" in e.value or "source changed" in e.value for e in app.error)


def test_a_directory_that_is_not_a_score_table_is_refused(app, tmp_path):
    app.text_input(key="score_table_location").input(str(tmp_path)).run()
    assert not app.exception
    assert any("not a score table" in e.value for e in app.error)
    assert "no summary.json" in " ".join(c.value for c in app.code)
