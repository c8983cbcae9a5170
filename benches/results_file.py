"""benches/RESULTS.md, shared by the benches that write a section of it between two markers."""

from __future__ import annotations

from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "RESULTS.md"


def replace_section(lines: list[str], begin: str, end: str) -> None:
    """``lines`` (from ``begin`` to ``end``) in RESULTS.md in place of the section between those
    markers, or at the file's end where it has none: a bench rewrites only its own figures."""
    text = RESULTS.read_text() if RESULTS.exists() else "# Benchmarks\n"
    section = "\n".join(lines) + "\n"
    if begin in text and end in text:
        text = text[:text.index(begin)] + section + text[text.index(end) + len(end) + 1:]
    else:
        text = text.rstrip("\n") + "\n\n" + section
    RESULTS.write_text(text)
