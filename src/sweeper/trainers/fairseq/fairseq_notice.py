"""fairseq-train's answer to a preemption notice (`sweeper.trainers.notice`).

`fairseq_main` installs these hooks around fairseq's own training loop
(`fairseq_cli.train`), whose functions look each other up through the module, so
replacing them there changes what the loop calls and nothing else:

* `train` (one epoch) arms the notice when it starts: everything before it (imports,
  the model, `load_checkpoint`'s resume, the dry-run validation) is lost to a SIGTERM
  only the time it took, so the process just exits;
* `validate_and_save` runs as fairseq's own after every update; then, if the notice
  came and fairseq is not stopping anyway (its last update), it stops the loop the way
  fairseq's own stopping conditions do (`should_stop`), after making sure
  checkpoint_last.pt holds this update: saved by fairseq at this step already (an
  epoch's end: validated first, so the best checkpoint is decided as usual), or saved
  now through `checkpoint_utils.save_checkpoint` with no validation score, which is
  what fairseq's `--save-interval-updates` does mid-epoch: checkpoint_last.pt only,
  with the epoch iterator's position, the optimizer, the LR scheduler and the metric
  meters; the best score and checkpoint_best.pt stay as they were (the earliest-best
  rule of `fairseq_main.keep_earliest_best` sees no score, so it changes nothing).
  The next run loads checkpoint_last.pt and continues inside that epoch, its
  validation points where an uninterrupted run has them;
* `load_checkpoint` says which step a resumed run continues from (`RESUMED_LINE`).

After fairseq returns, `FairseqNotice.stopped_at` is the step of the notice
checkpoint, or None when training ran to its end (a notice during the last update or
after it does not preempt a finished trial).
"""

from __future__ import annotations

from typing import Any

from sweeper.trainers.notice import Notice


class FairseqNotice:
    """The notice hooks of one fairseq-train run (see the module docstring)."""

    def __init__(self, notice: Notice) -> None:
        self.notice = notice
        self.stopped_at: int | None = None
        """The step of the notice checkpoint, once training stopped for the notice."""
        self.saved_at: int | None = None
        """The step of the trainer's latest saved checkpoint in this run."""

    def install(self) -> FairseqNotice:
        """Replace fairseq's loop functions and note its trainer's saves."""
        from fairseq import checkpoint_utils
        from fairseq.trainer import Trainer
        from fairseq_cli import train

        epoch, validate_and_save, load = (
            train.train,
            train.validate_and_save,
            checkpoint_utils.load_checkpoint,
        )
        save_state = Trainer.save_checkpoint

        def train_epoch(cfg, trainer, task, epoch_itr):  # type: ignore[no-untyped-def]
            self.notice.arm()
            return epoch(cfg, trainer, task, epoch_itr)

        def save_checkpoint(trainer, filename, extra_state):  # type: ignore[no-untyped-def]
            path = save_state(trainer, filename, extra_state)
            self.saved_at = trainer.get_num_updates()
            return path

        def checked(cfg, trainer, task, epoch_itr, valid_subsets, end_of_epoch):  # type: ignore[no-untyped-def]
            losses, should_stop = validate_and_save(
                cfg, trainer, task, epoch_itr, valid_subsets, end_of_epoch
            )
            if not self.notice.received or should_stop:
                return losses, should_stop
            self.stopped_at = self.save_now(cfg, trainer, task, epoch_itr)
            return losses, True

        def load_checkpoint(cfg, trainer, **kwargs: Any):  # type: ignore[no-untyped-def]
            loaded = load(cfg, trainer, **kwargs)
            if trainer.get_num_updates() > 0:
                self.notice.resuming(trainer.get_num_updates())
            return loaded

        train.train = train_epoch
        train.validate_and_save = checked
        checkpoint_utils.load_checkpoint = load_checkpoint
        Trainer.save_checkpoint = save_checkpoint
        return self

    def save_now(self, cfg, trainer, task, epoch_itr) -> int:  # type: ignore[no-untyped-def]
        """checkpoint_last.pt at the current update, unless fairseq just saved it;
        returns that update."""
        from fairseq import checkpoint_utils

        step = trainer.get_num_updates()
        if self.saved_at != step:
            path = checkpoint_utils.save_checkpoint(cfg.checkpoint, trainer, epoch_itr, None)
            if path is not None and hasattr(task, "post_save"):
                task.post_save(path, step)
        return step
