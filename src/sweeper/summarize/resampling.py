"""The BCa bootstrap interval and the Wilcoxon signed-rank p-value, on numpy alone.

They compute what `scipy.stats.bootstrap` and `scipy.stats.wilcoxon` compute. Those calls
are quick on a sweep's handful of seeds, but importing `scipy.stats` is slow next to
everything else a `sweeper summarize` does (docs/benchmarks.md has the measurements),
so the summary does not import it. The procedures are short, so they are written out
here, step for step as scipy 1.17 performs them, and
`tests/unit/test_summarize_references.py` holds them to scipy's own results on thousands
of samples (scipy.stats stays a test dependency, not an import of the summary).

* `bca_interval`: Efron & Tibshirani (1993) §14.3 and eq. 15.36. The resamples are
  drawn as scipy draws them (`Generator.integers(0, n, (B, n))`, one draw per sample,
  in order), so the same generator seed gives the same interval to the last digit;
  `bca_bounds` is its last step, the interval from resampled statistics however they
  were drawn (`sweeper.summarize.resolution` draws test examples as counts).
* `signed_rank_p`: zeros dropped (Wilcoxon's rule), average ranks for ties; the exact
  null distribution when there are no ties or zeros and n <= 50, every sign pattern
  when there are ties or zeros and n <= 13 (2**13 patterns: scipy's exact permutation
  test), the normal approximation with the tie correction otherwise.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

EXACT_MAX_N = 50
"""Up to this many differences without ties or zeros, the p-value is exact."""
PATTERNS_MAX_N = 13
"""Up to this many differences with ties or zeros, every sign pattern is counted."""
RELATIVE_TOLERANCE = np.finfo(np.float64).eps * 100
"""How close a permuted statistic must be to the observed one to count as equal
(ties of average ranks are sums of halves, which floating point may not hit)."""


def bca_interval(
    samples: Sequence[np.ndarray], resamples: int, confidence: float, seed: int
) -> tuple[float, float]:
    """BCa interval of mean(samples[0]) - mean(samples[1]) (or of the one sample's
    mean); NaN bounds when the interval is degenerate (the caller reports None)."""
    rng = np.random.default_rng(seed)
    drawn = [sample[rng.integers(0, len(sample), (resamples, len(sample)))] for sample in samples]
    theta_b = _statistic(drawn)
    theta = float(_statistic([s[np.newaxis, :] for s in samples])[0])

    nums, dens = 0.0, 0.0
    for j, sample in enumerate(samples):
        n = len(sample)
        left_out = _jackknife(sample)
        others = [s[np.newaxis, :] for s in samples]
        others[j] = left_out
        theta_i = _statistic(others)
        u = (n - 1) * (np.mean(theta_i) - theta_i)
        nums += np.sum(u**3) / float(n) ** 3
        dens += np.sum(u**2) / float(n) ** 2
    accel = 1 / 6 * nums / dens ** (3 / 2)
    return bca_bounds(theta_b, theta, accel, confidence)


def bca_bounds(
    theta_b: np.ndarray, theta: float, accel: float, confidence: float
) -> tuple[float, float]:
    """The BCa interval from the resampled statistics `theta_b`, the observed `theta`
    and the acceleration `accel` (however the resamples were drawn); NaN bounds when
    it is degenerate."""
    from scipy.special import ndtr, ndtri

    resamples = len(theta_b)
    z0 = ndtri(
        (np.count_nonzero(theta_b < theta) + np.count_nonzero(theta_b <= theta)) / (2 * resamples)
    )
    z_alpha = float(ndtri((1 - confidence) / 2))
    bounds = []
    for z in (z_alpha, -z_alpha):
        bounds.append(ndtr(z0 + (z0 + z) / (1 - accel * (z0 + z))))
    if any(math.isnan(b) for b in bounds):
        return math.nan, math.nan
    low, high = np.quantile(theta_b, bounds)
    return float(low), float(high)


def _statistic(arrays: Sequence[np.ndarray]) -> np.ndarray:
    """Mean along the last axis, or the difference of two such means."""
    value = np.mean(arrays[0], axis=-1)
    return value - np.mean(arrays[1], axis=-1) if len(arrays) > 1 else value


def _jackknife(sample: np.ndarray) -> np.ndarray:
    """Row i is the sample without its i-th value."""
    n = len(sample)
    keep = ~np.eye(n, dtype=bool)
    return np.broadcast_to(sample, (n, n))[keep].reshape(n, n - 1)


def signed_rank_p(differences: Sequence[float]) -> float:
    """Two-sided Wilcoxon signed-rank p-value of `differences` (at least one non-zero)."""
    d = np.asarray(differences, dtype=float)
    zeros = int(np.count_nonzero(d == 0))
    d = d[d != 0]
    ranks, tie_sizes = _average_ranks(np.abs(d))
    r_plus = float(np.sum(ranks[d > 0]))
    has_ties = bool(np.any(tie_sizes > 1))
    n_all = len(d) + zeros
    if not has_ties and zeros == 0 and n_all <= EXACT_MAX_N:
        counts = _exact_counts(len(d))
        total = float(np.sum(counts))
        below = np.sum(counts[: math.ceil(r_plus) + 1]) / total
        above = np.sum(counts[math.floor(r_plus) :]) / total
        return float(min(1.0, 2 * min(below, above)))
    if n_all <= PATTERNS_MAX_N:
        return _all_sign_patterns_p(ranks, r_plus)
    return _normal_p(r_plus, len(d), tie_sizes)


def _average_ranks(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """1-based ranks, ties sharing their average, and the size of each tie group."""
    order = np.argsort(values, kind="mergesort")
    ordered = values[order]
    starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])
    sizes = np.diff(np.r_[starts, len(values)])
    average = starts + (sizes + 1) / 2
    ranks = np.empty(len(values))
    ranks[order] = np.repeat(average, sizes)
    return ranks, sizes


def _exact_counts(n: int) -> np.ndarray:
    """counts[k]: how many subsets of the ranks 1..n sum to k (the statistic's null)."""
    counts = np.zeros(n * (n + 1) // 2 + 1)
    counts[0] = 1.0
    for rank in range(1, n + 1):
        counts[rank:] = counts[rank:] + counts[:-rank].copy()
    return counts


def _all_sign_patterns_p(ranks: np.ndarray, observed: float) -> float:
    """p over every assignment of signs to the ranked differences (each equally likely)."""
    m = len(ranks)
    patterns = (np.arange(2**m)[:, np.newaxis] >> np.arange(m)) & 1
    null = patterns @ ranks
    gamma = abs(observed * RELATIVE_TOLERANCE)
    less = np.count_nonzero(null <= observed + gamma) / len(null)
    greater = np.count_nonzero(null >= observed - gamma) / len(null)
    return float(min(1.0, 2 * min(less, greater)))


def _normal_p(r_plus: float, n: int, tie_sizes: np.ndarray) -> float:
    """The normal approximation with the tie correction, without continuity correction."""
    from scipy.special import ndtr

    mean = n * (n + 1) * 0.25
    variance = (n * (n + 1.0) * (2 * n + 1.0) - np.sum(tie_sizes**3 - tie_sizes) / 2) / 24
    z = (r_plus - mean) / math.sqrt(variance)
    return float(min(1.0, 2 * ndtr(-abs(z))))
