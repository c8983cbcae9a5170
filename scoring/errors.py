"""The one exception tree of litmus-review, and the stable reason codes.

Every error carries data (attributes for programs) as well as a message (for people). Each
subclasses the builtin it behaves like, so callers that only know Python still catch it::

    LitmusReviewError                      base of everything raised on purpose
    ├── IncompleteCaptureError(ValueError) a trajectory cannot be scored: some call's full
    │                                      argument surface is not proven captured
    ├── InputError(ValueError)             bad input, located: .source, .line, .record_id
    │   ├── UnknownFormatError             no importer recognised the file: .tried, .closest
    │   ├── FormatVersionError             a canonical file of a version we do not read
    │   ├── UploadWaiting                  an uploaded score table kept, not checked yet
    │   │                                  (every check busy): a later listing checks it
    │   └── OverBudgetError                reading the file would take more memory than its
    │                                      budget (a likely bomb): refused whole, whatever
    │                                      else it might be read as
    ├── RecordError(ValueError)            one record of a file is malformed: .message,
    │   │                                  .record_id (the caller adds the file and line)
    │   └── DuplicateRecordError           a trajectory id an earlier record already has
    ├── AdapterDecodeError(ValueError)     an encoding step of a capture (base64, gzip, url)
    │                                      cannot be decoded within its budget
    ├── SpecError(ValueError)              an option's value does not parse (an Inspect
    │                                      verdict map): .spec
    ├── RuleError(ValueError)              a taxonomy rule RE2 cannot compile (the canonical
    │                                      importer reports it as the header's RecordError)
    ├── UnsupportedFigure(ValueError)      a figure ``figure_svg`` does not draw (a page's bug:
    │                                      refused rather than drawn wrong)
    ├── ClassifierError(RuntimeError)      a configured re-classifier failed, timed out or
    │                                      answered out of protocol: .classifier, .trajectory_id
    ├── CheckInterrupted                   an upload's check stopped from outside the server
    │                                      (not checked: neither refused nor offered)
    ├── EngineError(RuntimeError)          a run could not be scored on the Dask cluster (a
    │   │                                  block failed, a file changed, the output is unwritable)
    │   ├── RunFailed                      raised on a worker: one run of a fleet failed (its
    │   │                                  file and line in the message); the others go on
    │   └── BlockFailed                    raised on a worker: one block failed, located by
    │                                      (block, line, offset); the client names the file
    └── StoreError(RuntimeError)           the SQLite workspace refused an operation
        ├── RunMismatchError(ValueError)   labels exported from one run, imported against another
        └── DatabaseUnavailableError       the database file is locked, read-only or missing

Where each is handled:

- ``InputError``, ``ClassifierError``, ``StoreError`` (and an ``IncompleteCaptureError`` that
  escapes) reach the boundaries: the CLI maps the tree to exit status 2 and one line naming
  the file and what is wrong (``scoring.cli``); the pages map it to an error box
  (``pages/_shared/errors.py``). Each boundary has one mapping, by type, never by message text.
- ``RecordError`` never reaches a boundary. A file of many records rejects the bad ones and
  goes on, so the JSON-lines decoders *return* it as a value (``decode_json_line`` gives the
  object or a ``RecordError``) rather than raise it once per bad line; the caller, which knows
  the file and line, turns it into a ``Rejection`` (reported, never dropped) or, for a
  whole-document format, into an ``InputError``. Hence ``isinstance(obj, RecordError)`` after
  a decode: it reads "this line did not decode", and is the one place a value is tested
  against the tree.
- ``AdapterDecodeError`` never leaves the capture check: it becomes an
  ``unverifiable_adapter`` gap with its message as the detail.
- ``SpecError`` is a bad option value: the CLI shows it as click's "Invalid value" usage error.

Not in the tree: ``OSError`` from the file system (reported with ``strerror`` and the path by
each boundary), and ``ValueError``/``TypeError`` raised for a caller's misuse of an API (an
unknown column name, a status the code does not know): those are bugs, not input, and must
surface as tracebacks in tests rather than as user messages.

``ReasonCode`` values are lowercase snake_case strings stored in databases and reports: once
released they never change. The README lists them all and a test checks it does.
"""

