"""MLflow UI links open the model-training view on sweeper's shared view of the runs
table; sweeper's experiments carry the tags the UI reads for both."""

from __future__ import annotations

import json

from sweeper import record_names
from sweeper.selection import Selection
from sweeper.tracking.links import (
    CREATED_COLUMN,
    EXPERIMENT_KIND_TAG,
    MODEL_TRAINING_KIND,
    NAME_COLUMN,
    VIEW_TAG,
    experiment_url,
    first_view,
    metric_column,
    needs_view,
    run_url,
    stored_state,
)
from sweeper.tracking.store import DEFAULT_VIEW_METRICS, ensure_experiment, view_metrics


def test_links_open_the_runs_table_and_run_pages_of_the_model_training_view():
    assert experiment_url("http://h:5000/", "3") == (
        "http://h:5000/#/experiments/3/runs?workflowType=machine_learning&viewStateShareKey=sweeper"
    )
    assert run_url("http://h:5000", "3", "abc") == (
        "http://h:5000/#/experiments/3/runs/abc?workflowType=machine_learning"
    )


def test_experiments_are_marked_as_model_training_new_and_old(tmp_path):
    from mlflow import MlflowClient

    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    new = ensure_experiment(client, "new", tmp_path / "art")
    assert client.get_experiment(new).tags[EXPERIMENT_KIND_TAG] == MODEL_TRAINING_KIND
    old = client.create_experiment("old", artifact_location=(tmp_path / "old").as_uri())
    assert EXPERIMENT_KIND_TAG not in client.get_experiment(old).tags  # an older sweeper's
    assert ensure_experiment(client, "old") == old
    assert client.get_experiment(old).tags[EXPERIMENT_KIND_TAG] == MODEL_TRAINING_KIND


def test_the_shared_view_groups_by_sweeper_group_with_the_best_checkpoint_columns():
    assert DEFAULT_VIEW_METRICS == ("best_test_accuracy", "best_valid_accuracy", "best_step")
    f1 = Selection("valid_macro_f1", "max", ("test_macro_f1", "test_accuracy"))
    assert view_metrics(f1) == (
        "best_test_macro_f1", "best_test_accuracy", "best_valid_macro_f1", "best_step",
    )  # fmt: skip
    envelope = json.loads(first_view(DEFAULT_VIEW_METRICS, 1700000000000))
    assert envelope["createdAt"] == 1700000000000 and isinstance(envelope["name"], str)
    state = json.loads(envelope["state"])  # the UI parses the envelope's state as JSON
    by_group = [{"mode": "tag", "groupByData": record_names.TAG_GROUP}]
    assert state["groupBy"]["groupByKeys"] == by_group
    assert "metrics.`best_test_accuracy`" in state["selectedColumns"]
    metrics = [metric_column(name) for name in DEFAULT_VIEW_METRICS]
    assert state["columnOrder"][:5] == [NAME_COLUMN, CREATED_COLUMN, *metrics]  # no scrolling
    assert set(state["columnWidths"]) <= set(state["columnOrder"])  # the UI sizes only these
    assert stored_state(first_view(DEFAULT_VIEW_METRICS, 5)) == state
    assert not needs_view(first_view(DEFAULT_VIEW_METRICS, 5), DEFAULT_VIEW_METRICS)
    assert needs_view(None, DEFAULT_VIEW_METRICS) and needs_view("{not json", DEFAULT_VIEW_METRICS)
    assert needs_view(first_view(view_metrics(f1)), DEFAULT_VIEW_METRICS)


def test_experiments_carry_the_shared_view_new_and_old(tmp_path):
    from mlflow import MlflowClient

    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    new = ensure_experiment(client, "new", tmp_path / "art")
    assert not needs_view(client.get_experiment(new).tags[VIEW_TAG], DEFAULT_VIEW_METRICS)
    old = client.create_experiment("old", artifact_location=(tmp_path / "old").as_uri())
    ensure_experiment(client, "old")
    written = client.get_experiment(old).tags[VIEW_TAG]
    assert not needs_view(written, DEFAULT_VIEW_METRICS)
    ensure_experiment(client, "old")
    assert client.get_experiment(old).tags[VIEW_TAG] == written  # unchanged: not rewritten
    f1 = view_metrics(Selection("valid_macro_f1", "max", ("test_macro_f1",)))
    ensure_experiment(client, "old", metrics=f1)  # another select: another view
    assert not needs_view(client.get_experiment(old).tags[VIEW_TAG], f1)
