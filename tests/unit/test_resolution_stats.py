"""What the test set can resolve (`sweeper.summarize.resolution`), held to known answers:
the bootstrap over test examples to `scipy.stats.bootstrap`, each pair's McNemar test
to statsmodels', the combined one to an exact convolution, the residual mean square
to statsmodels' two-way ANOVA, the two variance terms to a crossed model whose terms
are known; then which trials a comparison's statistics are made from."""

from __future__ import annotations

import math
from dataclasses import replace
from fractions import Fraction

import numpy as np
import pytest

from sweeper.summarize.records import CountedTrial, TestSetStats
from sweeper.summarize.resolution import (
    BELOW,
    Flags,
    combined_mcnemar_p,
    comparison_flags,
    discordant_counts,
    example_bootstrap,
    example_stats,
    mcnemar_p,
    per_example,
    residual_mean_square,
    resolution,
    satterthwaite,
    seeds_by_examples,
    variance_terms,
    with_resolution,
    with_test_set,
)
from sweeper.summarize.stats import welch
from sweeper.trainers.predictions import CheckpointPredictions, SplitPredictions
from tests.support.summaries import comparison


def _flags(rng: np.random.Generator, seeds: int, examples: int, paired: bool = True) -> Flags:
    """Two groups' 0/100 outcomes, correlated per example as trained models are."""
    ease = rng.normal(1.7, 2.5, examples)
    a = rng.random((seeds, examples)) < _phi(ease + 0.2)
    b = rng.random((seeds + (0 if paired else 1), examples)) < _phi(ease)
    return Flags(100.0 * a, 100.0 * b, paired)


def _phi(x: np.ndarray) -> np.ndarray:
    from scipy.special import ndtr

    return ndtr(x)


@pytest.mark.parametrize(("seeds", "examples", "paired"), [(3, 189, True), (5, 60, False)])
def test_the_examples_bootstrap_is_scipys_bca_interval_of_the_same_statistic(
    seeds, examples, paired
):
    """Same statistic (the mean per-example difference, each group's trials pooled),
    same BCa, fed the same integer numerators (so both compare a resample equal to the
    observed mean as equal): at 100,000 resamples each the bounds agree within
    Monte-Carlo error: one step of the lattice the resampled means lie on, as far as
    scipy's own interval moves with its generator's seed."""
    from scipy import stats

    for trial in range(4):
        flags = _flags(np.random.default_rng(trial), seeds, examples, paired)
        k, scale = per_example(flags)
        assert np.allclose(scale * k, flags.a.mean(axis=0) - flags.b.mean(axis=0))
        ours = example_bootstrap(flags, resamples=100_000, seed=trial)
        theirs = stats.bootstrap(
            (k.astype(float),), np.mean, n_resamples=100_000, method="BCa", random_state=trial
        ).confidence_interval
        step = scale * np.gcd.reduce(k) / examples  # the lattice of resampled means
        assert ours[0] == pytest.approx(scale * theirs.low, abs=1.01 * step)
        assert ours[1] == pytest.approx(scale * theirs.high, abs=1.01 * step)
        assert ours[1] - ours[0] > 30 * step  # the tolerance is small against the interval


def test_the_examples_bootstrap_of_identical_examples_is_the_point():
    flags = Flags(np.full((3, 10), 100.0), np.zeros((3, 10)), True)
    assert example_bootstrap(flags) == (100.0, 100.0)


def test_mcnemar_per_pair_is_statsmodels_exact_test():
    from statsmodels.stats.contingency_tables import mcnemar

    rng = np.random.default_rng(0)
    tables = [(0, 0), (0, 5), (7, 0), (3, 3), (1, 30)]
    tables += [tuple(int(x) for x in rng.integers(0, 60, 2)) for _ in range(300)]
    for only_a, only_b in tables:
        table = [[int(rng.integers(0, 100)), only_a], [only_b, int(rng.integers(0, 100))]]
        assert mcnemar_p(only_a, only_b) == pytest.approx(
            mcnemar(table, exact=True).pvalue, rel=1e-12, abs=1e-300
        )


