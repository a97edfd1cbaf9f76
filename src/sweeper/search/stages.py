"""`sweeper run` for a spec with a `search:` block: the search stage, then the confirm stage.

Search. Groups (framework × init × method × grid.params, as in the grid) are searched
one after another, each by its own Ray Tune run: `OptunaSearch` on the group's
persisted study (`study.py`), ASHA if the spec asks, `max_concurrent` trials at once
on the tuning seed. Ray is started once for all groups. Every trial is an MLflow run
tagged `sweeper.stage=search` under the sweep's parent run, created by the searcher as
its values are sampled (`searcher.py`).

Confirm. Each group's best configuration (`confirm.py`, by the rule the summary
reports) is run over every `grid.seed` by the grid engine of `sweeper.cli.run`, its
runs tagged `sweeper.stage=confirm` and keyed like grid trials (so a resumed confirm
stage continues its runs). A group whose search finished no
trial is not confirmed; the command then exits 1.

Resume. The rules are the grid's: trial runs of the sweep exist and no `--resume` ->
exit 2 before anything starts; `--resume` continues each study where it stopped
(`num_samples - completed` new trials; the trials a killed driver was running are run
again with the same values, in their own runs) and then the confirm stage.
"""

from __future__ import annotations

import argparse
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sweeper import layout
from sweeper.cli.common import fail

if TYPE_CHECKING:
    from mlflow import MlflowClient

    from sweeper.spec import SweepSpec
    from sweeper.tracking.runs import FoundRun
    from sweeper.trainers.trial import SweepInputs
    from sweeper.trials import Trial


@dataclass(frozen=True)
class _Store:
    uri: str
    client: MlflowClient
    experiment_id: str
    found: list[FoundRun]


def run_search(args: argparse.Namespace, spec: SweepSpec) -> int:
    """Search every group, confirm each group's best configuration; exit status as
    `sweeper run` (1 when a trial failed past its retries or a group had no result)."""
    from sweeper.cli.run import prepare_or_exit, run_grid
    from sweeper.search.confirm import best_configs, confirm_sweep
    from sweeper.search.study import reset_study, storage_url, study_name
    from sweeper.tracking.runs import find_trial_runs
    from sweeper.trials import expand

    search = spec.search
    assert search is not None
    _check(args.spec, spec)
    store = _open_store(args, spec)
    bases, skipped = expand(spec, seeds=search.tuning_seeds)
    for item in skipped:
        print(f"skipped {item.combination}: {item.reason}")
    print(
        f"search stage: {len(bases)} group(s) x {search.num_samples} Optuna trials on seed "
        f"{search.tuning_seeds[0]}"
        f"{' with ASHA' if search.scheduler else ''}; then the confirm stage over seeds "
        f"{spec.grid.seed}",
        flush=True,
    )
    inputs = prepare_or_exit(spec)
    parent = _open_parent(
        args, spec, store, len(bases) * (search.num_samples + len(spec.grid.seed))
    )
    url = storage_url(spec)
    if not store.found:  # a fresh sweep: studies left by a deleted store start over
        for base in bases:
            reset_study(url, study_name(spec.name, base.group))
    embedded = _start_ray(args, spec)
    try:  # one Ray for both stages
        failed = _search_stage(args, spec, store, bases, inputs, parent, url)
        if failed is None:
            return _stopped(args, store, parent)
        best = best_configs(store.client, store.experiment_id, spec)
        found = find_trial_runs(store.client, store.experiment_id, spec.name)
        sweep, missing = confirm_sweep(
            args, spec, store.client, store.experiment_id, store.uri, bases, best, found
        )
        code = run_grid(sweep, inputs)
    finally:
        if embedded:
            import ray

            ray.shutdown()
    if failed:
        print(f"{failed} search trial(s) failed past their retries", flush=True)
    for group in missing:
        print(f"group {group}: no search trial finished, nothing to confirm", flush=True)
    return 1 if code or failed or missing else 0


