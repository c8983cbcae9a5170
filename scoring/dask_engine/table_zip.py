"""A score table uploaded as a zip (the app in team mode, where no one types a location).

A zip of the folder ``score --out`` wrote (and, anywhere in it, the run files it scored, for
replay) is unpacked into the workspace's folder, one folder per upload named by the zip's
SHA-256, and opened from there with that folder as its root: its rows are read only from
inside it (``table_reader.source_of``), never from the server's other files.

Unpacking is bounded before anything is written: the zip's own size; its central directory's
entry count and size, read from the end-of-central-directory record (and its zip64 record) and
counted by walking the directory's fixed-size headers, before ``zipfile`` builds a member list
(it would build one object per entry the directory holds, whatever count the record declares);
the bytes each member and all of them decode to (counted as they are decoded, never from the
sizes the zip declares); only stored and deflated members (what ``zip -r`` and Python's
``shutil.make_archive`` write; ``zipfile`` decodes deflate in bounded reads); no member whose
name leaves the folder (absolute, ``..``, a drive, a backslash) and no links (every member is
written as a regular file of its own bytes); at most MAX_UPLOAD_TABLES score tables. Across
uploads, the files and bytes a workspace keeps are bounded too, checked and written under one
lock between processes (``LOCK``), so uploads at once cannot together pass the bounds.

Each upload's folder carries its manifest (``MARK``: its name, files, bytes and the folders of
its score tables, written when it is unpacked), so listing the uploads reads one folder and
each manifest once per process, never every file they hold.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import io
import json
import os
import shutil
import struct
import threading
import time
import uuid
import zipfile
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from ..errors import InputError
from . import table_layout

UPLOADS_DIR = "score_tables"
"""Under the workspace's folder: one folder per uploaded table."""
MARK = ".uploaded.json"
"""In an upload's folder: its manifest (``Upload``: its name as uploaded, its files, bytes and
score tables); a row's source is looked up in the folder it marks."""
MAX_ZIP_BYTES = 200 << 20
"""An uploaded zip's size at most (the app's upload limit)."""
MAX_UNPACKED_BYTES = 1 << 30
"""What all of a zip's members may decode to (a table's parts are Parquet: already compressed)."""
MAX_MEMBERS = 20_000
"""Entries in a zip's central directory at most (folders included)."""
MAX_ENTRY_BYTES = 1_024
"""What one entry may take of the central directory on average: its 46 fixed bytes, its name,
extra fields and comment (``zip -r`` writes under 150 for a path of 80 characters)."""
MAX_DIRECTORY_BYTES = MAX_MEMBERS * MAX_ENTRY_BYTES
"""A zip's central directory at most, refused before it is parsed."""
MAX_KEPT_BYTES = 8 << 30
"""What every upload kept in a workspace may hold together: past it an upload is refused (a
shared server's disk is not filled by its users); the operator removes old ones from the
folder."""
MAX_KEPT_FILES = 50_000
"""The files every upload kept in a workspace may hold together (an upload of empty files costs
no bytes, but a file each on the disk): past it an upload is refused, as for bytes."""
MAX_KEPT_UPLOADS = 1_000
"""The uploads a workspace keeps at most (past it an upload is refused, as for bytes): a zip of
no file costs no file of the count above, yet a folder and a manifest each on the disk, and one
more entry for every listing to read."""
MAX_UPLOAD_TABLES = 20
"""Score tables one upload may hold at most, far below the listing's ``MAX_LISTED_TABLES``: an
upload of hundreds of tiny tables would fill the Score tables picker and push everyone else's
out. Refused before anything is written; an upload kept before the bound has only its first
ones listed."""
LOCK = ".lock"
"""In the uploads' folder: the file an upload holds locked (``fcntl.flock``) from the check of
what every upload keeps to its own folder's rename into place. Not an upload, not counted."""
TABLE_DEPTH = 3
"""How deep under an upload's folder (as under an operator's root) score tables are found (the
folder's own is depth 0)."""
_CHUNK = 1 << 20
_EOCD = struct.Struct("<4s4H2LH")
_EOCD64_LOCATOR = struct.Struct("<4sLQL")
_EOCD64 = struct.Struct("<4sQ2H2L4Q")
_ENTRY = struct.Struct("<4s6H3L5H2L")


