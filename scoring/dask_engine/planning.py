"""A run planned before any block is read (``RunPlan``: its header line, size, format and side
log, read by the client or a planning task), the inputs a fleet is given (globs, manifests and
the side logs beside them), and the byte-range blocks a canonical run is split into: each
block owns the lines that start in its range (``read_owned``)."""

from __future__ import annotations

import collections
import dataclasses
import json
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Unpack

from ..errors import InputError, LitmusReviewError
from ..importers import SNIFF_BYTES, canonical, sniff_format
from ..ingest import (
    BLOCK_BYTES,
    decode_header,
    read_header_line,
    scan_canonical,
)
from ..recapture import SIDE_LOG_SUFFIX
from ..recapture import side_log_beside as recapture_side_log_beside
from ..request import CANONICAL_REQUEST, ScoringRequest, SharedOptions
from .storage import (
    URL_SCHEME,
    absolute_location,
    check_location,
    check_regular_file,
    credentials_hint,
    error_message,
    file_system,
    join_url,
    listed,
    missing_message,
    reason_message,
)

_READ_AHEAD = 64 * 1024


@dataclass(frozen=True, slots=True)
class RunPlan:
    """What the client knows of one run before any block is read."""

    url: str
    """Where the workers read it (a local path made absolute, or the URL as given)."""
    source: str
    """The path as the user gave it (rows, rejections and the summary name it so, as locally)."""
    header_line: bytes
    first_line: int
    """The header's line number."""
    header_end: int
    size: int
    storage_options: dict
    payloads: str | None = None
    """The side log's URL (read by the workers), if one is joined."""
    payloads_source: str | None = None
    """The side log as the user named it."""
    scoring_request: ScoringRequest = CANONICAL_REQUEST
    """What the run is scored under, its format sniffed (the side log is ``payloads``, the
    re-classifier's spec travels beside the plan, to each task that starts it)."""
    scorer_version: str = ""
    """The client's scorer version: a task on a worker of another refuses the run."""
    rules_check: str = ""
    """What checking a canonical header's declared taxonomy_rules found (``RunHeader.classifier_of_record_check``),
    read once by the planner; empty when nothing was declared."""
    read_end: int = 0
    read_sha256: str = ""
    """SHA-256 of bytes ``[0, read_end)`` as the planner read them (``ingest.scan_canonical``):
    the header, or the whole file where its taxonomy_rules were checked. The run's hash
    (``file_sha256``) must find the same bytes there, and the blocks' own, or the run fails:
    the check, the blocks and the run key then name one version of the file."""
    read_from: str | None = None
    """A copy on the worker's own disk that the run's bytes are read from instead of ``url``
    (a small run fetched whole by the task that plans and scores it: ``fetch_small``); the
    table still names ``url``."""
    payloads_version: str = ""
    """The side log's size and modification mark when the run was planned: a worker's loaded
    copy is used only for the same (a side log rewritten between two fleets is read again)."""

    def request_with(self, reclassifier: str | None) -> ScoringRequest:
        """The request a task scores the run under: the plan's, with its side log and the
        re-classifier the task was given."""
        return dataclasses.replace(self.scoring_request, payloads=self.payloads, reclassifier=reclassifier)

    @property
    def fmt(self) -> str:
        """The run's format: a canonical run is read in byte-range blocks; any other format, which
        cannot be split, is one task that reads the whole file with its importer (``score_whole``)."""
        return self.scoring_request.fmt

    @property
    def verdict_map(self) -> str | None:
        """The Inspect verdict map's text, if one is given."""
        return self.scoring_request.verdict_text

    @property
    def require_proof(self) -> bool:
        """Scored with ``--require-proof`` (each block is given it; the header line never carries it)."""
        return self.scoring_request.require_proof

    @property
    def whole(self) -> bool:
        """Scored as one task (a format that cannot be split into blocks of lines)."""
        return self.fmt != "canonical"


