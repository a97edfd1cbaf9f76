"""Which groups a summary compares, and how each pair is tested.

Every axis that varies is compared: framework, init, method and each grid parameter.
Two groups are compared when they differ on that axis alone and agree on every other
one; a parameter that one method ignores (`lora.*` for full fine-tuning) is not
"another axis" of a method comparison, so full fine-tuning is compared with each LoRA
group, and LoRA groups with each other along `lora.r`. Likewise the pretraining
objective (`model.pretrain.objective`), which `random` trials ignore, is not another
axis of an init comparison: each objective's pretrained group is compared with the
random one, and the objectives with each other within each framework.

The blocks of one sweep that vary one source of randomness each (`seed_source=init`,
`data_order`, `dropout` in a group's variant) are not compared with each other: they
estimate the same setup; comparisons within a block stay.

Pairing (docs/architecture.md, "Statistics"): every trial's randomness comes from its
seed, and two trials of one seed that differ on one axis share

  ========== ============================================================== ======
  axis       what two trials of one seed share                               paired
  ========== ============================================================== ======
  framework  the starting weights: one file, encoder and head (invariant 2);  yes
             not the data order or dropout (each framework's own sampler)
  init       the classification head and, within one framework, the seeded   yes
             data order and dropout stream; the encoder differs by design
  method     the starting weights and HF's seeded data order; LoRA's A        yes
             matrices are drawn after reseeding, so they depend on the seed
  parameter  the starting weights; the data order too unless the parameter    yes
             changes batching (train.batch_size)
  ========== ============================================================== ======

so a comparison is tested on seed-matched differences (paired t, with Wilcoxon's
signed-rank beside it) whenever at least two seeds are counted in both groups, and with
Welch's unpaired t otherwise. `PAIRED_AXES` is that table's last column.

Beside the t-test, the exact sign-flip p of the same differences (`exact.sign_flip_p`,
paired only), which no normality assumption stands behind; the note says when the
differences are skewed beyond what normal ones give, or a group holds a trial whose
test predictions were all one class (`sweeper.summarize.assumptions`).

Beside the test, two effect sizes a reader can weigh: P(A > B), the share of seeds on
which A beat B (ties count one half) with its 95% Wilson score interval (what
`statsmodels.stats.proportion.proportion_confint(method="wilson")` computes), and
Cohen's d_z, the mean difference over the spread of the differences.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Sequence
from itertools import combinations
from typing import get_args

from sweeper import backends
from sweeper.spec.model_block import OBJECTIVE_AXIS, Objective
from sweeper.summarize.records import Comparison, CountedTrial, GroupStats
from sweeper.summarize.stats import (
    BOOTSTRAP_MIN_N,
    CONFIDENCE,
    FEW_RUNS,
    Bounds,
    TTest,
    bootstrap_ci,
    by_seed,
    clip,
    mean,
    paired_t,
    sample_std,
    t_quantile,
    welch,
    wilcoxon_p,
)
from sweeper.trial_keys import SEED_SOURCE_AXIS

AXES = ("init", "framework", "method")
"""The fixed axes, in report order; grid parameters follow, sorted by name."""
ORDER = {
    "init": ("pretrained", "random"),
    "framework": (),
    "method": ("full", "lora"),
    OBJECTIVE_AXIS: get_args(Objective),
}
"""Which value is A in `A - B` on the fixed axes and the objective (the reference setup
first: `masked_lm - causal_lm`); the frameworks' order is the backend table's
(`sweeper.backends.frameworks`, built-ins first), read when comparing."""
IGNORED_BY = {"method": "lora.", "init": OBJECTIVE_AXIS}
"""Per fixed axis, the parameters (by prefix) that one of its values ignores: a
difference there is no other axis of that axis' comparison."""
PAIRED_AXES = frozenset({"init", "framework", "method", "parameter"})
_VARIANT_SPLIT = re.compile(rf",(?=[A-Za-z_][\w]*\.[\w.]+=|{SEED_SOURCE_AXIS}=)")
"""Where a variant splits: before a dotted key or the seed source (a value may hold commas)."""


def variant_values(variant: str) -> dict[str, str]:
    """`lora.r=8,train.lr=0.001` -> {'lora.r': '8', 'train.lr': '0.001'} (a value may
    itself hold commas, e.g. a list of target modules)."""
    if not variant:
        return {}
    return dict(part.split("=", 1) for part in _VARIANT_SPLIT.split(variant))


