"""Where score tables are: the protocols a table is read from, a table's files confined to its
folder (a run key checked before it is joined into a path, a file that leads out refused), and
the tables found under an operator's roots (``tables_under``). What reads a table
(``table_reader``) and what vets an upload (``table_zip``, ``table_reader.vet``) go through it.
"""

from __future__ import annotations

import contextlib
import os
import posixpath
from collections.abc import Sequence

from ..errors import InputError, LitmusReviewError
from ..workspace.settings import Settings
from .storage import (
    PROTOCOLS,
    URL_SCHEME,
    absolute_location,
    error_message,
    file_system,
    is_object_store,
    listed,
    protocol,
    unreachable,
)
from .table_layout import RUN_KEY, SUMMARY_FILE

TABLE_PROTOCOLS = PROTOCOLS - {"http", "https"}
"""Where a score table is read from: the engine's protocols but HTTP (a table is a folder, which
HTTP cannot list). Anything else is refused with a message before fsspec is called."""
OBJECT_STORES = TABLE_PROTOCOLS - {"file", "local"}
"""The protocols whose fsspec backend is a package to import (s3fs, gcsfs, adlfs...): what
``warm_up`` imports ahead of the first table."""
ROOT_DEPTH = 3
"""How deep under a root score tables are looked for (a root's own folder is depth 0)."""
MAX_LISTED_TABLES = 500


def object_stores(settings: Settings) -> list[str]:
    """The protocols of the object stores a workspace's ``settings`` name (its storage profiles'
    prefixes, its score table roots that are URLs) that tables are read from; sorted, each once."""
    locations = [*settings.score_table_roots, *(p for prof in settings.storage_profiles for p in prof.prefixes)]
    return sorted({protocol(loc) for loc in locations} & OBJECT_STORES)


def warm_up(settings: Settings) -> list[str]:
    """Import the fsspec backend (its file system's class) of each object store ``settings``
    name: the app's start does it in a background thread, so that the first table a server opens
    there does not wait for s3fs, aiobotocore and botocore to import. Modules only: no file
    system is made, so no credential is read and no connection started. Returns the protocols
    imported; one that fails (its package not installed) is skipped, and opening a table there
    imports it again and reports that import's own error."""
    import fsspec  # optional: the dask extra

    done = []
    for name in object_stores(settings):
        with contextlib.suppress(Exception):  # reported when a table is opened, by that import
            fsspec.get_filesystem_class(name)
            done.append(name)
    return done


def table_fs(location: str, storage_options: dict | None = None):
    return file_system(absolute_location(location), dict(storage_options or {}), TABLE_PROTOCOLS)


def check_run_key(key: object, named_in: str, location: str) -> str:
    """``key`` if it is a run key (64 hex digits, what ``RUN_KEY`` matches); else
    InputError naming the table and where the key was read (``named_in``): the table is not
    read further (a key is joined into the paths of the run's files)."""
    if isinstance(key, str) and RUN_KEY.fullmatch(key):
        return key
    shown = repr(key) if len(repr(key)) <= 80 else repr(key)[:77] + "..."
    raise InputError(f"{named_in} names {shown} as a run key, which is not one (64 hex digits): the table is not "
                     "read", source=location)


def inside_table(location: str, fs_path: str, rel: str) -> str:
    """``fs_path`` (the file ``rel`` of the table at ``location``, as its file system names it),
    refused unless it lies inside the table's folder: a local path after its links are followed,
    a URL's path with ``.`` and ``..`` folded."""
    proto = protocol(location)
    named = fs_path if proto in ("file", "local") else f"{proto}://{fs_path}"
    if not within(location, named):
        raise InputError(f"the table's {rel} leads outside the table (a link, or a name that climbs out): not "
                         "read", source=location)
    return fs_path


