"""The typed data model: runs, trajectories, tool calls and the evidence about their capture.

Every class is a frozen, slotted, keyword-only dataclass holding tuples, so a parsed run can be
shared between threads and cached without defensive copies. Importers produce these; scorers
and aggregators consume them; nothing here does I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import StrEnum

from .errors import ReasonCode


class EvidenceStandard(StrEnum):
    """How strongly a format can prove that a capture is complete (reported with every result)."""

    PROVEN = "proven"
    """Byte size and SHA-256 of the raw arguments were recorded (or the raw text itself), so
    completeness is checked by comparison."""
    STRUCTURAL = "structural"
    """The format cannot carry proof; completeness is inferred from its structural signals
    (truncation flags, parse errors, redaction markers, limits). Weaker: absence of a signal
    is not proof."""


class Termination(StrEnum):
    """How a trajectory ended."""

    COMPLETED = "completed"
    STEP_LIMIT = "step_limit"
    TOKEN_LIMIT = "token_limit"
    TIME_LIMIT = "time_limit"
    ERROR = "error"
    NOT_RECORDED = "not_recorded"
    """The format can say how an episode ended but this record does not (a tau2 simulation
    without ``termination_reason``): unknown, not an error and not an early stop."""

    @property
    def is_early_stop(self) -> bool:
        """True when the agent was cut off rather than finishing on its own (an ending the log
        did not record is not evidence of either)."""
        return self not in (Termination.COMPLETED, Termination.NOT_RECORDED)


class Status(StrEnum):
    """What the strict scorer concluded about one trajectory."""

    SAFE = "safe"
    UNSAFE = "unsafe"
    UNSCORED = "unscored"
    """Capture not proven complete: left out of every safe-rate denominator."""
    INCONCLUSIVE = "inconclusive"
    """Complete capture but no decisive verdict: waits for a reviewer's label."""
    NO_VERDICT = "no_verdict"
    """The trajectory was never asked a safety question (no verdict and no intended category:
    no injection in an AgentDojo task, a utility-only benchmark by format, or a header that
    declares ``utility_only``): it is in no rate and in no review queue. Harm the taxonomy rules
    find on a proven surface still makes it UNSAFE. A trajectory with an intended category whose
    verdict is missing is Inconclusive, never this."""


def judge_unseen(status: str, reason: str | None) -> bool:
    """A trace whose capture is proven complete and whose only fault is that its judge was not
    shown a call: UNSCORED ``judge_did_not_see_full_surface`` (the judge check runs only on
    proven surfaces). Reviewers who replay the full calls may label it — "the judge did not see"
    queue — and it counts in the reviewed rate once labelled; the strict rate keeps it out."""
    return status == Status.UNSCORED.value and reason == ReasonCode.JUDGE_DID_NOT_SEE_FULL_SURFACE.value


class Truncation(StrEnum):
    """Whether a trajectory's capture was cut, for the truncation estimate t × ĥ."""

    NONE = ""
    UNRECOVERED = "unrecovered"
    """Cut, and the full surface was not recovered: the trajectory is UNSCORED."""
    RECOVERED = "recovered"
    """Cut, and a proven raw text (the log's own or a side log's) recovered the full surface."""


class ReviewLabel(StrEnum):
    """A reviewer's label for an Inconclusive trajectory."""

    GENUINE_DECLINE = "genuine_decline"
    """A real refusal: counts as safe in the reviewed rate."""
    DEGENERATE = "degenerate"
    """Broken, looping or empty output: not evidence of safety."""
    EARLY_STOP = "early_stop"
    """Cut off by a step, token or time limit or an error: not evidence of safety."""
    HARM_FOUND = "harm_found"
    """The reviewer found harm the classifiers did not (e.g. tool calls toward the harmful task
    before a refusal): counts UNSAFE in the reviewed rate, the reviewer's note its evidence."""


BENIGN = "benign"
"""The verdict label meaning "no harm category fired"."""

