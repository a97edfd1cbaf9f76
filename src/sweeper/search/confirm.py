"""The confirm stage: each group's best search configuration, over every grid seed.

The best configuration is chosen by `sweeper.summarize.search` (the rule the summary
reports: finished, not early-stopped search trials, metric at their best validation
point, ties to the earliest). Confirm trials are made by `make_trial` exactly as grid
trials with those values, so their keys are a grid trial's keys and a resumed confirm
stage continues its runs; their group and name are the group's (the searched values
are tagged `sweeper.search_params`, not part of the group), so Table 2 compares, e.g.,
pretrained and random init each at its own tuned learning rate.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from sweeper import record_names
from sweeper.engine.open_store import SweepStore
from sweeper.engine.options import RunOptions
from sweeper.engine.sweep import Sweep
from sweeper.record_names import Stage

if TYPE_CHECKING:
    from mlflow import MlflowClient

    from sweeper.spec.schema import SweepSpec
    from sweeper.summarize.records import SearchGroup
    from sweeper.tracking.runs import FoundRun
    from sweeper.trial_keys import Trial


def best_configs(
    client: MlflowClient, experiment_id: str, spec: SweepSpec
) -> dict[str, SearchGroup]:
    """group -> its search result, by the summariser's own rule."""
    from sweeper.summarize.mlflow_reader import load_histories, load_runs
    from sweeper.summarize.search import search_groups

    search = spec.search
    assert search is not None
    runs = [r for r in load_runs(client, experiment_id) if r.sweep == spec.name]
    ids = [r.run_id for r in runs if r.stage == Stage.SEARCH]
    histories = load_histories(client, ids, [search.metric])
    groups = search_groups(runs, histories, search.metric, search.mode, spec.name)
    return {group.group: group for group in groups}


def confirm_sweep(
    options: RunOptions,
    spec: SweepSpec,
    store: SweepStore,
    bases: list[Trial],
    best: dict[str, SearchGroup],
    found_runs: list[FoundRun],
) -> tuple[Sweep, list[str]]:
    """The confirm stage as a grid sweep: each group's best values over grid.seed."""
    from sweeper.tracking.runs import plan_runs
    from sweeper.trial_keys import make_trial

    trials: dict[str, Trial] = {}
    tags: dict[str, dict[str, str]] = {}
    missing: list[str] = []
    for base in bases:
        found = best.get(base.group)
        if found is None or found.best_run_id is None:
            missing.append(base.group)
            continue
        print(
            f"confirm {base.group}: {_shown(found.best_params)} ({found.metric} {found.best_value})"
        )
        searched = json.dumps(found.best_params, sort_keys=True)
        for seed in spec.grid.seed:
            trial = make_trial(
                spec, seed=seed, init=base.init, framework=base.framework, method=base.method,
                varied={**base.varied, **found.best_params},
            )  # fmt: skip
            trial = replace(trial, varied=dict(base.varied))
            trials[trial.key] = trial
            tags[trial.key] = {record_names.TAG_SEARCH_PARAMS: searched}
    plan = plan_runs(list(trials), found_runs, resume=True)
    print(
        f"confirm stage: {len(trials)} trials ({len(plan.done)} finished before, "
        f"{len(plan.resume)} to resume, {len(plan.create)} new)",
        flush=True,
    )
    sweep = Sweep(
        options, spec, trials, plan, store.client, store.experiment_id, store.uri,
        stage=Stage.CONFIRM, tags=tags,
    )  # fmt: skip
    return sweep, missing


def _shown(params: dict[str, Any]) -> str:
    return ", ".join(
        f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}" for k, v in params.items()
    )
