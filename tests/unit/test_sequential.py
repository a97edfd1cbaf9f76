"""The anytime-valid rule's parts against known answers, and its decisions on records."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import integrate, stats
from test_summarize_stats import trial

from sweeper.summarize.compare import compare
from sweeper.summarize.decide import decide
from sweeper.summarize.records import ANYTIME_METHOD, GROUP_SEQUENTIAL_METHOD, SequentialPlan
from sweeper.summarize.sequential import (
    PRIOR_SCALES,
    decide_sequential,
    interval,
    log_e_value,
    radius,
    rule_of,
    walk_looks,
)
from sweeper.summarize.stats import group_stats


def _bayes_factor_by_integration(t: float, n: int, g: float) -> float:
    """The t-test Bayes factor with a N(0, g) prior on the standardized effect, from
    scipy's noncentral t density integrated over the prior (no closed form used)."""
    nu = n - 1

    def integrand(delta: float) -> float:
        return stats.nct.pdf(t, nu, delta * math.sqrt(n)) * stats.norm.pdf(delta, 0, math.sqrt(g))

    width = 12 * math.sqrt(g)
    top, _ = integrate.quad(integrand, -width, width, limit=400, points=[t / math.sqrt(n)])
    return top / stats.t.pdf(t, nu)


@pytest.mark.parametrize(("t", "n"), [(0.0, 3), (1.7, 3), (-4.2, 5), (3.1, 9), (2.2, 20)])
def test_e_value_is_the_mixture_of_t_test_bayes_factors(t, n):
    expected = np.mean([_bayes_factor_by_integration(t, n, g) for g in PRIOR_SCALES])
    assert math.exp(log_e_value(t, n)) == pytest.approx(expected, rel=1e-5)


def test_radius_is_where_the_e_value_reaches_one_over_the_level():
    for n, level in [(3, 0.05), (4, 0.0125), (10, 0.01)]:
        c = radius(n, level)
        assert math.exp(log_e_value(c, n)) == pytest.approx(1 / level, rel=1e-9)
    assert radius(2, 0.05) == math.inf  # two seeds can never reach e = 20
    assert radius(3, 0.0125) == math.inf  # nor three at a family of four's level


def test_interval_is_mean_plus_minus_radius_standard_errors():
    d = [2.0, 3.0, 5.0, 4.0]
    low, high = interval(d, 0.05)
    half = radius(4, 0.05) * stats.tstd(d) / 2
    assert (low, high) == pytest.approx((3.5 - half, 3.5 + half))
    assert interval([1.0, 2.0], 0.05) == (-math.inf, math.inf)


def test_walk_stops_at_the_first_look_that_decides_and_intersects():
    looks = [[9.0, 11.0, 10.0], [9.0, 11.0, 10.0, 10.5, 9.5, 10.0]]
    walk = walk_looks(looks, 0.05)
    assert walk.verdict == "A" and walk.look == 1 and walk.n == 3
    # an equivalence margin: a tight interval around 0 stops as equivalent
    near = [[0.1, -0.1, 0.05, -0.05, 0.0, 0.02, -0.02, 0.01]]
    assert walk_looks(near, 0.05, margin=1.0).verdict == "equivalent"
    assert walk_looks(near, 0.05).verdict is None
    # the intersection over looks never widens
    wide = walk_looks([[1.0, -3.0, 2.0], [1.0, -3.0, 2.0, 0.5, -0.2, 8.0]], 0.05)
    first = interval([1.0, -3.0, 2.0], 0.05)
    assert wide.low >= first[0] and wide.high <= first[1]


def test_plan_looks_end_at_max_seeds():
    assert SequentialPlan(3, 3, 9, 0.05).looks() == (3, 6, 9)
    assert SequentialPlan(3, 2, 8, 0.05).looks() == (3, 5, 7, 8)
    assert SequentialPlan(3, 3, 3, 0.05).looks() == (3,)
    plan = SequentialPlan(3, 3, 9, 0.05, margin=2.0)
    assert SequentialPlan.from_dict(plan.to_dict()) == plan
    asked = SequentialPlan(3, 1, 9, 0.05)
    assert plan.differences(asked) == ["batch: 3 -> 1", "margin: 2.0 -> None"]


def _pairs(a_values, b_values, a="fairseq/pretrained/full", b="fairseq/random/full"):
    seeds = range(1, len(a_values) + 1)
    return [
        *(trial(a, s, v) for s, v in zip(seeds, a_values, strict=True)),
        *(trial(b, s, v) for s, v in zip(seeds, b_values, strict=True)),
    ]


