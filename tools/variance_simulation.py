"""How far the variance table's numbers hold: the chi-square interval of a seed row, and
the test-set row's bootstrap, on simulated values with a known truth.

`python tools/variance_simulation.py` prints two markdown tables, each number computed
by the functions `sweeper summarize` uses (`sweeper.summarize.variance`):

1. Coverage of a seed row's 95% chi-square interval of the variance, by n seeds, for
   seed effects of five shapes: normal; Student's t with 5 df (heavy tails, excess
   kurtosis 6); a centred gamma of shape 4 (skewness 1); test accuracy on 189 examples
   (a lattice: each trial's accuracy p = 0.74 + N(0, 0.01), then each example right with
   probability p); and normal seeds of which one in 20 collapses to chance (50%).
2. The test-set row's bootstrap variance of one trial's accuracy over the variance of
   its accuracy on new test sets of N examples drawn from the population (truth:
   10^4 q(1-q)/N for a trial of population accuracy q), mean and spread of the ratio.

docs/statistics.md ("Where the variance comes from") quotes both.
"""

from __future__ import annotations

import argparse

import numpy as np

from sweeper.summarize.stats import sample_std
from sweeper.summarize.variance import bootstrap_variance, variance_interval

SHAPES = ("normal", "t5", "gamma", "lattice", "collapses")
EXAMPLES = 189


def draw(shape: str, n: int, rng: np.random.Generator) -> tuple[np.ndarray, float]:
    """n seed values of `shape` and their true variance."""
    if shape == "normal":
        return rng.standard_normal(n), 1.0
    if shape == "t5":
        return rng.standard_t(5, n), 5 / 3
    if shape == "gamma":
        return rng.gamma(4.0, 1.0, n) - 4.0, 4.0
    if shape == "lattice":
        sd, base = 0.01, 0.74
        p = base + rng.normal(0, sd, n)
        values = 100.0 * rng.binomial(EXAMPLES, p) / EXAMPLES
        return values, 1e4 * (sd**2 + (base * (1 - base) - sd**2) / EXAMPLES)
    collapsed = rng.random(n) < 0.05
    values = np.where(collapsed, 50.0, 74.0 + rng.standard_normal(n))
    return values, 0.95 * 1.0 + 0.05 * 0.95 * 24.0**2


def coverage(shape: str, n: int, reps: int, seed: int) -> float:
    """Share of `reps` seed rows whose 95% interval holds the true variance."""
    rng = np.random.default_rng(seed)
    hits = 0
    for _ in range(reps):
        values, truth = draw(shape, n, rng)
        std = sample_std(list(values))
        assert std is not None
        low, high = variance_interval(std * std, n)
        hits += low <= truth <= high
    return hits / reps


def bootstrap_ratio(examples: int, q: float, reps: int, seed: int) -> tuple[float, float]:
    """Mean and sd over `reps` test sets of the bootstrap variance over the truth."""
    rng = np.random.default_rng(seed)
    truth = 1e4 * q * (1 - q) / examples
    ratios = [
        bootstrap_variance((rng.random(examples) < q).astype(np.uint8).tolist()) / truth
        for _ in range(reps)
    ]
    return float(np.mean(ratios)), float(np.std(ratios, ddof=1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=4000, help="samples per cell (default 4000)")
    args = parser.parse_args()
    sizes = (3, 5, 10, 20)
    print("| seed values | " + " | ".join(f"n = {n}" for n in sizes) + " |")
    print("|---|" + "---:|" * len(sizes))
    for i, shape in enumerate(SHAPES):
        cells = [f"{coverage(shape, n, args.reps, seed=100 * i + n):.3f}" for n in sizes]
        print(f"| {shape} | " + " | ".join(cells) + " |", flush=True)
    print()
    print("| test examples N | accuracy q | bootstrap / truth, mean | sd |")
    print("|---:|---:|---:|---:|")
    for examples in (50, 189, 1000):
        for q in (0.5, 0.74, 0.95):
            mean, sd = bootstrap_ratio(examples, q, args.reps // 4, seed=examples + int(100 * q))
            print(f"| {examples} | {q:.2f} | {mean:.3f} | {sd:.3f} |", flush=True)


if __name__ == "__main__":
    main()
