"""The pages' one mapping from an error to what a person is shown.

The pages catch ``SHOWN``: the exception tree of ``scoring.errors`` (whose messages already
name the file, line or record and what is wrong) and the file system's ``OSError`` (its reason
and the file). Anything else is a bug and keeps Streamlit's own error display (without its
traceback: ``client.showErrorDetails = "none"``). Messages quote names the data wrote, so they
are drawn inert.

In team mode the people reading a message are not the server's operator: no message names a
path on the server (the workspace and its folder, an upload's temporary file, a bundled
sample, a library's file). ``error_text`` is the one function every page's error message goes
through: it replaces each path the user gave a name to (an upload's temporary file: its file
name) by that name, and every other server path by ``SERVER_PATH``; the whole message goes to
the server's log. A server path is recognised three ways, so none depends on the message's
wording: the paths the error itself carries (``source``, ``path``, ``filename``), the server's
own folders (the workspace's, the temporary files', the app's, Python's, the home folder) with
whatever follows them, and any absolute path at all (a message from deep in a library).
"""

from __future__ import annotations

import logging
import os
import re
import sys
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path

import streamlit as st

from pages._shared import loaders, router
from pages._shared.inert import md
from scoring.errors import LitmusReviewError

#: What a page reports as a message (never a traceback).
SHOWN: tuple[type[Exception], ...] = (LitmusReviewError, OSError)

SERVER_PATH = "[server path]"
"""What a team-mode message says where it named a path on the server."""

LOG = logging.getLogger("litmus_review.pages")

_PATH_CHARS = r"[^\s'\"`<>|,;()\[\]{}]"
"""Characters a path is read through in a message (it ends at white space, a quote, a bracket
or a separator: a path with a space is cut there, its rest read as another word)."""
_ABSOLUTE = re.compile(
    rf"file://{_PATH_CHARS}*"  # a file URL
    rf"|(?<![\w/.:~-])~?/{_PATH_CHARS}+"  # a POSIX path (not the path of a URL, not a/b)
    rf"|(?<![\w])[A-Za-z]:\\{_PATH_CHARS}*"  # a Windows one
    rf"|\\\\{_PATH_CHARS}+"  # a UNC one
)


def _server_folders() -> list[str]:
    """Folders of this server whose paths no team-mode message shows (absolute, longest first)."""
    db = Path(loaders.db()).absolute()
    app = Path(__file__).resolve().parents[2]
    found = {str(db), str(db.parent), tempfile.gettempdir(), str(app), sys.prefix, sys.base_prefix, os.getcwd(),
             str(Path.home())}
    for folder in list(found):
        found.add(os.path.realpath(folder))
    return sorted((f for f in found if f and f != os.sep), key=len, reverse=True)


def _carried_paths(exc: BaseException) -> list[str]:
    """The paths an error carries as data: its ``source``, ``path``, ``filename``."""
    out = []
    for name in ("source", "path", "filename", "filename2"):
        value = getattr(exc, name, None)
        if isinstance(value, (str, os.PathLike)) and str(value):
            out.append(os.fspath(value))
    return out


def public_text(text: str, *, names: Mapping[str, str] | None = None, carried: Iterable[str] = ()) -> str:
    """``text`` as a page may show it. Outside team mode: as it is. In team mode: each server
    path in ``names`` replaced by the name the user gave it, every other server path (one in
    ``carried``, one under a server folder, any absolute path) by ``SERVER_PATH``; the whole
    text is logged on the server when anything was replaced."""
    if not router.team_mode():
        return text
    given: dict[str, str] = {}  # placeholder -> the user's name, put back once everything else is replaced

    def hold(name: str) -> str:
        given[f"\0{len(given)}\0"] = name
        return f"\0{len(given) - 1}\0"

    shown = text
    for server, name in sorted((names or {}).items(), key=lambda kv: len(kv[0]), reverse=True):
        if server:
            shown = shown.replace(server, hold(name))
    for path in sorted(set(carried) - set(names or {}), key=len, reverse=True):
        shown = shown.replace(path, SERVER_PATH)
    for folder in _server_folders():
        shown = re.sub(re.escape(folder) + rf"(?:[/\\]{_PATH_CHARS}*)?(?![\w.-])", SERVER_PATH, shown)
    shown = _ABSOLUTE.sub(SERVER_PATH, shown)
    for placeholder, name in given.items():
        shown = shown.replace(placeholder, name)
    if shown != text:
        LOG.warning("error shown in team mode without its server paths: %s", text)
    return shown


def error_text(exc: Exception, path: Path | str | None = None, *, names: Mapping[str, str] | None = None) -> str:
    """The message of ``exc`` as plain text, as a page may show it (``public_text``): the tree's
    own message; for a file-system error, its reason and the file (``path``, else the one the
    error names). ``names``: server paths the user gave names to (an upload's file → its name)."""
    if isinstance(exc, OSError):
        text = f"{exc.strerror or exc} ({path if path is not None else exc.filename})"
    else:
        text = str(exc)
    carried = [*_carried_paths(exc), *([os.fspath(path)] if path is not None else [])]
    return public_text(text, names=names, carried=carried)


def show_error(exc: Exception, *, before: str = "", path: Path | str | None = None,
               names: Mapping[str, str] | None = None) -> None:
    """``st.error`` with the message of ``exc`` (``error_text``), inert; ``before`` is markdown
    the page wrote (already inert) that says what failed."""
    st.error(before + md(error_text(exc, path, names=names), lines=True))
