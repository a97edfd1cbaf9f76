"""Decisions that stay valid while seeds are added until decided (`--until-decided`).

Re-running a fixed-n test after every batch of seeds and stopping at the first p < alpha
("optional stopping") declares a difference that is not there two to five times as
often as alpha says. This module replaces that rule by one whose error holds at every
look at once, however many looks there are and whenever the loop stops:

* **An e-process per comparison.** For n seed-matched differences with mean m and
  sample standard deviation s, t = m·√n / s. The e-value is the Bayes factor of the
  one-sample t-test with a normal prior of variance g on the standardized effect
  (Gönen et al. 2005; its closed form in `log_e_value`), averaged over the prior
  scales `PRIOR_SCALES` so that both small and large effects are found quickly. Under
  normally distributed differences with mean 0 it is an e-process for the scale-
  invariant filtration (the right-Haar prior on the spread: Pérez-Ortiz, Lardy, de
  Heide and Grünwald 2024), so by Ville's inequality P(it ever reaches 1/level) <=
  level: over all looks, any batch size, any `--max-seeds`, and stopping for any
  reason, including another comparison's result.
* **A confidence sequence.** Testing mean = mu for every mu gives the interval
  m ± c_n · s / √n, where c_n is the |t| at which the e-value reaches 1/level
  (`radius`). Intersected over the looks so far, it holds the true mean difference
  at every look at once with probability >= 1 - level.
* **Bonferroni over the family.** Each of the m comparisons uses level alpha / m, so
  all m sequences hold at once with probability >= 1 - alpha. Every decision is read
  from its comparison's interval: `A better` / `B better` when it excludes 0,
  `equivalent within ±D` when it lies inside (-D, D). A false decision of either kind
  needs an interval that misses the truth, so the family-wise rate of false decisions
  (wrong sign included) is at most alpha. Holm's step-down is not used: a comparison
  decided "equivalent" would pass its alpha on although its null of "no difference"
  is true, which Holm's proof does not allow.

Assumption: the seed differences are independent draws from one distribution that is
close to normal. tests/unit/test_sequential_null.py measures the rate under normal and
skewed differences; docs/architecture.md ("Statistics") gives the numbers and the power
this validity costs.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

from sweeper.summarize.decide import (
    UNDECIDED,
    exact_verdict,
    interval_verdict,
    paired_differences,
    read_interval,
    supported_margin,
)
from sweeper.summarize.group_sequential import nominal_levels, t_radius
from sweeper.summarize.records import (
    GROUP_SEQUENTIAL_METHOD,
    RULE_ANYTIME,
    RULE_GROUP_SEQUENTIAL,
    Comparison,
    CountedTrial,
    SequentialPlan,
)
from sweeper.summarize.stats import by_seed, mean, sample_std

PRIOR_SCALES = (0.25, 1.0, 4.0, 16.0, 64.0)
"""Prior variances g of the standardized effect, mixed with equal weights: effects of
half a standard deviation to about ten are all found within a few looks."""


def log_e_value(t: float, n: int) -> float:
    """log of the mixture e-value for a one-sample t statistic `t` (may be ±inf) on n >= 2
    differences: log mean_g BF_g, BF_g = (1+ng)^(-1/2) ((1+t²/ν)/(1+t²/(ν(1+ng))))^((ν+1)/2)."""
    if n < 2:
        return 0.0
    nu = n - 1
    logs = []
    for g in PRIOR_SCALES:
        a = 1.0 + n * g
        if math.isinf(t):  # no spread: the limit as |t| grows, (1+ng)^(ν/2)
            logs.append(nu / 2 * math.log(a))
        else:
            ratio = math.log1p(t * t / nu) - math.log1p(t * t / (nu * a))
            logs.append(-0.5 * math.log(a) + (nu + 1) / 2 * ratio)
    top = max(logs)
    return top + math.log(math.fsum(math.exp(v - top) for v in logs) / len(logs))


@functools.lru_cache(maxsize=4096)
def radius(n: int, level: float) -> float:
    """The |t| at which the e-value on n differences reaches 1 / level (it grows with |t|);
    inf when even t = ±inf cannot reach it (too few seeds for this level)."""
    target = math.log(1.0 / level)
    if n < 2 or log_e_value(math.inf, n) < target:
        return math.inf
    low, high = 0.0, 1.0
    while log_e_value(high, n) < target:
        high *= 2.0
    for _ in range(200):
        middle = (low + high) / 2
        low, high = (middle, high) if log_e_value(middle, n) < target else (low, middle)
        if high - low <= 1e-12 * high:
            break
    return high


def interval(differences: Sequence[float], level: float) -> tuple[float, float]:
    """The confidence sequence's interval at one look (not yet intersected with earlier
    ones): (-inf, inf) when the look cannot exclude anything."""
    return _around_mean(differences, radius(len(differences), level))


def _around_mean(differences: Sequence[float], c: float) -> tuple[float, float]:
    """mean ± c standard errors; (-inf, inf) for an infinite c."""
    if math.isinf(c):
        return -math.inf, math.inf
    n = len(differences)
    m, s = mean(differences), sample_std(differences) or 0.0
    half = c * s / math.sqrt(n)
    return m - half, m + half


def decide_sequential(
    comparisons: Sequence[Comparison],
    trials: Sequence[CountedTrial],
    plan: SequentialPlan,
    seed_order: Sequence[int],
    margin: float | None = None,
    bounds: tuple[float, float] | None = None,
    mode: str = "max",
) -> list[Comparison]:
    """Each comparison decided by the plan's looks over `seed_order` (the grid's seeds,
    then those the loop added, in the order they were added): the first look whose
    intersected interval decides, else the last look with data. `bounds`: the range
    a difference of the metric can take (accuracy: ±100), which clips the intervals.
    `mode`: which way the metric improves (a lower perplexity is `min`)."""
    level = plan.alpha / max(1, len(comparisons))
    values = by_seed(trials)
    out = []
    for c in comparisons:
        a, b = values.get(c.group_a, {}), values.get(c.group_b, {})
        out.append(_walk(c, a, b, plan, seed_order, level, margin, bounds, mode))
    return out


@dataclass(frozen=True)
class Walk:
    """Where a comparison's walk over the looks ended."""

    look: int | None
    """The look (1-based) that decided, else the last that added a pair; None: none did."""
    n: int | None
    """Pairs at that look."""
    low: float
    high: float
    """The interval intersected over the looks up to `look` (±inf where unbounded)."""
    verdict: str | None
    """`A` (A - B > 0), `B`, `equivalent`, or None (undecided)."""