MAX_CATEGORY_CHARS = 100
"""A harness's category is a name (AgentHarm's ``Harassment``, AgentDojo's ``banking ·
injection_task_3``): one longer is cut to this many characters, its end marked ``…``. It comes
from the log, so it is bounded before it becomes a filter's option, a chart's label or a key."""


def harness_category(value: object) -> str | None:
    """A category as a harness recorded it, bounded: a string (or an integer, as some datasets
    number their categories) without surrounding white space, cut to ``MAX_CATEGORY_CHARS``
    (its last character then ``…``); None for anything else or nothing left."""
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str):
        return None
    text = value.strip()
    if not text:
        return None
    return text if len(text) <= MAX_CATEGORY_CHARS else text[:MAX_CATEGORY_CHARS - 1] + "…"


def grouping_category(category: str | None, intended_category: str | None) -> str | None:
    """The category a trajectory is grouped by in filters, charts, per-category figures and
    exports: the harness's own (``Trajectory.category``) where its format records one, else the
    category its task was designed to elicit."""
    return category if category is not None else intended_category


@dataclass(frozen=True, slots=True, kw_only=True)
class Category:
    """One harm category of the run's taxonomy."""

    id: str
    """Stable identifier, e.g. ``"C07"``."""
    name: str
    """Human name, e.g. ``"credential_harvesting"``."""
    payload_dependent: bool = False
    """True when the harm lives in what a call sends (its payload), so it hides in a lost tail."""
    rules: tuple[str, ...] = ()
    """Regular expressions of the rule-based classifier; any match fires the category."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Adapter:
    """One encoding step between the agent's raw arguments and the captured text.

    Adapters are listed in the order they were applied (raw → first → … → captured), so the
    captured text is decoded in reverse order to recover the surface.
    """

    name: str
    """``base64``, ``gzip+base64``, ``url``, ``multipart`` or a harness-specific name."""
    lossless: bool | None
    """Declared losslessness: ``False`` is a gap; ``True`` is verified by decoding; ``None``
    (unknown) is unverifiable."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Redaction:
    """A place where the harness replaced content by a marker."""

    marker: str
    """The marker text as it appears in the capture, e.g. ``"[REDACTED]"``."""
    reason: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolResult:
    """What a tool returned, with what the log says about its capture."""

    content: str
    raw_size_bytes: int | None = None
    truncated: bool = False
    error: str | None = None

    @property
    def replaced_by_defence(self) -> str | None:
        """The marker a defence put in place of the tool's whole output (the agent never saw
        what the tool returned), or None. Not a capture gap of the call's arguments: what the
        log holds is what the agent was shown."""
        text = self.content.strip()
        return text if text in DEFENCE_MARKERS else None


DEFENCE_MARKERS = frozenset({
    # AgentDojo's PromptInjectionDetector (transformers_pi_detector and kin) replaces a tool
    # output it judges injected with this text
    "<Data omitted because a prompt injection was detected>",
})
"""Texts a defence writes in place of a tool's output it withheld from the agent."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCall:
    """One tool call: its captured arguments and the evidence needed to prove them complete."""

    index: int
    """Position of the call in its trajectory, from 0."""
    tool: str
    """Tool (function) name."""
    arguments: str
    """The arguments exactly as captured and shown to the harness's classifier."""
    arguments_format: str = "json"
    """``json`` (must parse) or ``text``."""
    raw_size_bytes: int | None = None
    """UTF-8 byte length of the full raw arguments, when the harness measured it."""
    raw_sha256: str | None = None
    """Hex SHA-256 of the full raw arguments, when the harness recorded it."""
    raw_text: str | None = None
    """The full raw arguments, when the harness or a side log kept them."""
    raw_text_source: str | None = None
    """Where ``raw_text`` came from (``"log"``, or the side log's path after recapture)."""
    truncated: bool = False
    """The harness says it cut the captured arguments."""
    adapters: tuple[Adapter, ...] = ()
    channel: str = "logged"
    """``logged`` or ``unlogged`` (a side channel the harness did not record)."""
    redactions: tuple[Redaction, ...] = ()
    parse_error: str | None = None
    """The harness could not parse the arguments it received (they are then unusable)."""
    executed: bool = True
    """False for calls the agent requested but the harness never ran (a loop cut-off)."""
    result: ToolResult | None = None
    signals: tuple[ReasonCode, ...] = ()
    """Capture problems an importer saw in its format (structural standard)."""
    message_index: int | None = None
    """Position in ``Trajectory.messages`` of the assistant message that made the call, where
    the log says so (replay interleaves calls with their messages); None when it does not."""
    result_message: int | None = None
    """Position in ``Trajectory.messages`` of the message that carried this call's result, where
    the importer paired them (by call id, else by order); the replay never pairs by content."""

    @property
    def captured_bytes(self) -> int:
        return len(self.arguments.encode("utf-8", "surrogatepass"))


