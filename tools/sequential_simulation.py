"""What `--until-decided`'s rules cost and guarantee, by simulation.

`python tools/sequential_simulation.py` prints the markdown tables docs/statistics.md
quotes, for the rules a sweep can be decided by, side by side:

* `group-sequential`: the boundaries over the recorded plan's looks
  (`sweeper.summarize.group_sequential`), what a new `--until-decided` plan records;
* `anytime-valid`: the confidence sequence valid at any looks
  (`sweeper.summarize.sequential`), for plans recorded before it and seeds past a plan;
* `fixed-n t`: the paired t at the schedule's --max-seeds alone, Holm over the family
  (what a grid of that many seeds would decide; no looks, the power a sequential rule
  gives up some of);
* `old`: the fixed-n paired t re-run at every look, Holm over the family, stopping at
  the first adjusted p < alpha (optional stopping: what the rules replace).

Under the null (seed differences with mean 0: normal, t with 3 df, and skewed shapes)
the share of loops with any false decision in a family of independent comparisons;
under an effect of 0.5, 1 or 2 standard deviations on one comparison of the family,
the share of loops that decide it correctly and the seeds it used on average. Every
sequential loop runs the shipped `walk_looks` look by look, as `sweeper run
--until-decided` does: a comparison stops at its first decision, an undecided one gets
seeds until --max-seeds.

tests/unit/test_sequential_null.py runs parts of it and asserts them.
"""

from __future__ import annotations

import argparse
import math

import numpy as np

from sweeper.summarize.records import SequentialPlan
from sweeper.summarize.sequential import walk_looks

ALPHA = 0.05
SCHEDULES = ((3, 3, 9), (3, 1, 10), (3, 1, 20))
SHAPES = ("normal", "t3", "gamma", "lognormal", "exponential")
"""Mean 0 and sd 1 each: normal; Student's t with 3 df (heavy tails); skewed: a centred
gamma of shape 4 (skewness 1), a centred lognormal (sigma 1: skewness 6.2, rare large
wins) and a centred exponential (skewness 2)."""
RULES = ("group-sequential", "anytime-valid", "fixed-n t", "old")


def draws(shape: str, rng: np.random.Generator, size: tuple[int, ...]) -> np.ndarray:
    """Seed differences of the given shape with mean 0 and standard deviation 1."""
    if shape == "normal":
        return rng.standard_normal(size)
    if shape == "t3":
        return rng.standard_t(3, size) / math.sqrt(3.0)
    if shape == "gamma":
        return (rng.gamma(4.0, 1.0, size) - 4.0) / 2.0
    if shape == "lognormal":
        e = math.e
        return (rng.lognormal(0.0, 1.0, size) - math.sqrt(e)) / math.sqrt((e - 1) * e)
    if shape == "exponential":
        return rng.exponential(1.0, size) - 1.0
    raise ValueError(f"unknown shape {shape!r}")


def sequential(
    x: np.ndarray, looks: tuple[int, ...], level: float, rule: str
) -> tuple[str | None, int]:
    """A shipped sequential rule on one comparison's differences: (verdict, seeds used)."""
    planned = looks[-1] if rule == "group-sequential" else None
    walk = walk_looks([list(x[:n]) for n in looks], level, planned=planned)
    used = looks[walk.look - 1] if walk.verdict is not None and walk.look else looks[-1]
    return walk.verdict, used


def holm_rejects(p: np.ndarray) -> np.ndarray:
    """Per row of p (loops x family): which comparisons Holm rejects at ALPHA."""
    m = p.shape[1]
    order = np.argsort(p, axis=1)
    sorted_p = np.take_along_axis(p, order, axis=1)
    passed = np.cumprod(sorted_p < ALPHA / (m - np.arange(m)), axis=1).astype(bool)
    out = np.zeros_like(passed)
    np.put_along_axis(out, order, passed, axis=1)
    return out


