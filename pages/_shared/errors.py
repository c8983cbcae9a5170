"""The pages' one mapping from an error to what a person is shown.

The pages catch ``SHOWN``: the exception tree of ``scoring.errors`` (whose messages already
name the file, line or record and what is wrong) and the file system's ``OSError`` (its reason
and the file). Anything else is a bug and keeps Streamlit's own error display. Messages quote
names the data wrote, so they are drawn inert.
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from pages._shared.inert import md
from scoring.errors import LitmusReviewError

#: What a page reports as a message (never a traceback).
SHOWN: tuple[type[Exception], ...] = (LitmusReviewError, OSError)


def error_text(exc: Exception, path: Path | str | None = None) -> str:
    """The message of ``exc`` as plain text: the tree's own message; for a file-system error,
    its reason and the file (``path``, else the one the error names)."""
    if isinstance(exc, OSError):
        return f"{exc.strerror or exc} ({path if path is not None else exc.filename})"
    return str(exc)


def show_error(exc: Exception, *, before: str = "", path: Path | str | None = None) -> None:
    """``st.error`` with the message of ``exc``, inert; ``before`` is markdown the page wrote
    (already inert) that says what failed."""
    st.error(before + md(error_text(exc, path), lines=True))