@dataclass(frozen=True, slots=True, kw_only=True)
class Message:
    """One message of the conversation, as plain text."""

    role: str
    content: str


@dataclass(frozen=True, slots=True, kw_only=True)
class JudgeAttestation:
    """What litmus-review found the verdict's judge read: computed by the Inspect importer from
    the judge's input in the log (``judge_audit``), cross-checked against a proof side log where
    one is paired. Never taken from a file's word: a canonical file's attestation can only take
    SAFE away (its ``unseen_calls``), never certify (``Trajectory`` of format ``canonical``)."""

    scorer: str
    """The scorer (judge) whose model calls were audited."""
    input_sha256: tuple[str, ...]
    """SHA-256 of each deciding model call's whole input (``judge_audit.input_digest``), in
    the order the judge was called."""
    unseen_calls: tuple[int, ...] = ()
    """Indexes of the calls some deciding input did not show; () when every one showed every call."""
    source: str = ""
    """What checked it: the stamp (``judge input checked against the logged arguments``) and,
    with a proof, the proof's writer and eval id."""
    kind: str = "judged"
    """``judged`` (deciding model calls found and audited), ``programmatic`` (no model call
    decided the verdict), ``unresolved`` (an input the log references but does not hold) or
    ``refused`` (a proof side log whose judge records do not stand against the log) or
    ``absent`` (the log holds no events of the sample to check)."""
    detail: str = ""
    """Why, in words (which call decided, what did not resolve, which proof record was refused)."""
    state_checking: bool = False
    """A ``programmatic`` verdict of a preset that names a state-checking scorer (ControlArena's
    side tasks): it reads the environment's state, not the calls' text (``--require-proof``)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class HarnessVerdict:
    """The label the harness's own classifier recorded for the trajectory."""

    label: str | None
    """A category id, ``"benign"``, or ``None`` when the classifier gave none."""
    confidence: float | None = None
    abnormal: bool = False
    """The harness flagged its own judgement as failed (e.g. LITMUS judgement -1)."""
    source: str = ""
    """Which scorer or judge produced it, for provenance."""
    attestation: JudgeAttestation | None = None
    """Where a proof recorded at the source attests the judge's input: which calls' full
    surface it held. None: nothing attests it (the capture comparison alone decides)."""
    refused_reason: ReasonCode | None = None
    """The harness's own guard refused this verdict's benign (``litmus_inspect.strict``: its
    score is ``Score.unscored`` with reason ``litmus_review:<code>``, or it kept a value it listed
    problems for): the trajectory is UNSCORED with this reason unless harm is found. A refusal
    only ever withholds SAFE, so it is read as the harness wrote it. None: no guard refused it."""
    refused_detail: str = ""
    """What the guard said of the refusal (the calls it names)."""
    harness_counts: bool = False
    """An abnormal verdict that the harness nevertheless counts in its own figure (AgentDojo
    forces ``security: true`` on a case that errored and counts it as an attack success): the
    lenient rate, the harness's claim, counts its label as the harness does; the strict rate
    does not (it stays abnormal: Inconclusive)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Trajectory:
    """One agent episode on one task."""

    id: str
    task_id: str
    intended_category: str | None = None
    """The category the task was designed to elicit, if any. The scorer reads it: a trajectory
    that names one was asked a safety question (``score.asked_safety_question``)."""
    category: str | None = None
    """The harness's own category of the task, where its format records one (Inspect's sample
    ``metadata.category``, AgentDojo's suite and injection task, tau2's domain; bounded by
    ``harness_category``): what filters, charts, per-category figures and exports group by
    (``grouping_category``). The scorer never reads it, so it moves no status."""
    termination: Termination = Termination.COMPLETED
    termination_detail: str = ""
    final_output: str = ""
    verdict: HarnessVerdict | None = None
    messages: tuple[Message, ...] = ()
    tool_calls: tuple[ToolCall, ...] = ()
    model: str | None = None
    """Overrides the run's model when a file mixes models."""
    extra: tuple[tuple[str, str], ...] = ()
    """Format-specific facts worth showing (key, value), e.g. LITMUS's semantic label."""
    ending_recorded: bool = False
    """The log recorded how the episode ended (Inspect's sample state: limit, error, completion;
    tau2's ``termination_reason``). Then ``termination`` alone says whether it was cut off, and
    calls left unexecuted at the end (a ``submit`` that ends the episode and gets no result) are
    not a loop cut-off. Where the log does not say, an unexecuted call is the only evidence."""

    @property
    def cut_off_calls(self) -> tuple[int, ...]:
        """The calls whose being left unexecuted marks a loop cut-off (an early stop): every
        unexecuted call, unless the log recorded how the episode ended."""
        if self.ending_recorded:
            return ()
        return tuple(c.index for c in self.tool_calls if not c.executed)


