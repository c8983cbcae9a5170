"""A run's evaluation as human-readable text: the summary ``litmus-review score`` prints, and
the Dask engine returns beside its JSON (both doors print the same table)."""

from __future__ import annotations

from .aggregate import Summary
from .report import Evaluation, harness_reported, lenient_note
from .score import SCORER_VERSION
from .text import terminal_safe


def count_noun(n: int, noun: str) -> str:
    """``n`` and its noun, singular for one ("1 payload", "2 payloads")."""
    return f"{n:,} {noun}" + ("" if n == 1 else "s")


def _t(value: object) -> str:
    """A value the data wrote (an id, a path, a message), as inert text for a terminal."""
    return terminal_safe(value)


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:.2f}%"


def _pp(x: float | None) -> str:
    return "—" if x is None else f"{x:+.2f} pp"


def _n(x: float | None) -> str:
    """Points without their unit (a line of parts says "(pp)" once)."""
    return "—" if x is None else f"{0.0 if abs(x) < 5e-13 else x:+.2f}"


def unscored_share_words(s: Summary) -> str:
    """The UNSCORED share with what it divides by, as ``--fail-on-unscored`` weighs it."""
    of = f"{s.unscored_share_of:,} asked a safety question" + (" + rejected records" if s.rejected else "")
    return f"{_pct(s.unscored_share)} of {of}"


def stale_note(ev: Evaluation) -> str:
    """What follows a stale run's scorer version: whose statuses these are, and how to update them."""
    return (f"  (STALE: its statuses are scorer {ev.scorer_version}'s; scorer {SCORER_VERSION} has not scored this "
            "run. litmus-review rescore updates it from the original bytes the workspace keeps; where it no longer "
            "holds them, litmus-review rescore KEY --from FILE)")


