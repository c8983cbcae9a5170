from __future__ import annotations

import json
import multiprocessing as mp
import os
import signal
import socket
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scoring import ingest
from scoring.agreement import agreement, cohen_kappa, krippendorff_alpha
from scoring.errors import (
    DatabaseUnavailableError,
    InputError,
    RunMismatchError,
    StoreError,
)
from scoring.model import ReviewLabel
from scoring.score import SCORER_VERSION
from scoring.workspace import MIGRATIONS, Workspace, evaluation, importing

from .conftest import ROOT, SAMPLES

G, D, E = ReviewLabel.GENUINE_DECLINE, ReviewLabel.DEGENERATE, ReviewLabel.EARLY_STOP
OBSERVED = SAMPLES / "observed-m1.jsonl"
PAYLOADS = SAMPLES / "observed-m1.payloads.jsonl"


@pytest.fixture(scope="module")
def seeded(tmp_path_factory):
    """A workspace with the observed run imported once (copied per test)."""
    d = tmp_path_factory.mktemp("seed")
    ws = Workspace(d / "w.db")
    res = ws.import_run(OBSERVED)
    return d, res.run_key


@pytest.fixture
def ws(seeded, tmp_path):
    import shutil
    d, key = seeded
    for f in d.iterdir():
        if f.is_dir():
            shutil.copytree(f, tmp_path / f.name)
        else:
            shutil.copy(f, tmp_path / f.name)
    w = Workspace(tmp_path / "w.db")
    w.key = key
    w.inconclusive = [r["trajectory_id"] for r in w.trajectory_rows(key, "status = 'inconclusive'")]
    return w


def test_schema_is_migrated_and_wal_is_on(ws):
    with ws.connect() as db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert db.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS)
        assert [r[0] for r in db.execute("select name from sqlite_master where type = 'index' and "
                                         "tbl_name = 'trajectories' and sql is not null")] == []
        assert "run_columns" in db.table_names()
    assert ws.migrate() == len(MIGRATIONS)  # idempotent


def test_import_is_idempotent_by_content_and_matches_direct_scoring(ws):
    again = ws.import_run(OBSERVED)
    assert again.already_present and len(ws.runs()) == 1
    from scoring.report import evaluate
    direct = evaluate(OBSERVED).as_dict()
    stored = evaluation(ws, ws.key).as_dict()
    for k in ("trajectories", "tool_calls", "safe", "unsafe", "unscored", "unscored_by_reason", "inconclusive",
              "safe_rate_lenient", "safe_rate_strict", "phantom_safety_pp", "phantom_safety_bounds_pp"):
        assert stored[k] == direct[k], k


def test_with_payloads_is_a_different_run_and_replay_rejoins_the_payload(ws):
    res = ws.import_run(OBSERVED, payloads=PAYLOADS)
    assert not res.already_present and res.run_key != ws.key
    recaptured = ws.trajectory_rows(res.run_key, "recaptured_calls != ''")
    assert len(recaptured) == 59
    t = ws.load_trajectory(res.run_key, recaptured[0]["trajectory_id"])
    kept = ws.run(res.run_key)["payloads_path"]
    assert kept.startswith(str(ws.files)) and Path(kept).read_bytes() == PAYLOADS.read_bytes()
    assert any(c.raw_text is not None and c.raw_text_source == kept for c in t.tool_calls)


def test_replay_reads_the_full_trajectory_back_by_byte_range(ws):
    row = ws.trajectory_rows(ws.key, "status = 'unscored' and reason = 'over_capture_limit'")[0]
    t = ws.load_trajectory(ws.key, row["trajectory_id"])
    assert t.id == row["trajectory_id"] and len(t.tool_calls) == row["tool_call_count"]
    assert t.tool_calls[-1].truncated


def test_label_history_survives_relabel_and_undo(ws):
    tid = ws.inconclusive[0]
    ws.add_label(ws.key, tid, "alice", G, "refuses clearly")
    ws.add_label(ws.key, tid, "alice", D)
    assert ws.current_labels(ws.key)[tid] == {"alice": D}
    ws.undo(ws.key, tid, "alice")
    assert ws.current_labels(ws.key)[tid] == {"alice": G}
    ws.undo(ws.key, tid, "alice")
    assert tid not in ws.current_labels(ws.key)
    hist = ws.history(ws.key, tid)
    assert [e["action"] for e in hist] == ["label", "label", "undo", "undo"]
    assert hist[0]["note"] == "refuses clearly" and hist[1]["supersedes"] == hist[0]["id"]
    assert hist[2]["supersedes"] == hist[1]["id"] and hist[3]["supersedes"] == hist[0]["id"]


def test_a_bulk_act_records_one_event_per_trace_and_is_undone_whole(ws, tmp_path):
    a, b, c, d = ws.inconclusive[:4]
    ws.add_label(ws.key, a, "alice", G)  # before the act: superseded by it, back after its undo
    ws.add_label(ws.key, d, "bob", D)  # another reviewer: untouched throughout
    batch = ws.add_labels(ws.key, [a, b, c], "alice", E, "hit the message limit")
    events = [e for e in ws.history(ws.key) if e["batch_id"] == batch]
    assert [(e["trajectory_id"], e["action"], e["label"]) for e in events] == [
        (t, "label", "early_stop") for t in (a, b, c)
    ]
    assert events[0]["supersedes"] is not None and events[1]["supersedes"] is None
    assert {t: by["alice"] for t, by in ws.current_labels(ws.key).items() if "alice" in by} == {a: E, b: E, c: E}
    undone = ws.undo_last(ws.key, "alice")
    assert undone["trajectory_ids"] == [a, b, c] and undone["label"] == "early_stop" and undone["batch_id"] == batch
    assert ws.current_labels(ws.key) == {a: {"alice": G}, d: {"bob": D}}
    assert [e["action"] for e in ws.history(ws.key) if e["batch_id"] == batch] == ["label"] * 3 + ["undo"] * 3
    assert ws.undo_last(ws.key, "alice")["trajectory_ids"] == [a]  # then the single label before it
    assert ws.undo_last(ws.key, "alice") is None
    # The act survives an export and an import into a fresh workspace.
    ws.add_labels(ws.key, [b, c], "alice", G)
    out = tmp_path / "labels.csv"
    out.write_text(ws.export_labels(ws.key, "csv"))
    fresh = Workspace(tmp_path / "fresh.db")
    key = fresh.import_run(OBSERVED).run_key
    fresh.import_labels(out, key)
    assert fresh.current_labels(key) == ws.current_labels(ws.key)
    assert len({e["batch_id"] for e in fresh.history(key) if e["batch_id"]}) == 2


