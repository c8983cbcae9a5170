"""Hostile files, names and environments, against the scoring core and the CLI (issue 15).

Each test here failed on the code before the change it holds: a catastrophic taxonomy rule,
rules run under the write lock, evidence that was the user's file, tracebacks where a located
error was promised, unbounded reads of devices and FIFOs, workers outliving a killed import,
formulas in CSV exports and escapes obeyed by terminals.
"""

from __future__ import annotations

import contextlib
import csv
import errno
import hashlib
import io
import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from scoring.errors import DatabaseUnavailableError, InputError, StoreError
from scoring.model import ReviewLabel
from scoring.workspace import Workspace

from .conftest import ROOT, SAMPLES

OBSERVED = SAMPLES / "observed-m1.jsonl"
CLI = [sys.executable, "-m", "scoring"]


def _sha(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


def _header(**kw) -> dict:
    return {"record": "run", "format": "litmus-review-run", "format_version": 1, "run_id": "hostile",
            "model": "m", "capture_limit_bytes": 1 << 20, **kw}


def _trajectory(tid: str, args: str = '{"a": 1}', *, verdict: dict | None = None, **kw) -> dict:
    call = {"tool": "t", "arguments": args, "raw_size_bytes": len(args.encode()), "raw_sha256": _sha(args.encode()),
            "result": {"content": "ok"}}
    call.update(kw.pop("call", {}))
    return {"record": "trajectory", "id": tid, "task_id": "k", "tool_calls": [call], "final_output": "done",
            "verdict": verdict if verdict is not None else {"label": "benign", "confidence": 0.9}, **kw}


def _write(path: Path, header: dict, *records: dict) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in (header, *records)))
    return path


def _run_cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *map(str, args)], cwd=ROOT, capture_output=True, text=True, timeout=timeout)


# --- A: taxonomy rules -------------------------------------------------------------------


def test_a_catastrophic_rule_finishes(tmp_path):
    # (a|aa)+$ against "aaaa…b" takes exponential time in a backtracking engine: the import used
    # to never finish (the timeout below is a guard for the suite, not the assertion).
    src = _write(tmp_path / "redos.jsonl",
                 _header(taxonomy=[{"id": "C01", "name": "redos", "rules": ["(a|aa)+$"]}]),
                 _trajectory("t0", json.dumps({"x": "a" * 5000 + "b"}), verdict={"label": None}),
                 _trajectory("t1", json.dumps({"x": "a" * 64}), verdict={"label": None}))
    try:
        done = _run_cli("import", src, "--db", tmp_path / "w.db", timeout=120)
    except subprocess.TimeoutExpired:
        pytest.fail("the import with a catastrophic rule did not finish")
    assert done.returncode == 0, done.stderr
    ws = Workspace(tmp_path / "w.db")
    (run,) = ws.runs()
    fired = {r["trajectory_id"]: r["fired_category"] for r in ws.trajectory_rows(run["run_key"])}
    assert fired == {"t0": None, "t1": None}  # "…b}" ends neither in a's: no match, but an answer


def test_a_rule_the_linear_engine_cannot_run_is_a_located_error(tmp_path):
    src = _write(tmp_path / "look.jsonl",
                 _header(taxonomy=[{"id": "C01", "name": "ok", "rules": ["rm -rf"]},
                                   {"id": "C02", "name": "lookbehind", "rules": ["x", "(?<=a)b"]}]),
                 _trajectory("t0"))
    with pytest.raises(InputError, match=r"look\.jsonl:1: run header: taxonomy\[1\]\.rules\[1\]: '\(\?<=a\)b'"):
        Workspace(tmp_path / "w.db").import_run(src)
    done = _run_cli("score", src)
    assert done.returncode == 2 and "Traceback" not in done.stderr and "taxonomy[1].rules[1]" in done.stderr


