"""The Ray side of the search stage: sampled values -> trial key and run, trainable, callback.

A search trial's values are only known when Optuna samples them, so its MLflow run
cannot be created before Tune starts as the grid's runs are. `RunCreatingSearcher`
wraps Ray's `OptunaSearch` and, in the driver, turns each suggestion into a Trial (its
key hashed from the sampled values exactly as a grid trial's, plus `stage=search`),
finds or creates that key's run, and hands trial and run to the trainable in the Ray
trial's config. "One trial key, one MLflow run" therefore holds as in the grid: a Ray
retry gets the same config, and a resumed search that enqueues a killed trial's values
again gets the same key, hence the same run and trainer folder.

Objective. Tune needs the metric in every report and ASHA compares trials at equal
report counts (`training_iteration`: one report per validation point, plus the final
one). Every report therefore carries `OBJECTIVE`, the trial's best value of the search
metric so far (by mode); reports before the first validation point are held back and
their metric points sent with the next one. Optuna is told the last OBJECTIVE: the
metric at the trial's best validation point, the value the confirm stage selects on.

Early stopping. A trial ASHA stops ends without its final report: `SearchCallback`
tags its run `sweeper.status=early_stopped` and ends it FINISHED in MLflow (it ran
correctly; the scheduler chose to stop it). The summariser leaves such runs out of
every table and out of the best-configuration choice.

This module imports Ray at the top; only `sweeper.search.group` imports it, inside a
function.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from ray.tune.search import Searcher

from sweeper import record_names
from sweeper.record_names import RunState, Stage, Status
from sweeper.selection import Mode, is_better
from sweeper.spec.schema import SweepSpec
from sweeper.tracking.cost_ledger import recorded_totals
from sweeper.tracking.recorder import Recorder, last_steps
from sweeper.tracking.resume_sync import discard_run_copies
from sweeper.tune.callback import TrackingCallback
from sweeper.tune.progress import FINISHED, Progress, TrialView
from sweeper.tune.trainable import CONFIG_KEY, FINAL, POINTS, RunRef, TrialContext, run_reporting

OBJECTIVE = "search_objective"
"""Tune/ASHA/Optuna metric: the trial's best search-metric value so far."""
TRIAL = "sweeper_trial"
RUN = "sweeper_run"


def search_trial(spec: SweepSpec, base: Any, params: dict[str, Any]) -> Any:
    """The search trial of group `base` (a Trial on the tuning seed) with `params`
    sampled: its recipe holds the values, its group and name stay the group's."""
    from sweeper.trial_keys import make_trial

    trial = make_trial(
        spec,
        seed=base.seed,
        init=base.init,
        framework=base.framework,
        method=base.method,
        varied={**base.varied, **params},
    )
    return replace(trial, varied=dict(base.varied), stage=Stage.SEARCH)


@dataclass
class SearchDriver:
    """What the searcher needs to give each sampled trial its run (driver side only)."""

    spec: SweepSpec
    base: Any
    """The group's trial on the tuning seed (grid values only)."""
    client: Any
    experiment_id: str
    parent_run_id: str
    recorder: Recorder
    progress: Progress
    existing: dict[str, str]
    """trial key -> run id of search runs made by an earlier invocation."""
    view: Callable[[Any], TrialView]
    keys: list[str] = field(default_factory=list)
    """Keys suggested in this invocation, in order."""
    lineage: list[Any] = field(default_factory=list)
    """The datasets each new run records (`tracking.lineage`)."""


