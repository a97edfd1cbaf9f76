"""What the test set can resolve: each comparison A - B seen from its test examples.

Every trial of a sweep is scored on one fixed test set, so a comparison's seed-level
interval (the paired t over seeds) is about *this* test set: as seeds are added it
shrinks onto the difference the two setups have on these N examples, not onto the
difference they have on the distribution the examples were drawn from. What separates
the two is the test set's own sampling, which no number of seeds reduces (Bouthillier
et al. 2021). From the trials' per-example test predictions at their best checkpoints
(`sweeper.trainers.predictions`) a comparison gets a `TestSetStats`:

Write e[s, i] for seed pair s on example i: 100 if only A's trial got it right, -100 if
only B's did, else 0 (unpaired: each group's own 0/100 matrix, below). The difference
D is the mean of e; in the crossed model with seeds and examples both random,
e[s, i] = Δ + α_s + β_i + γ_si, so Var(D) = σ_α²/n + σ_β²/N + σ_γ²/(nN) on n pairs
and N examples. The seed-level t interval estimates σ_α²/n + σ_γ²/(nN) only: the
test-set term σ_β²/N is the same for every seed, so it is invisible to them.

* **Test set (examples).** Per example, d_i: the mean over A's trials of being right
  minus B's (each group's trials pooled); the BCa bootstrap of mean(d) over the
  examples, seeds held (`scipy.stats.bootstrap`'s interval of the same statistic to
  Monte-Carlo error, tests/unit/test_resolution_stats.py). A resample is drawn as the
  counts of each distinct value of d (a multinomial of N over their shares), which is
  the resampling distribution of N drawn indices at a cost per resample of the few
  distinct values instead of N; the acceleration is the mean's closed form,
  Σu³ / 6(Σu²)^1.5 with u = d - mean(d); all of it on d's integer numerators, so a
  resample whose mean equals the observed one compares equal (the bias correction
  counts them on the lattice the means lie on). It answers: what would another test
  set of this size do to these trials' difference.
* **McNemar, exact, combined.** Per seed pair the discordant counts (b_s: only A right,
  c_s: only B right); McNemar's exact test of one pair is the binomial test of b_s
  given b_s + c_s at 1/2 (statsmodels' `mcnemar(exact=True)`). The pairs are combined
  by the sum: if A is the one right on a discordant example with a common odds ψ in
  every pair, b_s | n_s ~ Bin(n_s, ψ/(1+ψ)) independently, Σ b_s is sufficient for ψ,
  and Σ b | Σ n ~ Bin(Σ n, ψ/(1+ψ)); so the binomial test of the pooled count is the
  exact conditional test of ψ = 1 on the statistic sufficient for ψ (the stratified
  McNemar test, each seed pair a stratum). Fisher's or Stouffer's
  combination of the per-pair p-values is not exact on discrete p-values. What it
  assumes: the trials are fixed (it is the test set's uncertainty alone), and
  discordant examples are independent across pairs. The pairs share their examples,
  so an example that A's trials get right on every seed and B's on none counts n
  times; there the pooled count is overdispersed and the p too small, which the
  bootstrap above (it resamples examples whole) does not assume (docs/statistics.md,
  "What the test set can resolve", has both simulated).
* **Seeds x examples.** Method-of-moments estimates of the two terms of Var(D): the
  seed term V_s = var_s(D_s) / n (D_s: pair s's difference; unpaired, Welch's sum of
  each group's var / n), whose expectation is σ_α²/n + σ_γ²/(nN); the example term
  V_e = (var_i(d_i) - MS_res / n) / N, with MS_res the two-way residual mean square
  Σ (e - row mean - column mean + grand mean)² / ((n - 1)(N - 1)): E var_i(d_i) =
  σ_β² + σ_γ²/n and E MS_res = σ_γ², so V_e estimates σ_β²/N (cut at 0; unpaired, each
  group's MS_res / n is taken off). V_s + V_e estimates Var(D) without bias; the
  interval is D ± t_df sqrt(V_s + V_e), df by Satterthwaite over every mean square in
  it, the subtracted MS_res too (n - 1, N - 1 and (n - 1)(N - 1) df): the example term
  is a difference of mean squares, far less certain at a few seeds than N - 1 df
  would say. The population claim: other seeds, and another test set of this size
  from the same distribution. Not a bootstrap over seeds and
  examples together: over a handful of seeds a bootstrap cannot know the tails (BCa
  covered 72% at 3 seeds, docs/architecture.md), and resampling both at once counts
  the seed-by-example term more than once (Owen 2007, "The pigeonhole bootstrap");
  tools/testset_simulation.py measures both intervals.
* **Resolution.** As seeds grow, V_s vanishes and df tends to N - 1: the seeds x
  examples interval tends to D ± X with X = t_{N-1}(1 - level/2) sqrt(V_e) at the
  comparison's decision level. Where |D| < X no number of seeds decides the
  difference on a test set of this size (for the population claim; more seeds
  still settle this test set's difference), so the summary says so in words and
  withholds "Seeds needed" (`with_resolution`).

`--population` (`SummaryRequest.population`) makes the seeds x examples interval the
one that decides (`sweeper.summarize.decide`); its seeds needed is the normal
approximation n = S / ((|D| / (z_level + z_power))² - V_e), S the per-seed variance,
out of reach where the denominator is not positive.

Only for a metric that is the mean of the per-example correct flags (accuracy, exact
match), where 100 · mean(correct) is the recorded value; a trial whose stored
checkpoints (best, else last) are none at the step it is counted at, or whose flags
do not give its recorded value, leaves its comparisons without test-set statistics,
with the reason in the note. A comparison none of whose trials hold
predictions is left exactly as it was.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from sweeper.selection import base_name
from sweeper.summarize.cells import level_text
from sweeper.summarize.example_reader import FLAG_METRICS, counted_checkpoint
from sweeper.summarize.records import Comparison, CountedTrial, TestSetStats
from sweeper.summarize.resampling import bca_bounds
from sweeper.summarize.stats import (
    BOOTSTRAP_RESAMPLES,
    BOOTSTRAP_SEED,
    CONFIDENCE,
    Bounds,
    clip,
    t_quantile,
    t_two_sided_p,
)
from sweeper.trainers.predictions import CheckpointPredictions, SplitPredictions

BELOW = "below the test set's resolution"
SEEDS_ALONE = "decided by the seeds alone (no test predictions)"
"""Under `--population`, the note of a comparison without a seeds x examples interval."""


@dataclass(frozen=True)
class Flags:
    """A comparison's per-example outcomes: rows are trials (seed pairs when paired),
    columns the shared test examples; 100 where right, 0 where wrong."""

    a: np.ndarray
    b: np.ndarray
    paired: bool

    @property
    def examples(self) -> int:
        return int(self.a.shape[1])


def with_test_set(
    comparisons: Sequence[Comparison],
    trials: Sequence[CountedTrial],
    predictions: Mapping[str, SplitPredictions],
    metric: str,
    bounds: Bounds | None = None,
) -> list[Comparison]:
    """Each comparison with its `TestSetStats` where every trial it compares holds test
    predictions of its recorded best checkpoint; `metric`: the compared one (only a
    mean over examples has them); `bounds`: the range of a difference, which clips."""
    if not predictions or base_name(metric) not in FLAG_METRICS:
        return list(comparisons)
    by_group: dict[str, list[CountedTrial]] = {}
    for trial in trials:
        by_group.setdefault(trial.group, []).append(trial)
    out = []
    for comparison in comparisons:
        found = comparison_flags(comparison, by_group, predictions)
        if found is None:
            out.append(comparison)
        elif isinstance(found, str):
            out.append(replace(comparison, note=_join(comparison.note, found)))
        else:
            out.append(replace(comparison, test_set=example_stats(found, bounds)))
    return out


def comparison_flags(
    comparison: Comparison,
    by_group: Mapping[str, Sequence[CountedTrial]],
    predictions: Mapping[str, SplitPredictions],
) -> Flags | str | None:
    """The trials' outcomes (seed pairs in seed order when paired), None when none of
    them holds predictions, or why they cannot be used."""
    # one trial a seed, the last, as `stats.by_seed` gives the values compared
    seeds_a = {t.seed: t for t in by_group.get(comparison.group_a, ())}
    seeds_b = {t.seed: t for t in by_group.get(comparison.group_b, ())}
    if comparison.paired:
        shared = sorted(s for s in seeds_a.keys() & seeds_b.keys() if s is not None)
        a, b = [seeds_a[s] for s in shared], [seeds_b[s] for s in shared]
    else:
        a, b = list(seeds_a.values()), list(seeds_b.values())
    used = [*a, *b]
    held = [t for t in used if t.run_id in predictions]
    if not held:
        return None
    lead = "no test-set statistics"
    if len(held) < len(used):
        return f"{lead}: {len(used) - len(held)} of {len(used)} trials hold no test predictions"
    rows: list[np.ndarray] = []
    ids: tuple[int, ...] | None = None
    for trial in used:
        split = predictions[trial.run_id]
        if not split.ids:
            return f"{lead}: no test examples"
        found = reported(trial, split)
        if found is None:
            return (
                f"{lead}: {trial.run_name}'s test predictions are not of the checkpoint "
                f"it is counted at (step {trial.best_step}, {trial.test_value:g})"
            )
        order = sorted(range(len(split.ids)), key=split.ids.__getitem__)
        mine = tuple(split.ids[k] for k in order)
        if ids is None:
            ids = mine
        elif mine != ids:
            return f"{lead}: the trials' test predictions are not over the same examples"
        rows.append(100.0 * np.asarray(found.correct, dtype=float)[order])
    return Flags(np.stack(rows[: len(a)]), np.stack(rows[len(a) :]), comparison.paired)


def reported(trial: CountedTrial, split: SplitPredictions) -> CheckpointPredictions | None:
    """The stored checkpoint at the step the summary counts `trial` at
    (`example_reader.counted_checkpoint`), if its correct flags give the trial's
    recorded test value exactly."""
    found = counted_checkpoint(trial, split)
    return found if found is not None and found.accuracy == trial.test_value else None


def example_stats(flags: Flags, bounds: Bounds | None = None) -> TestSetStats:
    """The test set's share of a comparison (the module docstring says what and why)."""
    low, high = clip(*example_bootstrap(flags), bounds)
    discordant = discordant_counts(flags) if flags.paired else ()
    combined = seeds_by_examples(flags)
    stats = TestSetStats(
        examples=flags.examples, low=low, high=high,
        p_mcnemar=combined_mcnemar_p(discordant), discordant=discordant,
        seed_variance=None, example_variance=None, df=None, combined_low=None,
        combined_high=None, p_combined=None,
    )  # fmt: skip
    if combined is None:
        return stats
    stats = replace(
        stats,
        seed_variance=combined.seed_variance,
        example_variance=combined.example_variance,
        df=combined.df,
    )
    if combined.df is None:
        return stats
    low, high = clip(*combined.interval(CONFIDENCE), bounds)
    return replace(stats, combined_low=low, combined_high=high, p_combined=combined.p())


