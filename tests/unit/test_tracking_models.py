"""A finished trial's best checkpoint becomes one MLflow logged model with its metrics."""

from __future__ import annotations

import pytest

from sweeper import record_names
from sweeper.tracking.models import TAG_CHECKPOINT, checkpoint_uri, model_name
from sweeper.tracking.recorder import MetricLog, Recorder


def test_a_finished_trial_has_one_model_carrying_its_best_metrics(tmp_path):
    from mlflow import MlflowClient

    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    experiment = client.create_experiment("models", artifact_location=str(tmp_path / "art"))
    run_id = client.create_run(experiment, run_name="hf-random-full-s1").info.run_id
    recorder = Recorder(client, {"k1": run_id}, MetricLog())
    best = [
        [30, record_names.METRIC_BEST_TEST_ACC, 71.5],
        [30, record_names.METRIC_BEST_STEP, 20],
        [30, record_names.METRIC_BEST_VALID_ACC, 74.0],
    ]
    recorder.result("k1", {"points": [[30, record_names.METRIC_TRAIN_LOSS, 0.3], *best]})
    recorder.result("k1", {"points": best})  # a report sent twice: nothing doubles
    recorder.finished("k1")
    recorder.drain()

    (model,) = client.search_logged_models([experiment])
    assert model.name == "hf-random-full-s1" and model.source_run_id == run_id
    assert model.status == "READY"
    assert model.tags[TAG_CHECKPOINT] == checkpoint_uri(run_id)
    assert model.tags[record_names.TAG_TRIAL_KEY] == "k1"
    assert {m.key: m.value for m in model.metrics}[record_names.METRIC_BEST_TEST_ACC] == 71.5
    history = client.get_metric_history(run_id, record_names.METRIC_BEST_TEST_ACC)
    assert [(m.step, m.value) for m in history] == [(30, 71.5)]  # on the run, once
    run = client.get_run(run_id)
    assert run.info.status == "FINISHED"
    # an output of its run: what the run page's "Logged models" lists
    assert [(o.model_id, o.step) for o in run.outputs.model_outputs] == [(model.model_id, 30)]


def test_a_trial_without_a_best_checkpoint_gets_no_model(tmp_path):
    from mlflow import MlflowClient

    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    experiment = client.create_experiment("none", artifact_location=str(tmp_path / "art"))
    run_id = client.create_run(experiment).info.run_id
    recorder = Recorder(client, {"k1": run_id}, MetricLog())
    recorder.result("k1", {"points": [[5, record_names.METRIC_TRAIN_LOSS, 0.3]]})
    recorder.finished("k1")
    recorder.drain()
    assert list(client.search_logged_models([experiment])) == []


@pytest.mark.parametrize(
    ("run_name", "expected"),
    [
        ("dummy-random-full-lr0.001-s1", "dummy-random-full-lr0_001-s1"),
        ("hf/lora:r=8 50%", "hf-lora-r=8 50-"),
        ("hf-random-full-s1", "hf-random-full-s1"),
        ("'.'", "_"),
        ("", "trial"),
    ],
)
def test_a_trial_name_mlflow_refuses_for_a_model_is_made_acceptable(run_name, expected):
    from mlflow.utils.validation import _validate_logged_model_name

    assert model_name(run_name) == expected
    _validate_logged_model_name(model_name(run_name))  # MLflow's own rule accepts it


def test_a_trial_with_a_dot_in_its_name_gets_its_model(tmp_path):
    """A grid value such as lr 0.001 puts a dot in the trial's name, which MLflow refuses
    in a model's name; the model must still be made, and the run finish once."""
    from mlflow import MlflowClient

    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    experiment = client.create_experiment("dots", artifact_location=str(tmp_path / "art"))
    name = "dummy-random-full-lr0.001-s1"
    run_id = client.create_run(experiment, run_name=name).info.run_id
    recorder = Recorder(client, {"k1": run_id}, MetricLog())
    recorder.result("k1", {"points": [[10, record_names.METRIC_BEST_TEST_ACC, 60.0]]})
    recorder.finished("k1")
    recorder.drain()
    (model,) = client.search_logged_models([experiment])
    assert model.name == "dummy-random-full-lr0_001-s1" and model.source_run_id == run_id
    assert client.get_run(run_id).info.run_name == name


def test_a_retried_model_write_links_the_model_to_its_run_once(tmp_path):
    from mlflow import MlflowClient

    from sweeper.tracking.models import log_best_model

    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    experiment = client.create_experiment("retry", artifact_location=str(tmp_path / "art"))
    run_id = client.create_run(experiment).info.run_id
    made: dict[str, str] = {}
    best = {record_names.METRIC_BEST_TEST_ACC: 70.0}
    first = log_best_model(client, run_id, "k1", best, 12, made)
    assert log_best_model(client, run_id, "k1", best, 12, made) == first  # a retry
    outputs = client.get_run(run_id).outputs.model_outputs
    assert [(o.model_id, o.step) for o in outputs] == [(first, 12)]
