"""Trial-side uploads go to the run's artifact location, under the layout's names."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sweeper import record_names
from sweeper.tracking.artifacts import (
    LOG_FILES,
    UploadError,
    upload_logs,
    upload_trial,
    uploaded_splits,
)
from sweeper.trainers import predictions
from sweeper.trainers.base import Checkpoints
from sweeper.trainers.predictions import CheckpointPredictions, SplitPredictions
from sweeper.trainers.runner import TrialResult


def _trial_folder(root: Path, best_as_dir: bool) -> TrialResult:
    out = root / "trial"
    (out / "checkpoints").mkdir(parents=True)
    for local, _ in LOG_FILES:
        (out / local).write_text(f"{local}\n", encoding="utf-8")
    if best_as_dir:  # HF: a checkpoint folder
        best = out / "checkpoints" / "checkpoint-10"
        best.mkdir()
        (best / "model.safetensors").write_bytes(b"weights")
        (best / "config.json").write_text(json.dumps({"a": 1}))
    else:  # fairseq/dummy: one file
        best = out / "checkpoints" / "checkpoint_best.pt"
        best.write_bytes(b"weights")
    return TrialResult(out, [], Checkpoints(best, None), 1.0, None)


def _files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}


@pytest.mark.parametrize("best_as_dir", [False, True])
def test_upload_trial_writes_the_layout(tmp_path, best_as_dir):
    result = _trial_folder(tmp_path, best_as_dir)
    store = tmp_path / "artifacts"
    names = upload_trial(result, store.as_uri(), tracking_uri="sqlite:///unused.db")
    assert names[0] == record_names.ARTIFACT_BEST_CHECKPOINT
    best = record_names.ARTIFACT_BEST_CHECKPOINT
    expected = {
        record_names.ARTIFACT_TRIAL_CONFIG,
        record_names.ARTIFACT_TRAINER_LOG,
        record_names.ARTIFACT_EVENTS,
    }
    if best_as_dir:
        expected |= {f"{best}/model.safetensors", f"{best}/config.json"}
    else:
        expected |= {f"{best}/checkpoint_best.pt"}
    assert _files(store) == expected
    assert not (tmp_path / "unused.db").exists()  # the tracking store is never opened
    assert uploaded_splits(names) == []  # no predictions files: nothing more, no tag


def test_predictions_files_go_up_with_the_trial(tmp_path):
    result = _trial_folder(tmp_path, best_as_dir=False)
    best = CheckpointPredictions(10, (1, 0), (0.9, 0.6), (1, 1))
    for split in ("test", "valid"):
        predictions.write(
            result.out_dir, SplitPredictions(split, "classification", (0, 1), {"best": best})
        )
    (result.out_dir / "predictions" / "train.json").write_text("{}")  # not a split that goes up
    store = tmp_path / "artifacts"
    names = upload_trial(result, store.as_uri(), tracking_uri="sqlite:///unused.db")
    assert uploaded_splits(names) == ["valid", "test"]
    assert {"predictions/valid.json", "predictions/test.json"} <= _files(store)
    assert "predictions/train.json" not in _files(store)
    uploaded = predictions.read(store / "predictions" / "test.json")
    assert uploaded.at("best") == best


def test_local_names_are_the_artifact_names():
    assert all(local == name for local, name in LOG_FILES)


def test_no_best_checkpoint_fails_the_upload(tmp_path):
    result = _trial_folder(tmp_path, best_as_dir=False)
    result.checkpoints.best.unlink()
    with pytest.raises(FileNotFoundError, match="no best checkpoint"):
        upload_trial(result, (tmp_path / "artifacts").as_uri(), "sqlite:///unused.db")


def test_upload_logs_skips_missing_files(tmp_path):
    out = tmp_path / "trial"
    out.mkdir()
    (out / record_names.TRAINER_LOG_FILE).write_text("crash\n")
    store = tmp_path / "artifacts"
    assert upload_logs(out, store.as_uri(), "sqlite:///unused.db") == [
        record_names.ARTIFACT_TRAINER_LOG
    ]
    assert _files(store) == {record_names.ARTIFACT_TRAINER_LOG}


def test_an_unwritable_store_raises(tmp_path):
    result = _trial_folder(tmp_path, best_as_dir=False)
    blocker = tmp_path / "blocker"
    blocker.write_text("a file where the artifact folder should be")
    with pytest.raises(UploadError, match=r"artifact upload to .* failed: .*Error") as raised:
        upload_trial(result, (blocker / "artifacts").as_uri(), "sqlite:///unused.db")
    assert isinstance(raised.value.__cause__, OSError)