def test_a_rules_never_run_while_the_write_lock_is_held(tmp_path, monkeypatch):
    # A reviewer labels while an import is running its rules: the label is written (it used to
    # fail "database is locked", the rules running inside the import's write transaction).
    from scoring import score

    ws = Workspace(tmp_path / "w.db")
    key = ws.import_run(SAMPLES / "compare-m2.jsonl").run_key
    tid = ws.trajectory_rows(key, "status = 'inconclusive'")[0]["trajectory_id"]
    src = _write(tmp_path / "slow.jsonl", _header(taxonomy=[{"id": "C01", "name": "x", "rules": ["zzz"]}]),
                 _trajectory("t0", verdict={"label": None}))
    scoring_started, labelled = threading.Event(), threading.Event()
    real = score.RuleClassifier.classify

    def slow_rules(self, trajectory, surfaces):
        scoring_started.set()
        labelled.wait(30)
        return real(self, trajectory, surfaces)

    monkeypatch.setattr(score.RuleClassifier, "classify", slow_rules)
    errors: list[BaseException] = []

    def reviewer():
        scoring_started.wait(30)
        try:
            Workspace(ws.path, busy_timeout_s=0.5).add_label(key, tid, "alice", ReviewLabel.DEGENERATE)
        except BaseException as exc:
            errors.append(exc)
        finally:
            labelled.set()

    t = threading.Thread(target=reviewer)
    t.start()
    ws.import_run(src)
    t.join(30)
    assert errors == [] and ws.current_labels(key)[tid] == {"alice": ReviewLabel.DEGENERATE}


# --- B: the workspace owns its evidence --------------------------------------------------


def _edit_same_size(path: Path, old: bytes, new: bytes) -> None:
    assert len(old) == len(new)
    data = path.read_bytes()
    assert old in data
    st = path.stat()
    with open(path, "r+b") as fh:  # in place: the same inode, as an editor writing over it
        fh.seek(data.index(old))
        fh.write(new)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def test_b_editing_or_overwriting_the_source_after_import_changes_nothing_reviewers_see(tmp_path):
    safe = json.dumps({"to": "alice@example.org"})
    src = _write(tmp_path / "run.jsonl", _header(), _trajectory("t0", safe), _trajectory("t1"))
    ws = Workspace(tmp_path / "w.db")
    key = ws.import_run(src).run_key
    _edit_same_size(src, b"alice@example.org", b"eve!!@attack.bad1")
    assert ws.load_trajectory(key, "t0").tool_calls[0].arguments == safe
    src.write_text("overwritten\n")
    src.unlink()
    assert ws.load_trajectory(key, "t0").tool_calls[0].arguments == safe
    assert not Path(ws.run(key)["stored_path"]).samefile(tmp_path / "w.db")  # exists, ours


def test_b_a_copy_changed_in_the_workspace_is_a_clear_error_on_replay(tmp_path):
    src = _write(tmp_path / "run.jsonl", _header(), _trajectory("t0", json.dumps({"to": "alice@example.org"})))
    ws = Workspace(tmp_path / "w.db")
    key = ws.import_run(src).run_key
    stored = Path(ws.run(key)["stored_path"])
    _edit_same_size(stored, b"alice@example.org", b"eve!!@attack.bad1")
    with pytest.raises(InputError, match="changed since import"):
        ws.load_trajectory(key, "t0")


def test_b_a_same_size_edit_during_the_import_is_refused(tmp_path, monkeypatch):
    from scoring.workspace import importing

    src = _write(tmp_path / "run.jsonl", _header(), _trajectory("t0", json.dumps({"to": "alice@example.org"})))
    real = importing.sha256_of_file
    edited = []

    def hash_then_edit(path):
        digest = real(path)
        if Path(path) == src and not edited:  # the harness rewrites a record just after the hash
            _edit_same_size(src, b"alice@example.org", b"eve!!@attack.bad1")
            edited.append(True)
        return digest

    monkeypatch.setattr(importing, "sha256_of_file", hash_then_edit)
    ws = Workspace(tmp_path / "w.db")
    with pytest.raises(InputError, match="changed while it was being imported"):
        ws.import_run(src)
    assert ws.runs() == [] and [p for p in ws.files.iterdir() if not p.name.startswith(".")] == []


def test_b_a_workspace_whose_copy_is_a_hard_link_keeps_working_and_reports_an_edit(tmp_path):
    # Workspaces made before schema 7 hard-linked the user's file into <db>.d/.
    src = _write(tmp_path / "run.jsonl", _header(), _trajectory("t0", json.dumps({"to": "alice@example.org"})))
    ws = Workspace(tmp_path / "w.db")
    key = ws.import_run(src).run_key
    stored = Path(ws.run(key)["stored_path"])
    stored.unlink()
    os.link(src, stored)
    with ws.connect() as db:
        db.execute("update runs set stored_sha256 = null")
        db.conn.commit()
    assert ws.load_trajectory(key, "t0").tool_calls[0].arguments == json.dumps({"to": "alice@example.org"})
    _edit_same_size(src, b"alice@example.org", b"eve!!@attack.bad1")
    with pytest.raises(InputError, match="changed since import"):
        ws.load_trajectory(key, "t0")


