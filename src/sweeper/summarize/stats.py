"""The statistics of Table 2 and the tests the comparisons use.

Spelled out rather than delegated to one library call, because the lab's own Table 2
went wrong exactly here (report 000 printed 79.93 ± 0.135 for values whose mean is 79.5
and whose sample standard deviation is 0.87): every number says what it is.

* std: sample standard deviation, ddof = 1 (seeds are a sample of possible seeds).
* 95% CI of a group mean: mean ± t(0.975, n - 1) · std / √n.
* Two groups, unpaired: difference of means with Welch's 95% CI (unequal variances,
  Welch-Satterthwaite degrees of freedom) and the two-sided Welch t-test p-value; this
  is what `scipy.stats.ttest_ind(a, b, equal_var=False)` computes (tests check it).
* Two groups, paired on seed: the mean of the seed-matched differences, its t CI with
  n_pairs - 1 degrees of freedom and the paired t-test (`scipy.stats.ttest_rel`); the
  Wilcoxon signed-rank test is `scipy.stats.wilcoxon`'s on the same differences.
* Bootstrap CIs: BCa, 9,999 resamples from a fixed generator, so a summary printed
  twice prints the same interval; `scipy.stats.bootstrap`'s interval, computed without
  importing scipy.stats (`sweeper.summarize.resampling` says why). Only from
  `BOOTSTRAP_MIN_N` values: below that a bootstrap of a few values cannot know the
  tails and its 95% interval covers the mean far less often than 95%
  (`tools/bootstrap_coverage.py`; the table is in docs/architecture.md).
* No spread at all (every seed gives the same difference): t is infinite, and the
  p-value is the smallest an exact sign-flip (paired) or permutation (unpaired) test
  could give, 2 / 2**n for n pairs: two seeds that agree decide nothing.
* Wilcoxon's p only where its exact test can fall below alpha (6 non-zero differences
  at 0.05).
* Intervals are clipped to the metric's range (`bounds`): a mean accuracy lies in
  [0, 100], a difference of two in [-100, 100].
* With n = 1 a spread is undefined: those fields are None (shown "n/a"), never NaN.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from sweeper.summarize.records import CountedTrial, GroupStats, NotCounted

CONFIDENCE = 0.95
FEW_RUNS = 3
"""Groups with fewer runs than this are flagged: their CI is too wide to lean on."""

BOOTSTRAP_RESAMPLES = 9999
BOOTSTRAP_SEED = 0
BOOTSTRAP_MIN_N = 21
"""Fewest values a bootstrap interval is shown for: from this n on (checked to 25) BCa's
95% interval covered the mean in at least 92% of 2,000 samples of normal and of skewed
values (`tools/bootstrap_coverage.py`); at n = 3 it covered 71%."""
Bounds = tuple[float, float]


@dataclass(frozen=True)
class Described:
    n: int
    mean: float
    std: float | None
    ci_low: float | None
    ci_high: float | None
    min: float
    max: float


@dataclass(frozen=True)
class TTest:
    """A difference (a - b, or the mean paired difference), its t CI and two-sided p."""

    diff: float
    ci_low: float | None
    ci_high: float | None
    df: float | None
    t: float | None
    p_value: float | None


def mean(values: Sequence[float]) -> float:
    return math.fsum(values) / len(values)


def sample_std(values: Sequence[float]) -> float | None:
    """Standard deviation with ddof = 1; None for fewer than two values."""
    if len(values) < 2:
        return None
    m = mean(values)
    return math.sqrt(math.fsum((v - m) ** 2 for v in values) / (len(values) - 1))


def t_quantile(p: float, df: float) -> float:
    """Student's t quantile. scipy.special's `stdtrit` is the same function
    `scipy.stats.t.ppf` evaluates, without importing scipy.stats, which is slow."""
    from scipy.special import stdtrit

    return float(stdtrit(df, p))


def t_two_sided_p(t: float, df: float) -> float:
    """P(|T| >= |t|) for Student's t with df degrees of freedom (= 2 · t.sf(|t|, df))."""
    from scipy.special import stdtr

    return float(2 * stdtr(df, -abs(t)))


def describe(values: Sequence[float], confidence: float = CONFIDENCE) -> Described:
    """n, mean, sample std, t-based CI of the mean, min and max of `values` (n >= 1)."""
    if not values:
        raise ValueError("describe() needs at least one value")
    n, m, s = len(values), mean(values), sample_std(values)
    low = high = None
    if s is not None:
        half = t_quantile(0.5 + confidence / 2, n - 1) * s / math.sqrt(n)
        low, high = m - half, m + half
    return Described(n, m, s, low, high, min(values), max(values))


