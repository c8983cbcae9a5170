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


def sniff_format(head: bytes, source: str) -> str:
    """The name of the first importer that recognises ``head``; UnknownFormatError otherwise."""
    for name, module in IMPORTERS.items():
        if module.sniff(head):
            return name
    raise UnknownFormatError(source=source, tried=formats())


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