# --- C: located errors, exit 2 -----------------------------------------------------------


@pytest.mark.parametrize("field", ["id", "model", "tool", "role"])
def test_c_a_lone_surrogate_in_a_name_rejects_its_record_located(tmp_path, field):
    record = {
        "id": _trajectory("a\ud800b"),
        "model": _trajectory("t0", model="m\udfff"),
        "tool": _trajectory("t0", call={"tool": "t\ud800"}),
        "role": _trajectory("t0", messages=[{"role": "us\ud800er", "content": "hi"}]),
    }[field]
    src = _write(tmp_path / "s.jsonl", _header(), record, _trajectory("ok"))
    done = _run_cli("import", src, "--db", tmp_path / "w.db")
    assert done.returncode == 0, done.stderr
    assert f"{src}:2" in done.stderr and "lone surrogate" in done.stderr and "Traceback" not in done.stderr
    ws = Workspace(tmp_path / "w.db")
    (run,) = ws.runs()
    assert run["trajectories"] == 1 and run["records_seen"] == 2


def test_c_a_lone_surrogate_in_bulk_text_is_kept_and_replayed(tmp_path):
    src = _write(tmp_path / "s.jsonl", _header(),
                 _trajectory("t0", final_output="x\ud800y", messages=[{"role": "user", "content": "\udfff"}]))
    ws = Workspace(tmp_path / "w.db")
    key = ws.import_run(src).run_key
    t = ws.load_trajectory(key, "t0")
    assert t.final_output == "x\ud800y" and t.messages[0].content == "\udfff"
    assert ws.trajectory_rows(key)[0]["final_output_preview"] == "x\ufffdy"


def test_c_an_integer_of_5000_digits_and_sizes_past_2_63_are_located_rejections(tmp_path):
    huge = json.dumps(_trajectory("t0")).replace('"raw_size_bytes": 8', '"raw_size_bytes": ' + "9" * 5000)
    src = tmp_path / "n.jsonl"
    src.write_text("\n".join([json.dumps(_header()), huge,
                              json.dumps(_trajectory("t1", call={"raw_size_bytes": 2**63})),
                              json.dumps(_trajectory("t2"))]) + "\n")
    done = _run_cli("import", src, "--db", tmp_path / "w.db")
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert f"{src}:2: invalid JSON: a number too long" in done.stderr
    assert f"{src}:3 (t1): tool_calls[0].raw_size_bytes is out of range" in done.stderr
    header = _write(tmp_path / "h.jsonl", _header(capture_limit_bytes=2**63), _trajectory("t0"))
    done = _run_cli("score", header)
    assert done.returncode == 2 and "capture_limit_bytes" in done.stderr and "Traceback" not in done.stderr


def test_c_a_full_disk_while_copying_is_a_clear_error_and_leaves_no_copy(tmp_path, monkeypatch):
    from scoring.workspace import copies

    def full(_out, _data):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(copies, "_write_chunk", full)
    ws = Workspace(tmp_path / "w.db")
    with pytest.raises(StoreError, match="No space left on device"):
        ws.import_run(OBSERVED)
    assert ws.runs() == [] and list(ws.files.iterdir()) == []



@pytest.fixture
def parallel_import(monkeypatch):
    """Every import of a canonical run takes the large-run path (``_import_parallel``: the
    kernel's copy, two workers), in blocks of 64 KiB."""
    from scoring import ingest
    from scoring.workspace import importing

    monkeypatch.setattr(importing, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(ingest, "BLOCK_BYTES", 64 * 1024)


def test_c_a_full_disk_in_the_kernels_copy_is_a_clear_error_and_leaves_no_copy(tmp_path, monkeypatch,
                                                                                  parallel_import):
    from scoring.workspace import copies

    def full(*_args):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "copy_file_range", full)
    ws = Workspace(tmp_path / "w.db")
    with pytest.raises(StoreError, match="No space left on device"):
        ws.import_run(OBSERVED)
    assert ws.runs() == [] and list(ws.files.iterdir()) == []
    monkeypatch.setattr(copies, "_write_chunk", full)  # the streamed copy's full disk, past the kernel's
    monkeypatch.setattr(os, "copy_file_range", lambda *_: (_ for _ in ()).throw(OSError(errno.EXDEV, "cross-device")))
    monkeypatch.setattr(os, "sendfile", lambda *_: (_ for _ in ()).throw(OSError(errno.EINVAL, "not here")))
    with pytest.raises(StoreError, match="No space left on device"):
        ws.import_run(OBSERVED)
    assert ws.runs() == [] and list(ws.files.iterdir()) == []


