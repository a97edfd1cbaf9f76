"""One group's search: continue its Optuna study with a search Tuner until it has
`num_samples` completed trials.

The study says how many trials are left and which a killed driver was running
(`sweeper.tracking.study.reconcile`: they are enqueued again with the same values, so
they continue their own runs). The Tuner comes from the one builder,
`sweeper.tune.tuner.build_tuner`, with the run-creating Optuna searcher and, if the
spec asks, ASHA as its scheduler.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from sweeper.engine.open_store import SweepStore
from sweeper.engine.options import RunOptions
from sweeper.engine.sweep import trial_view
from sweeper.spec.schema import SweepSpec
from sweeper.trainers.trial_pipeline import SweepInputs
from sweeper.trial_keys import Trial

if TYPE_CHECKING:
    from ray.tune.schedulers import TrialScheduler

    from sweeper.search.searcher import SearchCallback, SearchDriver
    from sweeper.spec.axes_block import SearchConfig
    from sweeper.tracking.recorder import Recorder
    from sweeper.tune.progress import Progress


@dataclass(frozen=True)
class SearchRun:
    """What every group's search shares: the invocation, its store, inputs and record."""

    options: RunOptions
    spec: SweepSpec
    store: SweepStore
    inputs: SweepInputs
    parent: str
    """The sweep's parent run id."""
    url: str
    """The Optuna storage holding every group's study."""


def search_group(run: SearchRun, base: Trial, stamp: str) -> int | None:
    """One group's search, continuing its study; returns how many trials failed, or
    None if it was stopped before all its trials ended."""
    from sweeper.tracking.cost_ledger import CostLedger
    from sweeper.tracking.outbox import sweep_outbox
    from sweeper.tracking.recorder import MetricLog, Recorder
    from sweeper.tracking.study import completed, open_study, reconcile, study_name
    from sweeper.tune.progress import FAILED, Progress

    search = run.spec.search
    assert search is not None
    name = study_name(run.spec.name, base.group)
    study = open_study(run.url, name, search.mode)
    stale = reconcile(study)
    done = completed(study)
    todo = search.num_samples - done
    if todo <= 0:
        print(f"search {base.group}: {done} of {search.num_samples} trials done before", flush=True)
        return 0
    for params in stale[:todo]:  # a killed driver's trials: same values, same runs
        study.enqueue_trial(params)
    print(
        f"search {base.group}: {done} of {search.num_samples} trials done before, {todo} to "
        f"run ({min(len(stale), todo)} of them resumed); Optuna study {name!r}",
        flush=True,
    )
    ledger = CostLedger(run.spec.resources.cpu, run.spec.resources.gpu)
    outbox = sweep_outbox(run.store.uri)
    recorder = Recorder(run.store.client, {}, MetricLog(), outbox, ledger)
    with Progress({}) as progress:
        driver = _driver(run, base, recorder, progress)
        callback = _fit(run, driver, name, todo, len(study.trials), stamp)
    stopped = [key for key in driver.keys if key not in callback.ended]
    for key in stopped:  # the sweep was stopped (Ctrl-C): resumable
        recorder.interrupted(key)
    recorder.drain()
    if stopped or len(driver.keys) < todo:
        return None
    return sum(1 for key in driver.keys if progress.views[key].status == FAILED)


def _driver(run: SearchRun, base: Trial, recorder: Recorder, progress: Progress) -> SearchDriver:
    """The searcher's driver-side context: where each sampled trial's run goes."""
    from sweeper.search.searcher import SearchDriver
    from sweeper.tracking.lineage import sweep_lineage

    existing = {found.trial_key: found.run_id for found in run.store.found}
    return SearchDriver(
        spec=run.spec,
        base=base,
        client=run.store.client,
        experiment_id=run.store.experiment_id,
        parent_run_id=run.parent,
        recorder=recorder,
        progress=progress,
        existing=existing,
        view=lambda trial: trial_view(trial, run.inputs),
        lineage=sweep_lineage(run.spec, run.inputs),
    )


def _fit(
    run: SearchRun, driver: SearchDriver, name: str, todo: int, trials_so_far: int, stamp: str
) -> SearchCallback:
    """Build and run the group's Tuner; returns its callback (which trials ended)."""
    from optuna.storages import RDBStorage
    from ray.tune.search.optuna import OptunaSearch

    from sweeper.engine.grid import stage_inputs
    from sweeper.search.searcher import (
        OBJECTIVE,
        RunCreatingSearcher,
        SearchCallback,
        SearchTrialNames,
        run_search_trial,
    )
    from sweeper.tracking.study import distributions, make_sampler
    from sweeper.tune.trainable import TrialContext
    from sweeper.tune.tuner import build_tuner

    spec = run.spec
    search = spec.search
    assert search is not None
    inner = OptunaSearch(
        space=distributions(search.space),
        metric=OBJECTIVE,
        mode=search.mode,
        study_name=name,
        storage=RDBStorage(run.url),
        sampler=make_sampler(name, search.num_samples, trials_so_far),
    )
    staged = stage_inputs(run.store.client, run.store.experiment_id, run.store.uri, run.inputs)
    ctx = TrialContext(
        spec=spec, trials={}, inputs=run.inputs, runs={}, tracking_uri=run.store.uri,
        threads=max(1, int(spec.resources.cpu)), staged=staged,
    )  # fmt: skip
    callback = SearchCallback(driver.recorder, driver.progress)
    tuner = build_tuner(
        ctx,
        run_search_trial,
        name=f"{spec.name}-search-{stamp}",
        max_concurrent=run.options.max_concurrent or spec.max_concurrent,
        callbacks=[callback],
        searcher=RunCreatingSearcher(inner, driver, search.mode),
        scheduler=_scheduler(search),
        num_samples=todo,
        trial_names=SearchTrialNames(),
        reuse_actors=False,
    )
    tuner.fit()
    return callback


def _scheduler(search: SearchConfig) -> TrialScheduler | None:
    """ASHA over validation points, if the spec asks for it."""
    from ray.tune.schedulers import ASHAScheduler

    from sweeper.search.searcher import OBJECTIVE

    if search.scheduler is None:
        return None
    return ASHAScheduler(
        time_attr="training_iteration",  # one report per validation point
        metric=OBJECTIVE,
        mode=search.mode,
        max_t=1_000_000,  # never stop a trial for its length: only ASHA's rungs do
        grace_period=search.scheduler.grace_period,
        reduction_factor=search.scheduler.reduction_factor,
    )
