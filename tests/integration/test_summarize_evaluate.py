"""`sweeper summarize --evaluate` against a real MLflow SQLite store and artifact store.

The trial runs are written as the engine writes them (test_summarize_store.write_trial)
and carry what a trial uploads: trial.json and the best checkpoint. The trainer is the
dummy, whose checkpoint (best.json: a step) determines its test accuracy through the
same curve its training logged, so a faithful record re-measures exactly, a tampered
checkpoint disagrees, and a missing one cannot be measured. The real frameworks'
reloading is exercised by test_run_sweep on a real fairseq + HF sweep.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_summarize_store import Trial, write_experiment

from sweeper import record_names
from sweeper.cli.main import main
from sweeper.trainers.base import TrialJob
from tests.support.dummy_trainer import _accuracy

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
    """A dummy trial's record: valid/test at each epoch; valid peaks at the last."""
    job = _job(seed)
    steps = [EPOCH, 2 * EPOCH, 3 * EPOCH]
    return Trial(
        "dummy",
        "pretrained",
        seed,
        valid=[(s, _accuracy(job, s, "valid")) for s in steps],
        test=[(s, _accuracy(job, s, "test")) for s in steps],
    )


def _upload(client, run_id: str, seed: int, tmp: Path, best_step: int | None) -> None:
    """What a finished trial uploads: trial.json, and checkpoints/best unless None."""
    folder = tmp / f"upload-{seed}"
    (folder / "best").mkdir(parents=True)
    _job(seed).save(folder / record_names.ARTIFACT_TRIAL_CONFIG)
    client.log_artifact(run_id, str(folder / record_names.ARTIFACT_TRIAL_CONFIG))
    if best_step is not None:
        (folder / "best" / "best.json").write_text(json.dumps({"step": best_step}))
        client.log_artifacts(run_id, str(folder / "best"), record_names.ARTIFACT_BEST_CHECKPOINT)


@pytest.fixture
def store(tmp_path, monkeypatch):
    """Seeds 1-3: seed 1 faithful, seed 2 a checkpoint from the wrong step, seed 3 none."""
    from mlflow import MlflowClient

    monkeypatch.chdir(tmp_path)  # the experiment's default artifact root is ./mlruns

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(uri)
    made = write_experiment(client, "evaluate", [_trial(s) for s in (1, 2, 3)])
    for seed, run_id, best in zip((1, 2, 3), made["runs"], (3 * EPOCH, EPOCH, None), strict=True):
        _upload(client, run_id, seed, tmp_path, best)
    return uri, client, made


def test_evaluate_reports_agreement_mismatch_and_missing(store, tmp_path, capsys):
    uri, client, made = store
    out = tmp_path / "report"
    argv = ["summarize", "--experiment", "evaluate", "--tracking-uri", uri]
    assert main([*argv, "--evaluate", "--out", str(out)]) == 1
    captured = capsys.readouterr()
    assert "error: 2 stored checkpoint(s) disagree: dummy-pretrained-s2, dummy-pretrained-s3" in (
        captured.err
    )
    rows = {e["run_name"]: e for e in json.loads((out / "evaluation.json").read_text())}
    faithful, tampered, missing = (rows[f"dummy-pretrained-s{s}"] for s in (1, 2, 3))
    assert faithful["agrees"] and faithful["measured"] == faithful["recorded"]
    assert not tampered["agrees"]
    assert tampered["measured"] == _accuracy(_job(2), EPOCH, "test") != tampered["recorded"]
    assert missing["measured"] is None and "artifact missing" in missing["problem"]
    assert "evaluate 1/3 dummy-pretrained-s1: ok\n" in captured.out
    assert "evaluate 2/3 dummy-pretrained-s2: MISMATCH" in captured.out
    assert "evaluate 3/3 dummy-pretrained-s3: not measured: artifact missing" in captured.out
    assert captured.out.rstrip().endswith("(1 of 3 agree, exactly)")
    assert "| dummy-pretrained-s1 | dummy | 30 |" in (out / "evaluation.md").read_text()
    logged = client.list_artifacts(made["parent"], record_names.ARTIFACT_REPORT_DIR)
    assert {"report/evaluation.md", "report/evaluation.json"} <= {a.path for a in logged}


def test_evaluate_with_json_output_keeps_stdout_parseable(store, capsys):
    uri, _, _ = store
    argv = ["summarize", "--experiment", "evaluate", "--tracking-uri", uri, "--no-log"]
    assert main([*argv, "--evaluate", "--format", "json"]) == 1
    captured = capsys.readouterr()
    assert json.loads(captured.out)["experiment"] == "evaluate"
    assert "Re-measured" in captured.err
