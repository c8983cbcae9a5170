"""Every compressed ``.eval`` member (stored, deflate, bzip2, lzma, zstd) is decoded in chunks
no larger than what its budget has left (issue 24): a bomb is refused before its output is in
memory. ``zipfile`` asks bzip2 and lzma for all a compressed block holds (a 2 KB member took the
CLI to 4.3 GB); these tests watch the allocations while a bomb is read."""

from __future__ import annotations

import io
import json
import tracemalloc
import zipfile

import pytest

from scoring.errors import InputError
from scoring.importers import _zip as budgets
from scoring.importers import inspect_log, parse_run

from .test_inspect_zstd import HEADER, _zip

BOMB_BYTES = 48 * 1024 * 1024
BUDGET = 8 * 1024 * 1024  # more than a bzip2 decoder's own state (3.6 MB), which the budget counts
METHODS = {"stored": zipfile.ZIP_STORED, "deflate": zipfile.ZIP_DEFLATED, "bzip2": zipfile.ZIP_BZIP2,
           "lzma": zipfile.ZIP_LZMA, "zstd": inspect_log.ZIP_ZSTANDARD}


def eval_file(method: int, members: list[tuple[str, bytes]]) -> bytes:
    if method == inspect_log.ZIP_ZSTANDARD:
        return _zip(members, 93)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=method) as zf:
        for name, payload in members:
            zf.writestr(name, payload)
    return buf.getvalue()


@pytest.fixture(autouse=True)
def small_budget(monkeypatch):
    monkeypatch.setattr(budgets, "MIN_TOTAL_BYTES", BUDGET)
    monkeypatch.setattr(budgets, "TOTAL_RATIO", 1)


@pytest.mark.parametrize("name", [m for m in METHODS if m != "stored"])
def test_a_bomb_is_refused_before_its_output_is_in_memory(name):
    data = eval_file(METHODS[name], [("header.json", HEADER), ("samples/1_epoch_1.json", b" " * BOMB_BYTES)])
    assert len(data) < BOMB_BYTES // 100  # a bomb: it expands a hundredfold and more
    tracemalloc.start()
    try:
        with pytest.raises(InputError, match="in total") as err:
            parse_run(data, "bomb.eval")
        _now, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert err.value.source == "bomb.eval" and "samples/1_epoch_1.json" in err.value.message
    assert peak < 4 * BUDGET, f"{name}: {peak:,} bytes allocated for a {BUDGET:,}-byte budget"


@pytest.mark.parametrize("name", list(METHODS))
def test_every_method_reads_a_real_member_and_checks_its_crc(name):
    sample = json.dumps({"id": 1, "epoch": 1, "messages": [{"role": "user", "content": "hi"}],
                         "pad": "ab" * 300_000}).encode()
    data = eval_file(METHODS[name], [("header.json", HEADER), ("samples/1_epoch_1.json", sample)])
    run = parse_run(data, "ok.eval")
    assert [t.id for t in run.trajectories] == ["1-epoch1"] and not run.rejected
    info = zipfile.ZipFile(io.BytesIO(data)).getinfo("samples/1_epoch_1.json")
    at = data.rindex(info.CRC.to_bytes(4, "little"))  # the central directory's copy: what the reader checks
    corrupt = data[:at] + b"\0\0\0\0" + data[at + 4:]
    run = parse_run(corrupt, "bad.eval")
    assert not run.trajectories and "CRC" in run.rejected[0].message


def test_an_lzma_header_declaring_a_huge_dictionary_does_not_allocate_it():
    data = bytearray(eval_file(zipfile.ZIP_LZMA, [("header.json", HEADER), ("samples/1_epoch_1.json", b"[]")]))
    info = zipfile.ZipFile(io.BytesIO(bytes(data))).getinfo("samples/1_epoch_1.json")
    start = info.header_offset + 30 + len(info.filename.encode()) + len(info.extra)
    data[start + 5:start + 9] = (0xE0000000).to_bytes(4, "little")  # 3.5 GiB, in the LZMA1 properties
    tracemalloc.start()
    try:
        run = parse_run(bytes(data), "dict.eval")
        _now, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert run.rejected or run.trajectories is not None
    assert peak < 4 * BUDGET
