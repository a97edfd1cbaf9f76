"""From tests to decisions when the seeds were fixed in advance (a grid, no loop).

A summary reports a family of comparisons; testing each at alpha would declare about
alpha × (family size) false differences. Two rules, both at family-wise level alpha:

* Without an equivalence margin (rule `Holm`): Holm's step-down correction (as
  `statsmodels.stats.multitest.multipletests(method="holm")` computes it), never less
  powerful than Bonferroni. `A better` / `B better` (named by its groups) when the
  Holm-adjusted p < alpha, by the sign of the difference; else `undecided`. The
  interval beside it is the comparison's t interval at the level Holm tested it at
  (`holm_levels`: alpha / (m - j) at step j), so it excludes 0 for every `better`.
* With a margin D (rule `interval`): each comparison's t interval at level
  1 - alpha / m (Bonferroni over the m comparisons) decides: `better` when it excludes
  0, `equivalent within ±D` when it lies inside (-D, D) (a two one-sided tests
  procedure at alpha / 2m, as `statsmodels.stats.weightstats.ttost_paired` computes
  it). A false decision of either kind needs an interval that misses the truth, so
  their family-wise rate is at most alpha; Holm's step-down would pass on the alpha
  of a comparison decided "equivalent" whose "no difference" null is true, which its
  proof does not allow.

At a tie (every seed difference equal: no spread, so t is infinite and its interval a
point) either rule decides a paired comparison only where the exact sign-flip test on
the same differences at the same level decides it too (`exact_verdict`): a t-based rule
would read lattice-valued accuracies that happen to agree (three seeds at +1 point, or
collapsed trials at one value) as a precise result. With any spread the t-based rule
decides, and the exact sign-flip p is shown beside it (`Comparison.p_sign_flip`; below
6 pairs it cannot go under 0.05, which is what a t-test's normal assumption buys at a
handful of seeds; docs/statistics.md). Either way the decision's own interval
gives `equivalent_within`: the smallest margin the data already support. An
`undecided` comparison has `seeds_needed`: the seeds per group at which a two-sided
  t-test would have power 0.8 at the observed effect size (mean difference over the
  spread of the paired differences, or over the pooled standard deviation for Welch)
  and at alpha / m, Holm's strictest step for a family of m comparisons, so reaching
  it decides the comparison whatever the others do. It is what statsmodels'
  `TTestPower` (paired) or `TTestIndPower` (unpaired, equal group sizes) solves for,
  from the noncentral t distribution in scipy.special, because importing statsmodels
  would take longer than all the rest of a summary (tests hold both to statsmodels'
  answers). It is an estimate from a noisy effect size, not a promise; None when the
  observed effect or spread is zero or undefined (a tie: the exact test's floor,
  `stats.sign_flip_min_n`, is then the seeds that could decide).

With `--population` (`decide(population=True)`) either rule reads, for each comparison
with test predictions, the seeds x examples t test and interval instead of the seeds'
(`sweeper.summarize.resolution`: other seeds and another test set of the same size),
and its seeds needed is that interval's; the rest of the rule is unchanged.

Almost Stochastic Order (Dror et al. 2019, the `deepsig` package) is an option
(`sweeper summarize --aso`): deepsig bootstraps every comparison many times over,
which is slow next to the rest of a summary, so it is off by default.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

from sweeper.selection import Mode
from sweeper.summarize.records import Comparison, CountedTrial
from sweeper.summarize.resolution import (
    decidable,
    population_interval,
    population_p,
    population_seeds,
)
from sweeper.summarize.stats import Bounds, by_seed, clip, paired_t, sample_std, welch

ALPHA = 0.05
POWER = 0.8
MAX_SEEDS_ESTIMATE = 10_000
"""Beyond this the estimate is reported as not estimable (the effect is ~0)."""
UNDECIDED = "undecided"


def decide(
    comparisons: Sequence[Comparison],
    trials: Sequence[CountedTrial],
    alpha: float = ALPHA,
    mode: Mode = "max",
    margin: float | None = None,
    bounds: Bounds | None = None,
    population: bool = False,
) -> list[Comparison]:
    """The comparisons with Holm-adjusted p, the decision interval, decision and seeds
    needed filled in; `mode` says which way the compared test metric improves
    (perplexity: min); `margin` switches to the interval rule; `bounds` is the range of
    a difference of the metric, which clips the interval; `population` decides each
    comparison that has one by its seeds x examples test and interval instead of the
    seeds' (`sweeper.summarize.resolution`), by the same rule."""
    chosen = [population and decidable(c) for c in comparisons]
    p_values = [_deciding_p(c, use) for c, use in zip(comparisons, chosen, strict=True)]
    adjusted = holm(p_values)
    family = max(1, sum(p is not None for p in adjusted))
    if margin is None:
        levels = holm_levels(p_values, alpha)
    else:
        levels = [alpha / max(1, len(comparisons))] * len(comparisons)
    values = by_seed(trials)
    out = []
    for comparison, p_holm, level, use in zip(comparisons, adjusted, levels, chosen, strict=True):
        low, high = clip(*_deciding_interval(comparison, values, level, use), bounds)
        differences = paired_differences(comparison, values)
        if margin is None:
            rejected = p_holm is not None and p_holm < alpha
            verdict = ("A" if comparison.diff > 0 else "B") if rejected else None
        else:
            verdict = None if low is None or high is None else interval_verdict(low, high, margin)
        verdict = exact_verdict(verdict, differences, level, margin)
        decision = _read_verdict(comparison, verdict, margin, mode)
        if use:
            comparison = _population_needed(comparison, verdict, alpha / family)
            needed = comparison.seeds_needed
        else:
            needed = None if verdict else seeds_needed(comparison, values, alpha / family)
        out.append(
            replace(
                comparison,
                p_holm=p_holm,
                decision=decision,
                alpha=alpha,
                seeds_needed=needed,
                rule="Holm" if margin is None else "interval",
                decision_low=low,
                decision_high=high,
                decision_level=1.0 - level,
                margin=margin,
                equivalent_within=supported_margin(low, high),
            )
        )
    return out


