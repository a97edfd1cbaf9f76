"""Fixed-seed decisions (rules `Holm` and `interval`): exact at ties, one interval per
decision, Wilcoxon reachability after zeros."""

from __future__ import annotations

import numpy as np
import pytest
from statsmodels.stats.multitest import multipletests
from test_summarize_stats import trial

from sweeper.summarize.compare import compare
from sweeper.summarize.decide import UNDECIDED, decide, holm, holm_levels
from sweeper.summarize.stats import group_stats, sign_flip_min_n, wilcoxon_p

A, B = "fairseq/pretrained/full", "fairseq/random/full"


def _paired(differences, base: float = 70.0, a: str = A, b: str = B):
    return [
        *(trial(a, s, base + d) for s, d in enumerate(differences, 1)),
        *(trial(b, s, base) for s, _ in enumerate(differences, 1)),
    ]


def _decide(trials, **kwargs):
    return decide(compare(group_stats(trials), trials), trials, **kwargs)


# --- exact at ties ---------------------------------------------------------------------


@pytest.mark.parametrize("margin", [None, 2.0])
def test_three_equal_differences_decide_nothing(margin):
    """[1, 1, 1]: the exact sign-flip p is 2/8 = 0.25, so neither rule decides."""
    (c,) = _decide(_paired([1.0, 1.0, 1.0]), margin=margin)
    assert c.p_sign_flip == pytest.approx(0.25)
    assert c.decision == UNDECIDED
    assert c.seeds_needed is None  # no spread: no effect size to plan from


def test_three_zero_differences_are_not_equivalent_within_a_tiny_margin():
    """[0, 0, 0] within ±0.01: each one-sided sign-flip test's p is at least 1/8."""
    (c,) = _decide(_paired([0.0, 0.0, 0.0]), margin=0.01)
    assert c.decision == UNDECIDED and not c.decision.startswith("equivalent")


def test_six_equal_differences_decide_where_the_exact_test_does():
    """[1] * 6: exact p = 2/64 < 0.05; the interval is the point, printed as such."""
    (c,) = _decide(_paired([1.0] * 6))
    assert c.p_sign_flip == pytest.approx(2 / 64)
    assert c.decision == f"{A} better"
    assert c.decision_low == c.decision_high == pytest.approx(1.0)


def test_with_spread_the_t_rule_decides_and_the_exact_p_stands_beside_it():
    """Three large differences with spread: paired t p = 0.006 < 0.05 decides; the
    gate is for ties only, and the exact p (0.25, the least three pairs can give) is
    reported beside the decision for the reader to weigh."""
    (c,) = _decide(_paired([10.0, 11.0, 12.0]))
    assert c.p_holm < 0.05 and c.p_sign_flip == pytest.approx(0.25)
    assert c.decision == f"{A} better" and c.decision_low > 0
    assert sign_flip_min_n(0.05) == 6  # the pairs a tie needs to be decided


def test_lattice_differences_at_the_margin_are_rarely_declared_equivalent():
    """Differences of 0 or +1 point with probability 1/2 each (true mean 0.5), margin
    0.5: the null of the equivalence test holds, so "equivalent within ±0.5" may be
    declared at most alpha of the time (+3 standard errors of the simulation). At fixed
    n the t interval alone holds this too (0-2%); the issue's 12.5% was the sequential
    rule's at [0, 0, 0], which applies the same gate (`decide.exact_verdict`)."""
    rng = np.random.default_rng(37)
    runs, alpha = 1500, 0.05
    for n in (3, 6, 9, 12):
        declared = 0
        for _ in range(runs):
            d = rng.integers(0, 2, size=n).astype(float)
            (c,) = _decide(_paired(list(d)), margin=0.5)
            declared += c.decision.startswith("equivalent")
        se = np.sqrt(alpha * (1 - alpha) / runs)
        assert declared / runs <= alpha + 3 * se, (n, declared / runs)


# --- one interval per decision ------------------------------------------------------------

ISSUE_CASE = [0.6, 0.1, 0.1, 0.6, 2.0, -0.1, 2.5, 1.4]
"""Paired t p = 0.033 on these 8 differences (exact sign-flip p = 0.031)."""