VET_VERSION = 4
"""The version of ``vet``'s checks: raised whenever they check more, so that uploads vetted
under fewer checks are vetted again (``vetted_version``). 2: every run's rows decoded
and measured, its aggregates and Inconclusive index read. 3: no dictionary-typed column, the
index read whole as Python values, an upload's check in a process whose memory is bounded
(``vetting_process``). 4: no run's summary or aggregates, nor the table's runs, hold more in
memory than a reader keeps (``TABLE_MEMORY_LARGEST``)."""


def _unsafe(name: str) -> bool:
    """A member name that would leave the folder it is unpacked into, or name it ambiguously."""
    parts = PurePosixPath(name).parts
    return (not name or name.startswith("/") or "\\" in name or "\x00" in name or ".." in parts
            or (len(name) > 1 and name[1] == ":") or not parts or parts[0] == MARK)


def directory_entries(data: bytes, source: str) -> int:
    """How many entries the zip's central directory holds, read as ``zipfile`` will read it (the
    last end-of-central-directory record in the final 64 KiB, its zip64 record just before it,
    the directory ending where that record starts), refused before ``zipfile`` parses it: an
    entry count over MAX_MEMBERS (declared or found by walking the entries' fixed headers, which
    builds nothing) or a directory over MAX_DIRECTORY_BYTES. What is not a zip there is left to
    ``zipfile`` to say."""
    end = len(data) - _EOCD.size
    if end < 0:
        return 0
    if not (data.startswith(b"PK\x05\x06", end) and data.endswith(b"\0\0")):
        end = data.rfind(b"PK\x05\x06", max(end - (1 << 16), 0))
        if end < 0 or end + _EOCD.size > len(data):
            return 0
    _sig, _disk, _first, _here, count, size, _offset, _comment = _EOCD.unpack_from(data, end)
    starts = end
    locator = end - _EOCD64_LOCATOR.size
    if locator >= 0 and data.startswith(b"PK\x06\x07", locator):
        record = locator - _EOCD64.size
        if record >= 0 and data.startswith(b"PK\x06\x06", record):
            fields = _EOCD64.unpack_from(data, record)
            count, size, starts = fields[7], fields[8], record
    if count > MAX_MEMBERS:
        raise InputError(f"the zip's directory lists {count:,} members (at most {MAX_MEMBERS:,}): refused before "
                         "reading it", source=source)
    if size > MAX_DIRECTORY_BYTES:
        raise InputError(f"the zip's directory is {size:,} bytes (at most {MAX_DIRECTORY_BYTES:,}, for "
                         f"{MAX_MEMBERS:,} members): refused before reading it", source=source)
    at, stop, found = starts - size, min(starts, len(data)), 0
    while at >= 0 and at + _ENTRY.size <= stop and data.startswith(b"PK\x01\x02", at):
        found += 1
        if found > MAX_MEMBERS:
            raise InputError(f"the zip's directory holds more than {MAX_MEMBERS:,} members (it declares "
                             f"{count:,}): refused before reading it", source=source)
        name, extra, comment = _ENTRY.unpack_from(data, at)[10:13]
        at += _ENTRY.size + name + extra + comment
    return found


def _members(zf: zipfile.ZipFile, source: str) -> list[zipfile.ZipInfo]:
    """The members to unpack (files; folders are made as their files need them), each checked."""
    infos = zf.infolist()
    if len(infos) > MAX_MEMBERS:  # directory_entries refused more; this holds whatever zipfile found
        raise InputError(f"the zip holds {len(infos):,} members (at most {MAX_MEMBERS:,})", source=source)
    out = []
    for info in infos:
        if _unsafe(info.filename):
            raise InputError(f"unsafe member path {info.filename!r}: refused", source=source)
        if info.flag_bits & 0x1:
            raise InputError(f"member {info.filename!r} is encrypted", source=source)
        if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
            raise InputError(f"member {info.filename!r} is compressed with method {info.compress_type}: only "
                             "stored and deflated members are read (zip -r writes deflate)", source=source)
        if not info.is_dir() and PurePosixPath(info.filename).parts[0] != "__MACOSX":
            out.append(info)
    return out