def _deciding_p(comparison: Comparison, population: bool) -> float | None:
    """The p the rule reads: the seeds' t-test's, or under `--population` the seeds x
    examples one."""
    return population_p(comparison) if population else comparison.p_value


def _deciding_interval(
    comparison: Comparison,
    values: dict[str, dict[int | None, float]],
    level: float,
    population: bool,
) -> tuple[float | None, float | None]:
    if population:
        return population_interval(comparison, level)
    return decision_interval(comparison, values, level)


def _population_needed(comparison: Comparison, verdict: str | None, level: float) -> Comparison:
    """The comparison marked as decided by its seeds x examples interval, with that
    rule's seeds needed (and why none) when undecided."""
    assert comparison.test_set is not None
    needed, why = (None, None) if verdict else population_seeds(comparison, level, POWER)
    test_set = replace(comparison.test_set, decides=True, withheld=why)
    return replace(comparison, seeds_needed=needed, test_set=test_set)


def holm_levels(p_values: Sequence[float | None], alpha: float) -> list[float]:
    """The level at which Holm's step-down tests each comparison: rejected at step j of
    m (0-based, smallest p first), alpha / (m - j); not rejected, the level of the step
    where the procedure stopped. A comparison without p gets alpha / m. The t interval
    at 1 - level then excludes 0 exactly for the rejected comparisons."""
    present = sorted(
        ((i, p) for i, p in enumerate(p_values) if p is not None), key=lambda item: item[1]
    )
    m = len(present)
    levels = [alpha / max(1, m)] * len(p_values)
    stopped: float | None = None
    for step, (i, p) in enumerate(present):
        if stopped is None and (m - step) * p >= alpha:  # holm()'s own comparison
            stopped = alpha / (m - step)
        levels[i] = alpha / (m - step) if stopped is None else stopped
    return levels


def paired_differences(
    comparison: Comparison, values: dict[str, dict[int | None, float]]
) -> list[float]:
    """The seed-matched differences A - B of a paired comparison (the seeds `compare`
    pairs on: in both groups, not None); [] for Welch."""
    if not comparison.paired:
        return []
    a, b = values.get(comparison.group_a, {}), values.get(comparison.group_b, {})
    return [a[s] - b[s] for s in sorted(a.keys() & b.keys() - {None})]


def exact_verdict(
    verdict: str | None, differences: Sequence[float], level: float, margin: float | None
) -> str | None:
    """`verdict` (`A`, `B`, `equivalent` or None), kept at a tie (every difference
    equal) only where the exact sign-flip test on the same seed-matched differences at
    the same level could take it too, else None: `A` / `B` need its two-sided p below
    `level`, `equivalent` its two one-sided p (`sign_flip_tost_p`) below level / 2, the
    level of each one-sided test behind a 1 - level interval. Differences with any
    spread pass unchanged: there the t-based rule decides. It only removes decisions,
    so a rule's error bound stays as it was. Unpaired comparisons (no differences) pass
    unchanged: their guard against no spread is `stats.permutation_min_p`."""
    if verdict is None or not differences or max(differences) != min(differences):
        return verdict
    from sweeper.summarize.exact import sign_flip_p, sign_flip_tost_p

    if verdict == "equivalent":
        assert margin is not None
        p = sign_flip_tost_p(differences, margin)
        return verdict if p is not None and p < level / 2 else None
    p = sign_flip_p(differences)
    return verdict if p is not None and p < level else None