def _convolved_p(pairs: list[tuple[int, int]]) -> float:
    """Independently: the exact null law of Σ b_s, the convolution of each pair's
    Bin(n_s, 1/2) in rationals, then McNemar's two-sided convention (twice the lower
    tail at the smaller pooled count, at most 1)."""
    law = [Fraction(1)]
    for b, c in pairs:
        n = b + c
        pmf = [Fraction(math.comb(n, k), 2**n) for k in range(n + 1)]
        out = [Fraction(0)] * (len(law) + n)
        for i, p in enumerate(law):
            for k, q in enumerate(pmf):
                out[i + k] += p * q
        law = out
    smaller = min(sum(b for b, _ in pairs), sum(c for _, c in pairs))
    return float(min(Fraction(1), 2 * sum(law[: smaller + 1])))


def test_the_combined_mcnemar_test_is_the_exact_law_of_the_pooled_count():
    rng = np.random.default_rng(1)
    for _ in range(60):
        pairs = [tuple(int(x) for x in rng.integers(0, 25, 2)) for _ in range(rng.integers(1, 6))]
        assert combined_mcnemar_p(pairs) == pytest.approx(_convolved_p(pairs), rel=1e-10)
    assert combined_mcnemar_p([]) is None
    assert combined_mcnemar_p([(0, 0), (0, 0)]) == 1.0


def test_discordant_counts_are_per_pair_only_a_right_and_only_b_right():
    a = np.array([[100, 100, 0, 0], [0, 100, 100, 0]], dtype=float)
    b = np.array([[100, 0, 100, 100], [0, 0, 0, 100]], dtype=float)
    assert discordant_counts(Flags(a, b, True)) == ((1, 2), (2, 1))


def test_the_residual_mean_square_is_the_two_way_anovas():
    import pandas as pd
    import statsmodels.formula.api as smf
    from statsmodels.stats.anova import anova_lm

    rng = np.random.default_rng(2)
    matrix = 100.0 * (rng.random((4, 30)) < 0.7) - 100.0 * (rng.random((4, 30)) < 0.6)
    frame = pd.DataFrame(
        [(s, i, matrix[s, i]) for s in range(4) for i in range(30)], columns=["s", "i", "y"]
    )
    table = anova_lm(smf.ols("y ~ C(s) + C(i)", frame).fit())
    assert residual_mean_square(matrix) == pytest.approx(table.loc["Residual", "mean_sq"])


def test_satterthwaite_of_two_terms_is_welchs_degrees_of_freedom():
    a, b = [70.0, 72.5, 71.0, 74.0], [69.0, 75.0, 70.5]
    va, vb = np.var(a, ddof=1) / 4, np.var(b, ddof=1) / 3
    assert satterthwaite([(va, 3), (vb, 2)]) == pytest.approx(welch(a, b).df)
    assert satterthwaite([(0.0, 3), (0.0, 100)]) is None


@pytest.mark.parametrize("paired", [True, False])
def test_the_two_terms_estimate_the_crossed_models_variance_without_bias(paired):
    """e[s, i] = α_s + β_i + γ_si with known variances (normal, so nothing but the
    estimator is tested): over 4,000 draws the mean example term is σ_β²/N and the
    mean sum is Var(D), each within 4 Monte-Carlo standard errors."""
    rng = np.random.default_rng(3)
    n, examples, draws = 4, 50, 4000
    sa, sb, sg = 2.0, 6.0, 10.0
    example_terms, totals, diffs = [], [], []
    for _ in range(draws):
        beta = rng.normal(0, sb, examples)
        if paired:
            e = rng.normal(0, sa, (n, 1)) + beta + rng.normal(0, sg, (n, examples))
            flags = Flags(e, np.zeros_like(e), True)
        else:  # B's trials carry nothing of the examples: β is A's alone
            a = rng.normal(0, sa, (n, 1)) + beta + rng.normal(0, sg, (n, examples))
            b = rng.normal(0, sa, (n, 1)) + rng.normal(0, sg, (n, examples))
            flags = Flags(a, b, False)
        terms = variance_terms(flags)
        assert terms is not None
        seed_terms, example_parts = terms
        example_term = sum(v for v, _ in example_parts)  # unclipped: unbiased
        example_terms.append(example_term)
        totals.append(sum(v for v, _ in seed_terms) + example_term)
        diffs.append(float(np.mean(flags.a) - np.mean(flags.b)))
    groups = 1 if paired else 2
    truth = groups * (sa**2 / n + sg**2 / (n * examples)) + sb**2 / examples
    assert np.mean(example_terms) == pytest.approx(
        sb**2 / examples, abs=4 * np.std(example_terms) / math.sqrt(draws)
    )
    assert np.mean(totals) == pytest.approx(truth, abs=4 * np.std(totals) / math.sqrt(draws))
    assert np.var(diffs) == pytest.approx(truth, rel=4 * math.sqrt(2 / draws))


