"""Dataset lineage on MLflow runs: one dataset per split, digest = the prepare key."""

from __future__ import annotations

import json

from sweeper.tracking.lineage import dataset_inputs, log_lineage, log_vocabulary


def test_each_split_is_a_dataset_with_the_prepare_key_as_digest(tmp_path):
    """... whose profile lists the labels in class order; the parent gets the vocabulary."""
    from mlflow import MlflowClient

    prepared = tmp_path / "prepared" / "ccdb107cecd43938"
    prepared.mkdir(parents=True)
    splits = {s: {"sentences": n, "tokens": 10 * n} for s, n in (("train", 8), ("valid", 2))}
    labels = ["neutre", "négatif", "positif"]
    stats = {
        "hash": "ccdb107cecd43938",
        "labels": labels,
        "splits": {**splits, "test": {"sentences": 2}},
    }
    (prepared / "stats.json").write_text(json.dumps(stats))
    (tmp_path / "sp.model").write_bytes(b"model")
    (tmp_path / "dict.txt").write_text("a 1\n")
    manifest = {
        "sentencepiece": str(tmp_path / "sp.model"),
        "dictionary": str(tmp_path / "dict.txt"),
    }
    (prepared / "prepared.json").write_text(json.dumps(manifest))
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    experiment = client.create_experiment("lineage", artifact_location=str(tmp_path / "art"))
    run_ids = [client.create_run(experiment).info.run_id for _ in range(2)]

    inputs = dataset_inputs(prepared, "corpus")
    log_lineage(client, run_ids, inputs)
    log_lineage(client, run_ids[:1], inputs)  # again (a resumed sweep): nothing doubles
    log_vocabulary(client, run_ids[0], prepared)
    vocabulary = sorted(a.path for a in client.list_artifacts(run_ids[0], "vocabulary"))
    assert vocabulary == ["vocabulary/dict.txt", "vocabulary/sp.model"]

    for run_id in run_ids:
        logged = client.get_run(run_id).inputs.dataset_inputs
        seen = {(i.dataset.name, i.dataset.digest, i.tags[0].value) for i in logged}
        assert seen == {
            ("corpus/train", "ccdb107cecd43938", "train"),
            ("corpus/valid", "ccdb107cecd43938", "valid"),
            ("corpus/test", "ccdb107cecd43938", "test"),
        }
        train = next(i.dataset for i in logged if i.dataset.name == "corpus/train")
        assert json.loads(train.profile) == {"sentences": 8, "tokens": 80, "labels": labels}
        assert json.loads(train.source)["uri"] == prepared.resolve().as_uri()


def test_a_folder_without_stats_has_no_lineage(tmp_path):
    assert dataset_inputs(tmp_path, "corpus") == []