class RunCreatingSearcher(Searcher):
    """OptunaSearch, plus: each suggestion becomes a Trial with its MLflow run."""

    def __init__(self, inner: Searcher, driver: SearchDriver, mode: str):
        super().__init__(metric=OBJECTIVE, mode=mode)
        self.inner = inner
        self.driver = driver

    def __getstate__(self) -> dict[str, Any]:
        """Tune pickles its searcher into the experiment state; the Optuna study (and
        MLflow) are the state a resume starts from, the live client is not picklable."""
        return {}

    def set_search_properties(self, metric: str | None, mode: str | None, config: dict, **spec):
        return self.inner.set_search_properties(metric, mode, config, **spec)

    def suggest(self, trial_id: str) -> dict | None:
        params = self.inner.suggest(trial_id)
        if params is None or params == Searcher.FINISHED:
            return params
        return self._with_run(params)

    def on_trial_result(self, trial_id: str, result: dict) -> None:
        self.inner.on_trial_result(trial_id, result)

    def on_trial_complete(self, trial_id: str, result: dict | None = None, error: bool = False):
        self.inner.on_trial_complete(trial_id, result=result, error=error)

    def save(self, checkpoint_path: str) -> None:
        raise NotImplementedError("the Optuna study in its RDB storage is the search state")

    def restore(self, checkpoint_path: str) -> None:
        raise NotImplementedError("the Optuna study in its RDB storage is the search state")

    def _with_run(self, params: dict[str, Any]) -> dict[str, Any]:
        from sweeper.tracking.lineage import log_lineage
        from sweeper.tracking.runs import create_trial_run

        d = self.driver
        trial = search_trial(d.spec, d.base, params)
        key = trial.key
        run_id = d.existing.get(key)
        name = f"{trial.name}-search-{key[:6]}"
        if run_id is None:
            tags = {record_names.TAG_SEARCH_PARAMS: json.dumps(params, sort_keys=True)}
            run_id = create_trial_run(
                d.client, d.experiment_id, d.parent_run_id, trial, stage=Stage.SEARCH,
                extra_tags=tags, run_name=name,
            )  # fmt: skip
            log_lineage(d.client, [run_id], d.lineage)
        else:  # a killed driver's trial, enqueued again: continue its run
            d.recorder.metrics.seed(run_id, last_steps(d.client, run_id))
            if d.recorder.ledger is not None:  # its earlier attempts' cost, added to
                d.recorder.ledger.seed(run_id, recorded_totals(d.client, run_id))
        d.existing[key] = run_id  # the same values sampled again: the same run
        d.recorder.runs[key] = run_id
        d.progress.views[key] = replace(d.view(trial), name=name)
        d.keys.append(key)
        ref = RunRef(run_id, d.client.get_run(run_id).info.artifact_uri)
        return {CONFIG_KEY: key, TRIAL: trial, RUN: ref}


class ObjectiveReport:
    """Adds OBJECTIVE to every Tune report (see the module docstring)."""

    def __init__(self, report: Callable[[dict[str, Any]], None], metric: str, mode: Mode):
        self._report = report
        self._metric = metric
        self._mode = mode
        self._held: list[list[Any]] = []
        self.best: float | None = None

    def __call__(self, metrics: dict[str, Any]) -> None:
        value = metrics.get(self._metric)
        if value is not None and is_better(float(value), self.best, self._mode):
            self.best = float(value)
        if self.best is None:
            self._held.extend(metrics.get(POINTS) or [])
            return
        if self._held:
            metrics[POINTS] = [*self._held, *(metrics.get(POINTS) or [])]
            self._held = []
        metrics[OBJECTIVE] = self.best
        self._report(metrics)


def run_search_trial(config: dict[str, Any], ctx: TrialContext) -> None:
    """The Ray trainable of a search trial: the grid's trial body, objective added."""
    from ray import tune

    search = ctx.spec.search
    assert search is not None
    trial, ref = config[TRIAL], config[RUN]
    if trial.key != config[CONFIG_KEY]:
        raise RuntimeError(f"search trial key mismatch: {trial.key} != {config[CONFIG_KEY]}")
    run_reporting(ctx, trial, ref, ObjectiveReport(tune.report, search.metric, search.mode))


class SearchTrialNames:
    """Tune trial names and folders from the trial in the config (picklable)."""

    def __call__(self, trial: Any) -> str:
        found = trial.config.get(TRIAL)
        return f"{found.name}-{found.key[:8]}" if found is not None else trial.trial_id


class SearchCallback(TrackingCallback):
    """The grid's tracking callback, plus early stops: a trial that completes without
    its final report was stopped by the scheduler."""

    def on_trial_complete(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        if (trial.last_result or {}).get(FINAL):
            super().on_trial_complete(iteration, trials, trial, **info)
            return
        key = trial.config[CONFIG_KEY]
        self.recorder.attempt_ended(key, lost=False)  # stopped by decision: nothing redone
        self._early_stopped(self.recorder.runs[key])
        self.ended.add(key)
        view = self.progress.views[key]
        view.status = FINISHED
        step = (trial.last_result or {}).get("step")
        self.progress.note(
            f"{self.progress.prefix()} {view.name}: early-stopped (ASHA) at step {step}"
        )

    def _early_stopped(self, run_id: str) -> None:
        """Tag and end the run, through the recorder's outbox (in order, retried); its
        resume copies go too: nothing resumes an early-stopped trial."""
        client = self.recorder.client

        def write() -> None:
            client.set_tag(run_id, record_names.TAG_STATUS, Status.EARLY_STOPPED)
            client.set_terminated(run_id, status=RunState.FINISHED)
            artifact_uri = client.get_run(run_id).info.artifact_uri
            discard_run_copies(artifact_uri, client.tracking_uri)

        self.recorder.outbox.put(f"early stop of run {run_id}", write, run_id=run_id, status=True)
