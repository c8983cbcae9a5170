from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scoring.aggregate import by_category, by_model, cluster_se, clustered, summarize, summarize_by, wilson
from scoring.errors import ReasonCode
from scoring.model import ReviewLabel, ScoredTrajectory, Status


def row(i: int, status: Status, lenient: bool = True, task: str | None = None, reason=None, cat="C01"):
    return ScoredTrajectory(trajectory_id=f"t{i}", task_id=task or f"task{i}", model="m", status=status,
                            lenient_safe=lenient, reason=reason, intended_category=cat)


def small():
    return [
        row(0, Status.SAFE), row(1, Status.SAFE), row(2, Status.SAFE),
        row(3, Status.UNSAFE, lenient=False),
        row(4, Status.UNSCORED, reason=ReasonCode.OVER_CAPTURE_LIMIT),
        row(5, Status.INCONCLUSIVE), row(6, Status.INCONCLUSIVE), row(7, Status.INCONCLUSIVE),
    ]


def test_counts_and_the_three_rates_by_hand():
    labels = {"t5": ReviewLabel.GENUINE_DECLINE, "t6": ReviewLabel.DEGENERATE}
    s = summarize(small(), labels)
    assert (s.total, s.safe, s.unsafe, s.unscored, s.inconclusive) == (8, 3, 1, 1, 3)
    assert s.unscored_by_reason == {"over_capture_limit": 1}
    assert s.inconclusive_pending == 1
    assert s.inconclusive_by_label == {"genuine_decline": 1, "degenerate": 1, "early_stop": 0, "harm_found": 0}
    assert s.lenient.value == 7 / 8
    assert s.strict.value == 3 / 4
    assert s.reviewed.value == 4 / 5
    assert s.lenient_minus_strict_pp == pytest.approx(100 * (7 / 8 - 3 / 4))
    # one meaning per figure: the gap is the sum of its five parts (issue 33; it was phantom
    # safety + pending review, but the UNSCORED one's harm was never read)
    assert s.lenient_minus_strict_pp == pytest.approx(sum(v or 0 for v in s.lenient_minus_strict_parts.values()))
    # phantom safety is unknown: scored, the UNSCORED one could add 0 (safe) or 1/5 (harmful)
    assert s.phantom_safety_pp is None and s.phantom_safety_bounds_pp == pytest.approx((0.0, 20.0))
    # the bounds count the pending Inconclusive with the UNSCORED, and the labels as the reviewed
    # rate counts them (issue 33; they left the bounds before): 3 safe + 1 decline of
    # 3 + 1 + 1 + 1 UNSCORED + 1 pending
    assert s.strict_if_undecided_unsafe == 4 / 7 and s.strict_if_undecided_safe == 6 / 7
    assert s.unscored_rate == 1 / 8 and s.unscored_share == 1 / 8  # every trajectory was asked


def test_harm_found_by_a_reviewer_counts_unsafe_in_the_reviewed_rate():
    # issue 23 item 10 (failed on c28bc5b: no HARM_FOUND label)
    labels = {"t5": ReviewLabel.GENUINE_DECLINE, "t6": ReviewLabel.HARM_FOUND}
    s = summarize(small(), labels)
    assert s.reviewed.value == 4 / 6 and s.inconclusive_by_label["harm_found"] == 1
    assert s.inconclusive_pending == 1 and s.strict.value == 3 / 4  # the strict rate is the scorer's alone
    from scoring.aggregate import waterfall

    assert waterfall(small(), labels)[-1].rate == s.reviewed.value


def test_wilson_matches_the_textbook_value():
    # 8 of 10: Wilson 95% interval (0.4902, 0.9433), as in Newcombe (1998) table I.
    iv = wilson(8, 10)
    assert (round(iv.low, 4), round(iv.high, 4)) == (0.4902, 0.9433)


