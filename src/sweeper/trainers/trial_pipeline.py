"""One trial end to end: shared inputs → shared initial weights → the backend's trainer.

`sweeper trial` calls this directly; the sweep engine's Ray trial calls the very same
functions, so a trial behaves identically with or without Ray. Work shared by all
trials of a sweep (data preparation, pretraining) is cached by content hash, so it is
done once however many trials ask for it. What differs by framework and task (the
preparation, the job, the trainer) is the backend table's to say (`sweeper.backends`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from sweeper import backends
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
    """What every trial of a sweep reads: prepared data and the pretrained weights,
    as the task's preparation (`sweeper.backends.Task.prepare`) made them."""

    data: dict[str, Path]
    """Prepared folder per data format (`Backend.data` names the one its trials read;
    each is staged to the nodes under the role `<format>_data`)."""
    root: Path
    """The folder holding the prepared data, its statistics and vocabulary (the runs'
    dataset inputs, `sweeper.tracking.lineage`)."""
    vocab_size: int
    num_classes: int
    """Classes the data's labels have (a trial's head has `train.num_classes`, at least
    these); 0 for a task without classes."""
    num_train: int
    pretrained: dict[str | None, Path]
    """The `pretrained` init's weights (a file or folder, as the task's trials start
    from) by pretraining objective (`Trial.objective`: one checkpoint per objective
    the grid asks for; the key None for weights without one, a given
    `model.checkpoint` or a task's own pretraining); empty when not prepared."""

    def pretrained_for(self, trial: Trial) -> Path:
        """The weights the `pretrained` trial starts from: its objective's checkpoint;
        ValueError when they were not prepared."""
        if trial.objective not in self.pretrained:
            what = f"the {trial.objective} checkpoint" if trial.objective else "its weights"
            raise ValueError(f"a pretrained trial needs {what}, which were not prepared")
        return self.pretrained[trial.objective]


def prepare_inputs(spec: SweepSpec, log: Log = print, need_pretrained: bool = True) -> SweepInputs:
    """Prepare data and (if asked) the pretrained weights with the spec's task's own
    preparation; both cached across calls."""
    prepare = backends.load(backends.task(spec.task).prepare)
    return prepare(spec, log, need_pretrained)


def build_job(
    spec: SweepSpec, trial: Trial, inputs: SweepInputs, out_dir: Path, threads: int = 1
) -> TrialJob:
    """Resolve a trial into the job its backend's trainer runs, creating its initial
    weights."""
    backend = backends.get(trial.framework, spec.task)
    build = backends.load(backend.job)
    return build(backend, spec, trial, inputs, out_dir, threads, detect_device())


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
    trainer = get_trainer(trial.framework, spec.task)
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