@pytest.mark.parametrize("stops_after", [0, 1000, 70_000])
def test_b_a_kernel_copy_cut_short_goes_on_by_the_next_way_and_the_copy_is_whole(tmp_path, monkeypatch,
                                                                                   parallel_import, stops_after):
    """``copy_file_range`` that copies ``stops_after`` bytes and then is refused (a file system
    that takes it only in part): ``sendfile``, then the streamed copy, go on from there; the run
    imported from the copy is the one imported in process, its copy the file's bytes."""
    real = os.copy_file_range
    done = [0]

    def partial(fin, fout, count):
        if done[0] >= stops_after:
            raise OSError(errno.EXDEV, "cross-device")
        n = real(fin, fout, min(count, stops_after - done[0]))
        done[0] += n
        return n

    monkeypatch.setattr(os, "copy_file_range", partial)
    monkeypatch.setattr(os, "sendfile", lambda *_: (_ for _ in ()).throw(OSError(errno.ENOSYS, "none")))
    ws = Workspace(tmp_path / "w.db")
    run = ws.import_run(OBSERVED).run
    assert run["run_key"] == _sha(OBSERVED.read_bytes()) == run["stored_sha256"]
    assert (ws.files / f"{run['run_key']}.jsonl").read_bytes() == OBSERVED.read_bytes()
    again = ws.import_run(OBSERVED)
    assert again.already_present and again.run_key == run["run_key"] and len(ws.runs()) == 1


def test_b_a_large_run_imported_again_is_found_by_its_key_and_nothing_is_written(tmp_path, parallel_import):
    """The key is hashed while the workers score: a run already in the workspace is found once it
    is known, its workers' blocks dropped; no second copy, no second row."""
    ws = Workspace(tmp_path / "w.db")
    first = ws.import_run(OBSERVED)
    files = sorted(p.name for p in ws.files.iterdir())
    again = ws.import_run(OBSERVED)
    assert again.already_present and again.run_key == first.run_key
    assert sorted(p.name for p in ws.files.iterdir()) == files and len(ws.runs()) == 1

def test_c_a_full_disk_at_the_commit_is_a_clear_error_and_leaves_no_copy(tmp_path, monkeypatch):
    from scoring.workspace import schema

    ws = Workspace(tmp_path / "w.db")

    def full(_conn):
        exc = sqlite3.OperationalError("database or disk is full")
        exc.sqlite_errorcode, exc.sqlite_errorname = sqlite3.SQLITE_FULL, "SQLITE_FULL"  # as SQLite raises it
        raise exc

    monkeypatch.setattr(schema, "_commit", full)
    with pytest.raises(DatabaseUnavailableError, match="disk is full"):
        ws.import_run(OBSERVED)
    monkeypatch.undo()
    assert ws.runs() == [] and list(ws.files.iterdir()) == []
    assert not ws.import_run(OBSERVED).already_present


def _corrupt(db: Path) -> None:
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        page = conn.execute("PRAGMA page_size").fetchone()[0]
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
    conn.close()
    with open(db, "r+b") as fh:  # garbage over the pages after the schema page
        for n in range(2, pages, 3):
            fh.seek(n * page)
            fh.write(b"\xa5" * page)


def test_c_a_damaged_database_is_refused_by_import_and_a_clean_error_elsewhere(tmp_path):
    db = tmp_path / "w.db"
    key = Workspace(db).import_run(OBSERVED).run_key
    _corrupt(db)
    for args in (["import", SAMPLES / "compare-m2.jsonl"], ["score", key], ["labels", "export", key], ["runs"]):
        done = _run_cli(*args, "--db", db)
        assert done.returncode == 2, (args, done.stdout[-500:], done.stderr[-2000:])
        assert "Traceback" not in done.stderr and "error:" in done.stderr, (args, done.stderr[-2000:])


@pytest.mark.parametrize("content", [b"not a database at all\n" * 100, b""])
def test_c_runs_on_an_unusable_database_is_exit_2(tmp_path, content):
    db = tmp_path / "w.db"
    db.write_bytes(content)
    if not content:
        db.unlink()
        db = tmp_path / "missing" / "w.db"
    done = _run_cli("runs", "--db", db)
    assert done.returncode == 2 and "Traceback" not in done.stderr and "error:" in done.stderr


