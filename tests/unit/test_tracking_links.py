"""MLflow UI links open the model-training view; sweeper's experiments are marked so."""

from __future__ import annotations

from sweeper.tracking.links import (
    EXPERIMENT_KIND_TAG,
    MODEL_TRAINING_KIND,
    experiment_url,
    run_url,
)
from sweeper.tracking.store import ensure_experiment


def test_links_open_the_runs_table_and_run_pages_of_the_model_training_view():
    assert experiment_url("http://h:5000/", "3") == (
        "http://h:5000/#/experiments/3/runs?workflowType=machine_learning"
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
