"""Uploaded tables vetted in a process of their own, whose memory and time are bounded.

Vetting reads an upload as the page will (``table_reader.vet`` with ``every_run``): its
summaries, aggregates, Inconclusive index and every row. What those reads cost is the file's to
decide, not ours: a Parquet column's dictionary, a page's compressed size, a footer's byte
counts are all the writer's word, and a value that the footer calls small may decode to
gigabytes (issue 34, V9: a dictionary-encoded id of a megabyte, repeated on each row of the
Inconclusive index, was decoded whole in the server; benches/RESULTS.md has the figures).
Checking each of pyarrow's decoders against each lie is a race one loses; the operating system's
count of the memory the reads took is a figure nobody can forge. So the reads run in a child
process whose resident memory the server watches and which it ends at ``MAX_VETTING_RSS`` (or
when one table takes longer than ``VETTING_SECONDS``): such an upload is refused as a likely
bomb, the server never holds its decoded bytes, and a crash of a decoder on a malformed part
ends the child, not the server.

One child checks a listing's tables in turn (its start, importing pyarrow, costs more than
checking a small table). A table it was checking when it was ended is checked again alone, in a
new child, before it is refused (what the tables before it left in memory is not its fault).

A table that passes decodes, in the page's later reads, the same bytes the child decoded within
the bound: an upload's folder is named by its SHA-256 and never changes.
"""

from __future__ import annotations

import gc
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from ..errors import CheckInterrupted
from ..ingest import die_with_parent

MAX_VETTING_RSS = 512 << 20
"""The most resident memory the checking process may reach (its interpreter, pyarrow and the
project's modules included), whatever the upload."""
VETTING_SECONDS = 600.0
"""The longest one table's check may take; an upload within the zip's caps that takes longer is
refused."""
WATCH_SECONDS = 0.002
"""How often the child's resident memory is read (``/proc``): between two reads a decoder can
add little before it is seen."""

_PACKAGE_PARENT = str(Path(__file__).resolve().parents[2])