def walk_looks(
    looks: Sequence[Sequence[float]],
    level: float,
    margin: float | None = None,
    bounds: tuple[float, float] | None = None,
    planned: int | None = None,
) -> Walk:
    """Run the rule over the seed differences available at each look (each list
    extends the one before): the first look whose intersected interval excludes 0
    (`A` or `B`) or lies inside (-margin, margin) (`equivalent`) stops the walk. A look
    whose differences are all equal (a tie: t is infinite) decides only where the exact
    sign-flip test at that look's level does, and otherwise leaves the interval as it
    was (`decide.exact_verdict`).
    `planned`: the plan's most pairs, for the group-sequential rule's repeated
    intervals (`sweeper.summarize.group_sequential`); None, or a look past it: the
    anytime-valid confidence sequence."""
    low, high = (-math.inf, math.inf) if bounds is None else bounds
    kept = []  # (look, differences) of the looks that added a pair
    for index, differences in enumerate(looks, start=1):
        if len(differences) >= 2 and len(differences) > (len(kept[-1][1]) if kept else 0):
            kept.append((index, differences))
    pairs = [len(d) for _, d in kept]
    radii, levels = look_radii(pairs, level, planned), look_levels(pairs, level, planned)
    at = n_at = None
    for (index, differences), c, at_level in zip(kept, radii, levels, strict=True):
        at, n_at = index, len(differences)
        this_low, this_high = _around_mean(differences, c)
        if this_low == this_high:  # a tie: a point, not an interval; the exact test reads it
            point = interval_verdict(this_low, this_high, margin)
            if exact_verdict(point, differences, at_level, margin) is not None:
                return Walk(at, n_at, this_low, this_high, point)
            continue  # and it narrows nothing: a point is no confidence interval
        low, high = max(low, this_low), min(high, this_high)
        verdict = interval_verdict(low, high, margin)
        if verdict is not None:
            return Walk(at, n_at, low, high, verdict)
    return Walk(at, n_at, low, high, None)


