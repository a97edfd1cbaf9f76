"""Real HF trials on tiny data, run the way the sweep runs them (`run_trainer`).

One fixture trains a full fine-tuning trial once; the tests read its events, its
checkpoint folder and predictions files, and reload its best checkpoint. A second copy
of the same job is killed after its first checkpoint and resumed, and must retrace the
uninterrupted run, its predictions included.
The init checkpoint is the models package's (`init_checkpoint`), the same file a
fairseq trial of this seed would start from.
"""

from __future__ import annotations

import json
import os
import random
import signal
import threading
import time
from pathlib import Path

import pytest

from sweeper import record_names
from sweeper.trainers import predictions
from sweeper.trainers.base import TrialJob
from sweeper.trainers.events import MetricEvent, best_validation
from sweeper.trainers.registry import get_trainer
from sweeper.trainers.runner import TrainerError, TrialResult, run_trainer
from tests.support.predicted import assert_predictions_reproduce

pytestmark = pytest.mark.integration

ARCH = {"layers": 1, "embed_dim": 16, "ffn_dim": 16, "heads": 2, "max_positions": 32}
VOCAB = 100
SIZES = {"train": 200, "valid": 50, "test": 50}
EPOCHS = 4
LOG_INTERVAL = 5
RECIPE = {
    "epochs": EPOCHS, "batch_size": 8, "lr": 2e-3, "warmup_ratio": 0.06, "weight_decay": 0.1,
    "dropout": 0.1, "attention_dropout": 0.1, "adam_betas": [0.9, 0.98], "adam_eps": 1e-6,
    "clip_norm": 0.0, "lr_scheduler": "polynomial", "num_classes": 2, "timeout_min": None,
}  # fmt: skip
LORA = {"r": 4, "alpha": 8, "dropout": 0.05, "target_modules": ["query", "value"], "bias": "none"}


def _write_split(path: Path, size: int, rng: random.Random) -> None:
    """Sentences whose label is carried by one keyword (ids 10-19 vs 20-29)."""
    with path.open("w", encoding="utf-8") as out:
        for _ in range(size):
            label = rng.randrange(2)
            body = [rng.randrange(30, VOCAB - 1) for _ in range(rng.randint(3, 18))]
            body[rng.randrange(len(body))] = (
                rng.randrange(10, 20) if label else rng.randrange(20, 30)
            )
            out.write(json.dumps({"input_ids": [0, *body, 2], "label": label}) + "\n")


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    from sweeper.models import init_checkpoint
    from sweeper.spec.model_block import ArchConfig

    root = tmp_path_factory.mktemp("hf_inputs")
    (root / "hf").mkdir()
    rng = random.Random(0)
    for split, size in SIZES.items():
        _write_split(root / "hf" / f"{split}.jsonl", size, rng)
    arch = ArchConfig(**ARCH, vocab_size=VOCAB)
    init = init_checkpoint(arch, VOCAB, 2, "random", 1, None, root / "init")
    return {"hf": root / "hf", "init": init}


def _job(inputs: dict[str, Path], out_dir: Path, method: str = "full", **train) -> TrialJob:
    return TrialJob(
        framework="hf", seed=1, init="random", method=method, train={**RECIPE, **train},
        lora=LORA if method == "lora" else None, arch={**ARCH, "vocab_size": VOCAB},
        num_classes=2, num_train=SIZES["train"], data=str(inputs["hf"]),
        init_checkpoint=str(inputs["init"]), out_dir=str(out_dir),
        extra={"log_interval": LOG_INTERVAL},
    )  # fmt: skip


@pytest.fixture(scope="module")
def full_trial(inputs, tmp_path_factory) -> tuple[TrialJob, TrialResult]:
    job = _job(inputs, tmp_path_factory.mktemp("hf_full") / "trial")
    return job, run_trainer(get_trainer("hf"), job)


def _accuracy(model, hf_dir: Path, split: str = "test") -> float:
    """Accuracy (%) of a reloaded model on a prepared split, outside any Trainer."""
    import torch

    from sweeper.trainers.hf.hf_data import PadCollator, read_split

    data = read_split(hf_dir / f"{split}.jsonl")
    batch = PadCollator()([data[i] for i in range(len(data))])
    model.eval()
    with torch.no_grad():
        logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
    return float((logits.argmax(-1) == batch["labels"]).float().mean() * 100)