from __future__ import annotations

from enum import StrEnum


class ReasonCode(StrEnum):
    """Why a tool call's argument surface is not proven complete (stored; never renamed)."""

    OVER_CAPTURE_LIMIT = "over_capture_limit"
    """The raw arguments are larger than the harness's per-call capture limit."""
    TRUNCATED = "truncated"
    """The harness marked the captured arguments as cut (a flag or an in-band marker)."""
    CAPTURED_DIFFERS_FROM_RAW = "captured_differs_from_raw"
    """The raw text is known and is not what was captured (after decoding adapters)."""
    SIZE_MISMATCH = "size_mismatch"
    """The captured surface's byte length differs from the recorded raw size."""
    DIGEST_MISMATCH = "digest_mismatch"
    """The captured surface's SHA-256 differs from the recorded raw digest."""
    REDACTED = "redacted"
    """Part of the arguments was replaced by a redaction marker."""
    UNLOGGED_CHANNEL = "unlogged_channel"
    """The call went through a side channel the harness did not log."""
    LOSSY_ADAPTER = "lossy_adapter"
    """An encoding step between the agent and the log is declared lossy."""
    UNVERIFIABLE_ADAPTER = "unverifiable_adapter"
    """An encoding step claims to be lossless but decoding failed, is unknown, or exceeded
    the decoded-size cap (a compression bomb is this, never a hang)."""
    UNPARSEABLE_ARGUMENTS = "unparseable_arguments"
    """The arguments do not parse in their declared format (e.g. cut-off JSON)."""
    MISSING_EVIDENCE = "missing_evidence"
    """Under the proven standard: neither size + digest nor the raw text were recorded."""
    RESULT_TRUNCATED = "result_truncated"
    """The tool's result (not its arguments) was cut. Shown to reviewers; it does not by
    itself make the trajectory UNSCORED, because the rule concerns the argument surface."""
    PAYLOAD_MISMATCH = "payload_mismatch"
    """A side-log payload offered for recapture did not match the call's size and digest;
    it is reported and never used."""
    AT_CAPTURE_LIMIT = "at_capture_limit"
    """The capture (or the raw size recorded for it) is exactly the harness's capture limit, or
    up to three bytes under it (a cut that keeps UTF-8 whole): the fingerprint of truncation.
    A size and digest taken of the prefix would otherwise prove the prefix complete."""
    NOT_CLASSIFIED_ON_FULL_SURFACE = "not_classified_on_full_surface"
    """The full surface was recovered (decoded, recaptured, taken from the raw text) but no
    classifier of record read it: the harness's classifier saw only the capture, and no
    re-classifier was configured (pattern rules may find harm, never certify safety)."""
    MISSING_TRANSCRIPT = "missing_transcript"
    """The trajectory was asked a safety question but nothing of it was captured (no message,
    no tool call, no final output): there is no surface to prove, so no verdict of safety."""
    JUDGE_DID_NOT_SEE_FULL_SURFACE = "judge_did_not_see_full_surface"
    """The model call a benign verdict was parsed from was not shown this call: no span of its
    input beside the call's name parses back to the call's whole argument tree (checked by
    litmus-review on the input the log holds, ``judge_audit``), or it ended in error or at its
    length limit. Its benign certifies nothing. Harm it found still counts."""
    JUDGE_INPUT_UNRESOLVED = "judge_input_unresolved"
    """The deciding model call's input (or output) references content the log does not hold
    (an ``attachment://`` or ``input_refs`` entry with nothing behind it): what the judge read
    cannot be checked, so its benign certifies nothing."""
    JUDGE_INPUT_NOT_IN_LOG = "judge_input_not_in_log"
    """The verdict map makes the verdict safe, but the log holds no events of the sample (its
    model calls were not logged, or were stripped): what the judge read cannot be checked, and
    what cannot be checked certifies nothing."""
    JUDGE_PROOF_REFUSED = "judge_proof_refused"
    """A proof side log is paired, and its judge records do not stand against the log: a record
    names no model call the log holds, says another thing than the log's own input shows, or
    the sample's verdict has no judge record at all (a deleted record, a scorer that called no
    model). Nothing the proof says is read as a fact."""
    VERDICT_NOT_PROVEN = "verdict_not_proven"
    """Scored with ``--require-proof``: the benign verdict links to no model call (a scorer that
    calls no model, or whose grade no call's output gives) and its preset names no
    state-checking scorer: nothing shows what it decided on."""
    GUARD_REFUSED = "guard_refused"
    """The harness's own guard (``litmus_inspect.strict``) refused the judge's benign verdict for a
    reason this release does not know as a blocking reason code (the reason it gave is in the
    detail). Its known reasons are stored as themselves (``judge_did_not_see_full_surface``,
    ``digest_mismatch`` …); harm the judge found still counts."""
    UNPROVEN_CAPTURE = "unproven_capture"
    """Scored with ``--require-proof``: the call's capture is complete only by the run's claim
    (the structural standard: a canonical header's own declaration, or a format that cannot
    carry proof), and no recorded size and SHA-256 or raw text proves it byte for byte."""


