"""The scoring options of one run, as one typed value every door builds once and passes whole.

``score FILE`` and ``import`` build it from one shared set of click options named after its
fields (``cli.SCORING_OPTIONS``), the Runs page from its import form (``pages/runs.py:
scoring_request``), the Dask engine's client from its arguments (``dask_engine.fleet.score_runs``,
``planning.plan_run``, which keeps it in the run's plan); a stored run reads it back from what
was stored with it (``ScoringRequest.from_stored``). Below the doors, a function that
scores or names a run takes the request, never the options one by one, so an option added here
reaches every door without each signature on the way learning its name.

The library functions that were called with the options as keywords still are
(``evaluate(path, verdict_map=...)``, ``Workspace.import_run(path, require_proof=True)``): they
take ``**options`` typed by ``ScoringOptions`` (the same names) and build the request at once
(``ScoringRequest.of``).

It owns the run key (``run_key``): the same bytes scored under other options are another run.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict

from .importers import inspect_log
from .importers.inspect_log import VerdictMap
from .recapture import side_log_found

AUTO_FORMAT = "auto"
"""``fmt`` when the format is sniffed from the file's first bytes."""


class SharedOptions(TypedDict, total=False):
    """The keywords a door of many runs takes for the ``ScoringRequest`` they share (each a
    field of it; each run's side log is its own)."""

    fmt: str
    verdict_map: VerdictMap | str | None
    reclassifier: str | None
    require_proof: bool


class ScoringOptions(SharedOptions, total=False):
    """The keywords a library door of one run takes for a ``ScoringRequest`` (each a field of it)."""

    payloads: str | Path | None