def render_table(ev: Evaluation) -> str:
    """The human-readable summary of one run."""
    s, h = ev.summary, ev.run.header
    ci = s.strict.ci95
    # A stale run's statuses are its own older scorer's: every line that counts them says so.
    old = f"   [scorer {ev.scorer_version}'s, STALE]" if ev.stale else ""
    lines = [
        f"run {_t(h.run_id)}  ({h.format}, model {_t(h.model)}, evidence: {h.evidence_claim})",
        f"  name              {_t(ev.name)}",
        f"  read as           {_t(h.harness_name or h.format)}",
        f"  source            {_t(h.source)}" + (f"  (uploaded as {_t(ev.original_name)})" if ev.original_name else ""),
        f"  file sha256       {ev.file_sha256 or 'unknown'}",
        f"  scorer version    {ev.scorer_version}" + (stale_note(ev) if ev.stale else ""),
        "  side log          " + (f"{_t(ev.side_log['source'])} (sha256 {ev.side_log['sha256']})" if ev.side_log
                                  else "none"),
        *([f"  proof             {_t(h.proof_source)} (sha256 {h.proof_sha256}; recorded at the source, read and "
           "joined by the importer)"] if h.proof_read else []),
        *(["  require proof     yes: a capture only claimed complete is UNSCORED unproven_capture"]
          if h.require_proof else []),
        *([f"  classifier check  {_t(h.classifier_of_record_check)}"] if h.classifier_of_record_check else []),
        f"  run status        {_t(h.run_status or 'not recorded by the format')}"
        + (f"  ({_t(h.run_status_detail)})" if h.run_status_detail else ""),
        f"  trajectories      {s.total:,}   tool calls {ev.tool_calls:,}",
        f"  safe / unsafe     {s.safe:,} / {s.unsafe:,}   (scored {s.scored:,}){old}",
        f"  UNSCORED          {s.unscored:,}  ({unscored_share_words(s)}; out of the denominator){old}",
    ]
    for reason, n in s.unscored_by_reason.items():
        lines.append(f"    {_t(reason):<32}{n:,}")
    if ended := ev.terminations:
        lines.append("  terminations      " + ", ".join(f"{_t(k)} {n:,}" for k, n in ended.items())
                     + "   (as the log recorded each ending)")
    if s.rejected or ev.run.rejected_count:
        lines.append(f"  rejected records  {ev.run.rejected_count:,} of {ev.run.records_seen:,} "
                     "(not imported; in no rate: see the lines above)")
    lines += [
        f"  inconclusive      {s.inconclusive:,}  (pending review {s.inconclusive_pending:,}){old}",
        *([f"  judge did not see {s.judge_unseen:,} UNSCORED, {sum(s.judge_unseen_by_label.values()):,} labelled by "
           "reviewers who replayed the full calls (in the reviewed rate only)"] if s.judge_unseen else []),
        f"  no safety verdict {s.no_verdict:,}  (never asked a safety question; in no rate)",
        f"  safe rate lenient {_pct(s.lenient.value)}   (the harness's own claim, over the {s.judged:,} "
        "trajectories it judged)" if s.lenient.value is not None else
        f"  safe rate lenient —   ({lenient_note(s)})",
    ]
    reported = harness_reported(ev.run, s)
    if reported is not None:
        verdict = "agrees" if reported["agrees"] else f"DIFFERS by {_pp(reported['difference_pp'])}"
        lines.append(f"  harness reported  {_pct(reported['value'])}   ({reported['source']}; lenient {verdict})")
    lines += [
        f"  safe rate strict  {_pct(s.strict.value)}"
        + (f"   95% CI {_pct(ci.low)}–{_pct(ci.high)} ({ci.method})" if ci else "")
        + ("   PROVISIONAL: over 5% of the judged trajectories await review" if s.strict_rate_provisional else "")
        + old,
        f"  safe rate reviewed {_pct(s.reviewed.value)}{old}",
    ]
    if s.safe_by_classifier:
        lines.append("  SAFE certified by " + ", ".join(f"{k or '?'} {n:,}" for k, n in s.safe_by_classifier.items())
                     + old)
    p = s.phantom
    if p is None:
        lines.append(f"  lenient − strict  {_pp(s.lenient_minus_strict_pp)}")
    else:
        lines.append(f"  lenient − strict  {_pp(s.lenient_minus_strict_pp)}  = capture loss {_n(p.capture_loss_pp)}"
                     f" + pending review {_n(p.pending_review_pp)} + labelled {_n(p.labelled_pp)}"
                     f" + hidden harm {_n(p.hidden_harm_pp)} + not judged {_n(p.unjudged_pp)} (pp)")
        measured = f"hidden harm {_n(p.hidden_harm_pp)} + not judged {_n(p.unjudged_pp)} pp"
        if s.phantom_safety_pp is not None or p.unscored_low_pp is None or p.unscored_high_pp is None:
            lines.append(f"    phantom safety  {s.phantom_safety_text}  = {measured}")
        else:
            lines.append(f"    phantom safety  {s.phantom_safety_text}  = {measured} on the decided + UNSCORED "
                         f"{p.unscored_text}: unknown, what scoring the "
                         f"{s.unscored:,} UNSCORED could move it by, whatever each had been")
        lines.append(f"    pending review  {_pp(p.pending_review_pp)}  ({s.inconclusive_pending:,} Inconclusive "
                     "not yet labelled: work to do, not phantom safety)")
    t = s.truncation
    if t is not None and t.truncated:
        est = (f"{t.pp:.2f} pp (95% CI {t.low_pp:.2f}–{t.high_pp:.2f})" if t.pp is not None
               else f"{t.bounds_text} (ĥ unknown: no cut trajectory was recovered and decided)"
               if t.pp_bounds else "—")
        lines.append(f"  t × ĥ estimate    {est}: t = {t.truncated:,}/{t.judged:,} judged cut, ĥ = "
                     f"{t.recovered_unsafe:,}/{t.recovered_decided:,} unsafe among recovered ones it called benign")
    lines.append(f"  if every UNSCORED and pending trajectory were unsafe {_pct(s.strict_if_undecided_unsafe)}, "
                 f"safe {_pct(s.strict_if_undecided_safe)}"
                 + ("  (reviewers' labels counted as in the reviewed rate)" if s.inconclusive_pending != s.inconclusive
                    else ""))
    if ev.recapture is not None:
        n_bad = ev.recapture.rejected_count
        lines.append(f"  recapture         {ev.recapture.applied:,} calls completed from {_t(ev.recapture.source)}; "
                     f"{count_noun(n_bad, 'payload')} rejected")
    if ev.reclassifier:
        lines.append(f"  re-classifier     {ev.reclassifier}")
    replaced = (ev.format_metrics or {}).get("replaced_results")
    if replaced is not None:
        lines.append(f"  results replaced  {replaced['replaced']:,} of {replaced['of_results']:,} tool results, in "
                     f"{replaced['trajectories']:,} trajectories, by a defence's marker (the agent never saw them; "
                     "not a capture gap)")
    dojo = (ev.format_metrics or {}).get("agentdojo")
    if dojo is not None:
        lines.append("  agentdojo         " + _dojo_line(dojo))
    inspect_verdicts = (ev.format_metrics or {}).get("inspect")
    if inspect_verdicts:
        c = inspect_verdicts["verdict_outcomes"]
        lines.append(f"  verdict map       unsafe {c['unsafe']:,}, safe {c['safe']:,}, inconclusive "
                     f"{c['inconclusive']:,}, no verdict {c['none']:,}, unmapped {c['unmapped']:,}, "
                     f"scorer absent {c['absent']:,}")
        for value, n in inspect_verdicts["unmapped_values"].items():
            lines.append(f"    unmapped value  {_t(repr(value[:60]))} x {n:,}")
        audit = inspect_verdicts.get("judge_audit")
        if audit:
            lines.append("  judge input       " + judge_audit_line(audit) + old)
    return "\n".join(lines)


def judge_audit_line(a: dict) -> str:
    """The judge-input audit of the safe verdicts, in words (``inspect_log.judge_audit_summary``)."""
    parts = [f"{a['checked_shown']:,} safe verdicts checked against the logged arguments, every call shown",
             f"{a['checked_not_shown']:,} not shown every call (UNSCORED judge_did_not_see_full_surface)"]
    parts += [f"{a[k]:,} {words}" for k, words in (
        ("unresolved", "unresolved (judge_input_unresolved)"), ("proof_refused", "with a refused proof"),
        ("programmatic", "programmatic (no model call decided)"),
        ("not_in_log", "not checkable: the log holds no events (UNSCORED judge_input_not_in_log)")) if a.get(k)]
    return "; ".join(parts)


def _dojo_line(m: dict) -> str:
    """AgentDojo's own figures for a run read from its run directory, as it reports them."""
    def part(name: str, f: dict | None) -> str:
        return f"{name} {f['passed' if 'passed' in f else 'successes']:,}/{f['of']:,} ({_pct(f['rate'])})" if f else ""

    out = [part("utility without attack", m.get("utility_without_attack"))]
    if "asr" in m:
        out += [part("under attack", m.get("utility_under_attack")), part("ASR", m["asr"])]
        pairs = m.get("pairs") or {}
        if pairs:
            out.append(f"pairs {pairs['present']:,} of {pairs['expected']:,} expected"
                       + (f" ({pairs['missing']:,} MISSING)" if pairs["missing"] else ""))
        if m.get("errors_counted_as_success"):
            out.append(f"{m['errors_counted_as_success']:,} errored cases counted as attack successes")
    return "; ".join(p for p in out if p)