def _test_at_best(events: list[MetricEvent]) -> tuple[int, float]:
    found = best_validation(events)
    assert found is not None and found[1] is not None
    best, test = found
    return best.step, float(test.accuracy)  # type: ignore[arg-type]


def test_valid_and_test_are_measured_at_every_epoch_end(full_trial):
    job, result = full_trial
    per_epoch = job.updates_per_epoch
    expected = [per_epoch * epoch for epoch in range(1, EPOCHS + 1)]
    for split in ("valid", "test"):
        events = [e for e in result.events if e.split == split]
        assert [e.step for e in events] == expected
        assert [e.epoch for e in events] == [float(n) for n in range(1, EPOCHS + 1)]
        assert all(0 <= e.accuracy <= 100 and e.loss > 0 for e in events)  # type: ignore[operator]
    train = [e for e in result.events if e.split == "train"]
    assert [e.step for e in train] == list(range(LOG_INTERVAL, job.total_updates + 1, LOG_INTERVAL))
    assert all(e.lr is not None and e.loss is not None for e in train)
    # the lr of each logged update: linear decay reaches 0 right after the last one
    warmup = round(job.total_updates * RECIPE["warmup_ratio"])
    assert train[-1].lr == pytest.approx(RECIPE["lr"] / (job.total_updates - warmup))
    assert max(e.lr for e in train) <= RECIPE["lr"]  # type: ignore[type-var]
    assert result.trainable_params is not None
    trainable, total = result.trainable_params
    assert trainable == total > 0


def test_only_the_best_and_last_checkpoints_remain(full_trial):
    job, result = full_trial
    best_step, _ = _test_at_best(result.events)
    checkpoints = result.checkpoints
    assert checkpoints.last is not None and checkpoints.best is not None
    assert checkpoints.last.name == f"checkpoint-{job.total_updates}"
    assert checkpoints.best.name == f"checkpoint-{best_step}"
    on_disk = {path.name for path in job.checkpoint_dir.iterdir()}
    assert on_disk == {checkpoints.best.name, checkpoints.last.name}
    assert (checkpoints.last / "optimizer.pt").is_file()
    if checkpoints.best != checkpoints.last:
        assert not (checkpoints.best / "optimizer.pt").exists()  # weights only


def test_best_checkpoint_reloads_with_from_pretrained_and_reproduces_test(full_trial):
    from transformers import AutoModelForSequenceClassification

    job, result = full_trial
    _, recorded = _test_at_best(result.events)
    model = AutoModelForSequenceClassification.from_pretrained(result.checkpoints.best)
    assert _accuracy(model, Path(job.data)) == pytest.approx(recorded, abs=0.01)


def test_predictions_count_to_the_recorded_accuracies(full_trial):
    """Each example's flag is its predicted class against its label, in the split's order."""
    job, result = full_trial
    for split, made in assert_predictions_reproduce(Path(job.out_dir), result.events).items():
        lines = (Path(job.data) / f"{split}.jsonl").read_text().splitlines()
        labels = [json.loads(line)["label"] for line in lines]
        at = made.at("best")
        assert at.correct == tuple(int(p == t) for p, t in zip(at.predicted, labels, strict=True))


def test_a_tie_keeps_the_earliest_best_checkpoint(inputs, tmp_path):
    """Every epoch scores the same: the best must stay the first (transformers compares
    with a strict >), the rule the summariser applies to the events."""
    from sweeper.trainers.hf import hf_main
    from sweeper.trainers.hf.hf_data import read_splits
    from sweeper.trainers.hf.hf_trainer import find_checkpoints

    job = _job(inputs, tmp_path / "trial", epochs=3)
    trainer = hf_main.build_trainer(job, hf_main.build_model(job), read_splits(inputs["hf"]))
    trainer.compute_metrics = lambda prediction: {"accuracy": 50.0}
    trainer.train()
    found = find_checkpoints(job.checkpoint_dir)
    per_epoch = job.updates_per_epoch
    assert found.best == job.checkpoint_dir / f"checkpoint-{per_epoch}"
    assert found.last == job.checkpoint_dir / f"checkpoint-{3 * per_epoch}"
    assert sorted(path.name for path in job.checkpoint_dir.iterdir()) == sorted(
        [found.best.name, found.last.name]
    )


