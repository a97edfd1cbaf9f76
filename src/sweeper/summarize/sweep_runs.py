"""A summary's reading step: one sweep's runs from the store, and which trials count.

`read_sweep` asks the store for the experiment's runs, keeps the requested sweep's
(invariant 1: one run per trial key, finished ones only, `sweeper.summarize.select`),
leaves out trial runs made from other inputs than the request's, settles the
selection (`--metric`) and finds each counted trial's best checkpoint: from the
best-checkpoint metrics its run carries when they were logged under the same
selection, else from its metric histories, which only then are read. Every note
about what was left out goes with the result; nothing here computes a statistic.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from sweeper import record_names
from sweeper.selection import Selection
from sweeper.summarize.mlflow_reader import SummarizeError
from sweeper.summarize.records import CountedTrial, NotCounted, RunRecord
from sweeper.summarize.request import SummaryRequest
from sweeper.summarize.select import history_keys, left_out, recorded_checkpoint, screen, select
from sweeper.summarize.source import RunSource


@dataclass(frozen=True)
class SweepRuns:
    """What the store holds of one sweep, and which of its trials count."""

    experiment_id: str
    experiment: str
    """The experiment's name as the store spells it."""
    sweep: str | None
    """The sweep reported (`SummaryRequest.sweep`, else the only one found)."""
    runs: list[RunRecord]
    """Every run of the sweep: trials of every stage and input, parent runs."""
    parents: list[RunRecord]
    """The sweep's parent (sweep) runs."""
    candidates: list[RunRecord]
    """Finished trial runs from the request's inputs, one per trial key."""
    trials: list[CountedTrial]
    """The counted trials, each at its best checkpoint (Table 1)."""
    not_counted: list[NotCounted]
    """The trial runs left out, each with why, in listing order."""
    selection: Selection
    """The selection the trials were picked by (`--metric` applied)."""
    notes: list[str]
    """What the reading left out or decided, for the summary's notes."""


def read_sweep(source: RunSource, request: SummaryRequest) -> SweepRuns:
    """The sweep `request` names, read from `source`; SummarizeError for an unknown
    experiment, or an experiment holding several sweeps when none is named."""
    experiment_id, experiment = source.experiment(request.experiment)
    runs = source.runs(experiment_id)
    notes: list[str] = []

    sweep = _pick_sweep(runs, request.sweep, request.experiment, notes)
    runs = [r for r in runs if r.sweep in (None, sweep)]
    trial_runs = [r for r in runs if r.role == record_names.ROLE_TRIAL]
    parents = [r for r in runs if r.role == record_names.ROLE_SWEEP]
    untagged = sum(
        1 for r in runs if r.role not in (record_names.ROLE_TRIAL, record_names.ROLE_SWEEP)
    )
    if untagged:
        notes.append(
            f"runs without a {record_names.TAG_ROLE} tag ignored (not sweeper runs): {untagged}"
        )

    trial_runs, other_inputs = _same_inputs(trial_runs, request.inputs)
    if other_inputs:
        notes.append(
            f"{len(other_inputs)} trial run(s) were made from other inputs than this spec's "
            "(see Not counted): summarise with the overrides the sweep ran with"
        )
    logged_under = Selection.from_json(next((p.select for p in parents if p.select), None))
    selection = request.selection if request.selection is not None else logged_under
    if request.metric is not None:
        stored, selection = selection, selection.on(request.metric)
        if selection.metric != stored.metric:
            notes.append(
                f"best checkpoints picked by {selection.metric} (--metric); the trainers "
                f"stored the ones {stored.metric} picks (the sweep's select:), which is "
                "what --evaluate re-measures"
            )
    candidates, not_counted = screen(trial_runs)
    not_counted += other_inputs
    recorded = {}
    if parents and selection == logged_under and not request.recompute:
        recorded = {r.run_id: t for r in candidates if (t := recorded_checkpoint(r, selection))}
    unread = [r.run_id for r in candidates if r.run_id not in recorded]
    histories = source.histories(unread, history_keys(selection)) if unread else {}
    trials, unusable = select(candidates, histories, selection, recorded)
    return SweepRuns(
        experiment_id=experiment_id,
        experiment=experiment,
        sweep=sweep,
        runs=runs,
        parents=parents,
        candidates=candidates,
        trials=trials,
        not_counted=sorted([*not_counted, *unusable], key=_listing_order),
        selection=selection,
        notes=notes,
    )


def _same_inputs(
    runs: list[RunRecord], inputs: dict[str, str] | None
) -> tuple[list[RunRecord], list[NotCounted]]:
    """Split off the runs tagged with other inputs than the spec's (untagged runs stay)."""
    if inputs is None:
        return runs, []
    from sweeper.tracking.inputs import changed

    kept, other = [], []
    for run in runs:
        differ = changed(json.loads(run.inputs), inputs) if run.inputs else []
        if differ:
            reason = f"made from other inputs than the spec's: {', '.join(differ)} differ"
            other.append(left_out(run, reason))
        else:
            kept.append(run)
    return kept, other


def _listing_order(item: NotCounted) -> tuple:
    return (item.group, item.seed if item.seed is not None else -1, item.run_id)


def _pick_sweep(
    runs: Sequence[RunRecord], sweep: str | None, experiment: str, notes: list[str]
) -> str | None:
    """The sweep to report: the one asked for, else the only one the trials are tagged with."""
    names = sorted(
        {r.sweep for r in runs if r.sweep is not None and r.role == record_names.ROLE_TRIAL}
    )
    if sweep is not None:
        others = [n for n in names if n != sweep]
        if others:
            notes.append(f"runs of other sweeps in this experiment ignored: {', '.join(others)}")
        return sweep
    if len(names) > 1:
        raise SummarizeError(
            f"experiment {experiment!r} holds trials of several sweeps ({', '.join(names)}); "
            "choose one with --sweep NAME"
        )
    return names[0] if names else None
