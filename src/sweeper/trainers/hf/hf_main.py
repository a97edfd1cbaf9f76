"""The HF trial process: `python -m sweeper.trainers.hf.hf_main OUT_DIR/trial.json`.

It fine-tunes `RobertaForSequenceClassification` with `transformers.Trainer` on the
prepared token ids, starting from the weights converted from the trial's fairseq-format
init checkpoint, with fairseq's recipe (AdamW, linear warmup then linear decay to 0,
clipping, dropout). Valid and test are both measured at every epoch end, so the test
accuracy of the best-validation checkpoint is known without a second pass. Metric
events go to stdout (see `sweeper.trainers.hf.hf_trainer.EVENT_PREFIX`); the parent turns them
into Ray reports and MLflow metrics. Checkpoints found in the output folder are resumed.
On SIGTERM (a preemption notice) it saves a checkpoint at the current step and exits
with `preemption.PREEMPTED_EXIT` (`sweeper.trainers.hf.hf_notice`). Each source of the
trial's randomness follows its own seed (`TrialJob.seed_of`; which argument drives
which, and what `seeds.json` records of it: `sweeper.trainers.hf.hf_seeds`). A finished
run ends by writing the trial folder's predictions files (`sweeper.trainers.hf.hf_predict`).
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

import torch
import transformers
from transformers import (
    PrinterCallback,
    Trainer,
    TrainerCallback,
    TrainingArguments,
)

from sweeper.quick_exit import exit_now
from sweeper.record_names import SEED_DROPOUT, SEED_INIT
from sweeper.trainers.base import (
    EVAL_BATCH_SIZE,
    TrialJob,
    log_interval,
    warmup_updates,
    write_param_counts,
)
from sweeper.trainers.events import MetricEvent
from sweeper.trainers.hf.hf_data import (
    PAD_ID,
    PadCollator,
    TokenIdDataset,
    argmax_logits,
    compute_accuracy,
    read_splits,
)
from sweeper.trainers.hf.hf_notice import Preempted, StopOnNotice, train_or_stop
from sweeper.trainers.hf.hf_predict import write_predictions
from sweeper.trainers.hf.hf_seeds import seed_arguments, watch
from sweeper.trainers.hf.hf_trainer import (
    CHECKPOINT_PREFIX,
    STATE_FILE,
    checkpoint_step,
    complete_checkpoints,
    find_checkpoints,
    format_event,
)
from sweeper.trainers.metrics import CLASS_METRIC_KINDS
from sweeper.trainers.notice import Notice

TRAINING_STATE_FILES = ("optimizer.pt", "scheduler.pt", "rng_state.pth", "scaler.pt")
"""What only resuming needs; kept in the newest checkpoint alone."""


class EventPrinter(TrainerCallback):
    """Turns transformers' logs into sweeper metric events on stdout."""

    def on_log(self, args, state, control, logs=None, **kwargs):  # type: ignore[override]
        if logs and "loss" in logs:
            emit(
                MetricEvent(
                    step=state.global_step,
                    epoch=round(float(state.epoch or 0.0), 4),
                    split="train",
                    loss=float(logs["loss"]),
                    lr=float(logs["learning_rate"]) if "learning_rate" in logs else None,
                )
            )

    def on_evaluate(self, args, state, control, metrics=None, **kwargs):  # type: ignore[override]
        """Called once per eval dataset; its metric names carry the dataset's name.
        Macro-F1 and the per-class values (`compute_accuracy`) go into the event's
        `metrics`."""
        for split in ("valid", "test"):
            accuracy = (metrics or {}).get(f"eval_{split}_accuracy")
            if accuracy is not None:
                emit(
                    MetricEvent(
                        step=state.global_step,
                        epoch=round(float(state.epoch or 0.0), 4),
                        split=split,
                        loss=float(metrics[f"eval_{split}_loss"]),
                        accuracy=float(accuracy),
                        metrics=class_metrics(metrics, f"eval_{split}_") or None,
                    )
                )


def class_metrics(metrics: dict[str, float], prefix: str) -> dict[str, float]:
    """`macro_f1` and the per-class values among transformers' eval metrics of one split
    (`prefix`: `eval_valid_`)."""
    kinds = tuple(f"{kind}_class" for kind in CLASS_METRIC_KINDS)
    found = {}
    for key, value in metrics.items():
        name = key.removeprefix(prefix)
        if key.startswith(prefix) and (name == "macro_f1" or name.startswith(kinds)):
            found[name] = float(value)
    return found


class KeepBestAndLast(TrainerCallback):
    """After every save, leaves exactly the best and the newest checkpoint on disk."""

    def on_save(self, args, state, control, **kwargs):  # type: ignore[override]
        prune_checkpoints(Path(args.output_dir))


class FairseqRecipeTrainer(Trainer):
    """`Trainer` with fairseq's weight decay, minus a per-step cost sweeper never uses."""

    def get_decay_parameter_names(self, model: torch.nn.Module) -> list[str]:
        """Every parameter decays, as in fairseq's adam (transformers by default exempts
        biases and LayerNorm weights, which would make the recipes differ)."""
        return [name for name, _ in model.named_parameters()]

    def floating_point_ops(self, inputs: dict[str, Any]) -> int:
        """No FLOP estimate: it only feeds `total_flos`, which nothing here reads, and
        costs a walk over all parameters every update, a sizeable share of a small
        model's step."""
        return 0


