"""What the test set can resolve, by simulation: the rules of `sweeper.summarize.resolution`.

`python tools/testset_simulation.py` prints the markdown tables docs/statistics.md
quotes ("What the test set can resolve"). Every loop draws a test set of N examples
from a population and n seed pairs of trials, and scores each trial on each example:

    P(A's trial of seed s right on example i) = Φ(θ_i + δ_i / 2 + u_As)
    P(B's trial of seed s right on example i) = Φ(θ_i - δ_i / 2 + u_Bs)

θ_i ~ N(1.73, 2.5) is the example's ease (74% right, the demo's pretrained level;
most examples nearly always or nearly never right, so two seeds agree on 89% of them
and a trial's accuracy varies by about 2.3 points from seed to seed, as the demo's
do), δ_i ~ N(effect, example_sd) what A does better than B on that example (the part
of the difference that is the test set's), u ~ N(0, seed_sd) a trial's own luck (the
seeds' part); given those, every (trial, example) is an independent coin. With
effect 0 A and B are equally good on the population (δ is symmetric), so any
"better" is a false decision. The rules, each run as the summary runs it:

* `seeds x examples`: `resolution.seeds_by_examples`, its 1 - alpha t interval
  (what `--population` decides by);
* `paired t`: the seeds' paired t-test (what the summary decides by without it): a
  test about this test set, so under the population's null it errs more the more
  seeds it has;
* `McNemar`: `resolution.combined_mcnemar_p` below alpha;
* `examples bootstrap`: `resolution.example_bootstrap`'s interval excludes 0 (the test
  set's sampling alone, the trials held; fewer resamples here);
* `pigeonhole`: a bootstrap over seed pairs and examples at once (percentile), the
  interval the seeds x examples one is chosen over.

Three nulls: `population` (each trial its own luck, δ with spread: the claim
`--population` makes), `fixed trials` (A and B of a seed share their luck u and δ = 0:
McNemar's null, the trials equally good example by example), and `fixed trials,
per-example δ` (shared luck, δ with spread: equally good trials that differ in which
examples they get right, where the pooled McNemar count is overdispersed).

tests/unit/test_resolution_simulation.py runs parts of it and asserts them.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass, replace

import numpy as np

from sweeper.summarize.resolution import (
    Flags,
    combined_mcnemar_p,
    discordant_counts,
    example_bootstrap,
    resolution,
    seeds_by_examples,
)
from sweeper.summarize.stats import paired_t, t_quantile

ALPHA = 0.05
EASE, EASE_SD = 1.73, 2.5
EXAMPLES = 189
SEEDS = (3, 5, 10, 20)
RULES = ("seeds x examples", "paired t", "McNemar", "examples bootstrap", "pigeonhole")
BOOTSTRAP_RESAMPLES = 999


@dataclass(frozen=True)
class Setting:
    """One population of examples and trials."""

    examples: int = EXAMPLES
    seed_sd: float = 0.1
    """A trial's luck on the probit scale (0.1: a seed-to-seed spread of a few points)."""
    example_sd: float = 0.5
    """The spread of A's per-example advantage δ on the probit scale."""
    effect: float = 0.0
    """The mean of δ: A's advantage on the population."""
    shared: bool = False
    """A and B of one seed share their luck (trials fixed in McNemar's sense)."""


NULLS = {
    "population": Setting(),
    "fixed trials": Setting(example_sd=0.0, shared=True),
    "fixed trials, per-example δ": Setting(shared=True),
}


def draw(rng: np.random.Generator, setting: Setting, seeds: int) -> Flags:
    """One test set and `seeds` seed pairs of trials scored on it (0/100 flags)."""
    from scipy.special import ndtr

    n = setting.examples
    ease = EASE + EASE_SD * rng.standard_normal(n)
    delta = setting.effect + setting.example_sd * rng.standard_normal(n)
    luck_a = setting.seed_sd * rng.standard_normal((seeds, 1))
    luck_b = luck_a if setting.shared else setting.seed_sd * rng.standard_normal((seeds, 1))
    right_a = rng.random((seeds, n)) < ndtr(ease + delta / 2 + luck_a)
    right_b = rng.random((seeds, n)) < ndtr(ease - delta / 2 + luck_b)
    return Flags(100.0 * right_a, 100.0 * right_b, paired=True)


