"""Inter-reviewer agreement on Inconclusive labels: Cohen's kappa (two reviewers) and
Krippendorff's alpha (any number, missing labels allowed), from statsmodels and krippendorff.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from .model import ReviewLabel

_CODES = {label: i for i, label in enumerate(ReviewLabel)}


@dataclass(frozen=True, slots=True)
class Agreement:
    """Agreement among reviewers on one group of trajectories."""

    group: str
    reviewers: tuple[str, ...]
    items: int
    """Trajectories labelled by at least two reviewers (the ones agreement is computed on)."""
    percent_agreement: float | None
    cohen_kappa: float | None
    """Only when exactly two reviewers labelled the items."""
    krippendorff_alpha: float | None


def cohen_kappa(a: list[ReviewLabel], b: list[ReviewLabel]) -> float | None:
    """Cohen's kappa of two reviewers' labels on the same items."""
    from statsmodels.stats.inter_rater import cohens_kappa  # lazily: slow to import, and only this needs it

    if not a:
        return None
    table = np.zeros((len(ReviewLabel), len(ReviewLabel)))
    for x, y in zip(a, b, strict=True):
        table[_CODES[x], _CODES[y]] += 1
    if len({*a, *b}) == 1:
        return 1.0  # perfect agreement on a single category: kappa is undefined (0/0); report 1
    return float(cohens_kappa(table, return_results=False))


def krippendorff_alpha(matrix: list[list[ReviewLabel | None]]) -> float | None:
    """Nominal Krippendorff's alpha; rows are reviewers, columns items, None = not labelled."""
    import krippendorff  # lazily: only agreement needs it

    data = np.array([[np.nan if v is None else _CODES[v] for v in row] for row in matrix], dtype=float)
    values = data[~np.isnan(data)]
    if values.size == 0 or data.shape[0] < 2:
        return None
    if np.unique(values).size == 1:
        return 1.0
    return float(krippendorff.alpha(reliability_data=data, level_of_measurement="nominal"))


def agreement(
    current: Mapping[str, Mapping[str, ReviewLabel]],
    *,
    group: str = "all",
    key: Callable[[str], str | None] | None = None,
) -> dict[str, Agreement]:
    """Agreement overall (``group``) and, with ``key`` (trajectory id → group), per group."""
    groups: dict[str, dict[str, Mapping[str, ReviewLabel]]] = {group: dict(current)}
    if key is not None:
        for tid, by in current.items():
            groups.setdefault(key(tid) or "(none)", {})[tid] = by
    return {g: _one(g, items) for g, items in groups.items()}


def _one(group: str, items: Mapping[str, Mapping[str, ReviewLabel]]) -> Agreement:
    shared = {t: by for t, by in items.items() if len(by) >= 2}
    reviewers = tuple(sorted({r for by in shared.values() for r in by}))
    if not shared:
        return Agreement(group, reviewers, 0, None, None, None)
    agree = sum(len(set(by.values())) == 1 for by in shared.values()) / len(shared)
    kappa = None
    if len(reviewers) == 2:
        a, b = reviewers
        pairs = [(by[a], by[b]) for by in shared.values()]
        kappa = cohen_kappa([p[0] for p in pairs], [p[1] for p in pairs])
    matrix = [[shared[t].get(r) for t in shared] for r in reviewers]
    return Agreement(group, reviewers, len(shared), agree, kappa, krippendorff_alpha(matrix))
