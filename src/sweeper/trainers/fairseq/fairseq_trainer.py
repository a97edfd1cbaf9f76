"""The fairseq trainer: one trial is one `fairseq-train --task sentence_prediction` run.

The parent side lives here: `FairseqTrainer` (run by `runner.run_trainer`) builds the
command line from the lab's recipe and turns fairseq's JSON log lines into metric
events. The child is `python -m sweeper.trainers.fairseq.fairseq_main ARGS`: fairseq-train
itself, with the fixes this stack needs (see that module).

Loss units: fairseq's sentence_prediction criterion logs cross-entropy in bits (it
divides by ln 2); events carry nats (× ln 2), the unit of HF's loss. Accuracy and
macro-F1 are computed here from the counts the child logs (`ACCURACY_COUNTS`,
`CLASS_COUNT_KINDS`) with `sweeper.trainers.metrics`, the functions HF's trials and
`--evaluate` use: never read from fairseq's display values, shortened for the log.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from sweeper.record_names import SEED_DATA_ORDER
from sweeper.trainers.base import (
    EVAL_BATCH_SIZE,
    Checkpoints,
    TrialJob,
    log_interval,
    read_param_counts,
    warmup_updates,
)
from sweeper.trainers.events import MetricEvent
from sweeper.trainers.fairseq.fairseq_checkpoints import BEST, LAST, allow_fairseq_checkpoints
from sweeper.trainers.metrics import ClassCounts, accuracy_percent, classification_metrics
from sweeper.trainers.predictions import Measured
from sweeper.trainers.runner import python_module_command

CHILD_MODULE = "sweeper.trainers.fairseq.fairseq_main"
LN2 = math.log(2)
EVAL_SPLITS = ("valid", "test")
"""`--valid-subset valid,test`: fairseq tracks the best checkpoint on the first only."""
_LOG_LINE = re.compile(
    r"^(?:.* \| )?INFO(?: \| |:)(?P<tag>train_inner|valid|test)(?: \| |:)(?P<json>\{.*\})\s*$"
)
"""A progress line of fairseq's JSON log format, for the tags that carry metrics."""
ACCURACY_COUNTS = ("correct", "total")
"""Names of the sum meters the child logs for sentence_prediction (`fairseq_main.
exact_accuracy`): correct predictions and examples of the subset; a valid or test log
line carries them as `valid_correct`, `valid_total` (`test_...`)."""
CLASS_COUNT_KINDS = ("tp", "fp", "fn")
"""Per-class sum meters the child logs at validation and test (`fairseq_main.class_counts`):
`tp_c<c>`, `fp_c<c>`, `fn_c<c>` for every class c of the head; a valid line carries
them as `valid_tp_c0`, ...; macro-F1 and the per-class values are computed here from them."""


def class_count_key(kind: str, c: int) -> str:
    """`tp_c2`: the sum meter of one count of class `c`."""
    return f"{kind}_c{c}"


def counts_from(stats: Mapping[str, Any], prefix: str = "") -> ClassCounts | None:
    """The per-class counts in a log line's stats (`prefix`: `valid_`, `test_`), classes
    0, 1, ... while all three counts are present; None when there are none."""
    rows: list[list[int]] = [[], [], []]
    while all(prefix + class_count_key(k, len(rows[0])) in stats for k in CLASS_COUNT_KINDS):
        c = len(rows[0])
        for row, kind in zip(rows, CLASS_COUNT_KINDS, strict=True):
            row.append(int(stats[prefix + class_count_key(kind, c)]))
    return ClassCounts.from_rows(*rows) if rows[0] else None


COUNTED_PREFIXES = ("encoder.sentence_encoder.", "classification_heads.")
"""Parameters the classifier uses; the unused LM head is left out, as HF has none."""


def arch_flags(arch: Mapping[str, Any]) -> list[str]:
    """fairseq-train flags building `arch` (an `ArchConfig` dump), via sweeper.models so
    the trainer, parameter counts and weight conversion share one definition."""
    from sweeper.models.arch import fairseq_arch_args
    from sweeper.spec.model_block import ArchConfig

    return fairseq_arch_args(ArchConfig.model_validate(dict(arch)))