@dataclass(frozen=True)
class SeedsByExamples:
    """The difference with both terms of its variance (points²; module docstring)."""

    diff: float
    seed_variance: float
    example_variance: float
    df: float | None
    """Satterthwaite's; None where both terms are 0 (no spread anywhere)."""

    def interval(self, confidence: float) -> tuple[float, float]:
        assert self.df is not None
        return _around(self.diff, self.seed_variance + self.example_variance, self.df, confidence)

    def p(self) -> float:
        assert self.df is not None
        return t_two_sided_p(
            self.diff / math.sqrt(self.seed_variance + self.example_variance), self.df
        )


def seeds_by_examples(flags: Flags) -> SeedsByExamples | None:
    """The seeds x examples estimate; None where the terms cannot be told apart."""
    terms = variance_terms(flags)
    if terms is None:
        return None
    seed_terms, example_terms = terms
    diff = float(np.mean(flags.a.mean(axis=0) - flags.b.mean(axis=0)))
    example = math.fsum(v for v, _ in example_terms)
    if example <= 0.0:  # the interaction explains all the examples' spread: no term left
        example, example_terms = 0.0, []
    df = satterthwaite([*seed_terms, *example_terms])
    return SeedsByExamples(diff, math.fsum(v for v, _ in seed_terms), example, df)


