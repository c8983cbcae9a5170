"""Two uploads at once keep no more than the workspace's caps (issue 34, attack finding F7): the
check of what every upload keeps and the write of one are one step, under a lock between
processes, so a second upload's check sees the first one's files.

The race is made to happen every time: the first upload is paused right after its check (in a
thread of this process, as a server's sessions are, or in a process of its own, as a second
server on the same workspace is), and the second runs while it is held there — to its end
where nothing orders the two, or up to the lock, where the lock does. Only then does the first
go on.
"""

from __future__ import annotations

import fcntl
import subprocess
import sys
import threading

import pytest

from scoring.dask_engine import table_zip
from scoring.errors import InputError

from .conftest import ROOT
from .upload_paused import UPLOAD_FILES, upload_of

AT_MOST = UPLOAD_FILES + UPLOAD_FILES // 2
"""The cap of the race: room for one upload, not for two."""
HANG_GUARD_S = 120
"""How long a step of the race is waited for before the test fails rather than hang (no figure
is measured: every step happens at once but for a deadlock)."""


class _FirstInAThread:
    """The first upload, in a thread of this process, held after its check until ``go``."""

    def __init__(self, folder, cap, monkeypatch) -> None:
        self.checked, self.release, self.outcome = threading.Event(), threading.Event(), ""
        original = table_zip.kept_in

        def kept_in(uploads):
            got = original(uploads)
            if threading.current_thread() is self.thread:
                self.checked.set()
                self.release.wait(HANG_GUARD_S)
            return got

        monkeypatch.setattr(table_zip, "kept_in", kept_in)
        self.thread = threading.Thread(target=self._run, args=(folder, cap), daemon=True)
        self.thread.start()

    def _run(self, folder, cap) -> None:
        try:
            table_zip.unpack(upload_of("first", cap), "first.zip", folder)
            self.outcome = "kept"
        except InputError as exc:
            self.outcome = f"refused: {exc}"

    def wait_checked(self) -> bool:
        return self.checked.wait(HANG_GUARD_S)

    def go(self) -> str:
        self.release.set()
        self.thread.join(HANG_GUARD_S)
        return self.outcome


class _FirstInAProcess:
    """The first upload, in a process of its own (``tests.upload_paused``), held after its check
    until ``go``."""

    def __init__(self, folder, cap, _monkeypatch) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "tests.upload_paused", str(folder), cap, str(AT_MOST)],
                                     cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def wait_checked(self) -> bool:
        assert self.proc.stdout is not None
        return self.proc.stdout.readline().strip() == "checked"

    def go(self) -> str:
        out, _err = self.proc.communicate("go\n", timeout=HANG_GUARD_S)
        return out.strip()


@pytest.mark.parametrize("cap", ["files", "bytes"])
@pytest.mark.parametrize("first_in", [_FirstInAThread, _FirstInAProcess], ids=["thread", "process"])
def test_two_uploads_at_once_keep_no_more_than_the_cap(tmp_path, monkeypatch, cap, first_in):
    monkeypatch.setattr(table_zip, "MAX_KEPT_FILES" if cap == "files" else "MAX_KEPT_BYTES", AT_MOST)
    folder = tmp_path / "ws"
    second_waits = threading.Event()  # the second upload has checked, or is waiting for the lock
    second: dict[str, str] = {}
    original_kept_in, original_flock = table_zip.kept_in, fcntl.flock

    def kept_in(uploads):
        got = original_kept_in(uploads)
        if threading.current_thread() is second_thread:
            second_waits.set()
        return got

    def flock(fd, operation):
        if threading.current_thread() is second_thread and operation & fcntl.LOCK_EX:
            second_waits.set()
        return original_flock(fd, operation)

    def run_second() -> None:
        try:
            table_zip.unpack(upload_of("second", cap), "second.zip", folder)
            second["outcome"] = "kept"
        except InputError as exc:
            second["outcome"] = f"refused: {exc}"

    monkeypatch.setattr(table_zip, "kept_in", kept_in)
    monkeypatch.setattr(fcntl, "flock", flock)
    second_thread = threading.Thread(target=run_second, daemon=True)
    first = first_in(folder, cap, monkeypatch)
    assert first.wait_checked(), "the first upload never reached its check"
    second_thread.start()
    assert second_waits.wait(HANG_GUARD_S), "the second upload neither checked nor waited for the lock"
    first_outcome = first.go()
    second_thread.join(HANG_GUARD_S)

    kept = original_kept_in(folder / table_zip.UPLOADS_DIR)
    assert (kept.files if cap == "files" else kept.bytes) <= AT_MOST, (first_outcome, second)
    assert first_outcome == "kept"
    assert second["outcome"].startswith("refused: second.zip")
    assert [up.name for up in table_zip.uploads(folder)] == ["first.zip"]

