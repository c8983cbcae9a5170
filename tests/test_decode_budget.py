"""An archive's budget bounds memory, not only decoded bytes (issue 34 item 6): a ``.eval``
padded to its budget with members each under the per-member cap, JSON that parses to far more
than its text, wide strings, Inspect's attachment and message-pool references, an lzma
dictionary declared huge, and an AgentDojo zip's bzip2 and lzma members. Each test lowers the
budget through ``decode_budget`` (its default is ``inspect_log.total_budget``) so the files are
small; benches/eval_bombs.py measures the full-size padded files."""

from __future__ import annotations

import io
import json
import lzma
import os
import platform
import struct
import subprocess
import sys
import tracemalloc
import zipfile
import zlib

import pytest

from scoring.errors import InputError
from scoring.importers import _zip, agentdojo_dir, parse_run

from .conftest import ROOT

HEADER = json.dumps({"status": "success", "eval": {"run_id": "pad", "model": "m", "task": "t"}}).encode()
MIB = 1024 * 1024


def sample(i: int, content: str | bytes) -> bytes:
    text = content.decode() if isinstance(content, bytes) else content
    return json.dumps({"id": i, "epoch": 1, "messages": [{"role": "user", "content": text}]}).encode()


def lzma_member(payload: bytes, declared_dict: int) -> bytes:
    """ZIP's LZMA (version, properties' size, properties, raw LZMA1 stream) whose properties
    declare ``declared_dict`` bytes of dictionary: a stream needs none larger than its output."""
    stream = lzma.compress(payload, lzma.FORMAT_RAW, filters=[{"id": lzma.FILTER_LZMA1, "dict_size": 1 << 20}])
    props = bytearray(lzma._encode_filter_properties({"id": lzma.FILTER_LZMA1, "dict_size": 1 << 20}))
    props[1:5] = declared_dict.to_bytes(4, "little")
    return struct.pack("<BBH", 9, 4, len(props)) + bytes(props) + stream


def hand_zip(members: list[tuple[str, bytes, bytes, int]]) -> bytes:
    """(name, payload, compressed, method) written as a zip by hand (lzma with our properties)."""
    out, central = io.BytesIO(), []
    for name, payload, comp, method in members:
        crc, off, nm = zlib.crc32(payload), out.tell(), name.encode()
        out.write(struct.pack("<4s5H3L2H", b"PK\x03\x04", 20, 0, method, 0, 0, crc, len(comp), len(payload),
                              len(nm), 0))
        out.write(nm + comp)
        central.append(struct.pack("<4s6H3L5H2L", b"PK\x01\x02", 20, 20, 0, method, 0, 0, crc, len(comp),
                                   len(payload), len(nm), 0, 0, 0, 0, 0, off) + nm)
    start = out.tell()
    for c in central:
        out.write(c)
    out.write(struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, len(central), len(central), out.tell() - start, start, 0))
    return out.getvalue()


def padded_eval(method: int, budget: int, members: int = 4) -> bytes:
    """A ``.eval`` whose sample members (each a quarter of the budget, less a little) add up to
    just under its decoded budget: every member and the file pass the decoded-bytes caps."""
    size = budget // members - 64 * 1024
    entries = [("header.json", HEADER, HEADER, zipfile.ZIP_STORED)]
    for i in range(members):
        payload = sample(i, " " * size)
        comp = (bz2_compress(payload) if method == zipfile.ZIP_BZIP2
                else lzma_member(payload, declared_dict=0xE0000000))  # 3.5 GiB declared
        entries.append((f"samples/{i}_epoch_1.json", payload, comp, method))
    return hand_zip(entries)


def bz2_compress(payload: bytes) -> bytes:
    import bz2  # only this helper compresses bzip2 (the importer decodes it in scoring.importers._zip)

    return bz2.compress(payload, 9)


