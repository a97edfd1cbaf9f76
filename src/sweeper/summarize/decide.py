"""From p-values to decisions: Holm's correction, a verdict, and how many seeds would decide.

A summary reports a family of comparisons; testing each at alpha would declare about
alpha × (family size) false differences. Holm's step-down correction
(`statsmodels.stats.multitest.multipletests(method="holm")`) controls the family-wise
error at alpha and is never less powerful than Bonferroni. A comparison is then

* `A better` / `B better` (named by its groups) when its Holm-adjusted p < alpha, by
  the sign of the difference;
* `undecided` otherwise, with `seeds_needed`: the seeds per group at which a two-sided
  t-test would have power 0.8 at the observed effect size (mean difference over the
  spread of the paired differences, or over the pooled standard deviation for Welch)
  and at alpha / m, Holm's strictest step for a family of m comparisons, so reaching
  it decides the comparison whatever the others do. Computed by statsmodels'
  `TTestPower` (paired) or `TTestIndPower` (unpaired, equal group sizes). It is an
  estimate from a noisy effect size, not a promise; None when the observed effect or
  spread is zero or undefined.

Almost Stochastic Order (Dror et al. 2019, the `deepsig` package) is an option
(`sweeper summarize --aso`): about 3 s per comparison, so it is off by default.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

from sweeper.summarize.records import Comparison, CountedTrial
from sweeper.summarize.stats import by_seed, sample_std

ALPHA = 0.05
POWER = 0.8
MAX_SEEDS_ESTIMATE = 10_000
"""Beyond this the estimate is reported as not estimable (the effect is ~0)."""
UNDECIDED = "undecided"


def decide(
    comparisons: Sequence[Comparison],
    trials: Sequence[CountedTrial],
    alpha: float = ALPHA,
) -> list[Comparison]:
    """The comparisons with Holm-adjusted p, decision and seeds needed filled in."""
    adjusted = holm([c.p_value for c in comparisons], alpha)
    family = max(1, sum(p is not None for p in adjusted))
    values = by_seed(trials)
    out = []
    for comparison, p_holm in zip(comparisons, adjusted, strict=True):
        decided = p_holm is not None and p_holm < alpha
        decision = UNDECIDED
        if decided:
            winner = comparison.group_a if comparison.diff > 0 else comparison.group_b
            decision = f"{winner} better"
        needed = None if decided else seeds_needed(comparison, values, alpha / family)
        out.append(
            replace(comparison, p_holm=p_holm, decision=decision, alpha=alpha, seeds_needed=needed)
        )
    return out


def holm(p_values: Sequence[float | None], alpha: float = ALPHA) -> list[float | None]:
    """Holm-adjusted p-values in the input's order; None stays None (not in the family)."""
    present = [(i, p) for i, p in enumerate(p_values) if p is not None]
    out: list[float | None] = [None] * len(p_values)
    if not present:
        return out
    from statsmodels.stats.multitest import multipletests

    _, corrected, _, _ = multipletests([p for _, p in present], alpha=alpha, method="holm")
    for (i, _), p in zip(present, corrected, strict=True):
        out[i] = float(p)
    return out


def seeds_needed(
    comparison: Comparison, values: dict[str, dict[int | None, float]], alpha: float
) -> int | None:
    """Seeds per group for power `POWER` at the observed effect (see module docstring)."""
    a, b = values.get(comparison.group_a, {}), values.get(comparison.group_b, {})
    if comparison.paired:
        shared = [s for s in a if s in b]
        spread = sample_std([a[s] - b[s] for s in shared])
    else:
        sa, sb = sample_std(list(a.values())), sample_std(list(b.values()))
        spread = None if sa is None or sb is None else math.sqrt((sa**2 + sb**2) / 2)
    if spread is None or spread == 0.0 or comparison.diff == 0.0:
        return None
    effect = abs(comparison.diff) / spread
    from statsmodels.stats.power import TTestIndPower, TTestPower

    analysis = TTestPower() if comparison.paired else TTestIndPower()
    try:
        n = analysis.solve_power(effect_size=effect, alpha=alpha, power=POWER)
    except (ValueError, RuntimeError):
        return None
    n = float(n[0] if hasattr(n, "__len__") else n)
    if not math.isfinite(n) or n > MAX_SEEDS_ESTIMATE:
        return None
    return max(2, math.ceil(n))


def with_aso(comparisons: Sequence[Comparison], trials: Sequence[CountedTrial]) -> list[Comparison]:
    """Almost Stochastic Order's epsilon_min for every comparison (deepsig, seeded)."""
    from deepsig import aso

    values = by_seed(trials)
    out = []
    for c in comparisons:
        a, b = list(values[c.group_a].values()), list(values[c.group_b].values())
        eps = aso(
            a, b, confidence_level=1 - ALPHA, num_comparisons=len(comparisons),
            seed=0, show_progress=False, num_jobs=1,
        )  # fmt: skip
        out.append(replace(c, aso=float(eps)))
    return out


def undecided_groups(comparisons: Sequence[Comparison]) -> set[str]:
    """The groups of every undecided comparison: where more seeds could help."""
    return {g for c in comparisons if c.decision == UNDECIDED for g in (c.group_a, c.group_b)}
