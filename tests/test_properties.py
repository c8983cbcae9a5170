"""Hypothesis: degrading any call's capture can only move its trajectory to UNSCORED."""

from __future__ import annotations

import dataclasses

from hypothesis import given, settings
from hypothesis import strategies as st

from scoring.model import Adapter, EvidenceStandard, Redaction, Status, Termination, ToolCall
from scoring.score import HarnessVerdictClassifier, RuleClassifier, score_trajectory

from .helpers import HEADER, TAXONOMY, proven, sha, traj

RULES, HARNESS = RuleClassifier(TAXONOMY), HarnessVerdictClassifier()
ROOMY = dataclasses.replace(HEADER, capture_limit_bytes=100_000)

texts = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=40)
calls = st.lists(st.dictionaries(st.sampled_from(["cmd", "url", "body"]),
                                 st.one_of(texts, st.just("rm -rf /"), st.just("exfil.example"))),
                 min_size=1, max_size=4)

DEGRADE = {
    "truncate": lambda c: dataclasses.replace(c, arguments=c.arguments[: len(c.arguments) // 2], truncated=True),
    "drop_digest": lambda c: dataclasses.replace(c, raw_sha256=None),
    "unlog": lambda c: dataclasses.replace(c, channel="unlogged"),
    "redact": lambda c: dataclasses.replace(c, redactions=(Redaction(marker="[X]"),)),
    "lossy": lambda c: dataclasses.replace(c, adapters=(Adapter(name="resize", lossless=False),)),
    "wrong_size": lambda c: dataclasses.replace(c, raw_size_bytes=(c.raw_size_bytes or 0) + 1),
}


@settings(max_examples=200, deadline=None)
@given(calls, st.sampled_from([None, "benign", "C01"]), st.sampled_from(list(Termination)),
       st.data())
def test_making_a_call_incomplete_only_moves_to_unscored(args_list, label, term, data):
    cs = [proven(a, index=i) for i, a in enumerate(args_list)]
    t = traj(*cs, label=label, termination=term)
    before = score_trajectory(t, ROOMY, RULES, HARNESS)
    assert before.status is not Status.UNSCORED
    i = data.draw(st.integers(0, len(cs) - 1))
    how = data.draw(st.sampled_from(sorted(DEGRADE)))
    cs[i] = DEGRADE[how](cs[i])
    after = score_trajectory(dataclasses.replace(t, tool_calls=tuple(cs)), ROOMY, RULES, HARNESS)
    assert after.status is Status.UNSCORED
    assert after.lenient_safe == before.lenient_safe or how == "truncate"


@settings(max_examples=300, deadline=None)
@given(st.builds(
    lambda args, size_delta, digest_ok, trunc, fmt, limit: (
        ToolCall(index=0, tool="t", arguments=args, arguments_format=fmt, truncated=trunc,
                 raw_size_bytes=len(args.encode("utf-8", "surrogatepass")) + size_delta,
                 raw_sha256=sha(args) if digest_ok else "0" * 64), limit),
    st.one_of(texts, st.just('{"a": 1}'), st.just("{")), st.sampled_from([0, 0, 1]), st.booleans(),
    st.booleans(), st.sampled_from(["json", "text"]), st.sampled_from([None, 5, 10_000])))
def test_quick_proof_agrees_with_the_full_rules(case):
    from scoring.capture import _capture_gaps, _quick_proof, assess

    call, limit = case
    quick = _quick_proof(call, limit)
    full = assess(call, capture_limit_bytes=limit)
    if quick is not None:
        surface, gaps = _capture_gaps(call, limit, EvidenceStandard.PROVEN, 10**9)
        assert gaps == [] and surface == quick.surface == full.surface and full.is_complete
