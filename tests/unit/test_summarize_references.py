"""The summary's own statistics give the reference libraries' results.

The summary computes the BCa bootstrap, the Wilcoxon signed-rank test, Holm's
correction and t-test power itself, so that it imports neither scipy.stats nor
statsmodels (issue 18). Here the same inputs go through `scipy.stats.bootstrap`,
`scipy.stats.wilcoxon`, `statsmodels`' `multipletests` and `solve_power`, including the
cases each branch exists for: ties, zeros, n past the exact and sign-pattern limits,
degenerate data, effects too small to estimate.
"""

from __future__ import annotations

import math
import subprocess
import sys
import warnings

import numpy as np
import pytest
from scipy import stats

from sweeper.summarize.decide import MAX_SEEDS_ESTIMATE, holm, power_seeds
from sweeper.summarize.resampling import EXACT_MAX_N, PATTERNS_MAX_N, bca_interval, signed_rank_p
from sweeper.summarize.stats import BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED, bootstrap_ci, wilcoxon_p


def scipy_bca(samples: list[np.ndarray], resamples: int = 999, seed: int = 0):
    def statistic(*arrays, axis=-1):
        value = np.mean(arrays[0], axis=axis)
        return value - np.mean(arrays[1], axis=axis) if len(arrays) > 1 else value

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ci = stats.bootstrap(
            tuple(samples), statistic, n_resamples=resamples, rng=np.random.default_rng(seed)
        ).confidence_interval
    return float(ci.low), float(ci.high)


def accuracies(rng: np.random.Generator, n: int) -> np.ndarray:
    """Test accuracies as trials report them: on a grid of 0.5 points, often tied."""
    return np.round(rng.normal(70, rng.uniform(0.3, 6), n) * 2) / 2


@pytest.mark.parametrize("n_samples", [1, 2])
def test_bca_equals_scipy_on_many_samples(n_samples):
    rng = np.random.default_rng(7)
    for trial in range(300):
        samples = [accuracies(rng, int(rng.integers(2, 12))) for _ in range(n_samples)]
        if all(np.ptp(s) == 0 for s in samples):
            continue
        expected = scipy_bca(samples, seed=trial)
        got = bca_interval(samples, 999, 0.95, trial)
        if math.isnan(expected[0]):
            assert math.isnan(got[0]), samples
        else:
            assert got == pytest.approx(expected, rel=1e-12, abs=1e-12), samples


def test_bootstrap_ci_is_scipys_interval_at_the_summarys_settings():
    values, other = [74.0, 75.5, 73.0, 72.5, 76.0, 74.5], [50.0, 49.5, 51.0, 48.0, 50.5, 49.0]
    for samples in ([values], [values, other], [list(np.subtract(values, other))]):
        arrays = [np.asarray(s) for s in samples]
        expected = scipy_bca(arrays, BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED)
        assert bootstrap_ci(samples) == pytest.approx(expected, rel=1e-12)


def test_bootstrap_ci_degenerate_and_short_samples():
    assert bootstrap_ci([[1.0]]) == (None, None)
    assert bootstrap_ci([[2.0, 2.0, 2.0], [1.0, 1.0]]) == (1.0, 1.0)
    # one outlier among equal values: every resample's mean sits on one side; scipy's BCa
    # is NaN there (DegenerateDataWarning), reported as undefined
    assert math.isnan(scipy_bca([np.array([5.0] * 9 + [6.0])], BOOTSTRAP_RESAMPLES)[0]) == (
        bootstrap_ci([[5.0] * 9 + [6.0]]) == (None, None)
    )