@dataclass(frozen=True, slots=True, kw_only=True)
class RunHeader:
    """What is true of a whole run."""

    run_id: str
    model: str
    task: str = ""
    """What the run was of, where its format records it (Inspect's task, AgentDojo's suites,
    tau2's domain): its name's middle (``scoring.names``); "" where the format does not say (the
    run id stands in)."""
    variant: str = ""
    """The attack or setting the harness ran it under, where its format records one (AgentDojo's
    attack, Inspect's solver and task arguments): its name's last part; "" where there is none."""
    harness_name: str = ""
    harness_version: str = ""
    capture_limit_bytes: int | None = None
    taxonomy: tuple[Category, ...] = ()
    evidence_standard: EvidenceStandard = EvidenceStandard.PROVEN
    format: str = "canonical"
    source: str = ""
    """Path or name the run was read from."""
    reported_safe_rate: float | None = None
    """The safe rate the harness itself reported, where the log carries it (e.g. 1 − LITMUS's
    ASR): shown beside the lenient rate, which must reconcile with it."""
    reported_safe_rate_source: str = ""
    """What the reported figure is, e.g. ``"LITMUS 1 − ASR (physical judgement)"``."""
    classifier_of_record: str = "harness_verdict"
    """Which classifier produced the harness's verdicts: ``harness_verdict`` (a judge the run
    does not describe; it certifies safety only where it read the full surface) or
    ``taxonomy_rules`` (the header's own rules are that classifier, so running them on a
    recovered full surface is the classifier of record reading it). A declaration alone is
    never honoured: only with ``classifier_of_record_check`` recording the check's acceptance
    (``score.rules_of_record``)."""
    classifier_of_record_check: str = ""
    """What checking a declared ``taxonomy_rules`` classifier of record found (set by the
    scorer, never read from a file: ``canonical.parse_header`` never reads it, ``dump_header``
    never writes it): on the run's fully captured trajectories the rules must reproduce the
    harness's own verdicts of both kinds, every benign and every harmful one, with harmful ones
    from at least ``score.MIN_HARMFUL_WITNESSES`` tasks (``score.check_rules_of_record``: "benign
    n of n, harmful m of m, from k tasks"), or the declaration is refused and
    ``classifier_of_record`` is ``harness_verdict``."""
    utility_only: bool = False
    """The run asks no safety question (a utility-only benchmark, declared by the header's
    ``"utility_only": true``): a trajectory without a verdict is ``no_verdict`` even where it
    names an intended category. Otherwise a trajectory with an intended category and no usable
    verdict is a missing verdict (Inconclusive)."""
    run_status: str = ""
    """How the harness says the whole run ended, where its format records it (Inspect's
    ``status``: ``success``, ``cancelled``, ``error``, ``started`` = never finished); empty when
    the format does not say. A cancelled or errored run holds only the samples written before."""
    run_status_detail: str = ""
    """What the harness recorded with the status (the error message, samples written of planned)."""
    format_facts: tuple[tuple[str, str], ...] = ()
    """What the file says of its whole run that no other field holds (key, value as JSON), e.g.
    the figures a tau2 leaderboard wrapper reports or an AgentDojo directory's attack; shown
    among the format's metrics."""
    proof_source: str = ""
    """The proof side log (``scoring.proof``) the importer read and joined to this run: its path
    (its writer and eval id are in each trajectory's ``extra``); empty when none was. Set by the
    importer with ``proof_sha256``, never read from a file: a canonical header's ``proof_source``
    is not read (no header field can make, or show, a run proven by a proof)."""
    proof_sha256: str = ""
    """SHA-256 of the proof side log's bytes as the importer read them (set with ``proof_source``;
    empty when no proof was read). Only a run with it is shown as proven by a proof."""
    require_proof: bool = False
    """Scored with ``--require-proof`` (set by the scorer, never read from a file): a call whose
    capture no recorded size and SHA-256 or raw text proves (the structural standard's claim) is
    UNSCORED ``unproven_capture``; harm found on it still counts. Part of the run's key."""

    @property
    def evidence_self_declared(self) -> bool:
        """The run's structural standard is its canonical header's own declaration: nothing but
        the file says its captures are complete (an unverified claim)."""
        return self.evidence_standard is EvidenceStandard.STRUCTURAL and self.format == "canonical"

    @property
    def proof_read(self) -> bool:
        """A proof side log was read and joined by the importer (its path and the SHA-256 of the
        bytes it read are known): the only case in which the run is shown as proven by a proof."""
        return bool(self.proof_source and self.proof_sha256)

    @property
    def evidence_claim(self) -> str:
        """The evidence standard in words, saying where it is only the file's own claim: a
        canonical header that declares ``structural`` vouches for captures nothing checks; and
        "proven by a proof side log" only where the importer read and joined one (``proof_read``)."""
        if self.evidence_standard is EvidenceStandard.PROVEN:
            if self.proof_read:
                return f"proven by a proof side log the importer read and joined (sha256 {self.proof_sha256[:12]}…)"
            return "proven: each call's capture checked against the raw size and SHA-256 (or raw text) recorded for it"
        if self.evidence_self_declared:
            return ("structural, self-declared by the run's header: an unverified claim (completeness inferred "
                    "from the log's own signals, not proven by digests)")
        return "structural: completeness inferred from the log's own signals, not proven by digests"

    @property
    def proof_terms(self) -> tuple[str, ...]:
        """What the scorer demanded and what vouched for the classifier of record, in words (the
        CLI's table, the Safe rates page and every export's stamp show the same lines)."""
        out = []
        if self.require_proof:
            out.append("require proof: a capture only claimed complete (no size and SHA-256 or raw text proves it) "
                       "is UNSCORED unproven_capture")
        if self.classifier_of_record_check:
            out.append(self.classifier_of_record_check)
        return tuple(out)

    def category(self, category_id: str | None) -> Category | None:
        for cat in self.taxonomy:
            if cat.id == category_id:
                return cat
        return None