def test_one_seed_leaves_the_seeds_x_examples_interval_undefined():
    flags = _flags(np.random.default_rng(4), 1, 40)
    assert seeds_by_examples(flags) is None
    stats = example_stats(flags)
    assert stats.low is not None and stats.combined_low is None and stats.p_combined is None


def test_resolution_is_t_on_examples_minus_one_times_the_example_terms_root():
    from scipy import stats

    assert resolution(0.25, 189, 0.95) == pytest.approx(stats.t.ppf(0.975, 188) * 0.5)
    assert resolution(None, 189, 0.95) is None


# --- which trials, which examples ----------------------------------------------------


def _trial(group: str, seed: int, correct: list[int], step: int = 100) -> CountedTrial:
    framework, init, method = group.split("/")
    value = 100.0 * sum(correct) / len(correct)
    return CountedTrial(
        run_id=f"{group}-{seed}", run_name=f"{group}-s{seed}", trial_key=f"{group}-{seed}",
        group=group, framework=framework, init=init, method=method, variant="", seed=seed,
        best_valid=value, best_step=step, best_epoch=1.0, test_value=value, wall_time=1.0,
        trainable_params=10, predictions=("test",),
    )  # fmt: skip


def _split(correct: list[int], ids: list[int] | None = None, step: int = 100) -> SplitPredictions:
    ids = ids if ids is not None else list(range(len(correct)))
    best = CheckpointPredictions(step, tuple(correct), (0.9,) * len(correct), tuple(correct))
    return SplitPredictions("test", "classification", tuple(ids), {"best": best})


A, B = "fairseq/pretrained/full", "hf/pretrained/full"
CORRECT = {
    (A, 1): [1, 1, 0, 1, 0, 1],
    (A, 2): [1, 0, 1, 1, 0, 1],
    (B, 1): [1, 1, 0, 0, 0, 1],
    (B, 2): [0, 1, 1, 1, 0, 0],
}


def _setup():
    trials = [_trial(g, s, c) for (g, s), c in CORRECT.items()]
    predictions = {t.run_id: _split(CORRECT[(t.group, t.seed)]) for t in trials}
    c = comparison("framework", A, B, n_a=2, n_b=2, n_pairs=2)
    diff = (
        sum(t.test_value for t in trials if t.group == A) / 2
        - sum(t.test_value for t in trials if t.group == B) / 2
    )
    return trials, predictions, replace(c, diff=diff, mean_a=0.0, mean_b=0.0)


def test_paired_flags_pair_by_seed_and_align_by_example_id():
    trials, predictions, c = _setup()
    order = [3, 0, 5, 1, 4, 2]  # B's seed-2 file lists its examples in another order
    shuffled = [CORRECT[(B, 2)][i] for i in order]
    predictions[f"{B}-2"] = _split(shuffled, order)
    flags = comparison_flags(c, _by_group(trials), predictions)
    assert isinstance(flags, Flags)
    assert flags.b[1].tolist() == [100.0 * x for x in CORRECT[(B, 2)]]
    stats = example_stats(flags)
    assert stats.discordant == ((1, 0), (2, 1))
    assert stats.examples == 6


def _by_group(trials):
    out: dict[str, list[CountedTrial]] = {}
    for t in trials:
        out.setdefault(t.group, []).append(t)
    return out


def test_trials_without_predictions_leave_the_comparison_as_it_was_or_say_why():
    trials, predictions, c = _setup()
    assert with_test_set([c], trials, {}, "test_accuracy") == [c]
    assert with_test_set([c], trials, predictions, "test_macro_f1") == [c]  # not a mean
    partial = {k: v for k, v in predictions.items() if k != f"{A}-1"}
    (out,) = with_test_set([c], trials, partial, "test_accuracy")
    assert out.test_set is None and "1 of 4 trials hold no test predictions" in out.note
    other_step = {**predictions, f"{A}-1": _split(CORRECT[(A, 1)], step=50)}
    (out,) = with_test_set([c], trials, other_step, "test_accuracy")
    assert out.test_set is None and "not of the checkpoint it is counted at" in out.note
    other_ids = {**predictions, f"{A}-1": _split(CORRECT[(A, 1)], [9, 1, 2, 3, 4, 5])}
    (out,) = with_test_set([c], trials, other_ids, "test_accuracy")
    assert out.test_set is None and "not over the same examples" in out.note
    (out,) = with_test_set([c], trials, predictions, "test_accuracy")
    assert out.test_set is not None and out.note == c.note