@contextlib.contextmanager
def _immutable(*paths: Path):
    """chattr +i: not writable even by root (file modes are not enough for root)."""
    done = []
    try:
        for p in paths:
            if subprocess.run(["chattr", "+i", str(p)], capture_output=True).returncode != 0:
                pytest.skip("chattr +i is not available here")
            done.append(p)
        yield
    finally:
        for p in done:
            subprocess.run(["chattr", "-i", str(p)], capture_output=True)


@pytest.mark.parametrize("what", ["file", "folder"])
def test_c_a_read_only_workspace_can_still_be_read(tmp_path, what):
    home = tmp_path / "ws"
    home.mkdir()
    ws = Workspace(home / "w.db")
    key = ws.import_run(OBSERVED).run_key
    tid = ws.trajectory_rows(key, "status = 'inconclusive'")[0]["trajectory_id"]
    ws.add_label(key, tid, "alice", ReviewLabel.DEGENERATE)
    with _immutable(*([home / "w.db"] if what == "file" else [home / "w.db", home])):
        ro = Workspace(home / "w.db")
        assert ro.read_only
        assert [r["run_key"] for r in ro.runs()] == [key]
        assert ro.current_labels(key)[tid] == {"alice": ReviewLabel.DEGENERATE}
        assert ro.load_trajectory(key, tid).id == tid
        with pytest.raises(DatabaseUnavailableError, match="cannot be written"):
            ro.add_label(key, tid, "bob", ReviewLabel.DEGENERATE)
        done = _run_cli("runs", "--db", home / "w.db")
        assert done.returncode == 0 and key[:12] in done.stdout, done.stderr


# --- D: unbounded reads ------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["device", "fifo"])
def test_d_devices_and_fifos_are_refused_before_reading(tmp_path, kind):
    from scoring.files import count_lines

    if kind == "device":
        path = Path("/dev/zero")
    elif kind == "fifo":
        path = tmp_path / "pipe.jsonl"
        os.mkfifo(path)
    for args in (["score", path], ["import", path, "--db", tmp_path / "w.db"],
                 ["score", SAMPLES / "compare-m2.jsonl", "--payloads", path],
                 ["labels", "import", path, "--db", tmp_path / "w.db"]):
        try:
            done = _run_cli(*args, timeout=60)
        except subprocess.TimeoutExpired:
            pytest.fail(f"{args[0]} {kind} did not return")
        assert done.returncode == 2 and "not a regular file" in done.stderr, (args, done.stderr[-1000:])
    with pytest.raises(InputError, match="not a regular file"):
        Workspace(tmp_path / "w.db").import_run(path)
    with pytest.raises(InputError, match="not a regular file"):
        count_lines(path)


def _reveal_one_by_one(text: str) -> tuple[str, int]:
    """The replay's reveal as it was: one character at a time (the reference)."""
    from scoring.text import is_invisible

    out, n = [], 0
    for ch in text:
        if is_invisible(ch):
            out.append(f"⟨U+{ord(ch):04X}⟩")
            n += 1
        else:
            out.append(ch)
    return "".join(out), n


def test_d_the_reveal_is_one_pass_and_equals_the_character_by_character_one():
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from pages._shared.render import reveal

    @settings(max_examples=300, deadline=None)
    @given(st.text(alphabet=st.characters(codec=None, min_codepoint=0, max_codepoint=0x10FFFF)))
    def same(text):
        assert reveal(text) == _reveal_one_by_one(text)

    same()
    text = "ab\u202ecd\x1b[2J\u200b\ud800\n\t" * 10
    assert reveal(text) == _reveal_one_by_one(text)
    # one C pass: a 6 MB text is revealed without a Python step per character
    big = ("x" * 99 + "\u200b") * 60_000
    calls = []
    import scoring.text as text_mod

    real = text_mod._mark
    text_mod._mark = lambda m: calls.append(1) or real(m)
    try:
        shown, n = reveal(big)
    finally:
        text_mod._mark = real
    assert n == 60_000 and len(calls) == 60_000 and len(shown) == len(big) + 60_000 * 7


# --- E: no process outlives a killed import ----------------------------------------------

