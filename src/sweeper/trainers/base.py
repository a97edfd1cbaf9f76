"""What a trainer is: a command line for one trial, and a parser of its output.

A trainer never runs in the caller's process. fairseq keeps process-global state (best
score, early-stop counters), and a crashed or killed trial must not take the Ray worker
or the driver with it; a subprocess gives both isolation and a clean kill.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

from sweeper import record_names
from sweeper.trainers.events import MetricEvent
from sweeper.trainers.predictions import Measured

EVAL_BATCH_SIZE = 64
"""Validation and test batch of every trainer and of `--evaluate`'s reload: accuracy does
not depend on it (no batch-dependent layers at eval), speed does, so it is one number."""

DEFAULT_LOG_INTERVAL = 25
"""Updates between train-loss events unless `job.extra["log_interval"]` says otherwise."""

PARAMS_FILE = "params.json"
"""A trial folder's parameter counts, written by the trainer subprocess that built the
model: the parent then reads two numbers instead of importing torch to count them,
which is slow in a Ray worker that has no torch loaded."""


def write_param_counts(out_dir: Path, trainable: int, total: int) -> None:
    path = Path(out_dir) / PARAMS_FILE
    path.write_text(json.dumps({"trainable": trainable, "total": total}) + "\n", encoding="utf-8")


def read_param_counts(out_dir: Path) -> tuple[int, int] | None:
    """(trainable, total) as the trainer wrote them, or None if it did not (yet)."""
    path = Path(out_dir) / PARAMS_FILE
    if not path.is_file():
        return None
    counts = json.loads(path.read_text(encoding="utf-8"))
    return int(counts["trainable"]), int(counts["total"])


@dataclass(frozen=True)
class TrialJob:
    """Everything a trainer needs for one trial, serialisable for its subprocess."""

    framework: str
    seed: int
    init: str
    method: str
    train: dict[str, Any]
    """Resolved `TrainConfig` fields (see sweeper.spec.train_block.TrainConfig)."""
    lora: dict[str, Any] | None
    """Resolved `LoraConfig` fields when method is `lora`."""
    arch: dict[str, Any]
    """`ArchConfig` fields with vocab_size filled in."""
    num_classes: int
    num_train: int
    """Training sentences: total updates = ceil(num_train / batch_size) × epochs."""
    data: str
    """The prepared folder its backend reads (`sweeper.backends.Backend.data`: a
    classification job's fairseq folder with input0/ and label/, or its HF folder with
    {train,valid,test}.jsonl of the same ids; a causal-LM job's prompt/answer folder)."""
    init_checkpoint: str
    """The weights the trial starts from: a classification job's fairseq-format
    checkpoint, the one both frameworks start from (see sweeper.models.init); a
    causal-LM job's decoder folder."""
    out_dir: str
    task: str = record_names.TASK_CLASSIFICATION
    """The spec's `task`: with `framework`, the backend that runs the job."""
    threads: int = 1
    device: str = "cpu"
    extra: dict[str, Any] = field(default_factory=dict)
    seeds: dict[str, int] = field(default_factory=dict)
    """The seed of each source of the trial's randomness (`record_names.SEED_SOURCES`:
    `init`, `data_order`, `dropout`; `sweeper.trial_keys.Trial.seeds`). Empty in a job
    saved before sources existed: every source is `seed` (`seed_of`)."""

    def seed_of(self, source: str) -> int:
        """The seed that drives one source: `init` (the starting weights, drawn before
        the job is built, and LoRA's adapters), `data_order` (the training sampler),
        `dropout` (the trainer's RNG during updates)."""
        if source not in record_names.SEED_SOURCES:
            raise ValueError(f"unknown seed source {source!r}: {record_names.SEED_SOURCES}")
        return int(self.seeds.get(source, self.seed))

    @property
    def updates_per_epoch(self) -> int:
        return -(-self.num_train // int(self.train["batch_size"]))

    @property
    def total_updates(self) -> int:
        return self.updates_per_epoch * int(self.train["epochs"])

    @property
    def selected(self) -> tuple[str, str]:
        """(validation metric as metric events name it, "max" or "min"): what the
        trainer keeps its best checkpoint by, so the stored checkpoint is the one the
        summary's selection (the spec's `select:`, in `extra["select"]`) points at.
        Without it, classification's highest accuracy."""
        from sweeper.selection import base_name

        select = self.extra.get("select") or {}
        metric = str(select.get("metric", record_names.METRIC_VALID_ACC))
        return base_name(metric), str(select.get("mode", "max"))

    @property
    def checkpoint_dir(self) -> Path:
        return Path(self.out_dir) / record_names.CHECKPOINT_DIR

    def save(self, path: Path) -> None:
        path.write_text(json.dumps(asdict(self), indent=2, sort_keys=True), encoding="utf-8")

    @classmethod
    def load(cls, path: Path) -> TrialJob:
        """A saved job, also one saved before jobs carried one data folder and their
        task (a stored `trial.json` that `summarize --evaluate` reloads): see
        `upgrade_fields`."""
        return cls(**upgrade_fields(json.loads(path.read_text(encoding="utf-8"))))


def upgrade_fields(raw: dict[str, Any]) -> dict[str, Any]:
    """The fields of a job saved in the older layout, as this `TrialJob` names them.
    That layout held every prepared folder of the sweep, `fairseq_data` and `hf_data`,
    and a causal-LM job said its task in `extra["task"]` (its one folder in both
    fields); the folder a job reads is `<format>_data` of its backend's data format
    (`sweeper.backends.Backend.data`), the only folder when both fields agree."""
    if "data" in raw:
        return raw
    from sweeper import backends

    raw = dict(raw)
    extra = dict(raw.get("extra") or {})
    task = str(extra.pop("task", record_names.TASK_CLASSIFICATION))
    folders = {key: raw.pop(key) for key in ("fairseq_data", "hf_data") if key in raw}
    if len(set(folders.values())) == 1:
        data = next(iter(folders.values()))
    else:
        data = folders[f"{backends.get(str(raw['framework']), task).data}_data"]
    return {**raw, "task": task, "data": data, "extra": extra}


def warmup_updates(total_updates: int, warmup_ratio: float) -> int:
    """Warmup length in updates: round-half-up of ratio × total, as the fairseq side.

    Spelled out (not Python's banker's `round`) so 22.5 → 23 on both frameworks.
    """
    return int(warmup_ratio * total_updates + 0.5)


def log_interval(job: TrialJob) -> int:
    """Updates between train events (at least 1)."""
    return max(1, int(job.extra.get("log_interval", DEFAULT_LOG_INTERVAL)))


@dataclass(frozen=True)
class Checkpoints:
    """Where a finished trial's checkpoints are; only these two are kept."""

    best: Path | None
    last: Path | None


class Trainer(Protocol):
    """One backend's way to run a trial (`sweeper.backends` names each backend's class:
    `trainers/fairseq/fairseq_trainer.py`, `trainers/hf/hf_trainer.py`,
    `trainers/hf/lm_trial.py`)."""

    name: str

    def command(self, job: TrialJob) -> list[str]:
        """The subprocess command line for the job (it resumes if checkpoints exist).
        The process answers SIGTERM as `sweeper.trainers.notice` says (a checkpoint
        at its current step, then exit `PREEMPTED_EXIT`); one that dies of the
        runner's notice counts as preempted without a new checkpoint (step None)."""
        ...

    def parse_line(self, line: str, wall_time: float) -> list[MetricEvent]:
        """Metric events found in one line of the subprocess's output (often none)."""
        ...

    def checkpoints(self, job: TrialJob) -> Checkpoints:
        """The best and last checkpoints after the subprocess ends."""
        ...

    def trainable_params(self, job: TrialJob) -> tuple[int, int] | None:
        """(trainable, total) parameter counts, when the trainer can tell."""
        ...

    def reload_inputs(self, job: TrialJob) -> list[str]:
        """Paths that must exist on this machine for `remeasure` to reload the trial's
        checkpoint and predict its splits (prepared data, init weights)."""
        ...

    def remeasure(self, job: TrialJob, checkpoint: Path, split: str, step: int) -> Measured:
        """A stored checkpoint reloaded from `checkpoint`, the folder its artifact was
        downloaded to, and measured on `split` (`sweeper summarize --evaluate`): its
        per-example predictions (labelled `step`, the checkpoint's) and every metric
        the backend reports, counted from them under event names (`accuracy`,
        `macro_f1`, a causal LM's `exact_match`, `perplexity`, ...)."""
        ...
