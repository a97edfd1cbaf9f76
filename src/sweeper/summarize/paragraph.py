"""The results in words: one paragraph to paste under the tables.

It gives every group's mean with its 95% t interval, the rule the comparisons were
decided by, and for each comparison: decided or not and which way, the difference,
on how many seeds or pairs, the interval the decision was read from with its level,
and the method (Holm-adjusted p beside the 95% t interval for fixed seeds; the
Bonferroni t interval with a margin; the sequential rule's interval and its look after
`--until-decided`), or for an undecided one the seeds estimated to decide it, with the
trials and resource-hours (and money) they would take where the sweep has a cost ledger.
Where the trials hold test predictions, what the test set can resolve: its interval
over the examples and the combined McNemar p, the seeds x examples interval, and below
the resolution the words that say no number of seeds decides it
(`sweeper.summarize.resolution_text`).

Nothing is computed here. Every number is rendered from the same record field by the
same `sweeper.summarize.cells` function as the Table 2 or comparisons cell it
repeats, so the paragraph and the tables agree to the last printed digit; the counts
and levels in the rule's sentence are those of the comparisons table's title and
headers.
"""

from __future__ import annotations

from typing import Any

from sweeper.summarize.cells import (
    CI_T,
    DECISION_INTERVAL,
    DIFFERENCE,
    EQUIVALENT_WITHIN,
    NA,
    P_HOLM,
    field,
    level_text,
    metric_format,
    n_ab,
    needed_spend,
    plan_words,
    sequential_rules,
)
from sweeper.summarize.records import SEQUENTIAL_RULES, Comparison, Summary
from sweeper.summarize.resolution_text import (
    SEEDS_X_EXAMPLES_CELL,
    below_words,
    decided_interval_words,
    rule_sentence,
)
from sweeper.summarize.resolution_text import evidence as test_set_evidence
from sweeper.summarize.variance import TEST_SET

BETTER = " better"
EQUIVALENT = "equivalent"


def results_paragraph(summary: Summary) -> str:
    """`results_sentences` as one paragraph (one line, no markup)."""
    return " ".join(results_sentences(summary))


def results_sentences(summary: Summary) -> list[str]:
    """A sentence on the groups, one on the decision rule, then one per comparison:
    the decided ones, then the equivalent ones, then the undecided ones, each kind in
    the comparisons table's order."""
    if not summary.groups:
        return ["No trial was counted, so there are no results to report."]
    sentences = [_groups(summary)]
    if summary.comparisons:
        sentences.append(_rule(summary))
        ranked = sorted(summary.comparisons, key=_outcome)
        sentences.extend(comparison_sentence(summary, c) for c in ranked)
    return sentences + variance_sentences(summary)


def comparison_sentence(summary: Summary, comparison: Comparison) -> str:
    """One comparison: its outcome, the difference A - B and the evidence for it."""
    row = comparison.to_dict()
    a, b = _sides(comparison)
    unit = " points" if summary.selection.is_default() else ""
    difference = f"{comparison.kind} = {DIFFERENCE(row)}{unit}"
    evidence = _evidence(comparison, row) + test_set_evidence(comparison, row)
    below = below_words(comparison)
    where = f"Within {comparison.within}, " if comparison.within else "Overall, "
    axis = comparison.axis
    if comparison.decision.endswith(BETTER):
        winner = comparison.decision.removesuffix(BETTER)
        win, lose = (b, a) if winner == comparison.group_b else (a, b)
        caveat = f"; {below}, so this holds for this test set" if below else ""
        return f"{where}{win} beats {lose} on {axis}: {difference} ({evidence}){caveat}."
    if comparison.decision.startswith(EQUIVALENT):
        supported = EQUIVALENT_WITHIN(row)
        caveat = f"; {below}" if below else ""
        return (
            f"{where}{a} and {b} are {comparison.decision} on {axis}: {difference} "
            f"({evidence}; the data support {supported}){caveat}."
        )
    needed, spend = field("seeds_needed")(row), needed_spend(row)
    withheld = comparison.test_set.withheld if comparison.test_set is not None else None
    if below:
        tail = below
    elif needed != NA:
        tail = f"an estimated {needed} seeds per group would decide it"
    elif withheld is not None:
        tail = f"seeds needed is not offered: {withheld}"
    else:
        tail = "the seeds that would decide it cannot be estimated from the observed effect"
    if spend:
        tail += f" ({spend})"
    return f"{where}{a} vs {b} on {axis} is undecided: {difference} ({evidence}); {tail}."


def _groups(summary: Summary) -> str:
    """Each group's mean and 95% t interval, as Table 2 prints them."""
    selection = summary.selection
    mean = field("mean", metric_format(selection.primary))
    sizes = {group.n for group in summary.groups}
    items = []
    for row in (group.to_dict() for group in summary.groups):
        text = f"{row['group']} scored {mean(row)}"
        if len(sizes) > 1:
            text += f" over {_seeds(row['n'])}"
        ci = CI_T(row)
        items.append(text if ci == NA else f"{text} (95% CI {ci})")
    lead = f"Over {_seeds(next(iter(sizes)))} per group, " if len(sizes) == 1 else ""
    what = "test accuracy in %" if selection.is_default() else selection.primary
    listed = items[0] if len(items) == 1 else ", ".join(items[:-1]) + f" and {items[-1]}"
    return f"{lead}{listed} (mean {what}, at each trial's best-validation checkpoint)."