def welch(a: Sequence[float], b: Sequence[float], confidence: float = CONFIDENCE) -> TTest:
    """Difference of means a - b, its Welch CI, and Welch's two-sided t-test.

    Needs n >= 2 on both sides for a CI and p-value (else they are None). When both
    groups have zero variance the CI collapses to the difference; see `_no_spread`.
    """
    diff = mean(a) - mean(b)
    sa, sb = sample_std(a), sample_std(b)
    if sa is None or sb is None:
        return TTest(diff, None, None, None, None, None)
    va, vb = sa**2 / len(a), sb**2 / len(b)
    se = math.sqrt(va + vb)
    if se == 0.0:
        return _no_spread(diff, permutation_min_p(len(a), len(b)))
    df = (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1))
    t = diff / se
    p = t_two_sided_p(t, df)
    half = t_quantile(0.5 + confidence / 2, df) * se
    return TTest(diff, diff - half, diff + half, df, t, p)


def paired_t(differences: Sequence[float], confidence: float = CONFIDENCE) -> TTest:
    """The paired t-test on seed-matched differences a_i - b_i (n >= 2 for CI and p;
    all differences equal: see `_no_spread`)."""
    diff = mean(differences)
    sd = sample_std(differences)
    if sd is None:
        return TTest(diff, None, None, None, None, None)
    n = len(differences)
    se = sd / math.sqrt(n)
    if se == 0.0:
        return _no_spread(diff, sign_flip_min_p(n))
    t = diff / se
    half = t_quantile(0.5 + confidence / 2, n - 1) * se
    return TTest(diff, diff - half, diff + half, float(n - 1), t, t_two_sided_p(t, n - 1))


def _no_spread(diff: float, min_p: float) -> TTest:
    """No spread at all: the CI is the point and t is infinite (kept as None: JSON has
    no infinity). scipy's t-tests give p = 0 in the limit, which would decide from two
    seeds; the p reported is instead the smallest that an exact test free of the
    normal assumption can reach on this many values (`min_p`). No difference at all
    leaves t and p undefined."""
    return TTest(diff, diff, diff, None, None, min_p if diff != 0.0 else None)


def sign_flip_min_p(n: int) -> float:
    """Two-sided p of n paired differences that all share one sign, by the exact
    sign-flip test: 2 of the 2**n sign patterns are as extreme (2**(1-n), which
    underflows to 0.0 past n = 1075 where 2.0**n would overflow)."""
    return min(1.0, 2.0 ** (1 - n))


def sign_flip_min_n(level: float) -> int:
    """The fewest paired differences on which the exact sign-flip test can give
    p < level (2 / 2**n < level): 6 at 0.05, 8 at 0.0125."""
    n = 2
    while sign_flip_min_p(n) >= level:
        n += 1
    return n


def permutation_min_p(n_a: int, n_b: int) -> float:
    """Two-sided p of two groups without overlap, by the exact permutation test of the
    difference of means: of the C(n_a + n_b, n_a) splits, this one (and, for equal
    sizes, its mirror) is as extreme. Integer division: correctly rounded however large
    the count (a float would overflow past about 1,000 runs a group)."""
    return min(1.0, (2 if n_a == n_b else 1) / math.comb(n_a + n_b, n_a))


def wilcoxon_reachable(n: int, alpha: float) -> bool:
    """Whether the exact signed-rank test on n non-zero differences can give p < alpha
    (its smallest two-sided p is 2 / 2**n; zero differences are dropped first)."""
    return sign_flip_min_p(n) < alpha


def clip(low: float | None, high: float | None, bounds: Bounds | None) -> tuple:
    """An interval cut to the metric's range (None bounds stay None)."""
    if bounds is None:
        return low, high
    return (
        None if low is None else min(max(low, bounds[0]), bounds[1]),
        None if high is None else max(min(high, bounds[1]), bounds[0]),
    )


def wilcoxon_p(differences: Sequence[float], alpha: float | None = None) -> float | None:
    """Two-sided Wilcoxon signed-rank p (`scipy.stats.wilcoxon`'s defaults, computed by
    `sweeper.summarize.resampling`); None with fewer than two differences, when every
    difference is 0, or (given `alpha`) when the exact test cannot reach it on the
    non-zero differences (Wilcoxon's rule drops zeros: [0, 0, 1, 2, 3, 4] is tested on
    4, whose smallest p is 0.125)."""
    if len(differences) < 2 or not any(differences):
        return None
    nonzero = sum(1 for d in differences if d != 0)
    if alpha is not None and not wilcoxon_reachable(nonzero, alpha):
        return None
    from sweeper.summarize.resampling import signed_rank_p

    return signed_rank_p(differences)


