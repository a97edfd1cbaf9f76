"""The HF children's answer to a preemption notice (`sweeper.trainers.notice`).

`StopOnNotice` is a `transformers.TrainerCallback` in both children (`hf_main`,
`lm_main`). `on_train_begin` (after transformers has loaded a resumed checkpoint's
weights, optimizer and scheduler) arms the notice: a SIGTERM before it just ends the
process. Once armed, the `on_step_end` that follows the notice (the update in progress
is finished) sets `control.should_training_stop`, and transformers leaves its loop.

It saves through transformers' own checkpoint path: after a stop transformers still
runs the epoch-end pass (`on_epoch_end`, then its log / evaluate / save step), and
there `on_epoch_end` asks for one save, `checkpoint-<step>` with the optimizer,
scheduler, RNG and trainer state, which is exactly what `hf_main.resume_point` resumes
from, mid-epoch included (transformers skips the batches that epoch already used).
Evaluation stays where an uninterrupted run has it: at a step that ends an epoch the
usual validation runs before that save, so the best checkpoint is decided as usual;
at any other step none runs, so the saved trainer state keeps the best checkpoint it
had. `KeepBestAndLast` then keeps that best and the notice checkpoint (the newest)
until a later save of the resumed run replaces it.

Saving in `on_epoch_end` rather than with `should_save` at `on_step_end` saves the
step once: a save at the step would be followed by the epoch-end pass's own save of
the same folder.

`train_or_stop` is both children's call of `Trainer.train`: it says which step a
resumed run continues from (`preemption.RESUMED_LINE`) and turns a stop for the
notice into `Preempted`, which the child's `main` answers with its exit status.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from transformers import Trainer, TrainerCallback

from sweeper.trainers.hf.hf_trainer import checkpoint_step
from sweeper.trainers.notice import Notice


class StopOnNotice(TrainerCallback):
    """Stops training after the update in progress once SIGTERM came (module docstring)."""

    def __init__(self, notice: Notice, updates_per_epoch: int) -> None:
        self.notice = notice
        self.updates_per_epoch = updates_per_epoch
        self.stopped_at: int | None = None
        """The step training stopped at for the notice."""

    def on_train_begin(self, args, state, control, **kwargs):  # type: ignore[override]
        self.notice.arm()

    def on_step_end(self, args, state, control, **kwargs):  # type: ignore[override]
        if self.notice.received and self.stopped_at is None:
            self.stopped_at = state.global_step
            control.should_training_stop = True

    def on_epoch_end(self, args, state, control, **kwargs):  # type: ignore[override]
        if self.stopped_at is None:
            return
        control.should_save = True
        if self.stopped_at % self.updates_per_epoch:
            control.should_evaluate = False  # mid-epoch: validation stays at epoch ends

    def check(self, global_step: int, total_updates: int) -> None:
        """After `Trainer.train` returned: raise `Preempted` if it stopped for the
        notice before its last update (a notice during the last one, or after it,
        does not preempt a finished trial)."""
        if self.stopped_at is not None and global_step < total_updates:
            raise Preempted(global_step)


class Preempted(Exception):
    """Training stopped for the notice with a checkpoint at `step`; the child's `main`
    answers it with `Notice.preempted`."""

    def __init__(self, step: int) -> None:
        super().__init__(f"preempted at step {step}")
        self.step = step


def train_or_stop(trainer: Trainer, resume: Path | None, stop: StopOnNotice, total: int) -> Any:
    """`trainer.train`, from `resume` if any (said in `preemption.RESUMED_LINE`);
    raises `Preempted` when `stop` ended it early."""
    if resume is not None:
        Notice.resuming(checkpoint_step(resume) or 0)
    output = trainer.train(resume_from_checkpoint=str(resume) if resume else None)
    stop.check(trainer.state.global_step, total)
    return output