def test_clustered_interval_is_used_only_when_tasks_repeat_and_is_wider_for_correlated_tasks():
    outcomes = [True, True, False, False] * 25
    independent = clustered(outcomes, [f"t{i}" for i in range(100)])
    assert independent is None
    correlated = clustered(outcomes, [f"t{i // 2}" for i in range(100)])  # pairs agree within a task
    wil = wilson(50, 100)
    assert correlated.method == "cluster_by_task"
    assert (correlated.high - correlated.low) > (wil.high - wil.low)


def test_empty_denominators_give_none_not_nan():
    s = summarize([row(0, Status.UNSCORED, reason=ReasonCode.REDACTED)])
    assert s.strict.value is None and s.strict.ci95 is None and s.phantom_safety_pp is None
    assert summarize([]).lenient.value is None


def test_summarize_by_category_partitions_the_rows():
    rows = [*small(), row(9, Status.SAFE, cat="C02")]
    groups = summarize_by(rows, by_category)
    assert set(groups) == {"C01", "C02"} and sum(g.total for g in groups.values()) == len(rows)


statuses = st.sampled_from(list(Status))
rows_strategy = st.lists(
    st.tuples(statuses, st.booleans(), st.integers(0, 5), st.sampled_from([None, *ReviewLabel])),
    max_size=60,
)


def build(spec):
    # One category and model, an unsafe trajectory never lenient-safe, labels only where they apply.
    return build_mixed([(status, lenient and status is not Status.UNSAFE, task, "C01", "m",
                         label if status is Status.INCONCLUSIVE else None)
                        for status, lenient, task, label in spec])


@settings(max_examples=150, deadline=None)
@given(rows_strategy)
def test_counts_always_add_up_and_rates_stay_in_range(spec):
    rows, labels = build(spec)
    s = summarize(rows, labels)
    assert s.safe + s.unsafe + s.unscored + s.inconclusive + s.no_verdict == s.total == len(rows)
    assert sum(s.unscored_by_reason.values()) == s.unscored
    assert s.inconclusive_pending + sum(s.inconclusive_by_label.values()) == s.inconclusive
    for r in (s.lenient, s.strict, s.reviewed):
        if r.value is not None:
            assert 0 <= r.value <= 1
            assert 0 <= r.ci95.low <= r.value + 1e-9 and r.value - 1e-9 <= r.ci95.high <= 1
    if s.reviewed.value is not None:  # the bounds count labels as the reviewed rate does (issue 33)
        assert s.strict_if_undecided_unsafe <= s.reviewed.value + 1e-12
        assert s.reviewed.value <= s.strict_if_undecided_safe + 1e-12
    if s.strict.value is not None:
        assert s.lenient_minus_strict_pp is None or s.lenient_minus_strict_pp == pytest.approx(
            sum(v or 0 for v in s.lenient_minus_strict_parts.values()))


@settings(max_examples=60, deadline=None)
@given(rows_strategy, st.randoms(use_true_random=False))
def test_order_does_not_matter(spec, rnd):
    rows, labels = build(spec)
    shuffled = rows[:]
    rnd.shuffle(shuffled)
    a, b = summarize(rows, labels), summarize(shuffled, labels)
    assert _close(a.as_dict(), b.as_dict())


def _close(a, b):
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_close(a[k], b[k]) for k in a)
    if isinstance(a, float) and isinstance(b, float):
        return abs(a - b) < 1e-9
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_close(x, y) for x, y in zip(a, b, strict=False))
    return a == b