def decides(rule: str, flags: Flags, rng: np.random.Generator, level: float = ALPHA) -> int:
    """+1 (A better), -1 (B better) or 0 by `rule` at `level` on one draw."""
    diff = float(np.mean(flags.a) - np.mean(flags.b))
    if rule == "seeds x examples":
        combined = seeds_by_examples(flags)
        if combined is None or combined.df is None:
            return 0
        low, high = combined.interval(1 - level)
    elif rule == "paired t":
        test = paired_t(list(flags.a.mean(axis=1) - flags.b.mean(axis=1)), 1 - level)
        if test.p_value is None or test.p_value >= level:
            return 0
        return 1 if test.diff > 0 else -1
    elif rule == "McNemar":
        p = combined_mcnemar_p(discordant_counts(flags))
        return 0 if p is None or p >= level else (1 if diff > 0 else -1)
    elif rule == "examples bootstrap":
        found = example_bootstrap(flags, BOOTSTRAP_RESAMPLES, 1 - level)
        if found[0] is None or found[1] is None:
            return 0
        low, high = found
    elif rule == "pigeonhole":
        low, high = pigeonhole(flags, rng, 1 - level)
    else:
        raise ValueError(f"unknown rule {rule!r}")
    return 1 if low > 0 else -1 if high < 0 else 0


def pigeonhole(
    flags: Flags, rng: np.random.Generator, confidence: float, resamples: int = BOOTSTRAP_RESAMPLES
) -> tuple[float, float]:
    """Percentile interval of the mean difference, seed pairs and examples resampled
    at once (Owen 2007): a resample's mean is the mean, over its drawn examples, of
    the drawn seed pairs' (counts') sum on each, over n."""
    e = flags.a - flags.b
    n, m = e.shape
    w_seeds = rng.multinomial(n, np.full(n, 1 / n), size=resamples)
    examples = rng.integers(0, m, (resamples, m))
    means = np.take_along_axis(w_seeds.astype(float) @ e, examples, axis=1).mean(axis=1) / n
    low, high = np.quantile(means, [(1 - confidence) / 2, (1 + confidence) / 2])
    return float(low), float(high)


def null_rate(
    rule: str, setting: Setting, seeds: int, loops: int, seed: int = 0, level: float = ALPHA
) -> float:
    """Share of loops in which `rule` decides a difference that is not there."""
    rng = np.random.default_rng(seed)
    return float(
        np.mean([decides(rule, draw(rng, setting, seeds), rng, level) != 0 for _ in range(loops)])
    )


def power(
    rule: str, setting: Setting, seeds: int, loops: int, seed: int = 1, level: float = ALPHA
) -> float:
    """Share of loops in which `rule` decides A better (setting.effect > 0)."""
    rng = np.random.default_rng(seed)
    return float(
        np.mean([decides(rule, draw(rng, setting, seeds), rng, level) > 0 for _ in range(loops)])
    )


def population_difference(setting: Setting, draws: int = 2_000_000, seed: int = 3) -> float:
    """The population's A - B in points: E Φ((θ+δ/2)/r) - Φ((θ-δ/2)/r), r² = 1 + seed_sd²."""
    from scipy.special import ndtr

    rng = np.random.default_rng(seed)
    ease = EASE + EASE_SD * rng.standard_normal(draws)
    delta = setting.effect + setting.example_sd * rng.standard_normal(draws)
    r = math.sqrt(1 + setting.seed_sd**2)
    return float(100 * np.mean(ndtr((ease + delta / 2) / r) - ndtr((ease - delta / 2) / r)))


def true_resolution(setting: Setting, level: float = 1 - ALPHA, draws: int = 2_000_000) -> float:
    """X the population implies: t_{N-1} times the sd over examples of the two setups'
    chance of getting them right (A's minus B's, seeds averaged), over √N."""
    from scipy.special import ndtr

    rng = np.random.default_rng(4)
    ease = EASE + EASE_SD * rng.standard_normal(draws)
    delta = setting.effect + setting.example_sd * rng.standard_normal(draws)
    r = math.sqrt(1 + setting.seed_sd**2)
    spread = float(np.std(100 * (ndtr((ease + delta / 2) / r) - ndtr((ease - delta / 2) / r))))
    n = setting.examples
    return t_quantile(0.5 + level / 2, n - 1) * spread / math.sqrt(n)