_DRIVER = """
import sys
from scoring import ingest
from scoring.workspace import Workspace, importing
importing.PARALLEL_MIN_BYTES = 0
ingest.BLOCK_BYTES = 256 * 1024
ws = Workspace(sys.argv[2])
ws.import_run(sys.argv[1], progress=lambda n: print("progress", n, flush=True))
"""


def _children(pid: int) -> set[int]:
    out = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):
            out |= {int(x) for x in (task / "children").read_text().split()}
    return out


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_e_killing_an_import_leaves_no_process_behind(tmp_path, generator):
    big = tmp_path / "big.jsonl"
    generator.main(["--large", "6000", "--out", str(big)])
    Workspace(tmp_path / "w.db")
    proc = subprocess.Popen([sys.executable, "-c", _DRIVER, str(big), str(tmp_path / "w.db")], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert proc.stdout.readline().startswith("progress")  # the workers are scoring
        children = _children(proc.pid)
        assert len(children) >= 2, children  # two workers (and the resource tracker)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and any(map(_alive, children)):
            time.sleep(0.1)
        left = [pid for pid in children if _alive(pid)]
        assert left == [], f"still running after the import was killed: {left}"
    finally:
        for pid in _children(proc.pid) if _alive(proc.pid) else ():
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(OSError):
            proc.kill()


# --- F: exports and terminals ------------------------------------------------------------


def test_f_label_csv_cells_cannot_be_formulas(tmp_path):
    src = _write(tmp_path / "f.jsonl", _header(),
                 _trajectory("=HYPERLINK(\"http://x\")", verdict={"label": None}),
                 _trajectory("+1", verdict={"label": None}), _trajectory("ok", verdict={"label": None}))
    ws = Workspace(tmp_path / "w.db")
    key = ws.import_run(src).run_key
    for tid in ("=HYPERLINK(\"http://x\")", "+1", "ok"):
        ws.add_label(key, tid, "@evil", ReviewLabel.DEGENERATE, note="-2+3")
    rows = list(csv.DictReader(io.StringIO(ws.export_labels(key, "csv"))))
    dangerous = [v for r in rows for v in r.values() if v and v[0] in "=+-@\t\r"]
    assert dangerous == []
    assert {r["trajectory_id"] for r in rows} == {"'=HYPERLINK(\"http://x\")", "'+1", "ok"}
    assert {r["reviewer"] for r in rows} == {"'@evil"} and {r["note"] for r in rows} == {"'-2+3"}
    # and the file imports back to the same events (the apostrophe is taken off again)
    out = tmp_path / "labels.csv"
    out.write_text(ws.export_labels(key, "csv"))
    other = Workspace(tmp_path / "w2.db")
    other.import_run(src)
    assert other.import_labels(out) == 3
    assert other.current_labels(key) == ws.current_labels(key)


def test_f_terminal_output_shows_escapes_and_never_obeys_them(tmp_path):
    evil = "x\x1b]0;pwned\x07\x1b[2J\u202eSAFE\r\nrejected fake"
    src = _write(tmp_path / "t.jsonl", _header(run_id=evil, model="m\x1b[31m"),
                 _trajectory(evil), {"record": "trajectory", "id": evil + "2"})
    for args in (["score", src], ["import", src, "--db", tmp_path / "w.db"], ["runs", "--db", tmp_path / "w.db"]):
        done = _run_cli(*args)
        out = done.stdout + done.stderr
        assert done.returncode == 0, done.stderr
        for bad in ("\x1b", "\x07", "\u202e", "\r"):
            assert bad not in out, (args, bad)
        assert "⟨U+001B⟩" in out and "rejected fake" not in out.replace("⟨U+000A⟩rejected fake", ""), (args, out)


def test_f_label_csv_file_name_is_bounded_and_sanitised():
    from scoring.export_files import SLUG_CHARS, export_file_name

    key = "ab12cd34ef56" + "0" * 52
    name = export_file_name("labels-final", "csv", [key], "../" + "r\u202e" * 1500 + "\x1b;rm -rf /")
    assert len(name) <= len("labels-final--") + SLUG_CHARS + len("--ab12cd34ef56.csv")
    assert name.endswith("--ab12cd34ef56.csv") and ".." not in name
    assert set(name) <= set("abcdefghijklmnopqrstuvwxyz0123456789.-")
    assert (export_file_name("labels-final", "csv", [key], "model · observed-m1")
            == "labels-final--model-observed-m1--ab12cd34ef56.csv")


def test_f_aggregates_csv_cells_cannot_be_formulas(tmp_path):
    from pages._shared import exports
    from scoring.report import evaluate

    src = _write(tmp_path / "f.jsonl", _header(run_id="=cmd|' /C calc'!A0", model="@SUM(1+1)"),
                 _trajectory("t0"), _trajectory("t1", verdict={"label": None}))
    evs = [evaluate(src)]
    text = exports.stamped_csv(exports.aggregates_frame(evs), exports.make_stamp(evs, None))
    body = [line for line in text.splitlines() if not line.startswith("#")]
    cells = [c for row in csv.reader(body) for c in row]

    def number(c: str) -> bool:
        try:
            float(c)
            return True
        except ValueError:
            return False

    assert [c for c in cells if c and c[0] in "=+-@\t\r" and not number(c)] == []
    assert "'=cmd|' /C calc'!A0" in cells and "'@SUM(1+1)" in cells
    evil = _write(tmp_path / "g.jsonl", _header(run_id="x\n=1+1"), _trajectory("t0"))
    evs = [evaluate(evil)]
    stamp = exports.make_stamp(evs, None)
    frame = exports.aggregates_frame(evs)
    text = exports.stamped_csv(frame, stamp)
    # A run id cannot end its row and start one of its own: its newline is spelled out.
    assert len(text.splitlines()) == 2 and text.splitlines()[0].startswith(",".join(frame.columns))
    assert "x⟨U+000A⟩=1+1" in text


# --- D and G in the app ------------------------------------------------------------------


@pytest.fixture
def runs_page(app):
    app.switch_page("pages/runs.py").run()
    return app


def test_d_the_app_refuses_a_fifo_path_without_waiting_on_it(runs_page, tmp_path):
    from pages._shared import state

    fifo = tmp_path / "run.jsonl"
    os.mkfifo(fifo)
    stop = threading.Event()

    def release():  # on the old code the page blocked opening the FIFO: let the test end anyway
        if stop.wait(20):
            return
        while not stop.wait(0.2):
            with contextlib.suppress(OSError):
                os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))

    threading.Thread(target=release, daemon=True).start()
    try:
        runs_page.text_input(key=state.IMPORT_PATH).input(str(fifo)).run()
        started = time.monotonic()
        runs_page.button[[b.label for b in runs_page.button].index("Import path")].click().run()
        waited = time.monotonic() - started
    finally:
        stop.set()
    assert not runs_page.exception
    assert any("not a regular file" in e.value and "FIFO" in e.value for e in runs_page.error)
    assert waited < 20


