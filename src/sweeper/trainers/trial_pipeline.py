"""One trial end to end: shared inputs → shared initial weights → the framework's trainer.

`sweeper trial` calls this directly; the sweep engine's Ray trial calls the very same
functions, so a trial behaves identically with or without Ray. Work shared by all
trials of a sweep (data preparation, pretraining) is cached by content hash, so it is
done once however many trials ask for it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sweeper.record_names import METRIC_VALID_ACC, TASK_CAUSAL_LM
from sweeper.spec.schema import SweepSpec
from sweeper.trainers.base import Trainer, TrialJob
from sweeper.trainers.devices import detect_device
from sweeper.trainers.events import MetricEvent
from sweeper.trainers.registry import get_trainer
from sweeper.trainers.runner import TrialResult, run_trainer
from sweeper.trial_keys import Trial

Log = Callable[[str], None]


@dataclass(frozen=True)
class SweepInputs:
    """What every trial of a sweep reads: prepared data and the pretrained checkpoint."""

    fairseq_data: Path
    hf_data: Path
    vocab_size: int
    num_classes: int
    """Classes the data's labels have (a trial's head has `train.num_classes`, at least
    these)."""
    num_train: int
    pretrained: Path | None
    """fairseq checkpoint of the `pretrained` init; None when the grid has no such init."""


def prepare_inputs(spec: SweepSpec, log: Log = print, need_pretrained: bool = True) -> SweepInputs:
    """Prepare data and (if asked) the pretrained checkpoint; both cached across calls."""
    if spec.task == TASK_CAUSAL_LM:
        from sweeper.trainers.hf.lm_trial import prepare_lm_inputs

        data, pretrained = prepare_lm_inputs(spec, log, need_pretrained)
        return SweepInputs(data.dir, data.dir, data.vocab_size, 0, data.num_train, pretrained)
    from sweeper.data import prepare

    prepared = prepare(spec, log=log)
    check_classes(spec, prepared.labels)
    pretrained: Path | None = None
    if need_pretrained and "pretrained" in spec.grid.init:
        if spec.model.checkpoint is not None:
            pretrained = pretrained_file(spec, prepared.vocab_size, prepared.dictionary, log)
        else:
            from sweeper.trainers.fairseq.fairseq_pretrain import pretrain

            pretrained = pretrain(spec, prepared, log=log)
    return SweepInputs(
        fairseq_data=Path(prepared.fairseq_dir),
        hf_data=Path(prepared.hf_dir),
        vocab_size=prepared.vocab_size,
        num_classes=prepared.num_classes,
        num_train=prepared.num_train,
        pretrained=pretrained,
    )


def pretrained_file(spec: SweepSpec, vocab_size: int, dictionary: Path, log: Log = print) -> Path:
    """`model.checkpoint` as the fairseq file trials start from: itself, or an HF model
    folder converted once into `output_dir/pretrained/hf-<hash>/model.pt` after the
    checks preflight could not make yet (the vocabulary of a generated or trained
    dictionary: `dictionary`, the prepared data's copy)."""
    from sweeper.data.errors import DataError
    from sweeper.data.vocab import fairseq_ids
    from sweeper.models.hf_import import folder_problems, import_checkpoint, is_hf_folder

    folder = spec.model.checkpoint
    assert folder is not None
    if not is_hf_folder(folder):
        return folder
    problems = folder_problems(
        folder, spec.model.arch, vocab_size, dictionary, fairseq_ids(dictionary)
    )
    if problems:
        raise DataError("not usable as the pretrained model: " + "; ".join(problems), folder)
    converted = import_checkpoint(folder, spec.output_dir / "pretrained")
    log(f"pretrained checkpoint: HF folder {folder}, converted to {converted}")
    return converted


def check_classes(spec: SweepSpec, labels: tuple[str, ...]) -> None:
    """`train.num_classes` sizes every trial's classifier head, so it must hold every
    label the data has (more is allowed: a label absent from these splits). Checked
    once, before pretraining and before any run exists."""
    from sweeper.data.errors import DataError

    asked = [spec.train.num_classes, *spec.grid.params.get("train.num_classes", [])]
    if min(int(n) for n in asked) < len(labels):
        raise DataError(
            f"train.num_classes is {min(asked)}, but the labels have {len(labels)} classes "
            f"({', '.join(labels)}): set train.num_classes to at least {len(labels)}"
        )


def build_job(
    spec: SweepSpec, trial: Trial, inputs: SweepInputs, out_dir: Path, threads: int = 1
) -> TrialJob:
    """Resolve a trial into the job its trainer runs, creating its initial weights."""
    if spec.task == TASK_CAUSAL_LM:
        from sweeper.data.lm_task import LMData
        from sweeper.trainers.hf.lm_trial import build_lm_job

        data = LMData.load(inputs.hf_data)
        return build_lm_job(spec, trial, data, inputs.pretrained, out_dir, threads, detect_device())
    from sweeper.models.init import init_checkpoint

    arch = spec.model.arch.model_copy(update={"vocab_size": inputs.vocab_size})
    init = init_checkpoint(
        arch=arch,
        vocab_size=inputs.vocab_size,
        num_classes=int(trial.train["num_classes"]),
        init=trial.init,
        seed=trial.seed,
        pretrained=inputs.pretrained if trial.init == "pretrained" else None,
        out_dir=spec.output_dir / "init",
    )
    return TrialJob(
        framework=trial.framework,
        seed=trial.seed,
        init=trial.init,
        method=trial.method,
        train=trial.train,
        lora=trial.lora,
        arch=arch.model_dump(mode="json"),
        num_classes=int(trial.train["num_classes"]),
        num_train=inputs.num_train,
        fairseq_data=str(inputs.fairseq_data),
        hf_data=str(inputs.hf_data),
        init_checkpoint=str(init),
        out_dir=str(out_dir),
        threads=threads,
        device=detect_device(),
        extra=select_extra(spec),
    )


def select_extra(spec: SweepSpec) -> dict[str, Any]:
    """`{"select": {...}}` for a classification spec whose `select:` picks on another
    metric or direction than the highest accuracy (`TrialJob.selected`); empty
    otherwise, so a default sweep's trial.json is unchanged."""
    metric, mode = spec.select.metric, spec.select.direction()
    if (metric, mode) == (METRIC_VALID_ACC, "max"):
        return {}
    return {"select": {"metric": metric, "mode": mode}}


def run_trial(
    spec: SweepSpec,
    trial: Trial,
    out_dir: Path,
    *,
    inputs: SweepInputs | None = None,
    threads: int = 1,
    on_event: Callable[[MetricEvent], None] | None = None,
    on_start: Callable[[Trainer, TrialJob], None] | None = None,
    log: Log = print,
    nice: int = 0,
    on_output: Callable[[str], None] | None = None,
    notice: threading.Event | None = None,
) -> TrialResult:
    """Run one trial to completion, resuming from its checkpoints in `out_dir` if any.
    `on_start` sees the trainer and job just before the trainer starts (the Ray trial
    syncs checkpoints with them); `nice`: the trainer's lower CPU priority;
    `on_output`: each line of the trainer's output; `notice`: set it when the node is
    being preempted, and the trainer saves a checkpoint at its current step and stops
    (`runner.TrainerPreempted`; running the trial again resumes from that step)."""
    if inputs is None:
        inputs = prepare_inputs(spec, log=log, need_pretrained=trial.init == "pretrained")
    job = build_job(spec, trial, inputs, out_dir, threads=threads)
    minutes = trial.train.get("timeout_min")  # the trial's own: it may be a grid axis
    timeout = float(minutes) * 60 if minutes else None
    trainer = get_trainer(trial.framework)
    if on_start is not None:
        on_start(trainer, job)
    return run_trainer(
        trainer,
        job,
        on_event=on_event,
        timeout_s=timeout,
        nice=nice,
        on_output=on_output,
        notice=notice,
    )


def trial_dir(spec: SweepSpec, trial: Trial) -> Path:
    """Default local folder of a trial: readable name plus key, stable across runs."""
    return spec.output_dir / "trials" / f"{trial.name}-{trial.key[:8]}"
