"""The exact sign-flip test (`sweeper.summarize.exact`) against scipy.stats.permutation_test."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from sweeper.summarize.exact import (
    EXACT_MAX_N,
    MONTE_CARLO_MAX_N,
    MONTE_CARLO_PATTERNS,
    _exact_counts,
    sign_flip_p,
    sign_flip_tost_p,
)
from sweeper.summarize.resampling import RELATIVE_TOLERANCE


def _scipy_p(d: np.ndarray, alternative: str = "two-sided", n_resamples: float = np.inf) -> float:
    """scipy's sign-flip test: one sample, permutation_type='samples' flips each sign."""
    return stats.permutation_test(
        (np.asarray(d, dtype=float),),
        lambda x, axis: np.mean(x, axis=axis),
        permutation_type="samples",
        n_resamples=n_resamples,
        alternative=alternative,
        vectorized=True,
        random_state=1,
    ).pvalue


def test_exact_p_matches_scipy_on_random_normal_differences():
    rng = np.random.default_rng(7)
    for _ in range(300):
        d = rng.normal(rng.normal(), 1.0, size=int(rng.integers(2, 14)))
        assert sign_flip_p(d) == pytest.approx(_scipy_p(d), abs=1e-12)


def test_exact_p_matches_scipy_on_lattice_differences_with_ties_and_zeros():
    """Integer lattices (exact in floating point for scipy too) with many ties and
    zeros; the same lattice scaled by 0.53 (one of 189 examples) gives the same p here,
    where scipy's tolerance, relative to the observed mean, can miss a tie at 0."""
    rng = np.random.default_rng(8)
    checked = 0
    for _ in range(400):
        k = rng.integers(-3, 4, size=int(rng.integers(2, 14))).astype(float)
        if not np.any(k):
            assert sign_flip_p(k) is None
            continue
        expected = _scipy_p(k)
        assert sign_flip_p(k) == pytest.approx(expected, abs=1e-12)
        assert sign_flip_p(k * 0.53) == pytest.approx(expected, abs=1e-12)
        checked += 1
    assert checked > 300


def test_exact_at_the_largest_enumerated_n():
    rng = np.random.default_rng(9)
    d = rng.normal(0.4, 1.0, size=EXACT_MAX_N)
    assert sign_flip_p(d) == pytest.approx(_scipy_p(d), abs=1e-12)


def test_monte_carlo_beyond_the_exact_n_is_within_its_stated_precision():
    """p from 100,000 random patterns: within 4 standard errors of the exact p of n = 22
    (4 million patterns, counted by the enumeration the tests above hold to scipy)."""
    rng = np.random.default_rng(10)
    for shift in (0.0, 0.35, 0.6):
        d = rng.normal(shift, 1.0, size=EXACT_MAX_N + 2)
        gamma = float(np.sum(np.abs(d))) * RELATIVE_TOLERANCE
        greater, less, total = _exact_counts(d, float(np.sum(d)), gamma)
        exact = min(1.0, 2 * min(greater, less) / total)
        se = max(np.sqrt(exact * (1 - exact) / MONTE_CARLO_PATTERNS), 1 / MONTE_CARLO_PATTERNS)
        assert abs(sign_flip_p(d) - exact) <= 4 * se + 1e-5


def test_the_normal_limit_past_the_monte_carlo_n_agrees_with_scipys_count():
    """Past MONTE_CARLO_MAX_N the p is the normal limit of the sign-flip distribution:
    within 0.01 of scipy's count of 20,000 random patterns, normal and skewed
    differences, and one-sided too."""
    rng = np.random.default_rng(13)
    n = MONTE_CARLO_MAX_N + 1
    for d in (rng.normal(0.1, 1.0, n), rng.exponential(1.0, n) - 0.9, rng.normal(0, 1, n)):
        assert sign_flip_p(d) == pytest.approx(_scipy_p(d, n_resamples=20_000), abs=0.01)
        expected = max(
            _scipy_p(d + 0.2, "greater", n_resamples=20_000),
            _scipy_p(d - 0.2, "less", n_resamples=20_000),
        )
        assert sign_flip_tost_p(d, 0.2) == pytest.approx(expected, abs=0.01)


def test_known_answers_at_ties():
    assert sign_flip_p([1.0, 1.0, 1.0]) == pytest.approx(0.25)  # 2 of 8 patterns
    assert sign_flip_p([1.0] * 6) == pytest.approx(2 / 64)
    assert sign_flip_p([0.0, 0.0, 1.0, 1.0]) == pytest.approx(0.5)  # zeros stay zero
    assert sign_flip_p([0.0, 0.0, 0.0]) is None
    assert sign_flip_p([2.5]) is None


def test_tost_p_matches_scipy_one_sided_tests():
    rng = np.random.default_rng(11)
    for _ in range(200):
        d = rng.normal(0.0, 0.5, size=int(rng.integers(2, 12)))
        margin = float(rng.uniform(0.1, 1.5))
        expected = max(_scipy_p(d + margin, "greater"), _scipy_p(d - margin, "less"))
        assert sign_flip_tost_p(d, margin) == pytest.approx(expected, abs=1e-12)


def test_tost_p_at_ties():
    """[0, 0, 0] within ±0.01: each one-sided test's best p on 3 values is 1/8."""
    assert sign_flip_tost_p([0.0, 0.0, 0.0], 0.01) == pytest.approx(0.125)
    assert sign_flip_tost_p([0.0] * 6, 0.01) == pytest.approx(1 / 64)
    assert sign_flip_tost_p([1.0], 2.0) is None


def test_sign_flip_p_holds_its_level_under_a_symmetric_null():
    """Under differences symmetric about 0 the exact p is uniform on its lattice: at 6
    pairs P(p <= 1/32) = 1/32 exactly; simulated, within 3 standard errors."""
    rng = np.random.default_rng(12)
    runs = 4000
    hits = sum(sign_flip_p(rng.standard_t(3, size=6)) <= 1 / 32 + 1e-12 for _ in range(runs))
    rate, se = hits / runs, np.sqrt((1 / 32) * (31 / 32) / runs)
    assert abs(rate - 1 / 32) <= 3 * se
