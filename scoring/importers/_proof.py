"""The proof side log's reader (``docs/proof-side-log.md``): its records checked, and their
join with the Inspect log they prove. The writer and the canonical form are in ``scoring.proof``."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..errors import InputError, ReasonCode
from ..model import JudgeAttestation, Rejection, ToolCall, Trajectory
from ..proof import FORMAT, VERSIONS, canonical_json, fingerprint, text_sha256
from ._common import RecordError, file_budget, iter_json_lines, opt, req
from ._judge import Audit, ModelCall

_NOT_IN_LOG = object()
"""A call no model event of the log emitted (so nothing to compare the proof's fingerprint with)."""


@dataclass(frozen=True, slots=True)
class _Fingerprint:
    size: int
    sha256: str


@dataclass(frozen=True, slots=True)
class _CallProof:
    line: int
    function: str
    emitted: _Fingerprint
    executed: _Fingerprint | None


@dataclass(frozen=True, slots=True)
class _JudgeProof:
    line: int
    scorer: str | None
    input_sha256: str
    seen: dict[str, bool]


def _fingerprint(obj: dict, key: str) -> _Fingerprint | None:
    value = opt(obj, key, dict)
    if value is None:
        return None
    size = req(value, "bytes", int, f"{key}.")
    digest = req(value, "sha256", str, f"{key}.").lower()
    if size < 0 or len(digest) != 64 or any(ch not in "0123456789abcdef" for ch in digest):
        raise RecordError(f"{key} must be {{bytes >= 0, sha256: 64 hex digits}}")
    return _Fingerprint(size, digest)


@dataclass
class ProofLog:
    """A proof side log, read and checked: its calls and judge records by sample, and the lines
    it could not use (each a ``Rejection`` naming the line)."""

    source: str
    sha256: str
    eval_id: str
    writer: str
    enabled_by: str
    calls: dict[tuple[str, int, str], _CallProof] = field(default_factory=dict)
    judges: dict[tuple[str, int], list[_JudgeProof]] = field(default_factory=dict)
    rejected: list[Rejection] = field(default_factory=list)
    _used: set[tuple[str, int]] = field(default_factory=set)

    @property
    def label(self) -> str:
        """Where the proof came from, as shown beside ``proven``."""
        return f"{self.writer} · eval {self.eval_id} · {Path(self.source).name} (sha256 {self.sha256[:12]}…)"

    @classmethod
    def read(cls, data: bytes, source: str) -> ProofLog:
        """Parse a proof side log; a file that is not one (no header line) is an ``InputError``."""
        lines = iter(iter_json_lines(data, source, file_budget(data, source)))  # the file's budget, as the log's
        first = next(lines, None)
        head = None if first is None else first[1]
        if not isinstance(head, dict) or head.get("record") != "proof" or head.get("format") != FORMAT:
            raise InputError(f"not a proof side log: the first line must be a {FORMAT!r} header", source=source)
        if head.get("version") not in VERSIONS:
            raise InputError(f"proof side log version {head.get('version')!r} (this reader knows "
                             f"{', '.join(map(str, VERSIONS))})", source=source)
        eval_id = head.get("eval_id")
        if not isinstance(eval_id, str) or not eval_id:
            raise InputError("the proof side log's header names no eval_id", source=source)
        log = cls(source=source, sha256=hashlib.sha256(data).hexdigest(), eval_id=eval_id,
                  writer=str(head.get("writer") or "?"), enabled_by=str(head.get("enabled_by") or "?"))
        for lineno, obj in lines:
            try:
                if isinstance(obj, RecordError):
                    raise obj
                log._add(lineno, obj)
            except RecordError as exc:
                sample = obj.get("sample_id") if isinstance(obj, dict) else None
                log.rejected.append(Rejection(source=source, line=lineno, record_id=None if sample is None
                                              else str(sample), message=f"proof record: {exc.message}"))
        return log

    def _add(self, lineno: int, obj: dict) -> None:
        kind = req(obj, "record", str)
        sample = req(obj, "sample_id", (str, int))
        epoch = opt(obj, "epoch", int, 1)
        if kind == "call":
            key = (str(sample), epoch, req(obj, "call_id", str))
            if key in self.calls:
                raise RecordError(f"a second proof of call {key[2]!r} (the first is on line {self.calls[key].line})")
            emitted = _fingerprint(obj, "emitted")
            if emitted is None:
                raise RecordError("emitted is missing")
            self.calls[key] = _CallProof(lineno, opt(obj, "function", str, ""), emitted, _fingerprint(obj, "executed"))
        elif kind == "judge":
            seen = {}
            for i, c in enumerate(req(obj, "calls", list)):
                seen[req(c, "call_id", str, f"calls[{i}].")] = req(c, "full_surface_seen", bool, f"calls[{i}].")
            digest = req(obj, "input_sha256", str)
            self.judges.setdefault((str(sample), epoch), []).append(
                _JudgeProof(lineno, opt(obj, "scorer", str), digest, seen))
        else:
            raise RecordError(f"unknown record {kind!r} (expected call or judge)")

    def check_eval(self, eval_id: str, log_source: str) -> None:
        """Refuse a proof of another evaluation than the log's."""
        if eval_id != self.eval_id:
            raise InputError(f"the proof side log {self.source} proves eval {self.eval_id!r}, but the log is of eval "
                             f"{eval_id!r}: not this log's proof", source=log_source)

    def apply(self, traj: Trajectory, call_ids: Sequence[str | None], sample_id: Any, epoch: int,
              scorer: str | None, audit: Audit | None = None, *, safe: bool = False,
              emitted: Mapping[str, Any] | None = None) -> Trajectory:
        """``traj`` (one Inspect sample) with its calls' proof joined.

        Each logged call gets the proof's emitted size and digest as its raw size and digest,
        and its arguments as canonical JSON (the log's parsed arguments, re-serialised as the
        proof was), so the strict rules compare the two byte for byte: a log edited, cut or
        re-encoded after the run fails as ``size_mismatch``/``digest_mismatch`` on that call,
        and so does a proof whose emitted fingerprint is not what the log's model event emitted
        (``emitted``: call id → arguments, from the log's model events). A call executed with
        other arguments than emitted is ``captured_differs_from_raw``; a call the proof has and
        the log lost is added as an unlogged call (UNSCORED); a logged call with no proof stays
        without evidence (``missing_evidence`` under the proven standard).

        ``safe``: the verdict map makes the verdict safe. Then the proof's judge records are
        cross-checked against the log (``audit``, computed from the log's own events), never
        read as facts: each record must name a model call the log holds (its input digest),
        say of every call what the log's input shows, and the deciding calls must each have a
        record. Otherwise the verdict's attestation is ``refused`` (UNSCORED
        ``judge_proof_refused``) and each disagreeing record is a rejection."""
        sid = str(sample_id)
        self._used.add((sid, epoch))
        calls: list[ToolCall] = []
        notes: list[str] = []
        for call, cid in zip(traj.tool_calls, call_ids, strict=True):
            proof = self.calls.get((sid, epoch, cid)) if cid is not None else None
            if proof is None:
                calls.append(call)
                notes.append(f"call {call.index} ({cid}): no proof recorded")
                continue
            calls.append(self._join(call, cid, proof, notes, (emitted or {}).get(str(cid), _NOT_IN_LOG)))
        logged = set(call_ids)
        for (s, e, cid), proof in sorted(self.calls.items(), key=lambda kv: kv[1].line):
            if (s, e) == (sid, epoch) and cid not in logged:
                calls.append(ToolCall(index=len(calls), tool=proof.function, arguments="",
                                      channel="absent from the log",
                                      raw_size_bytes=proof.emitted.size, raw_sha256=proof.emitted.sha256,
                                      executed=proof.executed is not None))
                notes.append(f"call {len(calls) - 1} ({cid}): proven at the source (line {proof.line}) but absent "
                             "from the log")
        extra = (*traj.extra, ("proof", self.label), *(("proof note", n) for n in notes))
        verdict = traj.verdict
        if verdict is not None and safe:
            ids = [*call_ids, *(cid for (s, e, cid) in self.calls if (s, e) == (sid, epoch) and cid not in logged)]
            verdict = replace(verdict, attestation=self._judged(traj.id, sid, epoch, scorer, audit, ids))
        return replace(traj, tool_calls=tuple(calls), extra=extra, verdict=verdict)

    def _judged(self, tid: str, sid: str, epoch: int, scorer: str | None, audit: Audit | None,
                ids: Sequence[str | None]) -> JudgeAttestation:
        """The verdict's attestation once the proof's judge records are checked against the log."""
        records = [j for j in self.judges.get((sid, epoch), []) if scorer is not None and j.scorer == scorer]

        def refused(why: str, record: _JudgeProof | None = None) -> JudgeAttestation:
            if record is not None:
                self.rejected.append(Rejection(source=self.source, line=record.line, record_id=tid,
                                               message=f"proof judge record refused: {why}"))
            return JudgeAttestation(scorer=str(scorer), input_sha256=(), kind="refused", source=self.label,
                                    detail=why)

        if audit is None:
            return refused("the log holds no model events to check the proof's judge records against")
        if audit.attestation.kind == "unresolved":
            return replace(audit.attestation, source=f"{audit.attestation.source} · {self.label}")
        if len(ids) != len(audit.calls):
            return refused(f"the proof holds {len(ids) - len(audit.calls)} call(s) the log lost; what the judge was "
                           "shown of them cannot be checked")
        if not records and audit.attestation.kind == "programmatic" and audit.attestation.state_checking:
            # a state-checking scorer reads the environment, not a model: there is no judge to record
            return replace(audit.attestation, source=f"{audit.attestation.source} · {self.label}")
        if not records:
            return refused(f"the proof covers sample {sid!r} epoch {epoch} but holds no judge record of scorer "
                           f"{scorer!r} for its verdict (a deleted record, or a scorer that called no model)")
        candidates = audit.scorer_calls or audit.deciding
        named: dict[int, ModelCall] = {}
        for record in records:
            call = next((c for c in candidates if record.input_sha256 in (c.digest, c.text_digest)), None)
            if call is None:
                return refused(f"line {record.line} names a judge input (sha256 {record.input_sha256[:12]}…) that no "
                               f"model call of scorer {scorer!r} in the log was given", record)
            shown = audit.shown_by(call)
            for cid, ok in zip(ids, shown, strict=True):
                # A record claiming more than the input shows is refused. One claiming less is
                # not a claim anybody relies on (the log's own input decides), so it stands.
                if record.seen.get(str(cid)) is True and not ok:
                    return refused(f"line {record.line} says call {cid!r} was shown in full to the judge, but the "
                                   f"input it names (model event {call.position}) does not show it", record)
            named[call.position] = call
        if audit.attestation.kind == "programmatic":
            return refused("the proof's judge records name model calls, but none of them gives the verdict's score")
        missing = [c.position for c in audit.deciding if c.position not in named]
        if missing:
            return refused(f"the deciding model call(s) (event(s) {', '.join(map(str, missing))}) have no judge record "
                           "in the proof")
        a = audit.attestation
        return replace(a, source=f"{a.source} · cross-checked with the proof: {self.label}")
    def _join(self, call: ToolCall, cid: str | None, proof: _CallProof, notes: list[str], emitted: Any) -> ToolCall:
        signals = call.signals
        if emitted is not _NOT_IN_LOG:
            try:
                model_said = fingerprint(emitted)
            except (TypeError, ValueError, RecursionError):
                model_said = None
            if model_said != {"bytes": proof.emitted.size, "sha256": proof.emitted.sha256}:
                signals = (*signals, ReasonCode.DIGEST_MISMATCH)
                notes.append(f"call {call.index} ({cid}): the proof's emitted fingerprint (line {proof.line}) is not "
                             "what the log's model event emitted")
        try:
            arguments = canonical_json(json.loads(call.arguments)) if not call.parse_error else call.arguments
        except (ValueError, RecursionError):
            arguments = call.arguments
        if proof.executed is not None and proof.executed != proof.emitted:
            signals = (*signals, ReasonCode.CAPTURED_DIFFERS_FROM_RAW)
            notes.append(f"call {call.index} ({cid}): executed with other arguments ({proof.executed.size:,} bytes) "
                         f"than the model emitted ({proof.emitted.size:,} bytes)")
        size = len(arguments.encode("utf-8", "surrogatepass"))
        if size != proof.emitted.size or text_sha256(arguments) != proof.emitted.sha256:
            notes.append(f"call {call.index} ({cid}): the log's arguments are {size:,} bytes, sha256 "
                         f"{text_sha256(arguments)[:12]}…; the proof (line {proof.line}) recorded "
                         f"{proof.emitted.size:,} bytes, sha256 {proof.emitted.sha256[:12]}…")
        return replace(call, arguments=arguments, raw_size_bytes=proof.emitted.size, raw_sha256=proof.emitted.sha256,
                       signals=signals)

    def unmatched(self) -> list[Rejection]:
        """Proof records of samples the log does not hold (a log that lost samples): each reported."""
        out = []
        for (sid, epoch, cid), proof in self.calls.items():
            if (sid, epoch) not in self._used:
                out.append(Rejection(source=self.source, line=proof.line, record_id=f"{sid}-epoch{epoch}",
                                     message=f"proof of call {cid!r}: sample {sid!r} epoch {epoch} is not in the log"))
        return out