CHILD = """
import json, sys
from scoring.errors import InputError
from scoring.importers import load_run

def high_water():
    with open("/proc/self/status") as fh:
        return next(int(line.split()[1]) * 1024 for line in fh if line.startswith("VmHWM:"))

path, warm, budget = sys.argv[1], sys.argv[2], int(sys.argv[3])
load_run(warm, decode_budget=budget)  # the importer's lazy imports and first allocations
# The peak is reset here: a child's ru_maxrss starts at its parent's (Linux keeps the peak of
# the memory a child forked from), which would hide the import's own peak under pytest's.
with open("/proc/self/clear_refs", "w") as fh:
    fh.write("5")
base = high_water()
try:
    run = load_run(path, decode_budget=budget)
    said = f"{len(run.trajectories)} read, {len(run.rejected)} rejected"
except InputError as exc:
    said = exc.message
print(json.dumps({"over_baseline": high_water() - base, "said": said}))
"""


def child_peak(tmp_path, data: bytes, budget: int) -> dict:
    """Peak RSS over its baseline of a fresh process importing ``data`` (Linux: VmHWM)."""
    path, warm = tmp_path / "padded.eval", tmp_path / "warm.eval"
    path.write_bytes(data)
    warm.write_bytes(hand_zip([("header.json", HEADER, HEADER, 0),
                               ("samples/1_epoch_1.json", sample(1, "hi"), sample(1, "hi"), 0)]))
    # glibc keeps freed blocks of less than 32 MiB in its heap (its mmap threshold rises to the
    # largest block freed): at these sizes RSS would measure the allocator's cache; at full size
    # (benches/eval_bombs.py, run without this) every member's blocks are mapped and unmapped.
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": str(256 * 1024)}
    out = subprocess.run([sys.executable, "-c", CHILD, str(path), str(warm), str(budget)], cwd=ROOT,
                         capture_output=True, text=True, timeout=300, env=env)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


linux_only = pytest.mark.skipif(platform.system() != "Linux", reason="reads the peak from /proc/self/status")


@linux_only
@pytest.mark.parametrize("method", [zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA], ids=["bzip2", "lzma"])
def test_an_eval_padded_to_its_budget_stays_near_it_in_memory(tmp_path, method):
    # Four members of a quarter of the budget each, every one a sample whose content the run
    # keeps: decoded they fit, but holding three trajectories while the fourth is decoded (with
    # an lzma dictionary declared at 3.5 GiB), turned to text and parsed would not.
    budget = 48 * MIB
    got = child_peak(tmp_path, padded_eval(method, budget), budget)
    assert got["over_baseline"] < 1.15 * budget, got
    assert "bytes of memory in total" in got["said"] and "samples/3_epoch_1.json" in got["said"], got


@linux_only
def test_an_eval_inside_its_budget_is_read_whole(tmp_path):
    budget = 48 * MIB
    data = hand_zip([("header.json", HEADER, HEADER, 0)] + [
        (f"samples/{i}_epoch_1.json", sample(i, " " * (8 * MIB)), bz2_compress(sample(i, " " * (8 * MIB))), 12)
        for i in range(2)])
    got = child_peak(tmp_path, data, budget)
    assert got["said"] == "2 read, 0 rejected" and got["over_baseline"] < 1.15 * budget, got


def traced_peak(fn) -> tuple[int, BaseException | None]:
    tracemalloc.start()
    try:
        fn()
        err = None
    except InputError as exc:
        err = exc
    finally:
        _now, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    return peak, err


BUDGET = 8 * MIB


def one_member(payload: bytes) -> bytes:
    return hand_zip([("header.json", HEADER, HEADER, 0),
                     ("samples/1_epoch_1.json", payload, zlib.compress(payload, 9)[2:-4], 8)])