def _resident_bytes(pid: int) -> int | None:
    """The process's resident memory (``VmRSS``), or None when it cannot be read (gone, or no
    ``/proc`` on this system)."""
    try:
        with open(f"/proc/{pid}/status", "rb") as fh:
            for line in fh:
                if line.startswith(b"VmRSS:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def vet_upload(location: str, root: str) -> str | None:
    """``table_reader.vet(location, root=root, every_run=True)`` in a child process (``vet_uploads``)."""
    answers = vet_uploads([(location, root)])
    assert answers is not None  # waited for a slot as long as it took
    return answers[0]


def vet_uploads(tables: Sequence[tuple[str, str]], wait: float | None = None) -> list[str | None] | None:
    """For each (location, root), ``table_reader.vet(location, root=root, every_run=True)`` run in
    a child process: its answer (why the table cannot be offered, or None), or a refusal when the
    child passed ``MAX_VETTING_RSS`` of memory or ``VETTING_SECONDS`` on that table, or ended
    without answering for it. ``wait``: the longest this call waits for one of the
    ``MAX_CHECKS_AT_ONCE`` slots (None: as long as it takes); None, nothing checked, when no slot
    was free by then (a listing asks with 0: it never waits behind other members' checks)."""
    if wait is None:
        _checks_running.acquire()
    elif not (_checks_running.acquire(timeout=wait) if wait > 0 else _checks_running.acquire(blocking=False)):
        return None
    try:
        answers: list[str | None] = []
        while len(answers) < len(tables):
            answers.extend(_vet_in_child(tables[len(answers):]))
        return answers
    finally:
        _checks_running.release()


MAX_CHECKS_AT_ONCE = 2
"""How many checking processes a server runs at once (each bounded by ``MAX_VETTING_RSS``): the
rest wait their turn, so N members uploading together cost at most this many bounds."""
_checks_running = threading.BoundedSemaphore(MAX_CHECKS_AT_ONCE)
"""The slots: a check holds one while its process runs (taken without waiting by a listing)."""


def _vet_in_child(tables: Sequence[tuple[str, str]]) -> list[str | None]:
    """The answers of one child for the first of ``tables`` (at least one): all of them, or those
    before the table it was ended on (which is then refused, when it was the child's first)."""
    env = dict(os.environ, LITMUS_VETTING_PARENT=str(os.getpid()),
               PYTHONPATH=os.pathsep.join(filter(None, [_PACKAGE_PARENT, os.environ.get("PYTHONPATH")])),
               # one thread for pyarrow's decoding: the bound is on the check, not on how many cores the server has
               OMP_NUM_THREADS="1", ARROW_IO_THREADS="1")
    child = subprocess.Popen([sys.executable, "-m", __name__], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, env=env)
    got: list[str | None] = []

    def read_answers() -> None:
        assert child.stdout is not None
        for line in child.stdout:
            try:
                answer = json.loads(line)["refused"]
            except (ValueError, KeyError, TypeError):
                continue  # not an answer (a library's stray print)
            got.append(None if answer is None else str(answer))

    reader = threading.Thread(target=read_answers, name="vetting-answers", daemon=True)
    reader.start()
    assert child.stdin is not None
    try:
        child.stdin.write(json.dumps([list(t) for t in tables]).encode("utf-8"))
        child.stdin.close()
    except OSError:  # the child is gone already: it answers nothing
        pass
    stopped = _watch(child, got)
    reader.join()
    if len(got) >= len(tables):
        return got[:len(tables)]
    if got:  # ended on a later table: that one is checked again from a new child
        return got
    if stopped is not None:
        return [stopped]
    if child.returncode in STOPPED_FROM_OUTSIDE:  # not by its watch, nor a crash of its decoding
        raise CheckInterrupted(f"its check was stopped from outside the server (the checking process got signal "
                               f"{-child.returncode}: the system's memory killer, or an operator)")
    return [f"its check ended without an answer (the checking process exited with code {child.returncode})"]


STOPPED_FROM_OUTSIDE = frozenset({-signal.SIGKILL, -signal.SIGTERM})
"""How a checking process ends when something outside the server stops it (this server's own
watch says why it stopped one): the upload was not checked, so it is neither refused nor
offered. A crash of the decoding (SIGSEGV, SIGABRT, SIGBUS) is the upload's: refused."""


def _watch(child: subprocess.Popen, got: list) -> str | None:
    """Wait for ``child``, ending it when its memory passes ``MAX_VETTING_RSS`` or one table takes
    longer than ``VETTING_SECONDS``: why it was ended, or None when it ended by itself."""
    answered, since = 0, time.monotonic()
    while child.poll() is None:
        if len(got) != answered:
            answered, since = len(got), time.monotonic()
        why = None
        if (_resident_bytes(child.pid) or 0) > MAX_VETTING_RSS:
            why = (f"checking it took more than {MAX_VETTING_RSS >> 20:,} MiB of memory (what its files decode to, not "
                   "what they say): refused as a likely bomb")
        elif time.monotonic() - since > VETTING_SECONDS:
            why = f"checking it took longer than {VETTING_SECONDS:,.0f} s: refused"
        if why is not None:
            child.kill()
            child.wait()
            return why
        time.sleep(WATCH_SECONDS)
    return None


def _main() -> None:
    # the check's bounds are kept by its parent's watch: a child whose parent died (a server
    # stopped mid-check) would decode on unwatched, so it dies with it
    die_with_parent(int(os.environ.get("LITMUS_VETTING_PARENT", os.getppid())))
    import pyarrow as pa  # optional: the dask extra (the child runs only where an upload is vetted)

    from . import table_reader  # optional: the dask extra's pyarrow; this module is imported without it

    pa.set_cpu_count(1)
    pa.set_io_thread_count(1)
    for location, root in json.loads(sys.stdin.buffer.read()):
        print(json.dumps({"refused": table_reader.vet(location, root=root, every_run=True)}), flush=True)
        gc.collect()  # what one table's check held is not the next one's to carry
        pa.default_memory_pool().release_unused()


if __name__ == "__main__":
    _main()
