"""Statistics of Table 2 and of the group comparisons.

Spelled out rather than delegated to one library call, because the lab's own Table 2
went wrong exactly here (report 000 printed 79.93 ± 0.135 for values whose mean is 79.5
and whose sample standard deviation is 0.87): every number says what it is.

* std: sample standard deviation, ddof = 1 (seeds are a sample of possible seeds).
* 95% CI of a group mean: mean ± t(0.975, n - 1) · std / √n.
* Comparison of two groups: difference of means with Welch's 95% CI (unequal variances,
  Welch-Satterthwaite degrees of freedom) and the two-sided Welch t-test p-value; this
  is what `scipy.stats.ttest_ind(a, b, equal_var=False)` computes (tests check it).
* With n = 1 a spread is undefined: those fields are None (shown "n/a"), never NaN.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from sweeper.summarize.records import Comparison, CountedTrial, GroupStats

CONFIDENCE = 0.95
FEW_RUNS = 3
"""Groups with fewer runs than this are flagged: their CI is too wide to lean on."""

INIT_PAIR = ("pretrained", "random")
FRAMEWORK_PAIR = ("fairseq", "hf")


@dataclass(frozen=True)
class Described:
    n: int
    mean: float
    std: float | None
    ci_low: float | None
    ci_high: float | None
    min: float
    max: float


@dataclass(frozen=True)
class Welch:
    diff: float
    ci_low: float | None
    ci_high: float | None
    df: float | None
    t: float | None
    p_value: float | None


def mean(values: Sequence[float]) -> float:
    return math.fsum(values) / len(values)


def sample_std(values: Sequence[float]) -> float | None:
    """Standard deviation with ddof = 1; None for fewer than two values."""
    if len(values) < 2:
        return None
    m = mean(values)
    return math.sqrt(math.fsum((v - m) ** 2 for v in values) / (len(values) - 1))


def t_quantile(p: float, df: float) -> float:
    """Student's t quantile. scipy.special's `stdtrit` is the same function
    `scipy.stats.t.ppf` evaluates, without the ~1 s import of scipy.stats."""
    from scipy.special import stdtrit

    return float(stdtrit(df, p))


def t_two_sided_p(t: float, df: float) -> float:
    """P(|T| >= |t|) for Student's t with df degrees of freedom (= 2 · t.sf(|t|, df))."""
    from scipy.special import stdtr

    return float(2 * stdtr(df, -abs(t)))


def describe(values: Sequence[float], confidence: float = CONFIDENCE) -> Described:
    """n, mean, sample std, t-based CI of the mean, min and max of `values` (n >= 1)."""
    if not values:
        raise ValueError("describe() needs at least one value")
    n, m, s = len(values), mean(values), sample_std(values)
    low = high = None
    if s is not None:
        half = t_quantile(0.5 + confidence / 2, n - 1) * s / math.sqrt(n)
        low, high = m - half, m + half
    return Described(n, m, s, low, high, min(values), max(values))


def welch(a: Sequence[float], b: Sequence[float], confidence: float = CONFIDENCE) -> Welch:
    """Difference of means a - b, its Welch CI, and Welch's two-sided t-test.

    Needs n >= 2 on both sides for a CI and p-value (else they are None). When both
    groups have zero variance the t statistic is undefined: CI collapses to the
    difference itself and t, p are None.
    """
    diff = mean(a) - mean(b)
    sa, sb = sample_std(a), sample_std(b)
    if sa is None or sb is None:
        return Welch(diff, None, None, None, None, None)
    va, vb = sa**2 / len(a), sb**2 / len(b)
    se = math.sqrt(va + vb)
    if se == 0.0:
        return Welch(diff, diff, diff, None, None, None)
    df = (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1))
    t = diff / se
    p = t_two_sided_p(t, df)
    half = t_quantile(0.5 + confidence / 2, df) * se
    return Welch(diff, diff - half, diff + half, df, t, p)


def group_stats(trials: Sequence[CountedTrial]) -> list[GroupStats]:
    """Table 2: one row per group of counted trials, in table order."""
    members: dict[str, list[CountedTrial]] = {}
    for trial in trials:
        members.setdefault(trial.group, []).append(trial)
    rows = []
    for group, runs in members.items():
        d = describe([r.test_accuracy for r in runs])
        first = runs[0]
        rows.append(
            GroupStats(
                group=group,
                framework=first.framework,
                init=first.init,
                method=first.method,
                variant=first.variant,
                n=d.n,
                seeds=tuple(r.seed for r in runs),
                mean=d.mean,
                std=d.std,
                ci_low=d.ci_low,
                ci_high=d.ci_high,
                min=d.min,
                max=d.max,
                mean_best_step=mean([float(r.best_step) for r in runs]),
                trainable_params=tuple(
                    sorted({r.trainable_params for r in runs if r.trainable_params is not None})
                ),
                note=_few_runs_note(d.n),
            )
        )
    rows.sort(key=lambda g: (g.framework, g.init, g.method, g.variant, g.group))
    return rows


def compare(groups: Sequence[GroupStats], trials: Sequence[CountedTrial]) -> list[Comparison]:
    """Pretrained vs random within each framework, then fairseq vs HF within each init.

    Only groups that agree on everything else (method and any varied hyperparameters)
    are compared, so each difference isolates one factor.
    """
    values: dict[str, list[float]] = {}
    for trial in trials:
        values.setdefault(trial.group, []).append(trial.test_accuracy)
    index = {(g.framework, g.init, g.method, g.variant): g for g in groups}
    out = []
    for g in groups:
        if g.init == INIT_PAIR[0]:
            other = index.get((g.framework, INIT_PAIR[1], g.method, g.variant))
            if other is not None:
                within = _within(g.framework, g.method, g.variant)
                out.append(_compare(" - ".join(INIT_PAIR), within, g, other, values))
    for g in groups:
        if g.framework == FRAMEWORK_PAIR[0]:
            other = index.get((FRAMEWORK_PAIR[1], g.init, g.method, g.variant))
            if other is not None:
                within = _within(g.init, g.method, g.variant)
                out.append(_compare(" - ".join(FRAMEWORK_PAIR), within, g, other, values))
    return out


def _compare(
    kind: str, within: str, a: GroupStats, b: GroupStats, values: dict[str, list[float]]
) -> Comparison:
    w = welch(values[a.group], values[b.group])
    notes = []
    if min(a.n, b.n) < 2:
        notes.append("n = 1 in a group: CI and p undefined")
    elif min(a.n, b.n) < FEW_RUNS:
        notes.append(f"fewer than {FEW_RUNS} runs in a group")
    elif w.t is None:
        notes.append("both groups have zero variance: t undefined")
    return Comparison(
        kind=kind,
        within=within,
        group_a=a.group,
        group_b=b.group,
        n_a=a.n,
        n_b=b.n,
        mean_a=a.mean,
        mean_b=b.mean,
        diff=w.diff,
        ci_low=w.ci_low,
        ci_high=w.ci_high,
        df=w.df,
        t=w.t,
        p_value=w.p_value,
        note="; ".join(notes),
    )


def _within(first: str, method: str, variant: str) -> str:
    return f"{first}/{method}" + (f"[{variant}]" if variant else "")


def _few_runs_note(n: int) -> str:
    if n == 1:
        return "n = 1: std and CI undefined"
    if n < FEW_RUNS:
        return f"fewer than {FEW_RUNS} runs"
    return ""