def discordant_counts(flags: Flags) -> tuple[tuple[int, int], ...]:
    """Per seed pair: (examples only A's trial got right, examples only B's did)."""
    only_a = np.count_nonzero((flags.a > 0) & (flags.b == 0), axis=1)
    only_b = np.count_nonzero((flags.a == 0) & (flags.b > 0), axis=1)
    return tuple((int(x), int(y)) for x, y in zip(only_a, only_b, strict=True))


def example_bootstrap(
    flags: Flags,
    resamples: int = BOOTSTRAP_RESAMPLES,
    confidence: float = CONFIDENCE,
    seed: int = BOOTSTRAP_SEED,
) -> tuple[float | None, float | None]:
    """BCa interval of the mean per-example difference over resampled examples (see
    the module docstring); the point where every example gives the same difference.
    It is computed on the integer numerators of `per_example`, so a resample whose
    mean equals the observed one compares equal to it, as BCa's bias correction
    needs on a lattice of values, never by the accident of rounding."""
    numerators, scale = per_example(flags)
    values, counts = np.unique(numerators, return_counts=True)
    n = int(counts.sum())
    total = float(counts @ values)
    if len(values) == 1:
        return scale * total / n, scale * total / n
    rng = np.random.default_rng(seed)
    totals = (rng.multinomial(n, counts / n, size=resamples) @ values).astype(float)
    u = values - total / n
    accel = float(counts @ u**3 / (6 * (counts @ u**2) ** 1.5))
    low, high = bca_bounds(totals, total, accel, confidence)
    if math.isnan(low) or math.isnan(high):
        return None, None
    return scale * low / n, scale * high / n