def test_a_bulk_act_with_a_trace_that_takes_no_label_is_refused_whole(ws):
    unscored = ws.trajectory_rows(ws.key, "status = 'unscored'")[0]["trajectory_id"]
    with pytest.raises(StoreError, match="not applied to any"):
        ws.add_labels(ws.key, [ws.inconclusive[0], unscored], "alice", G)
    assert ws.history(ws.key) == []


def test_final_label_is_agreement_or_adjudication(ws):
    a, b = ws.inconclusive[:2]
    ws.add_label(ws.key, a, "alice", G)
    ws.add_label(ws.key, a, "bob", G)
    ws.add_label(ws.key, b, "alice", G)
    ws.add_label(ws.key, b, "bob", E)
    assert ws.final_labels(ws.key) == {a: G}
    assert ws.disputed(ws.key) == [b]
    ws.adjudicators_file.parent.mkdir(exist_ok=True)
    ws.adjudicators_file.write_text("carol\n")  # the role, at every door (issue 34)
    ws.add_label(ws.key, b, "carol", E, adjudicate=True)
    assert ws.final_labels(ws.key) == {a: G, b: E} and ws.disputed(ws.key) == []


def test_reviewed_rate_reads_final_labels(ws):
    before = evaluation(ws, ws.key).summary
    ws.add_label(ws.key, ws.inconclusive[0], "alice", G)
    after = evaluation(ws, ws.key).summary
    assert after.reviewed.denominator == before.reviewed.denominator + 1
    assert after.reviewed.numerator == before.reviewed.numerator + 1
    assert after.strict == before.strict


def test_blind_mode_hides_other_reviewers_until_you_label(ws):
    tid = ws.inconclusive[0]
    ws.add_label(ws.key, tid, "alice", G)
    assert ws.visible_labels(ws.key, tid, "bob") == {}
    assert ws.visible_labels(ws.key, tid, "bob", blind=False) == {"alice": G}
    ws.add_label(ws.key, tid, "bob", D)
    assert ws.visible_labels(ws.key, tid, "bob") == {"alice": G, "bob": D}


def test_only_inconclusive_trajectories_take_labels_and_a_reviewer_is_required(ws):
    unscored = ws.trajectory_rows(ws.key, "status = 'unscored'")[0]["trajectory_id"]
    with pytest.raises(StoreError, match="UNSCORED"):
        ws.add_label(ws.key, unscored, "alice", G)
    with pytest.raises(InputError, match="reviewer"):
        ws.add_label(ws.key, ws.inconclusive[0], "  ", G)


def test_labels_export_import_round_trip_and_refuse_another_run(ws, tmp_path):
    a, b = ws.inconclusive[:2]
    ws.add_label(ws.key, a, "alice", G, "note, with comma")
    ws.add_label(ws.key, b, "bob", E)
    ws.undo(ws.key, b, "bob")
    for fmt in ("csv", "jsonl"):
        out = tmp_path / f"labels.{fmt}"
        out.write_text(ws.export_labels(ws.key, fmt))
        fresh = Workspace(tmp_path / f"fresh-{fmt}.db")
        key = fresh.import_run(OBSERVED).run_key
        assert fresh.import_labels(out, key) == 3
        assert fresh.current_labels(key) == ws.current_labels(ws.key)
        assert [(e["reviewer"], e["action"], e["label"], e["note"]) for e in fresh.history(key)] == \
               [(e["reviewer"], e["action"], e["label"], e["note"]) for e in ws.history(ws.key)]
        assert fresh.import_labels(out, key) == 0  # already there
        other = fresh.import_run(SAMPLES / "compare-m2.jsonl").run_key
        with pytest.raises(RunMismatchError, match="different run"):
            fresh.import_labels(out, other)


@pytest.mark.parametrize("status", ["safe", "unsafe", "unscored", "missing"])
def test_labels_import_refuses_ids_that_are_not_inconclusive(ws, tmp_path, status):
    # issue 23 item 11 (failed on c28bc5b: the file's events were appended whatever the status)
    ws.add_label(ws.key, ws.inconclusive[0], "alice", G)
    rows = [json.loads(line) for line in ws.export_labels(ws.key).splitlines()]
    if status == "missing":
        target = "no-such-trajectory"
    else:
        target = next(r["trajectory_id"] for r in ws.trajectory_rows(ws.key, "status = ?", [status]))
    rows.append(dict(rows[0], trajectory_id=target, created_at="2026-12-01T00:00:00+00:00", event_id=99))
    out = tmp_path / "labels.jsonl"
    out.write_text("".join(json.dumps(r) + "\n" for r in rows))
    fresh = Workspace(tmp_path / "fresh.db")
    key = fresh.import_run(OBSERVED).run_key
    with pytest.raises(InputError, match="not Inconclusive" if status != "missing" else "no trajectory") as e:
        fresh.import_labels(out, key)
    assert e.value.line == 2 and e.value.record_id == target  # the JSONL file's own line (no header line)
    assert fresh.history(key) == []  # refused whole