def device_flags(device: str, precision: str = "fp32") -> list[str]:
    """`--cpu` unless CUDA (one process per trial: Ray gives it its device), then the
    trial's precision (`train.precision`): fp32 by default, as HF's trials, so both
    frameworks compute alike. fairseq's `--bf16`/`--fp16` cast the model and keep fp32
    master weights in its FP16Optimizer, as transformers' mixed precision does."""
    flags = ["--distributed-world-size", "1"] if device.startswith("cuda") else ["--cpu"]
    return flags + ({"fp16": ["--fp16"], "bf16": ["--bf16"]}.get(precision, []))


def train_args(job: TrialJob) -> list[str]:
    """fairseq-train's arguments for the job: the lab's sentence_prediction recipe.

    TrainConfig.lr_scheduler "polynomial" and "linear" both map to polynomial_decay with
    fairseq's default power 1 and end lr 0, which *is* linear warmup then linear decay
    (HF's "linear" schedule). `--finetune-from-model` is always passed: fairseq uses it
    only when save_dir has no checkpoint_last.pt, and resumes from that file otherwise.
    `--seed` is the job's data-order seed (`fairseq_seeds`: the child seeds dropout
    from the job's own).
    """
    if job.method != "full":
        raise ValueError(f"the fairseq trainer does full fine-tuning only, not {job.method!r}")
    train = job.train
    total = job.total_updates
    beta1, beta2 = (float(b) for b in train["adam_betas"])
    return [
        job.data,
        "--task", "sentence_prediction",
        *arch_flags(job.arch),
        "--num-classes", str(job.num_classes),
        "--init-token", "0", "--separator-token", "2",
        "--shorten-method", "truncate",  # inputs longer than max_positions are cut
        "--criterion", "sentence_prediction",
        "--optimizer", "adam", "--adam-betas", f"({beta1}, {beta2})",
        "--adam-eps", str(train["adam_eps"]),
        "--weight-decay", str(train["weight_decay"]),
        "--clip-norm", str(train["clip_norm"]),
        "--lr", str(train["lr"]),
        "--lr-scheduler", "polynomial_decay",
        "--warmup-updates", str(warmup_updates(total, float(train["warmup_ratio"]))),
        "--total-num-update", str(total),
        "--max-update", str(total),
        "--max-epoch", str(train["epochs"]),
        "--batch-size", str(train["batch_size"]),
        "--batch-size-valid", str(EVAL_BATCH_SIZE),
        "--required-batch-size-multiple", "1",  # exactly batch_size sentences per update
        "--dropout", str(train["dropout"]),
        "--attention-dropout", str(train["attention_dropout"]),
        "--seed", str(job.seed_of(SEED_DATA_ORDER)),  # dropout: fairseq_main's fix 11
        "--valid-subset", ",".join(EVAL_SPLITS),
        *best_checkpoint_flags(job),
        "--no-epoch-checkpoints",  # only checkpoint_best.pt and checkpoint_last.pt
        "--save-dir", str(job.checkpoint_dir),
        "--finetune-from-model", job.init_checkpoint,
        "--log-format", "json", "--log-interval", str(log_interval(job)),
        "--num-workers", "0",
        *device_flags(job.device, str(train.get("precision", "fp32"))),
    ]  # fmt: skip


def best_checkpoint_flags(job: TrialJob) -> list[str]:
    """`--best-checkpoint-metric` for the job's selection (`TrialJob.selected`: accuracy,
    macro_f1 or loss, derived from counts or logged by the criterion), maximized unless
    the selection minimizes, so checkpoint_best.pt is the summary's best checkpoint."""
    metric, mode = job.selected
    flags = ["--best-checkpoint-metric", metric]
    return flags + (["--maximize-best-checkpoint-metric"] if mode == "max" else [])


