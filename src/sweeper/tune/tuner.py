"""The one Tuner builder: the grid and the search stage both get their Tuner here.

A grid Tuner runs a `tune.grid_search` over trial keys: Ray schedules *which* trial runs
where and retries it (`spec.retries`), reusing a finished trial's worker for the next.
A search Tuner has no grid: its searcher (Optuna, wrapped so each suggestion gets its
MLflow run) proposes `num_samples` configurations and its scheduler (ASHA) may stop
trials early. Everything else (per-trial resources, retries, the storage folder, quiet
output, the callbacks that record each trial) is the same for both, so it is written
once, here.

Ray is imported inside the functions: `sweeper --help` must not load it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sweeper.tune.trainable import CONFIG_KEY, TrialContext

if TYPE_CHECKING:
    from ray.tune import Callback, Tuner
    from ray.tune.schedulers import TrialScheduler
    from ray.tune.search import Searcher

Trainable = Callable[[dict[str, Any], TrialContext], None]
"""A Ray function trainable taking the trial's config and the shipped TrialContext."""


class TrialNames:
    """Tune trial names and folders named like the sweep's trials (picklable)."""

    def __init__(self, names: dict[str, str]):
        self.names = names

    def __call__(self, trial: Any) -> str:
        return self.names.get(trial.config.get(CONFIG_KEY), trial.trial_id)


def quiet_tune() -> None:
    """Tune's own console output and default loggers off, unless the user set them:
    the progress view reports every trial, and MLflow is the record."""
    os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")  # verbose=0 then prints nothing
    os.environ.setdefault("TUNE_DISABLE_AUTO_CALLBACK_LOGGERS", "1")


def build_tuner(
    ctx: TrialContext,
    trainable: Trainable,
    *,
    name: str,
    max_concurrent: int | None,
    callbacks: Sequence[Callback],
    keys: Sequence[str] | None = None,
    searcher: Searcher | None = None,
    scheduler: TrialScheduler | None = None,
    num_samples: int = 1,
    trial_names: Callable[[Any], str] | None = None,
    reuse_actors: bool = True,
) -> Tuner:
    """The Tuner running `trainable` with `ctx` shipped once to every trial.

    With `keys`, a grid over those trial keys (named by `TrialNames` unless
    `trial_names` is given); without, `num_samples` trials whose configs come from
    `searcher`. `scheduler` may stop trials early. Per-trial resources come from
    `spec.resources`, retries from `spec.retries`.
    """
    from ray import tune

    spec = ctx.spec
    quiet_tune()
    resources = {"cpu": spec.resources.cpu, "gpu": spec.resources.gpu}
    wrapped = tune.with_resources(tune.with_parameters(trainable, ctx=ctx), resources)
    param_space: dict[str, Any] = {}
    if keys is not None:
        param_space = {CONFIG_KEY: tune.grid_search(list(keys))}
        names = {key: f"{ctx.trials[key].name}-{key[:8]}" for key in keys}
        trial_names = trial_names or TrialNames(names)
    return tune.Tuner(
        wrapped,
        param_space=param_space,
        tune_config=tune.TuneConfig(
            search_alg=searcher,
            scheduler=scheduler,
            num_samples=num_samples,
            max_concurrent_trials=max_concurrent,
            # A finished trial's Ray worker runs the next trial: a fresh one would import
            # torch and mlflow again first, which is slow (docs/benchmarks.md).
            reuse_actors=reuse_actors,
            trial_name_creator=trial_names,
            trial_dirname_creator=trial_names,
        ),
        run_config=tune.RunConfig(
            name=name,
            storage_path=str(Path(spec.output_dir).resolve() / "ray"),
            verbose=0,
            callbacks=list(callbacks),
            failure_config=tune.FailureConfig(max_failures=spec.retries),
        ),
    )