def _check(path: str, spec: SweepSpec) -> None:
    """Exit 2 for search blocks this engine cannot run as written."""
    search = spec.search
    assert search is not None
    if len(search.tuning_seeds) != 1:
        fail(f"{path}: search.tuning_seeds: give one seed (got {search.tuning_seeds})")
    both = sorted(set(search.space) & set(spec.grid.params))
    if both:
        fail(f"{path}: {', '.join(both)}: in both grid.params and search.space; keep each in one")


def _open_store(args: argparse.Namespace, spec: SweepSpec) -> _Store:
    """The store and the sweep's existing trial runs; exit 2 as the grid does."""
    from mlflow.exceptions import MlflowException

    from sweeper.tracking import experiment_name, tracking_uri
    from sweeper.tracking.runs import ExistingRunsError, find_trial_runs, plan_runs
    from sweeper.tracking.server import TrackingUnreachable, check_server, open_store

    uri = args.tracking_uri or tracking_uri(spec)
    where = f"sweep {spec.name!r} (experiment {experiment_name(spec)!r} at {uri})"
    try:
        check_server(uri)
        client, experiment_id = open_store(spec, uri)
        found = find_trial_runs(client, experiment_id, spec.name)
        plan_runs([], found, args.resume)  # existing runs need --resume
    except TrackingUnreachable as exc:
        fail(str(exc))
    except (ExistingRunsError, ValueError, MlflowException) as exc:
        fail(f"{where}: {exc}")
    print(f"{where}: {len(found)} trial run(s) before", flush=True)
    return _Store(uri, client, experiment_id, found)


def _open_parent(args: argparse.Namespace, spec: SweepSpec, store: _Store, trials: int) -> str:
    """The sweep's parent run, with where the studies are and what they optimise."""
    from sweeper.search.study import storage_url
    from sweeper.tracking.sweep_run import open_sweep_run, record_sweep

    search = spec.search
    assert search is not None
    parent = open_sweep_run(store.client, store.experiment_id, spec)
    record_sweep(store.client, parent, spec, Path(args.spec), trials)
    for key, value in (
        (layout.TAG_SEARCH_METRIC, search.metric),
        (layout.TAG_SEARCH_MODE, search.mode),
        (layout.TAG_OPTUNA_STORAGE, storage_url(spec)),
    ):
        store.client.set_tag(parent, key, value)
    return parent


def _start_ray(args: argparse.Namespace, spec: SweepSpec) -> bool:
    from sweeper.tune import start_ray

    stamp = time.strftime("%Y%m%d-%H%M%S")
    address = args.address or os.environ.get("RAY_ADDRESS") or None
    return start_ray(address, Path(spec.output_dir) / "ray" / f"driver-{stamp}.log")


