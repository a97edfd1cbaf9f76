"""Trial runs keyed by trial key: find them, decide what a (re)start must do, create them.

docs/architecture.md, invariant 1 (one trial key, one MLflow run) is kept here by construction: the
driver looks every key up *before* any trial starts, creates the runs that are missing,
and hands each trial the id of its run. A Ray retry, or a `--resume` after the driver
died, is given the same id again, so nothing downstream can open a second run.

The planning step (`plan_runs`) is a pure function of the grid and the runs found, so
the resume rules are unit-tested without MLflow.

`search_all` is the one paged run search: the planner, the parent run's lookup and the
summariser all read runs through it, so none of them can stop at the first page.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sweeper import record_names
from sweeper.redact import redact_values
from sweeper.trial_keys import Trial, seed_tags

if TYPE_CHECKING:
    from mlflow import MlflowClient
    from mlflow.entities import Run, RunInfo

PAGE_SIZE = 50_000  # MLflow's SEARCH_MAX_RESULTS_THRESHOLD


@dataclass(frozen=True)
class FoundRun:
    """What the planner needs to know about an existing trial run."""

    run_id: str
    trial_key: str
    mlflow_status: str
    status: str | None
    start_time: int

    @property
    def finished(self) -> bool:
        """Finished for good: MLflow and sweeper agree (the summariser's rule 1)."""
        return (
            self.mlflow_status == record_names.RunState.FINISHED
            and self.status == record_names.Status.FINISHED
        )


@dataclass(frozen=True)
class RunPlan:
    """What this invocation does with each trial key of the grid."""

    done: dict[str, str]
    """key -> run id of trials that finished before: not run again."""
    resume: dict[str, str]
    """key -> run id of trials started before that did not finish: continued."""
    create: list[str]
    """keys without a run yet."""


class ExistingRunsError(Exception):
    """Trial runs of this sweep exist and `--resume` was not given."""


def flatten_params(identity: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    """A trial's resolved config as MLflow params: nested blocks become dotted keys
    (`train.lr`), lists JSON (`[0.9, 0.98]`), None "None", everything else `str()`.
    Params are what the MLflow UI compares runs by, so every value the key hashes is
    there, spelled the way the spec writes it."""
    flat: dict[str, str] = {}
    for key, value in identity.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat.update(flatten_params(value, prefix=f"{name}."))
        elif isinstance(value, list | tuple):
            flat[name] = json.dumps(list(value))
        else:
            flat[name] = str(value)
    return flat


def trial_tags(trial: Trial, stage: record_names.Stage = record_names.Stage.GRID) -> dict[str, str]:
    """The tags a trial run is created with (status and Ray ids come later), among them
    which seed set what (`trial_keys.seed_tags`)."""
    return {
        record_names.TAG_ROLE: record_names.ROLE_TRIAL,
        record_names.TAG_SWEEP: trial.sweep,
        record_names.TAG_TRIAL_KEY: trial.key,
        record_names.TAG_GROUP: trial.group,
        record_names.TAG_SEED: str(trial.seed),
        record_names.TAG_INIT: trial.init,
        record_names.TAG_FRAMEWORK: trial.framework,
        record_names.TAG_METHOD: trial.method,
        record_names.TAG_STAGE: str(stage),
        **seed_tags(trial),
    }


def role_filter(role: str, sweep: str) -> str:
    """MLflow search filter for the runs of one role of one sweep."""
    role_tag, sweep_tag = record_names.TAG_ROLE, record_names.TAG_SWEEP
    return f"tags.`{role_tag}` = '{role}' and tags.`{sweep_tag}` = '{_quote(sweep)}'"


def search_all(client: MlflowClient, experiment_id: str, filter_string: str = "") -> list[Run]:
    """Every active run of the experiment matching the filter (all of them for ""), all
    pages, earliest started first."""
    runs: list[Run] = []
    token: str | None = None
    while True:
        page = client.search_runs(
            [experiment_id],
            filter_string=filter_string,
            max_results=PAGE_SIZE,
            order_by=["attributes.start_time ASC"],
            page_token=token,
        )
        runs.extend(page)
        token = page.token
        if not token:
            return runs


def find_trial_runs(client: MlflowClient, experiment_id: str, sweep: str) -> list[FoundRun]:
    """The trial runs of `sweep` in the experiment (all keys, duplicates included)."""
    found = []
    for run in search_all(client, experiment_id, role_filter(record_names.ROLE_TRIAL, sweep)):
        key = run.data.tags.get(record_names.TAG_TRIAL_KEY)
        if key:
            found.append(
                FoundRun(
                    run_id=run.info.run_id,
                    trial_key=key,
                    mlflow_status=run.info.status,
                    status=run.data.tags.get(record_names.TAG_STATUS),
                    start_time=run.info.start_time or 0,
                )
            )
    return found


def plan_runs(keys: Sequence[str], found: Iterable[FoundRun], resume: bool) -> RunPlan:
    """Decide, per trial key, whether to skip, continue or create its run.

    Without `resume` any existing trial run of the sweep is an error: running again
    would either duplicate keys or silently mix two sweeps' results. With it, a key
    whose run finished is done; any other run (RUNNING from a killed driver, FAILED,
    KILLED, SCHEDULED) is continued under its id. Should a key have several runs (made
    by hand, or by an older engine), a finished one wins, else the earliest started.
    """
    found = list(found)
    if found and not resume:
        raise ExistingRunsError(
            f"{len(found)} trial run(s) of this sweep already exist; pass --resume to "
            "continue the sweep (finished trials are not re-run), or choose a new sweep name"
        )
    by_key: dict[str, list[FoundRun]] = {}
    for run in sorted(found, key=lambda r: (r.start_time, r.run_id)):
        by_key.setdefault(run.trial_key, []).append(run)
    done: dict[str, str] = {}
    again: dict[str, str] = {}
    create: list[str] = []
    for key in keys:
        runs = by_key.get(key, [])
        finished = [r for r in runs if r.finished]
        if finished:
            done[key] = finished[0].run_id
        elif runs:
            again[key] = runs[0].run_id
        else:
            create.append(key)
    return RunPlan(done=done, resume=again, create=create)


def create_trial_run(
    client: MlflowClient,
    experiment_id: str,
    parent_run_id: str,
    trial: Trial,
    stage: record_names.Stage = record_names.Stage.GRID,
    extra_tags: Mapping[str, str] | None = None,
    run_name: str | None = None,
) -> str:
    """A new SCHEDULED child run for the trial, with its params and identity tags."""
    from mlflow.entities import Param
    from mlflow.utils.mlflow_tags import MLFLOW_PARENT_RUN_ID

    tags = {**trial_tags(trial, stage), **(extra_tags or {}), MLFLOW_PARENT_RUN_ID: parent_run_id}
    tags = redact_values(tags)  # secret values never reach the record (sweeper.redact)
    run = client.create_run(experiment_id, tags=tags, run_name=run_name or trial.name)
    params = [Param(k, v) for k, v in redact_values(flatten_params(trial.identity())).items()]
    for start in range(0, len(params), 100):  # MLflow's per-batch param limit
        client.log_batch(run.info.run_id, params=params[start : start + 100], synchronous=True)
    client.update_run(run.info.run_id, status=record_names.RunState.SCHEDULED)
    return run.info.run_id


def run_infos(client: MlflowClient, run_ids: Iterable[str]) -> dict[str, RunInfo]:
    """run id -> its RunInfo: the artifact URI, which trials upload to without touching
    the tracking DB, and the experiment and run name a logged model is made with."""
    return {run_id: client.get_run(run_id).info for run_id in run_ids}


def _quote(text: str) -> str:
    return text.replace("\\", "\\\\").replace("'", "\\'")
