"""Importers: one module per log format, a registry, and automatic format detection.

Each importer module implements :class:`~scoring.importers.base.Importer` (``NAME``, ``HINTS``,
``sniff``, ``continuations``, ``parse``); the registry treats them all alike. ``load_run(path)``
picks one by sniffing (or by name), reads the files that continue the run when the format
names any, and maps a malformed single-record file to :class:`~scoring.errors.InputError`.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import InputError, LitmusReviewError, RecordError, UnknownFormatError
from ..files import open_regular
from ..model import Run
from . import (
    agentdojo,
    agentdojo_dir,
    anthropic_messages,
    atif,
    canonical,
    inspect_log,
    litmus_log,
    openai_chat,
    tau2,
)
from ._common import array_first_keys, read_bytes
from ._zip import reading, total_budget
from .base import Importer, ParseOptions, Segment
from .inspect_log import VerdictMap

#: Registered importers, tried in this order by ``sniff_format`` (most specific first; the
#: generic chat formats last). Typed as the interface, so mypy checks every module against
#: ``Importer``: one that lacks a member, or has one of another type, fails ``make test``.
REGISTERED: tuple[Importer, ...] = (
    canonical, inspect_log, agentdojo, agentdojo_dir, tau2, atif, litmus_log, anthropic_messages, openai_chat)
IMPORTERS: dict[str, Importer] = {m.NAME: m for m in REGISTERED}

CATEGORY_VERSION = 1
"""How the importers read a harness's own categories (``model.Trajectory.category``): 1 =
Inspect's sample ``metadata.category``, AgentDojo's ``suite · injection_task`` (the suite alone
without an injection), tau2's domain. Bump it when a format's mapping changes: a workspace's
runs read under another version have their categories re-derived from their original bytes as
it opens (a category moves no status: nothing is rescored)."""
CATEGORY_FORMATS = frozenset({inspect_log.NAME, agentdojo.NAME, agentdojo_dir.NAME, tau2.NAME})
"""The formats whose importer reads a category that runs imported before ``CATEGORY_VERSION``
1 do not hold (a canonical run's own ``category`` field is read too)."""

#: At most this many files make one run (the first and the ones continuing it).
MAX_FILES_PER_RUN = 100

SNIFF_BYTES = 64 * 1024


def formats() -> tuple[str, ...]:
    return tuple(IMPORTERS)


#: Keys (as they appear in JSON) that each format writes (``Importer.HINTS``).
FORMAT_HINTS: dict[str, tuple[bytes, ...]] = {name: m.HINTS for name, m in IMPORTERS.items()}


def closest_format(head: bytes) -> tuple[str | None, tuple[str, ...]]:
    """The format whose characteristic keys ``head`` holds most of, and those keys (None and
    () when it holds none)."""
    best: str | None = None
    best_keys: tuple[str, ...] = ()
    for name, keys in FORMAT_HINTS.items():
        found = tuple(k.decode().strip('"') for k in keys if k in head)
        if len(found) > len(best_keys):
            best, best_keys = name, found
    return best, best_keys


def sniff_format(head: bytes, source: str, data: bytes | None = None) -> str:
    """The name of the first importer that recognises ``head``; UnknownFormatError otherwise,
    naming the closest format and, where it can read the file (tried on ``data``, the whole
    file, when given), the ``--format`` that forces it; an empty file is said so."""
    for name, module in IMPORTERS.items():
        if module.sniff(head):
            return name
    if not head.strip():
        raise InputError("empty file" if not head else "empty file (only white space)", source=source)
    line = head.lstrip().split(b"\n", 1)[0]
    if all(k in line for k in (b'"trajectory_id"', b'"call_index"', b'"sha256"', b'"arguments"')):
        raise InputError("a payload side log, not a run: name it RUN.payloads.jsonl beside its run (it is then "
                         "paired automatically) or give it with --payloads", source=source)
    closest, keys = closest_format(head)
    shape = _shape(head)
    if closest is None:
        detail = "it holds none of the keys these formats write"
    else:
        cannot = _cannot_read(closest, data, source) if data is not None else None
        detail = (f"closest: {closest} (it has {', '.join(keys)}); if it is {closest}, force it with "
                  f"--format {closest} to see what is missing") if cannot is None else (
            f"closest: {closest} (it has {', '.join(keys)}), but {closest} cannot read it either ({cannot}): "
            "no format here reads this file")
    why = "; ".join(f"{name}: needs {module.NEEDS}" for name, module in IMPORTERS.items())
    raise UnknownFormatError(source=source, tried=formats(), detail=f"{shape}; {detail}. Why each refused: {why}",
                             closest=closest)


def _cannot_read(fmt: str, data: bytes, source: str) -> str | None:
    """Why ``fmt`` cannot read ``data`` (it refuses the file, or reads no trajectory from it);
    None when it reads at least one."""
    try:
        run = IMPORTERS[fmt].parse(data, source, ParseOptions())
    except LitmusReviewError as exc:
        return exc.message if isinstance(exc, (InputError, RecordError)) else str(exc)
    except (KeyError, TypeError, ValueError, AttributeError, IndexError, RecursionError) as exc:
        return f"{type(exc).__name__}: {exc}"
    if run.trajectories:
        return None
    first = run.rejected[0].message if run.rejected else "no records"
    return f"it reads no trajectory: {first}"


def _shape(head: bytes) -> str:
    """What the file is, as far as sniffing saw (said when no format recognises it)."""
    h = head.lstrip()
    if h.startswith(b"["):
        first = array_first_keys(head)
        if first is None:
            return "it is a JSON array whose elements are not messages (nor objects)"
        listed = ", ".join(sorted(first)[:8]) or "no keys"
        return f"it is a JSON array whose elements are not messages (the first is an object with {listed})"
    if h.startswith(b"{"):
        return "it is a JSON object (or JSON lines of objects) of no known shape"
    return "it does not start like JSON (an object or an array)"


def sniff_file(path: str | Path) -> str:
    """``sniff_format`` of a file's first ``SNIFF_BYTES``; InputError naming it if unreadable."""
    path = Path(path)
    try:
        with open_regular(path) as fh:  # a device or FIFO is refused before reading
            head = fh.read(SNIFF_BYTES)
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror or exc}", source=str(path)) from exc
    try:
        return sniff_format(head, str(path))
    except UnknownFormatError as exc:
        if exc.closest is None:
            raise
        # whether the closest format can read it needs the whole file (said either way)
        return sniff_format(head, str(path), read_bytes(path))