def per_example(flags: Flags) -> tuple[np.ndarray, float]:
    """(k, scale): the per-example difference, A's trials' share right minus B's, is
    scale · k_i with k_i an integer (A's right count times B's trials, less B's right
    count times A's trials); in points."""
    trials_a, trials_b = len(flags.a), len(flags.b)
    right_a = np.count_nonzero(flags.a > 0, axis=0).astype(np.int64)
    right_b = np.count_nonzero(flags.b > 0, axis=0).astype(np.int64)
    return right_a * trials_b - right_b * trials_a, 100.0 / (trials_a * trials_b)


def mcnemar_p(only_a: int, only_b: int) -> float:
    """Two-sided exact McNemar p of one pair of trials: twice the binomial tail of the
    smaller discordant count at 1/2, at most 1 (statsmodels' `mcnemar(exact=True)`)."""
    from scipy.special import bdtr

    total = only_a + only_b
    if total == 0:
        return 1.0
    return float(min(1.0, 2.0 * bdtr(min(only_a, only_b), total, 0.5)))


def combined_mcnemar_p(discordant: Sequence[tuple[int, int]]) -> float | None:
    """The seed pairs' exact McNemar tests combined: the test of the pooled counts."""
    if not discordant:
        return None
    return mcnemar_p(sum(x for x, _ in discordant), sum(y for _, y in discordant))


def variance_terms(
    flags: Flags,
) -> tuple[list[tuple[float, int]], list[tuple[float, int]]] | None:
    """(seed terms, example terms) of Var(D) in points², each as (value, df): per group
    var_s / n on n - 1 df; then var_i(d) / N on N - 1 df and, taken off it, each
    group's MS_res / (n N) on (n - 1)(N - 1) df (negative values), whose sum is the
    example term. Kept apart so Satterthwaite's df counts the uncertainty of each mean
    square, the subtracted ones too (Satterthwaite 1946). None with fewer than 2 trials
    (pairs) in a group or 2 examples, where the terms cannot be told apart."""
    n_examples = flags.examples
    groups = [flags.a - flags.b] if flags.paired else [flags.a, flags.b]
    if n_examples < 2 or any(len(g) < 2 for g in groups):
        return None
    seed_terms = [(float(np.var(g.mean(axis=1), ddof=1)) / len(g), len(g) - 1) for g in groups]
    differences = flags.a.mean(axis=0) - flags.b.mean(axis=0)
    example_terms = [(float(np.var(differences, ddof=1)) / n_examples, n_examples - 1)]
    example_terms += [
        (-residual_mean_square(g) / (len(g) * n_examples), (len(g) - 1) * (n_examples - 1))
        for g in groups
    ]
    return seed_terms, example_terms


def residual_mean_square(matrix: np.ndarray) -> float:
    """The two-way (trials x examples) residual mean square, one value per cell: what
    is left after each trial's and each example's mean."""
    rows, columns = matrix.shape
    residual = (
        matrix - matrix.mean(axis=1, keepdims=True) - matrix.mean(axis=0, keepdims=True)
    ) + matrix.mean()
    return float(np.sum(residual**2)) / ((rows - 1) * (columns - 1))


