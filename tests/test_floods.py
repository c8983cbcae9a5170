"""Floods of bad records are bounded (issue 24): a run's rejections are counted, and only the
first ``settle.REJECTIONS_LISTED`` of them are kept and listed ("and M more") in memory, in
``score --json``, in the workspace, on the terminal and on the Runs page; no stored value
grows with the flood."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

from scoring.cli import main
from scoring.model import Rejection, Run, RunHeader
from scoring.report import evaluate
from scoring.rows import SCORE_FIELDS
from scoring.settle import REJECTIONS_LISTED, BlockDigest, settle
from scoring.stored import StoredRun
from scoring.workspace import Workspace, evaluation

from .conftest import SAMPLES

FLOOD = 1_000_000
"""One-byte records (``1``): the issue's flood, a tenth of its size (its 10 million are in
benches/floods.py)."""


@pytest.fixture(scope="module")
def flood(tmp_path_factory) -> Path:
    """A canonical run: the sample's header, then a million records of ``1`` (2 MB)."""
    path = tmp_path_factory.mktemp("flood") / "flood.jsonl"
    header = (SAMPLES / "observed-m1.jsonl").read_text().splitlines()[0]
    path.write_bytes(header.encode() + b"\n" + b"1\n" * FLOOD)
    return path


def _digest(lines: int, bad: list[int], ids: tuple[tuple[str, int], ...] = ()) -> BlockDigest:
    """A block of ``lines`` lines whose records at ``bad`` (block lines) were rejected and whose
    ``ids`` (id, block line) were scored (score fields left empty: settle only carries them)."""
    return BlockDigest(
        lines=lines, seen=len(bad) + len(ids),
        rejected=[Rejection(source="r", line=n, record_id=None, message="bad") for n in bad][:REJECTIONS_LISTED],
        ids=[i for i, _ in ids], rel_lines=[n for _, n in ids], calls=[0] * len(ids),
        fields=[[None] * len(ids) for _ in range(len(SCORE_FIELDS))])


def test_settle_keeps_the_first_rejections_in_line_order_and_counts_them_all():
    """Three blocks each past the cap, a converter's rejections before them and a duplicate id
    in the last block: the run lists the first REJECTIONS_LISTED in line order and counts all."""
    n = REJECTIONS_LISTED + 500
    header = RunHeader(run_id="r", model="m", capture_limit_bytes=1, taxonomy=(), source="r")
    prior = [Rejection(source="r", line=1, record_id=None, message="converter")]
    blocks = [_digest(n, list(range(1, n + 1))) for _ in range(2)] \
        + [_digest(n + 2, list(range(1, n + 1)), (("x", n + 1), ("x", n + 2)))]
    s = settle(header, blocks, file_sha256="0" * 64, first_line=1, prior_rejections=prior)
    assert s.rejected_count == 1 + 3 * n + 2 == s.records_seen - s.trajectories
    assert len(s.rejected) == REJECTIONS_LISTED
    assert [r.line for r in s.rejected] == [1, *range(2, REJECTIONS_LISTED + 1)]  # the first, in order


def test_score_of_a_flood_counts_it_and_lists_its_first_records(flood):
    ev = evaluate(flood, with_trajectories=False)
    assert ev.run.rejected_count == FLOOD and len(ev.run.rejected) == REJECTIONS_LISTED
    assert ev.summary.rejected == FLOOD
    d = ev.as_dict()
    assert d["rejected"] == FLOOD and len(d["rejected_records"]) == REJECTIONS_LISTED
    assert d["rejected_records_unlisted"] == FLOOD - REJECTIONS_LISTED
    assert d["rejected_records"][0]["line"] == 2 and d["rejected_records"][-1]["line"] == REJECTIONS_LISTED + 1
    res = CliRunner().invoke(main, ["score", str(flood), "--json"])
    assert res.exit_code == 2
    assert len(res.stdout) < 500_000  # the JSON: 1.3 GB for ten million before the cap
    err = res.stderr.splitlines()
    assert sum(line.startswith("rejected ") for line in err) == REJECTIONS_LISTED
    assert f"… and {FLOOD - REJECTIONS_LISTED:,} more rejected records" in res.stderr
    assert f"every one of its {FLOOD:,} records was rejected" in res.stderr


