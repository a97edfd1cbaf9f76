"""Seeds needed at a stated power under a sequential rule, by simulation.

An undecided comparison after `--until-decided` reports the `--max-seeds` at which a
plan like its own (same first look, same seeds per look) would decide it with
probability `POWER` if its observed standardized effect d_z (mean seed difference
over their standard deviation) were the truth, under the rule in force: the
group-sequential boundaries of a plan ending there, or the anytime-valid confidence
sequence. Neither rule has a closed-form power for a t statistic at a few seeds, so it
is simulated: `LOOPS` loops of normal seed differences, one fixed generator (a summary
printed twice prints the same number), each look deciding when its |t| reaches the
rule's radius, as `walk_looks` does. The count is the smallest plan size with
simulated power >= `POWER` (searched by bisection; power rises with the plan's size up
to the simulation's noise, about ±0.006 at `LOOPS`); None past `MAX_SIMULATED` seeds,
where the observed effect is too small to plan for by this estimate.
tests/unit/test_sequential_power.py checks the estimate against the shipped rule.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import numpy as np

from sweeper.summarize.decide import POWER
from sweeper.summarize.records import SequentialPlan

LOOPS = 4000
MAX_SIMULATED = 200
SEED = 0


@functools.lru_cache(maxsize=1)
def _noise() -> tuple[np.ndarray, np.ndarray]:
    """Cumulative sums of standard normal draws and of their squares (LOOPS x seeds):
    the same draws for every effect and plan (common random numbers)."""
    z = np.random.default_rng(SEED).standard_normal((LOOPS, MAX_SIMULATED))
    return np.cumsum(z, axis=1), np.cumsum(z * z, axis=1)


def simulated_power(effect: float, looks: tuple[int, ...], radii: list[float]) -> float:
    """Share of simulated loops with true effect `effect` (> 0, in sd) in which some
    look's t on its n differences reaches that look's radius."""
    sums, squares = _noise()
    decided = np.zeros(LOOPS, dtype=bool)
    for n, c in zip(looks, radii, strict=True):
        if n < 2 or math.isinf(c):
            continue
        total = sums[:, n - 1] + n * effect  # the draws shifted by the effect
        square = squares[:, n - 1] + 2 * effect * sums[:, n - 1] + n * effect * effect
        variance = np.maximum(square - total * total / n, 0.0) / (n - 1)
        with np.errstate(divide="ignore", invalid="ignore"):
            t = (total / n) / np.sqrt(variance / n)
        decided |= t >= c
    return float(decided.mean())


def seeds_for_power(
    effect: float, start: int, batch: int, radii: Callable[[tuple[int, ...], int], list[float]]
) -> int | None:
    """The smallest --max-seeds at which a plan of `start` seeds, +`batch` per look,
    reaches `POWER` at standardized effect `effect`, where `radii(looks, most)` gives
    the rule's |t| at each look of a plan ending at `most` seeds; None beyond
    `MAX_SIMULATED` or for no effect."""
    if not effect > 0.0 or not math.isfinite(effect):
        return None
    start = max(2, start)

    def power(most: int) -> float:
        looks = SequentialPlan(start, batch, most, 0.05).looks()
        return simulated_power(effect, looks, radii(looks, most))

    if power(MAX_SIMULATED) < POWER:
        return None
    low, high = start, MAX_SIMULATED
    if power(low) >= POWER:
        return low
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if power(middle) < POWER else (low, middle)
    return high
