"""The causal-LM trial process: `python -m sweeper.trainers.hf.lm_main OUT_DIR/trial.json`.

The HF trainer's child for `task: causal_lm` (the parent side is
`sweeper.trainers.hf.hf_trainer.HFTrainer`, which picks this module by the job's task). It
fine-tunes the trial's starting decoder (a folder: `sweeper.models.llama`) on
prompt -> answer pairs with `transformers.Trainer`, fully or through LoRA adapters, on
the answer tokens' loss (`sweeper.trainers.hf.lm_data`), with the classifier's recipe and
checkpoint handling (`sweeper.trainers.hf.hf_main`: AdamW, linear warmup and decay, one
save per epoch, best + last kept, resume from the newest). At every epoch end valid and
test are measured (loss, perplexity, exact match of greedy answers) and sent as metric
events; the best checkpoint is the one with the best `job.extra["select"]` metric.
SIGTERM (a preemption notice) is answered as the classifier's child answers it
(`sweeper.trainers.hf.hf_notice`): a checkpoint at the current step, then exit
`preemption.PREEMPTED_EXIT`. Its seeds drive what the classifier's do, and it records
them alike (`sweeper.trainers.hf.hf_seeds`). A finished run ends by writing the trial
folder's predictions files (`sweeper.trainers.hf.hf_predict`: each answer as text, its
probability and exact match).

`python -m sweeper.trainers.hf.lm_main --pretrain SETTINGS.json` is the pretraining stage
of a `model.arch` decoder (`sweeper.trainers.hf.lm_pretrain` runs it): next-token loss on
the unlabeled corpus from the seed's random weights, saved with `save_pretrained`.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import torch
import transformers
from transformers import PrinterCallback, TrainerCallback

from sweeper.models.llama import BOS_ID, EOS_ID, apply_lm_lora, load_lm
from sweeper.quick_exit import exit_now
from sweeper.record_names import SEED_DROPOUT, SEED_INIT
from sweeper.trainers.base import TrialJob
from sweeper.trainers.events import MetricEvent
from sweeper.trainers.hf.hf_main import (
    EventPrinter,
    FairseqRecipeTrainer,
    KeepBestAndLast,
    count_params,
    emit,
    resume_point,
    training_arguments,
    use_cuda,
    write_params,
)
from sweeper.trainers.hf.hf_notice import Preempted, StopOnNotice, train_or_stop
from sweeper.trainers.hf.hf_predict import write_predictions
from sweeper.trainers.hf.hf_seeds import watch
from sweeper.trainers.hf.lm_data import AnswerDataset, collate, measure
from sweeper.trainers.notice import Notice


class AnswerTrainer(FairseqRecipeTrainer):
    """`Trainer` whose evaluation is `lm_data.measure` on valid and test, sent as events."""

    def __init__(self, *args: Any, splits: dict[str, AnswerDataset], **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.splits = splits

    def evaluate(self, eval_dataset=None, ignore_keys=None, metric_key_prefix="eval"):  # type: ignore[override]
        metrics: dict[str, float] = {}
        device = str(self.args.device)
        for split, dataset in self.splits.items():
            measured = measure(self.model, dataset, device)
            emit(
                MetricEvent(
                    step=self.state.global_step,
                    epoch=round(float(self.state.epoch or 0.0), 4),
                    split=split,  # type: ignore[arg-type]
                    loss=measured.pop("loss"),
                    metrics=measured,
                )
            )
            metrics.update({f"eval_{split}_{k}": v for k, v in measured.items()})
        return metrics


def build_model(job: TrialJob) -> torch.nn.Module:
    """The trial's starting decoder, LoRA-wrapped (A matrices drawn after reseeding with
    the init seed)."""
    model = load_lm(Path(job.init_checkpoint), dropout=float(job.train["attention_dropout"]))
    if job.method == "full":
        return model
    if job.method != "lora" or not job.lora:
        raise ValueError(f"method {job.method!r} needs 'full', or 'lora' with lora settings")
    transformers.set_seed(job.seed_of(SEED_INIT))
    return apply_lm_lora(model, job.lora)


def run(job: TrialJob, notice: Notice) -> dict[str, Any]:
    """Train (or finish training) one trial; returns transformers' train metrics, or
    raises `Preempted` when the notice stopped it (its checkpoint saved)."""
    torch.set_num_threads(max(1, job.threads))
    transformers.logging.set_verbosity_warning()
    transformers.utils.logging.disable_progress_bar()
    transformers.set_seed(job.seed_of(SEED_DROPOUT))
    data = Path(job.data)
    splits = {s: AnswerDataset.read(data / f"{s}.jsonl") for s in ("train", "valid", "test")}
    if len(splits["train"]) != job.num_train:
        raise ValueError(
            f"job.num_train is {job.num_train}, train.jsonl has {len(splits['train'])}"
        )
    model = build_model(job)
    write_params(job, count_params(model))
    select = job.extra["select"]
    stop = StopOnNotice(notice, job.updates_per_epoch)
    args = training_arguments(job)
    args.metric_for_best_model = f"eval_{select['metric']}"
    args.greater_is_better = select["mode"] == "max"
    train, seeds = watch(job, splits["train"])  # seeds.json (hf_seeds)
    trainer = AnswerTrainer(
        model=model,
        args=args,
        train_dataset=train,
        eval_dataset={"valid": splits["valid"], "test": splits["test"]},  # see evaluate
        data_collator=collate,
        callbacks=[EventPrinter(), KeepBestAndLast(), stop, seeds],
        splits={"valid": splits["valid"], "test": splits["test"]},
    )
    trainer.remove_callback(PrinterCallback)
    resume = resume_point(job.checkpoint_dir)
    print(f"lm trial: {job.total_updates} updates, resume from {resume or 'scratch'}", flush=True)
    output = train_or_stop(trainer, resume, stop, job.total_updates)
    if trainer.state.global_step != job.total_updates:
        raise RuntimeError(
            f"trained {trainer.state.global_step} updates, expected {job.total_updates}"
        )
    return output.metrics


class PretrainProgress(TrainerCallback):
    """Prints `pretrain step N/STEPS loss L` at each log point of a pretraining child
    (`lm_pretrain.run_pretrain_child` relays these lines as the stage's progress)."""

    def on_log(self, args, state, control, logs=None, **kwargs):  # type: ignore[override]
        if logs and "loss" in logs:
            print(
                f"  pretrain step {state.global_step}/{state.max_steps} loss {logs['loss']:.3f}",
                flush=True,
            )


def pretrain(settings: dict[str, Any]) -> None:
    """Next-token pretraining of `settings["init"]` on `settings["corpus"]` ids, saved to
    `settings["out"]` (the parent publishes it into the cache)."""
    from transformers import Trainer, TrainingArguments

    from sweeper.data.lm_task import read_jsonl

    torch.set_num_threads(max(1, int(settings["threads"])))
    transformers.set_seed(int(settings["seed"]))
    limit = int(settings["max_tokens"])
    rows = [
        {"input_ids": [BOS_ID, *r["ids"][: limit - 2], EOS_ID]}
        for r in read_jsonl(Path(settings["corpus"]))
    ]
    for row in rows:
        row["labels"] = list(row["input_ids"])
    model = load_lm(Path(settings["init"]))
    args = TrainingArguments(
        output_dir=str(Path(settings["out"]) / "work"),
        max_steps=int(settings["steps"]),
        per_device_train_batch_size=int(settings["batch_size"]),
        learning_rate=float(settings["lr"]),
        warmup_steps=int(settings["warmup_steps"]),
        lr_scheduler_type="linear",
        weight_decay=0.01,
        logging_steps=max(1, int(settings["steps"]) // 20),
        save_strategy="no",
        report_to="none",
        disable_tqdm=True,
        use_cpu=not torch.cuda.is_available(),
        seed=int(settings["seed"]),
        remove_unused_columns=False,
    )
    trainer = Trainer(model=model, args=args, train_dataset=rows, data_collator=collate)
    trainer.remove_callback(PrinterCallback)
    trainer.add_callback(PretrainProgress())
    trainer.train()
    model.save_pretrained(settings["out"])


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) == 2 and args[0] == "--pretrain":
        pretrain(json.loads(Path(args[1]).read_text(encoding="utf-8")))
        return 0
    notice = Notice().install()
    if len(args) != 1:
        print("usage: python -m sweeper.trainers.hf.lm_main OUT_DIR/trial.json", file=sys.stderr)
        return 2
    job = TrialJob.load(Path(args[0]))
    if use_cuda(job):
        print("lm trial on cuda", flush=True)
    try:
        metrics = run(job, notice)
    except Preempted as stopped:
        return notice.preempted(stopped.step)
    print(f"lm trial done: {json.dumps(metrics, sort_keys=True)}", flush=True)
    write_predictions(job)  # the trial folder's predictions files (hf_predict)
    return 0


if __name__ == "__main__":
    exit_now(main())  # skips the interpreter's slow teardown at every trial (sweeper.quick_exit)