def satterthwaite(terms: Sequence[tuple[float, int]]) -> float | None:
    """Satterthwaite's degrees of freedom of a sum of mean-square terms (term, df),
    a term with a minus sign among them (Welch's for two positive ones)."""
    total = math.fsum(v for v, _ in terms)
    spread = math.fsum(v * v / df for v, df in terms if df > 0)
    if total <= 0.0 or spread <= 0.0:
        return None
    return total * total / spread


def _around(diff: float, variance: float, df: float, confidence: float) -> tuple[float, float]:
    half = t_quantile(0.5 + confidence / 2, df) * math.sqrt(variance)
    return diff - half, diff + half


def decidable(comparison: Comparison) -> bool:
    """Whether the comparison has a seeds x examples interval to decide by."""
    stats = comparison.test_set
    return stats is not None and stats.p_combined is not None


def population_p(comparison: Comparison) -> float | None:
    """The seeds x examples two-sided p (what Holm adjusts under `--population`)."""
    assert comparison.test_set is not None
    return comparison.test_set.p_combined


def population_interval(comparison: Comparison, level: float) -> tuple[float, float]:
    """The seeds x examples t interval of the comparison at confidence 1 - level."""
    stats = comparison.test_set
    assert stats is not None and stats.df is not None and stats.seed_variance is not None
    assert stats.example_variance is not None
    variance = stats.seed_variance + stats.example_variance
    return _around(comparison.diff, variance, stats.df, 1.0 - level)


def population_seeds(
    comparison: Comparison, level: float, power: float
) -> tuple[int | None, str | None]:
    """(seeds per group at which the seeds x examples interval at 1 - level decides
    with probability `power` if the observed difference and variances were the truth,
    why not where none does); normal approximation (module docstring)."""
    from scipy.special import ndtri

    stats = comparison.test_set
    assert stats is not None and stats.seed_variance is not None
    assert stats.example_variance is not None
    pairs = comparison.n_pairs if comparison.paired else min(comparison.n_a, comparison.n_b)
    per_seed = stats.seed_variance * pairs
    if per_seed <= 0.0 or comparison.diff == 0.0:
        return None, None
    reach = (abs(comparison.diff) / float(ndtri(1 - level / 2) + ndtri(power))) ** 2
    room = reach - stats.example_variance
    if room <= 0.0:
        return None, f"{power:.0%} power out of reach with {stats.examples} test examples"
    return max(2, math.ceil(per_seed / room)), None


def resolution(example_variance: float | None, examples: int, level: float) -> float | None:
    """X at confidence `level`: the half-width the seeds x examples interval keeps as
    seeds grow without bound (t on N - 1 df times the example term's root)."""
    if example_variance is None or examples < 2:
        return None
    return t_quantile(0.5 + level / 2, examples - 1) * math.sqrt(example_variance)


def resolution_words(stats: TestSetStats) -> str:
    """`with 189 test examples, no number of seeds decides a difference below ±0.98
    points (at 98.75%)`: X to 2 decimals, as every interval of the report, at its level."""
    assert stats.resolution is not None and stats.resolution_level is not None
    return (
        f"with {stats.examples} test examples, no number of seeds decides a difference "
        f"below ±{stats.resolution:.2f} points (at {level_text(stats.resolution_level)})"
    )


def with_resolution(comparisons: Sequence[Comparison], population: bool) -> list[Comparison]:
    """Each decided comparison with its test set's resolution at its decision level:
    where the difference lies below it, the words in its note and no seeds needed;
    under `--population`, the note of a comparison the seeds alone decided."""
    out = []
    for c in comparisons:
        stats = c.test_set
        if stats is None:
            if population:
                c = replace(c, note=_join(c.note, SEEDS_ALONE))
            out.append(c)
            continue
        level = c.decision_level or CONFIDENCE
        x = resolution(stats.example_variance, stats.examples, level)
        below = x is not None and abs(c.diff) < x
        stats = replace(stats, resolution=x, resolution_level=level, below_resolution=below)
        if below:
            stats = replace(stats, withheld=BELOW)
            c = replace(c, note=_join(c.note, resolution_words(stats)), seeds_needed=None)
        out.append(replace(c, test_set=stats))
    return out


def _join(note: str, addition: str) -> str:
    return f"{note}; {addition}" if note else addition