def failed_read(exc: BaseException, *kinds: type[BaseException]) -> bool:
    """Whether ``exc`` is a read that failed, to be reported as an ``InputError`` naming the
    table: one of ``kinds``, or, of any type, one whose storage did not answer in time
    (``unreachable``). A timed-out ranged read of s3fs's files (pyarrow's reads of a
    part, a file's ``read``) raises IndexError: s3fs reads the first argument of the timeout,
    which has none."""
    return not isinstance(exc, LitmusReviewError) and (isinstance(exc, kinds) or unreachable(exc))


def table_file(location: str, storage_options: dict | None, *parts: str):
    """(file system, path) of the file ``parts`` of the table at ``location``, confined to it."""
    fs, path = table_fs(location, storage_options)
    rel = "/".join(parts)
    return fs, inside_table(location, f"{path.rstrip('/')}/{rel}", rel)


def _normal(location: str) -> tuple[str, str]:
    """(protocol, normalised path) of a location: a local path resolved (symbolic links
    followed), a URL's path with ``.`` and ``..`` folded."""
    proto = protocol(location)
    if proto in ("file", "local"):
        path = location.split("://", 1)[1] if URL_SCHEME.match(location) else location
        return "file", os.path.realpath(path)
    return proto, posixpath.normpath("/" + location.split("://", 1)[1]).lstrip("/")


def within(root: str, location: str) -> bool:
    """Whether ``location`` is ``root`` or lies under it (same protocol; a local path after its
    links are followed, so a link cannot lead out)."""
    rp, rpath = _normal(root)
    lp, lpath = _normal(location)
    if rp != lp:
        return False
    rpath = rpath.rstrip("/") or "/"
    return lpath == rpath or lpath.startswith(rpath if rpath.endswith("/") else rpath + "/")


def tables_under(roots: Sequence[str], storage_options: dict | None = None, *,
                 unlisted: list[InputError] | None = None) -> list[tuple[str, str]]:
    """(root, location) of every score table (a folder holding ``summary.json``) found under the
    operator's ``roots``, down to ``ROOT_DEPTH`` (hidden folders, such as a table still being
    written, skipped; at most ``MAX_LISTED_TABLES``). A root that cannot be listed (unreachable,
    refused) is skipped, and its error, naming the root, added to ``unlisted`` when given."""
    found: list[tuple[str, str]] = []
    for root in roots:
        try:
            fs, base = table_fs(root, storage_options)
            base = base.rstrip("/")
            names = _summaries_under(fs, base, root)
        except Exception as exc:  # the other roots are still listed
            if unlisted is not None:
                unlisted.append(exc if isinstance(exc, InputError) else
                                InputError(f"cannot list it: {error_message(exc)}", source=root))
            continue
        for name in sorted(names):
            folder = name.rsplit("/", 1)[0]
            rel = folder[len(base):].strip("/")
            if any(part.startswith(".") for part in rel.split("/") if part):
                continue
            location = root.rstrip("/") + ("/" + rel if rel else "")
            if within(root, location):
                found.append((root, location))
            if len(found) >= MAX_LISTED_TABLES:
                if unlisted is not None:
                    unlisted.append(InputError(f"only the first {MAX_LISTED_TABLES} score tables under the roots are "
                                               "listed; name a narrower root to see the others", source=root))
                return found
    return found


def _summaries_under(fs, base: str, root: str) -> list[str]:
    """The ``summary.json`` files at most ``ROOT_DEPTH`` folders below ``base``, found by one
    listing: on an object store one flat listing of the keys under it (a glob a depth made four)
    within the listing deadline (``storage.listed``); a local file system walked to that depth."""
    depth = {} if is_object_store(fs) else {"maxdepth": ROOT_DEPTH + 1}  # a store's depth costs a listing a folder
    names = listed(fs, "find", base, source=root, **depth)
    prefix = base.rstrip("/") + "/"
    return [name for name in names if name.startswith(prefix) and name.rsplit("/", 1)[-1] == SUMMARY_FILE
            and name.count("/", len(prefix)) <= ROOT_DEPTH]