class FairseqTrainer:
    """Runs a trial with fairseq-train in a child process (see the module docstring)."""

    name = "fairseq"

    def command(self, job: TrialJob) -> list[str]:
        return python_module_command(CHILD_MODULE, *train_args(job))

    def parse_line(self, line: str, wall_time: float) -> list[MetricEvent]:
        return parse_log_line(line, wall_time)

    def checkpoints(self, job: TrialJob) -> Checkpoints:
        best, last = job.checkpoint_dir / BEST, job.checkpoint_dir / LAST
        return Checkpoints(best if best.is_file() else None, last if last.is_file() else None)

    def trainable_params(self, job: TrialJob) -> tuple[int, int] | None:
        """Full fine-tuning trains every parameter the classifier uses: (n, n), as the
        child wrote them (`fairseq_main.write_counts`); counted from the checkpoint for
        a trial folder whose child did not write them (an older sweeper's)."""
        written = read_param_counts(Path(job.out_dir))
        if written is not None:
            return written
        found = self.checkpoints(job)
        path = found.last or found.best
        if path is None:
            return None
        count = count_parameters(path)
        return count, count

    def reload_inputs(self, job: TrialJob) -> list[str]:
        return [job.data]

    def remeasure(self, job: TrialJob, checkpoint: Path, split: str, step: int) -> Measured:
        """A best checkpoint (a folder holding checkpoint_best.pt) classifying `split`."""
        from sweeper.trainers.reload import fairseq_predict

        return fairseq_predict(job, checkpoint, step, (split,))[split]


def parse_log_line(line: str, wall_time: float) -> list[MetricEvent]:
    """Events in one fairseq log line: `DATE TIME | INFO | TAG | {json}` (or Python's
    default `INFO:TAG:{json}`, should another module configure logging first).

    `train_inner` lines (every --log-interval updates) give train loss and lr; `valid`
    and `test` lines (every validation point) give loss and accuracy, their keys
    prefixed with the subset name. Epoch-average `train` lines are skipped: their step
    would clash with the train_inner event of the same update.

    The accuracy is `accuracy_percent(correct, total)` of the line's counts
    (`ACCURACY_COUNTS`), and macro-F1 and the per-class values (`metrics`) come from
    its per-class counts (`CLASS_COUNT_KINDS`): bit for bit the values fairseq chose
    its best checkpoint on and the ones HF or `--evaluate` compute for the same counts.
    fairseq's own `accuracy` and `macro_f1` fields are never recorded (the log shows six
    significant digits): a line without counts (masked_lm, which measures no accuracy)
    has none.
    """
    match = _LOG_LINE.match(line)
    if match is None:
        return []
    tag, payload = match.group("tag"), match.group("json")
    try:
        stats = json.loads(payload)
    except json.JSONDecodeError:
        return []
    if tag == "train_inner":
        return [
            MetricEvent(
                step=int(stats["num_updates"]),
                epoch=float(stats.get("update", stats["epoch"])),
                split="train",
                loss=float(stats["loss"]) * LN2,
                lr=float(stats["lr"]),
                wall_time=wall_time,
            )
        ]
    return [
        MetricEvent(
            step=int(stats[f"{tag}_num_updates"]),
            epoch=float(stats["epoch"]),
            split=tag,  # type: ignore[arg-type]
            loss=float(stats[f"{tag}_loss"]) * LN2,
            accuracy=_counted_accuracy(stats, tag),
            wall_time=wall_time,
            metrics=_class_metrics(stats, tag),
        )
    ]


def _class_metrics(stats: Mapping[str, Any], tag: str) -> dict[str, float] | None:
    """Macro-F1 and per-class values from the line's per-class counts
    (`metrics.classification_metrics`), or None when it has none; fairseq's own
    `macro_f1` display value is never read."""
    counts = counts_from(stats, f"{tag}_")
    return classification_metrics(counts) if counts is not None and counts.present() else None


def _counted_accuracy(stats: Mapping[str, Any], tag: str) -> float | None:
    """Accuracy from the line's counts (logged as strings of whole numbers), or None
    when it has none."""
    correct, total = (stats.get(f"{tag}_{name}") for name in ACCURACY_COUNTS)
    if correct is None or total is None:
        return None
    return accuracy_percent(int(correct), int(total))


def count_parameters(checkpoint: Path) -> int:
    """Parameters of the classifier in a fairseq checkpoint: encoder and heads, without
    buffers such as `version`. The same count as HF's RobertaForSequenceClassification
    less its token-type row (fairseq has none)."""
    import torch

    allow_fairseq_checkpoints()
    state = torch.load(checkpoint, map_location="cpu", mmap=True)["model"]
    return sum(
        tensor.numel()
        for key, tensor in state.items()
        if key.startswith(COUNTED_PREFIXES) and not key.endswith(".version")
    )
