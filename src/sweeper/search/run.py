"""`sweeper run` for a spec with a `search:` block: the search stage, then the confirm stage.

Search. Groups (framework × init × method × grid.params, as in the grid) are searched
one after another, each by its own Ray Tune run (`group.py`): `OptunaSearch` on the
group's persisted study (`sweeper.tracking.study`), ASHA if the spec asks,
`max_concurrent` trials at once on the tuning seed. Ray is started once for both
stages. Every trial is an MLflow run tagged `sweeper.stage=search` under the sweep's
parent run, created by the searcher as its values are sampled (`searcher.py`).

Confirm. Each group's best configuration (`confirm.py`, by the rule the summary
reports) is run over every `grid.seed` by the grid engine (`sweeper.engine.grid`), its
runs tagged `sweeper.stage=confirm` and keyed like grid trials (so a resumed confirm
stage continues its runs). A group whose search finished no trial is not confirmed;
the command then exits 1.

Resume. The rules are the grid's (`sweeper.engine.open_store`): trial runs of the sweep
exist and no `--resume` -> exit 2 before anything starts; `--resume` continues each
study where it stopped (`num_samples - completed` new trials; the trials a killed
driver was running are run again with the same values, in their own runs) and then
the confirm stage.
"""

from __future__ import annotations

import sys
from pathlib import Path

from sweeper import record_names
from sweeper.engine.open_store import SweepStore, open_and_plan
from sweeper.engine.options import EXIT_FAILED, RunOptions, SweepError
from sweeper.engine.session import ray_session
from sweeper.engine.sweep import prepare
from sweeper.search.group import SearchRun, search_group
from sweeper.spec.schema import SweepSpec
from sweeper.trial_keys import Trial


def run_search(options: RunOptions, spec: SweepSpec) -> int:
    """Search every group, confirm each group's best configuration; exit status as
    `sweeper run` (1 when a trial failed past its retries or a group had no result).
    Raises SweepError for bad input, before anything is created."""
    from sweeper.engine.grid import run_grid
    from sweeper.search.confirm import best_configs, confirm_sweep
    from sweeper.tracking.runs import find_trial_runs
    from sweeper.tracking.study import reset_study, storage_url, study_name
    from sweeper.trial_keys import expand

    search = spec.search
    assert search is not None
    check_search(options.spec_path, spec)
    store = open_and_plan(options, spec, [])  # search keys are not known yet
    print(f"{store.where}: {len(store.found)} trial run(s) before", flush=True)
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
    inputs = prepare(spec)
    parent = _open_parent(
        options, spec, store, len(bases) * (search.num_samples + len(spec.grid.seed))
    )
    url = storage_url(spec)
    if not store.found:  # a fresh sweep: studies left by a deleted store start over
        for base in bases:
            reset_study(url, study_name(spec.name, base.group))
    run = SearchRun(options, spec, store, inputs, parent, url)
    with ray_session(options, spec):  # one Ray for both stages
        failed = _search_stage(run, bases)
        if failed is None:
            return _stopped(options, store, parent)
        best = best_configs(store.client, store.experiment_id, spec)
        found = find_trial_runs(store.client, store.experiment_id, spec.name)
        sweep, missing = confirm_sweep(options, spec, store, bases, best, found)
        code = run_grid(sweep, inputs)
    if failed:
        print(f"{failed} search trial(s) failed past their retries", flush=True)
    for group in missing:
        print(f"group {group}: no search trial finished, nothing to confirm", flush=True)
    return EXIT_FAILED if code or failed or missing else 0


def check_search(path: str, spec: SweepSpec) -> None:
    """Raise SweepError (exit 2) for search blocks this engine cannot run as written."""
    search = spec.search
    assert search is not None
    if len(search.tuning_seeds) != 1:
        raise SweepError(f"{path}: search.tuning_seeds: give one seed (got {search.tuning_seeds})")
    both = sorted(set(search.space) & set(spec.grid.params))
    if both:
        raise SweepError(
            f"{path}: {', '.join(both)}: in both grid.params and search.space; keep each in one"
        )


def _open_parent(options: RunOptions, spec: SweepSpec, store: SweepStore, trials: int) -> str:
    """The sweep's parent run, with where the studies are and what they optimise."""
    from sweeper.tracking.study import storage_url
    from sweeper.tracking.sweep_run import open_sweep_run, record_sweep

    search = spec.search
    assert search is not None
    parent = open_sweep_run(store.client, store.experiment_id, spec)
    record_sweep(store.client, parent, spec, Path(options.spec_path), trials)
    for key, value in (
        (record_names.TAG_SEARCH_METRIC, search.metric),
        (record_names.TAG_SEARCH_MODE, search.mode),
        (record_names.TAG_OPTUNA_STORAGE, storage_url(spec)),
    ):
        store.client.set_tag(parent, key, value)
    return parent


def _search_stage(run: SearchRun, bases: list[Trial]) -> int | None:
    """Run every group's search, one after another; returns how many trials failed, or
    None when the search was stopped (Ctrl-C) before every group's trials had run."""
    failed = 0
    for index, base in enumerate(bases):
        found = search_group(run, base, f"{run.options.stamp}-{index}")
        if found is None:
            return None
        failed += found
    return failed


def _stopped(options: RunOptions, store: SweepStore, parent: str) -> int:
    """The search was interrupted: no confirm stage; the record says how to go on."""
    from sweeper.tracking.sweep_run import close_sweep_run

    close_sweep_run(store.client, parent, failed=True)
    print(
        f"the search stage was stopped; `{options.resume_command()}` continues it",
        file=sys.stderr,
    )
    return EXIT_FAILED
