"""The HF child's pieces that need no training: data, batching, recipe, retention."""

from __future__ import annotations

import dataclasses
import json
from fractions import Fraction
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from sweeper.trainers.base import TrialJob  # noqa: E402
from sweeper.trainers.hf.hf_data import (  # noqa: E402
    PadCollator,
    argmax_logits,
    compute_accuracy,
    read_split,
)
from sweeper.trainers.hf.hf_main import (  # noqa: E402
    FairseqRecipeTrainer,
    check_data,
    class_metrics,
    precision_switches,
    prune_checkpoints,
    resume_point,
    training_arguments,
)

RECIPE = {
    "epochs": 5, "batch_size": 8, "lr": 1e-5, "warmup_ratio": 0.06, "weight_decay": 0.1,
    "dropout": 0.1, "attention_dropout": 0.1, "adam_betas": [0.9, 0.98], "adam_eps": 1e-6,
    "clip_norm": 0.0, "lr_scheduler": "polynomial", "num_classes": 2,
}  # fmt: skip


def _job(tmp_path: Path, **train) -> TrialJob:
    return TrialJob(
        framework="hf", seed=3, init="pretrained", method="full", train={**RECIPE, **train},
        lora=None, arch={}, num_classes=2, num_train=1800,
        data=str(tmp_path / "hf"), init_checkpoint="", out_dir=str(tmp_path / "trial"),
    )  # fmt: skip


def test_collator_pads_with_fairseq_pad_and_masks_only_real_tokens():
    items = [
        {"input_ids": torch.tensor([0, 5, 6, 2]), "labels": 1},
        {"input_ids": torch.tensor([0, 7, 2]), "labels": 0},
    ]
    batch = PadCollator()(items)
    assert batch["input_ids"].tolist() == [[0, 5, 6, 2], [0, 7, 2, 1]]
    assert batch["attention_mask"].tolist() == [[1, 1, 1, 1], [1, 1, 1, 0]]
    assert batch["labels"].tolist() == [1, 0]
    assert all(t.dtype == torch.long for t in batch.values())


def test_split_reads_ids_and_labels_and_names_bad_lines(tmp_path):
    path = tmp_path / "valid.jsonl"
    path.write_text('{"input_ids": [0, 9, 2], "label": 1}\n\n{"input_ids": [0, 2], "label": 0}\n')
    split = read_split(path)
    assert len(split) == 2 and split.max_length == 3
    assert split[0]["input_ids"].tolist() == [0, 9, 2] and split[1]["labels"] == 0
    path.write_text('{"input_ids": [0, 9, 2], "label": 1}\n{"ids": [0, 2]}\n')
    with pytest.raises(ValueError, match=r"valid\.jsonl:2"):
        read_split(path)
    with pytest.raises(FileNotFoundError):
        read_split(tmp_path / "missing.jsonl")


def test_accuracy_is_a_percentage_of_argmax_predictions():
    logits = torch.tensor([[0.1, 0.9], [2.0, -1.0], [0.0, 3.0], [1.0, 0.0]])
    predictions = argmax_logits(logits, torch.zeros(4))
    prediction = type("P", (), {"predictions": predictions.numpy(), "label_ids": [1, 0, 0, 0]})
    measured = compute_accuracy(prediction)
    assert measured["accuracy"] == 75.0
    # class 0: TP 2, FN 1 (predicted 1); class 1: TP 1, FP 1
    assert measured["macro_f1"] == float(100 * (Fraction(4, 5) + Fraction(2, 3)) / 2)
    assert (measured["precision_class0"], measured["recall_class0"]) == (100.0, 100 * 2 / 3)
    assert (measured["precision_class1"], measured["recall_class1"]) == (50.0, 100.0)
    assert sorted(measured) == sorted(
        ["accuracy", "macro_f1"]
        + [f"{k}_class{c}" for k in ("precision", "recall", "f1") for c in (0, 1)]
    )