def _copy(zf: zipfile.ZipFile, info: zipfile.ZipInfo, dest: Path, left: int, source: str) -> int:
    """Write one member to ``dest`` (a new regular file), decoding at most ``left`` bytes; how many
    it decoded."""
    written = 0
    with zf.open(info) as fh, open(dest, "xb") as out:
        while chunk := fh.read(min(_CHUNK, left - written + 1)):
            written += len(chunk)
            if written > left:
                raise InputError(f"the zip's members expand past what an upload may unpack (at {info.filename!r}: "
                                 f"{MAX_UNPACKED_BYTES:,} bytes an upload, {MAX_KEPT_BYTES:,} all uploads "
                                 "together): refused, a likely compression bomb", source=source)
            out.write(chunk)
    return written


def unpack(data: bytes, name: str, folder: Path) -> Path:
    """Unpack an uploaded zip (``name``: its name as uploaded) into ``folder``/UPLOADS_DIR/SHA; that
    folder (the same for the same bytes: a second upload unpacks nothing). InputError naming the
    upload for anything refused; nothing is left behind then. A workspace's uploads are unpacked
    one at a time from the check of what they keep to the rename into place (``_exclusive``);
    what reads only the zip is done before, while others may unpack."""
    source = os.path.basename(name) or "upload"
    if len(data) > MAX_ZIP_BYTES:
        raise InputError(f"is {len(data):,} bytes; a score table's zip is at most {MAX_ZIP_BYTES:,}", source=source)
    entries = directory_entries(data, source)  # before anything else reads the bytes
    digest = hashlib.sha256(data).hexdigest()
    uploads = folder / UPLOADS_DIR
    final = uploads / digest[:32]
    if (final / MARK).is_file():
        return final
    try:
        zf = zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, ValueError, NotImplementedError) as exc:
        raise InputError(f"not a readable zip: {exc}", source=source) from exc
    with zf:
        members = _members(zf, source)
        tables = _tables_of(info.filename for info in members)
        if len(tables) > MAX_UPLOAD_TABLES:
            raise InputError(f"the zip holds {len(tables):,} score tables (folders with a summary.json); an upload "
                             f"holds at most {MAX_UPLOAD_TABLES:,}: upload them in several zips", source=source)
        _check_own_files(zf, members, set(tables), source)
        with _exclusive(uploads, source):  # from the check of what is kept to the rename: one upload at a time
            if (final / MARK).is_file():  # the same bytes, unpacked while this one waited
                return final
            kept = kept_in(uploads)
            if kept.uploads >= MAX_KEPT_UPLOADS:
                raise InputError(f"the workspace already keeps {kept.uploads:,} uploads of score tables (at most "
                                 f"{MAX_KEPT_UPLOADS:,}): the server's operator removes old ones from its folder "
                                 f"{UPLOADS_DIR}", source=source)
            if kept.files + entries > MAX_KEPT_FILES:
                raise InputError(f"the workspace already keeps {kept.files:,} files of uploaded score tables and "
                                 f"this zip holds {entries:,} (at most {MAX_KEPT_FILES:,} together): the server's "
                                 f"operator removes old ones from its folder {UPLOADS_DIR}", source=source)
            left = min(MAX_UNPACKED_BYTES, MAX_KEPT_BYTES - kept.bytes)
            if left <= 0:
                raise InputError(f"the workspace already keeps {kept.bytes:,} bytes of uploaded score tables (at "
                                 f"most {MAX_KEPT_BYTES:,}): the server's operator removes old ones from its "
                                 f"folder {UPLOADS_DIR}", source=source)
            with _staged(uploads, digest) as tmp:
                unpacked = _unpack_members(zf, members, tmp, left, source)
                manifest = {"name": source, "sha256": digest, "files": len(members), "bytes": unpacked,
                            "tables": tables, "unpacked_at": time.time()}
                try:
                    (tmp / MARK).write_text(json.dumps(manifest))
                    os.replace(tmp, final)
                except OSError as exc:  # a full disk; a folder of that name put there by hand
                    raise InputError(f"cannot keep the upload in the workspace: {exc.strerror or exc}",
                                     source=source) from exc
    return final


