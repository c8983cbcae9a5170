"""A memo bounded by what its values hold (issue 34: a score table's JSON files, padded within
the parse bound, were each kept by a count-bounded cache, for the life of the server; the
figures are in benches/RESULTS.md, "table-pins")."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest

from scoring.dask_engine import table_layout, table_reader, table_writer
from scoring.importers._zip import retained_bytes
from scoring.weighed_cache import weighed

from .conftest import SAMPLES
from .test_engine import run_inline


def test_values_are_kept_within_the_budget_most_recent_first():
    calls: list[int] = []

    @weighed(budget=10_000, largest=5_000)
    def make(n: int) -> list[float]:
        calls.append(n)
        return [float(i) for i in range(n)]

    size = retained_bytes(make(40))
    assert 1_000 < size < 5_000
    make(40)
    assert calls == [40], "a kept value is not made again"
    for n in range(41, 60):
        make(n)
        assert make.held <= 10_000
    assert make.held == sum(retained_bytes([float(i) for i in range(n)]) for n in range(60 - len(make), 60))
    assert 40 not in [n for n in range(40, 60) if calls.count(n) > 1]
    make(40)
    assert calls.count(40) == 2, "the least recently used value was let go, and made again when asked"


def test_a_value_heavier_than_largest_is_returned_and_never_kept():
    calls: list[int] = []

    @weighed(budget=100_000, largest=2_000)
    def make(n: int) -> list[float]:
        calls.append(n)
        return [float(i) for i in range(n)]

    small = make(10)
    assert make(1_000) == [float(i) for i in range(1_000)]
    make(1_000)
    assert calls == [10, 1_000, 1_000] and len(make) == 1 and make(10) is small


def test_a_value_older_than_its_ttl_is_made_again(monkeypatch):
    now = [100.0]
    monkeypatch.setattr(time, "monotonic", lambda: now[0])
    calls: list[str] = []

    @weighed(budget=10_000, largest=10_000, ttl=60)
    def make(key: str) -> dict:
        calls.append(key)
        return {"key": key}

    make("a")
    now[0] += 59
    make("a")
    now[0] += 2
    make("a")
    assert calls == ["a", "a"]
    make.cache_clear()
    make("a")
    assert calls == ["a", "a", "a"] and make.held == retained_bytes({"key": "a"})


def test_a_budget_that_cannot_hold_its_largest_is_refused():
    with pytest.raises(ValueError, match="within the budget"):
        weighed(budget=10, largest=20)(len)


def _padded(path: Path, count: int) -> None:
    """``path`` (a table's JSON object) given a key the reader ignores, holding ``count`` floats:
    the padding that holds most memory per byte within the parse bound."""
    head = json.dumps(json.loads(path.read_text()))
    path.write_text(head[:-1] + ', "padding": [' + ",".join(["1.25"] * count) + "]}")


@pytest.fixture(scope="module")
def table(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("weighed")
    out = folder / "out"
    results = run_inline([SAMPLES / "observed-m1.jsonl"], folder, 1 << 16)
    table_writer.commit_results(str(out), str(out), {}, results)
    return out


def test_a_tables_own_files_read_once_are_kept(table, monkeypatch):
    for memo in (table_reader._run_file, table_reader.opened_table):
        memo.cache_clear()
    (run,) = table_reader.opened_table(str(table), "{}", None)
    run.summary  # noqa: B018 (the property reads the file)
    run.aggregates  # noqa: B018
    assert len(table_reader._run_file) == 2 and 0 < table_reader._run_file.held < table_reader.TABLE_MEMORY_LARGEST
    opened: list[str] = []
    real = table_reader.table_json
    monkeypatch.setattr(table_reader, "table_json",
                        lambda fh, rel, *a, **k: opened.append(rel) or real(fh, rel, *a, **k))
    assert table_reader.opened_table(str(table), "{}", None)[0] is run
    run.summary  # noqa: B018
    run.aggregates  # noqa: B018
    assert opened == [], "the engine's files are read once"


def test_padded_files_of_many_tables_are_never_kept_and_the_kept_stay_within_the_budget(table, tmp_path,
                                                                                          monkeypatch):
    """Eight copies of a table whose summaries and aggregates are padded (the bounds scaled down
    with the padding, the same arithmetic): a file that parses to more than ``largest`` is read
    whole and never kept, and what is kept stays within the budget however many tables are
    opened (a count-bounded cache kept all 16 files)."""
    monkeypatch.setattr(table_reader._run_file, "largest", 512 * 1024)
    monkeypatch.setattr(table_reader._run_file, "budget", 2 * 1024 * 1024)
    heavy, light = [], []
    for i in range(8):
        copy = tmp_path / f"t{i}"
        shutil.copytree(table, copy)
        for path in [*(copy / table_layout.SUMMARIES_DIR).glob("*.json"),
                     *(copy / table_layout.RUN_AGGREGATES_DIR).glob("*.json")]:
            _padded(path, 40_000 if i < 4 else 6_000)
        (heavy if i < 4 else light).append(copy)
    for memo in (table_reader._run_file, table_reader.opened_table):
        memo.cache_clear()
    for copy in heavy:
        (run,) = table_reader.opened_table(str(copy), "{}", None)
        assert run.summary["trajectories"] > 0 and len(run.aggregates["padding"]) > 30_000  # read whole
    assert len(table_reader._run_file) == 0, "no file heavier than largest is kept"
    for copy in light * 3:
        (run,) = table_reader.opened_table(str(copy), "{}", None)
        assert run.summary["trajectories"] > 0 and len(run.aggregates["padding"]) > 5_000
        assert 0 < table_reader._run_file.held <= 2 * 1024 * 1024
    assert 0 < len(table_reader._run_file) < 8, "some light files kept, the oldest let go"


def test_weighing_a_value_too_heavy_to_keep_stops_past_the_limit():
    value = [[float(i)] for i in range(200_000)]
    whole = retained_bytes(value)
    assert 1_000 < retained_bytes(value, limit=1_000) < whole // 10
    assert retained_bytes(value, limit=whole) == whole


@pytest.mark.parametrize("folder", [table_layout.SUMMARIES_DIR, table_layout.RUN_AGGREGATES_DIR])
def test_an_upload_whose_run_file_holds_more_than_a_reader_keeps_is_refused(table, tmp_path, monkeypatch, folder):
    """An upload's check (``vet``, every run) refuses a table a reader would parse again on every
    render of every visitor (the bound scaled down with the padding, the same arithmetic)."""
    monkeypatch.setattr(table_reader, "TABLE_MEMORY_LARGEST", 512 * 1024)
    assert table_reader.vet(str(table), every_run=True) is None
    copy = tmp_path / "padded"
    shutil.copytree(table, copy)
    for path in (copy / folder).glob("*.json"):
        _padded(path, 40_000)
    table_reader._run_file.cache_clear()
    said = table_reader.vet(str(copy), every_run=True)
    what = "summary" if folder == table_layout.SUMMARIES_DIR else "aggregates"
    assert said is not None and f"the table's {what} of run" in said and "holds more than 524,288 bytes" in said
    assert str(tmp_path) not in said