def plan_run(path: str, storage_options: dict | None = None, payloads: str | None = None,
             request: ScoringRequest | None = None, *, read_from: str | None = None,
             **options: Unpack[SharedOptions]) -> RunPlan:
    """The header line and size of a canonical run (the only bytes the client reads), or the
    format of any other (its first bytes, sniffed as locally); and the side log to join
    (``payloads``, the run's own where the fleet found it, else the request's; the workers read
    it), to be scored as ``request`` (or ``options``) asks. ``read_from``: a local copy of
    ``path`` to read instead (``RunPlan.read_from``)."""
    request = ScoringRequest.of(request, **options)
    fmt, payloads = request.fmt, request.payloads if payloads is None else payloads
    storage_options = dict(storage_options or {})
    url = absolute_location(path)
    try:
        fs, fpath = file_system(read_from, {}) if read_from is not None else file_system(url, storage_options)
        check_regular_file(fs, fpath, path)
        size = fs.size(fpath)
        with fs.open(fpath, "rb") as fh:
            head = fh.read(SNIFF_BYTES)
            if fmt == "auto":
                if not head.strip():
                    raise InputError("empty file" if not head else "empty file (only white space)", source=path)
                fmt = sniff_format(head, path)
            fh.seek(0)
            header_line, first_line, header_end = read_header_line(fh, path) if fmt == canonical.NAME \
                else (b"", 0, 0)
            rules_check, read_end, read_sha = "", 0, ""
            if fmt == canonical.NAME:  # a declared taxonomy_rules classifier of record, checked on the file
                header_line, rules_check, read_end, read_sha = _vouched_line(header_line, fh, size, header_end,
                                                                             first_line, path)
    except FileNotFoundError as exc:
        raise InputError(missing_message(exc), source=path) from exc
    except LitmusReviewError:
        raise
    except Exception as exc:  # OSError, or a storage backend's own (botocore's NoCredentialsError...)
        raise InputError(f"cannot read: {error_message(exc)}{credentials_hint(exc)}", source=path) from exc
    if fmt == canonical.NAME:
        obj = decode_header(header_line, path, first_line)
        canonical.parse_header(obj, path)  # a bad header is refused here, before any task runs
    version = ""
    if payloads is not None:
        fs, ppath = file_system(absolute_location(str(payloads)), storage_options)
        try:
            info = fs.info(ppath)
        except FileNotFoundError as exc:
            raise InputError(missing_message(exc, "no such file (the payload side log)"),
                             source=str(payloads)) from None
        except Exception as exc:  # OSError, or a storage backend's own
            raise InputError(f"cannot read the payload side log: {reason_message(exc)}", source=str(payloads)) from exc
        check_regular_file(fs, ppath, str(payloads))
        version = json.dumps([info.get(k) for k in ("size", "mtime", "ETag", "LastModified", "etag", "generation")],
                             default=str)
    return RunPlan(url, path, header_line, first_line, header_end, size, storage_options,
                   absolute_location(str(payloads)) if payloads is not None else None,
                   str(payloads) if payloads is not None else None,
                   dataclasses.replace(request, fmt=fmt, payloads=None, reclassifier=None),
                   rules_check=rules_check, read_from=read_from,
                   payloads_version=version, read_end=read_end, read_sha256=read_sha)


def _vouched_line(header_line: bytes, fh, size: int, header_end: int, first_line: int,
                  path: str) -> tuple[bytes, str, int, str]:
    """(the header line the workers read, what the check found, the end and SHA-256 of the bytes
    read): the header read again and a declared taxonomy_rules classifier of record checked on
    the whole file, hashed as it is read (``ingest.scan_canonical``; the client reads such a run
    once more, any other only its header)."""
    obj = decode_header(header_line, path, first_line)
    if not (isinstance(obj, dict) and obj.get("format") == canonical.FORMAT_TAG):
        return header_line, "", 0, ""  # refused below, with its message
    scan = scan_canonical(fh, path, size, header_line, first_line, header_end, canonical.parse_header(obj, path))
    return scan.header_line, scan.header.classifier_of_record_check, scan.end, scan.sha256


GLOB_CHARS = re.compile(r"[*?\[]")
"""What makes a path a glob pattern (expanded by one listing, on the client)."""
NO_SIDE_LOG = ""
"""A run's side log given as this: it is known to have none (a listing of its folder showed
none), so no task asks its storage again."""


