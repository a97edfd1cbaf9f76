"""Which runs count, and each counted trial's best-validation checkpoint.

The rules (docs/architecture.md, invariants 1 and 3), applied in this order:

1. A trial run counts only if MLflow says FINISHED *and* sweeper's status tag says
   `finished`: a trial the scheduler early-stopped is FINISHED in MLflow, and a crashed
   driver can leave a run RUNNING forever, so neither field is enough alone.
2. One run per trial key. A second finished run for a key is a duplicate (a bug in the
   engine or a manual re-run); the earliest-started run is kept, the other listed.
3. Search-stage trials (Optuna, on tuning seeds with sampled hyperparameters) are not
   tabulated: the grid and confirm stages are the experiment, the search is how its
   settings were chosen.
4. The best validation point is the best value of the sweep's selection metric
   (`sweeper.selection.Selection`; classification: the highest `valid_accuracy`); ties
   go to the earliest step (the checkpoint a `--maximize-best-checkpoint-metric` run
   keeps): the one rule of `sweeper.selection.best_point`, which every other choice of a
   best point uses. Its test value is the first reported metric (`test_accuracy`)
   logged at that same step; without one the trial is not counted, never paired with a
   test value from another step.

A step logged twice (a resumed trial re-running a validation) uses its latest value.
A run's own best-checkpoint metrics give the same point (`recorded_checkpoint`), so the
summary reads histories only for runs that lack them, and curves only for figures.
Nothing is dropped silently: every trial run left out becomes a NotCounted with a reason.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence

from sweeper import record_names
from sweeper.record_names import RunState, Stage, Status
from sweeper.selection import ACCURACY, Selection, best_point
from sweeper.summarize.assumptions import collapsed_class
from sweeper.summarize.mlflow_reader import History
from sweeper.summarize.records import CountedTrial, NotCounted, Point, RunRecord


def history_keys(selection: Selection) -> tuple[str, ...]:
    """The metric histories `best_checkpoint` reads under `selection`; everything else
    comes from latest values."""
    return (selection.metric, *selection.report, record_names.METRIC_EPOCH)


HISTORY_KEYS = history_keys(ACCURACY)
"""A classification sweep's: valid and test accuracy, epoch."""

_ERROR_CHARS = 160


def screen(runs: Sequence[RunRecord]) -> tuple[list[RunRecord], list[NotCounted]]:
    """Split trial runs into candidates (one per key) and the not counted (rules 1-3)."""
    kept: dict[str, RunRecord] = {}
    not_counted: list[NotCounted] = []
    for run in sorted(runs, key=_started):
        reason = _screen_reason(run, kept)
        if reason is None and run.trial_key is not None:
            kept[run.trial_key] = run
        else:
            not_counted.append(left_out(run, reason or ""))
    return list(kept.values()), not_counted


def _screen_reason(run: RunRecord, kept: dict[str, RunRecord]) -> str | None:
    reason = status_reason(run)
    if reason is not None:
        return reason
    if run.trial_key is None:
        return f"no {record_names.TAG_TRIAL_KEY} tag"
    if run.stage == Stage.SEARCH:
        return "search-stage trial (the tables use the grid and confirm stages)"
    if run.trial_key in kept:
        first = kept[run.trial_key].run_id
        return (
            f"duplicate: trial key {run.trial_key} is already counted with the "
            f"earlier-started run {first}"
        )
    return None


def status_reason(run: RunRecord) -> str | None:
    """Why a run's statuses keep it out of the tables, or None if it finished (rule 1)."""
    if run.mlflow_status == RunState.FAILED:
        return _with_error("failed (MLflow status FAILED)", run.error)
    if run.mlflow_status == RunState.KILLED:  # the sweep was stopped mid-trial; resumable
        return "interrupted (MLflow status KILLED)"
    if run.status == Status.FAILED:
        return _with_error("failed", run.error)
    if run.status == Status.EARLY_STOPPED:
        return "early-stopped by the scheduler"
    if run.status == Status.RUNNING or run.mlflow_status in {RunState.RUNNING, RunState.SCHEDULED}:
        return f"not finished (MLflow status {run.mlflow_status}, status tag {run.status})"
    if run.status is None:
        return f"no {record_names.TAG_STATUS} tag"
    if run.status != Status.FINISHED:
        return f"unknown {record_names.TAG_STATUS} {run.status!r}"
    if run.mlflow_status != RunState.FINISHED:
        return f"MLflow status {run.mlflow_status}"
    return None


def best_checkpoint(
    run: RunRecord, history: dict[str, tuple[Point, ...]], selection: Selection = ACCURACY
) -> CountedTrial | NotCounted:
    """The run's best-validation step and the test values at it (rule 4)."""
    valid = by_step(history.get(selection.metric, ()))
    best = best_point(valid.items(), selection.mode)
    if best is None:
        return left_out(run, f"no {selection.metric} logged")
    best_step = best[0]
    test = by_step(history.get(selection.primary, ()))
    if best_step not in test:
        return left_out(run, f"no {selection.primary} at its best validation step {best_step}")
    others = {name: by_step(history.get(name, ())).get(best_step) for name in selection.report[1:]}
    epoch = by_step(history.get(record_names.METRIC_EPOCH, ())).get(best_step)
    curve = tuple(sorted(valid.items()))
    return _counted(run, valid[best_step], best_step, epoch, test[best_step], others, curve)