#: Reason codes that make a trajectory UNSCORED. RESULT_TRUNCATED and PAYLOAD_MISMATCH are
#: informational: they travel with the result so reviewers see them.
BLOCKING_REASONS: frozenset[ReasonCode] = frozenset(ReasonCode) - {
    ReasonCode.RESULT_TRUNCATED,
    ReasonCode.PAYLOAD_MISMATCH,
}


class LitmusReviewError(Exception):
    """Base of every error litmus-review raises on purpose."""


class IncompleteCaptureError(LitmusReviewError, ValueError):
    """A trajectory's capture is not proven complete, so it must not be scored.

    Raised by the strict scorer for the first blocking gap; ``gaps`` holds all of them.
    """

    def __init__(
        self,
        *,
        trajectory_id: str,
        call_index: int | None,
        reason: ReasonCode,
        captured_bytes: int | None,
        raw_bytes: int | None,
        detail: str = "",
        gaps: tuple = (),
    ) -> None:
        self.trajectory_id = trajectory_id
        self.call_index = call_index
        self.reason = reason
        self.captured_bytes = captured_bytes
        self.raw_bytes = raw_bytes
        self.detail = detail
        self.gaps = gaps
        sizes = f"captured {captured_bytes} of {raw_bytes if raw_bytes is not None else '?'} bytes"
        where = f"trajectory {trajectory_id!r}" + (f", call {call_index}" if call_index is not None else "")
        super().__init__(
            f"{where}: {reason.value}" + (f" ({sizes})" if call_index is not None else "")
            + (f": {detail}" if detail else "")
        )


class InputError(LitmusReviewError, ValueError):
    """Input that cannot be used, located precisely enough to fix by hand."""

    def __init__(
        self,
        message: str,
        *,
        source: str,
        line: int | None = None,
        record_id: str | None = None,
    ) -> None:
        self.message = message
        self.source = source
        self.line = line
        self.record_id = record_id
        where = source
        if line is not None:
            where += f":{line}"
        if record_id is not None:
            where += f" (record {record_id!r})"
        super().__init__(f"{where}: {message}")


class UploadWaiting(InputError):
    """An upload kept but not checked yet: every check was held by other uploads' for longer than
    its request may wait. Not a refusal: a later listing checks it and offers it if it passes."""


class CheckInterrupted(LitmusReviewError):
    """An upload's check that something outside the server stopped (its process killed by the
    system's memory killer or an operator): not checked, so neither refused nor offered. The
    caller, who knows the upload, names it (``.message`` says what happened)."""

    def __init__(self, message: str) -> None:
        self.message = message
        super().__init__(message)


class OverBudgetError(InputError):
    """Reading the file would take more memory than its budget (``importers._zip.Budget``): it
    is refused whole, before the memory is taken, and never read again another way (a chat
    file refused as one document is not then read as JSON lines)."""