def _unpack_members(zf: zipfile.ZipFile, members: list[zipfile.ZipInfo], tmp: Path, left: int,
                    source: str) -> int:
    """Write ``members`` under ``tmp``, decoding at most ``left`` bytes in all; how many they decoded."""
    unpacked = 0
    for info in members:
        dest = tmp.joinpath(*PurePosixPath(info.filename).parts)
        try:  # the member's folders too: a name can clash with another member's, or be too long
            dest.parent.mkdir(parents=True, exist_ok=True)
            written = _copy(zf, info, dest, left, source)
        except (FileExistsError, NotADirectoryError, IsADirectoryError) as exc:
            raise InputError(f"member {info.filename!r} is in the zip twice, or its path runs through another "
                             "member's file", source=source) from exc
        except (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError) as exc:
            raise InputError(f"member {info.filename!r} cannot be read: {exc}", source=source) from exc
        except OSError as exc:  # a full disk, say
            raise InputError(f"cannot keep the upload in the workspace: {exc.strerror or exc}",
                             source=source) from exc
        left -= written
        unpacked += written
    return unpacked


def own_file(name: str, tables: set[str]) -> bool:
    """Whether the member ``name`` is one of a score table's own JSON files, which a reader
    parses whole (``table_layout.table_json``): a table folder's index, summaries, key list or
    aggregates, or a run's summary or aggregates in its ``summaries/`` or ``aggregates/``."""
    parts = PurePosixPath(name).parts
    if parts[-1] in (table_layout.INDEX_FILE, table_layout.SUMMARY_FILE, table_layout.KEYS_FILE,
                     table_layout.AGGREGATES_FILE):
        return ("/".join(parts[:-1]) or ".") in tables
    return len(parts) >= 2 and parts[-2] in (table_layout.SUMMARIES_DIR, table_layout.RUN_AGGREGATES_DIR) \
        and parts[-1].endswith(".json") and ("/".join(parts[:-2]) or ".") in tables


def _check_own_files(zf: zipfile.ZipFile, members: list[zipfile.ZipInfo], tables: set[str], source: str) -> None:
    """Each of the tables' own JSON files decoded once, one at a time, and let go: refused (named)
    when it holds more than a reader reads of such a file, or would take more to parse
    (``table_layout.table_json_bytes``), before anything is written. Listing the uploads reads them
    again in every new process: a file of blanks that compresses to nothing would be read whole
    each time."""
    for info in members:
        if own_file(info.filename, tables):
            try:
                with zf.open(info) as fh:
                    table_layout.table_json_bytes(fh, info.filename, source)
            except (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError) as exc:
                raise InputError(f"member {info.filename!r} cannot be read: {exc}", source=source) from exc


def _tables_of(names: Iterable[str]) -> list[str]:
    """The folders (relative, POSIX; "." for the upload's own) of the score tables among member
    ``names``: each holding ``summary.json``, at most TABLE_DEPTH deep, no part hidden (a table
    still being written is one), as ``table_locations.tables_under`` finds them under a root."""
    found = set()
    for name in names:
        parts = PurePosixPath(name).parts
        if parts and parts[-1] == "summary.json" and len(parts) - 1 <= TABLE_DEPTH \
                and not any(p.startswith(".") for p in parts[:-1]):
            found.add("/".join(parts[:-1]) or ".")
    return sorted(found)


@dataclass(frozen=True, slots=True)
class Upload:
    """One upload kept in a workspace, as its manifest says."""

    root: str
    """Its folder: the root its tables are opened with."""
    name: str
    """Its name as uploaded."""
    sha256: str
    files: int
    bytes: int
    tables: tuple[str, ...]
    """The folders of its score tables, relative to ``root`` ("." for the folder itself)."""
    unpacked_at: float


@dataclass(frozen=True, slots=True)
class Kept:
    """What a workspace's uploads hold together."""

    files: int
    bytes: int
    uploads: int = 0
    """The uploads kept (folders with a manifest)."""


_lock = threading.Lock()
_manifests: dict[tuple[str, int], Upload] = {}
"""Each upload folder's manifest, by (folder, inode): an upload's folder
is named by its bytes' SHA-256 and never changes once renamed into place, so its manifest is
read once per process; a folder removed and made again has another inode."""


def _manifest(entry: os.DirEntry) -> Upload | None:
    key = (entry.path, entry.inode())
    with _lock:
        if key in _manifests:
            return _manifests[key]
    got = _read_manifest(Path(entry.path))
    if got is not None:  # a folder without a manifest is looked at again (one may be put there)
        with _lock:
            _manifests[key] = got
    return got


