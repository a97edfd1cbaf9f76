"""Where the variance comes from: each group's seed-to-seed variance by source, and the
test set's own sampling variance.

A group's test accuracy varies from seed to seed, and a sweep can say which randomness
moves it: `grid.seed` sets every source at once (the `all` block, ordinary seeds), and
a sweep that varies one source while holding the others (`seed_source`: `init`,
`data_order` or `dropout`; tags `sweeper.seed_source` and `sweeper.seed.<source>`)
gives one block per source. The Table 2 groups that differ only by which source varied
(`fairseq/pretrained/full[seed_source=init]`, ...) are one base group here
(`trial_keys.without_seed_source`), and the table has one row per block it holds:

* **A seed row** is the sample variance (ddof = 1) of the block's test values, with its
  95% chi-square interval, [(n-1)s^2 / chi2(0.975; n-1), (n-1)s^2 / chi2(0.025; n-1)].
  That interval is exact when the values are normal and needs nothing else; with 3-10
  seeds no resampling interval is better (a bootstrap of three values cannot know the
  tails, `stats.BOOTSTRAP_MIN_N`), but it is not robust: heavy tails, skew or a
  collapsed trial make it miss more often than 5% (tools/variance_simulation.py
  measures how often; docs/statistics.md quotes it).
  What a row estimates: the variance of one trial's test value on THIS test set, over
  the seeds of that source, with the other sources held at the values shown (`held`).
  It is conditional on the held values, and the one-at-a-time rows need not add up to
  the `all` row: when sources interact (any change of one reshuffles training, as is
  common), each alone can move the value nearly as much as all together. A row holds
  no test-set sampling noise: every trial is scored on the same fixed examples, so which
  examples a seed happens to get right is part of the seed's effect on this test set.
* **The test-set row** is the variance that drawing a NEW test set of the same size
  from the same population would add to one trial's value, which no number of seeds
  reduces: per trial, the bootstrap variance of its test accuracy over test sets
  resampled with replacement from its stored per-example predictions (the reported
  checkpoint's `correct` flags, `sweeper.trainers.predictions`), averaged over the
  group's trials. Accuracy (exact match) is 100 times the mean of those 0/1 flags, so
  the number right in a resample of N examples of which k are right is exactly
  Binomial(N, k/N): the bootstrap draws that count for each of its `RESAMPLES`
  resamples (what resampling N example indices gives, at O(resamples) instead of
  O(resamples x N)), from a generator seeded by the trial's flags (`resampling_rng`),
  so a summary printed twice prints the same. It converges to the closed form
  10^4 p(1-p) / N points^2 (p = k/N).
  Only for a metric that is such a mean (`FLAG_METRICS`); a macro-F1 summary has no
  test-set row (the file holds no labels of wrong predictions). A trial whose stored
  best and last checkpoints are both at other steps than the one the summary reports
  (another `--metric`, `--recompute`) is left out of it.

A base group gets rows when it holds a one-at-a-time block or a trial's predictions
were read; an ordinary sweep with predictions then shows its seed (`all`) row beside
the test-set row. A summary without either has no variance table, and its report is
as before (`Summary.to_dict` has no `variance` entry).
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import replace

import numpy as np

from sweeper.record_names import SEED_ALL, SEED_SOURCES
from sweeper.selection import ACCURACY, Selection, base_name
from sweeper.summarize.example_reader import FLAG_METRICS, counted_checkpoint
from sweeper.summarize.records import CountedTrial, VarianceRow
from sweeper.summarize.stats import (
    BOOTSTRAP_RESAMPLES,
    BOOTSTRAP_SEED,
    CONFIDENCE,
    mean,
    sample_std,
)
from sweeper.trainers.predictions import SplitPredictions
from sweeper.trial_keys import without_seed_source

TEST_SET = "test_set"
"""`VarianceRow.source` of the test set's sampling variance."""
SOURCES = (SEED_ALL, *SEED_SOURCES)
"""The seed rows, in table order."""
RESAMPLES = BOOTSTRAP_RESAMPLES
"""Bootstrap resamples per trial (Table 2's count): the variance's Monte-Carlo error is about
sqrt(2 / RESAMPLES) = 1.4% of it per trial, less once averaged over a group."""


def variance_interval(
    variance: float, n: int, confidence: float = CONFIDENCE
) -> tuple[float, float]:
    """The chi-square interval of a normal sample's variance, from its sample variance
    (ddof = 1) over n >= 2 values. `scipy.special.chdtri` is the inverse of the
    chi-square survival function that `scipy.stats.chi2.ppf` inverts, without importing
    scipy.stats (slow)."""
    from scipy.special import chdtri

    df = n - 1
    tail = (1 - confidence) / 2
    upper, lower = float(chdtri(df, tail)), float(chdtri(df, 1 - tail))
    return df * variance / upper, df * variance / lower