def coordinates(group: GroupStats) -> dict[str, str]:
    """The group's value on every axis."""
    return {
        "init": group.init,
        "framework": group.framework,
        "method": group.method,
        **variant_values(group.variant),
    }


def compare(
    groups: Sequence[GroupStats],
    trials: Sequence[CountedTrial],
    alpha: float = 0.05,
    bounds: Bounds | None = None,
) -> list[Comparison]:
    """One Comparison per pair of groups that differ on one axis only, axis by axis.
    `alpha`: Wilcoxon's p is left out where its exact test cannot reach it; `bounds`:
    the range of a difference of the metric (accuracy: ±100), which clips intervals."""
    values = by_seed(trials)
    collapsed: dict[str, list[int | None]] = {}
    for t in trials:
        if t.collapsed_class is not None:
            collapsed.setdefault(t.group, []).append(t.seed)
    return [
        _compare(axis, a, b, values[a.group], values[b.group], alpha, bounds, collapsed)
        for axis, a, b in pairs(groups)
    ]


def pairs(groups: Sequence[GroupStats]) -> Iterator[tuple[str, GroupStats, GroupStats]]:
    """(axis, A, B) for every pair of groups that differ on `axis` alone. Which seed
    source varied (`trial_keys.SEED_SOURCE_AXIS`) is no axis: its blocks are one setup,
    set side by side in the variance table (`sweeper.summarize.variance`); groups of
    different blocks are not compared, those of one block are, paired by seed."""
    coords = {g.group: coordinates(g) for g in groups}
    params = sorted({k for c in coords.values() for k in c} - {*AXES, SEED_SOURCE_AXIS})
    for axis in (*AXES, *params):
        for a, b in combinations(groups, 2):
            ca, cb = coords[a.group], coords[b.group]
            if ca.get(axis) == cb.get(axis) or not _same_elsewhere(axis, ca, cb):
                continue
            yield (axis, a, b) if _first(axis, ca, cb) else (axis, b, a)


def _same_elsewhere(axis: str, ca: dict[str, str], cb: dict[str, str]) -> bool:
    ignore = {axis}
    ignore |= {k for k in (*ca, *cb) if _ignored(axis, k)}
    keys = (set(ca) | set(cb)) - ignore
    return all(ca.get(k) == cb.get(k) for k in keys)


def _first(axis: str, ca: dict[str, str], cb: dict[str, str]) -> bool:
    """Whether A's value comes first: the fixed order, else numeric, else text."""
    va, vb = ca.get(axis, ""), cb.get(axis, "")
    if axis in ORDER:
        rank = ORDER[axis] or tuple(backends.frameworks())
        return (rank.index(va) if va in rank else len(rank), va) <= (
            rank.index(vb) if vb in rank else len(rank),
            vb,
        )
    return _sort_key(va) <= _sort_key(vb)


def _sort_key(value: str) -> tuple:
    try:
        return (0, float(value), value)
    except ValueError:
        return (1, 0.0, value)


def _ignored(axis: str, key: str) -> bool:
    """Whether the parameter `key` is one that a value of `axis` ignores (`IGNORED_BY`)."""
    prefix = IGNORED_BY.get(axis)
    return prefix is not None and key.startswith(prefix)


def _label(axis: str, group: GroupStats) -> str:
    """The group's side of `A - B`: its value on the axis, with the parameters the axis'
    other value ignores (they are not in `within`)."""
    if axis in AXES:
        value = coordinates(group)[axis]
        if axis == "method" and group.variant:
            return f"{value}[{group.variant}]"
        own = [f"{k}={v}" for k, v in variant_values(group.variant).items() if _ignored(axis, k)]
        return f"{value}[{','.join(own)}]" if own else value
    return f"{axis}={coordinates(group).get(axis, '')}"


def _within(axis: str, a: GroupStats) -> str:
    coords = coordinates(a)
    fixed = [coords[k] for k in ("framework", "init", "method") if k != axis]
    params = [
        f"{k}={v}"
        for k, v in coords.items()
        if k not in AXES and k != axis and not _ignored(axis, k)
    ]
    return "/".join(fixed) + (f"[{','.join(params)}]" if params else "")