def supported_margin(low: float | None, high: float | None) -> float | None:
    """The smallest margin D with [low, high] inside [-D, D]; None for an unbounded
    interval or one that excludes 0 (decided different: no margin makes it equivalent)."""
    if low is None or high is None or low > 0.0 or high < 0.0:
        return None
    return max(-low, high)


def _winner(comparison: Comparison, a_higher: bool, mode: Mode) -> str:
    return f"{comparison.group_a if a_higher == (mode == 'max') else comparison.group_b} better"


def interval_verdict(low: float, high: float, margin: float | None) -> str | None:
    """What an interval supports: `A` (it lies above 0), `B` (below 0), `equivalent`
    (inside (-margin, margin)), or None (it holds 0 and reaches the margin, or is empty)."""
    if low > high:
        return None
    if low > 0.0:
        return "A"
    if high < 0.0:
        return "B"
    if margin is not None and -margin < low and high < margin:
        return "equivalent"
    return None


def read_interval(
    comparison: Comparison, low: float | None, high: float | None, margin: float | None, mode: Mode
) -> str:
    """The decision an interval supports: better when it excludes 0, equivalent when it
    lies inside (-margin, margin), else undecided (also for an unbounded interval)."""
    verdict = None if low is None or high is None else interval_verdict(low, high, margin)
    return _read_verdict(comparison, verdict, margin, mode)


def _read_verdict(
    comparison: Comparison, verdict: str | None, margin: float | None, mode: Mode
) -> str:
    if verdict == "equivalent":
        return f"equivalent within ±{margin:g}"
    return UNDECIDED if verdict is None else _winner(comparison, verdict == "A", mode)


def decision_interval(
    comparison: Comparison, values: dict[str, dict[int | None, float]], level: float
) -> tuple[float | None, float | None]:
    """The comparison's own t interval (paired or Welch) at confidence 1 - level. A
    difference without spread gives its point only where the exact sign-flip or
    permutation test could reach `level` (else None: the data cannot bound it)."""
    a, b = values.get(comparison.group_a, {}), values.get(comparison.group_b, {})
    if comparison.paired:
        test = paired_t(paired_differences(comparison, values), 1.0 - level)
    else:
        test = welch(list(a.values()), list(b.values()), 1.0 - level)
    if test.t is None and (test.p_value is None or test.p_value >= level):
        return None, None
    return test.ci_low, test.ci_high


def holm(p_values: Sequence[float | None]) -> list[float | None]:
    """Holm-adjusted p-values in the input's order; None stays None (not in the family)."""
    present = [(i, p) for i, p in enumerate(p_values) if p is not None]
    out: list[float | None] = [None] * len(p_values)
    running = 0.0
    for step, (i, p) in enumerate(sorted(present, key=lambda item: item[1])):
        running = max(running, min(1.0, (len(present) - step) * p))  # step-down, monotone
        out[i] = running
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
    n = power_seeds(abs(comparison.diff) / spread, alpha, comparison.paired)
    return None if n is None else max(2, math.ceil(n))


def power_seeds(effect: float, alpha: float, paired: bool) -> float | None:
    """The (fractional) seeds per group at which a two-sided t-test at `alpha` has
    power `POWER` for a standardised `effect`; None beyond `MAX_SEEDS_ESTIMATE`."""
    if power(2.0, effect, alpha, paired) >= POWER:
        return 2.0
    low, high = 2.0, float(MAX_SEEDS_ESTIMATE)
    if power(high, effect, alpha, paired) < POWER:
        return None
    while high - low > 1e-9 * high:  # power grows with n: bisect on it
        middle = (low + high) / 2
        low, high = (
            (middle, high) if power(middle, effect, alpha, paired) < POWER else (low, middle)
        )
    return high


def power(n: float, effect: float, alpha: float, paired: bool) -> float:
    """Power of the two-sided one-sample (paired) t-test on n differences, or of the
    pooled two-sample t-test on two groups of n, at a standardised effect."""
    from scipy.special import nctdtr, ndtr, stdtrit

    df, n_effective = (n - 1, n) if paired else (2 * n - 2, n / 2)
    shift = effect * math.sqrt(n_effective)
    above = 1 - nctdtr(df, shift, stdtrit(df, 1 - alpha / 2))
    below = nctdtr(df, shift, stdtrit(df, alpha / 2))
    if math.isnan(below) and ndtr(-shift) < 1e-12:
        below = 0.0  # nctdtr fails now and then on a tail this far out; it is below Φ(-shift)
    return float(above + below)


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