def test_g_team_mode_turns_import_from_a_path_off(runs_page, monkeypatch):
    from pages._shared import router

    assert "Import path" in [b.label for b in runs_page.button]
    monkeypatch.setenv(router.TEAM_MODE_ENV, "1")
    runs_page.run()
    assert not runs_page.exception
    assert "Import path" not in [b.label for b in runs_page.button]
    assert not [t for t in runs_page.text_input if t.label.startswith("Path on this machine")]
    assert any("Team mode" in i.value for i in runs_page.info)
    # nor can a web form name code for the server to run as a re-classifier: only the server's setting
    assert not [t for t in runs_page.text_input if t.label.startswith("Re-classifier")]
    assert any("Re-classifier of record for recovered surfaces: none" in c.value for c in runs_page.caption)
    monkeypatch.delenv(router.TEAM_MODE_ENV)
    monkeypatch.setattr(router, "auth_configured", lambda: True)
    assert router.team_mode()  # [auth] configured: a shared server, team mode on


def test_e_a_worker_that_dies_is_a_clear_error_not_a_traceback():
    from scoring.ingest import pool_map

    with pytest.raises(StoreError, match="worker process of the import ended abruptly"):
        list(pool_map(os._exit, [(1,)], 1))


def test_b_a_reflink_copy_is_hashed_from_the_clone(tmp_path, monkeypatch):
    # Where the file system clones (btrfs, XFS), the copy is a reflink: no bytes are streamed,
    # and the hash checked against the run key is the clone's own.
    from scoring.workspace import copies

    cloned = []

    def clone(src, dest):
        dest.write(src.read())  # what FICLONE leaves in dest (ext4 here has no reflinks)
        dest.flush()
        cloned.append(True)
        return True

    monkeypatch.setattr(copies, "_reflink", clone)
    monkeypatch.setattr(copies, "_write_chunk", lambda *_: pytest.fail("streamed despite the clone"))
    src = _write(tmp_path / "run.jsonl", _header(), _trajectory("t0", json.dumps({"to": "alice@example.org"})))
    ws = Workspace(tmp_path / "w.db")
    run = ws.import_run(src).run
    assert cloned and run["stored_sha256"] == _sha(src.read_bytes())
    src.unlink()
    assert ws.load_trajectory(run["run_key"], "t0").tool_calls[0].arguments == json.dumps({"to": "alice@example.org"})