def bootstrap_ci(
    samples: Sequence[Sequence[float]], confidence: float = CONFIDENCE, min_n: int = 2
) -> tuple[float | None, float | None]:
    """BCa bootstrap CI of the mean of one sample (a group, or seed-matched differences,
    which resamples pairs together), or of mean(a) - mean(b) for two independent ones.
    None with fewer than `min_n` values; samples without spread give the point interval."""
    import numpy as np

    from sweeper.summarize.resampling import bca_interval

    if any(len(s) < max(2, min_n) for s in samples):
        return None, None
    if all(max(s) == min(s) for s in samples):
        point = mean(samples[0]) - (mean(samples[1]) if len(samples) > 1 else 0.0)
        return point, point
    arrays = [np.asarray(s, dtype=float) for s in samples]
    with np.errstate(all="ignore"):  # a degenerate BCa is reported as None, not a warning
        low, high = bca_interval(arrays, BOOTSTRAP_RESAMPLES, confidence, BOOTSTRAP_SEED)
    return (low, high) if math.isfinite(low) and math.isfinite(high) else (None, None)


def group_stats(
    trials: Sequence[CountedTrial],
    not_counted: Sequence[NotCounted] = (),
    bounds: Bounds | None = None,
) -> list[GroupStats]:
    """Table 2: one row per group of counted trials, in table order, with the group's
    runs that were not counted tallied by outcome (nothing silently dropped).
    `bounds`: the metric's range, which clips the intervals."""
    members: dict[str, list[CountedTrial]] = {}
    for trial in trials:
        members.setdefault(trial.group, []).append(trial)
    rows = []
    for group, runs in members.items():
        values = [r.test_value for r in runs]
        d = describe(values)
        first = runs[0]
        boot_low, boot_high = clip(*bootstrap_ci([values], min_n=BOOTSTRAP_MIN_N), bounds)
        ci_low, ci_high = clip(d.ci_low, d.ci_high, bounds)
        rows.append(
            GroupStats(
                group=group,
                framework=first.framework,
                init=first.init,
                method=first.method,
                variant=first.variant,
                n=d.n,
                seeds=tuple(r.seed for r in runs),
                mean=d.mean,
                std=d.std,
                ci_low=ci_low,
                ci_high=ci_high,
                min=d.min,
                max=d.max,
                mean_best_step=mean([float(r.best_step) for r in runs]),
                trainable_params=tuple(
                    sorted({r.trainable_params for r in runs if r.trainable_params is not None})
                ),
                note=_group_note(d.n, sum(r.diverged for r in runs)),
                boot_low=boot_low,
                boot_high=boot_high,
                outcomes=outcome_counts(not_counted, group),
                other_means=other_means(runs),
            )
        )
    rows.sort(key=lambda g: (g.framework, g.init, g.method, g.variant, g.group))
    return rows


def other_means(runs: Sequence[CountedTrial]) -> dict[str, float]:
    """Mean of each other reported test metric over the runs that logged it."""
    names = dict.fromkeys(name for run in runs for name in run.other_tests)
    return {
        name: mean([r.other_tests[name] for r in runs if name in r.other_tests]) for name in names
    }


def by_seed(trials: Sequence[CountedTrial]) -> dict[str, dict[int | None, float]]:
    """group -> seed -> test accuracy: what pairing on seed matches."""
    values: dict[str, dict[int | None, float]] = {}
    for trial in trials:
        values.setdefault(trial.group, {})[trial.seed] = trial.test_value
    return values


TALLIED = ("failed", "diverged", "early_stopped", "unfinished")
"""Outcomes of a group's uncounted runs that Table 2 tallies (search-stage runs,
duplicates and runs without tags are listed under "Not counted" only)."""


def outcome_counts(not_counted: Sequence[NotCounted], group: str) -> dict[str, int]:
    counts = {kind: 0 for kind in TALLIED}
    for item in not_counted:
        if item.group == group and item.outcome in counts:
            counts[item.outcome] += 1
    return {kind: n for kind, n in counts.items() if n}


def _group_note(n: int, diverged: int) -> str:
    notes = []
    if n == 1:
        notes.append("n = 1: std and CI undefined")
    elif n < FEW_RUNS:
        notes.append(f"fewer than {FEW_RUNS} runs")
    if diverged:
        notes.append(f"{diverged} counted run(s) ended with a non-finite train loss")
    return "; ".join(notes)
