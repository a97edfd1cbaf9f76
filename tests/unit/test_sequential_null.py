"""The `--until-decided` rule under the null: its false-decision rate over every look.

For each schedule (grid seeds + seeds per look up to --max-seeds) and each shape of
seed differences with mean 0 (normal, and a centred gamma of shape 4: skewness 1),
2,000 simulated loops run the shipped rule (`walk_looks` at level alpha / m) look by
look, as `sweeper run --until-decided` does: a comparison stops at its first decision,
an undecided one gets seeds until --max-seeds. A false decision is any "better" (the
true difference is 0). The family of four holds four independent comparisons, all
null. The rate must stay within alpha + 3 Monte-Carlo standard errors (0.0646 at 2,000
loops). The old rule (the fixed-n paired t re-run at every look, Holm over the family,
stop at the first adjusted p < alpha) runs on the same draws, and its inflation is
asserted too, so the test shows what the rule fixes. The simulation itself lives in
tools/sequential_simulation.py, which also prints docs/architecture.md's tables.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from sweeper.summarize.records import SequentialPlan
from sweeper.summarize.sequential import interval
from tools.sequential_simulation import ALPHA, SCHEDULES, null_rates

LOOPS = 2000
BOUND = ALPHA + 3 * math.sqrt(ALPHA * (1 - ALPHA) / LOOPS)


@pytest.mark.parametrize("shape", ["normal", "skewed"])
@pytest.mark.parametrize("family", [1, 4])
@pytest.mark.parametrize("schedule", SCHEDULES, ids=lambda s: f"{s[0]}+{s[1]}to{s[2]}")
def test_false_decisions_stay_at_alpha_over_every_look(shape, family, schedule):
    rate, old_rate = null_rates(shape, family, schedule, LOOPS)
    assert rate <= BOUND, f"shipped rule: {rate:.4f} false decisions"
    assert old_rate > BOUND, f"the old rule's rate {old_rate:.4f} should be inflated"


def test_the_interval_covers_a_nonzero_truth_at_every_look_at_once():
    """The confidence sequence holds any true difference, not only 0: 2,000 loops of
    normal differences with mean 1.5 and sd 2 over 3+1 to 20; the interval intersected
    over the looks so far must miss 1.5 at some look in at most alpha + 3 SE of them."""
    looks = SequentialPlan(start=3, batch=1, max_seeds=20, alpha=ALPHA).looks()
    rng = np.random.default_rng(7)
    x = 1.5 + 2.0 * rng.standard_normal((LOOPS, 20))
    missed = 0
    for row in x:
        low, high = -math.inf, math.inf
        for n in looks:
            this_low, this_high = interval(list(row[:n]), ALPHA)
            low, high = max(low, this_low), min(high, this_high)
            if not low <= 1.5 <= high:
                missed += 1
                break
    assert missed / LOOPS <= BOUND
