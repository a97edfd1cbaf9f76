"""The HF children's predictions files, written once training has finished.

`hf_main` (the classifier, full or LoRA) and `lm_main` (the causal LM) call
`write_predictions(job)` after a finished run (a preempted one returns before): the
best and last checkpoint folders (`hf_trainer.find_checkpoints`, the ones the parent
uploads and resumes from) are reloaded as `--evaluate` reloads them
(`reload.hf_predict`, `reload.lm_predict`) and predict valid and test
(`sweeper.trainers.trial_predictions`). A checkpoint's step is its folder's.
"""

from __future__ import annotations

from pathlib import Path

from sweeper import record_names
from sweeper.trainers.base import TrialJob
from sweeper.trainers.hf.hf_trainer import checkpoint_step, find_checkpoints
from sweeper.trainers.predictions import BEST, LAST, Measured


def write_predictions(job: TrialJob) -> list[Path]:
    """Both checkpoints' predictions on valid and test into the job's trial folder."""
    from sweeper.trainers.reload import device_of, hf_predict, lm_predict
    from sweeper.trainers.trial_predictions import write_trial_predictions

    kept = find_checkpoints(job.checkpoint_dir)
    found = {
        which: (path, checkpoint_step(path) or 0)
        for which, path in ((BEST, kept.best), (LAST, kept.last))
        if path is not None
    }
    reload = lm_predict if job.task == record_names.TASK_CAUSAL_LM else hf_predict
    device = device_of(job)

    def predict(path: Path, step: int, splits: tuple[str, ...]) -> dict[str, Measured]:
        return reload(job, path, step, splits, device=device)

    return write_trial_predictions(
        Path(job.out_dir), job.task, found, predict, log=lambda line: print(line, flush=True)
    )
