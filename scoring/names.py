"""A run's name in words: "model · task · attack or variant", then how it was scored.

One pure function below every door (``run_name``): the sidebar, the Runs table, Safe rates,
Review, Report, the exports and ``score --json`` all name a run by it. Its parts are what the
run's format records (``RunHeader.model``, ``task`` and ``variant``, set by the importers), and
the options that made it a run of its own in the workspace, each in words ("with side log",
"require-proof", "re-classifier NAME"): the same file scored two ways reads as two runs, never
as one name with a different key suffix.

``unique_names`` makes the names of a workspace's runs distinct: runs that would share a name
get their import times, or (two imported in the same minute) their short keys. Deterministic: the
same runs give the same names on every reload and at every door.

The text comes from the run's file (hostile): every invisible, bidi or control character is
shown as ⟨U+XXXX⟩ (one line, nothing hidden), and each part and the whole are bounded. It is
plain text, never markup: escape it for the place that shows it (``pages._shared.inert``).
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from .model import RunHeader
from .text import reveal

SEPARATOR = " · "
PART_CHARS = 64
"""A part the file wrote (model, task, variant, a re-classifier's spec) is cut past this."""
NAME_CHARS = 180
"""The name without its disambiguation is cut past this (the disambiguation is never cut)."""
UNKNOWN_MODEL = "model unknown"


_SPACES = re.compile(r"[ \t]+")


def _bounded(text: str, limit: int) -> str:
    """``text`` revealed on one line (runs of spaces and tabs as one space; a line break or
    another control character shown as its ⟨U+XXXX⟩ mark, so that no text after it can pass for
    a line of its own) and cut to ``limit`` characters with "…" (never inside a mark)."""
    one_line = _SPACES.sub(" ", str(text)).strip(" ")
    shown = reveal(one_line, keep="")[0]
    if len(shown) <= limit:
        return shown
    cut = shown[:limit - 1]
    mark = cut.rfind("⟨")
    if mark != -1 and "⟩" not in cut[mark:]:
        cut = cut[:mark]
    return cut.rstrip() + "…"


def scoring_words(*, side_log: bool = False, verdict_map: str | None = None, reclassifier: str | None = None,
                  proof: bool = False, require_proof: bool = False) -> list[str]:
    """How a run was scored, in words, for each option that is part of its key
    (``settle.run_key``): the same bytes scored otherwise are another run."""
    words = []
    if side_log:
        words.append("with side log")
    if verdict_map:
        words.append(f"verdict map {_bounded(verdict_map, PART_CHARS)}")
    if reclassifier:
        words.append(f"re-classifier {_bounded(reclassifier, PART_CHARS)}")
    if proof:
        words.append("proof side log")
    if require_proof:
        words.append("require-proof")
    return words


def run_name(header: RunHeader, *, side_log: bool = False, verdict_map: str | None = None,
             reclassifier: str | None = None) -> str:
    """The run's name: its model, its task (the run id where the format records none), its
    attack or variant, then how it was scored (``scoring_words``)."""
    return name_of(header.model, header.task, header.variant, header.run_id, side_log=side_log,
                   verdict_map=verdict_map, reclassifier=reclassifier, proof=header.proof_read,
                   require_proof=header.require_proof)


def name_of(model: str, task: str, variant: str, run_id: str, **scoring) -> str:
    """``run_name`` from the parts as stored (``scoring``: as ``scoring_words`` takes them). A
    part that repeats the one before it is said once (a model named after its file, like its
    run id)."""
    parts = [model.strip() if model.strip() and model.strip() != "unknown" else UNKNOWN_MODEL,
             task.strip() or run_id, variant.strip()]
    said: list[str] = []
    for part in parts:
        part = _bounded(part, PART_CHARS)
        if part and part not in said:
            said.append(part)
    return SEPARATOR.join([_bounded(SEPARATOR.join(said), NAME_CHARS), *scoring_words(**scoring)])


@dataclass(frozen=True, slots=True)
class Named:
    """What ``unique_names`` reads of a run."""

    run_key: str
    name: str
    """``run_name`` of the run."""
    imported_at: str
    """ISO 8601 (the workspace's import time)."""


KEY_CHARS = 12
"""Characters of a run key in a name (as in an address and an export's run line)."""


def _imported(at: str) -> str:
    return "imported " + at[:16].replace("T", " ") if at else ""


def unique_names(runs: Iterable[Named]) -> dict[str, str]:
    """Each run's name, made distinct among ``runs``: runs that would share a name each get
    their import time (to the minute) where no two of them were imported in the same minute,
    else each its short key; should two names still read alike (a file that named its run as
    another's disambiguated name), their whole key. The run keys are distinct, so the names are."""
    runs = list(runs)
    twins: dict[str, list[Named]] = defaultdict(list)
    for r in runs:
        twins[r.name].append(r)
    out: dict[str, str] = {}
    for name, group in twins.items():
        if len(group) == 1:
            out[group[0].run_key] = name
            continue
        times = [_imported(r.imported_at) for r in group]
        by_time = all(times) and len(set(times)) == len(times)
        for r, when in zip(group, times, strict=True):
            out[r.run_key] = SEPARATOR.join([name, when if by_time else f"key {r.run_key[:KEY_CHARS]}"])
    seen = Counter(out.values())
    for r in runs:
        if seen[out[r.run_key]] > 1:
            out[r.run_key] = SEPARATOR.join([r.name, f"key {r.run_key}"])
    return out