def _read_manifest(sub: Path) -> Upload | None:
    """The manifest of the upload at ``sub``; for one unpacked before manifests counted files
    (its MARK holds only its name), its files, bytes and tables found once by walking it."""
    try:
        mark = json.loads((sub / MARK).read_text())
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        return None
    except (OSError, ValueError):  # a damaged manifest: the folder is still an upload, walked once
        mark = {}
    if not isinstance(mark, dict):
        mark = {}
    given = mark.get("name")
    name = given if isinstance(given, str) else sub.name
    try:
        files, size = int(mark["files"]), int(mark["bytes"])
        tables = tuple(str(t) for t in mark["tables"])
        unpacked_at = float(mark["unpacked_at"])
    except (KeyError, TypeError, ValueError):
        files, size, names = 0, 0, []
        for here, dirs, leaves in os.walk(sub):  # links are not followed (none is unpacked)
            dirs.sort()
            for leaf in leaves:
                path = os.path.join(here, leaf)
                if os.path.relpath(path, sub) == MARK:
                    continue
                files += 1
                with contextlib.suppress(OSError):
                    size += os.lstat(path).st_size
                names.append(os.path.relpath(path, sub).replace(os.sep, "/"))
        tables = tuple(_tables_of(names))
        unpacked_at = (sub / MARK).stat().st_mtime
    return Upload(str(sub), name, str(mark.get("sha256") or ""), files, size, tables, unpacked_at)


VETTED = ".vetted"
"""The folder beside the uploads (never inside one: an upload's members are written only into its
own folder) where the server notes, per upload, the version of the checks its tables passed when
it was uploaded (``VET_VERSION``): a listing in a new process takes that note for that
version only, and vets the tables again under any other (vetting reads every run's rows)."""


def note_vetted(root: Path | str, version: int) -> None:
    """Note that the upload at ``root`` passed the checks of ``version`` (written whole, or not at all)."""
    _write_note(root, str(int(version)))


def _write_note(root: Path | str, text: str) -> None:
    folder = Path(root).parent / VETTED
    with contextlib.suppress(OSError):  # no note: the next process vets it again
        folder.mkdir(exist_ok=True)
        tmp = folder / f".{Path(root).name}.{uuid.uuid4().hex[:8]}"
        tmp.write_text(text)
        os.replace(tmp, folder / Path(root).name)


CHECKING = "checking"
"""The note of an upload whose check has begun and not ended, followed by who checks it (the
process's id, its start time and the machine's boot): while the process that wrote it lives, the
check is under way; a server stopped mid-check leaves it, and the upload is checked again (the
check runs in a bounded process of its own, so an upload cannot take the server down with it)."""


