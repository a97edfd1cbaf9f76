"""The counted trials' predictions read back from a real MLflow store's artifacts."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from sweeper import record_names
from sweeper.summarize.example_reader import read_predictions
from sweeper.summarize.mlflow_reader import record_of
from sweeper.summarize.select import _counted
from sweeper.trainers import predictions
from sweeper.trainers.predictions import CheckpointPredictions, SplitPredictions


def _trial(run_id: str, tags: dict[str, str]):
    run = record_of(
        run_id=run_id,
        run_name=run_id,
        status="FINISHED",
        start_time=0,
        end_time=1,
        tags={record_names.TAG_ROLE: record_names.ROLE_TRIAL, record_names.TAG_SEED: "3", **tags},
        params={},
        metrics={},
    )
    return _counted(run, 50.0, 10, 1.0, 50.0, {}, ())


def test_tags_give_the_seed_sources_and_the_splits_held():
    trial = _trial(
        "r",
        {
            record_names.TAG_SEED_SOURCE: "data_order",
            record_names.TAG_SEED_OF["data_order"]: "3",
            record_names.TAG_SEED_OF["init"]: "1",
            record_names.TAG_SEED_OF["dropout"]: "1",
            record_names.TAG_PREDICTIONS: "valid,test",
        },
    )
    assert trial.seed_source == "data_order"
    assert (trial.seed_of("init"), trial.seed_of("data_order")) == (1, 3)
    assert trial.predictions == ("valid", "test")
    assert trial.to_dict()["seeds"] == {"init": 1, "data_order": 3, "dropout": 1}
    old = _trial("old", {})  # a record made before the tags: every source is the seed
    assert (old.seed_source, old.seed_of("dropout"), old.predictions) == ("all", 3, ())
    assert "seed_source" not in old.to_dict() and "predictions" not in old.to_dict()


def test_only_runs_tagged_with_the_split_are_read_and_a_bad_file_is_left_out(tmp_path: Path):
    from mlflow import MlflowClient

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(uri)
    experiment = client.create_experiment("x", artifact_location=str(tmp_path / "art"))
    ids = {}
    for name, correct in (("a", [1, 0, 1]), ("b", [0, 0, 1]), ("bad", [1, 1, 1]), ("none", [1])):
        run_id = client.create_run(experiment).info.run_id
        ids[name] = run_id
        split = SplitPredictions(
            "test",
            "classification",
            (0, 1, 2)[: len(correct)],
            {
                "best": CheckpointPredictions(
                    5, tuple(correct), (0.9,) * len(correct), tuple(correct)
                )
            },
        )
        path = predictions.write(tmp_path / name, split)
        if name == "bad":
            path.write_text('{"format": 99}', encoding="utf-8")
        if name != "none":  # uploaded without the tag: not read
            client.log_artifact(run_id, str(path), record_names.ARTIFACT_PREDICTIONS_DIR)
    tagged = {record_names.TAG_PREDICTIONS: "valid,test"}
    trials = [_trial(ids["a"], tagged), _trial(ids["b"], tagged), _trial(ids["bad"], tagged)]
    trials.append(_trial(ids["none"], {}))
    found = read_predictions(uri, trials)  # a local store: the files read where they lie
    assert sorted(found) == sorted([ids["a"], ids["b"]])
    assert found[ids["b"]].at("best").correct == (0, 0, 1)
    assert read_predictions(uri, trials, split="train") == {}
    through_mlflow = read_predictions(uri, trials, client=client)
    assert {k: v.at("best").correct for k, v in through_mlflow.items()} == {
        k: v.at("best").correct for k, v in found.items()
    }


def test_a_local_store_is_read_without_importing_mlflow(tmp_path: Path):
    from mlflow import MlflowClient

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(uri)
    experiment = client.create_experiment("x", artifact_location=str(tmp_path / "art"))
    run_id = client.create_run(experiment).info.run_id
    best = CheckpointPredictions(5, (1, 0), (0.9, 0.8), (1, 0))
    path = predictions.write(
        tmp_path, SplitPredictions("test", "classification", (0, 1), {"best": best})
    )
    client.log_artifact(run_id, str(path), record_names.ARTIFACT_PREDICTIONS_DIR)
    code = (
        "import sys\n"
        "from tests.unit.test_summarize_example_reader import _trial\n"
        "from sweeper.summarize.example_reader import read_predictions\n"
        f"trial = _trial({run_id!r}, {{'sweeper.predictions': 'test'}})\n"
        f"found = read_predictions({uri!r}, [trial])\n"
        "print(len(found), 'mlflow' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["1", "False"]