def _stats(example_variance: float, examples: int = 189) -> TestSetStats:
    return TestSetStats(
        examples=examples, low=-1.0, high=1.0, p_mcnemar=0.5, discordant=((3, 4),),
        seed_variance=0.5, example_variance=example_variance, df=30.0, combined_low=-2.0,
        combined_high=2.0, p_combined=0.6,
    )  # fmt: skip


def test_below_the_resolution_the_note_says_so_and_seeds_needed_is_withheld():
    level = 0.975
    below = comparison("framework", A, B, diff=0.17, seeds_needed=238, decision_level=level)
    above = replace(below, diff=2.5)
    x = resolution(0.25, 189, level)
    assert x is not None and 0.17 < x < 2.5
    out = with_resolution(
        [replace(below, test_set=_stats(0.25)), replace(above, test_set=_stats(0.25))], False
    )
    words = f"with 189 test examples, no number of seeds decides a difference below ±{x:.2f} points"
    assert out[0].seeds_needed is None and words in out[0].note
    assert out[0].test_set is not None and out[0].test_set.below_resolution
    assert out[0].test_set.withheld == BELOW and out[0].test_set.resolution_level == level
    assert out[1].seeds_needed == 238 and "no number of seeds" not in out[1].note
    assert out[1].test_set is not None and not out[1].test_set.below_resolution
    assert with_resolution([below], False) == [below]  # no predictions: as it was
    (alone,) = with_resolution([below], True)
    assert "decided by the seeds alone" in alone.note


def test_population_seeds_needed_is_where_the_normal_power_reaches_the_target():
    from scipy.special import ndtr, ndtri

    from sweeper.summarize.resolution import population_seeds

    def power_at(n: int, stats: TestSetStats, diff: float, level: float) -> float:
        se = math.sqrt(stats.seed_variance * 3 / n + stats.example_variance)
        return float(ndtr(abs(diff) / se - ndtri(1 - level / 2)))

    c = comparison("framework", A, B, diff=2.0, n_pairs=3)
    stats = replace(_stats(0.1), seed_variance=1.5)
    needed, why = population_seeds(replace(c, test_set=stats), 0.0125, 0.8)
    assert why is None and needed is not None
    assert power_at(needed, stats, 2.0, 0.0125) >= 0.8 > power_at(needed - 1, stats, 2.0, 0.0125)
    out_of_reach = replace(stats, example_variance=1.0)  # (2 / (z + z_0.8))² < 1
    assert population_seeds(replace(c, test_set=out_of_reach), 0.0125, 0.8) == (
        None,
        "80% power out of reach with 189 test examples",
    )


def test_the_tables_and_paragraph_say_why_seeds_needed_is_withheld():
    from sweeper.summarize.paragraph import results_paragraph
    from sweeper.summarize.tables import comparisons_table
    from tests.support.summaries import holm_summary

    summary = holm_summary()
    why = "80% power out of reach with 189 test examples"
    undecided = replace(
        summary.comparisons[2],
        seeds_needed=None,
        test_set=replace(_stats(1.0), decides=True, withheld=why, resolution=0.5),
    )
    summary = replace(summary, comparisons=[*summary.comparisons[:2], undecided], population=True)
    table = comparisons_table(summary)
    cells = dict(zip([c.header for c in table.columns], table.text_rows()[2], strict=True))
    assert cells["Seeds needed (80% power)"] == f"n/a ({why})"
    assert cells["Test set (95%, examples)"] == "[-1.00, 1.00]"
    assert cells["Seeds x examples (95%)"] == "[-2.00, 2.00]"
    assert cells["p (McNemar, exact)"] == "0.500"
    assert table.text_rows()[0][-4:-2] == ["n/a", "n/a"]  # no test set there: n/a cells
    assert "(--population: the seeds x examples p and interval" in table.title
    paragraph = results_paragraph(summary)
    assert f"seeds needed is not offered: {why}" in paragraph
    assert "this test set's sampling: 95% interval [-1.00, 1.00] over its 189 examples" in paragraph
