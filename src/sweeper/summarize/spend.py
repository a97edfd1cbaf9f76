"""The cost ledger in the summary: per group, per sweep, per undecided comparison.

`sweep_cost` sums the trial runs' recorded totals (`sweeper.summarize.costs`); the
others put them where the tables read them: Table 2's rows (`with_group_costs`), each
undecided comparison's estimate (`with_needed`), the preamble's one line for the sweep
(`sweep_line`) and what `--until-decided` spent and saved (`until_decided_lines`).
Every number is the sum of what the runs recorded, so a summary's hours are the runs'
seconds over 3600, and nothing is estimated but the "needed" and "saved" figures.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from sweeper.record_names import Stage
from sweeper.summarize.cells import amount
from sweeper.summarize.costs import HOUR, Prices, Spend, SweepCost, needed, per_trial
from sweeper.summarize.records import Comparison, GroupStats, RunRecord, Summary


def sweep_cost(runs: Sequence[RunRecord], prices: Prices | None) -> SweepCost | None:
    """The sweep's spend from its trial runs' ledgers; None when no run has one."""
    spends = [(run, Spend.of_run(run.latest)) for run in runs]
    recorded = [(run, spend) for run, spend in spends if spend is not None]
    if not recorded:
        return None
    groups: dict[str, list[Spend]] = {}
    for run, spend in recorded:
        if run.stage != Stage.SEARCH:
            groups.setdefault(run.group, []).append(spend)
    search = [spend for run, spend in recorded if run.stage == Stage.SEARCH]
    return SweepCost(
        total=Spend.total(spend for _, spend in recorded),
        groups={group: Spend.total(items) for group, items in groups.items()},
        search=Spend.total(search) if search else None,
        prices=prices,
    )


def with_group_costs(groups: Sequence[GroupStats], cost: SweepCost | None) -> list[GroupStats]:
    """Table 2's rows with their groups' resource-hours (and price)."""
    if cost is None:
        return list(groups)
    rows = []
    for group in groups:
        spend = cost.groups.get(group.group)
        if spend is None:
            rows.append(group)
            continue
        rows.append(
            dataclasses.replace(
                group,
                cpu_hours=spend.cpu_hours,
                gpu_hours=spend.gpu_hours if cost.gpu else None,
                cost=cost.money(spend),
                currency=cost.prices.currency if cost.prices else None,
            )
        )
    return rows


def with_needed(
    comparisons: Sequence[Comparison], groups: Sequence[GroupStats], cost: SweepCost | None
) -> list[Comparison]:
    """Each comparison with seeds needed, priced: the trials that bring both groups to
    that many seeds, at each group's recorded seconds per counted trial."""
    if cost is None:
        return list(comparisons)
    counted = {g.group: g.n for g in groups}
    rates = {g: per_trial(cost.groups.get(g, Spend()), n) for g, n in counted.items()}
    rows = []
    for c in comparisons:
        if c.seeds_needed is None:
            rows.append(c)
            continue
        estimate = needed(c.seeds_needed, {c.group_a: c.n_a, c.group_b: c.n_b}, rates)
        if estimate is None:
            rows.append(c)
            continue
        rows.append(
            dataclasses.replace(
                c,
                needed_trials=estimate.trials,
                needed_cpu_hours=estimate.cpu_seconds / HOUR,
                needed_gpu_hours=estimate.gpu_seconds / HOUR if cost.gpu else None,
                needed_cost=cost.prices.of(estimate.cpu_seconds, estimate.gpu_seconds)
                if cost.prices
                else None,
                currency=cost.prices.currency if cost.prices else None,
            )
        )
    return rows


def spend_words(cost: SweepCost, spend: Spend) -> str:
    """`0.0123 CPU-hours, 1.50 GPU-hours (3.75 USD)` (GPU and money where they apply)."""
    parts = [f"{amount(spend.cpu_hours)} CPU-hours"]
    if cost.gpu:
        parts.append(f"{amount(spend.gpu_hours)} GPU-hours")
    money = cost.money(spend)
    price = (
        f" ({amount(money)} {cost.prices.currency})" if money is not None and cost.prices else ""
    )
    return ", ".join(parts) + price


def sweep_line(summary: Summary) -> str | None:
    """The preamble's line on the whole sweep: what its trials held, what lost attempts
    held, what the trials measured; None without a ledger."""
    cost = summary.cost
    if cost is None:
        return None
    total = cost.total
    line = (
        f"Cost: {spend_words(cost, total)} held over {_count(total.attempts, 'attempt')} "
        f"of {_count(total.runs, 'trial run')}"
    )
    if total.lost_attempts:
        lost = Spend(cpu_seconds=total.lost_cpu_seconds, gpu_seconds=total.lost_gpu_seconds)
        line += (
            f"; lost: {_count(total.lost_attempts, 'attempt')} that did not end their trial "
            f"held {spend_words(cost, lost)} of it"
        )
    line += f"; measured: {amount(total.cpu_time_seconds / HOUR)} CPU-hours used"
    if cost.gpu:
        line += f", {amount(total.gpu_time_seconds / HOUR)} GPU-hours busy (sampled)"
    if cost.search is not None:
        line += f"; search stage: {spend_words(cost, cost.search)}"
    return line


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def until_decided_lines(summary: Summary, max_seeds: int, ran: dict[str, int]) -> list[str]:
    """What `--until-decided` spent, and what running every group to `max_seeds` would
    have cost beyond it (`ran`: trial keys run per group), at each group's recorded
    seconds per counted trial; empty without a ledger."""
    cost = summary.cost
    if cost is None:
        return []
    lines = [f"spent: {spend_words(cost, cost.total)} ({cost.total.attempts} attempts)"]
    counted = {g.group: g.n for g in summary.groups}
    rates = {g: per_trial(cost.groups.get(g, Spend()), n) for g, n in counted.items()}
    estimate = needed(max_seeds, ran, rates)
    if estimate is None:
        return [*lines, "saved: not estimable (a group has no counted trial to price)"]
    saved = Spend(cpu_seconds=estimate.cpu_seconds, gpu_seconds=estimate.gpu_seconds)
    lines.append(
        f"saved against every group at --max-seeds {max_seeds}: {estimate.trials} trials, "
        f"about {spend_words(cost, saved)} (each group's recorded cost per counted trial)"
    )
    return lines