def test_import_of_a_flood_stores_a_count_and_no_value_that_grows_with_it(flood, tmp_path):
    db = tmp_path / "w.db"
    res = CliRunner().invoke(main, ["import", str(flood), "--db", str(db)])
    assert res.exit_code == 2, res.output  # every record rejected
    assert f"(0 trajectories, {FLOOD:,} rejected)" in res.stdout
    assert sum(line.startswith("rejected ") for line in res.stderr.splitlines()) == REJECTIONS_LISTED
    assert f"… and {FLOOD - REJECTIONS_LISTED:,} more rejected records" in res.stderr
    with sqlite3.connect(db) as con:
        row = con.execute("select * from runs").fetchone()
        names = [c[0] for c in con.execute("select * from runs").description]
        largest = max(len(v) if isinstance(v, str | bytes) else 0 for v in row)
    assert largest < 300_000, largest  # rejected_json held every record (130 MB a million)
    stored = StoredRun.from_row(dict(zip(names, row, strict=True)))
    assert stored.rejected_count == FLOOD and len(stored.rejected) == REJECTIONS_LISTED
    ev = evaluation(Workspace(db), stored.run_key)
    assert ev.as_dict()["rejected"] == FLOOD and ev.summary.rejected == FLOOD
    assert len(ev.as_dict()["rejected_records"]) == REJECTIONS_LISTED


def test_the_runs_page_lists_the_first_rejections_and_says_how_many_more(app, tmp_path):
    """An import of 1,500 bad records and one good: the count, the first records, then the rest."""
    lines = (SAMPLES / "observed-m1.jsonl").read_text().splitlines()
    bad = REJECTIONS_LISTED + 500
    path = tmp_path / "flooded.jsonl"
    path.write_text("\n".join([lines[0], *["1"] * bad, lines[1]]) + "\n")
    app.switch_page("pages/runs.py").run()
    app.text_input(key="import_path").input(str(path)).run()
    app.button[[b.label for b in app.button].index("Import path")].click().run()
    assert not app.exception, app.exception
    assert any(f"{bad:,} records were rejected" in w.value for w in app.warning)
    assert len(app.dataframe[0].value) == REJECTIONS_LISTED
    assert any(f"… and {bad - REJECTIONS_LISTED:,} more rejected records" in c.value for c in app.caption)


def test_a_run_lists_every_rejection_an_importer_gives_it():
    """A parsed run's count is never below what it lists (an importer's run lists them all)."""
    header = RunHeader(run_id="r", model="m", capture_limit_bytes=1, taxonomy=(), source="r")
    rejected = tuple(Rejection(source="r", line=n, record_id=None, message="bad") for n in range(3))
    assert Run(header=header, trajectories=(), rejected=rejected).rejected_count == 3
    assert Run(header=header, trajectories=(), rejected=rejected, rejected_count=9).rejected_count == 9


def test_a_flooded_side_log_is_counted_and_its_first_payloads_listed(tmp_path):
    """A side log of the sample's payloads and 1,500 lines of ``1``: the report lists the first
    REJECTIONS_LISTED payloads not used and counts them all, in JSON, on stderr and stored."""
    run, side = tmp_path / "observed-m1.jsonl", tmp_path / "observed-m1.payloads.jsonl"
    run.write_bytes((SAMPLES / "observed-m1.jsonl").read_bytes())
    bad = REJECTIONS_LISTED + 500
    side.write_bytes((SAMPLES / "observed-m1.payloads.jsonl").read_bytes() + b"1\n" * bad)
    res = CliRunner().invoke(main, ["score", str(run), "--json"])
    recap = json.loads(res.stdout)["recapture"]
    assert recap["rejected_count"] >= bad and len(recap["rejected"]) == REJECTIONS_LISTED
    assert sum(line.startswith("payload not used ") for line in res.stderr.splitlines()) == REJECTIONS_LISTED
    assert f"… and {recap['rejected_count'] - REJECTIONS_LISTED:,} more payloads not used" in res.stderr
    db = tmp_path / "w.db"
    assert CliRunner().invoke(main, ["import", str(run), "--db", str(db)]).exit_code == 0
    ws = Workspace(db)
    stored = ws.stored_run(ws.find_run("observed-m1")["run_key"])
    assert stored.recapture.rejected_count == recap["rejected_count"]
    assert len(stored.recapture.rejected) == REJECTIONS_LISTED
