"""The fairseq child's predictions files, written once fairseq-train has finished.

`fairseq_main` calls `write_predictions(save_dir)` after a finished run (a preempted
one exits before): checkpoint_best.pt and checkpoint_last.pt are reloaded with
fairseq's hub interface (`reload.fairseq_predict`, the reload `--evaluate` uses) and
classify valid and test (`sweeper.trainers.trial_predictions`). A checkpoint's step
is the update count fairseq saved in it. Only a trial's save dir (its folder holds
the job): the pretraining stage's writes none.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from sweeper import record_names
from sweeper.trainers.fairseq.fairseq_checkpoints import BEST, LAST, allow_fairseq_checkpoints
from sweeper.trainers.predictions import BEST as BEST_CHECKPOINT
from sweeper.trainers.predictions import LAST as LAST_CHECKPOINT
from sweeper.trainers.predictions import Measured


def checkpoint_updates(path: Path) -> int:
    """The number of updates a fairseq checkpoint was saved at (memory-mapped: only
    the small history is read)."""
    import torch

    allow_fairseq_checkpoints()
    state = torch.load(path, map_location="cpu", mmap=True)
    return int(state["optimizer_history"][-1]["num_updates"])


def write_predictions(save_dir: Path) -> list[Path]:
    """Both checkpoints' predictions on valid and test into the trial folder (the save
    dir's parent); nothing outside a trial's save dir."""
    from sweeper.trainers.base import TrialJob
    from sweeper.trainers.reload import device_of, fairseq_predict
    from sweeper.trainers.trial_predictions import write_trial_predictions

    trial = save_dir.parent
    config = trial / record_names.TRIAL_CONFIG_FILE
    if not config.is_file():
        return []
    job = TrialJob.load(config)
    # Training is over: the hub's INFO lines (its whole config, twice) would only bury
    # the trial log's end.
    logging.getLogger("fairseq").setLevel(logging.WARNING)
    device = device_of(job)
    files = {BEST_CHECKPOINT: BEST, LAST_CHECKPOINT: LAST}
    found = {
        which: (name, checkpoint_updates(save_dir / name))
        for which, name in files.items()
        if (save_dir / name).is_file()
    }

    def predict(name: Any, step: int, splits: tuple[str, ...]) -> dict[str, Measured]:
        return fairseq_predict(job, save_dir, step, splits, checkpoint_file=name, device=device)

    return write_trial_predictions(trial, job.task, found, predict, log=_log)


def _log(line: str) -> None:
    print(f"sweeper: {line}", flush=True)