def _search_stage(
    args: argparse.Namespace,
    spec: SweepSpec,
    store: _Store,
    bases: list[Trial],
    inputs: SweepInputs,
    parent: str,
    url: str,
) -> int | None:
    """Run every group's search, one after another; returns how many trials failed, or
    None when the search was stopped (Ctrl-C) before every group's trials had run."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    failed = 0
    for index, base in enumerate(bases):
        found = _search_group(args, spec, store, base, inputs, parent, url, f"{stamp}-{index}")
        if found is None:
            return None
        failed += found
    return failed


def _stopped(args: argparse.Namespace, store: _Store, parent: str) -> int:
    """The search was interrupted: no confirm stage; the record says how to go on."""
    import sys

    from sweeper.tracking.sweep_run import close_sweep_run

    close_sweep_run(store.client, parent, failed=True)
    again = " ".join(["sweeper run", args.spec, *args.overrides, "--resume"])
    print(f"the search stage was stopped; `{again}` continues it", file=sys.stderr)
    return 1


def _search_group(
    args: argparse.Namespace,
    spec: SweepSpec,
    store: _Store,
    base: Trial,
    inputs: SweepInputs,
    parent: str,
    url: str,
    stamp: str,
) -> int | None:
    """One group's search, continuing its study; returns how many trials failed, or
    None if it was stopped before all its trials ended."""
    from sweeper.cli.run import trial_view
    from sweeper.progress import FAILED, Progress
    from sweeper.search.study import completed, open_study, reconcile, study_name
    from sweeper.tracking.outbox import Outbox
    from sweeper.tracking.recorder import MetricLog, Recorder

    search = spec.search
    assert search is not None
    name = study_name(spec.name, base.group)
    study = open_study(url, name, search.mode)
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
    recorder = Recorder(store.client, {}, MetricLog(), Outbox())
    with Progress({}) as progress:
        driver = _driver(spec, store, base, parent, recorder, progress, inputs, trial_view)
        callback = _fit(args, spec, store, driver, name, todo, len(study.trials), stamp, inputs)
    stopped = [key for key in driver.keys if key not in callback.ended]
    for key in stopped:  # the sweep was stopped (Ctrl-C): resumable
        recorder.interrupted(key)
    recorder.drain()
    if stopped or len(driver.keys) < todo:
        return None
    return sum(1 for key in driver.keys if progress.views[key].status == FAILED)


def _driver(spec, store, base, parent, recorder, progress, inputs, view) -> Any:
    from sweeper.search.searcher import SearchDriver

    existing = {run.trial_key: run.run_id for run in store.found}
    return SearchDriver(
        spec=spec,
        base=base,
        client=store.client,
        experiment_id=store.experiment_id,
        parent_run_id=parent,
        recorder=recorder,
        progress=progress,
        existing=existing,
        view=lambda trial: view(trial, inputs),
    )


def _fit(args, spec, store, driver, name, todo, trials_so_far, stamp, inputs) -> Any:
    """Build and run the group's Tuner; returns its callback (which trials ended)."""
    from optuna.storages import RDBStorage
    from ray import tune
    from ray.tune.schedulers import ASHAScheduler
    from ray.tune.search.optuna import OptunaSearch

    from sweeper.search.searcher import (
        OBJECTIVE,
        RunCreatingSearcher,
        SearchCallback,
        SearchTrialNames,
        run_search_trial,
    )
    from sweeper.search.study import distributions, make_sampler, storage_url
    from sweeper.tune import TrialContext

    search = spec.search
    os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")
    os.environ.setdefault("TUNE_DISABLE_AUTO_CALLBACK_LOGGERS", "1")
    inner = OptunaSearch(
        space=distributions(search.space),
        metric=OBJECTIVE,
        mode=search.mode,
        study_name=name,
        storage=RDBStorage(storage_url(spec)),
        sampler=make_sampler(name, search.num_samples, trials_so_far),
    )
    scheduler = None
    if search.scheduler is not None:
        scheduler = ASHAScheduler(
            time_attr="training_iteration",  # one report per validation point
            metric=OBJECTIVE,
            mode=search.mode,
            max_t=1_000_000,  # never stop a trial for its length: only ASHA's rungs do
            grace_period=search.scheduler.grace_period,
            reduction_factor=search.scheduler.reduction_factor,
        )
    ctx = TrialContext(
        spec=spec, trials={}, inputs=inputs, runs={}, tracking_uri=store.uri,
        threads=max(1, int(spec.resources.cpu)),
    )  # fmt: skip
    resources = {"cpu": spec.resources.cpu, "gpu": spec.resources.gpu}
    trainable = tune.with_resources(tune.with_parameters(run_search_trial, ctx=ctx), resources)
    callback = SearchCallback(driver.recorder, driver.progress)
    names = SearchTrialNames()
    tuner = tune.Tuner(
        trainable,
        param_space={},
        tune_config=tune.TuneConfig(
            search_alg=RunCreatingSearcher(inner, driver, search.mode),
            scheduler=scheduler,
            num_samples=todo,
            max_concurrent_trials=args.max_concurrent or spec.max_concurrent,
            reuse_actors=False,
            trial_name_creator=names,
            trial_dirname_creator=names,
        ),
        run_config=tune.RunConfig(
            name=f"{spec.name}-search-{stamp}",
            storage_path=str(Path(spec.output_dir).resolve() / "ray"),
            verbose=0,
            callbacks=[callback],
            failure_config=tune.FailureConfig(max_failures=spec.retries),
        ),
    )
    tuner.fit()
    return callback
