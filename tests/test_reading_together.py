"""Files read at once in one process share one budget (issue 34 item 6): a server's visitors
uploading padded logs together take what one file may, in turn (two padded ``.eval`` uploads at
once took a server past two budgets, each within its own)."""

from __future__ import annotations

import threading
import time

import pytest

from scoring.importers import IMPORTERS, _zip, parse_run

from .test_eval_bombs import HEADER, METHODS, eval_file

SMALL = 8 * 1024 * 1024


@pytest.fixture
def small_total(monkeypatch):
    """Every file's budget ``SMALL`` (its size × 1, at least ``SMALL``), and all of them together
    at most one of those."""
    monkeypatch.setattr(_zip, "MIN_TOTAL_BYTES", SMALL)
    monkeypatch.setattr(_zip, "TOTAL_RATIO", 1)
    monkeypatch.setattr(_zip, "READING_TOTAL_BYTES", SMALL)


def _inside_parse(monkeypatch, fmt: str, hold_s: float) -> tuple[list[int], list[int]]:
    """``fmt``'s parse wrapped: it notes how many parses are inside at once, and the budget held
    then, and stays ``hold_s`` seconds (long enough for another thread to come in)."""
    inside, most, held = [0], [0], []
    lock = threading.Lock()
    real = IMPORTERS[fmt].parse

    def parse(data, source, options):
        with lock:
            inside[0] += 1
            most[0] = max(most[0], inside[0])
            held.append(_zip.reading_in_use())
        try:
            time.sleep(hold_s)
            return real(data, source, options)
        finally:
            with lock:
                inside[0] -= 1

    monkeypatch.setattr(IMPORTERS[fmt], "parse", parse)
    return most, held


def _together(*calls) -> list:
    out: list = [None] * len(calls)

    def run(i, call):
        try:
            out[i] = call()
        except Exception as exc:  # the test reads it
            out[i] = exc

    threads = [threading.Thread(target=run, args=(i, c)) for i, c in enumerate(calls)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads), "a read never ended: the budgets deadlocked"
    return out


@pytest.mark.parametrize("name", ["bzip2", "lzma"])
def test_two_padded_logs_read_at_once_are_read_in_turn_within_one_budget(monkeypatch, small_total, name):
    """Two bombs of one codec from two threads (an app's two sessions): each parse holds its
    budget, so the second waits for the first; before, both decoded at once."""
    bomb = eval_file(METHODS[name], [("header.json", HEADER), ("samples/1_epoch_1.json", b" " * (6 * SMALL))])
    most, held = _inside_parse(monkeypatch, "inspect", hold_s=0.3)
    got = _together(lambda: parse_run(bomb, "a.eval"), lambda: parse_run(bomb, "b.eval"))
    assert [type(g).__name__ for g in got] == ["OverBudgetError"] * 2, got  # each refused as ever
    assert most[0] == 1 and held == [SMALL, SMALL]
    assert _zip.reading_in_use() == 0


def test_small_files_are_read_together_and_a_large_one_waits_its_turn_first_come(monkeypatch):
    """Budgets that fit together are held together; one that does not fit waits, and a later
    small one does not pass it (first come, first served); a thread reading inside its own read
    (a file's continuation) does not wait for itself."""
    monkeypatch.setattr(_zip, "READING_TOTAL_BYTES", 100)
    order: list[str] = []
    first_in, release_first = threading.Event(), threading.Event()

    def hold(name: str, n: int, until: threading.Event | None = None, entered: threading.Event | None = None):
        with _zip.reading(n):
            order.append(name)
            if entered is not None:
                entered.set()
            if until is not None:
                assert until.wait(10)
            with _zip.reading(n):  # nested: within the outer turn
                pass

    a = threading.Thread(target=hold, args=("a", 60, release_first, first_in))
    a.start()
    assert first_in.wait(10)
    big = threading.Thread(target=hold, args=("big", 80))
    big.start()
    time.sleep(0.2)  # big is waiting: 60 + 80 > 100
    small = threading.Thread(target=hold, args=("small", 10))
    small.start()
    time.sleep(0.2)  # small would fit beside a, but big came first
    assert order == ["a"]
    release_first.set()
    for t in (a, big, small):
        t.join(10)
    assert order == ["a", "big", "small"] and _zip.reading_in_use() == 0
