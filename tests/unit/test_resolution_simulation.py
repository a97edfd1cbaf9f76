"""What the test set can resolve, simulated: the rules that decide under their nulls,
their power, and the resolution X as seeds grow.

Each loop draws a test set of 189 examples and seed pairs of trials scored on it
(tools/testset_simulation.py's model: examples nearly always or nearly never right,
A's per-example advantage with mean 0 under the null). A false decision is any
"better"; the rate must stay within alpha ± 3 Monte-Carlo standard errors (1,000
loops: 0.029 to 0.071). The seeds' own paired t and the pooled McNemar count, run on
the same draws where their assumptions fail, are asserted to err more: the test
shows what each rule is for. The full tables are docs/statistics.md's, printed by
`python tools/testset_simulation.py`.
"""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from tools.testset_simulation import (
    ALPHA,
    NULLS,
    null_rate,
    power,
    shrinking,
    true_resolution,
)

LOOPS = 1000
SE = math.sqrt(ALPHA * (1 - ALPHA) / LOOPS)
LOW, HIGH = ALPHA - 3 * SE, ALPHA + 3 * SE


@pytest.mark.parametrize("seeds", [3, 10])
def test_the_seeds_x_examples_interval_holds_alpha_for_the_population(seeds):
    """--population's rule: other seeds and another test set; near alpha."""
    rate = null_rate("seeds x examples", NULLS["population"], seeds, LOOPS)
    assert LOW <= rate <= HIGH, f"{rate:.4f} false decisions"


def test_the_seeds_alone_decide_the_populations_null_more_often_the_more_seeds():
    """The paired t over seeds is about this test set: at 20 seeds it errs well past
    alpha for the population, as the test set's own sampling becomes what is left."""
    assert null_rate("paired t", NULLS["population"], 20, LOOPS) > HIGH


@pytest.mark.parametrize("seeds", [5, 20])
def test_the_combined_mcnemar_test_holds_alpha_under_its_null(seeds):
    """Trials fixed (A and B of a seed share their luck) and equally good example by
    example: the pooled discordant count is binomial, the test exact (at most alpha)."""
    rate = null_rate("McNemar", NULLS["fixed trials"], seeds, LOOPS)
    assert rate <= HIGH, f"{rate:.4f} false decisions"


def test_the_pooled_mcnemar_count_is_overdispersed_where_examples_favour_one_side():
    """Equally good trials that differ in which examples they get right: the pairs share
    their examples, so the pooled count is no longer binomial (the docstring's caveat),
    while the examples bootstrap, which resamples examples whole, stays near alpha."""
    setting = NULLS["fixed trials, per-example δ"]
    assert null_rate("McNemar", setting, 20, LOOPS) > HIGH
    assert null_rate("examples bootstrap", setting, 20, 300) <= ALPHA + 3 * math.sqrt(
        ALPHA * (1 - ALPHA) / 300
    )


def test_power_of_the_seeds_x_examples_interval_grows_with_seeds_above_the_resolution():
    """A true difference of 2.4 points (X = 1.4): decided in most loops at 20 seeds; a
    true difference of 0.6, below X, is rarely decided however many seeds there are."""
    above = replace(NULLS["population"], effect=0.2)
    assert power("seeds x examples", above, 20, 400) >= 0.5
    assert power("seeds x examples", above, 3, 400) < power("seeds x examples", above, 20, 400)
    below = replace(NULLS["population"], effect=0.05)
    assert power("seeds x examples", below, 20, 400) < 0.2


def test_at_many_seeds_the_seeds_interval_shrinks_and_the_test_sets_does_not():
    """On fixed test sets, from 3 to 300 seeds: the seeds' paired t half-width falls
    far below the population's X, the examples bootstrap's and the seeds x examples
    half-widths fall to X and stay there, and X's estimate is X."""
    x = true_resolution(NULLS["population"])
    few, many = shrinking(NULLS["population"], (3, 300), sets=20)
    assert many["paired t"] < 0.4 * x < few["paired t"]
    assert many["seeds x examples"] == pytest.approx(x, rel=0.12)
    assert many["examples bootstrap"] == pytest.approx(x, rel=0.12)
    assert few["examples bootstrap"] > 1.5 * x
    assert many["X"] == pytest.approx(x, rel=0.12)
    assert few["X"] == pytest.approx(x, rel=0.35)  # noisy at 3 seeds, not biased far
