"""Opening input files safely: regular files only, refused before a byte is read.

A path given to the CLI or the app may name a device (``/dev/zero`` never ends), a FIFO (a
read blocks until somebody writes, perhaps for ever) or a folder. Each is refused with a
located :class:`InputError` before anything is read. The file is opened non-blocking (opening
a FIFO for reading would otherwise wait for a writer) and checked on the open descriptor, so a
path swapped between a check and the open cannot slip through.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import BinaryIO

from .errors import InputError

_KINDS = (
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def _not_regular(mode: int) -> str | None:
    if stat.S_ISREG(mode):
        return None
    for test, name in _KINDS:
        if test(mode):
            return name
    return "not a regular file"


def _refuse(path: str | Path, kind: str) -> InputError:
    return InputError(f"is {kind}, not a regular file; only regular files are read", source=str(path))


def check_regular(path: str | Path) -> os.stat_result:
    """The file's stat, or InputError when it is not a regular file (or cannot be read)."""
    try:
        st = os.stat(path)
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror or exc}", source=str(path)) from exc
    kind = _not_regular(st.st_mode)
    if kind is not None:
        raise _refuse(path, kind)
    return st


def open_regular(path: str | Path) -> BinaryIO:
    """``open(path, "rb")`` for a regular file only (InputError otherwise; OSError as usual
    when it cannot be opened)."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_BINARY", 0)
    fd = os.open(path, flags)
    try:
        kind = _not_regular(os.fstat(fd).st_mode)
        if kind is not None:
            raise _refuse(path, kind)
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_regular(path: str | Path) -> bytes:
    """The bytes of a regular file; InputError naming it for anything else or a read error."""
    try:
        with open_regular(path) as fh:
            return fh.read()
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror or exc}", source=str(path)) from exc


def count_lines(path: str | Path) -> int:
    """Newlines in a regular file, reading at most the size it had when opened (a file that
    grows meanwhile, a device or a FIFO cannot make this read for ever)."""
    try:
        with open_regular(path) as fh:
            left = os.fstat(fh.fileno()).st_size
            n = 0
            while left > 0 and (chunk := fh.read(min(left, 1 << 20))):
                n += chunk.count(b"\n")
                left -= len(chunk)
            return n
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror or exc}", source=str(path)) from exc


__all__ = ["check_regular", "count_lines", "open_regular", "read_regular"]