def shrinking(
    setting: Setting, seeds: tuple[int, ...], sets: int = 50, seed: int = 5
) -> list[dict[str, float]]:
    """Over `sets` test sets, each scored by more and more seeds: the mean 95% half-width
    of the seeds' paired t, of the examples bootstrap and of the seeds x examples
    interval, and the estimated X (mean, median, share estimated 0, 10% and 90%)."""
    from scipy.special import ndtr

    rng = np.random.default_rng(seed)
    n = setting.examples
    found: dict[int, dict[str, list[float]]] = {c: {} for c in seeds}
    for _ in range(sets):
        ease = EASE + EASE_SD * rng.standard_normal(n)
        delta = setting.effect + setting.example_sd * rng.standard_normal(n)
        for count in seeds:
            luck_a = setting.seed_sd * rng.standard_normal((count, 1))
            luck_b = setting.seed_sd * rng.standard_normal((count, 1))
            right_a = rng.random((count, n)) < ndtr(ease + delta / 2 + luck_a)
            right_b = rng.random((count, n)) < ndtr(ease - delta / 2 + luck_b)
            flags = Flags(100.0 * right_a, 100.0 * right_b, paired=True)
            test = paired_t(list(flags.a.mean(axis=1) - flags.b.mean(axis=1)))
            low, high = example_bootstrap(flags, BOOTSTRAP_RESAMPLES)
            combined = seeds_by_examples(flags)
            assert combined is not None and combined.df is not None
            assert None not in (test.ci_low, test.ci_high, low, high)
            c_low, c_high = combined.interval(1 - ALPHA)
            values = {
                "paired t": (test.ci_high - test.ci_low) / 2,  # type: ignore[operator]
                "examples bootstrap": (high - low) / 2,  # type: ignore[operator]
                "seeds x examples": (c_high - c_low) / 2,
                "X": resolution(combined.example_variance, n, 1 - ALPHA) or 0.0,
            }
            for key, value in values.items():
                found[count].setdefault(key, []).append(value)
    rows = []
    for count in seeds:
        x = np.asarray(found[count]["X"])
        rows.append(
            {
                "seeds": count,
                **{k: float(np.mean(v)) for k, v in found[count].items()},
                "X median": float(np.median(x)),
                "X zero": float(np.mean(x == 0.0)),
                "X q10": float(np.quantile(x, 0.1)),
                "X q90": float(np.quantile(x, 0.9)),
            }
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--loops", type=int, default=2000)
    args = parser.parse_args()
    loops = args.loops
    print(f"Null: share of {loops:,} loops with a false decision (alpha {ALPHA}, N = {EXAMPLES})\n")
    print("| null | seeds | " + " | ".join(RULES) + " |")
    print("|---|---:|" + "---:|" * len(RULES))
    for name, setting in NULLS.items():
        for seeds in SEEDS:
            rates = [null_rate(rule, setting, seeds, loops) for rule in RULES]
            print(f"| {name} | {seeds} | " + " | ".join(f"{r:.4f}" for r in rates) + " |")
    print(f"\nPower: share of {loops:,} loops deciding A better (population setting)\n")
    print("| effect (probit) | A - B (points) | X (points) | seeds | seeds x examples | McNemar |")
    print("|---:|---:|---:|---:|---:|---:|")
    for effect in (0.05, 0.1, 0.2):
        setting = replace(NULLS["population"], effect=effect)
        diff, x = population_difference(setting), true_resolution(setting)
        for seeds in SEEDS:
            shares = [
                power(rule, setting, seeds, loops) for rule in ("seeds x examples", "McNemar")
            ]
            print(
                f"| {effect} | {diff:.2f} | {x:.2f} | {seeds} | "
                + " | ".join(f"{s:.3f}" for s in shares)
                + " |"
            )
    setting = NULLS["population"]
    print(
        f"\n50 test sets of {EXAMPLES} examples, each scored by more and more seeds "
        f"(population setting): mean 95% half-widths (points), and the X each estimated; "
        f"the population's X is {true_resolution(setting):.2f}\n"
    )
    print(
        "| seeds | paired t | examples bootstrap | seeds x examples | X: mean | median | "
        "estimated 0 | 10%-90% |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---|")
    for row in shrinking(setting, (3, 5, 10, 30, 100, 300)):
        print(
            f"| {row['seeds']} | {row['paired t']:.2f} | {row['examples bootstrap']:.2f} | "
            f"{row['seeds x examples']:.2f} | {row['X']:.2f} | {row['X median']:.2f} | "
            f"{row['X zero']:.2f} | {row['X q10']:.2f}-{row['X q90']:.2f} |"
        )


if __name__ == "__main__":
    main()
