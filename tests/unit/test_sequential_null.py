"""The `--until-decided` rules under the null, and the power of the group-sequential one.

For each schedule (grid seeds + seeds per look up to --max-seeds), each shape of seed
differences with mean 0 (normal, and Student's t with 3 df: heavy tails) and a family
of one or four independent null comparisons, 2,000 simulated loops run a shipped rule
(`walk_looks`) look by look, as `sweeper run --until-decided` does, and the fixed-n
paired t at --max-seeds with Holm over the family (a grid of that many seeds). A false decision is
any "better". The rate must stay within alpha + 3 Monte-Carlo standard errors (0.0646
at 2,000 loops). The old rule (the fixed-n paired t re-run at every look, Holm over
the family, stop at the first adjusted p < alpha) runs on the same draws and its
inflation is asserted, so the test shows what the rules fix. The simulation lives in
tools/sequential_simulation.py, which prints docs/statistics.md's tables (skewed
shapes included: there the t-based rules do not hold, which the docs say).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from sweeper.summarize.records import SequentialPlan
from sweeper.summarize.sequential import interval, look_radii
from tools.sequential_simulation import ALPHA, SCHEDULES, null_rate, power

LOOPS = 2000
BOUND = ALPHA + 3 * math.sqrt(ALPHA * (1 - ALPHA) / LOOPS)


@pytest.mark.parametrize("shape", ["normal", "t3"])
@pytest.mark.parametrize("family", [1, 4])
@pytest.mark.parametrize("schedule", SCHEDULES, ids=lambda s: f"{s[0]}+{s[1]}to{s[2]}")
def test_false_decisions_stay_at_alpha_over_every_look(shape, family, schedule):
    for rule in ("group-sequential", "anytime-valid", "fixed-n t"):
        rate = null_rate(shape, family, schedule, LOOPS, rule)
        assert rate <= BOUND, f"{rule}: {rate:.4f} false decisions"
    old = null_rate(shape, family, schedule, LOOPS, "old")
    if shape == "normal":
        assert old > BOUND, f"the old rule's rate {old:.4f} should be inflated"


@pytest.mark.parametrize(("family", "least"), [(1, 0.55), (4, 0.30)])
def test_group_sequential_power_at_one_sd(family, least):
    """3+3 to 9 seeds, a true difference of one sd of the seed differences on one
    comparison of the family: the issue's floor (the anytime-valid rule had 0.23
    and 0.08; the fixed-n t at 9 seeds has about 0.75 and 0.47)."""
    share, seeds = power(1.0, family, (3, 3, 9), LOOPS, "group-sequential")
    assert share >= least
    assert seeds < 9  # some loops stop early


def test_the_repeated_intervals_cover_a_nonzero_truth_at_every_look_at_once():
    """Either rule's interval, intersected over the looks so far, holds any true
    difference, not only 0: 2,000 loops of normal differences with mean 1.5 and sd 2
    over 3+1 to 20 must miss 1.5 at some look in at most alpha + 3 SE of them."""
    looks = SequentialPlan(start=3, batch=1, max_seeds=20, alpha=ALPHA).looks()
    rng = np.random.default_rng(7)
    x = 1.5 + 2.0 * rng.standard_normal((LOOPS, 20))
    for planned in (20, None):
        radii = look_radii(list(looks), ALPHA, planned)
        missed = 0
        for row in x:
            low, high = -math.inf, math.inf
            for n, c in zip(looks, radii, strict=True):
                half = c * row[:n].std(ddof=1) / math.sqrt(n)
                low, high = max(low, row[:n].mean() - half), min(high, row[:n].mean() + half)
                if not low <= 1.5 <= high:
                    missed += 1
                    break
        assert missed / LOOPS <= BOUND, (planned, missed / LOOPS)
    assert interval([1.0, 2.0], ALPHA) == (-math.inf, math.inf)
