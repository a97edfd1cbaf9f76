"""A grid sweep before it runs: its trials, its open store and run plan, its inputs.

`open_grid` expands the spec's grid into trials and opens the store with their keys
planned (`sweeper.engine.open_store`); `prepare` builds the data and the pretrained
checkpoint once for every trial. Both happen before any run is created, so what they
refuse costs nothing (docs/architecture.md, invariant 5). The search stage's confirm
step builds a `Sweep` of its own (`sweeper.search.confirm`) and hands it to the same
`run_grid`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from sweeper.engine.open_store import open_and_plan
from sweeper.engine.options import EXIT_FAILED, RunOptions, SweepError
from sweeper.record_names import Stage
from sweeper.selection import ACCURACY, Selection

if TYPE_CHECKING:
    from mlflow import MlflowClient

    from sweeper.spec.schema import SweepSpec
    from sweeper.tracking.runs import RunPlan
    from sweeper.trainers.trial_pipeline import SweepInputs
    from sweeper.trial_keys import Trial
    from sweeper.tune.progress import TrialView


@dataclass
class Sweep:
    """What the steps of one grid run share once the store is open."""

    options: RunOptions
    spec: SweepSpec
    trials: dict[str, Trial]
    """trial key -> trial, in grid order"""
    plan: RunPlan
    client: MlflowClient
    experiment_id: str
    uri: str
    stage: Stage = Stage.GRID
    """Stage tag of the runs this sweep creates (`confirm` after a search)."""
    tags: dict[str, dict[str, str]] = field(default_factory=dict)
    """Extra tags of the run each key creates (a confirm trial's searched values)."""


def open_grid(options: RunOptions, spec: SweepSpec) -> Sweep:
    """The spec's grid with the store open and its runs planned; prints what it will
    do. Raises SweepError (exit 2) before anything is created."""
    from sweeper.trial_keys import expand

    trials, skipped = expand(spec)
    store = open_and_plan(options, spec, [t.key for t in trials])
    plan = store.plan
    for item in skipped:
        print(f"skipped {item.combination}: {item.reason}")
    print(
        f"{store.where}: {len(trials)} trials ({len(plan.done)} finished before, "
        f"{len(plan.resume)} to resume, {len(plan.create)} new)",
        flush=True,
    )
    by_key = {t.key: t for t in trials}
    return Sweep(options, spec, by_key, plan, store.client, store.experiment_id, store.uri)


def prepare(spec: SweepSpec, need_pretrained: bool = True) -> SweepInputs:
    """Data and (unless the pretraining stage runs beside the trials: `need_pretrained`
    False, `sweeper.engine.stage_graph`) the pretrained checkpoint, once, before any trial and
    any run is created. Raises SweepError: exit 2 on bad data, 1 if pretraining fails."""
    from sweeper.data.errors import DataError
    from sweeper.logs import quiet_root_logger
    from sweeper.trainers.runner import TrainerError
    from sweeper.trainers.trial_pipeline import prepare_inputs

    try:
        return prepare_inputs(spec, log=_say, need_pretrained=need_pretrained)
    except (DataError, ValueError) as exc:
        raise SweepError(str(exc)) from None
    except TrainerError as exc:
        raise SweepError(f"pretraining failed: {exc}", EXIT_FAILED) from None
    finally:
        quiet_root_logger()  # binarizing imported fairseq (sweeper.logs)


def _say(line: str) -> None:
    print(line, flush=True)


def trial_view(trial: Trial, inputs: SweepInputs, selection: Selection = ACCURACY) -> TrialView:
    """The progress view's entry for a trial: its name, total optimizer updates and the
    metric its "best" is picked by."""
    from sweeper.tune.progress import TrialView

    per_epoch = -(-inputs.num_train // int(trial.train["batch_size"]))
    total = per_epoch * int(trial.train["epochs"])
    return TrialView(name=trial.name, total=total, selection=selection)