def test_evaluation_events_carry_macro_f1_and_per_class_values():
    """transformers' eval metrics of one split become the event's `metrics`."""
    logged = {
        "eval_valid_loss": 0.5,
        "eval_valid_accuracy": 75.0,
        "eval_valid_macro_f1": 73.3,
        "eval_valid_f1_class2": 50.0,
        "eval_valid_runtime": 0.1,
        "eval_test_macro_f1": 1.0,
    }
    assert class_metrics(logged, "eval_valid_") == {"macro_f1": 73.3, "f1_class2": 50.0}


def test_the_best_checkpoint_follows_the_job_selection(tmp_path):
    assert training_arguments(_job(tmp_path)).metric_for_best_model == "eval_valid_accuracy"
    job = dataclasses.replace(
        _job(tmp_path), extra={"select": {"metric": "valid_macro_f1", "mode": "max"}}
    )
    args = training_arguments(job)
    assert (args.metric_for_best_model, args.greater_is_better) == ("eval_valid_macro_f1", True)
    job = dataclasses.replace(job, extra={"select": {"metric": "valid_loss", "mode": "min"}})
    assert training_arguments(job).greater_is_better is False


def test_accuracy_is_the_shared_float_of_the_counts():
    """154 of 187 right gives `accuracy_percent(154, 187)` bit for bit, the float the
    fairseq parser and `--evaluate` compute for those counts (a mean of booleans times
    100 is 82.35294117647058, one bit off)."""
    import numpy as np

    from sweeper.trainers.metrics import accuracy_percent

    labels = np.array([i % 2 for i in range(187)])
    predictions = labels.copy()
    predictions[:33] = 1 - predictions[:33]  # 33 wrong, 154 right
    prediction = type("P", (), {"predictions": predictions, "label_ids": labels})
    value = compute_accuracy(prediction)["accuracy"]
    assert value == accuracy_percent(154, 187) == 100.0 * 154 / 187
    assert value != float((predictions == labels).mean() * 100.0)


def test_training_arguments_spell_the_fairseq_recipe(tmp_path):
    job = _job(tmp_path)
    args = training_arguments(job)
    assert args.output_dir == str(job.checkpoint_dir)
    assert (args.learning_rate, args.weight_decay) == (1e-5, 0.1)
    assert (args.adam_beta1, args.adam_beta2, args.adam_epsilon) == (0.9, 0.98, 1e-6)
    assert args.get_warmup_steps(job.total_updates) == 68
    assert args.lr_scheduler_type == "linear" and args.max_grad_norm == 0.0
    assert args.per_device_train_batch_size == 8 and args.num_train_epochs == 5
    assert args.seed == 3 and args.report_to == [] and args.disable_tqdm
    assert args.eval_strategy == "epoch" and args.save_strategy == "epoch"
    assert args.metric_for_best_model == "eval_valid_accuracy" and args.greater_is_better
    assert not args.logging_nan_inf_filter
    assert args.use_cpu or torch.cuda.is_available()
    assert training_arguments(_job(tmp_path, clip_norm=1.5)).max_grad_norm == 1.5


@pytest.mark.parametrize(
    ("precision", "bf16", "fp16"), [("fp32", False, False), ("bf16", True, False)]
)
def test_precision_is_transformers_own_switch(tmp_path, precision, bf16, fp16):
    args = training_arguments(_job(tmp_path, precision=precision))
    assert (args.bf16, args.fp16) == (bf16, fp16)


def test_fp16_maps_to_transformers_fp16_switch_alone():
    """The CUDA-only path, checked by the arguments it produces (no GPU here)."""
    assert precision_switches("fp16") == {"bf16": False, "fp16": True}
    assert precision_switches("fp32") == {"bf16": False, "fp16": False}


def test_weight_decay_reaches_biases_and_layer_norms_as_in_fairseq():
    model = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.LayerNorm(2))
    names = FairseqRecipeTrainer.get_decay_parameter_names(None, model)  # type: ignore[arg-type]
    assert sorted(names) == ["0.bias", "0.weight", "1.bias", "1.weight"]


