"""Exported files that stand alone: pure builders of their rows, their names and their CSV.

Every exported file names, inside it, the run it is of (its name as the app shows it), the run's
key, the scorer version its statuses were computed under and when it was exported (UTC, ISO
8601). In a CSV these are columns of every row (``META_COLUMNS``), not a leading comment line
or a sidecar file: ``pandas.read_csv`` reads the file as written (a ``#`` line breaks it, and
``comment="#"`` would also cut a cell holding ``#``), a row keeps where it came from after it is
filtered or concatenated with another run's rows (``pd.concat`` of two runs' label files stays
told apart by ``run_key``), and there is no second file to lose on the way to a colleague. The
repeated values cost little (a CSV compresses them away) beside a file that cannot be traced.

No Streamlit, no plotly: the pages pass the run's name (the app's run-naming function) and the
paired differences they computed.
"""

from __future__ import annotations

import csv
import hashlib
import io
import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from .aggregate import PairedDifference
from .text import csv_safe, reveal

META_COLUMNS = ("run", "run_key", "scorer_version", "exported_at")
"""What every row of an exported CSV of one run ends with: the file names its run inside it."""


@dataclass(frozen=True, slots=True)
class RunMeta:
    """A run as an exported file names it."""

    name: str
    """The run's name as the app shows it (data-written text: revealed when written to a file)."""
    run_key: str
    """The run's identity in the workspace (its content SHA-256), in full."""
    scorer_version: str
    """The scorer version the run's statuses were computed under (the stored run's own)."""

    def columns(self, exported_at: str) -> dict[str, str]:
        """``META_COLUMNS`` of a row of this run."""
        return {"run": self.name, "run_key": self.run_key, "scorer_version": self.scorer_version,
                "exported_at": exported_at}


def exported_now() -> str:
    """The export time: UTC, ISO 8601 to the second ("2026-05-01T09:30:00+00:00")."""
    return datetime.now(UTC).isoformat(timespec="seconds")


SHORT_KEY = 12
"""Hex digits of a run key in a file name (as a run's line and its address name it)."""
MULTI_KEY = 8
"""Hex digits of each run's key in the name of a file of several runs."""
KEYS_IN_NAME = 3
"""Up to this many runs' short keys are listed in a file name; past it, a digest of them all."""
SLUG_CHARS = 60
"""A run's name in a file name is cut (at a word) past this."""

_NOT_SLUG = re.compile(r"[^a-z0-9]+")


def file_slug(name: str, limit: int = SLUG_CHARS) -> str:
    """A run's readable name as part of a file name: ASCII letters and digits in lower case, every
    other run of characters (a path separator, a control, a "·", a ⟨U+XXXX⟩ mark's brackets) one
    "-", cut to ``limit`` characters at a "-" where one is near; "run" when nothing is left."""
    ascii_text = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode("ascii").lower()
    slug = _NOT_SLUG.sub("-", ascii_text).strip("-")
    if len(slug) > limit:
        cut = slug[:limit]
        at = cut.rfind("-")
        slug = (cut[:at] if at >= limit // 2 else cut).strip("-")
    return slug or "run"


def export_file_name(kind: str, ext: str, run_keys: Sequence[str], name: str = "") -> str:
    """A download's name, unique per run and kind, so files of different runs never overwrite
    each other in a downloads folder: ``KIND--NAME--KEY12.EXT`` for one run (its readable name
    slugged, ``file_slug``; the key's first 12 hex digits make it unique, the name makes it
    readable: ``labels-final--gpt-4o-agentharm--57a6835d3430.csv``); for several,
    ``KIND--N-runs--KEY8-KEY8….EXT`` with every short key up to three runs, else
    ``KIND--N-runs--DIGEST8.EXT`` (the SHA-256 of all the keys in order: another selection gets
    another name)."""
    if not run_keys:
        raise ValueError("an export names at least one run")
    if len(run_keys) == 1:
        stem = file_slug(name) + "--" + run_keys[0][:SHORT_KEY] if name else run_keys[0][:SHORT_KEY]
    elif len(run_keys) <= KEYS_IN_NAME:
        stem = f"{len(run_keys)}-runs--" + "-".join(k[:MULTI_KEY] for k in run_keys)
    else:
        digest = hashlib.sha256("\n".join(run_keys).encode()).hexdigest()[:MULTI_KEY]
        stem = f"{len(run_keys)}-runs--{digest}"
    return f"{file_slug(kind, 40)}--{stem}.{file_slug(ext, 8)}"


def write_csv(rows: Iterable[Mapping[str, object]], columns: Sequence[str]) -> str:
    """CSV of ``rows`` in ``columns``' order, every text cell formula-safe (``csv_safe``) with
    its control characters spelled out (a newline in an id cannot end its row)."""
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(columns), lineterminator="\n", extrasaction="raise")
    w.writeheader()
    w.writerows({k: csv_safe(reveal(v, keep="")[0]) if isinstance(v, str) else ("" if v is None else v)
                 for k, v in r.items()} for r in rows)
    return buf.getvalue()


