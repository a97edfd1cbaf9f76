"""`sweeper summarize --evaluate` against a real MLflow SQLite store and artifact store.

The trial runs are written as the engine writes them (test_summarize_store.write_trial)
and carry what a trial uploads: trial.json and the best checkpoint, and for some the
test predictions with the `sweeper.predictions` tag. The trainer is the dummy, whose
checkpoint (best.json: a step) determines its test accuracy through the same curve its
training logged, and its predictions (`dummy_predictions` of that step), so a faithful
record re-measures exactly, a tampered checkpoint disagrees, a missing one cannot be
measured, and stored predictions that the checkpoint does not repeat are named by
example. The real frameworks' reloading is exercised by test_run_sweep on a real
fairseq + HF sweep.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_summarize_store import Trial, write_experiment

from sweeper import record_names
from sweeper.cli.main import main
from sweeper.trainers import predictions
from sweeper.trainers.base import TrialJob
from sweeper.trainers.predictions import CheckpointPredictions, SplitPredictions
from tests.support.dummy_trainer import _accuracy, dummy_predictions

pytestmark = pytest.mark.integration

EPOCH = 10  # dummy updates per epoch: num_train 80 / batch 8


def _job(seed: int) -> TrialJob:
    return TrialJob(
        framework="dummy",
        seed=seed,
        init="pretrained",
        method="full",
        train={"batch_size": 8, "epochs": 3, "lr": 0.001},
        lora=None,
        arch={},
        num_classes=2,
        num_train=80,
        data="",
        init_checkpoint="",
        out_dir="unused",
    )


def _trial(seed: int) -> Trial:
    """A dummy trial's record: valid/test at each epoch; valid peaks at the last; seeds
    4 and 5 tagged with stored predictions."""
    job = _job(seed)
    steps = [EPOCH, 2 * EPOCH, 3 * EPOCH]
    stored = {record_names.TAG_PREDICTIONS: "valid,test"} if seed in STORED else {}
    return Trial(
        "dummy",
        "pretrained",
        seed,
        valid=[(s, _accuracy(job, s, "valid")) for s in steps],
        test=[(s, _accuracy(job, s, "test")) for s in steps],
        extra_tags=stored,
    )


STORED = {4: (), 5: (3, 7)}
"""Seeds whose test predictions are uploaded, and the examples changed in the file."""


def _stored(seed: int, step: int, changed: tuple[int, ...]) -> SplitPredictions:
    """What the trial's child predicted at its best step, with `changed` examples' class
    and correct flag flipped."""
    made = dummy_predictions(_job(seed), step)
    flip = [int(k in changed) for k in range(len(made.correct))]
    best = CheckpointPredictions(
        step,
        tuple(p ^ f for p, f in zip(made.predicted, flip, strict=True)),
        made.scores,
        tuple(c ^ f for c, f in zip(made.correct, flip, strict=True)),
    )
    ids = tuple(range(len(best.correct)))
    return SplitPredictions("test", "classification", ids, {"best": best, "last": best})


def _upload(client, run_id: str, seed: int, tmp: Path, best_step: int | None) -> None:
    """What a finished trial uploads: trial.json, checkpoints/best unless None, and
    the predictions of seeds in `STORED`."""
    folder = tmp / f"upload-{seed}"
    (folder / "best").mkdir(parents=True)
    _job(seed).save(folder / record_names.ARTIFACT_TRIAL_CONFIG)
    client.log_artifact(run_id, str(folder / record_names.ARTIFACT_TRIAL_CONFIG))
    if best_step is not None:
        (folder / "best" / "best.json").write_text(json.dumps({"step": best_step}))
        client.log_artifacts(run_id, str(folder / "best"), record_names.ARTIFACT_BEST_CHECKPOINT)
    if seed in STORED:
        path = predictions.write(folder, _stored(seed, 3 * EPOCH, STORED[seed]))
        client.log_artifact(run_id, str(path), record_names.ARTIFACT_PREDICTIONS_DIR)


@pytest.fixture
def store(tmp_path, monkeypatch):
    """Seeds 1-5: seed 1 faithful, seed 2 a checkpoint from the wrong step, seed 3 none;
    seed 4 faithful with its predictions, seed 5 with predictions its checkpoint does
    not repeat on two examples."""
    from mlflow import MlflowClient

    monkeypatch.chdir(tmp_path)  # the experiment's default artifact root is ./mlruns

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(uri)
    seeds = (1, 2, 3, 4, 5)
    made = write_experiment(client, "evaluate", [_trial(s) for s in seeds])
    bests = (3 * EPOCH, EPOCH, None, 3 * EPOCH, 3 * EPOCH)
    for seed, run_id, best in zip(seeds, made["runs"], bests, strict=True):
        _upload(client, run_id, seed, tmp_path, best)
    return uri, client, made


def test_evaluate_reports_agreement_mismatch_and_missing(store, tmp_path, capsys):
    uri, client, made = store
    out = tmp_path / "report"
    argv = ["summarize", "--experiment", "evaluate", "--tracking-uri", uri]
    assert main([*argv, "--evaluate", "--out", str(out)]) == 1
    captured = capsys.readouterr()
    disagree = "dummy-pretrained-s2, dummy-pretrained-s3, dummy-pretrained-s5"
    assert f"error: 3 stored checkpoint(s) disagree: {disagree}" in captured.err
    rows = {e["run_name"]: e for e in json.loads((out / "evaluation.json").read_text())}
    faithful, tampered, missing, stored, changed = (
        rows[f"dummy-pretrained-s{s}"] for s in (1, 2, 3, 4, 5)
    )
    assert faithful["agrees"] and faithful["measured"] == faithful["recorded"]
    assert faithful["examples"] is None and faithful["differing"] == []
    assert not tampered["agrees"]
    assert tampered["measured"] == _accuracy(_job(2), EPOCH, "test") != tampered["recorded"]
    assert missing["measured"] is None and "artifact missing" in missing["problem"]
    assert stored["agrees"] and (stored["examples"], stored["differing"]) == (10, [])
    assert not changed["agrees"] and changed["measured"] == changed["recorded"]
    assert (changed["examples"], changed["differing"]) == (10, [3, 7])
    assert "evaluate 1/5 dummy-pretrained-s1: ok (no stored predictions)\n" in captured.out
    assert "evaluate 2/5 dummy-pretrained-s2: MISMATCH" in captured.out
    assert "evaluate 3/5 dummy-pretrained-s3: not measured: artifact missing" in captured.out
    assert "evaluate 4/5 dummy-pretrained-s4: ok (10 of 10 examples agree)\n" in captured.out
    assert (
        "evaluate 5/5 dummy-pretrained-s5: EXAMPLES DIFFER (2 of 10 examples differ (ids 3, 7))"
        in captured.out
    )
    assert captured.out.rstrip().endswith(
        "(2 of 5 agree, exactly; 18 of 20 test examples agree"
        " (3 trial(s) not compared example by example))"
    )
    table = (out / "evaluation.md").read_text()
    assert "| dummy-pretrained-s1 | dummy | 30 |" in table
    assert "| 8 of 10 | EXAMPLES DIFFER" in table
    logged = client.list_artifacts(made["parent"], record_names.ARTIFACT_REPORT_DIR)
    assert {"report/evaluation.md", "report/evaluation.json"} <= {a.path for a in logged}


def test_evaluate_with_json_output_keeps_stdout_parseable(store, capsys):
    uri, _, _ = store
    argv = ["summarize", "--experiment", "evaluate", "--tracking-uri", uri, "--no-log"]
    assert main([*argv, "--evaluate", "--format", "json"]) == 1
    captured = capsys.readouterr()
    assert json.loads(captured.out)["experiment"] == "evaluate"
    assert "Re-measured" in captured.err