def test_check_data_catches_a_count_mismatch_and_overlong_inputs(tmp_path):
    from sweeper.trainers.hf.hf_data import TokenIdDataset

    def dataset(n: int, length: int) -> TokenIdDataset:
        return TokenIdDataset([torch.zeros(length, dtype=torch.long)] * n, [0] * n)

    job = _job(tmp_path)
    good = {"train": dataset(1800, 5), "valid": dataset(3, 5), "test": dataset(3, 5)}
    check_data(job, good, max_length=5)
    with pytest.raises(ValueError, match=r"num_train is 1800 but train\.jsonl has 10"):
        check_data(job, {**good, "train": dataset(10, 5)}, max_length=5)
    with pytest.raises(ValueError, match=r"test\.jsonl has a 6-token sequence"):
        check_data(job, {**good, "test": dataset(3, 6)}, max_length=5)


def _checkpoint(folder: Path, step: int, best_step: int, complete: bool = True) -> Path:
    path = folder / f"checkpoint-{step}"
    path.mkdir(parents=True)
    for name in ("model.safetensors", "optimizer.pt", "scheduler.pt", "rng_state.pth"):
        (path / name).write_bytes(b"x")
    if complete:
        state = {"best_model_checkpoint": str(folder / f"checkpoint-{best_step}")}
        (path / "trainer_state.json").write_text(json.dumps(state))
    return path


def test_retention_keeps_best_and_newest_and_strips_the_best(tmp_path):
    folder = tmp_path / "checkpoints"
    for step in (25, 50, 75):
        _checkpoint(folder, step, best_step=50)
    prune_checkpoints(folder)
    assert sorted(p.name for p in folder.iterdir()) == ["checkpoint-50", "checkpoint-75"]
    assert sorted(p.name for p in (folder / "checkpoint-50").iterdir()) == [
        "model.safetensors", "trainer_state.json",
    ]  # fmt: skip
    assert (folder / "checkpoint-75" / "optimizer.pt").exists()


def test_retention_when_the_newest_is_the_best_keeps_one(tmp_path):
    folder = tmp_path / "checkpoints"
    _checkpoint(folder, 25, best_step=25)
    _checkpoint(folder, 50, best_step=50)
    prune_checkpoints(folder)
    assert [p.name for p in folder.iterdir()] == ["checkpoint-50"]


def test_resume_point_drops_half_written_checkpoints(tmp_path):
    folder = tmp_path / "checkpoints"
    assert resume_point(folder) is None
    _checkpoint(folder, 25, best_step=25)
    _checkpoint(folder, 50, best_step=25, complete=False)
    assert resume_point(folder) == folder / "checkpoint-25"
    assert [p.name for p in folder.iterdir()] == ["checkpoint-25"]


@pytest.mark.parametrize(
    ("step", "evaluates"), [(27, False), (40, True)], ids=["mid-epoch", "epoch-end"]
)
def test_a_notice_stops_after_the_update_and_saves_once_at_the_epoch_end_pass(step, evaluates):
    """`StopOnNotice` (hf_notice): the step after the notice stops training; the pass
    transformers runs after a stop saves, and validates only where the step ends an
    epoch (20 updates each), as an uninterrupted run would."""
    from transformers import TrainerControl, TrainerState
    from transformers.trainer_callback import DefaultFlowCallback

    from sweeper.trainers.hf.hf_notice import Preempted, StopOnNotice
    from sweeper.trainers.notice import Notice

    notice = Notice()
    stop = StopOnNotice(notice, updates_per_epoch=20)
    args = training_arguments(_job(Path("/nonexistent")))
    state, control = TrainerState(global_step=step - 1, max_steps=100), TrainerControl()
    stop.on_train_begin(args, state, control)
    assert notice.armed
    stop.on_step_end(args, state, control)
    assert not control.should_training_stop  # no notice yet
    notice.received = True
    state.global_step = step
    stop.on_step_end(args, state, control)
    assert control.should_training_stop and not control.should_save
    state.epoch = step / 20
    DefaultFlowCallback().on_epoch_end(args, state, control)  # transformers' own first
    stop.on_epoch_end(args, state, control)
    assert control.should_save and control.should_evaluate == evaluates
    with pytest.raises(Preempted) as preempted:
        stop.check(step, 100)
    assert preempted.value.step == step
    stop.check(100, 100)  # the last update came first: a finished trial