def bootstrap_variance(
    correct: Sequence[int], rng: np.random.Generator | None = None, resamples: int = RESAMPLES
) -> float:
    """Bootstrap variance (ddof = 1 over the resamples, as `scipy.stats.bootstrap`'s
    standard error squared) of 100 x mean(`correct`) over test sets of the same size
    resampled with replacement from these examples (module docstring: the count right
    in one resample is drawn as the Binomial it is). Without `rng`, from a generator
    seeded by the flags themselves (`resampling_rng`)."""
    n = len(correct)
    rng = rng if rng is not None else resampling_rng(correct)
    right = rng.binomial(n, sum(correct) / n, resamples)
    return float(np.var(100.0 * right / n, ddof=1))


def resampling_rng(correct: Sequence[int]) -> np.random.Generator:
    """The generator a trial's bootstrap draws from: seeded by `BOOTSTRAP_SEED` and a
    checksum of its flags, so a summary printed twice prints the same table, while the
    Monte-Carlo errors of different trials (and sweeps) are independent and average out
    over a group instead of repeating one stream's error in every trial."""
    return np.random.default_rng(
        [BOOTSTRAP_SEED, zlib.crc32(np.asarray(correct, np.uint8).tobytes()), len(correct)]
    )


def reported_flags(trial: CountedTrial, predictions: SplitPredictions) -> tuple[int, ...] | None:
    """The `correct` flags of the stored checkpoint at the step the summary reports for
    `trial` (`example_reader.counted_checkpoint`); None when none is at that step."""
    found = counted_checkpoint(trial, predictions)
    return None if found is None else found.correct


def variance_rows(
    trials: Sequence[CountedTrial],
    predictions: Mapping[str, SplitPredictions],
    selection: Selection = ACCURACY,
    confidence: float = CONFIDENCE,
    resamples: int = RESAMPLES,
) -> tuple[VarianceRow, ...]:
    """The variance table of `trials` (each base group in order of first appearance:
    its seed rows in `SOURCES` order, then its test-set row); `predictions`: {run id:
    test-split predictions}, used only for a metric in `FLAG_METRICS`. Empty when no
    base group has a one-at-a-time block or a usable prediction file."""
    if base_name(selection.primary) not in FLAG_METRICS:
        predictions = {}
    if not predictions and all(t.seed_source == SEED_ALL for t in trials):
        return ()  # an ordinary sweep without predictions: nothing to say, nothing read
    bases = {group: without_seed_source(group)[0] for group in {t.group for t in trials}}
    by_base: dict[str, list[CountedTrial]] = {}
    for trial in trials:
        by_base.setdefault(bases[trial.group], []).append(trial)
    rows: list[VarianceRow] = []
    for group, members in by_base.items():
        scored = _scored(members, predictions)
        if not scored and all(t.seed_source == SEED_ALL for t in members):
            continue
        test_row = _test_set_row(group, scored, resamples)
        seed_rows = [
            _seed_row(group, source, [t for t in members if t.seed_source == source], confidence)
            for source in SOURCES
            if any(t.seed_source == source for t in members)
        ]
        if test_row is not None and test_row.variance:
            seed_rows = [_with_ratio(row, test_row.variance) for row in seed_rows]
        rows += [*seed_rows, *([test_row] if test_row is not None else [])]
    return tuple(rows)


def _scored(
    members: Sequence[CountedTrial], predictions: Mapping[str, SplitPredictions]
) -> list[tuple[CountedTrial, tuple[int, ...]]]:
    """The group's trials with the flags of their reported checkpoint."""
    found = []
    for trial in members:
        held = predictions.get(trial.run_id)
        correct = reported_flags(trial, held) if held is not None else None
        if correct:
            found.append((trial, correct))
    return found


def _seed_row(
    group: str, source: str, block: Sequence[CountedTrial], confidence: float
) -> VarianceRow:
    """A block's row: mean, sample std and variance, the variance's chi-square interval
    (n >= 2), and the seeds the other sources were held at."""
    values = [t.test_value for t in block]
    std = sample_std(values)
    held = {
        other: tuple(sorted({s for t in block if (s := t.seed_of(other)) is not None}))
        for other in SEED_SOURCES
        if source != SEED_ALL and other != source
    }
    row = VarianceRow(group, source, len(values), mean(values), std, _square(std), held=held)
    if std is None:
        return row
    low, high = variance_interval(std * std, len(values), confidence)
    return replace(
        row, variance_low=low, variance_high=high, std_low=math.sqrt(low), std_high=math.sqrt(high)
    )


def _square(value: float | None) -> float | None:
    return None if value is None else value * value


def _test_set_row(
    group: str,
    scored: Sequence[tuple[CountedTrial, tuple[int, ...]]],
    resamples: int,
) -> VarianceRow | None:
    """The group's test-set row: each trial's bootstrap variance, averaged."""
    if not scored:
        return None
    variances = [bootstrap_variance(correct, resamples=resamples) for _, correct in scored]
    sizes = {len(correct) for _, correct in scored}
    variance = mean(variances)
    return VarianceRow(
        group,
        TEST_SET,
        len(scored),
        mean([t.test_value for t, _ in scored]),
        math.sqrt(variance),
        variance,
        examples=sizes.pop() if len(sizes) == 1 else None,
    )


def _with_ratio(row: VarianceRow, test_variance: float) -> VarianceRow:
    if row.variance is None:
        return row
    return replace(row, ratio=row.variance / test_variance)