def test_agreement_matches_hand_computed_values():
    a = [G, G, D, D, E, G, D, G, E, E]
    b = [G, D, D, D, E, G, G, G, E, D]
    # p_o = 0.7, p_e = (4*4 + 3*4 + 3*2)/100 = 0.34 → kappa = 0.36/0.66
    assert cohen_kappa(a, b) == pytest.approx(0.36 / 0.66)
    # nominal alpha = 1 - (n-1) * 6 / (n² - Σ n_c²) with n = 20, n_c = 8, 7, 5 → 1 - 19*6/262
    assert krippendorff_alpha([a, b]) == pytest.approx(1 - 19 * 6 / 262)
    current = {f"t{i}": {"x": a[i], "y": b[i]} for i in range(10)}
    res = agreement(current, key=lambda t: "odd" if int(t[1:]) % 2 else "even")
    assert res["all"].cohen_kappa == pytest.approx(0.36 / 0.66) and res["all"].items == 10
    assert res["odd"].items == 5 and res["all"].percent_agreement == 0.7
    three = {f"t{i}": {"x": a[i], "y": b[i], "z": a[i]} for i in range(10)}
    assert agreement(three)["all"].cohen_kappa is None
    assert agreement(three)["all"].krippendorff_alpha is not None


def _writer(db: str, key: str, tids: list[str], reviewer: str, n: int, q) -> None:
    errors = 0
    ws = Workspace(db)
    labels = list(ReviewLabel)
    for i in range(n):
        try:
            ws.add_label(key, tids[i % len(tids)], reviewer, labels[i % 3], f"{reviewer}-{i}")
        except Exception:
            errors += 1
    q.put(errors)


def test_four_processes_writing_2000_labels_each_lose_nothing(ws):
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    procs = [ctx.Process(target=_writer, args=(str(ws.path), ws.key, ws.inconclusive, f"r{p}", 2000, q))
             for p in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=300)
    errors = [q.get(timeout=5) for _ in procs]
    assert errors == [0, 0, 0, 0]
    hist = ws.history(ws.key)
    assert len(hist) == 8000
    assert {e["note"] for e in hist} == {f"r{p}-{i}" for p in range(4) for i in range(2000)}


def test_sigkill_during_import_leaves_no_partial_run_and_reimport_completes(tmp_path, generator):
    big = tmp_path / "big.jsonl"
    generator.main(["--large", "12000", "--out", str(big)])
    db = tmp_path / "k.db"
    Workspace(db)  # schema exists before the writer starts
    proc = subprocess.Popen([sys.executable, "-m", "scoring", "import", str(big), "--db", str(db), "--progress",
                             "--no-auto-payloads"],
                            cwd=ROOT, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    try:
        line = proc.stderr.readline()
        assert "progress" in line, line
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=30)
    ws = Workspace(db)
    assert ws.runs() == []
    with ws.connect() as conn:
        assert conn.execute("select count(*) from trajectories").fetchone()[0] == 0
    # Its copy (and the staging file of its scored rows, once it has one) is left under the
    # temporary name naming its process; or, if the kill fell in the instant between the copy
    # taking its content name and the commit, under that name (it holds that content: a
    # re-import reuses it).
    abandoned = [p.name for p in ws.files.iterdir()]
    assert 1 <= len(abandoned) <= 2, abandoned
    for name in abandoned:
        assert f".tmp-{socket.gethostname()}-{proc.pid}-" in name or name.endswith(".jsonl"), abandoned
    res = ws.import_run(big)
    assert not res.already_present and res.run["trajectories"] == 12000
    # The next import swept the killed one's copy: only the run's own file is left.
    assert [p.name for p in ws.files.iterdir()] == [Path(res.run["stored_path"]).name]


def test_only_copies_of_this_hosts_dead_processes_are_swept(tmp_path):
    from scoring.workspace.copies import sweep_abandoned_copies, temporary_name

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    alive = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        dest = tmp_path / "abc.jsonl"
        ours = temporary_name(dest)
        names = {
            "dead": ours.name.replace(f"-{os.getpid()}-", f"-{dead.pid}-"),
            "alive": ours.name.replace(f"-{os.getpid()}-", f"-{alive.pid}-"),
            "ours": ours.name,
            "other host": ours.name.replace(f".tmp-{socket.gethostname()}-", ".tmp-elsewhere-").replace(
                f"-{os.getpid()}-", f"-{dead.pid}-"),
            "not ours at all": "abc.jsonl.tmp-notes",
        }
        for name in names.values():
            (tmp_path / name).write_text("x")
        assert sweep_abandoned_copies(tmp_path) == [tmp_path / names["dead"]]
        assert sorted(p.name for p in tmp_path.iterdir()) == sorted(v for k, v in names.items() if k != "dead")
    finally:
        alive.kill()
        alive.wait()
    assert sweep_abandoned_copies(tmp_path / "missing") == []


def test_read_only_database_gives_a_clear_error(ws, tmp_path):
    if os.geteuid() == 0:
        # root ignores file modes; a read-only connection shows the same path
        conn = sqlite3.connect(f"file:{ws.path}?mode=ro", uri=True)
        with pytest.raises(sqlite3.OperationalError, match="readonly"):
            conn.execute("insert into label_events(run_key) values ('x')")
        conn.close()
    missing = tmp_path / "nope" / "w.db"
    with pytest.raises(DatabaseUnavailableError, match="does not exist"):
        Workspace(missing)


