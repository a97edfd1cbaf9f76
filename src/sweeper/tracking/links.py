"""Links into the MLflow UI, the same wherever sweeper prints one, and the view they open.

MLflow 3's UI opens an experiment in one of two workflows. Its GenAI view ("Overview":
traces, latency, token usage) is the default for a plain `#/experiments/ID` link;
`?workflowType=machine_learning` on the runs route opens the runs table of the
model-training view directly, and on a run's page keeps that view. The view comes from
that query parameter while the UI's workflow selector is on (it is in MLflow 3.17: a run
page linked without it opens in the GenAI view, checked in
tests/integration/test_browser_ui.py), else from the experiment tag
`mlflow.experimentKind`, whose value `custom_model_development` marks model training.
sweeper does both: every link carries the parameter, and the experiments it creates
carry the tag (`tracking.store.ensure_experiment`).

What the runs table shows (columns, grouping) is UI state the browser keeps per
experiment; a link can carry one more piece of state, a shared view:
`viewStateShareKey=KEY` makes the runs page load its state from the experiment tag
`mlflow.sharedViewState.KEY` (MLflow 3.17's bundle: the experiment page's shared-view
hook reads that tag, a JSON envelope `{name, createdAt, updatedAt, state}` whose
`state` is the JSON of the view). The view sweeper stores under its key (`first_view`)
groups the runs by `sweeper.group` (each group's row averages its trials, the trials
listed under it, expanded) and shows the best-checkpoint columns, so the link opens on
the sweep's result in a browser that has never seen the experiment. The UI announces
it with a banner ("You're viewing a shared view"); its "Exit shared view" button goes
back to the browser's own view of the experiment, which the shared one never changes.
An experiment without the tag (one no sweeper run or `sweeper ui` has touched since)
opens the UI's default table with a notice that the key does not exist.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from sweeper import record_names

EXPERIMENT_KIND_TAG = "mlflow.experimentKind"
MODEL_TRAINING_KIND = "custom_model_development"
MODEL_TRAINING_VIEW = "workflowType=machine_learning"

VIEW_PARAM = "viewStateShareKey"
VIEW_KEY = "sweeper"
VIEW_TAG = f"mlflow.sharedViewState.{VIEW_KEY}"
VIEW_NAME = "sweeper: trials by group, best checkpoint"
FIRST_VIEW = f"{MODEL_TRAINING_VIEW}&{VIEW_PARAM}={VIEW_KEY}"
"""The query of a link to the runs table: model-training view, sweeper's shared view."""
GROUP_AGGREGATE = "average"
"""A group row's value of each column: the mean over its trials (Table 2's mean)."""
NAME_COLUMN = "attributes.`Run Name`"
CREATED_COLUMN = "runDateAndNestInfo"
MODELS_COLUMN = "attributes.`Models`"
DATASET_COLUMN = "attributes.`Dataset`"
DEFAULT_COLUMNS = (MODELS_COLUMN, DATASET_COLUMN)
"""Of the UI's default columns (Source, Models, Dataset), the two that say something
about a trial: its logged model and its prepared data."""
NAME_WIDTH = 280
"""Pixels of the Run Name column: a group row's "Group: framework/init/finetune" name
whole, beside its count."""
CREATED_WIDTH = 150
"""Pixels of the Created column: "24 seconds ago" whole, beside its status icon."""
METRIC_WIDTH = 150
"""Pixels of a best-checkpoint column: its header (e.g. `best_valid_accuracy`) whole."""
STEP_WIDTH = 120
"""Pixels of the `best_step` column: a group row's "20 (average)" whole."""


def experiment_url(base: str, experiment_id: str | None) -> str:
    """The runs table of one experiment, in the model-training view, opened on sweeper's
    shared view (the UI's routes are in the hash fragment); the UI's home without an
    experiment id."""
    base = base.rstrip("/")
    if not experiment_id:
        return base
    return f"{base}/#/experiments/{experiment_id}/runs?{FIRST_VIEW}"


def run_url(base: str, experiment_id: str, run_id: str) -> str:
    """One run's page, in the model-training view."""
    return f"{base.rstrip('/')}/#/experiments/{experiment_id}/runs/{run_id}?{MODEL_TRAINING_VIEW}"


def metric_column(name: str) -> str:
    """The runs table's id of a metric column (how the UI names a selected column)."""
    return f"metrics.`{name}`"


def view_state(metrics: Sequence[str]) -> dict[str, Any]:
    """The runs table's state for a sweep: grouped by `sweeper.group` with the groups
    expanded, the logged model, the data and `metrics` as columns. The keys are the UI
    state keys the shared-view hook applies (search facets are left to the UI's
    defaults: all active runs, newest first).

    The columns come in this order and width: Run Name and Created (pinned at the
    left), then `metrics`, then the model and the data. MLflow 3.17 opens its Assistant
    panel beside the table on a first visit to a local server (a quarter of the
    window's width); at 1600 pixels the table beside it then shows, without scrolling,
    the group names and a classification sweep's three best-checkpoint columns
    (checked in tests/integration/test_browser_ui.py). In the UI's own order the
    metrics come last, scrolled out of sight."""
    order = [NAME_COLUMN, CREATED_COLUMN, *map(metric_column, metrics), *DEFAULT_COLUMNS]
    widths = {NAME_COLUMN: NAME_WIDTH, CREATED_COLUMN: CREATED_WIDTH}
    for name in metrics:
        widths[metric_column(name)] = (
            STEP_WIDTH if name == record_names.METRIC_BEST_STEP else METRIC_WIDTH
        )
    return {
        "selectedColumns": [*DEFAULT_COLUMNS, *map(metric_column, metrics)],
        "columnOrder": order,
        "columnWidths": widths,
        "groupBy": {
            "aggregateFunction": GROUP_AGGREGATE,
            "groupByKeys": [{"mode": "tag", "groupByData": record_names.TAG_GROUP}],
        },
        "groupsExpanded": {},
    }


def first_view(metrics: Sequence[str], now_ms: int = 0) -> str:
    """The value of the experiment tag `VIEW_TAG`: the shared-view envelope around
    `view_state(metrics)`. `now_ms` dates it (the UI lists it as a saved view)."""
    state = json.dumps(view_state(metrics), separators=(",", ":"))
    envelope = {"name": VIEW_NAME, "createdAt": now_ms, "updatedAt": now_ms, "state": state}
    return json.dumps(envelope, separators=(",", ":"))


def stored_state(tag_value: str | None) -> dict[str, Any] | None:
    """The view state inside a `VIEW_TAG` value, None when there is none to read: what
    is compared to decide whether the tag needs writing (the envelope's dates differ
    between writers, the state does not)."""
    if not tag_value:
        return None
    try:
        state = json.loads(json.loads(tag_value)["state"])
    except (ValueError, KeyError, TypeError):
        return None
    return state if isinstance(state, dict) else None


def needs_view(tag_value: str | None, metrics: Sequence[str]) -> bool:
    """Whether the experiment's `VIEW_TAG` (its current value, None if absent) is not
    yet the view for `metrics`."""
    return stored_state(tag_value) != view_state(metrics)