def _process_start(pid: int) -> str | None:
    """When process ``pid`` started (clock ticks since boot, ``/proc/PID/stat``), None when no
    such process is running (or the system has no ``/proc``)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2:].split()  # after the command's name, which may hold spaces
    return fields[19] if len(fields) > 19 else None


def _boot() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return "-"


def note_checking(root: Path | str) -> None:
    """Note that the upload at ``root`` is being checked by this process (``CHECKING``), before
    its check begins."""
    _write_note(root, f"{CHECKING} {os.getpid()} {_process_start(os.getpid())} {_boot()}")


WAITING = "waiting"
"""The note of an upload kept unchecked at its door (every check busy, or its check stopped from
outside): a background check that refuses it removes it, as the door would have."""


def note_waiting(root: Path | str) -> None:
    """Note that the upload at ``root`` was kept at its door without a check (``WAITING``)."""
    _write_note(root, WAITING)


def kept_waiting(root: Path | str) -> bool:
    """Whether the upload at ``root`` was kept at its door without a check (``note_waiting``)."""
    try:
        return (Path(root).parent / VETTED / Path(root).name).read_text().split() == [WAITING]
    except OSError:
        return False


def forget_note(root: Path | str) -> None:
    """Remove the upload's note (the upload itself was removed), and the notes' folder when it
    holds no other: a refused upload leaves nothing behind."""
    folder = Path(root).parent / VETTED
    with contextlib.suppress(OSError):
        (folder / Path(root).name).unlink()
    with contextlib.suppress(OSError):  # not empty: another upload's note
        folder.rmdir()


def _checking_note(root: Path | str) -> list[str] | None:
    try:
        words = (Path(root).parent / VETTED / Path(root).name).read_text().split()
    except OSError:
        return None
    return words if words[:1] == [CHECKING] else None


def check_under_way(root: Path | str) -> bool:
    """Whether the upload at ``root`` is being checked now: its note says ``CHECKING`` and the
    process that wrote it is still running (the same process id, start time and boot)."""
    words = _checking_note(root)
    if words is None or len(words) != 4 or not words[1].isdigit():
        return False
    _, pid, started, boot = words
    return started != "None" and _process_start(int(pid)) == started and _boot() == boot


def vetted_version(root: Path | str) -> int | None:
    """The version of the checks the upload at ``root`` passed when it was uploaded (None: no note)."""
    try:
        return int((Path(root).parent / VETTED / Path(root).name).read_text())
    except (OSError, ValueError):
        return None


def read_upload(root: Path | str) -> Upload | None:
    """The manifest of the upload at ``root`` (None: not an upload)."""
    return _read_manifest(Path(root))


def _entries(uploads: Path) -> list[os.DirEntry]:
    try:
        with os.scandir(uploads) as it:
            return sorted(it, key=lambda e: e.name)
    except (FileNotFoundError, NotADirectoryError):
        return []


def kept_in(uploads: Path) -> Kept:
    """The files and bytes the uploads kept in ``uploads`` hold together, from their manifests;
    what else is there but LOCK (a half-unpacked upload, a file put there by hand) counted as
    found."""
    files = size = count = 0
    for entry in _entries(uploads):
        if entry.name in (LOCK, VETTED):
            continue
        up = _manifest(entry) if not entry.name.startswith(".") and entry.is_dir(follow_symlinks=False) else None
        if up is not None:
            files, size, count = files + up.files, size + up.bytes, count + 1
        elif entry.is_dir(follow_symlinks=False):
            for here, _dirs, leaves in os.walk(entry.path):
                for leaf in leaves:
                    with contextlib.suppress(OSError):
                        size += os.lstat(os.path.join(here, leaf)).st_size
                        files += 1
        else:
            with contextlib.suppress(OSError):
                size += entry.stat(follow_symlinks=False).st_size
                files += 1
    return Kept(files, size, count)


@contextlib.contextmanager
def _exclusive(uploads: Path, source: str) -> Iterator[None]:
    """The workspace's uploads held by this upload alone until the block ends: its LOCK file
    locked with ``flock``, which every other upload waits for, in this process or another (each
    opens the file anew, and a flock belongs to the open file, so threads wait too; a process
    that dies lets go). Without it, two uploads at once both passed the check of what is kept
    and together kept more than the caps."""
    try:
        uploads.mkdir(parents=True, exist_ok=True)
        fd = os.open(uploads / LOCK, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError as exc:  # a read-only workspace, say
        raise InputError(f"cannot keep the upload in the workspace: {exc.strerror or exc}", source=source) from exc
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # lets the lock go


@contextlib.contextmanager
def _staged(uploads: Path, digest: str) -> Iterator[Path]:
    """A hidden folder to unpack into (never listed as a table), removed unless it was renamed."""
    uploads.mkdir(parents=True, exist_ok=True)
    tmp = uploads / f".{digest[:32]}.tmp-{uuid.uuid4().hex[:8]}"
    tmp.mkdir()
    try:
        yield tmp
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def uploads(folder: Path) -> list[Upload]:
    """Every table upload kept in the workspace at ``folder``, newest first: one read of its
    uploads' folder; each upload's manifest read once per process."""
    entries = [e for e in _entries(folder / UPLOADS_DIR)
               if not e.name.startswith(".") and e.is_dir(follow_symlinks=False)]
    found = [up for entry in entries if (up := _manifest(entry)) is not None]
    present = {(e.path, e.inode()) for e in entries}
    base = str(folder / UPLOADS_DIR)
    with _lock:  # forget the folders no longer there
        for key in [k for k in _manifests if os.path.dirname(k[0]) == base and k not in present]:
            del _manifests[key]
    return sorted(found, key=lambda up: (up.unpacked_at, up.root), reverse=True)


def source_in_upload(root: str, source: str) -> str | None:
    """Where an uploaded table's row reads its run: the file of the source's name inside the
    upload ``root`` (the zip carried it; the row names the path it had where it was scored), or
    None when ``root`` is not an upload or holds no such file."""
    if not os.path.isfile(os.path.join(root, MARK)):
        return None
    name = source.rstrip("/").rsplit("/", 1)[-1]
    if not name or name.startswith("."):
        return None
    for here, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        if name in files:
            path = os.path.join(here, name)
            return path if os.path.isfile(path) and not os.path.islink(path) else None
    return None
