"""Showing text the data wrote without obeying it: invisible characters revealed, terminal
controls spelled out, spreadsheet formulas defused, file names bounded.

Everything here is one pass in C (a compiled character class, ``str.translate``): a 60 MB
trajectory is revealed in the time a regular-expression scan takes, not character by
character in Python.
"""

from __future__ import annotations

import functools
import re
import unicodedata

_INVISIBLE_RANGES = (
    (0x200B, 0x200F), (0x202A, 0x202E), (0x2060, 0x2064), (0x2066, 0x2069), (0xFEFF, 0xFEFF),
    (0x00AD, 0x00AD), (0x180E, 0x180E), (0xFFF9, 0xFFFB),
)
"""Zero-width characters, bidi embeddings and overrides, invisible operators, soft hyphen."""


def is_invisible(ch: str, keep: str = "\n\t") -> bool:
    """A control character (C0, DEL, C1), one of ``_INVISIBLE_RANGES``, or a format, private-use
    or surrogate code point; the characters in ``keep`` are not counted."""
    o = ord(ch)
    if ch in keep:
        return False
    if o < 0x20 or 0x7F <= o < 0xA0:
        return True
    if any(lo <= o <= hi for lo, hi in _INVISIBLE_RANGES):
        return True
    return unicodedata.category(ch) in ("Cf", "Co", "Cs")


_PRIVATE_AND_SURROGATES = ((0xD800, 0xDFFF), (0xE000, 0xF8FF), (0xF0000, 0xFFFFD), (0x100000, 0x10FFFD))
"""The code points of categories Cs and Co (fixed by the standard)."""
_FORMAT_PLANES = (range(0, 0x30000), range(0xE0000, 0xF0000))
"""Where format (Cf) characters are assigned; the other planes hold none."""


@functools.cache
def _invisible_pattern(keep: str) -> re.Pattern:
    # The character class is built once per process from the same definition as
    # ``is_invisible`` (a test holds the two equal over the whole code space); matching it is
    # then a C loop over the text.
    category = unicodedata.category
    points = {o for o in range(0x20)} | set(range(0x7F, 0xA0))
    points.update(o for lo, hi in _INVISIBLE_RANGES + _PRIVATE_AND_SURROGATES for o in range(lo, hi + 1))
    points.update(o for plane in _FORMAT_PLANES for o in plane if category(chr(o)) == "Cf")
    points -= {ord(c) for c in keep}
    ranges: list[list[int]] = []
    for o in sorted(points):
        if ranges and ranges[-1][1] == o - 1:
            ranges[-1][1] = o
        else:
            ranges.append([o, o])
    cls = "".join(f"\\U{lo:08x}" if lo == hi else f"\\U{lo:08x}-\\U{hi:08x}" for lo, hi in ranges)
    return re.compile(f"[{cls}]")


def _mark(m: re.Match) -> str:
    return f"⟨U+{ord(m.group()):04X}⟩"


def reveal(text: str, keep: str = "\n\t") -> tuple[str, int]:
    """The text with every invisible or control character (except those in ``keep``) shown as
    ⟨U+XXXX⟩, and how many there were."""
    return _invisible_pattern(keep).subn(_mark, text)


def terminal_safe(text: object) -> str:
    """A value as one line for a terminal: escapes (ANSI, OSC titles, C1 CSI), newlines, bidi
    overrides and lone surrogates are spelled out as ⟨U+XXXX⟩, never obeyed or written raw."""
    return reveal(str(text), keep="")[0]


_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def csv_safe(value: object) -> object:
    """A CSV cell a spreadsheet will not run: text starting with = + - @ tab or CR gets a
    leading apostrophe (OWASP's advice for CSV injection). Text already starting with an
    apostrophe gets one more, so ``csv_unsafe`` gives back exactly the original. Numbers and
    None pass unchanged."""
    if isinstance(value, str) and value.startswith((*_FORMULA_START, "'")):
        return "'" + value
    return value


def csv_unsafe(value: str) -> str:
    """The text ``csv_safe`` was given (one leading apostrophe taken off)."""
    return value[1:] if value.startswith("'") else value


_UNSAFE_NAME = re.compile(r"[^A-Za-z0-9._-]+")


def safe_file_name(stem: str, suffix: str, limit: int = 80) -> str:
    """A download file name from a data-written ``stem``: only ``[A-Za-z0-9._-]`` kept (runs
    of others become one ``_``), no leading dot, at most ``limit`` characters before ``suffix``."""
    cleaned = _UNSAFE_NAME.sub("_", stem).strip("._") or "run"
    return cleaned[:limit] + suffix


__all__ = ["csv_safe", "csv_unsafe", "is_invisible", "reveal", "safe_file_name", "terminal_safe"]
