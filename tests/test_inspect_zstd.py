"""Inspect ``.eval`` logs written by the current inspect_ai (zstd members, ZIP method 93), the
per-member cap on zstd members and the one decoded-bytes budget of a whole file."""

from __future__ import annotations

import io
import json
import struct
import subprocess
import sys
import zipfile
import zlib

import pytest
import zstandard

from scoring.errors import InputError
from scoring.importers import _zip as budgets
from scoring.importers import inspect_log, load_run, parse_run
from scoring.model import Termination

from .conftest import ROOT

ZSTD_EVAL = ROOT / "tests" / "fixtures" / "inspect_zstd" / "agentharm_like.eval"


def test_fixture_is_zstd_as_current_inspect_writes_it():
    with zipfile.ZipFile(ZSTD_EVAL) as zf:
        assert {i.compress_type for i in zf.infolist()} == {inspect_log.ZIP_ZSTANDARD}


def test_zstd_eval_reads_in_a_process_that_never_imports_inspect_ai():
    # importing inspect_ai patches zipfile for zstd: the reader must not depend on that
    code = (
        "import sys, json\n"
        "from scoring.importers import load_run\n"
        f"run = load_run({str(ZSTD_EVAL)!r})\n"
        "assert 'inspect_ai' not in sys.modules and 'zipfile_zstd' not in sys.modules\n"
        "print(json.dumps({'ids': sorted(t.id for t in run.trajectories), 'calls': run.tool_call_count,"
        " 'rejected': len(run.rejected)}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    assert got == {"ids": ["complied-epoch1", "limited-epoch1", "refused-epoch1"], "calls": 3, "rejected": 0}


def test_zstd_eval_agrees_with_inspect_ai_read_eval_log():
    inspect_ai_log = pytest.importorskip("inspect_ai.log")
    log = inspect_ai_log.read_eval_log(str(ZSTD_EVAL))
    run = load_run(ZSTD_EVAL)
    by_id = {t.id: t for t in run.trajectories}
    for s in log.samples:
        t = by_id[f"{s.id}-epoch{s.epoch}"]
        want = [(c.function, c.arguments) for m in s.messages if m.role == "assistant" for c in (m.tool_calls or [])]
        assert [(c.tool, json.loads(c.arguments)) for c in t.tool_calls] == want
    assert by_id["limited-epoch1"].termination is Termination.STEP_LIMIT
    assert "Wire 9,800 USD" in by_id["complied-epoch1"].tool_calls[0].arguments


def _zip(members: list[tuple[str, bytes]], method: int, declared: int | None = None) -> bytes:
    """A zip written by hand, so zstd members (which zipfile cannot write before 3.14) and
    lying declared sizes can be made."""
    out, central = io.BytesIO(), []
    for name, payload in members:
        comp = (
            zstandard.ZstdCompressor().compress(payload)
            if method == 93
            else _deflate(payload)
            if method == 8
            else payload
        )
        crc, size = zlib.crc32(payload), len(payload) if declared is None else declared
        off, nm = out.tell(), name.encode()
        out.write(struct.pack("<4s5H3L2H", b"PK\x03\x04", 20, 0, method, 0, 0, crc, len(comp), size, len(nm), 0))
        out.write(nm + comp)
        central.append(struct.pack("<4s6H3L5H2L", b"PK\x01\x02", 20, 20, 0, method, 0, 0, crc, len(comp), size,
                                   len(nm), 0, 0, 0, 0, 0, off) + nm)
    start = out.tell()
    for c in central:
        out.write(c)
    out.write(struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, len(central), len(central), out.tell() - start, start, 0))
    return out.getvalue()


def _deflate(payload: bytes) -> bytes:
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    return c.compress(payload) + c.flush()


HEADER = json.dumps({"status": "success", "eval": {"run_id": "bomb", "model": "m", "task": "t"}}).encode()


def _sample(i: int, pad: int) -> bytes:
    return json.dumps({"id": i, "epoch": 1, "messages": [{"role": "user", "content": "hi"}], "pad": "a" * pad}).encode()


def test_hand_written_zstd_zip_reads_and_checks_crc():
    data = _zip([("header.json", HEADER), ("samples/1_epoch_1.json", _sample(1, 10))], 93)
    run = parse_run(data, "z.eval")
    assert [t.id for t in run.trajectories] == ["1-epoch1"] and not run.rejected
    corrupt = data.replace(zlib.crc32(_sample(1, 10)).to_bytes(4, "little"), b"\0\0\0\0")
    run = parse_run(corrupt, "z.eval")
    assert not run.trajectories and "CRC" in run.rejected[0].message


def test_zstd_member_over_the_per_member_cap_is_rejected_whatever_it_declares(monkeypatch):
    monkeypatch.setattr(inspect_log, "MAX_MEMBER_BYTES", 4096)
    data = _zip([("header.json", HEADER), ("samples/1_epoch_1.json", _sample(1, 100_000))], 93, declared=None)
    run = parse_run(data, "z.eval")
    assert not run.trajectories
    assert "declares" in run.rejected[0].message or "expands past 4,096" in run.rejected[0].message
    # declared sizes are lies in a bomb: a member declaring 10 bytes is still cut at the cap
    liar = _zip([("header.json", HEADER), ("samples/1_epoch_1.json", _sample(1, 100_000))], 93, declared=10)
    run = parse_run(liar, "z.eval")
    assert not run.trajectories and "expands past 4,096" in run.rejected[0].message


@pytest.mark.parametrize("method", [8, 93])
def test_many_members_each_under_the_cap_exhaust_one_total_budget(method):
    # A few hundred kilobytes whose members each stay well under the per-member cap but
    # together expand past the whole file's budget: refused, located, before memory grows.
    pad = 8 * 1024 * 1024
    members = [("header.json", HEADER)] + [(f"samples/{i}_epoch_1.json", _sample(i, pad)) for i in range(40)]
    data = _zip(members, method)
    budget = inspect_log.total_budget(len(data))
    assert len(data) < 1024 * 1024 and 40 * pad > budget and pad < inspect_log.MAX_MEMBER_BYTES
    with pytest.raises(InputError) as exc:
        parse_run(data, "bomb.eval")
    assert exc.value.source == "bomb.eval"
    assert "in total" in exc.value.message and "samples/" in exc.value.message


def test_budget_counts_members_already_read(monkeypatch):
    data = _zip([("header.json", HEADER)] + [(f"samples/{i}_epoch_1.json", _sample(i, 1000)) for i in range(5)], 8)
    assert len(parse_run(data, "ok.eval").trajectories) == 5
    monkeypatch.setattr(budgets, "MIN_TOTAL_BYTES", 3000)
    monkeypatch.setattr(budgets, "TOTAL_RATIO", 1)
    with pytest.raises(InputError, match="in total"):
        parse_run(data, "small-budget.eval")


def test_a_log_that_never_finished_writing_is_started_not_complete():
    # only the journal's start and a sample: Inspect was still running (or was killed)
    start = json.dumps({"eval": {"run_id": "j", "model": "m", "task": "t", "dataset": {"samples": 3}}}).encode()
    data = _zip([("_journal/start.json", start), ("samples/1_epoch_1.json", _sample(1, 10))], 93)
    run = parse_run(data, "partial.eval")
    assert run.header.run_status == "started"
    assert run.header.run_status_detail == "1 of 3 samples written"