def decisions(x: np.ndarray, schedule: tuple[int, int, int], rule: str) -> np.ndarray:
    """x: loops x family x seeds. Per loop and comparison, the verdict's sign (+1: A,
    -1: B, 0: none or equivalent); and the seeds used, for the sequential rules."""
    from scipy import stats

    start, batch, most = schedule
    looks = SequentialPlan(start, batch, most, ALPHA).looks()
    loops, family, _ = x.shape
    sign = np.zeros((loops, family))
    used = np.full((loops, family), float(most))
    if rule in ("fixed-n t", "old"):
        for n in looks if rule == "old" else (most,):
            result = stats.ttest_1samp(x[:, :, :n], 0.0, axis=2)
            rejects = holm_rejects(result.pvalue) & (sign == 0)
            sign[rejects] = np.sign(result.statistic[rejects])
        return np.stack([sign, used])
    level = ALPHA / family
    for i in range(loops):
        for j in range(family):
            verdict, seeds = sequential(x[i, j], looks, level, rule)
            sign[i, j] = {"A": 1.0, "B": -1.0}.get(verdict or "", 0.0)
            used[i, j] = seeds
    return np.stack([sign, used])


def null_rate(
    shape: str, family: int, schedule: tuple[int, int, int], loops: int, rule: str
) -> float:
    """Share of loops with any false decision ("better" of either kind) in a family of
    `family` independent comparisons, all with mean difference 0."""
    rng = np.random.default_rng([*schedule, family, SHAPES.index(shape)])
    x = draws(shape, rng, (loops, family, schedule[2]))
    sign, _ = decisions(x, schedule, rule)
    return float((sign != 0).any(axis=1).mean())


def power(
    effect: float, family: int, schedule: tuple[int, int, int], loops: int, rule: str
) -> tuple[float, float]:
    """(share deciding the first comparison correctly, its mean seeds used) when it has
    a true effect of `effect` sd and the family's other comparisons none (normal)."""
    rng = np.random.default_rng([*schedule, family, int(effect * 100), 99])
    x = draws("normal", rng, (loops, family, schedule[2]))
    x[:, 0, :] += effect
    sign, used = decisions(x, schedule, rule)
    return float((sign[:, 0] == 1).mean()), float(used[:, 0].mean())


def label(schedule: tuple[int, int, int]) -> str:
    return f"{schedule[0]}+{schedule[1]} to {schedule[2]}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--loops", type=int, default=2000)
    args = parser.parse_args()
    se = math.sqrt(ALPHA * (1 - ALPHA) / args.loops)
    print(f"Under the null ({args.loops} loops each; alpha {ALPHA}, alpha + 3 SE = ", end="")
    print(f"{ALPHA + 3 * se:.4f}): share of loops with any false decision\n")
    print("| schedule | differences | comparisons | " + " | ".join(RULES) + " |")
    print("|---|---|---:|" + "---:|" * len(RULES))
    for schedule in SCHEDULES:
        for shape in SHAPES:
            for family in (1, 4):
                rates = [null_rate(shape, family, schedule, args.loops, r) for r in RULES]
                cells = " | ".join(f"{r:.4f}" for r in rates)
                print(f"| {label(schedule)} | {shape} | {family} | {cells} |", flush=True)
    print(f"\nPower: one comparison with the effect, normal differences ({args.loops} loops")
    print("each); decided correctly (mean seeds used)\n")
    rules = RULES[:3]
    print("| schedule | comparisons | effect (sd) | " + " | ".join(rules) + " |")
    print("|---|---:|---:|" + "---:|" * len(rules))
    for schedule in SCHEDULES:
        for family in (1, 4):
            for effect in (0.5, 1.0, 2.0):
                cells = []
                for rule in rules:
                    share, seeds = power(effect, family, schedule, args.loops, rule)
                    cells.append(f"{share:.3f} ({seeds:.1f})")
                row = f"| {label(schedule)} | {family} | {effect:g} | {' | '.join(cells)} |"
                print(row, flush=True)


if __name__ == "__main__":
    main()