def look_radii(pairs: Sequence[int], level: float, planned: int | None) -> list[float]:
    """The |t| each look's interval spans, for looks with `pairs` seed pairs
    (increasing): the group-sequential boundaries when every look lies within the
    plan (`planned` pairs at most), else the anytime-valid radius."""
    if _within_plan(pairs, planned):
        levels = look_levels(pairs, level, planned)
        return [t_radius(n, p) for n, p in zip(pairs, levels, strict=True)]
    return [radius(n, level) for n in pairs]


def look_levels(pairs: Sequence[int], level: float, planned: int | None) -> list[float]:
    """The two-sided level each look tests at: the group-sequential nominal level
    within the plan, else the comparison's `level` (the anytime-valid rule's)."""
    if _within_plan(pairs, planned):
        assert planned is not None
        return list(nominal_levels(pairs, planned, level))
    return [level] * len(pairs)


def _within_plan(pairs: Sequence[int], planned: int | None) -> bool:
    return bool(pairs) and planned is not None and pairs[-1] <= planned


def rule_of(plan: SequentialPlan, pairs: int) -> str:
    """The rule that decides a comparison with `pairs` seed pairs under `plan`."""
    if plan.method == GROUP_SEQUENTIAL_METHOD and pairs <= plan.max_seeds:
        return RULE_GROUP_SEQUENTIAL
    return RULE_ANYTIME


def _walk(
    c: Comparison,
    a: dict[int | None, float],
    b: dict[int | None, float],
    plan: SequentialPlan,
    seed_order: Sequence[int],
    level: float,
    margin: float | None,
    bounds: tuple[float, float] | None,
    mode: str,
) -> Comparison:
    looks = [[a[s] - b[s] for s in seed_order[:size] if s in a and s in b] for size in plan.looks()]
    planned = plan.max_seeds if plan.method == GROUP_SEQUENTIAL_METHOD else None
    walk = walk_looks(looks, level, margin, bounds, planned)
    decision = read_interval(c, walk.low, walk.high, margin, mode) if walk.verdict else UNDECIDED
    return replace(
        c,
        p_holm=None,
        decision=decision,
        alpha=plan.alpha,
        rule=rule_of(plan, max((len(look) for look in looks), default=0)),
        decision_low=_finite(walk.low),
        decision_high=_finite(walk.high),
        decision_level=1.0 - level,
        margin=margin,
        equivalent_within=supported_margin(_finite(walk.low), _finite(walk.high)),
        look=walk.look,
        n_decision=walk.n,
        seeds_needed=None if walk.verdict else seeds_to_decide(c, a, b, plan, level),
    )


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


def seeds_to_decide(
    c: Comparison,
    a: dict[int | None, float],
    b: dict[int | None, float],
    plan: SequentialPlan,
    level: float,
) -> int | None:
    """The --max-seeds at which a plan like `plan` would decide the comparison with the
    stated power if its observed d_z were the truth, under the rule that decides it
    (`sweeper.summarize.sequential_power`); None when not estimable."""
    from sweeper.summarize.sequential_power import seeds_for_power

    differences = paired_differences(c, {c.group_a: a, c.group_b: b})
    spread = sample_std(differences)
    if not spread:
        return None
    effect = abs(mean(differences)) / spread
    group_sequential = rule_of(plan, len(differences)) == RULE_GROUP_SEQUENTIAL

    def radii(looks: tuple[int, ...], most: int) -> list[float]:
        return look_radii(list(looks), level, most if group_sequential else None)

    return seeds_for_power(effect, plan.start, plan.batch, radii)