def test_sequential_decision_on_records_names_look_and_interval():
    """Six seeds: at three the family-of-one level 0.05 already decides (t ≈ 22)."""
    a = [74.0, 73.5, 75.0, 74.5, 73.0, 74.0]
    b = [50.0, 49.0, 51.5, 49.5, 50.5, 48.0]
    trials = _pairs(a, b)
    plan = SequentialPlan(3, 3, 9, 0.05, method=ANYTIME_METHOD)
    (c,) = decide_sequential(compare(group_stats(trials), trials), trials, plan, [1, 2, 3, 4, 5, 6])
    assert c.decision == "fairseq/pretrained/full better" and c.rule == "anytime-valid"
    assert (c.look, c.n_decision, c.p_holm) == (1, 3, None)
    low, high = interval([x - y for x, y in zip(a[:3], b[:3], strict=True)], 0.05)
    assert (c.decision_low, c.decision_high) == pytest.approx((low, high))
    assert c.decision_level == pytest.approx(0.95)


def test_group_sequential_decision_reads_the_repeated_interval_of_its_look():
    """A recorded group-sequential plan (3+3 to 9): look 1 on 3 pairs spends almost
    nothing (nominal level 2.1e-4: t on 2 df must pass ~69), look 2 on 6 pairs decides
    from mean ± t_5(1 - p_2 / 2) · s / √6 at rpact's second boundary 2.511427."""
    a = [72.0, 71.0, 74.0, 73.0, 71.0, 72.5]
    b = [70.0, 70.5, 71.0, 71.5, 69.0, 70.0]
    trials = _pairs(a, b)
    plan = SequentialPlan(3, 3, 9, 0.05)
    assert plan.method == GROUP_SEQUENTIAL_METHOD  # new plans get the group-sequential rule
    (c,) = decide_sequential(compare(group_stats(trials), trials), trials, plan, range(1, 7))
    assert c.rule == "group-sequential" and (c.look, c.n_decision) == (2, 6)
    d = np.array(a) - np.array(b)
    half = stats.t.ppf(1 - stats.norm.sf(2.511427), 5) * stats.tstd(d) / math.sqrt(6)
    first = interval_at_look(d[:3], stats.norm.sf(3.710303) * 2)
    low, high = max(first[0], d.mean() - half), min(first[1], d.mean() + half)
    assert (c.decision_low, c.decision_high) == pytest.approx((low, high), rel=1e-5)
    assert c.decision == "fairseq/pretrained/full better" and low > 0


def interval_at_look(d, level):
    half = stats.t.ppf(1 - level / 2, len(d) - 1) * stats.tstd(d) / math.sqrt(len(d))
    return d.mean() - half, d.mean() + half


def test_pairs_past_the_recorded_plan_fall_back_to_the_anytime_valid_rule():
    looks = [[1.0, 2.0, 1.5], [1.0, 2.0, 1.5, 1.2, 1.8, 1.1]]
    assert walk_looks(looks, 0.05, planned=3) == walk_looks(looks, 0.05)  # 6 pairs > 3
    assert walk_looks(looks, 0.05, planned=6) != walk_looks(looks, 0.05)
    assert rule_of(SequentialPlan(3, 3, 3, 0.05), 6) == "anytime-valid"
    assert rule_of(SequentialPlan(3, 3, 6, 0.05), 6) == "group-sequential"


def test_sequential_undecided_reports_the_last_look_and_seeds_to_decide():
    a = [70.0, 71.0, 69.0, 70.5, 70.2, 69.8]
    b = [69.0, 71.5, 68.0, 70.0, 70.9, 69.0]
    trials = _pairs(a, b)
    plan = SequentialPlan(3, 3, 9, 0.05, margin=0.5)
    (c,) = decide_sequential(compare(group_stats(trials), trials), trials, plan, range(1, 7))
    assert c.decision == "undecided" and (c.look, c.n_decision) == (2, 6)
    assert c.seeds_needed is not None and c.seeds_needed > 6
    assert c.equivalent_within == pytest.approx(max(-c.decision_low, c.decision_high))


