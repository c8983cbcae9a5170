"""The workspace's own copies of run files: hashed as they are made (a reflink where the file system
has one), kept under a temporary name until the run is committed, swept when abandoned, and
checked against their hash before replay reads them."""

from __future__ import annotations

import collections
import contextlib
import errno
import hashlib
import json
import os
import re
import socket
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from ..errors import (
    InputError,
)
from ..files import check_regular, open_regular
from ..importers import canonical
from ..model import (
    Rejection,
    RunHeader,
)
from ..recapture import PayloadJoin
from ..settle import listed

try:
    import fcntl
except ImportError:  # not on Windows: no reflinks there, a copy is made
    fcntl = None  # type: ignore[assignment]


@contextlib.contextmanager
def _reading(path: Path) -> Iterator[None]:
    """An OSError while reading ``path`` becomes an InputError naming it."""
    try:
        yield
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror or exc}", source=str(path)) from exc


class FileState(NamedTuple):
    """What tells that a file changed under an import."""

    size: int
    mtime_ns: int


def file_state(path: Path) -> FileState:
    st = check_regular(path)  # a device, FIFO or folder is refused before anything reads it
    return FileState(st.st_size, st.st_mtime_ns)


def sha256_of_file(path: Path) -> str:
    h = hashlib.sha256()
    with _reading(path), open_regular(path) as fh:
        while chunk := fh.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def rejection_dict(r: Rejection) -> dict:
    return {"source": r.source, "line": r.line, "record_id": r.record_id, "message": r.message}


@dataclass
class PendingCopy:
    """A file this import keeps in the workspace folder: under a temporary name until the run
    is committed (``publish``), removed if the import fails. ``read == final`` when an earlier
    import made it. As a context manager it discards itself on the way out (nothing once
    published)."""

    read: Path
    final: Path
    rejections: tuple[Rejection, ...] = ()
    """A converted run's rejected records (the first of them kept beside the copy, as ``side``)."""
    side: Path | None = None
    format_metrics: dict | None = None
    """A converted run's format figures (its importer's, from the original bytes)."""
    terminations: dict | None = None
    """A converted run's counts of recorded endings (its importer's)."""
    importer: RunHeader | None = None
    """A converted run's header as its importer made it: what it read besides the log (the proof
    side log it joined, ``pipeline.with_read_proof``), which the copy's header line never carries."""
    sha256: str | None = None
    """The SHA-256 of the copy's bytes (checked before replay reads it)."""
    companion: PendingCopy | None = None
    """A file kept with this one, published before it and discarded with it (an Inspect log's
    proof side log beside the log's original bytes, where the importer finds it again)."""

    @property
    def pending(self) -> bool:
        return self.read != self.final

    def publish(self) -> None:
        if self.companion is not None:
            self.companion.publish()
        if not self.pending:
            return
        if self.side is not None:
            # Before the copy itself: a copy that exists always has its rejections beside it.
            tmp = temporary_name(self.side)
            tmp.write_text(json.dumps([rejection_dict(r) for r in listed(self.rejections)]))
            os.replace(tmp, self.side)
        os.replace(self.read, self.final)
        self.read = self.final

    def discard(self) -> None:
        if self.companion is not None:
            self.companion.discard()
        if self.pending:
            self.read.unlink(missing_ok=True)

    def __enter__(self) -> PendingCopy:
        return self

    def __exit__(self, *exc) -> None:
        self.discard()


_HOST = socket.gethostname()


def temporary_name(dest: Path) -> Path:
    # Unique per import (two sessions of one server may import the same content at once), and
    # naming its process, so a later import can tell an abandoned copy from one in progress.
    return dest.with_name(f"{dest.name}.tmp-{_HOST}-{os.getpid()}-{uuid.uuid4().hex[:12]}")


_TEMPORARY = re.compile(r".+\.tmp-(?P<host>.+)-(?P<pid>[0-9]+)-[0-9a-f]{12}")