# --- the paired comparison ------------------------------------------------------------------

PAIRED_COLUMNS = ("run_a", "run_key_a", "scorer_version_a", "run_b", "run_key_b", "scorer_version_b",
                  "shared_tasks", "strict_difference_b_minus_a_pp", "ci95_low_pp", "ci95_high_pp", "note",
                  "exported_at")
"""One row per pair of runs: which two (each named as ``META_COLUMNS`` names a run), B's strict
safe rate minus A's in points over the tasks both ran (paired by task) with its 95 % t interval,
and why there is none where there is none."""


@dataclass(frozen=True, slots=True)
class PairedComparison:
    """B's strict safe rate minus A's on the tasks both ran, with the two runs named."""

    a: RunMeta
    b: RunMeta
    difference: PairedDifference

    @property
    def note(self) -> str:
        """Why there is no difference ("" where there is one)."""
        if self.difference.mean_diff is not None:
            return ""
        if self.difference.tasks == 0:
            return "no task has a strict rate in both runs: nothing to pair"
        return "only one task has a strict rate in both runs: an interval needs two"

    def row(self, exported_at: str) -> dict[str, object]:
        d = self.difference

        def pp(x: float | None) -> float | None:
            return None if x is None else 100 * x

        return {"run_a": self.a.name, "run_key_a": self.a.run_key, "scorer_version_a": self.a.scorer_version,
                "run_b": self.b.name, "run_key_b": self.b.run_key, "scorer_version_b": self.b.scorer_version,
                "shared_tasks": d.tasks, "strict_difference_b_minus_a_pp": pp(d.mean_diff),
                "ci95_low_pp": pp(d.low), "ci95_high_pp": pp(d.high), "note": self.note,
                "exported_at": exported_at}


def run_pairs(runs: Sequence[str]) -> list[tuple[str, str]]:
    """Every pair of the runs, in their order: (A, B) with A before B, B − A compared (the Safe
    rates page's default pair, the first two, comes first)."""
    return [(a, b) for i, a in enumerate(runs) for b in runs[i + 1:]]


def paired_rows(comparisons: Sequence[PairedComparison], exported_at: str) -> list[dict[str, object]]:
    return [c.row(exported_at) for c in comparisons]


def paired_csv(comparisons: Sequence[PairedComparison], exported_at: str) -> str:
    """The paired comparison as CSV: one row per pair (``PAIRED_COLUMNS``); a header alone where
    fewer than two runs were exported."""
    return write_csv(paired_rows(comparisons, exported_at), PAIRED_COLUMNS)


# --- labels ---------------------------------------------------------------------------------

FINAL_LABEL_COLUMNS = ("trajectory_id", "final_label", "decided_by", "reviewers", "labels", "adjudicator",
                       "decided_at", "notes", "status", "reason", "labels_set_aside", *META_COLUMNS)
"""One row per trace a reviewer labelled: its final label as the workspace derives it (the latest
live adjudication, else the reviewers' unanimous label; none where they disagree and no one has
adjudicated, or every label was undone), how it was decided, each reviewer's current label, and
the trace's scorer status. ``decided_by``: "adjudication", "unanimous", "disputed" (no final
label yet), "withdrawn" (every label undone) or "set_aside" (a rescore set its labels aside:
``labels_set_aside`` says why)."""


def final_labels_csv(rows: Sequence[Mapping[str, object]], run: RunMeta, exported_at: str) -> str:
    """The final labels of a run (``Labels.final_label_rows``) as CSV, each row naming its run."""
    meta = run.columns(exported_at)
    return write_csv(({**r, **meta} for r in rows), FINAL_LABEL_COLUMNS)


__all__ = ["FINAL_LABEL_COLUMNS", "META_COLUMNS", "PAIRED_COLUMNS", "PairedComparison", "RunMeta",
           "export_file_name", "exported_now", "file_slug", "final_labels_csv", "paired_csv", "paired_rows",
           "run_pairs", "write_csv"]