def build_model(job: TrialJob) -> torch.nn.Module:
    """RoBERTa holding the trial's init weights, LoRA-wrapped when the method says so.

    The weights always come from the fairseq-format init checkpoint through the models
    package's conversion, never a fresh HF init or a hub download: an HF and a fairseq
    trial of one seed then start from the same point (docs/architecture.md, invariant 2). LoRA's A
    matrices are drawn right after reseeding with the init seed, so they depend on it alone.
    """
    from sweeper.models import apply_lora, hf_init_model

    model = hf_init_model(
        Path(job.init_checkpoint),
        dropout=float(job.train["dropout"]),
        attention_dropout=float(job.train["attention_dropout"]),
    )
    if model.config.num_labels != job.num_classes:
        raise ValueError(
            f"{job.init_checkpoint} has a {model.config.num_labels}-class head, "
            f"the job has {job.num_classes} classes"
        )
    if job.method == "full":
        return model
    if job.method != "lora" or not job.lora:
        raise ValueError(f"method {job.method!r} needs 'full', or 'lora' with lora settings")
    transformers.set_seed(job.seed_of(SEED_INIT))
    return apply_lora(model, job.lora)


def count_params(model: torch.nn.Module) -> tuple[int, int]:
    """(trainable, total); for LoRA, PEFT's own count, as `sweeper params` reports it."""
    if hasattr(model, "get_nb_trainable_parameters"):
        trainable, total = model.get_nb_trainable_parameters()
        return int(trainable), int(total)
    params = list(model.parameters())
    return sum(p.numel() for p in params if p.requires_grad), sum(p.numel() for p in params)


def emit(event: MetricEvent) -> None:
    print(format_event(event), flush=True)


def use_cuda(job: TrialJob) -> bool:
    return job.device.startswith("cuda") and torch.cuda.is_available()


def training_arguments(job: TrialJob) -> TrainingArguments:
    """fairseq's sentence_prediction recipe, spelled in TrainingArguments."""
    train = job.train
    betas = tuple(train["adam_betas"])
    cuda = use_cuda(job)
    return TrainingArguments(
        output_dir=str(job.checkpoint_dir),
        **seed_arguments(job),  # dropout: `seed`; data order: `data_seed` (hf_seeds)
        num_train_epochs=int(train["epochs"]),
        per_device_train_batch_size=int(train["batch_size"]),
        per_device_eval_batch_size=EVAL_BATCH_SIZE,
        learning_rate=float(train["lr"]),
        lr_scheduler_type="linear",  # fairseq polynomial_decay with power 1
        warmup_steps=warmup_updates(job.total_updates, float(train["warmup_ratio"])),
        optim="adamw_torch_fused",  # AdamW in one kernel, on CPU as on CUDA
        adam_beta1=float(betas[0]),
        adam_beta2=float(betas[1]),
        adam_epsilon=float(train["adam_eps"]),
        weight_decay=float(train["weight_decay"]),
        max_grad_norm=float(train["clip_norm"]),  # 0 disables clipping
        logging_strategy="steps",
        logging_steps=log_interval(job),
        logging_nan_inf_filter=False,  # a NaN loss must reach the runner, which stops the trial
        eval_strategy="epoch",
        save_strategy="epoch",
        save_total_limit=None,  # retention is KeepBestAndLast's (see prune_checkpoints)
        metric_for_best_model=f"eval_valid_{job.selected[0]}",  # the spec's select.metric
        greater_is_better=job.selected[1] == "max",  # compared strictly: ties keep the earliest
        load_best_model_at_end=False,  # the parent reads the best folder; no reload needed
        report_to="none",  # sweeper does its own tracking
        disable_tqdm=True,
        dataloader_num_workers=0,
        dataloader_pin_memory=cuda,
        use_cpu=not cuda,
        **precision_switches(train.get("precision", "fp32")),
        label_names=["labels"],
        remove_unused_columns=False,
        log_level="warning",
    )


def precision_switches(precision: str) -> dict[str, bool]:
    """transformers' own switches for `train.precision`: bf16 is autocast with fp32
    master weights (CPU or CUDA); fp16 is CUDA only (the spec refuses it on CPU, where
    TrainingArguments would too), so its mapping is tested here, not by a run."""
    return {"bf16": precision == "bf16", "fp16": precision == "fp16"}


def check_data(job: TrialJob, data: dict[str, TokenIdDataset], max_length: int) -> None:
    """Fail clearly when the prepared data disagrees with the job: a wrong count would
    silently change the number of updates and break the fairseq/HF comparison."""
    if len(data["train"]) != job.num_train:
        raise ValueError(
            f"job.num_train is {job.num_train} but train.jsonl has {len(data['train'])}"
        )
    for split, dataset in data.items():
        if dataset.max_length > max_length:
            raise ValueError(
                f"{split}.jsonl has a {dataset.max_length}-token sequence; the model takes "
                f"at most {max_length} (data preparation should have truncated it)"
            )


