"""What `--until-decided`'s rule costs and guarantees, by simulation.

`python tools/sequential_simulation.py` prints two markdown tables that
docs/architecture.md ("Statistics") quotes:

* under the null (seed differences with mean 0, normal or skewed), the false-decision
  rate of the shipped rule (`sweeper.summarize.sequential.walk_looks`) and of the old
  one (the fixed-n paired t re-run at every look, Holm over the family, stop at the
  first adjusted p < alpha), per schedule, for one comparison and a family of four;
* under effects of 0.5, 1 and 2 standard deviations, one comparison: the share of
  loops that decide (correctly) and the seeds per group they use on average, beside
  the fixed-n paired t at the schedule's --max-seeds.

tests/unit/test_sequential_null.py runs the null half at 2,000 loops and asserts it.
"""

from __future__ import annotations

import argparse
import math

import numpy as np

from sweeper.summarize.records import SequentialPlan
from sweeper.summarize.sequential import walk_looks

ALPHA = 0.05
SCHEDULES = ((3, 3, 9), (3, 1, 10), (3, 1, 20))
SHAPES = ("normal", "skewed")


def draws(shape: str, rng: np.random.Generator, size: tuple[int, ...]) -> np.ndarray:
    """Mean 0, standard deviation 1: normal, or a centred gamma of shape 4 (skewness 1)."""
    if shape == "normal":
        return rng.standard_normal(size)
    return (rng.gamma(4.0, 1.0, size) - 4.0) / 2.0


def shipped(x: np.ndarray, looks: tuple[int, ...], level: float) -> tuple[str | None, int]:
    """The shipped rule on one comparison's differences: (verdict, seeds used)."""
    walk = walk_looks([list(x[:n]) for n in looks], level)
    used = looks[walk.look - 1] if walk.verdict is not None and walk.look else looks[-1]
    return walk.verdict, used


def naive(x: np.ndarray, looks: tuple[int, ...]) -> np.ndarray:
    """Per loop (x: loops × family × seeds): whether the fixed-n paired t at some look,
    Holm over the family, gave an adjusted p < alpha (`scipy.stats.ttest_1samp`)."""
    from scipy import stats

    m = x.shape[1]
    decided = np.zeros(x.shape[0], dtype=bool)
    for n in looks:
        p = np.sort(stats.ttest_1samp(x[:, :, :n], 0.0, axis=2).pvalue, axis=1)
        adjusted = np.maximum.accumulate(np.minimum(1.0, (m - np.arange(m)) * p), axis=1)
        decided |= adjusted[:, 0] < ALPHA
    return decided


def null_rates(
    shape: str, family: int, schedule: tuple[int, int, int], loops: int
) -> tuple[float, float]:
    """(shipped, old) share of loops with any false decision in the family."""
    start, batch, most = schedule
    looks = SequentialPlan(start, batch, most, ALPHA).looks()
    rng = np.random.default_rng([start, batch, most, family, SHAPES.index(shape)])
    x = draws(shape, rng, (loops, family, most))
    level = ALPHA / family
    wrong = sum(
        any(shipped(x[i, j], looks, level)[0] is not None for j in range(family))
        for i in range(loops)
    )
    return wrong / loops, float(naive(x, looks).mean())


def power_row(effect: float, schedule: tuple[int, int, int], loops: int) -> tuple[float, ...]:
    """(share decided "A better", mean seeds used, fixed-n t power at --max-seeds)."""
    from scipy import stats

    start, batch, most = schedule
    looks = SequentialPlan(start, batch, most, ALPHA).looks()
    rng = np.random.default_rng([start, batch, most, int(effect * 100)])
    x = effect + rng.standard_normal((loops, most))
    results = [shipped(row, looks, ALPHA) for row in x]
    decided = sum(verdict == "A" for verdict, _ in results) / loops
    seeds = sum(used for _, used in results) / loops
    fixed = float((stats.ttest_1samp(x, 0.0, axis=1).pvalue < ALPHA).mean())
    return decided, seeds, fixed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--loops", type=int, default=2000)
    args = parser.parse_args()
    se = math.sqrt(ALPHA * (1 - ALPHA) / args.loops)
    print(f"Under the null ({args.loops} loops each; alpha {ALPHA}, 3 SE = {3 * se:.4f})\n")
    print("| schedule | differences | comparisons | shipped rule | old rule |")
    print("|---|---|---:|---:|---:|")
    for schedule in SCHEDULES:
        for shape in SHAPES:
            for family in (1, 4):
                ours, old = null_rates(shape, family, schedule, args.loops)
                label = f"{schedule[0]}+{schedule[1]} to {schedule[2]}"
                print(f"| {label} | {shape} | {family} | {ours:.4f} | {old:.4f} |", flush=True)
    print(f"\nPower, one comparison, normal differences ({args.loops} loops each)\n")
    print("| schedule | effect (sd) | decided | seeds used (mean) | fixed-n t at max |")
    print("|---|---:|---:|---:|---:|")
    for schedule in SCHEDULES:
        for effect in (0.5, 1.0, 2.0):
            decided, seeds, fixed = power_row(effect, schedule, args.loops)
            label = f"{schedule[0]}+{schedule[1]} to {schedule[2]}"
            print(
                f"| {label} | {effect:g} | {decided:.3f} | {seeds:.1f} | {fixed:.3f} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