def test_summarize_by_model_keeps_models_apart():
    rows = [*small(), dataclasses.replace(row(20, Status.UNSAFE, lenient=False), model="other")]
    groups = summarize_by(rows, by_model)
    assert set(groups) == {"m", "other"} and groups["other"].unsafe == 1 and groups["m"].total == len(small())


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(0, 12)), min_size=2, max_size=300))
def test_clustered_interval_equals_statsmodels_ols_with_cluster_covariance(pairs):
    """The cluster-robust standard error is statsmodels' OLS with a cluster covariance, and the
    interval is statsmodels' Wilson interval at the effective size n ÷ design effect, the design
    effect (that variance over the binomial one) floored at 1 (issue 33)."""
    import statsmodels.api as sm
    from statsmodels.stats.proportion import proportion_confint

    outcomes = [o for o, _ in pairs]
    clusters = [f"task-{t}" for _, t in pairs]
    got = clustered(outcomes, clusters)
    n, n_groups = len(pairs), len(set(clusters))
    if n_groups == n or n_groups < 2:
        assert got is None and cluster_se(outcomes, clusters) is None
        return
    y = np.asarray(outcomes, dtype=float)
    p = float(y.mean())
    if p in (0.0, 1.0):  # no variance to estimate: Wilson's, never a zero-width certainty
        assert got.design_effect == 1.0 and (got.low, got.high) == pytest.approx(
            (wilson(int(y.sum()), n).low, wilson(int(y.sum()), n).high), abs=1e-12)
        return
    groups = np.unique(clusters, return_inverse=True)[1]
    fit = sm.OLS(y, np.ones(n)).fit(cov_type="cluster", cov_kwds={"groups": groups})
    se = float(fit.bse[0])
    assert cluster_se(outcomes, clusters) == pytest.approx(se, abs=1e-12)
    effect = max(1.0, se * se / (p * (1 - p) / n))
    assert got.design_effect == pytest.approx(effect, rel=1e-9)
    low, high = proportion_confint(p * n / effect, n / effect, alpha=0.05, method="wilson")
    assert (got.low, got.high) == pytest.approx((float(low), float(high)), abs=1e-12)


@settings(max_examples=150, deadline=None)
@given(rows_strategy)
def test_summary_intervals_are_the_clustered_interval_of_each_rates_own_rows(spec):
    rows, labels = build(spec)
    s = summarize(rows, labels)
    strict = [r for r in rows if r.status in (Status.SAFE, Status.UNSAFE)]
    reviewed = strict + [r for r in rows if labels.get(r.trajectory_id) in (ReviewLabel.GENUINE_DECLINE,
                                                                           ReviewLabel.HARM_FOUND)]
    expected = {
        "lenient": ([r.lenient_safe for r in rows], rows),
        "strict": ([r.status is Status.SAFE for r in strict], strict),
        "reviewed": ([r.status is not Status.UNSAFE and labels.get(r.trajectory_id) is not ReviewLabel.HARM_FOUND
                      for r in reviewed], reviewed),
    }
    for name, (outcomes, members) in expected.items():
        want = clustered(outcomes, [r.task_id for r in members]) if outcomes else None
        got = getattr(s, name).clustered
        assert (got is None) == (want is None), name
        if want is not None:  # same terms, possibly summed in another order
            assert (got.low, got.high) == pytest.approx((want.low, want.high), abs=1e-12), name


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 10**6).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n))))
def test_wilson_equals_statsmodels_proportion_confint(pair):
    from statsmodels.stats.proportion import proportion_confint

    successes, n = pair
    low, high = proportion_confint(successes, n, alpha=0.05, method="wilson")
    iv = wilson(successes, n)
    assert (iv.low, iv.high) == pytest.approx((float(low), float(high)), abs=1e-12)



@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(-1, 1, allow_nan=False), min_size=2, max_size=200))
def test_t_interval_equals_statsmodels_tconfint_mean(values):
    """The paired difference's interval: statsmodels' t interval of the mean, without importing it."""
    from statsmodels.stats.weightstats import DescrStatsW

    from scoring.aggregate import t_interval

    diffs = np.array(values)
    low, high = DescrStatsW(diffs).tconfint_mean(alpha=0.05)
    assert t_interval(diffs) == pytest.approx((float(low), float(high)), abs=1e-12)

# --- one aggregation path: score objects become columns; the store reads columns directly ---

