"""Seeds needed after `--until-decided` hold at the power they state.

`seeds_for_power` simulates the rule from cumulative sums; here the shipped
`walk_looks` runs 2,000 fresh loops (another generator) of a plan ending at the
estimate, and must decide with the stated power within 3 Monte-Carlo standard errors,
while a plan one look shorter must fall short of it (the estimate is the smallest).
"""

from __future__ import annotations

import math

import pytest

from sweeper.summarize.decide import POWER
from sweeper.summarize.sequential import look_radii
from sweeper.summarize.sequential_power import seeds_for_power
from tools.sequential_simulation import power

LOOPS = 2000
SE3 = 3 * math.sqrt(POWER * (1 - POWER) / LOOPS)


@pytest.mark.parametrize(
    ("effect", "start", "batch", "rule"),
    [
        (1.0, 3, 3, "group-sequential"),
        (1.5, 3, 1, "group-sequential"),
        (0.8, 3, 2, "group-sequential"),
        (1.0, 3, 3, "anytime-valid"),
    ],
)
def test_the_estimate_reaches_the_stated_power_and_no_sooner(effect, start, batch, rule):
    planned = rule == "group-sequential"
    n = seeds_for_power(effect, start, batch, lambda looks, most: radii(looks, most, planned))
    assert n is not None
    reached, _ = power(effect, 1, (start, batch, n), LOOPS, rule)
    assert reached >= POWER - SE3, f"{rule} plan to {n}: power {reached:.3f}"
    if n - batch >= start:
        shorter, _ = power(effect, 1, (start, batch, n - batch), LOOPS, rule)
        assert shorter <= POWER + SE3, f"a plan to {n - batch} already had {shorter:.3f}"


def radii(looks: tuple[int, ...], most: int, planned: bool) -> list[float]:
    return look_radii(list(looks), 0.05, most if planned else None)


def test_no_effect_is_not_estimable():
    def rule(looks, most):
        return radii(looks, most, True)

    assert seeds_for_power(0.0, 3, 3, rule) is None
    assert seeds_for_power(0.05, 3, 3, rule) is None  # past MAX_SIMULATED