@dataclass(frozen=True, slots=True, kw_only=True)
class ScoringRequest:
    """How one run is to be scored: every choice besides the run's own bytes that decides its
    scores or how they are read."""

    fmt: str = AUTO_FORMAT
    """The run's format (an importer's name, ``canonical``), or ``auto`` to sniff it (``--format``)."""
    payloads: str | None = None
    """The side log of full payloads to join, as a path or URL (``--payloads``); None: none. A
    door that pairs ``RUN.payloads.jsonl`` beside the run puts the one it found here."""
    verdict_map: VerdictMap | None = None
    """Which Inspect scorer values mean unsafe, safe or no verdict (``--inspect-verdict``);
    None: the format's default."""
    reclassifier: str | None = None
    """The re-classifier's spec (``--classifier``, ``classifiers.load_classifier``), the
    classifier of record for recovered surfaces; None: none."""
    require_proof: bool = False
    """Every surface must be proven whole by bytes the scorer holds (``--require-proof``): a
    surface the harness only vouches for is unscored."""
    stored_verdict: str | None = None
    """The verdict map's text as a stored run holds it (``from_stored``): its key was made of
    that text, which a workspace of an older version may have written in another spelling of the
    same map. None: the map's rules form (``str(verdict_map)``), as every door keys it today."""

    @classmethod
    def of(cls, request: ScoringRequest | None = None, /, **options: Any) -> ScoringRequest:
        """The request a library door was given: ``request`` itself, or one built from its
        ``ScoringOptions`` keywords (as ``replace`` takes them). Both at once is a caller's
        mistake."""
        if request is not None:
            if options:
                raise TypeError(f"a ScoringRequest and loose options ({', '.join(sorted(options))}) "
                                "were both given: give one")
            return request
        return DEFAULT_REQUEST.replace(**options)

    def replace(self, **changes: Any) -> ScoringRequest:
        """This request with ``changes`` (``ScoringOptions`` names): a verdict map given as text
        is parsed (empty text: none), a path made text, no format the sniffed one (``auto``);
        every other value as given (an empty re-classifier spec is refused when it is started,
        never taken for none)."""
        unknown = set(changes) - ScoringOptions.__optional_keys__
        if unknown:
            raise TypeError(f"not a scoring option: {', '.join(sorted(unknown))}")
        if "fmt" in changes:
            changes["fmt"] = changes["fmt"] or AUTO_FORMAT
        if changes.get("payloads") is not None:
            changes["payloads"] = str(changes["payloads"])
        if "verdict_map" in changes:
            vmap = changes["verdict_map"]
            if isinstance(vmap, str):
                changes["verdict_map"] = VerdictMap.parse(vmap) if vmap.strip() else None
            changes["stored_verdict"] = None
        if "require_proof" in changes:
            changes["require_proof"] = bool(changes["require_proof"])
        return dataclasses.replace(self, **changes)

    @property
    def verdict_text(self) -> str | None:
        """The verdict map as it is stored and keyed (its rules form, or a stored run's own
        text: ``stored_verdict``), None without one."""
        if not self.verdict_map:
            return None
        return self.stored_verdict if self.stored_verdict is not None else str(self.verdict_map)

    @property
    def changes_scores(self) -> bool:
        """Whether anything but the file decides the scores (a canonical run's fast path is
        for runs where nothing does)."""
        return self.payloads is not None or self.verdict_map is not None or self.reclassifier is not None \
            or self.require_proof

    @property
    def keyed_verdict(self) -> str | None:
        """The verdict map as it decides the run's scores, and so its key and its record:
        ``verdict_text`` for an Inspect log (or a format not sniffed yet), None for every other
        format, which never reads one (a canonical run's verdicts are in its lines; the other
        importers have no scorer values to map)."""
        return self.verdict_text if self.fmt in (inspect_log.NAME, AUTO_FORMAT) else None

    def run_key(self, file_sha256: str, *, side_log_sha256: str | None = None,
                proof_sha256: str | None = None) -> str:
        """The run's key in a workspace and a score table: the file's SHA-256 when nothing but the
        file decided its scores, else SHA-256 of the parts that did, joined by ``:`` (the side
        log's hash, the verdict map where the format reads one, the re-classifier, an Inspect
        log's proof side log's hash, ``require_proof`` when it was asked: the same bytes scored
        with and without it are two runs). The hashes are of bytes read, so the caller gives
        them: the request holds paths."""
        return _key(file_sha256, side_log_sha256, self.keyed_verdict, self.reclassifier, proof_sha256,
                    self.require_proof)

    def former_run_key(self, file_sha256: str, *, side_log_sha256: str | None = None,
                       proof_sha256: str | None = None) -> str | None:
        """The key a workspace gave this run before a verdict map its format never reads was
        left out of keys (a canonical run imported with ``--inspect-verdict`` was keyed with
        it), where that key differs from ``run_key``; None where it is the same."""
        if self.keyed_verdict == self.verdict_text:
            return None
        return _key(file_sha256, side_log_sha256, self.verdict_text, self.reclassifier, proof_sha256,
                    self.require_proof)

    def stored(self) -> dict[str, Any]:
        """The stored form of the fields that decide scores (a fleet's record of each run it
        published; ``from_stored`` also reads a table's summary and a runs row, which name them
        the same), ``require_proof`` named only when asked, so the records written before it
        existed still match."""
        return {"fmt": self.fmt, "verdict_map": self.verdict_text, "reclassifier": self.reclassifier} \
            | ({"require_proof": True} if self.require_proof else {})

    @classmethod
    def from_stored(cls, stored: dict[str, Any], *, payloads: str | None = None) -> ScoringRequest:
        """The request a stored run was scored under (``stored``: ``stored()``'s form, or a runs
        row's columns of the same names; ``payloads``: where its side log is kept now). Its
        verdict map keeps the stored text (``stored_verdict``): the run's key was made of it."""
        text = stored.get("verdict_map")
        request = cls.of(fmt=stored.get("fmt") or stored.get("format") or AUTO_FORMAT, payloads=payloads,
                         verdict_map=text, reclassifier=stored.get("reclassifier"),
                         require_proof=bool(stored.get("require_proof")))
        return dataclasses.replace(request, stored_verdict=text) if request.verdict_map is not None else request


def paired_side_log(request: ScoringRequest, run: str) -> tuple[ScoringRequest, str]:
    """(``request`` with ``run``'s side log, how it was paired): the one given (``given``), else
    the one found beside the local file ``run`` (``found beside it``: ``recapture.side_log_found``),
    else none (``""``)."""
    if request.payloads is not None:
        return request, "given"
    found = side_log_found(run, os.path.isfile)
    return (request, "") if found is None else (dataclasses.replace(request, payloads=found), "found beside it")



def _key(file_sha256: str, side_log_sha256: str | None, verdict: str | None, reclassifier: str | None,
         proof_sha256: str | None, require_proof: bool) -> str:
    parts = [file_sha256] + ([side_log_sha256] if side_log_sha256 else []) + ([verdict] if verdict else []) \
        + ([f"classifier={reclassifier}"] if reclassifier else []) \
        + ([f"proof={proof_sha256}"] if proof_sha256 else []) + (["require_proof"] if require_proof else [])
    return file_sha256 if len(parts) == 1 else hashlib.sha256(":".join(parts).encode()).hexdigest()

DEFAULT_REQUEST = ScoringRequest()
"""The request of a run given no option: its format sniffed, nothing joined, mapped or asked."""
CANONICAL_REQUEST = ScoringRequest(fmt="canonical")
"""``DEFAULT_REQUEST`` for a run known to be canonical lines (a large run's fast path)."""