def test_fixed_n_margin_decides_equivalence_by_the_bonferroni_interval():
    """A t interval at 1 - alpha (a family of one) inside ±1 decides equivalence; the
    same interval is statsmodels' TOST at alpha / 2."""
    from statsmodels.stats.weightstats import ttost_paired

    a = [80.0, 80.2, 79.9, 80.1, 80.0, 79.8]
    b = [80.1, 80.0, 80.0, 80.2, 79.9, 79.9]
    trials = _pairs(a, b)
    (c,) = decide(compare(group_stats(trials), trials), trials, margin=1.0)
    assert c.decision == "equivalent within ±1" and c.rule == "interval"
    p_tost = ttost_paired(np.array(a), np.array(b), -1.0, 1.0)[0]
    assert p_tost < 0.025  # TOST at alpha / 2 agrees
    assert c.decision_level == pytest.approx(0.95)
    diff = np.array(a) - np.array(b)
    half = stats.t.ppf(0.975, 5) * stats.tstd(diff) / math.sqrt(6)
    assert (c.decision_low, c.decision_high) == pytest.approx(
        (diff.mean() - half, diff.mean() + half)
    )
    (plain,) = decide(compare(group_stats(trials), trials), trials)
    assert plain.rule == "Holm" and plain.decision == "undecided"
    assert plain.equivalent_within == pytest.approx(c.equivalent_within)


def test_two_seeds_without_spread_decide_nothing():
    """Both seeds +100: paired t gives p = 0; no exact test on two pairs goes below 0.5."""
    trials = _pairs([100.0, 100.0], [0.0, 0.0])
    (c,) = decide(compare(group_stats(trials), trials, bounds=(-100.0, 100.0)), trials)
    assert c.p_value == 0.5 and c.decision == "undecided"
    assert (c.ci_low, c.ci_high) == (100.0, 100.0)
    assert (c.decision_low, c.decision_high) == (None, None)


def test_intervals_respect_the_metrics_range():
    trials = _pairs([95.0, 99.0, 100.0], [2.0, 0.0, 1.0])
    groups = {g.group: g for g in group_stats(trials, bounds=(0.0, 100.0))}
    assert groups["fairseq/pretrained/full"].ci_high == 100.0
    assert groups["fairseq/random/full"].ci_low == 0.0
    (c,) = compare(list(groups.values()), trials, bounds=(-100.0, 100.0))
    assert -100.0 <= c.ci_low <= c.ci_high <= 100.0


@pytest.mark.parametrize("planned", [None, 3, 9])
def test_ties_decide_only_where_the_exact_test_does(planned):
    """[1, 1, 1] is one point, [1, 1, 1]: no interval around it should decide, since the
    exact sign-flip p of three equal differences is 0.25; [0, 0, 0] is not
    "equivalent within ±0.01" (each one-sided exact p is 1/8). Nine equal differences
    (exact p 2/512) do decide, under either rule."""
    assert walk_looks([[1.0, 1.0, 1.0]], 0.05, planned=planned).verdict is None
    assert walk_looks([[0.0, 0.0, 0.0]], 0.05, margin=0.01, planned=planned).verdict is None
    if planned != 3:
        nine = [[1.0] * 3, [1.0] * 6, [1.0] * 9]
        assert walk_looks(nine, 0.05, planned=planned).verdict == "A"


def test_lattice_differences_at_the_margin_are_rarely_declared_equivalent_sequentially():
    """Differences of 0 or +1 point, probability 1/2 each (true mean 0.5 = the margin:
    "equivalent within ±0.5" is false), a 3+3 to 9 plan: at most alpha + 3 SE of the
    loops declare it (the rule without the exact gate did at [0, 0, 0]: 12.5%)."""
    rng = np.random.default_rng(12)
    loops, declared = 2000, {None: 0, 9: 0}
    looks = SequentialPlan(3, 3, 9, 0.05).looks()
    for _ in range(loops):
        d = list(rng.integers(0, 2, size=9).astype(float))
        for planned in declared:
            walk = walk_looks([d[:n] for n in looks], 0.05, margin=0.5, planned=planned)
            declared[planned] += walk.verdict == "equivalent"
    bound = 0.05 + 3 * math.sqrt(0.05 * 0.95 / loops)
    assert all(n / loops <= bound for n in declared.values()), declared


def test_a_resume_keeps_the_plan_and_may_only_raise_max_seeds():
    recorded = SequentialPlan(3, 3, 9, 0.05, margin=2.0, method=ANYTIME_METHOD)
    same = SequentialPlan(3, 3, 9, 0.05, margin=2.0)  # a new run's default rule
    assert recorded.resumed_as(same) == recorded  # the recorded rule stays
    raised = recorded.resumed_as(SequentialPlan(3, 3, 15, 0.05, margin=2.0))
    assert (raised.max_seeds, raised.extended_to, raised.method) == (9, 15, ANYTIME_METHOD)
    assert raised.looks() == (3, 6, 9, 12, 15)
    with pytest.raises(ValueError, match="batch: 3 -> 1"):
        recorded.resumed_as(SequentialPlan(3, 1, 9, 0.05, margin=2.0))
    with pytest.raises(ValueError, match="max_seeds: 9 -> 6"):
        recorded.resumed_as(SequentialPlan(3, 3, 6, 0.05, margin=2.0))
