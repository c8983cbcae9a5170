"""The interface every importer implements, and what the registry passes it.

An importer is a module of ``scoring.importers`` that satisfies :class:`Importer` (mypy checks
each one where the registry lists it). It turns the bytes it is given into a :class:`Run`
and reads nothing else: a file that continues another (an ATIF ``continued_trajectory_ref``)
is named by the importer (``continuations``) and read by the registry, which hands its bytes
back in :class:`ParseOptions`. The registry treats every format alike; what differs between
formats lives in their modules.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from ..model import HarnessVerdict, Run


class VerdictMapping(Protocol):
    """How a harness's own scores become its verdict, as the user chose (``--inspect-verdict``).
    The format that reads such scores implements it (``inspect_log.VerdictMap``); the interface
    and the registry only pass it on."""

    @property
    def scorer(self) -> str | None:
        """The scorer whose values are mapped (None: no mapping, so no verdict)."""

    def outcome(self, scores: dict) -> tuple[str, str]:
        """(the outcome a sample's ``scores`` map to, the value as listed)."""

    def verdict(self, scores: dict) -> HarnessVerdict | None:
        """The harness verdict a sample's ``scores`` map to (None: no verdict)."""


@dataclass(frozen=True)
class Segment:
    """A further file of the same run that the importer asked for, with its bytes."""

    source: str
    data: bytes


@dataclass(frozen=True)
class ParseOptions:
    """Everything an importer is given besides the file's own bytes. A format uses what
    applies to it and ignores the rest."""

    verdict_map: VerdictMapping | None = None
    """Which Inspect scorer values mean unsafe, safe or no verdict (None: the format's default)."""
    continuations: tuple[Segment, ...] = ()
    """The files that continue this one, in order, as far as they were found."""
    decode_budget: int | None = None
    """What reading the file may cost (``_zip.Budget``): decoded bytes (an archive's members
    together), and bytes of memory at any moment while it is read (its parsed JSON, a whole
    document or lines, and the records made of it). None: the documented default
    (``_zip.total_budget`` of the file's size)."""


DEFAULT_OPTIONS = ParseOptions()


class Importer(Protocol):
    """One log format. Implemented by a module (module-level names and functions)."""

    @property
    def NAME(self) -> str:  # a module constant in the implementations
        """The format's name: ``--format NAME`` and the run header's ``format``."""

    @property
    def HINTS(self) -> tuple[bytes, ...]:
        """Keys (as they appear in JSON) the format writes. An unrecognised file's closest format
        is the one whose keys it holds most of: a hint for the error message, never a detection."""

    @property
    def NEEDS(self) -> str:
        """What the format needs to recognise a file: said, for each format tried, when no
        format recognises one."""

    def sniff(self, head: bytes) -> bool:
        """Whether the file's first bytes are this format (the registry tries formats in order)."""

    def continuations(self, data: bytes, source: str) -> tuple[str, ...]:
        """Paths (beside ``source``) where the file continuing ``data`` may be, in the order to
        try; () when ``data`` is not continued. The registry reads the first regular file among
        them that it has not read yet, and asks again of that file's bytes."""

    def parse(self, data: bytes, source: str, options: ParseOptions = DEFAULT_OPTIONS) -> Run:
        """The run in ``data`` (``source`` names it in messages). A malformed record is a
        ``Rejection`` of the run; a file that cannot be used at all raises ``InputError``."""


def no_continuations(data: bytes, source: str) -> tuple[str, ...]:
    """``Importer.continuations`` of a format whose files are never continued."""
    return ()
