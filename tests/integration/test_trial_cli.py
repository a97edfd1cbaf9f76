"""`sweeper trial` end to end, as a user runs it: generated corpus, pretraining stage,
shared init, then one real short trial per framework from the same inputs, each
leaving its predictions files in --out."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from sweeper.trainers import predictions
from sweeper.trainers.events import MetricEvent
from tests.support.predicted import assert_predictions_reproduce
from tests.support.specs import SWEEPS

pytestmark = pytest.mark.integration


def _overrides(tmp: Path) -> list[str]:
    corpus = tmp / "corpus"
    return [
        f"output_dir={tmp / 'out'}",
        f"data.dir={corpus}",
        f"model.sentencepiece={corpus / 'sentencepiece.bpe.model'}",
        f"model.dictionary={corpus / 'dict.txt'}",
        "data.generate.train_size=160",
        "data.generate.valid_size=40",
        "data.generate.test_size=40",
        "data.generate.unlabeled_size=400",
        "data.generate.vocab_size=200",
        "model.pretrain.steps=20",
        "model.pretrain.batch_size=16",
        "train.epochs=2",
    ]


def _trial(tmp: Path, framework: str, out: Path) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "sweeper.cli.main", "trial", str(SWEEPS / "demo.yaml"),
               "--seed", "1", "--init", "pretrained", "--framework", framework,
               "--out", str(out), *_overrides(tmp)]  # fmt: skip
    return subprocess.run(command, capture_output=True, text=True, timeout=600)


def _events(out: Path) -> list[dict]:
    lines = (out / "events.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def test_one_short_trial_per_framework_from_the_same_inputs(tmp_path: Path):
    fairseq_out, hf_out = tmp_path / "fs", tmp_path / "hf"
    first = _trial(tmp_path, "fairseq", fairseq_out)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    second = _trial(tmp_path, "hf", hf_out)
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-3000:]
    assert "cached" in second.stdout  # data and pretraining were done once, for both

    updates_per_epoch = 160 // 8
    for out in (fairseq_out, hf_out):
        events = _events(out)
        for split in ("valid", "test"):
            steps = sorted(e["step"] for e in events if e["split"] == split)
            assert steps == [updates_per_epoch, 2 * updates_per_epoch], (out, split, steps)
            assert all(0 <= e["accuracy"] <= 100 for e in events if e["split"] == split)
        assert any(e["split"] == "train" and e["loss"] > 0 for e in events)

    fs_job = json.loads((fairseq_out / "trial.json").read_text())
    hf_job = json.loads((hf_out / "trial.json").read_text())
    for field in ("init_checkpoint", "train", "arch", "seed"):
        assert fs_job[field] == hf_job[field], field
    folders = [Path(fs_job["data"]), Path(hf_job["data"])]  # each backend's, one preparation
    assert [f.name for f in folders] == ["fairseq", "hf"] and folders[0].parent == folders[1].parent
    assert "best valid accuracy" in second.stdout

    made = {}
    for framework, out in (("fairseq", fairseq_out), ("hf", hf_out)):
        events = [MetricEvent.from_dict(e) for e in _events(out)]
        made[framework] = assert_predictions_reproduce(out, events)
    right_fs, right_hf = predictions.paired(made["fairseq"]["test"], made["hf"]["test"])
    assert len(right_fs) == len(right_hf) == 40  # one test set: every example pairs by id


def test_lora_on_fairseq_is_refused_before_anything_runs(tmp_path: Path):
    command = [sys.executable, "-m", "sweeper.cli.main", "trial", str(SWEEPS / "demo.yaml"),
               "--framework", "fairseq", "--method", "lora", *_overrides(tmp_path)]  # fmt: skip
    result = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert "LoRA" in result.stderr
    assert not (tmp_path / "out").exists()
