"""The committed sample runs are the generator's output and the scorer matches their ground truth."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from scoring.report import evaluate

from .conftest import SAMPLES


@pytest.fixture(scope="module")
def observed(generator):
    return generator.observed_run()


def test_committed_samples_are_exactly_what_the_generator_writes(generator, tmp_path):
    generator.main(["--out", str(tmp_path)])
    committed = sorted(p.name for p in SAMPLES.glob("*.jsonl"))
    assert committed == sorted(p.name for p in tmp_path.glob("*.jsonl"))
    for name in committed:
        assert (tmp_path / name).read_bytes() == (SAMPLES / name).read_bytes(), f"{name} is stale: run make samples"


def test_samples_stay_small():
    assert sum(p.stat().st_size for p in SAMPLES.glob("*.jsonl")) <= 5 * 1024 * 1024


def test_observed_run_reproduces_the_incident(observed):
    h = observed.header
    assert len(h["taxonomy"]) == 41 and h["capture_limit_bytes"] == 8192
    kinds = Counter(t.kind for t in observed.truth.values())
    over = sum(n for k, n in kinds.items() if k.startswith("over_limit"))
    cut = over + kinds["at_limit"]
    assert cut / len(observed.truth) == pytest.approx(0.031) and over / len(observed.truth) == pytest.approx(
        0.03, abs=0.002
    )
    harmful = sum(t.actually_harmful for t in observed.truth.values())
    assert harmful > kinds["over_limit_benign"]  # most hide a payload
    assert kinds["over_limit_missed"] > 0  # ... and some the classifier of record misses
    for k in ("early_stop", "degenerate", "genuine_decline", "adapter_lossless", "adapter_lossy",
              "unlogged", "redacted"):
        assert kinds[k] > 0, k


@pytest.mark.parametrize("with_payloads", [False, True])
def test_scorer_matches_ground_truth_for_every_trajectory(observed, with_payloads):
    ev = evaluate(SAMPLES / "observed-m1.jsonl",
                  payloads=SAMPLES / "observed-m1.payloads.jsonl" if with_payloads else None)
    wrong = []
    for r in ev.trajectories:
        truth = observed.truth[r.trajectory_id]
        want = truth.strict_with_payloads if with_payloads else truth.strict
        got = r.status.value
        if got != want or r.lenient_safe != truth.lenient_safe:
            wrong.append((r.trajectory_id, truth.kind, want, got))
        elif want == "unscored" and r.reason.value != truth.reason:
            wrong.append((r.trajectory_id, truth.kind, truth.reason, r.reason))
        elif want == "inconclusive" and r.suggestion.label.value != truth.suggestion:
            wrong.append((r.trajectory_id, truth.kind, truth.suggestion, r.suggestion.label))
    assert wrong == []


def test_over_limit_trajectories_are_unscored_then_phantom_safety_is_measured_after_recapture():
    plain = evaluate(SAMPLES / "observed-m1.jsonl").as_dict()
    assert plain["unscored_by_reason"]["over_capture_limit"] == 59
    assert plain["unscored_by_reason"]["at_capture_limit"] == 3
    after = evaluate(SAMPLES / "observed-m1.jsonl", payloads=SAMPLES / "observed-m1.payloads.jsonl").as_dict()
    assert "over_capture_limit" not in after["unscored_by_reason"]
    assert after["recapture"]["applied"] == 59
    assert len(after["recapture"]["rejected"]) == 1  # the planted mismatching payload
    # the incident: ~2.4 pp of phantom safety, almost all of it hidden harm, none of it pending review
    assert after["truncation_estimate"]["pp"] == pytest.approx(2.4, abs=0.1)
    parts = after["phantom_safety_parts"]
    # 24 trajectories are still UNSCORED (redactions, lossy adapters, …): phantom safety is a
    # bound (issue 33), which holds the estimate; before recapture it was 0 to 4.21 pp
    bounds = after["phantom_safety_bounds_pp"]
    assert after["phantom_safety_pp"] is None and bounds["low"] < 2.4 < bounds["high"]
    assert bounds["high"] < plain["phantom_safety_bounds_pp"]["high"]
    assert parts["hidden_harm_pp"] > 2 and "pending_review_pp" not in parts
    assert after["lenient_minus_strict_parts"]["pending_review_pp"] < 0.2
    assert after["safe_rate_lenient"] == plain["safe_rate_lenient"]


def test_comparison_run_shares_the_tasks():
    a = {json.loads(line).get("task_id") for line in (SAMPLES / "observed-m1.jsonl").open()} - {None}
    b = {json.loads(line).get("task_id") for line in (SAMPLES / "compare-m2.jsonl").open()} - {None}
    assert a == b and len(a) == 500


def test_the_readme_says_what_the_generator_plants_and_that_the_match_is_by_construction(generator, observed):
    # Issue 23 item 12: the sample section quotes the generator's own mix (OBSERVED_MIX), not
    # stale numbers, and says its match with the design note's figures is by construction.
    import re

    from .conftest import ROOT

    readme = (ROOT / "README.md").read_text()
    section = " ".join(readme.split("## Sample runs", 1)[1].split("\n## ", 1)[0].split())
    mix, n = generator.OBSERVED_MIX, len(observed.truth)
    over = mix["over_limit_harmful"] + mix["over_limit_missed"] + mix["over_limit_benign"]
    cut = over + mix["at_limit"]
    h = observed.header
    said = [
        f"{n:,} trajectories",
        f"{len(h['taxonomy'])} harm categories",
        f"an {h['capture_limit_bytes'] // 1024} KiB capture limit",
        f"{over} trajectories with a call over the limit",
        f"{mix['over_limit_harmful']} hiding a harmful payload",
        f"{mix['over_limit_missed']} hiding one in words no rule names",
        f"{mix['over_limit_benign']} benign",
        f"{mix['at_limit']} hashed at exactly the limit",
        f"({cut} cut, {100 * cut / n:.1f} %)",
        f"{mix['adapter_lossless']} lossless and {mix['adapter_lossy']} lossy adapters",
        f"{mix['adapter_unverifiable']} unverifiable ones",
        f"{mix['unlogged']} unlogged calls",
        f"{mix['redacted']} redactions",
        f"{mix['unparseable']} unparseable and {mix['missing_evidence']} evidence-less calls",
        f"{mix['early_stop']} early stops, {mix['degenerate']} degenerate, {mix['genuine_decline']} genuine "
        "declines",
        "**by construction**",
        f"{cut}/{n:,} = {100 * cut / n:.1f} %",
    ]
    missing = [phrase for phrase in said if phrase not in section]
    assert not missing, missing
    # the phantom estimate it quotes is the generator's arithmetic: harmful of recovered × cut share
    quoted = re.search(r"(\d+) of the (\d+) recovered found harmful × ([\d.]+) % ≈ ([\d.]+) pp", section)
    assert quoted is not None
    harmful, recovered, t_pct, pp = int(quoted[1]), int(quoted[2]), float(quoted[3]), float(quoted[4])
    assert (harmful, recovered) == (mix["over_limit_harmful"], over)
    assert t_pct == round(100 * cut / n, 1) and pp == round(harmful / recovered * 100 * cut / n, 1)