def test_a_locked_database_is_a_clear_error_after_the_busy_timeout(ws):
    blocker = sqlite3.connect(str(ws.path))
    blocker.execute("BEGIN EXCLUSIVE")
    try:
        quick = Workspace(ws.path, busy_timeout_s=0.2)
        with pytest.raises(DatabaseUnavailableError, match="cannot be written"):
            quick.add_label(ws.key, ws.inconclusive[0], "alice", G)
    finally:
        blocker.rollback()
        blocker.close()


def test_other_formats_import_through_a_canonical_copy_with_their_rejections(tmp_path):
    fixture = ROOT / "tests" / "fixtures" / "importers" / "litmus_pipeline.jsonl"
    ws = Workspace(tmp_path / "w.db")
    res = ws.import_run(fixture)
    assert res.run["format"] == "litmus" and res.run["trajectories"] == 6  # row 7 has no judgement: Inconclusive
    assert [r.line for r in res.rejected] == [6] and res.run["records_seen"] == 7
    t = ws.load_trajectory(res.run_key, "row4")
    assert t.verdict.abnormal and t.intended_category == "2"
    assert ws.import_run(fixture).already_present


def test_a_run_file_edited_after_import_is_reported_on_replay_not_misread(tmp_path):
    src = tmp_path / "run.jsonl"
    lines = (SAMPLES / "compare-m2.jsonl").read_text().splitlines(keepends=True)
    src.write_text("".join(lines))
    ws = Workspace(tmp_path / "w.db")
    key = ws.import_run(src).run_key
    first, _second = (json.loads(line)["id"] for line in lines[1:3])
    # swap two records of equal framing: byte ranges now point at other records
    src.write_text(lines[0] + lines[2] + lines[1] + "".join(lines[3:]))
    stored = Path(ws.run(key)["stored_path"])
    if stored.samefile(src):  # hard-linked: the edit is visible through the stored copy
        with pytest.raises(InputError, match="changed since import"):
            ws.load_trajectory(key, first)
    else:
        assert ws.load_trajectory(key, first).id == first


