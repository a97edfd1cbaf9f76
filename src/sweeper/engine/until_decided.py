"""`sweeper run SPEC --until-decided`: add seeds only where a comparison is still open.

The plan (grid seeds, seeds per batch, `--max-seeds`, alpha, margin) is recorded on
the sweep's parent run before the first look; a resume with another plan exits 2
naming the difference. The grid runs first. Then, while some comparison of the summary
is undecided by the plan's rule (`sweeper.summarize.group_sequential` for a new plan:
boundaries over its looks; `sweeper.summarize.sequential` for older plans and seeds
past a plan: valid at any looks; either way stopping when they decide does not
inflate the error) and fewer than `--max-seeds` seeds have been run, the next batch of
seeds (the integers after the highest seed run so far) is added to the groups of the
undecided comparisons only. A comparison decided either way (better, or equivalent
within the margin) stops. A resume may raise `--max-seeds` (the plan is extended, the
rule past it named); nothing else of the plan changes. A batch is an ordinary grid
run over new trial keys through the same store planning as `--resume`, so nothing
finished is run again, a killed driver resumes with `--resume --until-decided`, and
the record holds one run per key. Seeds, not trials, are the unit: both groups of a
comparison get the same new seeds, so the new trials pair.

The final report says why the loop stopped and how many trials it saved against
running every group to `--max-seeds`; with a cost ledger, also what its trials held
(and cost, with the spec's `cost:` prices) and about how much the saved trials would
have held, at each group's recorded cost per counted trial.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import TYPE_CHECKING

from sweeper import record_names
from sweeper.engine.closing_report import summarise, summary_request
from sweeper.engine.grid import run_grid
from sweeper.engine.options import Budget, RunOptions, SweepError
from sweeper.engine.sweep import Sweep, open_grid, prepare
from sweeper.summarize.records import SequentialPlan

if TYPE_CHECKING:
    from sweeper.spec.schema import SweepSpec
    from sweeper.summarize.records import Summary
    from sweeper.trainers.trial_pipeline import SweepInputs


def run_until_decided(options: RunOptions, spec: SweepSpec, budget: Budget) -> int:
    """Run the grid, then batches of new seeds for the undecided groups; report once."""
    if budget.max_seeds < len(spec.grid.seed):
        raise SweepError(
            f"--max-seeds {budget.max_seeds} is below the grid's {len(spec.grid.seed)} seeds"
        )
    sweep = open_grid(options, spec)
    plan = record_plan(sweep, budget.plan(spec))
    print(
        f"plan: {plan.start} seeds, then +{plan.batch} per look up to {plan.max_seeds} "
        f"(looks at {', '.join(map(str, plan.looks()))}); decisions: {plan.method}, "
        f"family-wise alpha {plan.alpha:g}"
        + (f", equivalence margin ±{plan.margin:g}" if plan.margin is not None else ""),
        flush=True,
    )
    if plan.extended_to is not None:
        print(
            f"past the recorded plan's {plan.max_seeds} seeds (to {plan.extended_to}), a "
            "comparison is decided by the anytime-valid rule",
            flush=True,
        )
    inputs = prepare(spec)
    groups = {t.group for t in sweep.trials.values()}
    status = run_grid(sweep, inputs, report=False)
    while True:
        summary = _summary(sweep)
        open_groups = _undecided(summary)
        seeds = _seeds_run(spec, summary)
        reason = _stop_reason(status, open_groups, len(seeds), budget)
        if reason is not None:
            break
        decided = sum(c.decision != "undecided" for c in summary.comparisons)
        print(f"{decided} of {len(summary.comparisons)} comparisons decided", flush=True)
        count = min(budget.batch, budget.max_seeds - len(seeds))
        status = _run_batch(sweep, inputs, open_groups, _next_seeds(seeds, count))
    notes = [f"--until-decided stopped: {reason}", _saved(len(groups), budget, _keys(summary))]
    notes += _spent_and_saved(summary, groups, budget)
    for line in notes:
        print(line, flush=True)
    summarise(sweep, notes)
    return status


def record_plan(sweep: Sweep, plan: SequentialPlan) -> SequentialPlan:
    """Tag the parent run with the plan before the first look; returns the plan in
    force. A resumed sweep goes on under its recorded plan and rule, extended where
    the resume raises `--max-seeds`; one that asks for another start, batch or margin
    raises SweepError (exit 2) naming what differs, before anything is created:
    decisions are only valid under the plan they were made by."""
    from sweeper.tracking.runs import role_filter, search_all
    from sweeper.tracking.sweep_run import open_sweep_run

    filter_string = role_filter(record_names.ROLE_SWEEP, sweep.spec.name)
    existing = search_all(sweep.client, sweep.experiment_id, filter_string)
    if existing:
        recorded = existing[-1].data.tags.get(record_names.TAG_SEQUENTIAL_PLAN)
        if recorded:
            try:
                plan = SequentialPlan.from_dict(json.loads(recorded)).resumed_as(plan)
            except ValueError as differ:
                raise SweepError(
                    "this sweep's --until-decided plan was recorded before its first look "
                    f"and a resume must keep it; it differs in {differ} "
                    "(pass the recorded --seed-batch and --margin; --max-seeds may only rise)"
                ) from None
        run_id = existing[-1].info.run_id
    else:
        run_id = open_sweep_run(sweep.client, sweep.experiment_id, sweep.spec)
    text = json.dumps(plan.to_dict(), sort_keys=True)
    sweep.client.set_tag(run_id, record_names.TAG_SEQUENTIAL_PLAN, text)
    return plan


def _stop_reason(status: int, open_groups: set[str], seeds: int, budget: Budget) -> str | None:
    if status != 0:
        return "a trial did not finish (see above); no further seeds were added"
    if not open_groups:
        return "every comparison is decided"
    if seeds >= budget.max_seeds:
        return f"--max-seeds {budget.max_seeds} reached with comparisons undecided"
    return None


def _run_batch(sweep: Sweep, inputs: SweepInputs, groups: set[str], seeds: list[int]) -> int:
    """The grid over `seeds`, restricted to `groups`: new keys, planned as a resume."""
    from sweeper.engine.open_store import open_and_plan
    from sweeper.trial_keys import expand

    trials, _ = expand(sweep.spec, seeds=seeds)
    trials = [t for t in trials if t.group in groups]
    print(
        f"undecided: {', '.join(sorted(groups))}\n"
        f"adding seeds {', '.join(map(str, seeds))} to {len(groups)} group(s): "
        f"{len(trials)} trials",
        flush=True,
    )
    options = replace(sweep.options, resume=True)
    store = open_and_plan(options, sweep.spec, [t.key for t in trials])
    batch = Sweep(
        options,
        sweep.spec,
        {t.key: t for t in trials},
        store.plan,
        store.client,
        store.experiment_id,
        store.uri,
    )
    return run_grid(batch, inputs, report=False)


def _summary(sweep: Sweep) -> Summary:
    """One look: the summary the closing report prints, by the same request."""
    from sweeper.summarize import summarize

    return summarize(summary_request(sweep), sweep.client)


def _undecided(summary: Summary) -> set[str]:
    from sweeper.summarize.decide import undecided_groups

    return undecided_groups(summary.comparisons)


def _seeds_run(spec: SweepSpec, summary: Summary) -> list[int]:
    """Every seed the sweep has run (a resumed loop counts earlier batches too)."""
    seeds = set(spec.grid.seed)
    seeds |= {t.seed for t in summary.trials if t.seed is not None}
    seeds |= {n.seed for n in summary.not_counted if n.seed is not None}
    return sorted(seeds)


def _next_seeds(seeds: list[int], count: int) -> list[int]:
    start = max(seeds) + 1 if seeds else 1
    return list(range(start, start + count))


def _keys(summary: Summary) -> int:
    """Trial keys the sweep has run, counted or not (a key is one trial, retries included)."""
    keys = {t.trial_key for t in summary.trials}
    return len(keys | {n.trial_key for n in summary.not_counted if n.trial_key})


def _spent_and_saved(summary: Summary, groups: set[str], budget: Budget) -> list[str]:
    """What the loop's trials held (and cost), and what bringing every group to
    `--max-seeds` would have held beyond them (`sweeper.summarize.spend`)."""
    from sweeper.summarize.spend import until_decided_lines

    ran = dict.fromkeys(groups, 0)
    keys = {(t.group, t.trial_key) for t in summary.trials}
    keys |= {(n.group, n.trial_key) for n in summary.not_counted if n.trial_key}
    for group, _ in keys:
        if group in ran:
            ran[group] += 1
    return [
        f"--until-decided {line}" for line in until_decided_lines(summary, budget.max_seeds, ran)
    ]


def _saved(groups: int, budget: Budget, ran: int) -> str:
    full = groups * budget.max_seeds
    return (
        f"trials run: {ran}; every group to --max-seeds {budget.max_seeds} would have "
        f"run {full} ({groups} groups x {budget.max_seeds} seeds): {full - ran} saved"
    )