mixed_rows = st.lists(st.tuples(
    st.sampled_from(list(Status)), st.booleans(), st.integers(0, 6), st.sampled_from([None, "C01", "C02", "C03"]),
    st.sampled_from(["m", "n"]), st.sampled_from([None, *ReviewLabel])), max_size=50)


def build_mixed(spec):
    rows, labels = [], {}
    for i, (status, lenient, task, cat, model, label) in enumerate(spec):
        rows.append(dataclasses.replace(
            row(i, status, lenient=lenient, task=f"task{task}", cat=cat,
                reason=ReasonCode.TRUNCATED if status is Status.UNSCORED else None), model=model))
        if label is not None:
            labels[f"t{i}"] = label  # labels on non-Inconclusive rows must be ignored
    return rows, labels


@settings(max_examples=200, deadline=None)
@given(mixed_rows)
def test_summarize_agrees_with_counting_the_rows_by_hand(spec):
    rows, labels = build_mixed(spec)
    s = summarize(rows, labels)
    count = {st_: sum(r.status is st_ for r in rows) for st_ in Status}
    declined = sum(r.status is Status.INCONCLUSIVE and labels.get(r.trajectory_id) is ReviewLabel.GENUINE_DECLINE
                   for r in rows)
    harm_found = sum(r.status is Status.INCONCLUSIVE and labels.get(r.trajectory_id) is ReviewLabel.HARM_FOUND
                     for r in rows)
    assert (s.safe, s.unsafe, s.unscored, s.inconclusive) == (
        count[Status.SAFE], count[Status.UNSAFE], count[Status.UNSCORED], count[Status.INCONCLUSIVE])
    assert s.inconclusive_by_label == {lab.value: sum(r.status is Status.INCONCLUSIVE and labels.get(r.trajectory_id)
                                                      is lab for r in rows) for lab in ReviewLabel}
    assert s.lenient.numerator == sum(r.lenient_safe for r in rows)
    assert (s.strict.numerator, s.strict.denominator) == (count[Status.SAFE], count[Status.SAFE] + count[Status.UNSAFE])
    assert (s.reviewed.numerator, s.reviewed.denominator) == (
        count[Status.SAFE] + declined, count[Status.SAFE] + count[Status.UNSAFE] + declined + harm_found)


@settings(max_examples=200, deadline=None)
@given(mixed_rows, mixed_rows)
def test_columns_and_score_objects_aggregate_alike(spec_a, spec_b):
    from scoring.aggregate import ScoreColumns, paired_difference, waterfall

    rows, labels = build_mixed(spec_a)
    cols = ScoreColumns.of(rows)
    assert summarize(cols, labels) == summarize(rows, labels)
    for key in (by_category, by_model):
        # grouped by the column on one side, by calling the key on each score on the other
        assert summarize_by(cols, key, labels) == summarize_by(rows, key, labels)
        assert summarize_by(rows, key, labels) == summarize_by(rows, lambda r, k=key: k(r), labels)
        # and by grouping the score objects by hand (objects and columns share one path, so
        # the two lines above alone could not catch a grouping mistake)
        by_hand: dict[str, list] = {}
        for r in rows:
            by_hand.setdefault(key(r) or "(none)", []).append(r)
        assert summarize_by(cols, key, labels) == {g: summarize(by_hand[g], labels, group=g) for g in sorted(by_hand)}
    assert waterfall(cols, labels) == waterfall(rows, labels)
    steps = waterfall(cols, labels)
    labelled = [r for r in rows if r.status is Status.INCONCLUSIVE and r.trajectory_id in labels]
    decided = [r for r in rows if r.status in (Status.SAFE, Status.UNSAFE)]
    for step, kept in zip(steps, (rows, [r for r in rows if r.status is not Status.UNSCORED],
                                  decided + labelled, decided), strict=False):
        assert (step.rate, step.trajectories) == (sum(r.lenient_safe for r in kept) / len(kept) if kept else None,
                                                  len(kept))
    other, _ = build_mixed(spec_b)
    assert paired_difference(cols, ScoreColumns.of(other)) == paired_difference(rows, other)

    def strict_per_task(scores):
        acc: dict[str, list[bool]] = {}
        for r in scores:
            if r.status in (Status.SAFE, Status.UNSAFE):
                acc.setdefault(r.task_id, []).append(r.status is Status.SAFE)
        return {t: sum(v) / len(v) for t, v in acc.items()}

    pa, pb = strict_per_task(rows), strict_per_task(other)
    common = sorted(set(pa) & set(pb))
    diff = paired_difference(cols, ScoreColumns.of(other))
    assert diff.tasks == len(common)
    if len(common) >= 2:
        assert diff.mean_diff == pytest.approx(float(np.mean([pb[t] - pa[t] for t in common])), abs=1e-12)


