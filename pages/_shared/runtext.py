"""A run in words wherever it is named: its status badge and the name that tells it apart.

Pure string functions (no Streamlit, no plotly): the pages, the chart legends, the report table
and every export share them. The text they return comes partly from the run's file: reveal it
(``inert.reveal_id``) or escape it for the place that shows it.
"""

from __future__ import annotations

import re
from pathlib import PurePath

FINISHED = ("", "success")
"""Run statuses that need no badge: the run finished, or its format does not say."""

_WRITTEN = re.compile(r"([\d,]+) of ([\d,]+) samples written")


def status_badge(run_status: str, detail: str = "") -> str:
    """"cancelled — 39 of 176 samples" for a run that did not finish; "" for one that did (or
    whose format does not say). The full message is ``detail``: shown on demand, never cut here."""
    if run_status in FINISHED:
        return ""
    found = _WRITTEN.search(detail or "")
    return f"{run_status} — {found[1]} of {found[2]} samples" if found else run_status


def file_name(source: str, original_name: str = "") -> str:
    """The name of the file a run came from (an upload's own name, else the path's last part)."""
    return original_name or PurePath(source or "").name


def run_name(run_id: str, run_key: str, *, twins: bool, side_log: bool = False, run_status: str = "",
             detail: str = "") -> str:
    """A run's name in a legend or a picker: its id, its short key where another run has the same
    id, "+side log", and its status badge where it did not finish."""
    badge = status_badge(run_status, detail)
    return (run_id + (f" ·{run_key[:6]}" if twins else "") + (" +side log" if side_log else "")
            + (f" [{badge}]" if badge else ""))


def run_line(run_id: str, model: str, run_key: str, source: str, original_name: str = "", run_status: str = "",
             detail: str = "") -> str:
    """One line that names a run on its own (an exported image, a CSV): id, model, short key,
    file name, and the status badge where it did not finish."""
    badge = status_badge(run_status, detail)
    return (f"{run_id} · model {model} · key {run_key[:12]} · file {file_name(source, original_name) or '?'}"
            + (f" · {badge}" if badge else ""))


def stale_mark(scorer_version: str) -> str:
    """How a stale run is marked wherever it is named: "STALE (scorer 3.0)"."""
    return f"STALE (scorer {scorer_version})"


def stale_text(name: str, run_key: str, scorer_version: str, current: str, *, original_held: bool) -> str:
    """Why a stale run's figures are not this scorer's, and how to update them (``name`` names the
    run: data-written text, revealed or escaped by the caller)."""
    how = ("The workspace does not hold its original bytes: give its file again with "
           f"litmus-review rescore {run_key[:12]} --from FILE (refused unless its SHA-256 is the file's at import)."
           if not original_held else
           f"litmus-review rescore {run_key[:12]} rescores it from the original bytes the workspace keeps, or says "
           "why it cannot.")
    mark = stale_mark(scorer_version)
    named = name if mark in name else f"{name} · {mark}"
    return (f"{named}: its statuses, counts and rates are scorer {scorer_version}'s; scorer {current} has not "
            f"scored it, and nothing shown for it is this scorer's. {how}")
