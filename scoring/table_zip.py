"""A score table uploaded as a zip (the app in team mode, where no one types a location).

A zip of the folder ``score --out`` wrote (and, anywhere in it, the run files it scored, for
replay) is unpacked into the workspace's folder, one folder per upload named by the zip's
SHA-256, and opened from there with that folder as its root: its rows are read only from
inside it (``scoretable.source_of``), never from the server's other files.

Unpacking is bounded before anything is written: the zip's own size, its number of members,
the bytes each member and all of them decode to (counted as they are decoded, never from the
sizes the zip declares), only stored and deflated members (what ``zip -r`` and Python's
``shutil.make_archive`` write; ``zipfile`` decodes deflate in bounded reads), no member whose
name leaves the folder (absolute, ``..``, a drive, a backslash) and no links (every member is
written as a regular file of its own bytes).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import shutil
import uuid
import zipfile
import zlib
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

from .errors import InputError

UPLOADS_DIR = "score_tables"
"""Under the workspace's folder: one folder per uploaded table."""
MARK = ".uploaded.json"
"""In an upload's folder: what it is (its name as uploaded); a row's source is looked up in it."""
MAX_ZIP_BYTES = 200 << 20
"""An uploaded zip's size at most (the app's upload limit)."""
MAX_UNPACKED_BYTES = 1 << 30
"""What all of a zip's members may decode to (a table's parts are Parquet: already compressed)."""
MAX_MEMBERS = 20_000
MAX_KEPT_BYTES = 8 << 30
"""What every upload kept in a workspace may hold together: past it an upload is refused (a
shared server's disk is not filled by its users); the operator removes old ones from the
folder."""
_CHUNK = 1 << 20


def _unsafe(name: str) -> bool:
    """A member name that would leave the folder it is unpacked into, or name it ambiguously."""
    parts = PurePosixPath(name).parts
    return (not name or name.startswith("/") or "\\" in name or "\x00" in name or ".." in parts
            or (len(name) > 1 and name[1] == ":") or not parts)


def _members(zf: zipfile.ZipFile, source: str) -> list[zipfile.ZipInfo]:
    """The members to unpack (files; folders are made as their files need them), each checked."""
    infos = zf.infolist()
    if len(infos) > MAX_MEMBERS:
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
    upload for anything refused; nothing is left behind then."""
    source = os.path.basename(name) or "upload"
    if len(data) > MAX_ZIP_BYTES:
        raise InputError(f"is {len(data):,} bytes; a score table's zip is at most {MAX_ZIP_BYTES:,}", source=source)
    digest = hashlib.sha256(data).hexdigest()
    uploads = folder / UPLOADS_DIR
    final = uploads / digest[:32]
    if (final / MARK).is_file():
        return final
    try:
        zf = zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, ValueError) as exc:
        raise InputError(f"not a readable zip: {exc}", source=source) from exc
    kept = _kept_bytes(uploads)
    with zf, _staged(uploads, digest) as tmp:
        left = min(MAX_UNPACKED_BYTES, MAX_KEPT_BYTES - kept)
        if left <= 0:
            raise InputError(f"the workspace already keeps {kept:,} bytes of uploaded score tables (at most "
                             f"{MAX_KEPT_BYTES:,}): the server's operator removes old ones from its folder "
                             f"{UPLOADS_DIR}",
                             source=source)
        for info in _members(zf, source):
            dest = tmp.joinpath(*PurePosixPath(info.filename).parts)
            dest.parent.mkdir(parents=True, exist_ok=True)
            try:
                left -= _copy(zf, info, dest, left, source)
            except FileExistsError as exc:
                raise InputError(f"member {info.filename!r} is in the zip twice", source=source) from exc
            except (zipfile.BadZipFile, zlib.error, EOFError) as exc:
                raise InputError(f"member {info.filename!r} cannot be read: {exc}", source=source) from exc
            except OSError as exc:  # a full disk, say
                raise InputError(f"cannot keep the upload in the workspace: {exc.strerror or exc}",
                                 source=source) from exc
        (tmp / MARK).write_text(json.dumps({"name": source, "sha256": digest}))
        try:
            os.replace(tmp, final)
        except OSError:  # another session unpacked the same bytes first
            if not (final / MARK).is_file():
                raise
    return final


def _kept_bytes(uploads: Path) -> int:
    """The bytes the uploads kept so far hold (a half-unpacked one included)."""
    return sum(f.stat().st_size for f in uploads.rglob("*") if f.is_file()) if uploads.is_dir() else 0


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


def uploads(folder: Path) -> list[tuple[str, str]]:
    """(upload folder, name as uploaded) of every table uploaded to the workspace at ``folder``,
    newest first."""
    base = folder / UPLOADS_DIR
    found = []
    for sub in base.iterdir() if base.is_dir() else ():
        if sub.name.startswith(".") or not (sub / MARK).is_file():
            continue
        try:
            name = str(json.loads((sub / MARK).read_text())["name"])
        except (OSError, ValueError, KeyError, TypeError):
            name = sub.name
        found.append((sub.stat().st_mtime, str(sub), name))
    return [(path, name) for _t, path, name in sorted(found, reverse=True)]


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
