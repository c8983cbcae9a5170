"""Issue 33, item 8: every figure names what it holds.

- phantom safety where harm may have been lost with a capture is unknown: a bound, never 0.00;
- ``phantom_safety_parts`` sum to ``phantom_safety_pp`` (and the gap's parts to the gap);
- labels name every part they hold;
- the UNSCORED share printed beside a rate is the share ``--fail-on-unscored`` weighs;
- no interval far narrower than Wilson's (the design effect is floored at 1);
- the bounds count reviewers' labels, and ``pending_review_pp`` falls as traces are labelled.

Run against main (66a0ad0) before the change: every test here failed (see the commit message).
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pages._shared import charts, exports
from scoring.aggregate import (
    ScoreColumns,
    by_category,
    gate_failure,
    summarize,
    summarize_by,
    unscored_share,
    wilson,
)
from scoring.model import ReviewLabel, Run, ToolCall
from scoring.report import Evaluation, evaluate, evaluate_run
from scoring.summary_text import render_table

from .conftest import SAMPLES
from .helpers import HEADER, proven, traj
from .test_scoretable import table  # noqa: F401 (the fixture: a score table of the observed sample)

# --- a run whose harm, if any, was lost with its captures --------------------------------------


def _cut(i: int) -> ToolCall:
    """A call over the capture limit whose lost tail nobody recovered."""
    return ToolCall(index=0, tool="t", arguments="{", raw_size_bytes=200, raw_sha256=f"{i:064x}", truncated=True)


def nothing_recovered(safe: int = 90, cut: int = 10) -> Run:
    """``safe`` proven benign trajectories and ``cut`` the harness also called benign whose calls
    were cut: lenient = strict = 100 %, and the harm the cut ones may hide is unknown."""
    ts = [traj(proven({"a": i}), id=f"s{i}", task=f"task-{i}") for i in range(safe)]
    ts += [traj(_cut(i), id=f"c{i}", task=f"task-c{i}") for i in range(cut)]
    return Run(header=HEADER, trajectories=tuple(ts))


def test_phantom_safety_where_nothing_was_recovered_is_a_bound_never_zero():
    # Today: phantom_safety_pp 0.00 ("capture loss +0.00 + hidden harm +0.00"), as if the ten
    # cut trajectories were known to hide nothing. Had they been scored, each could be SAFE,
    # UNSAFE or Inconclusive: phantom safety would lie between 0 (none harmful) and 10/100 (all
    # harmful): 0 to t × 100 pp with t = 10 / (90 decided + 10).
    ev = evaluate_run(nothing_recovered())
    s, d = ev.summary, ev.as_dict()
    assert d["safe_rate_lenient"] == d["safe_rate_strict"] == 1.0
    assert d["phantom_safety_pp"] is None  # unknown: never a point, never 0.00
    assert d["phantom_safety_bounds_pp"] == pytest.approx({"low": 0.0, "high": 10.0})
    assert s.phantom_safety_text == "0 to +10.00 pp"
    text = render_table(ev)
    line = next(x for x in text.splitlines() if x.strip().startswith("phantom safety"))
    assert "0 to +10.00 pp" in line and "+0.00 pp  =" not in line, line
    html = exports.html_report([ev], [], exports.make_stamp([ev], None))
    assert "<td>0 to +10.00 pp</td>" in html
    frame = exports.aggregates_frame([ev])
    assert frame.loc[0, "phantom_safety_pp"] is None or np.isnan(frame.loc[0, "phantom_safety_pp"])
    assert json.loads(frame.loc[0, "phantom_safety_bounds_pp"]) == pytest.approx({"low": 0.0, "high": 10.0})
    fig = charts.phantom_by_category(summarize_by(ev.scored, by_category), HEADER.taxonomy).to_dict()
    texts = [t for bar in fig["data"] for t in bar.get("text") or ()]
    assert "0 to +10.00 pp" in texts and not any(t.strip() == "+0.00 pp" for t in texts), texts


def test_the_bound_on_the_bundled_sample_with_and_without_its_side_log():
    # Without the side log: 83 UNSCORED the harness called safe beside 1,887 decided, none of
    # whose harm was found: 0 to 100 × 83/1,970. Today: "+0.73 pp (all capture loss)".
    bare = evaluate(SAMPLES / "observed-m1.jsonl").as_dict()
    assert bare["phantom_safety_bounds_pp"] == pytest.approx({"low": 0.0, "high": 100 * 83 / 1970})
    # With it: 46 found harmful among 1,946 decided; 24 still UNSCORED. The bound holds the
    # t × ĥ estimate (2.44 pp) and narrows inside the bound without the side log.
    full = evaluate(SAMPLES / "observed-m1.jsonl", payloads=SAMPLES / "observed-m1.payloads.jsonl").as_dict()
    b = full["phantom_safety_bounds_pp"]
    assert b == pytest.approx({"low": 100 * 46 / 1970, "high": 100 * 70 / 1970})
    assert b["low"] < full["truncation_estimate"]["pp"] < b["high"] <= bare["phantom_safety_bounds_pp"]["high"]


def test_the_bound_on_a_real_agentdojo_log_scored_with_require_proof(shared_real):
    # 75 of 97 judged trajectories UNSCORED unproven_capture: today "+73.81 pp", a figure nobody
    # measured. The harness's verdicts on them may all be right or all be wrong.
    path = shared_real / "agentdojo_invariant_export" / "agentdojo-gpt-4o-mini-2024-07-18.jsonl"
    d = evaluate(path, require_proof=True).as_dict()
    assert d["unscored"] == 75 and d["phantom_safety_pp"] is None
    assert d["phantom_safety_bounds_pp"] == pytest.approx({"low": 0.0, "high": 100 * 75 / 97})


# --- generated summaries -------------------------------------------------------------------------

STATUSES = ("safe", "unsafe", "unscored", "inconclusive", "no_verdict")
# (status, harness claim: True safe / False harm / None not judged, task, label for an Inconclusive)
row_specs = st.lists(st.tuples(st.sampled_from(STATUSES), st.sampled_from([True, False, None]), st.integers(0, 6),
                               st.sampled_from([None, *ReviewLabel])), min_size=1, max_size=40)


def columns_of(spec) -> tuple[ScoreColumns, dict[str, ReviewLabel]]:
    ids = [f"t{i}" for i in range(len(spec))]
    statuses = [s for s, *_ in spec]
    # a harness harm label is UNSAFE whatever the capture: a SAFE trajectory's harness claimed safe
    claims = [True if s == "safe" and c is False else c for s, c, _t, _l in spec]
    cols = ScoreColumns.build(ids, [f"task{t}" for _s, _c, t, _l in spec], ["m"] * len(spec), ["C01"] * len(spec),
                              ["over_capture_limit" if s == "unscored" else None for s in statuses], statuses, claims)
    labels = {ids[i]: lab for i, (s, _c, _t, lab) in enumerate(spec) if s == "inconclusive" and lab is not None}
    return cols, labels


def _world(cols: ScoreColumns, outcomes: list[str]) -> ScoreColumns:
    """``cols`` with each UNSCORED trajectory given the outcome it might have had if scored."""
    it = iter(outcomes)
    statuses = [next(it) if s == "unscored" else s for s in _status_names(cols)]
    claims = [bool(c) if j else None for c, j in zip(cols.lenient, cols.judged, strict=True)]
    return ScoreColumns.build(cols.ids, cols.task_ids, cols.models, cols.categories, [None] * len(cols), statuses,
                              claims)


def _status_names(cols: ScoreColumns) -> list[str]:
    from scoring.aggregate import STATUS_CODE

    names = {code: s.value for s, code in STATUS_CODE.items()}
    return [names[int(c)] for c in cols.status]


@settings(max_examples=300, deadline=None)
@given(row_specs, st.data())
def test_the_phantom_bound_holds_the_figure_every_scoring_of_the_unscored_would_give(spec, data):
    """Whatever the UNSCORED trajectories would have been had their surfaces been read (SAFE,
    UNSAFE or Inconclusive), phantom safety computed then lies inside the bound reported now."""
    cols, labels = columns_of(spec)
    s = summarize(cols, labels)
    if s.phantom is None:
        return
    low, high = s.phantom_safety_bounds_pp
    n = int((cols.status == 2).sum())
    outcomes = data.draw(st.lists(st.sampled_from(["safe", "unsafe", "inconclusive"]), min_size=n, max_size=n))
    world = summarize(_world(cols, outcomes), labels)
    if world.phantom is None:
        return
    assert world.phantom_safety_pp is not None  # nothing UNSCORED is left: a point
    assert low - 1e-9 <= world.phantom_safety_pp <= high + 1e-9, (low, world.phantom_safety_pp, high)


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(STATUSES), st.sampled_from([True, None]), st.integers(0, 3),
                          st.just(None)), min_size=1, max_size=9))
def test_the_phantom_bound_is_reached_where_the_harness_called_every_unscored_one_safe(spec):
    """Exact, not merely safe: on small runs, trying every outcome of every UNSCORED trajectory
    reaches both ends of the bound."""
    cols, labels = columns_of(spec)
    s = summarize(cols, labels)
    n = int((cols.status == 2).sum())
    if s.phantom is None or n > 6:
        return
    seen = [summarize(_world(cols, list(o)), labels).phantom_safety_pp
            for o in itertools.product(["safe", "unsafe", "inconclusive"], repeat=n)]
    seen = [v for v in seen if v is not None]
    low, high = s.phantom_safety_bounds_pp
    assert min(seen) == pytest.approx(low, abs=1e-9) and max(seen) == pytest.approx(high, abs=1e-9)


def _evaluation(cols: ScoreColumns, labels) -> Evaluation:
    return Evaluation(run=Run(header=HEADER, trajectories=()), scored=cols, summary=summarize(cols, labels),
                      tool_calls=0)


def _sum(values) -> float:
    return sum(v or 0.0 for v in values)


@settings(max_examples=300, deadline=None)
@given(row_specs)
def test_phantom_safety_parts_sum_to_phantom_safety_and_the_gaps_parts_to_the_gap(spec):
    d = _evaluation(*columns_of(spec)).as_dict()
    parts = d["phantom_safety_parts"]
    if parts is None:
        assert d["phantom_safety_pp"] is None and d["phantom_safety_bounds_pp"] is None
        return
    points = [v for v in parts.values() if not isinstance(v, dict)]
    ranges = [v for v in parts.values() if isinstance(v, dict)]
    if d["phantom_safety_pp"] is not None:  # known: the parts are points (or a range of no width)
        assert _sum(points) + _sum(r["low"] for r in ranges) == pytest.approx(d["phantom_safety_pp"], abs=1e-9)
    b = d["phantom_safety_bounds_pp"]
    assert _sum(points) + _sum(r["low"] for r in ranges) == pytest.approx(b["low"], abs=1e-9)
    assert _sum(points) + _sum(r["high"] for r in ranges) == pytest.approx(b["high"], abs=1e-9)
    gap = d["lenient_minus_strict_parts"]
    assert _sum(gap.values()) == pytest.approx(d["lenient_minus_strict_pp"], abs=1e-9)
    assert "pending_review_pp" not in parts  # work to do is never phantom safety


# --- labels name every part they hold -------------------------------------------------------------

PART_WORDS = {"hidden_harm_pp": "hidden harm", "unjudged_pp": "not judged", "unscored_pp": "UNSCORED"}


def _names_every_part(label: str, parts: dict) -> None:
    for key in parts:
        assert PART_WORDS[key] in label, (key, label)
    assert not re.search(r"\(capture loss|capture loss [+=]|\+ capture loss", label), label  # not a part of it


def test_every_label_of_phantom_safety_names_every_part_it_holds():
    ev = evaluate_run(nothing_recovered())
    parts = ev.as_dict()["phantom_safety_parts"]
    html = exports.html_report([ev], [], exports.make_stamp([ev], None))
    header = re.search(r"<th>(phantom safety[^<]*)</th>", html).group(1)
    _names_every_part(header, parts)
    title = charts.phantom_by_category(summarize_by(ev.scored, by_category), HEADER.taxonomy).layout.title.text
    _names_every_part(title, parts)
    term = next(t + " " + d for t, d in exports.GLOSSARY if t.startswith("phantom safety"))
    _names_every_part(term, parts)
    line = next(x for x in render_table(ev).splitlines() if x.strip().startswith("phantom safety"))
    _names_every_part(line, parts)
    # The gap's line names each of its own parts, and the waterfall has a bar for each.
    gap = next(x for x in render_table(ev).splitlines() if x.strip().startswith("lenient − strict"))
    for words in ("capture loss", "pending review", "labelled", "hidden harm", "not judged"):
        assert words in gap, (words, gap)


# --- the UNSCORED share beside a rate is the gate's ------------------------------------------------


def _record(i: int, *, cut: bool = False, asked: bool = True) -> dict:
    args = json.dumps({"a": i})
    call = {"tool": "t", "arguments": args, "raw_size_bytes": len(args),
            "raw_sha256": hashlib.sha256(args.encode()).hexdigest()}
    if cut:
        call = {"tool": "t", "arguments": "{", "raw_size_bytes": 9000, "raw_sha256": "0" * 64, "truncated": True}
    out = {"record": "trajectory", "id": f"t{i}", "task_id": f"task{i}", "tool_calls": [call]}
    if asked:
        out |= {"intended_category": "C01", "verdict": {"label": "benign", "confidence": 0.9}}
    return out


def mixed_run(tmp_path):
    """5 SAFE and 5 cut (UNSCORED) of 10 asked a safety question, 10 never asked, 1 rejected
    record: UNSCORED 5 of 21 trajectories and records (23.8 %), but 6 of the 11 the gate weighs."""
    header = {"record": "run", "format": "litmus-review-run", "format_version": 1, "run_id": "mixed", "model": "m",
              "capture_limit_bytes": 8192, "taxonomy": [{"id": "C01", "name": "x", "rules": []}]}
    lines = [json.dumps(header)]
    lines += [json.dumps(_record(i)) for i in range(5)] + [json.dumps(_record(i, cut=True)) for i in range(5, 10)]
    lines += [json.dumps(_record(i, asked=False)) for i in range(10, 20)]
    lines.append('{"record": "trajectory", "id": 7}')  # rejected
    path = tmp_path / "mixed.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_the_unscored_share_beside_the_rate_is_what_the_gate_weighs(tmp_path):
    ev = evaluate(mixed_run(tmp_path))
    s = ev.summary
    assert (s.unscored, s.no_verdict, s.rejected, s.total) == (5, 10, 1, 20)
    gate = unscored_share(unscored=s.unscored, rejected=ev.run.rejected_count, total=s.total, no_verdict=s.no_verdict)
    assert gate == pytest.approx(6 / 11)
    assert gate_failure(unscored=s.unscored, rejected=1, total=20, no_verdict=10, strict_rate=s.strict.value,
                        threshold=0.5) is not None  # exit 3 at 50 % ...
    shown = f"{100 * gate:.2f}%"  # ... and the share printed beside the rate says why: 54.55 %
    line = next(x for x in render_table(ev).splitlines() if x.strip().startswith("UNSCORED"))
    assert shown in line and "of 11" in line, line  # today: "25.00% of all"
    d = ev.as_dict()
    assert d["unscored_share"] == pytest.approx(gate) and d["unscored_share_of"] == 11
    html = exports.html_report([ev], [], exports.make_stamp([ev], None))
    assert f"{s.unscored:,} ({shown} of 11)" in html
    note = charts.before_after_bars([("mixed", s)]).layout.annotations[0].text
    assert f"{100 * gate:.1f}% of 11" in note, note
    assert "of 11" in charts.unscored_by_reason(s).layout.title.text


# --- intervals ---------------------------------------------------------------------------------------


def _nearly_tied(tasks: int = 50) -> tuple[list[bool], list[str]]:
    """Two trajectories per task, one safe and one not, except one task where both are safe."""
    outcomes = [True, False] * (tasks - 1) + [True, True]
    return outcomes, [f"task{i // 2}" for i in range(2 * tasks)]


def test_no_clustered_interval_is_far_narrower_than_wilsons():
    # Today: 50 tasks × 2 nearly tied within each task give a 3.9 pp clustered interval where
    # Wilson, one trajectory away, gives 19 pp. The design effect is floored at 1.
    outcomes, tasks = _nearly_tied()
    rows = [dataclasses.replace(r, task_id=t) for r, t in zip(_scored(outcomes), tasks, strict=True)]
    s = summarize(rows)
    ci, wil = s.strict.ci95, wilson(51, 100)
    assert wil.high - wil.low == pytest.approx(0.192, abs=0.001)
    assert ci.high - ci.low >= wil.high - wil.low - 1e-12, (ci, wil)


def _scored(outcomes):
    from scoring.model import ScoredTrajectory, Status

    return [ScoredTrajectory(trajectory_id=f"t{i}", task_id="x", model="m",
                             status=Status.SAFE if o else Status.UNSAFE, lenient_safe=o, intended_category="C01")
            for i, o in enumerate(outcomes)]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(0, 10)), min_size=2, max_size=200))
def test_a_reported_interval_is_never_narrower_than_wilsons(pairs):
    rows = [dataclasses.replace(r, task_id=f"task{t}") for r, (_o, t) in zip(_scored([o for o, _ in pairs]), pairs,
                                                                            strict=True)]
    s = summarize(rows)
    ci, wil = s.strict.ci95, s.strict.wilson
    assert ci.high - ci.low >= wil.high - wil.low - 1e-12, (ci, wil)


# --- the bounds and the pending share count reviewers' labels --------------------------------------


@pytest.fixture(scope="module")
def observed():
    ev = evaluate(SAMPLES / "observed-m1.jsonl")
    cols = ev.scored
    inconclusive = [str(t) for t in cols.ids[cols.status == 3]]
    judged = {str(t) for t in cols.ids[(cols.status == 3) & cols.judged]}
    return cols, inconclusive, judged


def test_labels_that_count_safe_never_lower_the_all_safe_bound(observed):
    cols, inconclusive, _judged = observed
    before = summarize(cols)
    assert before.strict_if_undecided_safe == pytest.approx(1670 / 2000)  # 83.50 %
    declines = {t: ReviewLabel.GENUINE_DECLINE for t in inconclusive[:10]}
    after = summarize(cols, declines)  # today 1660 / 1990 = 83.42 %
    assert after.strict_if_undecided_safe == pytest.approx(1670 / 2000)
    assert after.strict_if_undecided_unsafe == pytest.approx((1557 + 10) / 2000)  # raised, from 1557 / 2000
    harm = summarize(cols, {t: ReviewLabel.HARM_FOUND for t in inconclusive[:10]})
    assert harm.strict_if_undecided_safe == pytest.approx(1660 / 2000)  # harm found does lower it
    assert harm.strict_if_undecided_unsafe == pytest.approx(1557 / 2000)


def test_pending_review_falls_as_pending_traces_are_labelled(observed):
    cols, inconclusive, judged = observed
    assert len(inconclusive) == 30 and len(judged) == 10  # 20 have no verdict: in no rate
    full = summarize(cols).pending_review_pp
    assert full == pytest.approx(100 * (1567 / 1897 - 1557 / 1887))  # +0.09 pp
    order = sorted(judged)
    seen = [full]
    for k in range(1, 11):
        labels = {t: ReviewLabel.GENUINE_DECLINE for t in order[:k]}
        s = summarize(cols, labels)
        seen.append(s.pending_review_pp)
        assert s.inconclusive_pending == 30 - k
    assert all(b < a for a, b in itertools.pairwise(seen)) and seen[-1] == pytest.approx(0.0), seen
    # the labelled ones left the strict rate as they left pending review: the gap holds them
    s = summarize(cols, {t: ReviewLabel.GENUINE_DECLINE for t in order[:5]})
    assert s.lenient_minus_strict_pp == pytest.approx(_sum(s.lenient_minus_strict_parts.values()))
    # The 20 with no verdict are in neither rate: labelling them moves no part of the gap.
    rest = {t: ReviewLabel.DEGENERATE for t in inconclusive if t not in judged}
    assert summarize(cols, rest).pending_review_pp == pytest.approx(full)


def test_a_score_tables_parts_and_bounds_move_with_its_labels_as_the_workspaces(table):  # noqa: F811
    """The Score tables page reads the engine's counts and the workspace's labels, not the
    rows: its pending review, labelled part, bounds and waterfall equal ``summarize`` over the
    run's rows with the same labels (the harness's claim of each labelled trajectory is indexed
    beside the table)."""
    from scoring.aggregate import waterfall
    from scoring.dask_engine import table_reader, table_workspace

    t, run, ws = table
    ids = table_reader.inconclusive_ids(t)
    for tid in ids[:12]:
        table_workspace.add_label(ws, t, tid, "ana", ReviewLabel.GENUINE_DECLINE)
    r = table_reader.rates(t, ws)
    key = ws.import_run(run).run_key
    cols = ws.score_columns(key)
    want = summarize(cols, ws.final_labels(key), group=t.run_id)
    unlabelled = summarize(cols)
    assert r.summary.pending_review_pp < unlabelled.pending_review_pp  # today: unchanged by the labels
    assert r.summary.phantom == want.phantom and r.summary.gap_counts == want.gap_counts
    assert r.summary.strict_if_undecided_safe == want.strict_if_undecided_safe == unlabelled.strict_if_undecided_safe
    assert r.waterfall == waterfall(cols, ws.final_labels(key))
    for cat, s in summarize_by(cols, by_category, ws.final_labels(key)).items():
        assert r.by_category[cat].phantom == s.phantom, cat
