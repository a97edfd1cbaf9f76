"""Expected best validation score against the number of search trials (Dodge et al. 2019).

A search's best score depends on how many configurations were tried: with more trials
the maximum grows even when nothing is learnt. "Show Your Work" (Dodge et al., 2019)
reports the expected best validation score over n trials, for n = 1..N, so two setups
are compared at equal budget. Its estimator samples the N observed trials *with*
replacement, which is biased for n close to N (Tang et al. 2020, "Showing Your Work
Doesn't Always Work"); this module uses the unbiased estimator without replacement:
with the N scores sorted ascending, v_(1) <= ... <= v_(N),

    E[max of n] = sum_{i=n}^{N} C(i - 1, n - 1) / C(N, n) * v_(i),

the mean of the maximum over all C(N, n) subsets of n trials (tests check it against
that enumeration). For a `min` search the same holds of the minimum.

Only finished search trials enter (early-stopped and failed ones have no comparable
score), so the curve's N is the group's finished count. Under ASHA the finished trials
are the ones it let run on, so the curve reads "expected best of n trials that survive
the scheduler", not of n configurations sampled blind.

`sweeper.summarize.tables.budget_table` renders `budget_rows` (this module stays below
`tables`, which imports it: a `budget_table` here would make the two import each
other); `sweeper.summarize.figures.search_budget` draws the curves.
"""

from __future__ import annotations

from collections.abc import Sequence
from math import comb

from sweeper.summarize.records import Summary


def expected_best(values: Sequence[float], n: int, mode: str = "max") -> float:
    """Mean best of n scores drawn without replacement from `values` (1 <= n <= N)."""
    total = len(values)
    if not 1 <= n <= total:
        raise ValueError(f"n must lie in 1..{total}, got {n}")
    ordered = sorted(values, reverse=(mode == "min"))  # the best last
    weight = comb(total, n)
    return sum(comb(i - 1, n - 1) * ordered[i - 1] for i in range(n, total + 1)) / weight


def expected_best_curve(
    values: Sequence[float], mode: str = "max"
) -> tuple[tuple[int, float], ...]:
    """(n, expected best of n) for n = 1..N; empty without values."""
    return tuple((n, expected_best(values, n, mode)) for n in range(1, len(values) + 1))


def budget_rows(summary: Summary) -> list[dict[str, object]]:
    """One row per group and budget n, for the budget table and its CSV/JSON."""
    return [
        {"group": g.group, "trials": n, "expected_best": value, "metric": g.metric}
        for g in summary.search
        for n, value in g.expected_best
    ]