def expand_inputs(paths: Sequence[str], manifests: Sequence[str] = (),
                  storage_options: dict | None = None, *, sides: dict[str, str] | None = None) -> list[str]:
    """The runs named by ``paths`` (a path, URL, or glob pattern such as ``s3://b/runs/*.jsonl``:
    one listing, on the client) and by each manifest (a file or URL holding one path or URL a
    line; blank lines and ``#`` comments skipped; a relative path is relative to the manifest's
    folder). Side logs matched by a pattern are left to be paired with their runs. A pattern
    that matches nothing, or an unreadable manifest, is an ``InputError`` naming it. ``sides``,
    when given, is filled for each run a pattern matched: its side log (``side_log_beside``), or
    ``NO_SIDE_LOG``, from one listing of each folder the runs are in (the workers then ask for no
    side log; runs of a manifest are not listed)."""
    so = dict(storage_options or {})
    out: list[str] = []
    for manifest in manifests:
        check_location(manifest, what="manifest")
        # the options are the URLs'
        fs, mpath = file_system(absolute_location(manifest), so if URL_SCHEME.match(manifest) else {})

        try:
            with fs.open(mpath, "rb") as fh:
                text = fh.read().decode("utf-8")
        except FileNotFoundError as exc:
            raise InputError(missing_message(exc, "no such file (the manifest)"), source=manifest) from exc
        except UnicodeDecodeError as exc:
            raise InputError(f"the manifest is not UTF-8 text: {exc}", source=manifest) from exc
        except Exception as exc:  # OSError, or a storage backend's own
            raise InputError(f"cannot read the manifest: {error_message(exc)}", source=manifest) from exc
        folder = absolute_location(manifest).rsplit("/", 1)[0]
        for n, line in enumerate(text.splitlines(), 1):
            item = line.strip()
            if not item or item.startswith("#"):
                continue
            if "\x00" in item:
                raise InputError("a NUL byte in a path", source=manifest, line=n)
            check_location(item)
            out.append(item if URL_SCHEME.match(item) or os.path.isabs(item) else join_url(folder, item))
    for p in paths:
        if not GLOB_CHARS.search(p):
            out.append(p)
            continue
        fs, pattern = file_system(absolute_location(p), so if URL_SCHEME.match(p) else {})
        try:
            found = listed(fs, "glob", pattern, detail=True, source=p)  # one listing: each match's type with it
        except InputError:
            raise
        except Exception as exc:  # OSError, or a storage backend's own
            raise InputError(f"cannot list this pattern: {error_message(exc)}", source=p) from exc
        runs = sorted(f for f, info in found.items() if info.get("type") == "file" and not f.endswith(SIDE_LOG_SUFFIX))
        if not runs:
            raise InputError("no file matches this pattern", source=p)
        url = bool(URL_SCHEME.match(p))
        out += [fs.unstrip_protocol(f) if url else f for f in runs]
        if sides is not None:
            for run, side in _listed_sides(fs, runs).items():
                sides[fs.unstrip_protocol(run) if url else run] = fs.unstrip_protocol(side) if url and side else side
    return out


def _listed_sides(fs, runs: Sequence[str]) -> dict[str, str]:
    """Each run's side log or ``NO_SIDE_LOG``, by one listing of each folder the runs are in (paths
    as ``fs`` names them); a folder that cannot be listed leaves its runs out (their tasks ask)."""
    found: dict[str, str] = {}
    by_folder: dict[str, list[str]] = collections.defaultdict(list)
    for run in runs:
        by_folder[run.rpartition("/")[0]].append(run)
    for folder, inside in by_folder.items():
        try:
            listing = fs.ls(folder, detail=True)
        except Exception:  # OSError, or a storage backend's own: the tasks ask instead
            continue
        present = {info["name"].rstrip("/") for info in listing if info.get("type") == "file"}
        named = {info["name"].rstrip("/") for info in listing}
        for run in inside:
            side = side_log_beside(run)
            if side in present:
                found[run] = side
            elif side not in named:
                found[run] = NO_SIDE_LOG
            # else something not a plain file bears its name (a folder, a dangling link): its task looks
    return found


def side_log_beside(path: str) -> str:
    """``recapture.side_log_beside``: the naming rule every door pairs a side log by."""
    return recapture_side_log_beside(path)


def block_bounds(plan: RunPlan, block_bytes: int = BLOCK_BYTES) -> list[tuple[int, int]]:
    """Nominal ``[start, end)`` ranges covering the records (no file access)."""
    starts = range(plan.header_end, plan.size, max(1, block_bytes))
    return [(s, min(s + block_bytes, plan.size)) for s in starts]


def read_owned(fh, start: int, end: int, first: bool) -> tuple[int, bytes]:
    """(offset, bytes) of the whole lines that start in ``[start, end)``; ``first``: ``start``
    is known to begin a line (the byte after the header)."""
    if first:
        begin = start
        fh.seek(start)
        data = fh.read(end - start)
    else:
        fh.seek(start - 1)
        data = fh.read(end - start + 1)
        cut = data.find(b"\n")
        if cut < 0:
            return end, b""  # the whole range lies inside a line an earlier block owns
        begin = start + cut
        data = data[cut + 1:]
    if begin >= end:
        return begin, b""
    # Finish the last line: up to the first newline at or after byte end - 1.
    parts = [data]
    if not data.endswith(b"\n"):
        while True:
            more = fh.read(_READ_AHEAD)
            if not more:
                break
            cut = more.find(b"\n")
            if cut >= 0:
                parts.append(more[:cut + 1])
                break
            parts.append(more)
    return begin, b"".join(parts)