def _kill_after_first_checkpoint(job: TrialJob, killed: list[int]) -> threading.Thread:
    """Watch for the trial's first complete checkpoint, then SIGKILL the child's process
    group (the runner starts it in its own session, so pgid = pid)."""
    marker = str(Path(job.out_dir) / record_names.TRIAL_CONFIG_FILE).encode()

    def child_pid() -> int | None:
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
                except OSError:
                    continue
                if b"sweeper.trainers.hf.hf_main" in cmdline and marker in cmdline:
                    return int(entry)
        return None

    def watch() -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if any(job.checkpoint_dir.glob("checkpoint-*/trainer_state.json")):
                pid = child_pid()
                if pid is not None:
                    os.killpg(pid, signal.SIGKILL)
                    killed.append(pid)
                return
            time.sleep(0.005)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


def test_a_killed_trial_resumes_from_its_last_checkpoint(inputs, full_trial, tmp_path):
    _, reference = full_trial
    job = _job(inputs, tmp_path / "trial")
    killed: list[int] = []
    watcher = _kill_after_first_checkpoint(job, killed)
    with pytest.raises(TrainerError, match=r"hf trainer was killed by SIGKILL \(exit 137\)"):
        run_trainer(get_trainer("hf"), job)
    watcher.join()
    assert killed, "the trial finished before it could be killed"
    saved = job.checkpoint_dir.glob("checkpoint-*/trainer_state.json")
    resumed_from = max(int(path.parent.name.split("-")[1]) for path in saved)
    assert resumed_from < job.total_updates

    second: list[MetricEvent] = []
    result = run_trainer(get_trainer("hf"), job, on_event=second.append)
    log = (Path(job.out_dir) / record_names.TRAINER_LOG_FILE).read_text(encoding="utf-8")
    assert f"resume from {job.checkpoint_dir / f'checkpoint-{resumed_from}'}" in log
    first_train = next(e for e in second if e.split == "train")
    assert first_train.step > resumed_from - LOG_INTERVAL
    assert max(e.step for e in second) == job.total_updates
    assert min(e.step for e in second if e.split == "valid") > resumed_from
    # optimizer, scheduler, RNG and data order restored: the run retraces the reference
    expected = {(e.split, e.step): e for e in reference.events if e.split != "train"}
    got = {(e.split, e.step): e for e in result.events if e.split != "train"}
    assert got.keys() == expected.keys()
    for key, event in expected.items():
        assert got[key].accuracy == pytest.approx(event.accuracy, abs=1e-6), key
        assert got[key].loss == pytest.approx(event.loss, rel=1e-4), key
    assert result.checkpoints.best is not None
    assert result.checkpoints.best.name == reference.checkpoints.best.name  # type: ignore[union-attr]
    resumed = assert_predictions_reproduce(Path(job.out_dir), result.events)
    for split, made in resumed.items():
        again = predictions.read(reference.out_dir / "predictions" / f"{split}.json")
        for which in ("best", "last"):
            assert made.at(which).predicted == again.at(which).predicted, (split, which)


def test_lora_trial_records_its_trainable_count_and_reloads_with_peft(inputs, tmp_path):
    from peft import PeftModel

    from sweeper.models import hf_init_model, hf_init_state, lora_trainable_params

    job = _job(inputs, tmp_path / "trial", method="lora", epochs=2)
    result = run_trainer(get_trainer("hf"), job)
    assert result.trainable_params is not None
    trainable, total = result.trainable_params
    config, _ = hf_init_state(inputs["init"])
    assert (trainable, total) == lora_trainable_params(config, LORA)
    assert 0 < trainable < total
    log = (Path(job.out_dir) / record_names.TRAINER_LOG_FILE).read_text(encoding="utf-8")
    assert f"params: trainable {trainable:,} of {total:,}" in log

    best = result.checkpoints.best
    assert best is not None
    assert (best / "adapter_model.safetensors").is_file()
    assert not (best / "model.safetensors").exists()  # adapters and head only
    _, recorded = _test_at_best(result.events)
    model = PeftModel.from_pretrained(hf_init_model(inputs["init"]), best)
    assert _accuracy(model, inputs["hf"]) == pytest.approx(recorded, abs=0.01)
    assert_predictions_reproduce(Path(job.out_dir), result.events)  # adapters reloaded by PEFT