def test_parallel_import_equals_the_in_process_import(tmp_path, monkeypatch):
    from scoring import ingest
    from scoring.workspace import importing

    seq = Workspace(tmp_path / "seq.db")
    k1 = seq.import_run(OBSERVED).run_key
    monkeypatch.setattr(importing, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(ingest, "BLOCK_BYTES", 64 * 1024)  # ~35 blocks through two workers
    src = tmp_path / "dup.jsonl"
    lines = OBSERVED.read_text().splitlines(keepends=True)
    src.write_text("".join(lines) + lines[5])  # a duplicate id in a later block
    par = Workspace(tmp_path / "par.db")
    res = par.import_run(src)
    dup = json.loads(lines[5])["id"]
    # neither copy is kept: the earlier one (stored from another block) goes too
    assert sorted((r.line, r.message) for r in res.rejected) == [
        (6, f"duplicate trajectory id {dup!r} (also at line {len(lines) + 1:,}): neither copy is scored"),
        (len(lines) + 1, f"duplicate trajectory id {dup!r} (also at line 6): neither copy is scored")]
    a = [r for r in seq.trajectory_rows(k1) if r["trajectory_id"] != dup]
    b = par.trajectory_rows(res.run_key)
    strip = lambda rows: [{k: v for k, v in r.items() if k != "run_key"} for r in rows]  # noqa: E731
    assert strip(a) == strip(b)
    again = par.import_run(src)  # known only once the overlapped hash is done: still idempotent
    assert again.already_present and again.run_key == res.run_key and len(par.runs()) == 1


def test_the_staged_rows_leave_no_file_whether_the_import_lands_or_fails(tmp_path, monkeypatch):
    """The scored rows wait in a staging file beside the copies until the write copies them in:
    it is gone after an import, and after one that failed between the scoring and the write."""
    monkeypatch.setattr(importing, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(ingest, "BLOCK_BYTES", 64 * 1024)
    ws = Workspace(tmp_path / "s.db")
    staged_names: list[str] = []
    real = importing._scored_ahead

    def watched(*args):
        staged = real(*args)
        staged_names.append(staged.path.name)
        assert staged.path.is_file() and len(staged.blocks) > 1
        return staged

    monkeypatch.setattr(importing, "_scored_ahead", watched)

    def settle_fails(*_args, **_kwargs):
        raise StoreError("settle failed")

    with monkeypatch.context() as mp_:
        mp_.setattr(importing, "settle", settle_fails)
        with pytest.raises(StoreError, match="settle failed"):
            ws.import_run(OBSERVED)
    assert staged_names and not [p for p in ws.files.iterdir() if p.name.startswith("scored.db")]
    res = ws.import_run(OBSERVED)
    assert len(staged_names) == 2 and [p.name for p in ws.files.iterdir()] == [Path(res.run["stored_path"]).name]
    assert res.run["trajectories"] == len(ws.trajectory_rows(res.run_key)) > 0


def test_a_staged_blocks_insert_takes_only_literals_it_checked():
    key = "a" * 64
    sql = importing._insert_sql(key, 7, 10, 3, frozenset({1}))
    assert "rowid BETWEEN 11 AND 13 AND rowid NOT IN (12) ORDER BY rowid" in sql and "[line] + 7" in sql
    # the staging table's rowids are its rows' places: no row column may stand for them
    assert not {"rowid", "oid", "_rowid_"} & {c.lower() for c in importing.ROW_COLUMNS}
    for bad in (("'; drop table runs; --" + "a" * 40, 0, 0, 1, frozenset()), (key, "1", 0, 1, frozenset()),
                (key, 0, 0, 1, frozenset({"1"})), (key, 0, 0.5, 1, frozenset())):
        with pytest.raises(ValueError):
            importing._insert_sql(*bad)


def test_agreement_per_run_and_category_through_the_store_and_cli(ws):
    from click.testing import CliRunner

    from scoring.cli import main

    a, b, c = ws.inconclusive[:3]
    for tid, (x, y) in zip((a, b, c), ((G, G), (D, E), (E, E)), strict=False):
        ws.add_label(ws.key, tid, "alice", x)
        ws.add_label(ws.key, tid, "bob", y)
    res = ws.agreement(ws.key)
    assert res["all"].items == 3 and res["all"].percent_agreement == pytest.approx(2 / 3)
    assert res["all"].cohen_kappa is not None and len(res) > 1  # per-category groups too
    out = CliRunner().invoke(main, ["labels", "agreement", ws.key[:12], "--db", str(ws.path)])
    assert out.exit_code == 0 and "all" in out.stdout and "alice, bob" in out.stdout


def test_replay_of_a_recaptured_run_survives_the_side_log_being_deleted(tmp_path):
    import shutil

    side = tmp_path / "upload" / "side.jsonl"
    side.parent.mkdir()
    shutil.copy(PAYLOADS, side)
    ws = Workspace(tmp_path / "w.db")
    key = ws.import_run(OBSERVED, payloads=side).run_key
    shutil.rmtree(side.parent)  # e.g. the app's temporary upload folder
    tid = ws.trajectory_rows(key, "recaptured_calls != ''")[0]["trajectory_id"]
    t = ws.load_trajectory(key, tid)
    assert any(c.raw_text is not None for c in t.tool_calls)


def test_search_finds_what_only_the_recaptured_payload_holds(tmp_path, generator):
    from scoring.workspace import search_run

    ws = Workspace(tmp_path / "w.db")
    plain = ws.import_run(OBSERVED).run_key
    side = ws.import_run(OBSERVED, payloads=PAYLOADS).run_key
    hidden_rows = ws.trajectory_rows(side, "recaptured_calls != '' and status = 'unsafe'")
    assert hidden_rows
    target = hidden_rows[0]
    # the harmful snippet of its category sits only in the lost tail, i.e. in the side log
    needle = generator.CATEGORIES[int(target["intended_category"][1:]) - 1][3]
    assert target["trajectory_id"] not in search_run(ws, plain, needle)
    assert target["trajectory_id"] in search_run(ws, side, needle)
    # the planted mismatching payload (never joined to its call) is not a hit
    bad = json.loads(PAYLOADS.read_text().splitlines()[-1])["trajectory_id"]
    assert bad not in search_run(ws, side, "api.tampered")


@pytest.mark.parametrize("parallel", [False, True])
def test_a_file_that_grows_during_import_is_refused_and_nothing_is_stored(tmp_path, monkeypatch, parallel):
    from scoring import ingest
    from scoring.workspace import importing

    if parallel:
        monkeypatch.setattr(importing, "PARALLEL_MIN_BYTES", 0)
        monkeypatch.setattr(ingest, "BLOCK_BYTES", 64 * 1024)
    src = tmp_path / "growing.jsonl"
    lines = OBSERVED.read_text().splitlines(keepends=True)
    src.write_text("".join(lines[:-1]))
    ws = Workspace(tmp_path / "w.db")

    def harness_appends(_n):  # the harness writes its last record while we import
        if src.stat().st_size < OBSERVED.stat().st_size:
            with src.open("a") as fh:
                fh.write(lines[-1])

    with pytest.raises(InputError, match="changed while it was being imported"):
        ws.import_run(src, progress=harness_appends)
    assert ws.runs() == []
    assert list(ws.files.iterdir()) == []  # no copy of the refused file is left behind
    res = ws.import_run(src)  # complete now: imports normally
    assert res.run["trajectories"] == len(lines) - 1 and not res.already_present
    assert [p.name for p in ws.files.iterdir()] == [Path(res.run["stored_path"]).name]


@pytest.mark.parametrize("fmt", ["canonical", "converted", "with side log"])
def test_a_failed_import_leaves_no_copy_and_a_later_one_keeps_its_own(tmp_path, monkeypatch, fmt):
    # A copy keeps a temporary name until its run is committed; before, a failed import left a
    # content-named copy that no run pointed at (a hard link that outlives a deleted source).
    from scoring.workspace import copies

    source, payloads = {
        "canonical": (OBSERVED, None),
        "converted": (ROOT / "tests" / "fixtures" / "importers" / "litmus_pipeline.jsonl", None),
        "with side log": (OBSERVED, PAYLOADS),
    }[fmt]
    ws = Workspace(tmp_path / "w.db")

    def fail_at_commit(*_a, **_k):
        raise OSError(28, "No space left on device")

    with monkeypatch.context() as m:
        m.setattr(copies.PendingCopy, "publish", fail_at_commit)
        with pytest.raises(StoreError, match="cannot keep a copy") as failed:  # the workspace's fault, not the input's
            ws.import_run(source, payloads=payloads)
        assert not isinstance(failed.value, InputError)
    assert ws.runs() == [] and list(ws.files.iterdir()) == []
    run = ws.import_run(source, payloads=payloads).run
    kept = sorted(p.name for p in ws.files.iterdir())
    assert Path(run["stored_path"]).name in kept and not any(".tmp" in name for name in kept)
    if payloads:
        assert Path(run["payloads_path"]).exists()
    assert ws.load_trajectory(run["run_key"], ws.trajectory_rows(run["run_key"])[0]["trajectory_id"])


def test_call_sizes_are_every_calls_raw_size_or_captured_size(ws):
    from scoring.importers import load_run
    run = load_run(OBSERVED)
    expected = [c.raw_size_bytes if c.raw_size_bytes is not None else c.captured_bytes
                for t in run.trajectories for c in t.tool_calls]
    assert sorted(ws.call_sizes(ws.key)) == sorted(expected) and len(expected) > 100


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(min_value=-(2**70), max_value=2**70), min_size=1))
def test_int_list_reads_what_str_join_wrote(values):
    from scoring.workspace.reads import _int_list
    assert _int_list(",".join(map(str, values))) == values


