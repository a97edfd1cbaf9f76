"""Summaries built by hand, with every kind of decision, for the report renderers' tests.

Four groups (fairseq|hf x pretrained|random, full fine-tuning, 8 seeds each) and four
comparisons: one group better (A), one better the other way (B), one equivalent (with
a margin) or a second decided one (Holm: no equivalence), and one undecided. The
numbers are chosen, not computed: a renderer only has to print them faithfully.
"""

from __future__ import annotations

from dataclasses import replace

from sweeper.summarize.records import (
    ANYTIME_METHOD,
    Comparison,
    CountedTrial,
    GroupStats,
    SequentialPlan,
    Summary,
)

GROUPS = {
    "fairseq/pretrained/full": (74.0, 1.12, 73.0634, 74.9366),
    "fairseq/random/full": (49.8333, 3.4521, 46.9473, 52.7194),
    "hf/pretrained/full": (73.5, 1.31, 72.4048, 74.5952),
    "hf/random/full": (71.2114, 2.0, 69.5394, 72.8834),
}
ALPHA = 0.05
MARGIN = 3.0


def group(name: str, n: int = 8) -> GroupStats:
    framework, init, method = name.split("/")
    mean, std, low, high = GROUPS[name]
    return GroupStats(
        group=name, framework=framework, init=init, method=method, variant="", n=n,
        seeds=tuple(range(1, n + 1)), mean=mean, std=std, ci_low=low, ci_high=high,
        min=mean - 2, max=mean + 2, mean_best_step=900.0, trainable_params=(124_647_170,),
        note="",
    )  # fmt: skip


def trial(name: str, seed: int) -> CountedTrial:
    """Table 1's row for seed `seed` of group `name` (around the group's mean)."""
    framework, init, method = name.split("/")
    test = GROUPS[name][0] + (seed - 4.5) / 4
    return CountedTrial(
        run_id=f"{seed:02d}{name.replace('/', '')}", run_name=f"{name}-s{seed}",
        trial_key=f"{name}-{seed}", group=name, framework=framework, init=init, method=method,
        variant="", seed=seed, best_valid=test + 1.5, best_step=900, best_epoch=4.0,
        test_value=test, wall_time=61.25, trainable_params=124_647_170,
    )  # fmt: skip


def comparison(axis: str, a: str, b: str, **fields: object) -> Comparison:
    """A paired comparison of groups a and b with their means; `fields` override."""
    mean_a, mean_b = GROUPS[a][0], GROUPS[b][0]
    index = 0 if axis == "framework" else 1
    value_a, value_b = a.split("/")[index], b.split("/")[index]
    within = "/".join(p for p, q in zip(a.split("/"), b.split("/"), strict=True) if p == q)
    base = Comparison(
        axis=axis, kind=f"{value_a} - {value_b}", within=within, group_a=a, group_b=b,
        n_a=8, n_b=8, mean_a=mean_a, mean_b=mean_b, diff=mean_a - mean_b, paired=True,
        n_pairs=8, test="paired t", ci_low=None, ci_high=None, df=7.0, t=None,
        p_value=None, boot_low=None, boot_high=None, p_wilcoxon=0.0078, note="",
        alpha=ALPHA, p_improve=0.875, p_improve_low=0.5291, p_improve_high=0.9776,
        cohens_dz=1.2345,
    )  # fmt: skip
    return replace(base, **fields)  # type: ignore[arg-type]


def _summary(comparisons: list[Comparison], **fields: object) -> Summary:
    return Summary(
        experiment="demo",
        experiment_id="1",
        tracking_uri="sqlite:///x.db",
        sweep="demo",
        parent_run_id="p" * 32,
        trials=[trial(name, seed) for name in GROUPS for seed in range(1, 9)],
        groups=[group(name) for name in GROUPS],
        comparisons=comparisons,
        not_counted=[],
        **fields,  # type: ignore[arg-type]
    )


FP, FR, HP, HR = GROUPS


def holm_summary() -> Summary:
    """Seeds fixed in advance, no margin: decided by Holm-adjusted p."""
    level = 1 - ALPHA / 4
    common = {"rule": "Holm", "decision_level": level}
    return _summary(
        [
            comparison("init", FP, FR, ci_low=21.1234, ci_high=27.2099, p_value=0.00052,
                       p_holm=0.0021, decision=f"{FP} better", decision_low=19.0041,
                       decision_high=29.3291, equivalent_within=29.3291, **common),
            comparison("framework", FR, HR, ci_low=-25.0012, ci_high=-17.7551,
                       p_value=0.000004, p_holm=0.000016, decision=f"{HR} better",
                       decision_low=-26.5, decision_high=-16.2562, equivalent_within=26.5,
                       **common),
            comparison("framework", FP, HP, ci_low=-0.8123, ci_high=1.8123, p_value=0.41,
                       p_holm=0.82, decision="undecided", decision_low=-1.5, decision_high=2.5,
                       equivalent_within=2.5, seeds_needed=41, **common),
            comparison("init", HP, HR, ci_low=-0.7391, ci_high=5.3163, p_value=0.1111,
                       p_holm=0.3333, decision="undecided", decision_low=-1.9871,
                       decision_high=6.5643, equivalent_within=6.5643, seeds_needed=23,
                       **common),
        ]
    )  # fmt: skip


def interval_summary() -> Summary:
    """Seeds fixed in advance, margin ±3: decided by Bonferroni t intervals."""
    return _summary(
        [
            replace(c, rule="interval", margin=MARGIN, p_holm=None, decision=decision)
            for c, decision in zip(
                holm_summary().comparisons,
                [f"{FP} better", f"{HR} better", "equivalent within ±3", "undecided"],
                strict=True,
            )
        ],
        margin=MARGIN,
    )


def sequential_summary() -> Summary:
    """Seeds added until decided (--until-decided) under a plan recorded with the
    anytime-valid rule: its intervals and looks."""
    plan = SequentialPlan(
        start=4, batch=2, max_seeds=10, alpha=ALPHA, margin=MARGIN, method=ANYTIME_METHOD
    )
    looks = [(2, 6), (1, 4), (3, 8), (3, 8)]
    return _summary(
        [
            replace(c, rule="anytime-valid", look=look, n_decision=pairs, seeds_needed=(
                c.seeds_needed if c.decision == "undecided" else None))
            for c, (look, pairs) in zip(interval_summary().comparisons, looks, strict=True)
        ],
        plan=plan,
        margin=MARGIN,
    )  # fmt: skip