@pytest.mark.parametrize("flood", [b"{}", b"[]", b"1.5", b'"ab"'], ids=["dicts", "lists", "floats", "strings"])
def test_json_that_parses_to_more_than_the_budget_is_refused_before_it_is_parsed(flood):
    # A quarter of the budget decoded; parsed, each `{}` of three bytes is a 64-byte dict
    # and a pointer (twenty-odd times its text).
    payload = b"[" + b",".join([flood] * (BUDGET // 4 // (len(flood) + 1))) + b"]"
    peak, err = traced_peak(lambda: parse_run(one_member(payload), "flood.eval", decode_budget=BUDGET))
    assert err is not None and "memory" in err.message and "samples/1_epoch_1.json" in err.message
    assert err.source == "flood.eval"
    assert peak < 1.1 * BUDGET, f"{peak:,} bytes allocated for a {BUDGET:,}-byte budget"


def test_a_string_made_wide_by_one_character_is_counted_at_its_width():
    # One astral character stores the whole string at four bytes a character.
    payload = sample(1, "\U0001F600" + " " * (BUDGET // 5))
    peak, err = traced_peak(lambda: parse_run(one_member(payload), "wide.eval", decode_budget=BUDGET))
    assert err is not None and "memory" in err.message
    assert peak < 1.1 * BUDGET, f"{peak:,} bytes allocated for a {BUDGET:,}-byte budget"


def test_message_pool_references_are_counted_before_they_are_copied():
    # A few kilobytes: every model event names the whole pool ten times over.
    pool = [{"role": "user", "content": f"hi {i}"} for i in range(1000)]
    events = [{"event": "model", "input_refs": [[0, 1000]] * 10, "output": {"choices": []}} for _ in range(100)]
    payload = json.dumps({"id": 1, "epoch": 1, "messages": [{"role": "user", "content": "x"}],
                          "message_pool": pool, "events": events}).encode()
    data = one_member(payload)
    assert len(data) < 8192
    peak, err = traced_peak(lambda: parse_run(data, "pool.eval", decode_budget=BUDGET))
    assert err is not None and "references" in err.message and "samples/1_epoch_1.json" in err.message
    assert peak < 1.1 * BUDGET, f"{peak:,} bytes allocated for a {BUDGET:,}-byte budget"


def test_attachment_references_are_counted_before_they_are_copied():
    key = "0123456789abcdef0123456789abcdef"
    # each reference inside a longer string makes a copy (one that is the whole string does not)
    messages = [{"role": "user", "content": f"see attachment://{key}"} for _ in range(200)]
    payload = json.dumps({"id": 1, "epoch": 1, "messages": messages,
                          "attachments": {key: "x" * (256 * 1024)}}).encode()
    peak, err = traced_peak(lambda: parse_run(one_member(payload), "attach.eval", decode_budget=BUDGET))
    assert err is not None and "references" in err.message
    assert peak < 1.1 * BUDGET, f"{peak:,} bytes allocated for a {BUDGET:,}-byte budget"
    # the same sample with a few references is read, each resolved
    few = json.dumps({"id": 1, "epoch": 1, "messages": messages[:3], "attachments": {key: "x" * 1000}}).encode()
    run = parse_run(one_member(few), "few.eval", decode_budget=BUDGET)
    assert [m.content for m in run.trajectories[0].messages] == ["see " + "x" * 1000] * 3


def test_a_reference_that_is_the_whole_string_is_not_a_copy():
    # Inspect puts a large content in the attachments and the reference in its place: resolved,
    # the content is the attachment itself, however many messages and events name it.
    key = "0123456789abcdef0123456789abcdef"
    messages = [{"role": "user", "content": f"attachment://{key}"} for _ in range(200)]
    payload = json.dumps({"id": 1, "epoch": 1, "messages": messages,
                          "attachments": {key: "x" * (256 * 1024)}}).encode()
    run = parse_run(one_member(payload), "whole.eval", decode_budget=BUDGET)
    contents = [m.content for m in run.trajectories[0].messages]
    assert len({id(c) for c in contents}) == 1 and contents[0] == "x" * (256 * 1024)


JSON_SHAPES = {
    "dicts": b"[" + b",".join([b"{}"] * 50_000) + b"]",
    "lists": b"[" + b",".join([b"[[]]"] * 30_000) + b"]",
    "one-entry dicts": b"[" + b",".join([b'{"a":{}}'] * 20_000) + b"]",
    "distinct keys": b"{" + b",".join(b'"k%d":0' % i for i in range(20_000)) + b"}",
    "numbers": b"[" + b",".join([b"123456789", b"1.5e300", b"9" * 18] * 20_000) + b"]",
    "strings": b"[" + b",".join([b'"ab"', '"é€"'.encode(), b'"\\ud83d\\ude00"'] * 20_000) + b"]",
    "astral then ascii": b'["\xf0\x9f\x98\x80' + b"x" * 200_000 + b'"]',
    "escaped wide then ascii": b'["\\u20ac' + b"x" * 200_000 + b'"]',
    "literals": b"[" + b",".join([b"true", b"null"] * 30_000) + b"]",
    "nested": b"[" * 500 + b"]" * 500,
    "one string": b'"' + b"x" * 300_000 + b'"',
}


@pytest.mark.parametrize("name", list(JSON_SHAPES))
def test_the_parse_cost_bounds_what_parsing_takes(name):
    raw = JSON_SHAPES[name]
    tracemalloc.start()
    try:
        json.loads(raw.decode(json.detect_encoding(raw), "surrogatepass"))
        _now, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak <= _zip.json_parse_cost(raw) <= _zip.COST_CEILING * len(raw) + 4096


def test_real_inspect_members_cost_what_the_estimate_allows(shared_real):
    # The estimate over-counts (a quote inside a string counts as a string's): on the largest
    # members of real logs it stays within a few times the parse.
    for path in sorted((shared_real / "inspect_ai").rglob("*.eval")):
        with zipfile.ZipFile(path) as zf:
            for info in sorted(zf.infolist(), key=lambda i: i.file_size)[-4:]:
                raw = zf.read(info)
                tracemalloc.start()
                try:
                    json.loads(raw.decode("utf-8"))
                    _now, peak = tracemalloc.get_traced_memory()
                finally:
                    tracemalloc.stop()
                assert peak <= _zip.json_parse_cost(raw) <= 5 * peak, (path.name, info.filename)


@pytest.mark.parametrize("method", [zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA], ids=["bzip2", "lzma"])
def test_an_agentdojo_zip_member_is_decoded_within_its_cap_whatever_it_declares(monkeypatch, method):
    # zipfile asks bzip2 and lzma for a whole block at once: a member lying about its size
    # (declaring 100 bytes) was decoded whole before any cap was looked at.
    monkeypatch.setattr(agentdojo_dir, "MAX_FILE_BYTES", MIB)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=method) as zf:
        zf.writestr("pipe/workspace/user_task_0/none/none.json", b" " * (32 * MIB))
    data = bytearray(buf.getvalue())
    data[22:26] = struct.pack("<L", 100)  # the local header's declared size …
    central = data.rindex(b"PK\x01\x02")
    data[central + 24:central + 28] = struct.pack("<L", 100)  # … and the central directory's
    peak, err = traced_peak(lambda: agentdojo_dir.zip_files(bytes(data), "bomb.zip"))
    assert err is not None and err.source == "bomb.zip" and "expands past 1,048,576 bytes" in err.message
    assert peak < 4 * MIB, f"{peak:,} bytes allocated for a member capped at {MIB:,}"


def test_copies_that_fit_are_read_when_the_parse_was_counted_at_its_ceiling():
    # A small member is counted at the ceiling (no token counted); when its references' copies
    # would pass the budget only with that over-count, the parse is measured, and the sample read.
    key = "0123456789abcdef0123456789abcdef"
    messages = [{"role": "user", "content": f"see attachment://{key}"} for _ in range(8)]
    payload = json.dumps({"id": 1, "epoch": 1, "messages": messages, "attachments": {key: "x" * 100_000}}).encode()
    budget = _zip.COST_CEILING * len(payload) + 64 * 1024  # the ceiling fits; it and the copies (800 KB) do not
    run = parse_run(one_member(payload), "fits.eval", decode_budget=budget)
    assert [m.content for m in run.trajectories[0].messages] == ["see " + "x" * 100_000] * 8