def test_holm_interval_is_read_at_the_level_holm_tested_it():
    """The issue's case: p = p_holm = 0.033 in a family of one, beside a second
    comparison without p (HF has one seed). The interval beside "better" is the 95% t
    interval, which excludes 0; a Bonferroni interval over both comparisons (97.5%)
    did not, and printed "equivalent within" beside "better"."""
    trials = [*_paired(ISSUE_CASE), trial("hf/pretrained/full", 1, 71.0)]
    decided = _decide(trials)
    (c,) = [c for c in decided if c.paired]
    (other,) = [c for c in decided if not c.paired]
    assert other.p_value is None
    assert c.p_value == pytest.approx(0.0331, abs=5e-4) and c.p_holm == c.p_value
    assert c.decision == f"{A} better"
    assert c.decision_level == pytest.approx(0.95)
    assert c.decision_low > 0 and c.equivalent_within is None


def test_holm_levels_against_statsmodels_and_by_hand():
    """Sorted p 0.005, 0.01, 0.03, 0.04 (m = 4): steps at 0.0125, 0.0167, then 0.03 >=
    0.025 stops, so the last two are tested at 0.025; None gets alpha / m."""
    p = [0.01, 0.04, None, 0.03, 0.005]
    assert holm_levels(p, 0.05) == pytest.approx([0.05 / 3, 0.025, 0.0125, 0.025, 0.0125])
    rng = np.random.default_rng(5)
    for _ in range(25):  # multipletests takes 0.05-0.3 s a call
        values = list(rng.uniform(0, 0.1, size=int(rng.integers(1, 7))))
        levels = holm_levels(values, 0.05)
        reject = multipletests(values, alpha=0.05, method="holm")[0]
        assert [v < level for v, level in zip(values, levels, strict=True)] == list(reject)
        assert [h < 0.05 for h in holm(values)] == list(reject)


def test_decision_and_its_interval_never_disagree_over_random_families():
    """Thousands of comparisons in families of 1-4, 3-12 pairs, with and without a
    margin: "better" sits beside an interval that excludes 0 on its side, "equivalent"
    beside one inside ±D, and "equivalent within" is given only where the interval
    holds 0 (never beside "better")."""
    rng = np.random.default_rng(11)
    groups = ["fairseq/pretrained/full", "fairseq/random/full", "hf/pretrained/full"]
    groups.append("hf/random/full")
    checked = decided = 0
    for draw in range(700):
        n = int(rng.integers(3, 13))
        effects = rng.normal(0, 1.5, size=4)
        trials = [
            trial(g, s, 70.0 + effects[i] + float(rng.normal(0, 1)) + 0.3 * s)
            for i, g in enumerate(groups)
            for s in range(1, n + 1)
        ]
        margin = None if draw % 2 else 1.5
        for c in _decide(trials, margin=margin):
            checked += 1
            low, high = c.decision_low, c.decision_high
            if c.decision.endswith("better"):
                decided += 1
                a_higher = c.decision == f"{c.group_a} better"
                assert (low > 0) if a_higher else (high < 0)
                assert c.equivalent_within is None
            elif c.decision.startswith("equivalent"):
                assert -margin < low <= high < margin
            if c.equivalent_within is not None:
                assert low <= 0 <= high and not c.decision.endswith("better")
                assert c.equivalent_within == pytest.approx(max(-low, high))
    assert checked == 2800 and decided > 200  # the check saw decisions of both signs


# --- Wilcoxon after zeros -----------------------------------------------------------------


def test_wilcoxon_reachability_counts_non_zero_differences():
    """[0, 0, 1, 2, 3, 4]: Wilcoxon drops the zeros; on 4 its smallest p is 0.125."""
    assert wilcoxon_p([0, 0, 1, 2, 3, 4], 0.05) is None
    assert wilcoxon_p([0, 0, 1, 2, 3, 4]) == pytest.approx(0.125)
    assert wilcoxon_p([1, 2, 3, 4, 5, 6], 0.05) == pytest.approx(0.03125)
