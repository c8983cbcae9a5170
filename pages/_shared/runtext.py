"""A run in words wherever it is named: its status badge and the line that names it alone.

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


def run_line(name: str, run_id: str, run_key: str, source: str, original_name: str = "", run_status: str = "",
             detail: str = "") -> str:
    """One line that names a run on its own (an exported image, a CSV): its name (model, task,
    variant, how it was scored), the harness's run id where the name does not hold it, short key,
    file name, and the status badge where it did not finish."""
    badge = status_badge(run_status, detail)
    parts = name.split(" · ")
    named = name if run_id in parts else f"{name} · run id {run_id}"
    key = f"key {run_key[:12]}"  # a run named apart from its twin by its key says it once
    return (named + ("" if key in parts else f" · {key}") + f" · file {file_name(source, original_name) or '?'}"
            + (f" · {badge}" if badge else ""))


def middle_cut(text: str, limit: int) -> str:
    """``text`` in ``limit`` characters: its start and its end, "…" between. A run's name starts
    with its model and ends with what tells it from its twins (variant, how it was scored,
    status): a place too narrow for it keeps both (and shows it whole elsewhere)."""
    if len(text) <= limit:
        return text
    head = limit * 2 // 5
    return text[:head] + "…" + text[len(text) - (limit - head - 1):]


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
