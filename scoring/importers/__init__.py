"""Importers: one module per log format, a registry, and automatic format detection.

Each importer module has ``NAME``, ``sniff(head: bytes) -> bool`` and
``parse(data: bytes, source: str) -> Run``; ``load_run(path)`` picks one by sniffing (or by
name) and maps low-level failures to :class:`~scoring.errors.InputError`.
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

from ..errors import InputError, UnknownFormatError
from ..files import open_regular
from ..model import Run
from . import (
    agentdojo,
    anthropic_messages,
    atif,
    canonical,
    inspect_log,
    litmus_log,
    openai_chat,
    tau2,
)
from ._common import RecordError, read_bytes

#: Registered importers, tried in this order by ``sniff_format`` (most specific first; the
#: generic chat formats last).
IMPORTERS: dict[str, ModuleType] = {m.NAME: m for m in (
    canonical, inspect_log, agentdojo, tau2, atif, litmus_log, anthropic_messages, openai_chat)}

SNIFF_BYTES = 64 * 1024


def formats() -> tuple[str, ...]:
    return tuple(IMPORTERS)


#: Keys (as they appear in JSON) that each format writes; an unrecognised file's closest format
#: is the one whose keys it holds most of. A hint for the error message, never a detection.
FORMAT_HINTS: dict[str, tuple[bytes, ...]] = {
    "canonical": (b'"record"', b'"format_version"', b'"raw_sha256"', b'"raw_size_bytes"', b'"capture_limit_bytes"'),
    "inspect": (b'"eval"', b'"samples"', b'"run_id"', b'"attachments"', b'"scores"', b'"epoch"'),
    "agentdojo": (b'"suite_name"', b'"user_task_id"', b'"injection_task_id"', b'"attack_type"', b'"security"',
                  b'"pipeline_name"', b'"utility"'),
    "tau2": (b'"simulations"', b'"termination_reason"', b'"reward_info"', b'"user_info"', b'"agent_info"',
             b'"tasks"'),
    "atif": (b'"schema_version"', b'"steps"', b'"session_id"', b'"step_id"', b'"observation"',
             b'"source_call_id"'),
    "litmus": (b'"row_idx"', b'"category_id"', b'"events"', b'"Prosecutor"', b'"Analyzer"', b'"judgement"'),
    "anthropic_messages": (b'"tool_use"', b'"tool_result"', b'"tool_use_id"', b'"sessionId"', b'"stop_reason"'),
    "openai_chat": (b'"tool_calls"', b'"tool_call_id"', b'"function"', b'"finish_reason"', b'"traj"'),
}


def closest_format(head: bytes) -> tuple[str | None, tuple[str, ...]]:
    """The format whose characteristic keys ``head`` holds most of, and those keys (None and
    () when it holds none)."""
    best, best_keys = None, ()
    for name, keys in FORMAT_HINTS.items():
        found = tuple(k.decode().strip('"') for k in keys if k in head)
        if len(found) > len(best_keys):
            best, best_keys = name, found
    return best, best_keys


def sniff_format(head: bytes, source: str) -> str:
    """The name of the first importer that recognises ``head``; UnknownFormatError otherwise
    (naming the closest format and the ``--format`` that forces it); an empty file is said so."""
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
    if closest is None:
        detail = "it holds none of the keys these formats write"
    else:
        detail = (f"closest: {closest} (it has {', '.join(keys)}); if it is {closest}, force it with "
                  f"--format {closest} to see what is missing")
    raise UnknownFormatError(source=source, tried=formats(), detail=detail, closest=closest)


def sniff_file(path: str | Path) -> str:
    """``sniff_format`` of a file's first ``SNIFF_BYTES``; InputError naming it if unreadable."""
    path = Path(path)
    try:
        with open_regular(path) as fh:  # a device or FIFO is refused before reading
            head = fh.read(SNIFF_BYTES)
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror or exc}", source=str(path)) from exc
    return sniff_format(head, str(path))


def parse_run(data: bytes, source: str, fmt: str = "auto", *, verdict_map=None) -> Run:
    """Parse bytes of a known or sniffed format into a Run.

    ``verdict_map`` (an ``inspect_log.VerdictMap``) says which Inspect scorer values mean
    unsafe; other formats ignore it.
    """
    if not data.strip():
        raise InputError("empty file" if not data else "empty file (only white space)", source=source)
    if fmt == "auto":
        fmt = sniff_format(data[:SNIFF_BYTES], source)
    if fmt not in IMPORTERS:
        raise InputError(f"unknown format {fmt!r} (known: {', '.join(formats())})", source=source)
    try:
        if fmt == inspect_log.NAME and verdict_map is not None:
            return inspect_log.parse(data, source, verdict_map)
        return IMPORTERS[fmt].parse(data, source)
    except RecordError as exc:
        # a whole-document format whose single record is malformed: the file is unusable
        raise InputError(exc.message, source=source, record_id=exc.record_id) from exc


def load_run(path: str | Path, fmt: str = "auto", *, verdict_map=None) -> Run:
    """Read and parse a run file."""
    path = Path(path)
    if path.is_dir():
        raise InputError("is a folder, expected a run file", source=str(path))
    return parse_run(read_bytes(path), str(path), fmt, verdict_map=verdict_map)


__all__ = ["IMPORTERS", "formats", "load_run", "parse_run", "sniff_file", "sniff_format"]
