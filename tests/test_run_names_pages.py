"""Issue 35 on the pages (AppTest): the sidebar's run picker and the Runs table name runs by
their names; a chip cuts a long name, and the list under the picker shows each one whole; in the
Runs table a long name keeps its start and its end, so a run and its --require-proof copy read
apart. No import of the naming code: the expected names are written out."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest

from pages._shared import loaders, state
from scoring.workspace import Workspace

from .conftest import ROOT
from .run_name_logs import LONG_NAME, long_named


def test_the_sidebar_and_the_runs_table_show_the_names(tmp_path, monkeypatch):
    db = tmp_path / "app.db"
    ws = Workspace(db)
    log = long_named(tmp_path)
    keys = [ws.import_run(log).run_key, ws.import_run(log, require_proof=True).run_key]
    names = [LONG_NAME, LONG_NAME + " · require-proof"]
    monkeypatch.setattr(loaders, "DB_PATH", db)
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=90)
    at.run()
    assert not at.exception, at.exception
    picker = at.sidebar.multiselect(key=state.SELECTED_RUNS)
    assert sorted(picker.value) == sorted(keys) and sorted(picker.options) == names
    listed = [line.removeprefix("• ") for t in at.sidebar.text for line in t.value.splitlines()]
    assert sorted(listed) == names  # each chip's name, whole, under the picker
    at.switch_page("pages/runs.py").run()
    assert not at.exception, at.exception
    cells = sorted(at.dataframe[0].value["run"])
    # too long for the column, each keeps its start and its end: the two copies read apart in it
    assert cells == sorted(n[:21] + "…" + n[-32:] for n in names)
    assert any(c.startswith("openai/meta-llama/Met…") and c.endswith("instructions · require-proof") for c in cells)
