"""Group-sequential boundaries against rpact, a kept library of the field.

The expected values were printed by rpact 3.3.4 (Debian's r-cran-rpact, R 4.2) on
this project's machine:

    library(rpact)
    getDesignGroupSequential(kMax=3, alpha=0.05, sided=2, typeOfDesign="asOF")$criticalValues

and likewise for each row below (`informationRates` = the look sizes over the last).
rpact's `asOF` is Lan-DeMets O'Brien-Fleming-type spending with alpha / 2 spent on each
side, the design sweeper ships.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from sweeper.summarize.group_sequential import (
    nominal_levels,
    obf_spent,
    t_radius,
    z_boundaries,
)

RPACT = [
    ((1, 2, 3), 0.05, (3.710303, 2.511427, 1.993047)),
    ((1, 2, 3, 4, 5), 0.05, (4.876885, 3.357012, 2.680280, 2.289817, 2.031032)),
    (
        (3, 4, 5, 6, 7, 8, 9, 10),
        0.0125,
        (4.856699, 4.171165, 3.706526, 3.367344, 3.106447, 2.897942, 2.726431, 2.582156),
    ),
    ((3, 4, 6, 10), 0.05, (3.928573, 3.367045, 2.680510, 1.981407)),
    ((3, 5, 8, 10), 0.0125, (4.856699, 3.694940, 2.848391, 2.538915)),
    ((2, 9), 0.01, (5.840207, 2.575829)),
    (
        tuple(range(3, 21)),
        0.05,
        (5.669670, 4.877853, 4.338265, 3.942779, 3.637936, 3.394049, 3.193320, 3.024411,
         2.879738, 2.754020, 2.643454, 2.545222, 2.457191, 2.377710, 2.305478, 2.239457,
         2.178804, 2.122829),
    ),
]  # fmt: skip


@pytest.mark.parametrize(("information", "alpha", "expected"), RPACT)
def test_boundaries_match_rpact(information, alpha, expected):
    assert z_boundaries(information, alpha) == pytest.approx(expected, abs=2e-6)


def test_spending_reaches_alpha_at_the_end_and_rises():
    spent = [obf_spent(t, 0.05) for t in (0.1, 0.3, 0.6, 0.9, 1.0)]
    assert spent == sorted(spent) and spent[-1] == 0.05 and spent[0] < 1e-6


def test_the_boundaries_spend_what_the_function_says_by_simulation():
    """The crossing probability by look k is alpha(t_k), checked by simulating the
    z statistics with their covariance (an independent route: no integration)."""
    information = (3.0, 6.0, 9.0)
    c = np.array(z_boundaries(information, 0.05))
    rng = np.random.default_rng(3)
    steps = rng.standard_normal((400_000, 3)) * np.sqrt(np.diff((0.0, *information)))
    z = np.cumsum(steps, axis=1) / np.sqrt(information)
    crossed = np.maximum.accumulate(np.abs(z) >= c, axis=1).mean(axis=0)
    expected = [obf_spent(i / 9.0, 0.05) for i in information]
    assert crossed == pytest.approx(expected, abs=3 * math.sqrt(0.05 / 400_000) + 2e-4)


def test_a_look_with_fewer_pairs_than_planned_keeps_the_plan_total():
    """Looks 3, 5, 8 of a 10-seed plan: the boundaries of the 4-look design's first 3."""
    levels = nominal_levels([3, 5, 8], 10, 0.0125)
    z = z_boundaries((3.0, 5.0, 8.0, 10.0), 0.0125)[:3]
    assert levels == pytest.approx([2 * stats.norm.sf(c) for c in z], rel=1e-9)
    last = nominal_levels([3, 5, 8, 9], 9, 0.0125)[-1]  # a plan's last look spends the rest
    assert last > levels[-1]


def test_t_radius_is_students_quantile_at_the_nominal_level():
    assert t_radius(9, 0.0463) == pytest.approx(stats.t.ppf(1 - 0.0463 / 2, 8))
    assert t_radius(1, 0.05) == math.inf