def duplicate_message(trajectory_id: str, other_line: int | None) -> str:
    """The message of a rejection for a trajectory id that occurs more than once in a run."""
    where = f" (also at line {other_line:,})" if other_line is not None else ""
    return f"duplicate trajectory id {trajectory_id!r}{where}: neither copy is scored"


@dataclass(frozen=True, slots=True, kw_only=True)
class Rejection:
    """An input record that was not imported, and why (nothing is dropped silently)."""

    source: str
    line: int | None
    record_id: str | None
    message: str
    related_line: int | None = None
    """Another record's line the rejection names (the other copy of a duplicate id): a block of
    lines is scored with line numbers counted from its start, and both lines move together when
    the block is placed in its file (``shifted``)."""

    def shifted(self, by: int) -> Rejection:
        """This rejection in a block that starts ``by`` lines further into its file."""
        if self.related_line is None:
            return replace(self, line=None if self.line is None else self.line + by)
        return replace(self, line=None if self.line is None else self.line + by, related_line=self.related_line + by,
                       message=duplicate_message(self.record_id or "", self.related_line + by))


@dataclass(frozen=True, slots=True, kw_only=True)
class Run:
    """A parsed run: its header, its trajectories and the records that were rejected."""

    header: RunHeader
    trajectories: tuple[Trajectory, ...]
    rejected: tuple[Rejection, ...] = ()
    """The rejected records (a settled run's: the first of them, ``settle.REJECTIONS_LISTED``)."""
    records_seen: int = 0
    """How many trajectory records the input held (imported + rejected)."""
    content_sha256: str = ""
    """SHA-256 of the input bytes: the run's identity for labels and exports."""
    rejected_count: int = 0
    """How many records were rejected, listed in ``rejected`` or not (never fewer than it lists)."""

    def __post_init__(self) -> None:
        if self.rejected_count < len(self.rejected):  # an importer's run lists every one
            object.__setattr__(self, "rejected_count", len(self.rejected))

    @property
    def tool_call_count(self) -> int:
        return sum(len(t.tool_calls) for t in self.trajectories)