@pytest.mark.parametrize(
    "kind", ["distinct", "ties", "zeros", "ties-and-zeros", "large-distinct", "large-ties"]
)
def test_signed_rank_p_equals_scipy(kind):
    rng = np.random.default_rng(len(kind))
    for _ in range(60):
        if kind == "distinct":
            d = rng.normal(0.5, 1, int(rng.integers(2, EXACT_MAX_N + 1)))
        elif kind == "large-distinct":
            d = rng.normal(0.3, 1, int(rng.integers(EXACT_MAX_N + 1, 80)))
        elif kind == "large-ties":
            d = np.round(rng.normal(0.5, 2, int(rng.integers(PATTERNS_MAX_N + 1, 60))))
        else:
            d = np.round(rng.normal(0.5, 2, int(rng.integers(2, 2 * PATTERNS_MAX_N))) * 2) / 2
            if "zeros" in kind:
                d[rng.integers(0, len(d))] = 0.0
            if kind == "zeros":
                d = d + np.arange(len(d)) * 1e-3 * (d != 0)  # no ties, only the zero
        if not np.any(d):
            continue
        expected = float(stats.wilcoxon(d).pvalue)
        assert signed_rank_p(list(d)) == pytest.approx(expected, rel=1e-9, abs=1e-12), list(d)


def test_wilcoxon_p_known_answer_and_undefined_cases():
    # scipy.stats.wilcoxon's documented example (Wilcoxon 1945, differences in height)
    d = [6, 8, 14, 16, 23, 24, 28, 29, 41, -48, 49, 56, 60, -67, 75]
    assert wilcoxon_p(d) == pytest.approx(0.041259765625)
    assert wilcoxon_p([1.0]) is None and wilcoxon_p([0.0, 0.0]) is None


def test_the_summary_statistics_do_not_import_scipy_stats_or_statsmodels():
    code = (
        "import sys\n"
        "from sweeper.summarize.stats import bootstrap_ci, wilcoxon_p, welch, paired_t\n"
        "from sweeper.summarize.decide import holm, power_seeds\n"
        "bootstrap_ci([[1.0, 2.0, 4.0], [0.0, 1.0]]); wilcoxon_p([1.0, -2.0, 3.0, 3.0])\n"
        "welch([1.0, 2.0], [3.0, 5.0]); paired_t([1.0, 2.5]); holm([0.01, 0.2])\n"
        "power_seeds(0.4, 0.05, paired=True); power_seeds(0.4, 0.05, paired=False)\n"
        "print(sorted(m for m in ('scipy.stats', 'statsmodels') if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_holm_equals_statsmodels():
    from statsmodels.stats.multitest import multipletests

    rng = np.random.default_rng(3)
    for _ in range(15):  # each statsmodels call is slow; 15 families with ties suffice
        p = list(rng.uniform(0, 0.2, int(rng.integers(1, 12))) ** rng.uniform(0.5, 3))
        p[int(rng.integers(0, len(p)))] = p[0]  # a tie
        expected = multipletests(p, method="holm")[1]
        assert holm(p) == pytest.approx(list(expected), rel=1e-15)
    assert holm([0.01, None, 0.04]) == pytest.approx([0.02, None, 0.04])


@pytest.mark.parametrize("paired", [True, False])
def test_power_seeds_equal_statsmodels_solve_power(paired):
    from statsmodels.stats.power import TTestIndPower, TTestPower

    analysis = TTestPower() if paired else TTestIndPower()
    rng = np.random.default_rng(11)
    effects = np.exp(rng.uniform(np.log(0.03), np.log(4.0), 120))
    for effect in effects:
        alpha = float(rng.choice([0.05, 0.0125, 0.05 / 6]))
        got = power_seeds(float(effect), alpha, paired)
        expected = float(np.atleast_1d(analysis.solve_power(effect, alpha=alpha, power=0.8))[0])
        if expected > MAX_SEEDS_ESTIMATE:
            assert got is None
        elif expected <= 2.0:
            assert got == 2.0
        elif abs(analysis.power(effect, expected, alpha) - 0.8) < 1e-6:
            assert got == pytest.approx(expected, rel=1e-6), effect
        else:  # statsmodels' solver stopped off the root (scipy's nctdtr gave it a NaN)
            assert reference_power(got, effect, alpha, paired) == pytest.approx(0.8, abs=1e-6)


def reference_power(n: float, effect: float, alpha: float, paired: bool) -> float:
    """The same power from scipy.stats' t and noncentral t distributions."""
    df, n_effective = (n - 1, n) if paired else (2 * n - 2, n / 2)
    shift = effect * math.sqrt(n_effective)
    return float(
        stats.nct.sf(stats.t.ppf(1 - alpha / 2, df), df, shift)
        + np.nan_to_num(stats.nct.cdf(stats.t.ppf(alpha / 2, df), df, shift))
    )