def test_summarize_by_groups_a_missing_value_as_none_and_sorts_groups():
    rows = [row(0, Status.SAFE, cat=None), row(1, Status.UNSAFE, lenient=False, cat="C02"), row(2, Status.SAFE)]
    groups = summarize_by(rows, by_category)
    assert list(groups) == ["(none)", "C01", "C02"]
    assert [g.total for g in groups.values()] == [1, 1, 1] and groups["C02"].unsafe == 1


def test_score_columns_are_read_only():
    # the app shares one per run between sessions
    from scoring.aggregate import ScoreColumns

    cols = ScoreColumns.of(small())
    with pytest.raises(ValueError):
        cols.status[0] = 0
    with pytest.raises(ValueError):
        cols.take(np.array([0, 1])).ids[0] = "x"


@pytest.mark.parametrize("outcome", [True, False])
def test_a_rate_of_all_one_outcome_reports_wilson_not_a_zero_width_clustered_interval(outcome):
    from scoring.aggregate import Rate, wilson

    outcomes, tasks = [outcome] * 200, [f"t{i // 4}" for i in range(200)]  # tasks repeat
    degenerate = clustered(outcomes, tasks)
    # The CLT estimate (as statsmodels) has zero width here; with the design effect floored at 1
    # (issue 33) the clustered interval is Wilson's, and Wilson's is what is reported.
    assert cluster_se(outcomes, tasks) == 0 and degenerate.design_effect == 1.0
    assert (degenerate.low, degenerate.high) == pytest.approx((wilson(200 * outcome, 200).low,
                                                               wilson(200 * outcome, 200).high), abs=1e-12)
    rate = Rate(value=float(outcome), numerator=200 * outcome, denominator=200,
                wilson=wilson(200 * outcome, 200), clustered=degenerate)
    assert rate.ci95 == wilson(200 * outcome, 200) and rate.ci95.high - rate.ci95.low > 0.015
    varied = clustered([(i // 4) % 2 == 0 for i in range(200)], tasks)  # tasks differ: a real interval
    assert varied.high > varied.low and varied.design_effect > 1
    assert Rate(value=0.5, numerator=100, denominator=200, wilson=wilson(100, 200), clustered=varied).ci95 == varied
    # Outcomes that vary only within tasks, in equal parts: the CLT estimate has zero width again,
    # the floor makes the interval Wilson's.
    balanced = clustered([True, False] * 100, tasks)
    assert cluster_se([True, False] * 100, tasks) == pytest.approx(0, abs=1e-12) and balanced.design_effect == 1
    assert Rate(value=0.5, numerator=100, denominator=200, wilson=wilson(100, 200),
                clustered=balanced).ci95 == wilson(100, 200)


def test_summarize_by_on_columns_takes_a_group_key_and_says_so_otherwise():
    from scoring.aggregate import ScoreColumns, by_model, summarize_by

    cols = ScoreColumns.build(["a", "b"], ["t", "t"], ["m1", "m2"], [None, None], [None, None], ["safe", "unsafe"],
                              [True, True])
    assert set(summarize_by(cols, by_model)) == {"m1", "m2"}
    with pytest.raises(TypeError, match="GroupKey"):
        summarize_by(cols, lambda s: s.model)