class UnknownFormatError(InputError):
    """No importer recognised the input; ``tried`` lists the formats that were tried and
    ``closest`` names the one whose keys the input holds most of (or None)."""

    def __init__(self, *, source: str, tried: tuple[str, ...], detail: str = "", closest: str | None = None) -> None:
        self.tried = tried
        self.closest = closest
        msg = "unrecognised log format (tried: " + ", ".join(tried) + ")"
        if detail:
            msg += f"; {detail}"
        super().__init__(msg, source=source)


class FormatVersionError(InputError):
    """A canonical run file declares a format version this release does not read."""


class RecordError(LitmusReviewError, ValueError):
    """One record is malformed; the importer rejects it and goes on.

    It carries no file or line: the caller that knows them makes it a ``Rejection`` (or an
    ``InputError`` when the file is one record). Often returned rather than raised: see the
    module docstring.
    """

    def __init__(self, message: str, record_id: str | None = None) -> None:
        self.message = message
        self.record_id = record_id
        super().__init__(message)


class DuplicateRecordError(RecordError):
    """A record whose trajectory id an earlier record of the file already has. Neither copy is
    preferred: the caller rejects the earlier one too."""


class AdapterDecodeError(LitmusReviewError, ValueError):
    """An encoding step between the agent and the log (base64, gzip, url, …) cannot be decoded,
    is unknown, or expands past its budget. The capture check records it as an
    ``unverifiable_adapter`` gap (the message is the gap's detail); it is never raised further.

    ``step`` names the step; ``exceeded`` is the decoded-size limit it went past (None when it
    failed otherwise)."""

    def __init__(self, message: str, *, step: str | None = None, exceeded: int | None = None) -> None:
        self.step = step
        self.exceeded = exceeded
        super().__init__(message)


class SpecError(LitmusReviewError, ValueError):
    """An option's value does not parse (an Inspect verdict map); ``spec`` is the text given."""

    def __init__(self, message: str, *, spec: str) -> None:
        self.spec = spec
        super().__init__(message)


class RuleError(LitmusReviewError, ValueError):
    """A taxonomy rule that RE2 cannot compile; the message says why."""


class UnsupportedFigure(LitmusReviewError, ValueError):
    """The figure holds something ``figure_svg.grouped_bars_svg`` does not draw (named in the
    message). A chart builder's bug, never input: no boundary maps it."""


class ClassifierError(LitmusReviewError, RuntimeError):
    """A re-classifier of record (a plug-in) failed: it raised, timed out, exited, or answered
    something that is not a verdict. The run is not scored on a classifier that broke."""

    def __init__(self, message: str, *, classifier: str, trajectory_id: str | None = None) -> None:
        self.classifier = classifier
        self.trajectory_id = trajectory_id
        where = f"classifier {classifier!r}" + (f", trajectory {trajectory_id!r}" if trajectory_id else "")
        super().__init__(f"{where}: {message}")


class EngineError(LitmusReviewError, RuntimeError):
    """A run could not be scored on the cluster: a block failed (located by file and line), a
    file changed while it was read, or the output cannot be written."""


class RunFailed(EngineError):
    """A run that cannot be scored, raised on a worker (so Dask's ``retries=`` applies to a
    transient failure); its message names the run's file, and its line where one is known.
    Positional arguments only: it travels pickled from the worker."""

    @property
    def message(self) -> str:
        return str(self.args[0])


class BlockFailed(EngineError):
    """A block that raised, on a worker: ``(block index, line within the block, byte offset,
    message)``. The client locates it in the file (the lines of the blocks before it).
    Positional arguments only: it travels pickled from the worker."""

    @property
    def where(self) -> tuple[int, int, int, str]:
        return self.args[0], self.args[1], self.args[2], self.args[3]


class StoreError(LitmusReviewError, RuntimeError):
    """The SQLite workspace refused an operation."""


class RunMismatchError(StoreError, ValueError):
    """Labels carry a run content hash that is not the run they are applied to."""

    def __init__(self, message: str, *, expected: str, found: str) -> None:
        self.expected = expected
        self.found = found
        super().__init__(message)


class DatabaseUnavailableError(StoreError):
    """The database file cannot be opened for writing (locked, read-only, missing folder)."""

    def __init__(self, message: str, *, path: str) -> None:
        self.path = path
        super().__init__(message)
