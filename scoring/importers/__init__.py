"""Importers: one module per log format, a registry, and automatic format detection.

Each importer module has ``NAME``, ``sniff(head: bytes) -> bool`` and
``parse(data: bytes, source: str) -> Run``; ``load_run(path)`` picks one by sniffing (or by
name) and maps low-level failures to :class:`~scoring.errors.InputError`.
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

from ..errors import InputError, UnknownFormatError
from ..model import Run
from . import canonical
from ._common import read_bytes

#: Registered importers, tried in this order by ``sniff_format``.
IMPORTERS: dict[str, ModuleType] = {canonical.NAME: canonical}

SNIFF_BYTES = 64 * 1024


def formats() -> tuple[str, ...]:
    return tuple(IMPORTERS)


def sniff_format(head: bytes, source: str) -> str:
    """The name of the first importer that recognises ``head``; UnknownFormatError otherwise."""
    for name, module in IMPORTERS.items():
        if module.sniff(head):
            return name
    raise UnknownFormatError(source=source, tried=formats())


def parse_run(data: bytes, source: str, fmt: str = "auto") -> Run:
    """Parse bytes of a known or sniffed format into a Run."""
    if fmt == "auto":
        fmt = sniff_format(data[:SNIFF_BYTES], source)
    if fmt not in IMPORTERS:
        raise InputError(f"unknown format {fmt!r} (known: {', '.join(formats())})", source=source)
    return IMPORTERS[fmt].parse(data, source)


def load_run(path: str | Path, fmt: str = "auto") -> Run:
    """Read and parse a run file."""
    path = Path(path)
    if path.is_dir():
        raise InputError("is a folder, expected a run file", source=str(path))
    return parse_run(read_bytes(path), str(path), fmt)


__all__ = ["IMPORTERS", "formats", "load_run", "parse_run", "sniff_format"]
