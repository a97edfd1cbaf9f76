"""The exact sign-flip (randomization) test of seed-matched differences, on numpy alone.

Under the null that the paired differences are symmetric about 0 (which holds when the
two groups' trials of one seed are exchangeable), each difference's sign is a fair
coin; a zero difference stays 0 under a flip. The test statistic is the sum (the mean,
equivalently) of the differences, and the two-sided p is the share of the 2**n sign
patterns whose |sum| is at least the observed |sum|. It needs no normality: on a
handful of lattice-valued or skewed differences it is the test the t-based rules are
checked against, and a decision is only taken where it could be taken too.

* Exact up to `EXACT_MAX_N` differences: every one of the 2**n patterns is counted,
  the sums of two halves' patterns combined by sorting (2 x 2**(n/2) sums, no 2**n
  array). A sum counts as "as extreme" within `resampling.RELATIVE_TOLERANCE`
  (scipy's 100 ulp) times sum |d|: relative to the differences' scale rather than to
  the observed sum (as scipy's), so lattice values such as ±0.53 whose sum is 0 up to
  rounding still tie with the patterns whose sum rounds to 0 another way.
* Up to `MONTE_CARLO_MAX_N`, `MONTE_CARLO_PATTERNS` random sign patterns from a fixed
  generator (seed `MONTE_CARLO_SEED`), p = (hits + 1) / (patterns + 1) as
  `scipy.stats.permutation_test` counts it (never 0; a valid p): its standard error is
  at most 0.5 / sqrt(100,000) = 0.0016, and 0.0007 near p = 0.05.
* Beyond, the normal limit of the same distribution: the sum of n sign-flipped
  differences has mean 0 and variance sum d², and p = 2 Φ(-|sum| / sqrt(sum d²)). At
  this many seeds that limit is as close as the Monte Carlo count (tests hold them
  together), and a summary of thousands of seeds is not held up drawing patterns.
* None with fewer than 2 differences or when every difference is 0 (nothing to test).

`sign_flip_tost_p` is the equivalence version (two one-sided sign-flip tests of the
differences shifted by the margin). Unpaired (Welch) comparisons have no exact test
here; what guards them against a decision from no spread is `stats.permutation_min_p`.
tests/unit/test_summarize_exact.py holds both functions to
`scipy.stats.permutation_test(permutation_type="samples")`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np

from sweeper.summarize.resampling import RELATIVE_TOLERANCE

EXACT_MAX_N = 20
"""Up to this many differences every sign pattern is counted (2**20 patterns)."""
MONTE_CARLO_MAX_N = 200
"""Up to this many differences random patterns are counted; beyond, the normal limit."""
MONTE_CARLO_PATTERNS = 100_000
MONTE_CARLO_SEED = 0
_CHUNK = 10_000
"""Monte Carlo patterns drawn at a time (memory: _CHUNK x n floats)."""

Side = Literal["two-sided", "greater", "less"]


def sign_flip_p(differences: Sequence[float]) -> float | None:
    """Two-sided exact sign-flip p of the mean of `differences` (see module docstring)."""
    d = np.asarray(differences, dtype=float)
    if len(d) < 2 or not np.any(d):
        return None
    return _p(d, "two-sided")


def sign_flip_tost_p(differences: Sequence[float], margin: float) -> float | None:
    """p of "the mean difference lies inside (-margin, margin)": the larger of the
    one-sided sign-flip p's of d + margin > 0 and of d - margin < 0 (two one-sided
    tests; a (1 - 2·level) equivalence decision needs it below `level`). None with
    fewer than 2 differences."""
    d = np.asarray(differences, dtype=float)
    if len(d) < 2:
        return None
    return max(_p(d + margin, "greater"), _p(d - margin, "less"))


def _p(d: np.ndarray, side: Side) -> float:
    """p of the sum of `d` among its sign flips; all-zero `d` gives 1."""
    observed = float(np.sum(d))
    gamma = float(np.sum(np.abs(d))) * RELATIVE_TOLERANCE
    if len(d) > MONTE_CARLO_MAX_N:
        return _normal_limit(d, observed, side)
    if len(d) <= EXACT_MAX_N:
        greater, less, total = _exact_counts(d, observed, gamma)
        adjust = 0
    else:
        greater, less, total = _monte_carlo_counts(d, observed, gamma)
        adjust = 1
    p_greater = (greater + adjust) / (total + adjust)
    p_less = (less + adjust) / (total + adjust)
    if side == "greater":
        return float(p_greater)
    if side == "less":
        return float(p_less)
    return float(min(1.0, 2 * min(p_greater, p_less)))


def _pattern_sums(values: np.ndarray) -> np.ndarray:
    """Sum of ±values over every sign pattern (2**len(values) sums)."""
    sums = np.zeros(1)
    for value in values:
        sums = np.concatenate([sums + value, sums - value])
    return sums


def _exact_counts(d: np.ndarray, observed: float, gamma: float) -> tuple[int, int, int]:
    """(patterns with sum >= observed - gamma, with sum <= observed + gamma, all)."""
    half = len(d) // 2
    left = _pattern_sums(d[:half])
    right = np.sort(_pattern_sums(d[half:]))
    # sum = l + r >= observed - gamma  <=>  r >= observed - gamma - l
    greater = len(right) * len(left) - np.searchsorted(right, observed - gamma - left, "left").sum()
    less = np.searchsorted(right, observed + gamma - left, "right").sum()
    return int(greater), int(less), len(left) * len(right)


def _monte_carlo_counts(d: np.ndarray, observed: float, gamma: float) -> tuple[int, int, int]:
    rng = np.random.default_rng(MONTE_CARLO_SEED)
    greater = less = 0
    drawn = 0
    while drawn < MONTE_CARLO_PATTERNS:
        size = min(_CHUNK, MONTE_CARLO_PATTERNS - drawn)
        signs = rng.integers(0, 2, (size, len(d))) * 2 - 1
        sums = signs @ d
        greater += int(np.count_nonzero(sums >= observed - gamma))
        less += int(np.count_nonzero(sums <= observed + gamma))
        drawn += size
    return greater, less, drawn


def _normal_limit(d: np.ndarray, observed: float, side: Side) -> float:
    """p of the observed sum under the normal limit of its sign-flip distribution."""
    from scipy.special import ndtr

    scale = float(np.sqrt(np.sum(d * d)))
    if scale == 0.0:
        return 1.0
    z = observed / scale
    if side == "greater":
        return float(ndtr(-z))
    if side == "less":
        return float(ndtr(z))
    return float(min(1.0, 2 * ndtr(-abs(z))))