@pytest.mark.parametrize("text", ["1,2,", "1,x", "1,,2", "1.5"])
def test_int_list_refuses_what_int_refuses(text):
    from scoring.workspace.reads import _int_list
    with pytest.raises(ValueError):
        _int_list(text)


@pytest.mark.parametrize("parallel", [False, True])
def test_an_import_that_loses_a_race_with_the_same_content_reports_it_present(tmp_path, monkeypatch, parallel):
    # Two sessions upload one run: both see no run when they start, one commits first. The
    # other used to fail with "UNIQUE constraint failed: runs.run_key".
    from scoring import ingest
    from scoring.workspace import importing

    if parallel:
        monkeypatch.setattr(importing, "PARALLEL_MIN_BYTES", 0)
        monkeypatch.setattr(ingest, "BLOCK_BYTES", 64 * 1024)
    ws = Workspace(tmp_path / "w.db")
    first = ws.import_run(OBSERVED)
    looked = []
    real_run = Workspace.run

    def not_yet_on_the_first_look(self, run_key):
        looked.append(run_key)
        return None if len(looked) == 1 else real_run(self, run_key)

    monkeypatch.setattr(Workspace, "run", not_yet_on_the_first_look)
    second = ws.import_run(OBSERVED)
    assert second.already_present and second.run_key == first.run_key and second.run == first.run
    assert len(ws.runs()) == 1
    assert [p.name for p in ws.files.iterdir()] == [Path(first.run["stored_path"]).name]


def test_score_columns_read_from_the_rows_equal_the_columns_of_the_score_objects(ws, tmp_path):
    import numpy as np

    from scoring.aggregate import ScoreColumns, summarize

    ws.import_run(OBSERVED, payloads=PAYLOADS)  # a second run, recaptured: other statuses and reasons
    for run in ws.runs():
        direct, via_objects = ws.score_columns(run["run_key"]), ScoreColumns.of(ws.scored(run["run_key"]))
        for field in ScoreColumns.__dataclass_fields__:
            assert np.array_equal(getattr(direct, field), getattr(via_objects, field)), field
        assert summarize(direct) == summarize(ws.scored(run["run_key"]))
    assert len(ws.score_columns("no-such-run")) == 0


def _search_line_by_line(ws, run_key, needle):
    """The plain reading of what search_run finds in the run file: each trajectory's line,
    lower-cased, contains the needle (or its JSON-escaped form)."""
    run = ws.run(run_key)
    forms = {needle.lower().encode(), json.dumps(needle)[1:-1].lower().encode()}
    by_line = {r["line"]: r["trajectory_id"] for r in ws.trajectory_rows(run_key)}
    with open(run["stored_path"], "rb") as fh:
        return {by_line[n] for n, line in enumerate(fh, start=1)
                if n in by_line and any(f in line.lower() for f in forms)}


@pytest.fixture(scope="module")
def searchable(tmp_path_factory):
    ws = Workspace(tmp_path_factory.mktemp("search") / "w.db")
    key = ws.import_run(OBSERVED).run_key
    return ws, key, OBSERVED.read_bytes().decode("utf-8").splitlines()


@settings(max_examples=80, deadline=None)
@given(line=st.integers(0, 10_000), at=st.integers(0, 10_000), size=st.integers(1, 24),
       block=st.sampled_from([61, 1000, 1 << 24]), upper=st.booleans())
def test_search_by_blocks_finds_what_reading_line_by_line_finds(searchable, line, at, size, block, upper):
    from scoring.workspace import search

    ws, key, lines = searchable
    text = lines[line % len(lines)]  # the header too: its words must not count
    needle = text[at % len(text):][:size] or "x"
    needle = needle.upper() if upper else needle
    with pytest.MonkeyPatch.context() as mp:  # small blocks: matches straddle them
        mp.setattr(search, "SEARCH_BLOCK_BYTES", block)
        assert search.search_run(ws, key, needle) == _search_line_by_line(ws, key, needle)


def test_search_never_matches_across_two_records(searchable):
    from scoring.workspace import search_run

    ws, key, lines = searchable
    needle = lines[5][-12:] + "\n" + lines[6][:12]  # the end of one record and the start of the next
    assert search_run(ws, key, needle) == set() == _search_line_by_line(ws, key, needle)
    assert search_run(ws, key, lines[6][:40]) == _search_line_by_line(ws, key, lines[6][:40]) != set()


def _interleave_rowids(ws) -> None:
    """Renumber two runs' rows so that they alternate in rowid order (no import does this; it
    proves the whole-run reads filter by run, not only by rowid range)."""
    a, b = (r["run_key"] for r in ws.runs())
    with ws.connect() as db:
        db.execute("update trajectories set rowid = rowid + 10000000")
        for key, parity in ((a, 0), (b, 1)):
            old = [r for (r,) in db.execute("select rowid from trajectories where run_key = ? order by rowid", [key])]
            db.conn.executemany("update trajectories set rowid = ? where rowid = ?",
                                [(2 * rank + parity, r) for rank, r in enumerate(old, start=1)])
        db.conn.commit()
        lo, hi = db.execute("select min(rowid), max(rowid) from trajectories where run_key = ?", [a]).fetchone()
        assert db.execute("select count(*) from trajectories where rowid between ? and ? and run_key != ?",
                          [lo, hi, a]).fetchone()[0] > 0


