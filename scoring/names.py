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

import dataclasses
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


@dataclass(frozen=True, slots=True)
class ScoredAs:
    """How a run was scored, as its name says it: each option that is part of its key
    (``request.ScoringRequest.run_key``), in the form it is stored (the same bytes scored
    otherwise are another run)."""

    side_log: bool = False
    """A side log of payloads was joined."""
    verdict_map: str | None = None
    """The verdict map's text (``ScoringRequest.verdict_text``)."""
    reclassifier: str | None = None
    """The re-classifier's spec."""
    proof: bool = False
    """An Inspect log's proof side log was read."""
    require_proof: bool = False
    """``--require-proof`` was asked."""


def scoring_words(how: ScoredAs) -> list[str]:
    """How a run was scored, in words, one per option of ``how`` that is set."""
    words = []
    if how.side_log:
        words.append("with side log")
    if how.verdict_map:
        words.append(f"verdict map {_bounded(how.verdict_map, PART_CHARS)}")
    if how.reclassifier:
        words.append(f"re-classifier {_bounded(how.reclassifier, PART_CHARS)}")
    if how.proof:
        words.append("proof side log")
    if how.require_proof:
        words.append("require-proof")
    return words


def run_name(header: RunHeader, how: ScoredAs = ScoredAs()) -> str:
    """The run's name: its model, its task (the run id where the format records none), its
    attack or variant, then how it was scored (``scoring_words``; whether a proof was read and
    required is the header's word)."""
    how = dataclasses.replace(how, proof=header.proof_read, require_proof=header.require_proof)
    return name_of(header.model, header.task, header.variant, header.run_id, how)


def name_of(model: str, task: str, variant: str, run_id: str, how: ScoredAs = ScoredAs()) -> str:
    """``run_name`` from the parts as stored. A part that repeats the one before it is said
    once (a model named after its file, like its run id)."""
    parts = [model.strip() if model.strip() and model.strip() != "unknown" else UNKNOWN_MODEL,
             task.strip() or run_id, variant.strip()]
    said: list[str] = []
    for part in parts:
        part = _bounded(part, PART_CHARS)
        if part and part not in said:
            said.append(part)
    return SEPARATOR.join([_bounded(SEPARATOR.join(said), NAME_CHARS), *scoring_words(how)])


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