def recorded_checkpoint(run: RunRecord, selection: Selection = ACCURACY) -> CountedTrial | None:
    """The run's best checkpoint as its own best-checkpoint metrics give it
    (`Selection.best_names`), without its curve; None where they do not give it whole
    (a value missing or not finite): read its histories then.

    A finished trial logs these metrics once, from the validation points it sent, by
    `best_checkpoint`'s rule (`tune.trainable.best_points`; corrections of a resumed
    trial's points are what MLflow's histories hold last, as `by_step` reads them), and
    the summariser logs them for a counted run that lacks them from its histories, so
    under the selection they were logged for they are what `best_checkpoint` finds.
    The caller checks that selection (`sweeper summarize --recompute` checks the rest)."""
    prefix = record_names.METRIC_BEST_PREFIX
    valid = _finite(run.latest.get(prefix + selection.metric))
    test = _finite(run.latest.get(prefix + selection.primary))
    step = _finite(run.latest.get(record_names.METRIC_BEST_STEP))
    if valid is None or test is None or step is None or step != int(step):
        return None
    others = {name: _finite(run.latest.get(prefix + name)) for name in selection.report[1:]}
    epoch = _finite(run.latest.get(record_names.METRIC_BEST_EPOCH))
    return _counted(run, valid, int(step), epoch, test, others, ())


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def _counted(
    run: RunRecord,
    valid: float,
    step: int,
    epoch: float | None,
    test: float,
    others: dict[str, float | None],
    curve: tuple[tuple[int, float], ...],
) -> CountedTrial:
    return CountedTrial(
        run_id=run.run_id,
        run_name=run.run_name,
        trial_key=run.trial_key or "",
        group=run.group,
        framework=run.framework,
        init=run.init,
        method=run.method,
        variant=run.variant,
        seed=run.seed,
        best_valid=valid,
        best_step=step,
        best_epoch=epoch,
        test_value=test,
        wall_time=run.wall_time,
        trainable_params=run.trainable_params,
        valid_curve=curve,
        precision=run.precision,
        diverged=non_finite_loss(run),
        other_tests={name: value for name, value in others.items() if value is not None},
        collapsed_class=collapsed_class(run.latest),
        seed_source=run.seed_source,
        seeds=dict(run.seeds),
        predictions=run.predictions,
    )


def select(
    candidates: Sequence[RunRecord],
    histories: History,
    selection: Selection = ACCURACY,
    recorded: Mapping[str, CountedTrial] | None = None,
) -> tuple[list[CountedTrial], list[NotCounted]]:
    """Best checkpoints of the candidates, in table order (group, then seed): from
    `recorded` (run id -> `recorded_checkpoint`) where it has the run, else from its
    histories."""
    trials: list[CountedTrial] = []
    not_counted: list[NotCounted] = []
    for run in candidates:
        result = (recorded or {}).get(run.run_id) or best_checkpoint(
            run, histories.get(run.run_id, {}), selection
        )
        if isinstance(result, CountedTrial):
            trials.append(result)
        else:
            not_counted.append(result)
    trials.sort(key=trial_order)
    return trials, not_counted


def by_step(points: Sequence[Point]) -> dict[int, float]:
    """step -> value, the latest finite value where a step was logged more than once."""
    values: dict[int, float] = {}
    for point in sorted(points, key=lambda p: (p.step, p.timestamp)):
        if math.isfinite(point.value):
            values[point.step] = point.value
    return values


def trial_order(trial: CountedTrial) -> tuple:
    seed = trial.seed if trial.seed is not None else -1
    return (trial.framework, trial.init, trial.method, trial.variant, seed, trial.run_id)


def left_out(run: RunRecord, reason: str) -> NotCounted:
    return NotCounted(
        run_id=run.run_id,
        run_name=run.run_name,
        trial_key=run.trial_key,
        group=run.group,
        seed=run.seed,
        reason=reason,
        outcome=outcome(run),
    )


_NON_FINITE = re.compile(r"FloatingPointError|\bnan\b|\binf\b|non-finite|diverg", re.IGNORECASE)


def outcome(run: RunRecord) -> str:
    """How Table 2 counts a run left out: a failure on a NaN/Inf (fairseq raises
    FloatingPointError on non-finite gradients) is `diverged`, not just `failed`."""
    if run.stage == Stage.SEARCH:
        return "search"
    if run.status == Status.EARLY_STOPPED:
        return "early_stopped"
    if run.mlflow_status == RunState.FAILED or run.status == Status.FAILED:
        return "diverged" if _NON_FINITE.search(run.error or "") else "failed"
    if run.mlflow_status != RunState.FINISHED or run.status == Status.RUNNING:
        return "unfinished"
    return "other"


def non_finite_loss(run: RunRecord) -> bool:
    loss = run.latest.get(record_names.METRIC_TRAIN_LOSS)
    return loss is not None and not math.isfinite(loss)


def _started(run: RunRecord) -> tuple[int, str]:
    return (run.start_time if run.start_time is not None else 0, run.run_id)


def _with_error(reason: str, error: str | None) -> str:
    lines = [line.strip() for line in (error or "").splitlines() if line.strip()]
    if not lines:
        return reason
    last = lines[-1]
    return f"{reason}: {last[:_ERROR_CHARS]}{'...' if len(last) > _ERROR_CHARS else ''}"
