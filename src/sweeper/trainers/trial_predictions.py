"""A finished trial's predictions files: valid and test at its best and last checkpoints.

Each trainer's child process calls `write_trial_predictions` once training has
finished (not when a preemption notice stopped it), with its two checkpoints and a
function that reloads one from disk and predicts every split (`trainers.reload`). It
writes `predictions/valid.json` and `predictions/test.json` into the trial folder
(`sweeper.trainers.predictions`), ids the positions in the prepared split.

Why reload the stored checkpoints rather than keep what the trainer's evaluations
predicted: a resumed trial's best checkpoint may date from an earlier attempt, maybe
on another node (`tracking/resume_sync.py` carries checkpoints, not a process's
memory), so the checkpoints on disk are the one thing every attempt shares; and
predicting with the code `--evaluate` re-measures with makes the stored file and a
later re-measurement agree example by example unless the checkpoint or data changed.
The counted flags equal the recorded accuracy of that step exactly (the integration
tests hold it for fairseq, HF and the causal LM), because both count the same
predictions with `metrics.accuracy_percent`. A checkpoint that is best and last is
predicted once.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from sweeper.trainers import predictions
from sweeper.trainers.predictions import BEST, LAST, Measured, SplitPredictions

SPLITS = ("valid", "test")
"""The splits every trial's predictions files cover, in this order."""

Predict = Callable[[Any, int, tuple[str, ...]], dict[str, Measured]]
"""(where the checkpoint is, its step, splits) -> each split measured at that step."""


def write_trial_predictions(
    out_dir: Path,
    task: str,
    checkpoints: Mapping[str, tuple[Any, int]],
    predict: Predict,
    log: Callable[[str], None] = print,
) -> list[Path]:
    """Predict `SPLITS` with each of `checkpoints` ({`BEST`/`LAST`: (where, step)}; a
    checkpoint missing from it is left out) and write one file per split; returns the
    files. `log` gets one line: what was predicted and in how many seconds."""
    started = time.monotonic()
    measured: dict[str, dict[str, Measured]] = {}
    done: dict[int, dict[str, Measured]] = {}
    for which in (BEST, LAST):
        if which not in checkpoints:
            continue
        where, step = checkpoints[which]
        if step not in done:  # the best is the last: the same weights, predicted once
            done[step] = predict(where, step, SPLITS)
        measured[which] = done[step]
    if not measured:
        return []
    written = []
    for split in SPLITS:
        found = {which: per_split[split].predictions for which, per_split in measured.items()}
        size = len(next(iter(found.values())).correct)
        ids = tuple(range(size))
        written.append(predictions.write(out_dir, SplitPredictions(split, task, ids, found)))
    steps = ", ".join(f"{which} (step {checkpoints[which][1]})" for which in measured)
    log(f"predictions: {' and '.join(SPLITS)} at {steps} in {time.monotonic() - started:.2f} s")
    return written