@dataclass(frozen=True, slots=True, kw_only=True)
class Gap:
    """One reason a call's capture is not proven complete."""

    reason: ReasonCode
    detail: str = ""
    blocking: bool = True


@dataclass(frozen=True, slots=True, kw_only=True)
class Suggestion:
    """An automatic guess for an Inconclusive trajectory. Never a label."""

    label: ReviewLabel
    evidence: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ScoredTrajectory:
    """The outcome of scoring one trajectory (strict and lenient side by side)."""

    trajectory_id: str
    task_id: str
    model: str
    status: Status
    lenient_safe: bool
    """What the harness itself claimed: its verdict was not a harm category. Meaningful only
    where ``harness_judged``."""
    intended_category: str | None = None
    """The trajectory's category, how per-category figures, filters and exports group it
    (``grouping_category``): the harness's own where its format records one, else the category
    the task was designed to elicit. (Named for the second: the stored row's column is.)"""
    fired_category: str | None = None
    """The harm category the strict classifier fired (UNSAFE only)."""
    reason: ReasonCode | None = None
    """For UNSCORED: the first blocking reason."""
    reasons: tuple[ReasonCode, ...] = ()
    """For UNSCORED: every distinct blocking reason across calls."""
    incomplete_call: int | None = None
    classifier: str = ""
    classifier_evidence: tuple[str, ...] = ()
    suggestion: Suggestion | None = None
    evidence_standard: EvidenceStandard = EvidenceStandard.PROVEN
    recaptured_calls: tuple[int, ...] = ()
    """Calls whose full surface came from a side-log payload."""
    termination: Termination = Termination.COMPLETED
    max_raw_bytes: int = 0
    """Largest argument surface in the trajectory (for the size histogram)."""
    tool_call_count: int = 0
    harness_judged: bool = True
    """The harness gave a usable safety verdict (a label, not abnormal): the trajectory is in
    the lenient ("before") rate's denominator, as in the harness's own figure."""
    truncation: Truncation = Truncation.NONE
    """Whether a call's capture was cut (over the limit, flagged, at the limit, size
    mismatch), and if so whether its full surface was recovered."""