def sweep_abandoned_copies(folder: Path) -> list[Path]:
    """Remove the temporary copies of imports whose process is gone (killed mid-import: no
    ``finally`` ran) and return them. Only this host's, and only where the process that named
    the copy no longer exists; a copy of a live process (an import in another thread, or
    another server) is left alone. Age is no test: a hard link has its source's mtime."""
    removed: list[Path] = []
    try:
        names = os.listdir(folder)
    except FileNotFoundError:
        return removed
    for name in names:
        m = _TEMPORARY.fullmatch(name)
        if m is None or m["host"] != _HOST or _process_exists(int(m["pid"])):
            continue
        path = folder / name
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
            removed.append(path)
    return removed


def _process_exists(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process
    return True


FICLONE = 0x40049409
"""Linux's ``ioctl`` that makes ``dest`` a copy-on-write clone of ``src`` (btrfs, XFS, …)."""


COPY_CHUNK = 1 << 20


def _reflink(src, dest) -> bool:
    """Clone ``src`` into ``dest`` (open files) where the file system can; False elsewhere."""
    if fcntl is None:
        return False
    try:
        fcntl.ioctl(dest.fileno(), FICLONE, src.fileno())
    except OSError:
        return False  # not supported here (ext4, tmpfs), or across file systems
    return True


def _write_chunk(out, data: bytes) -> None:
    out.write(data)


def copy_file(path: Path, dest: Path) -> str:
    """Copy a regular file to a new ``dest``; the SHA-256 of the bytes copied.

    A reflink shares the blocks until either file is written (instant, no space), then is
    hashed from the clone; anywhere else the bytes are streamed and hashed as they go. Either
    way ``dest`` is a file of its own: writing to ``path`` later never changes it. A read
    error is an InputError naming ``path``; a write error (a full disk) stays an OSError."""
    with _reading(path):
        src = open_regular(path)
    with src, open(dest, "xb") as out:
        if _reflink(src, out):
            return sha256_of_file(dest)
        h = hashlib.sha256()
        while True:
            with _reading(path):
                chunk = src.read(COPY_CHUNK)
            if not chunk:
                return h.hexdigest()
            h.update(chunk)
            _write_chunk(out, chunk)


WRITE_ERRORS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})
"""What a kernel copy raises for the destination (a full disk, a quota): the workspace's error,
kept as an OSError (``Workspace._writing`` names the folder), never blamed on the input."""


def kernel_copy(path: Path, dest: Path) -> None:
    """Copy a regular file to a new ``dest`` by the kernel (a reflink, else ``copy_file_range``,
    else ``sendfile``, else a streamed copy): its bytes never pass through Python and nothing
    hashes them here. The caller hashes ``dest`` (the run key is of the bytes the workspace holds)
    and ``path`` again (a torn copy tells). A read error is an InputError naming ``path``; a write
    error stays an OSError."""
    with _reading(path):
        src = open_regular(path)
    with src, open(dest, "xb", buffering=0) as out:
        if _reflink(src, out):
            return
        fin, fout = src.fileno(), out.fileno()
        for kernel in (_copy_file_range, _sendfile):
            try:
                if kernel(fin, fout):
                    return
            except OSError as exc:
                if exc.errno in WRITE_ERRORS:
                    raise
                # not offered here (an old kernel, another file system): the next way goes on
                # from where this one stopped (both offsets moved with what it copied)
        while True:
            with _reading(path):
                chunk = src.read(COPY_CHUNK)
            if not chunk:
                return
            _write_chunk(out, chunk)


def _copy_file_range(fin: int, fout: int) -> bool:
    """All of ``fin`` from its offset into ``fout`` by ``os.copy_file_range``; False where Python
    has none."""
    if not hasattr(os, "copy_file_range"):
        return False
    while os.copy_file_range(fin, fout, KERNEL_COPY_BYTES):
        pass
    return True


def _sendfile(fin: int, fout: int) -> bool:
    """All of ``fin`` from its offset into ``fout`` by ``os.sendfile``; False where it has none."""
    if not hasattr(os, "sendfile"):
        return False
    while os.sendfile(fout, fin, None, KERNEL_COPY_BYTES):
        pass
    return True