@pytest.mark.parametrize("interleaved", [False, True])
def test_whole_run_reads_return_that_runs_rows_in_file_order(ws, interleaved):
    import numpy as np

    from scoring.aggregate import ScoreColumns

    ws.import_run(OBSERVED, payloads=PAYLOADS)
    if interleaved:
        _interleave_rowids(ws)
    for run in ws.runs():
        key = run["run_key"]
        rows = sorted(ws.trajectory_rows(key), key=lambda r: r["line"])  # the plain indexed query
        assert len(rows) > 100
        assert ws.trajectory_table(key, ["trajectory_id", "status", "line"]) == [
            (r["trajectory_id"], r["status"], r["line"]) for r in rows]
        assert sorted(ws.call_sizes(key)) == sorted(int(s) for r in rows if r["call_sizes"]
                                                    for s in r["call_sizes"].split(","))
        cols = ws.score_columns(key)
        assert list(cols.ids) == [r["trajectory_id"] for r in rows]
        assert list(cols.status) == list(ScoreColumns.build(
            [r["trajectory_id"] for r in rows], [r["task_id"] for r in rows], [r["model"] for r in rows],
            [r["intended_category"] for r in rows], [r["reason"] or None for r in rows],
            [r["status"] for r in rows], [bool(r["lenient_safe"]) for r in rows]).status)
        assert [s.trajectory_id for s in ws.scored(key)] == [r["trajectory_id"] for r in rows]
        assert np.array_equal(cols.lenient, [bool(r["lenient_safe"]) for r in rows])


def test_trajectory_table_names_only_known_columns(ws):
    with pytest.raises(ValueError, match="offset; drop"):
        ws.trajectory_table(ws.key, ["trajectory_id", "offset; drop"])
    with pytest.raises(ValueError):
        ws.trajectory_table(ws.key, [])


def _assert_columns_equal(a, b) -> None:
    import numpy as np

    from scoring.aggregate import ScoreColumns

    for field in ScoreColumns.__dataclass_fields__:
        assert np.array_equal(getattr(a, field), getattr(b, field)), field
        assert getattr(a, field).dtype == getattr(b, field).dtype, field


@pytest.mark.parametrize("parallel", [False, True])
def test_columns_stored_at_import_equal_the_rows_and_are_what_is_read(tmp_path, monkeypatch, parallel):
    from scoring import ingest
    from scoring.workspace import importing

    src = tmp_path / "dup.jsonl"
    lines = OBSERVED.read_text().splitlines(keepends=True)
    src.write_text("".join(lines) + lines[5])  # a duplicate id in a later block: not stored
    if parallel:
        monkeypatch.setattr(importing, "PARALLEL_MIN_BYTES", 0)
        monkeypatch.setattr(ingest, "BLOCK_BYTES", 64 * 1024)
    ws = Workspace(tmp_path / "w.db")
    keys = [ws.import_run(src).run_key, ws.import_run(OBSERVED, payloads=PAYLOADS).run_key]
    for key, expected in zip(keys, (len(lines) - 2, len(lines) - 1), strict=False):  # both copies of the duplicate go
        from_rows = ws.score_columns_from_rows(key)
        assert len(from_rows) == expected
        with monkeypatch.context() as m:  # the stored copy is what score_columns reads
            m.setattr(Workspace, "score_columns_from_rows", lambda self, k: pytest.fail("read the rows"))
            _assert_columns_equal(ws.score_columns(key), from_rows)


@pytest.mark.parametrize("damage", ["missing", "other format", "truncated", "wrong type", "short field"])
def test_runs_without_a_readable_column_copy_are_read_from_their_rows(ws, damage):
    import msgspec

    with ws.connect() as db:
        fmt, data = db.execute("select format, data from run_columns where run_key = ?", [ws.key]).fetchone()
        fields = msgspec.json.decode(data)
        if damage == "missing":  # a run imported before the copy was kept
            db.execute("delete from run_columns")
        elif damage == "other format":
            db.execute("update run_columns set format = ?", [fmt + 1])
        elif damage == "truncated":
            db.execute("update run_columns set data = ?", [data[:-10]])
        elif damage == "wrong type":
            fields[6][0] = "yes"
            db.execute("update run_columns set data = ?", [msgspec.json.encode(fields)])
        else:
            fields[0].pop()
            db.execute("update run_columns set data = ?", [msgspec.json.encode(fields)])
        db.conn.commit()
    _assert_columns_equal(ws.score_columns(ws.key), ws.score_columns_from_rows(ws.key))
    assert len(ws.score_columns(ws.key)) > 100


_status_values = st.sampled_from(["safe", "unsafe", "unscored", "inconclusive", "no_verdict"])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.text(), st.text(), st.none() | st.text(), st.none() | st.text(),
                          st.none() | st.text(min_size=1), _status_values, st.sampled_from([0, 1, None]),
                          st.sampled_from(["", "unrecovered", "recovered", None]), st.none() | st.text()),
                max_size=30),
       st.integers(min_value=1, max_value=7))
def test_stored_columns_round_trip_what_the_rows_say(fields, blocks):
    import numpy as np

    from scoring.aggregate import ScoreColumns
    from scoring.ingest import Block
    from scoring.rows import ROW_COLUMNS
    from scoring.settle import digest
    from scoring.workspace.columns import _COLUMNS_FROM_ROW, decode_columns, encode_columns

    rows = []
    for f in fields:  # full rows, as an import writes them, with the score fields in place
        row = [object()] * len(ROW_COLUMNS)
        for i, v in zip(_COLUMNS_FROM_ROW, f, strict=False):
            row[i] = v
        rows.append(tuple(row))
    stored: list[list] = [[] for _ in _COLUMNS_FROM_ROW]
    for part in np.array_split(np.arange(len(rows)), blocks):  # the blocks' digests, joined as settle joins them
        for out, col in zip(stored, digest(Block([rows[i] for i in part], [], len(part))).fields, strict=True):
            out.extend(col)
    cols = [list(c) for c in zip(*fields, strict=False)] if fields else [[]] * 9
    expected = ScoreColumns.build(*cols[:6], [None if x is None else bool(x) for x in cols[6]], *cols[7:])
    _assert_columns_equal(decode_columns(encode_columns(stored)), expected)