def parse_run(data: bytes, source: str, fmt: str = "auto", *, verdict_map: VerdictMap | None = None,
              continuations: tuple[Segment, ...] | None = None, decode_budget: int | None = None) -> Run:
    """Parse bytes of a known or sniffed format into a Run.

    ``verdict_map`` (an ``inspect_log.VerdictMap``) says which Inspect scorer values mean
    unsafe; other formats ignore it. ``continuations``: the files continuing this one, when the
    caller has them; None reads the ones the format names from beside ``source``.
    ``decode_budget``: what reading the file may cost in decoded bytes and in memory at once,
    whatever its format (None: the documented default, ``_zip.total_budget`` of its size).
    """
    if not data.strip():
        raise InputError("empty file" if not data else "empty file (only white space)", source=source)
    if fmt == "auto":
        fmt = sniff_format(data[:SNIFF_BYTES], source, data)
    if fmt not in IMPORTERS:
        raise InputError(f"unknown format {fmt!r} (known: {', '.join(formats())})", source=source)
    importer = IMPORTERS[fmt]
    if continuations is None:
        continuations = read_continuations(importer, data, source)
    try:
        # its budget held against every file this process reads at once (a server's visitors)
        with reading(getattr(importer, "reading_budget", file_reading_budget)(data, decode_budget)):
            return importer.parse(data, source, ParseOptions(verdict_map=verdict_map, continuations=continuations,
                                                             decode_budget=decode_budget))
    except RecordError as exc:
        # a whole-document format whose single record is malformed: the file is unusable
        raise InputError(exc.message, source=source, record_id=exc.record_id) from exc



def file_reading_budget(data: bytes, decode_budget: int | None) -> int:
    """What parsing ``data`` may cost (``_zip.Budget``): ``decode_budget``, else the documented
    ``total_budget`` of its size. A format whose parse holds another budget says so with a
    ``reading_budget`` of its own (``agentdojo_dir``)."""
    return total_budget(len(data)) if decode_budget is None else decode_budget

def read_continuations(importer: Importer, data: bytes, source: str) -> tuple[Segment, ...]:
    """The files continuing the run file ``source`` (whose bytes are ``data``), in order: for
    each, the first regular file not read yet among the paths the importer names. Stops where
    none is found; the importer says so in the run."""
    out: list[Segment] = []
    seen, current = {source}, data
    while len(out) + 1 < MAX_FILES_PER_RUN:
        nxt = next((c for c in importer.continuations(current, source) if Path(c).is_file() and c not in seen), None)
        if nxt is None:
            break
        seen.add(nxt)
        current = Path(nxt).read_bytes()
        out.append(Segment(source=nxt, data=current))
    return tuple(out)


def holds_runs(path: str | Path, fmt: str = "auto") -> bool:
    """Whether ``path`` is an AgentDojo run directory (a folder, or a zip of one) rather than a
    run file: it then holds one run per pipeline and attack."""
    path = Path(path)
    if path.is_dir():
        return True
    if fmt not in ("auto", agentdojo.NAME, agentdojo_dir.NAME) or path.suffix.lower() != ".zip" \
            or not path.is_file():
        return False
    with open_regular(path) as fh:
        data = fh.read()
    # a zip standing for one run of a directory (run_zip) is a run file like any other
    return agentdojo_dir.is_run_zip(data) and agentdojo_dir.selected_run(data) is None


def load_runs(path: str | Path, fmt: str = "auto", *, verdict_map: VerdictMap | None = None) -> tuple[Run, ...]:
    """Every run a path holds: an AgentDojo run directory (a folder, or a zip of one) holds one
    per pipeline and attack (``agentdojo_dir``); any other file holds one (``load_run``)."""
    path = Path(path)
    if path.is_dir():
        if fmt not in ("auto", agentdojo.NAME, agentdojo_dir.NAME):
            raise InputError(f"is a folder: only an AgentDojo run directory is read from one, not {fmt}",
                             source=str(path))
        return agentdojo_dir.read_run_directory(path)
    if holds_runs(path, fmt):
        return agentdojo_dir.read_run_zip(read_bytes(path), str(path))
    return (load_run(path, fmt, verdict_map=verdict_map),)


def load_run(path: str | Path, fmt: str = "auto", *, verdict_map: VerdictMap | None = None,
             decode_budget: int | None = None) -> Run:
    """Read and parse a run file (``decode_budget``: as ``parse_run``)."""
    path = Path(path)
    if path.is_dir():
        raise InputError("is a folder, expected a run file (an AgentDojo run directory holds several runs: "
                         "score the folder itself)", source=str(path))
    return parse_run(read_bytes(path), str(path), fmt, verdict_map=verdict_map, decode_budget=decode_budget)


__all__ = ["IMPORTERS", "Importer", "ParseOptions", "Segment", "formats", "holds_runs", "load_run", "load_runs",
           "parse_run", "read_continuations", "sniff_file", "sniff_format"]