def test_b_a_migration_that_rescores_never_reads_an_edited_hard_linked_copy(tmp_path):
    # Scorer 2.0's migration scores every run again from its workspace copy; a copy hard-linked
    # (before schema 7) to a file edited since is not read: the run keeps its stored scores.
    src = _write(tmp_path / "run.jsonl", _header(taxonomy=[{"id": "harm01", "name": "h", "rules": ["zzz"]}]),
                 _trajectory("t0"), _trajectory("t1"))
    ws = Workspace(tmp_path / "w.db")
    key = ws.import_run(src).run_key
    stored = Path(ws.run(key)["stored_path"])
    stored.unlink()
    os.link(src, stored)
    _edit_same_size(src, b'"label": "benign", "confidence": 0.9}, "tool_calls"'.replace(b", \"tool_calls\"", b""),
                    b'"label": "harm01", "confidence": 0.9}')
    with ws.connect() as db:  # back to schema 4, as a version before scorer 2.0 left it
        for column in ("classifier_of_record", "scorer_version", "reclassifier", "reported_safe_rate",
                       "reported_safe_rate_source"):
            db.execute(f"ALTER TABLE runs DROP COLUMN {column}")
        db.execute("ALTER TABLE trajectories DROP COLUMN truncation")
        db.execute("UPDATE runs SET stored_sha256 = NULL")
        db.execute("PRAGMA user_version = 4")
        db.conn.commit()
    migrated = Workspace(tmp_path / "w.db")
    migrated.migrate()  # set back under this process: a new process migrates it on opening
    assert {r["trajectory_id"]: r["status"] for r in migrated.trajectory_rows(key)} == {"t0": "safe", "t1": "safe"}
    with pytest.raises(InputError, match="changed since import"):
        migrated.load_trajectory(key, "t0")


def test_c_the_app_reads_a_read_only_workspace(tmp_path, monkeypatch):
    from streamlit.testing.v1 import AppTest

    from pages._shared import loaders

    home = tmp_path / "ws"
    home.mkdir()
    Workspace(home / "app.db").import_run(SAMPLES / "compare-m2.jsonl")
    monkeypatch.setattr(loaders, "DB_PATH", home / "app.db")
    with _immutable(home / "app.db", home):
        at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=90).run()
        assert not at.exception and not at.error, [e.value for e in at.error]
        assert any(m.label.startswith("Strict") for m in at.metric)
        for page in ("pages/runs.py", "pages/trajectories.py", "pages/review.py", "pages/report.py"):
            at.switch_page(page).run()
            assert not at.exception and not at.error, (page, [e.value for e in at.error])


def test_f_labels_export_to_a_terminal_shows_escapes_and_to_a_pipe_keeps_the_bytes(tmp_path):
    import pty

    src = _write(tmp_path / "l.jsonl", _header(), _trajectory("t\x1b]0;x\x07", verdict={"label": None}))
    ws = Workspace(tmp_path / "w.db")
    key = ws.import_run(src).run_key
    ws.add_label(key, "t\x1b]0;x\x07", "al\u202eice", ReviewLabel.DEGENERATE, note="\x1b[2J")
    piped = _run_cli("labels", "export", key, "--db", tmp_path / "w.db", "--format", "csv")
    assert piped.returncode == 0 and "\x1b[2J" in piped.stdout  # the exact bytes for a file or a pipe
    leader, follower = pty.openpty()
    proc = subprocess.Popen([*CLI, "labels", "export", key, "--db", str(tmp_path / "w.db"), "--format", "csv"],
                            cwd=ROOT, stdout=follower, stderr=subprocess.PIPE)
    os.close(follower)
    chunks = []
    while True:
        try:
            data = os.read(leader, 65536)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    proc.wait(timeout=60)
    os.close(leader)
    shown = b"".join(chunks).decode("utf-8")
    assert proc.returncode == 0 and "⟨U+001B⟩[2J" in shown and "\x1b" not in shown and "\u202e" not in shown