def _compare(
    axis: str,
    a: GroupStats,
    b: GroupStats,
    seeds_a: dict[int | None, float],
    seeds_b: dict[int | None, float],
    alpha: float,
    bounds: Bounds | None,
    collapsed: dict[str, list[int | None]],
) -> Comparison:
    from sweeper.summarize.assumptions import skewed
    from sweeper.summarize.exact import sign_flip_p

    shared = sorted(s for s in seeds_a.keys() & seeds_b.keys() if s is not None)
    kind = "parameter" if axis not in AXES else axis
    paired = kind in PAIRED_AXES and len(shared) >= 2
    values_a, values_b = list(seeds_a.values()), list(seeds_b.values())
    differences = [seeds_a[s] - seeds_b[s] for s in shared] if paired else []
    if paired:
        test = paired_t(differences)
        boot = bootstrap_ci([differences], min_n=BOOTSTRAP_MIN_N)
        p_wilcoxon = wilcoxon_p(differences, alpha)
    else:
        test = welch(values_a, values_b)
        boot = bootstrap_ci([values_a, values_b], min_n=BOOTSTRAP_MIN_N)
        p_wilcoxon = None
    ci_low, ci_high = clip(test.ci_low, test.ci_high, bounds)
    boot_low, boot_high = clip(*boot, bounds)
    improve = probability_of_improvement(differences) if paired else None
    return Comparison(
        axis=axis,
        kind=f"{_label(axis, a)} - {_label(axis, b)}",
        within=_within(axis, a),
        group_a=a.group,
        group_b=b.group,
        n_a=a.n,
        n_b=b.n,
        mean_a=a.mean,
        mean_b=b.mean,
        diff=test.diff,
        paired=paired,
        n_pairs=len(shared),
        test="paired t" if paired else "Welch t",
        ci_low=ci_low,
        ci_high=ci_high,
        df=test.df,
        t=test.t,
        p_value=test.p_value,
        boot_low=boot_low,
        boot_high=boot_high,
        p_wilcoxon=p_wilcoxon,
        p_sign_flip=sign_flip_p(differences) if paired else None,
        note=_note(a, b, paired, len(shared), test, skewed(differences), collapsed),
        p_improve=None if improve is None else improve[0],
        p_improve_low=None if improve is None else improve[1],
        p_improve_high=None if improve is None else improve[2],
        cohens_dz=cohens_dz(differences) if paired else None,
    )


def probability_of_improvement(differences: Sequence[float]) -> tuple[float, float, float]:
    """(P(A > B), 95% Wilson low, high) over seed-matched differences; a tie is half a win."""
    n = len(differences)
    wins = sum(1.0 if d > 0 else 0.5 if d == 0 else 0.0 for d in differences)
    share = wins / n
    z = t_quantile(0.5 + CONFIDENCE / 2, math.inf)
    centre = (share + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(share * (1 - share) / n + z * z / (4 * n * n))
    return share, max(0.0, centre - half), min(1.0, centre + half)


def cohens_dz(differences: Sequence[float]) -> float | None:
    """Mean seed difference over their sample standard deviation; None without spread."""
    spread = sample_std(differences)
    return None if not spread else mean(differences) / spread


def _note(
    a: GroupStats,
    b: GroupStats,
    paired: bool,
    n_pairs: int,
    test: TTest,
    skewness: float | None,
    collapsed: dict[str, list[int | None]],
) -> str:
    notes = []
    n = n_pairs if paired else min(a.n, b.n)
    if n < 2:
        notes.append("n = 1 in a group: CI and p undefined")
    elif n < FEW_RUNS:
        notes.append(f"fewer than {FEW_RUNS} {'pairs' if paired else 'runs in a group'}")
    if n >= 2 and test.t is None:
        notes.append(
            "no spread: every seed gives the same difference (t infinite; p is the exact "
            "sign-flip or permutation test's smallest)"
            if test.p_value is not None
            else "no spread and no difference: t and p undefined"
        )
    if skewness is not None:
        notes.append(
            f"differences skewed (skewness {skewness:+.2f}, beyond 99% of normal samples of "
            f"{n_pairs}): the t-based decision assumes roughly symmetric differences; "
            "see the exact sign-flip p"
        )
    for group in (a, b):
        if group.group in collapsed:
            seeds = ", ".join(str(s) for s in collapsed[group.group])
            notes.append(
                f"{group.group}: collapsed trial(s), every test prediction one class "
                f"(seed {seeds}): the differences are not near normal"
            )
    if paired and n_pairs < max(a.n, b.n):
        notes.append(f"paired on the {n_pairs} seeds counted in both groups")
    for group in (a, b):
        lost = ", ".join(f"{n} {kind.replace('_', '-')}" for kind, n in group.outcomes.items())
        if lost:
            notes.append(f"{group.group}: {lost} not counted")
    return "; ".join(notes)