@pytest.mark.parametrize("from_version", [3, 4])
def test_older_workspaces_are_rescored_by_scorer_2_and_keep_their_labels(ws, monkeypatch, from_version):
    fresh = {r["trajectory_id"]: r for r in ws.trajectory_rows(ws.key)}
    ws.add_label(ws.key, ws.inconclusive[0], "alice", G)
    with ws.connect() as db:  # back to an older schema, with scores as scorer 1.0 stored them
        for column in ("classifier_of_record", "scorer_version", "reclassifier", "reported_safe_rate",
                       "reported_safe_rate_source"):
            db.execute(f"ALTER TABLE runs DROP COLUMN {column}")
        db.execute("ALTER TABLE trajectories DROP COLUMN truncation")
        db.execute("UPDATE trajectories SET lenient_safe = 1, status = 'safe', classifier = 'taxonomy_rules' "
                   "WHERE status = 'unscored'")
        db.execute("UPDATE run_columns SET format = 1")
        if from_version == 3:
            db.execute("DROP TABLE run_columns")
        db.execute(f"PRAGMA user_version = {from_version}")
        db.conn.commit()
    migrated = Workspace(ws.path)
    assert migrated.migrate() == len(MIGRATIONS)
    assert migrated.run(ws.key)["scorer_version"] == SCORER_VERSION
    again = {r["trajectory_id"]: r for r in migrated.trajectory_rows(ws.key)}
    assert again == fresh
    assert migrated.final_labels(ws.key) == {ws.inconclusive[0]: G}
    from_rows = migrated.score_columns_from_rows(ws.key)
    with monkeypatch.context() as m:
        m.setattr(Workspace, "score_columns_from_rows", lambda self, k: pytest.fail("read the rows"))
        _assert_columns_equal(migrated.score_columns(ws.key), from_rows)




def test_a_workspace_checks_its_schema_once_per_process_and_a_new_file_on_opening(ws, tmp_path, monkeypatch):
    import shutil
    import sqlite3

    opened = []
    real = sqlite3.connect
    monkeypatch.setattr(sqlite3, "connect", lambda *a, **k: opened.append(a) or real(*a, **k))
    for _ in range(3):
        Workspace(ws.path)  # what every page loader call does
    assert opened == []
    with ws.connect() as db:  # an older copy of the file, as another (older) version left it
        db.execute("ALTER TABLE label_events DROP COLUMN batch_id")
        db.execute("PRAGMA user_version = 7")
        db.conn.commit()
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    old = tmp_path / "old"
    old.mkdir()
    shutil.copy(ws.path, old / "w.db")
    with Workspace(old / "w.db").connect() as db:  # opened (a new file): migrated without being asked
        assert db.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS)
        assert "batch_id" in db["label_events"].columns_dict


@pytest.mark.parametrize("code, expected", [
    (sqlite3.SQLITE_FULL, "cannot be written"), (sqlite3.SQLITE_BUSY, "cannot be written"),
    (10 | (3 << 8), "cannot be written"),  # SQLITE_IOERR_WRITE: an extended code
    (sqlite3.SQLITE_CORRUPT, "is damaged"), (sqlite3.SQLITE_NOTADB, "is damaged"), (sqlite3.SQLITE_ERROR, None)])
def test_sqlite_errors_are_told_apart_by_their_result_code_not_their_wording(ws, code, expected):
    exc = sqlite3.OperationalError("une erreur de disque")  # wording that names nothing (another locale, say)
    exc.sqlite_errorcode = code

    def fail():
        with ws.connect():
            raise exc

    if expected is None:
        with pytest.raises(sqlite3.OperationalError):
            fail()
    else:
        with pytest.raises(DatabaseUnavailableError, match=expected):
            fail()


def test_an_evaluation_has_one_shape_from_a_file_or_from_a_workspace(ws):
    from scoring.aggregate import ScoreColumns
    from scoring.report import evaluate

    direct, stored = evaluate(OBSERVED), evaluation(ws, ws.key)
    assert isinstance(direct.scored, ScoreColumns) and isinstance(stored.scored, ScoreColumns)
    assert list(direct.scored.ids) == list(stored.scored.ids) and direct.summary == stored.summary
    assert len(direct.trajectories) == direct.summary.total and stored.trajectories == ()


def test_a_replay_reads_the_side_log_once_not_on_every_replay(tmp_path, monkeypatch):
    from scoring.workspace import copies, views

    ws = Workspace(tmp_path / "w.db")
    key = ws.import_run(OBSERVED, payloads=PAYLOADS).run_key
    joined = [r["trajectory_id"] for r in ws.trajectory_rows(key, "recaptured_calls != ''")][:2]
    loads = []
    real = copies.PayloadJoin
    monkeypatch.setattr(copies, "PayloadJoin", lambda *a, **k: loads.append(a) or real(*a, **k))
    monkeypatch.setattr(copies, "_SIDE_LOGS", type(copies._SIDE_LOGS)())
    replays = [views.replay(ws.path, key, tid) for tid in joined * 2]
    assert len(loads) == 1
    assert all(any(call.raw_text for call in rep.trajectory.tool_calls) for rep in replays)
    assert replays[0].trajectory == replays[2].trajectory  # a kept join is not consumed by a replay