def _rule(summary: Summary) -> str:
    """How the comparisons were decided, in the comparisons table's own terms."""
    first = summary.comparisons[0]
    level, alpha = level_text(first.decision_level), f"{first.alpha:g}"
    if summary.plan is not None:
        return (
            f"Seeds were added until decided ({plan_words(summary)}); each comparison is "
            f"decided by its {sequential_rules(summary)} {level} interval, which holds at "
            f"every look at once (family-wise alpha = {alpha})."
        )
    if summary.margin is not None:
        return (
            f"Each comparison is decided by its {level} t interval (Bonferroni, family-wise "
            f"alpha = {alpha}): better when it excludes zero, equivalent when it lies inside "
            f"±{summary.margin:g}."
        ) + rule_sentence(summary)
    return (
        f"Comparisons are decided by Holm-adjusted p below the family-wise alpha = {alpha}, "
        "with the seeds fixed in advance."
    ) + rule_sentence(summary)


def _evidence(c: Comparison, row: dict[str, Any]) -> str:
    """The sizes, the interval the decision was read from, its level and the rule."""
    decided = _outcome(c) < 2
    sizes = (
        f"n = {c.n_pairs} pairs"
        if c.paired and c.n_a == c.n_b == c.n_pairs
        else f"n = {n_ab(row)} seeds"
    )
    level, interval = level_text(c.decision_level), DECISION_INTERVAL(row)
    if c.rule in SEQUENTIAL_RULES:
        if c.look is None:
            return f"{sizes}; no look had 2 seed pairs yet, so no {c.rule} interval"
        shown = (
            f"{c.rule} {level} interval {interval}"
            if interval != NA
            else f"{c.rule} {level} interval still unbounded"
        )
        at = f"decided at look {c.look}" if decided else f"at look {c.look}, the last with data"
        if c.n_decision != c.n_pairs:  # decided before the loop's last look
            return f"{sizes}; {at} on {c.n_decision} pairs: {shown}"
        return f"{sizes}, {shown}, {at}"
    which = decided_interval_words(c)
    if c.rule == "interval":
        if interval == NA:
            return f"{sizes}; no Bonferroni {level} {which}t interval (too few seeds)"
        return f"{sizes}, Bonferroni {level} {which}t interval {interval}"
    ci, p_holm = CI_T(row), P_HOLM(row)
    if which:  # the seeds x examples test is what Holm adjusted
        ci, test = SEEDS_X_EXAMPLES_CELL(row), "seeds x examples t"
    else:
        test = c.test
    parts = [sizes, f"{test} 95% CI {ci}" if ci != NA else f"no {test} CI (too few seeds)"]
    if p_holm == NA:
        parts.append("no Holm-adjusted p (too few seeds)")
    else:
        below = c.p_holm is not None and c.p_holm < c.alpha
        parts.append(f"Holm-adjusted p = {p_holm} {'<' if below else '>='} {c.alpha:g}")
        if below and level != "95%":  # the 95% CI above otherwise
            parts.append(f"{which}t interval at Holm's step level {level} {interval}")
    return ", ".join(parts)


def _outcome(c: Comparison) -> int:
    """0: one group is better, 1: equivalent, 2: undecided."""
    if c.decision.endswith(BETTER):
        return 0
    return 1 if c.decision.startswith(EQUIVALENT) else 2


def _sides(c: Comparison) -> tuple[str, str]:
    """The axis' values of A and B (`pretrained`, `random`), else the group names."""
    parts = c.kind.split(" - ")
    return (parts[0], parts[1]) if len(parts) == 2 else (c.group_a, c.group_b)


def _seeds(n: int) -> str:
    return f"{n} seed{'' if n == 1 else 's'}"


SOURCE_WORDS = {
    "all": "seeds varying every source",
    "init": "the init seed alone",
    "data_order": "the data order seed alone",
    "dropout": "the dropout seed alone",
}


def variance_sentences(summary: Summary) -> list[str]:
    """Per group of the variance table: the std each varied source gives one trial's
    test value, then the test set's, as the table's Std cells print them."""
    std = field("std", metric_format(summary.selection.primary))
    unit = " points" if summary.selection.is_default() else ""
    groups: dict[str, list[dict[str, Any]]] = {}
    for row in summary.variance:
        groups.setdefault(row.group, []).append(row.to_dict())
    sentences = []
    for group, rows in groups.items():
        parts = [
            f"{std(r)}{unit} over {SOURCE_WORDS.get(r['source'], r['source'])} (n = {r['n']})"
            for r in rows
            if r["source"] != TEST_SET and r["std"] is not None
        ]
        test = next((r for r in rows if r["source"] == TEST_SET), None)
        text = f"Within {group}, one trial's test value moves by a std of " + (
            ", ".join(parts) if parts else "n/a over seeds (fewer than 2 trials per source)"
        )
        if test is not None:
            size = f"{test['examples']:,} examples" if test["examples"] else "the same size"
            text += (
                f"; a new test set of {size} would move it by {std(test)}{unit} "
                "(bootstrap over its examples), which no number of seeds reduces"
            )
        sentences.append(text + ".")
    return sentences