KERNEL_COPY_BYTES = 1 << 30
"""The most one kernel copy call is asked for (it may copy less; the loop asks again)."""


def same_content(path: Path, expected: str, found: str) -> None:
    if found != expected:
        raise InputError("the file changed while it was being imported (its bytes are not the ones hashed for "
                         "the run key; is the harness still writing it?); import it again once it is complete",
                         source=str(path))


_VERIFIED: dict[tuple, str] = {}
"""(path, inode, size, mtime, ctime) → the SHA-256 that file was found to have: a copy is
hashed again only when its metadata changed (any write changes its ctime)."""


def _verified(path: str, expected: str | None) -> str:
    """``path``, once its SHA-256 is ``expected`` (None: nothing to check); InputError when
    the copy is missing or its bytes are not the ones imported."""
    if expected is None:
        return path
    try:
        st = os.stat(path)
    except OSError as exc:
        raise InputError(f"the workspace's copy of the run cannot be read ({exc.strerror or exc}); "
                         "import the run again", source=path) from exc
    key = (path, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    if _VERIFIED.get(key) != expected:
        found = sha256_of_file(Path(path))
        if found != expected:
            raise InputError(
                f"the workspace's copy of the run changed since import (SHA-256 {found[:12]}…, imported as "
                f"{expected[:12]}…): it was edited or replaced (before schema 7, copies were hard links to the "
                "imported file, so editing that file changed them); import the original run again",
                source=path)
        _VERIFIED[key] = expected
    return path


def located(path: str | None, files: Path) -> str | None:
    """Where a stored copy is: a path stored relative to the workspace's folder (``files``) is
    read there; an absolute one (stored before paths were relative) where it was, or, when the
    workspace was moved since, by its name in the folder (copies are named by their content)."""
    if not path:
        return path
    p = Path(path)
    if not p.is_absolute():
        return str(files / p)
    if not p.exists() and (files / p.name).exists():
        return str(files / p.name)
    return path


def located_run(run: dict, files: Path) -> dict:
    """``run`` (a row of ``runs``) with its copies' paths as they are read (``located``)."""
    return {**run, "stored_path": located(run.get("stored_path"), files),
            "payloads_path": located(run.get("payloads_path"), files),
            **({"original_path": located(run["original_path"], files)} if "original_path" in run else {})}


def verified_copy(run: dict) -> str:
    """The run's stored copy, checked against its recorded SHA-256 (for a canonical copy made
    before schema 7: the content hash it is named after; a converted copy made then was
    written by the workspace, never linked, and is not checked)."""
    path = run["stored_path"]
    expected = run.get("stored_sha256")
    if expected is None and run["format"] == canonical.NAME:
        stem = Path(path).name.removesuffix(".jsonl")
        expected = stem if canonical.HEX64.fullmatch(stem) else None
    return _verified(path, expected)


def verified_side_log(run: dict) -> str:
    """The run's copy of its side log, checked against the hash it is named after."""
    path = run["payloads_path"]
    stem = Path(path).name.removesuffix(".payloads.jsonl")
    return _verified(path, stem if canonical.HEX64.fullmatch(stem) else None)


_SIDE_LOGS: collections.OrderedDict[tuple, PayloadJoin] = collections.OrderedDict()
_SIDE_LOGS_KEPT = 2
_SIDE_LOGS_LOCK = threading.Lock()


def side_log_join(path: str) -> PayloadJoin:
    """A run's side log, loaded once per file (path, inode, size, mtime, ctime: any write
    changes one) and kept for the next replays (apply it with ``keep=True``): a replay read
    and hashed the whole side log again. The last few are kept."""
    st = os.stat(path)
    key = (path, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    with _SIDE_LOGS_LOCK:
        join = _SIDE_LOGS.get(key)
        if join is not None:
            _SIDE_LOGS.move_to_end(key)
            return join
    join = PayloadJoin(path)
    with _SIDE_LOGS_LOCK:
        _SIDE_LOGS[key] = join
        while len(_SIDE_LOGS) > _SIDE_LOGS_KEPT:
            _SIDE_LOGS.popitem(last=False)
    return join