def prune_checkpoints(checkpoint_dir: Path) -> None:
    """Keep the best and the newest complete checkpoints; delete the rest, and strip
    the optimizer/scheduler/RNG files from the best when it is not the newest.

    transformers' `save_total_limit=2` is not enough: when the newest checkpoint is also
    the best it keeps the one before as well. Only the newest is ever resumed from, and
    the best is kept for its weights (it is what gets logged to MLflow, so it should not
    carry twice the model's size in Adam moments).
    """
    kept = find_checkpoints(checkpoint_dir)
    for path in complete_checkpoints(checkpoint_dir):
        if path not in (kept.best, kept.last):
            shutil.rmtree(path)
        elif path != kept.last:
            for name in TRAINING_STATE_FILES:
                (path / name).unlink(missing_ok=True)


def resume_point(checkpoint_dir: Path) -> Path | None:
    """The newest complete checkpoint, or None for a fresh start.

    Folders without a trainer state (the process was killed mid-save) are removed, and
    retention is re-applied (a kill may land between a save and its pruning), so that
    neither resuming nor the parent's `checkpoints()` trips over leftovers.
    """
    if not checkpoint_dir.is_dir():
        return None
    complete = set(complete_checkpoints(checkpoint_dir))
    for path in checkpoint_dir.glob(f"{CHECKPOINT_PREFIX}*"):
        if path.is_dir() and checkpoint_step(path) is not None and path not in complete:
            print(f"removing incomplete checkpoint {path} (no readable {STATE_FILE})", flush=True)
            shutil.rmtree(path)
    prune_checkpoints(checkpoint_dir)
    return find_checkpoints(checkpoint_dir).last


def build_trainer(
    job: TrialJob, model: torch.nn.Module, data: dict[str, TokenIdDataset]
) -> Trainer:
    """The `Trainer` of the job; its training split records the order it is read in
    (`hf_seeds.watch`)."""
    train, seeds = watch(job, data["train"])
    trainer = FairseqRecipeTrainer(
        model=model,
        args=training_arguments(job),
        train_dataset=train,
        eval_dataset={"valid": data["valid"], "test": data["test"]},
        data_collator=PadCollator(PAD_ID),
        compute_metrics=compute_accuracy,
        preprocess_logits_for_metrics=argmax_logits,
        callbacks=[EventPrinter(), KeepBestAndLast(), seeds],
    )
    trainer.remove_callback(PrinterCallback)  # its raw log dicts duplicate our events
    return trainer


def write_params(job: TrialJob, counts: tuple[int, int]) -> None:
    trainable, total = counts
    write_param_counts(Path(job.out_dir), trainable, total)
    print(f"params: trainable {trainable:,} of {total:,} ({100 * trainable / total:.2f}%)")


def run(job: TrialJob, notice: Notice) -> dict[str, Any]:
    """Train (or finish training) one trial; returns transformers' train metrics, or
    raises `Preempted` when the notice stopped it (its checkpoint saved)."""
    torch.set_num_threads(max(1, job.threads))
    transformers.logging.set_verbosity_warning()
    transformers.utils.logging.disable_progress_bar()  # "Writing model shards" bars
    transformers.set_seed(job.seed_of(SEED_DROPOUT))
    data = read_splits(Path(job.data))
    model = build_model(job)
    check_data(job, data, model.config.max_position_embeddings - PAD_ID - 1)
    write_params(job, count_params(model))
    trainer = build_trainer(job, model, data)
    stop = StopOnNotice(notice, job.updates_per_epoch)
    trainer.add_callback(stop)
    resume = resume_point(job.checkpoint_dir)
    print(
        f"hf trial: {job.num_train} train sentences, {job.total_updates} updates, "
        f"warmup {trainer.args.warmup_steps}, device {trainer.args.device}, "
        f"resume from {resume or 'scratch'}",
        flush=True,
    )
    output = train_or_stop(trainer, resume, stop, job.total_updates)
    if trainer.state.global_step != job.total_updates:
        raise RuntimeError(
            f"trained {trainer.state.global_step} updates, expected {job.total_updates}"
        )
    return output.metrics


def main(argv: list[str] | None = None) -> int:
    notice = Notice().install()
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m sweeper.trainers.hf.hf_main OUT_DIR/trial.json", file=sys.stderr)
        return 2
    job = TrialJob.load(Path(args[0]))
    if use_cuda(job):
        print("hf trial on cuda", flush=True)  # the log says where it ran, as lm_main's does
    try:
        metrics = run(job, notice)
    except Preempted as stopped:
        return notice.preempted(stopped.step)
    print(f"hf trial done: {json.dumps(metrics, sort_keys=True)}", flush=True)
    write_predictions(job)  # the trial folder's predictions files (hf_predict)
    return 0


if __name__ == "__main__":
    exit_now(main())  # skips the interpreter's slow teardown at every trial (sweeper.quick_exit)
