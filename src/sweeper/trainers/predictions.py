"""Per-example predictions of a trial's checkpoints on one split: what each example got.

A trial's accuracy is a count of right examples; keeping which examples were right is
what lets a summary compare two groups example by example (paired over the test set),
bootstrap the test set itself, and lets `--evaluate` check a stored checkpoint example
by example instead of by its total alone.

One file per split, `predictions/<split>.json` in the trial folder and the same path
among the trial run's artifacts (`record_names.ARTIFACT_PREDICTIONS_DIR`):

    {"format": 1, "split": "test", "task": "classification",
     "ids": [0, 1, 2, ...],
     "checkpoints": {
        "best": {"step": 675, "predicted": [1, 0, ...], "scores": [0.93, ...],
                 "correct": [1, 0, ...]},
        "last": {"step": 750, ...}}}

- `ids`: each example's position in the prepared split, the same for every backend of
  a sweep (they read the same ids in the same order), so two trials' files pair by id.
- `predicted`: a classifier's class id (position in `data.labels`); a causal LM's
  generated answer as text.
- `scores`: the model's confidence in that prediction, a probability in [0, 1]
  (a classifier: the softmax probability of the predicted class; a causal LM: the
  product of its generated tokens' probabilities), rounded to `SCORE_DIGITS` digits.
- `correct`: 1 where the prediction counts as right by the rule the trial's recorded
  metric counts with (class equal to the label; a causal LM's exact match), else 0;
  so 100 * mean(correct) is the recorded accuracy (exact match) bit for bit.
- `best` is the checkpoint the summary's selection points at; `last` the final one
  (the two are the same step when the best is the last).

Who writes them: each trainer's child process, once training has finished, reloads
its best and last checkpoints from disk and predicts valid and test with
`sweeper.trainers.reload` (`sweeper.trainers.trial_predictions`), the code
`summarize --evaluate` re-predicts a stored checkpoint with; a `Measured` is one such
prediction of a split with the metrics counted from it.

Nothing here imports anything heavy.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sweeper import record_names

FORMAT = 1
"""Version of the file layout above; a reader refuses a newer one."""
SCORE_DIGITS = 6
BEST, LAST = "best", "last"


@dataclass(frozen=True)
class CheckpointPredictions:
    """One checkpoint's predictions on a split, in the order of the split's `ids`."""

    step: int
    predicted: tuple[Any, ...]
    scores: tuple[float, ...]
    correct: tuple[int, ...]

    def __post_init__(self) -> None:
        if not len(self.predicted) == len(self.scores) == len(self.correct):
            raise ValueError(
                f"{len(self.predicted)} predictions, {len(self.scores)} scores, "
                f"{len(self.correct)} correct flags"
            )
        if any(flag not in (0, 1) for flag in self.correct):
            raise ValueError("correct flags must be 0 or 1")

    @property
    def accuracy(self) -> float:
        """100 * right / all, as `metrics.accuracy_percent` computes a recorded one."""
        from sweeper.trainers.metrics import accuracy_percent

        return accuracy_percent(sum(self.correct), len(self.correct))

    def to_dict(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "predicted": list(self.predicted),
            "scores": [round(float(s), SCORE_DIGITS) for s in self.scores],
            "correct": list(self.correct),
        }

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> CheckpointPredictions:
        return cls(
            step=int(raw["step"]),
            predicted=tuple(raw["predicted"]),
            scores=tuple(float(s) for s in raw["scores"]),
            correct=tuple(int(c) for c in raw["correct"]),
        )


@dataclass(frozen=True)
class SplitPredictions:
    """A trial's predictions on one split, at its best and last checkpoints."""

    split: str
    task: str
    ids: tuple[int, ...]
    checkpoints: dict[str, CheckpointPredictions] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for which, found in self.checkpoints.items():
            if len(found.correct) != len(self.ids):
                raise ValueError(
                    f"{which}: {len(found.correct)} predictions for {len(self.ids)} examples"
                )

    def at(self, which: str = BEST) -> CheckpointPredictions:
        if which not in self.checkpoints:
            raise KeyError(f"no {which!r} checkpoint in the {self.split} predictions")
        return self.checkpoints[which]

    def to_json(self) -> str:
        body = {
            "format": FORMAT,
            "split": self.split,
            "task": self.task,
            "ids": list(self.ids),
            "checkpoints": {k: v.to_dict() for k, v in self.checkpoints.items()},
        }
        return json.dumps(body, separators=(",", ":")) + "\n"

    @classmethod
    def from_json(cls, text: str) -> SplitPredictions:
        raw = json.loads(text)
        version = int(raw.get("format", 0))
        if version > FORMAT:
            raise ValueError(
                f"predictions file of format {version}; this sweeper reads up to {FORMAT}"
            )
        return cls(
            split=str(raw["split"]),
            task=str(raw["task"]),
            ids=tuple(int(i) for i in raw["ids"]),
            checkpoints={
                str(k): CheckpointPredictions.from_dict(v) for k, v in raw["checkpoints"].items()
            },
        )


@dataclass(frozen=True)
class Measured:
    """A checkpoint measured on one split outside training: its per-example predictions
    and the split's metrics counted from them, by event name (a classifier's
    `accuracy`, `macro_f1` and per-class values; a causal LM's `loss`, `perplexity`,
    `exact_match`)."""

    predictions: CheckpointPredictions
    metrics: dict[str, float]

    def logged(self, split: str) -> dict[str, float]:
        """The metrics under the names a trial logs them: `test_accuracy`, ..."""
        return {f"{split}_{name}": value for name, value in self.metrics.items()}


def differing(stored: CheckpointPredictions, again: CheckpointPredictions) -> list[int]:
    """Positions (in the split's id order) where two predictions of the same checkpoint
    disagree: another predicted class or answer, or another correct flag. Scores are
    not compared: a probability recomputed on another device or thread count may move
    in its last digits without changing any prediction."""
    if len(stored.correct) != len(again.correct):
        raise ValueError(
            f"{len(stored.correct)} stored predictions, {len(again.correct)} made again"
        )
    pairs = zip(stored.predicted, stored.correct, again.predicted, again.correct, strict=True)
    return [k for k, (p, c, q, d) in enumerate(pairs) if p != q or c != d]


def file_name(split: str) -> str:
    """`test.json`: a split's file inside the predictions folder."""
    return f"{split}.json"


def artifact_path(split: str) -> str:
    """`predictions/test.json` among a trial run's artifacts."""
    return f"{record_names.ARTIFACT_PREDICTIONS_DIR}/{file_name(split)}"


def write(out_dir: Path, predictions: SplitPredictions) -> Path:
    """Write `out_dir/predictions/<split>.json` (out_dir: the trial folder), atomically."""
    folder = Path(out_dir) / record_names.PREDICTIONS_DIR
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / file_name(predictions.split)
    temp = path.with_name(path.name + ".tmp")
    temp.write_text(predictions.to_json(), encoding="utf-8")
    temp.replace(path)
    return path


def read(path: Path) -> SplitPredictions:
    return SplitPredictions.from_json(Path(path).read_text(encoding="utf-8"))


def paired(
    a: SplitPredictions, b: SplitPredictions, which: str = BEST
) -> tuple[Sequence[int], Sequence[int]]:
    """Both trials' correct flags over the examples they share, in `a`'s id order: the
    pairing a test-set comparison needs. Raises where they share no example."""
    index = {i: k for k, i in enumerate(b.ids)}
    right_a, right_b = a.at(which).correct, b.at(which).correct
    pairs = [(right_a[k], right_b[index[i]]) for k, i in enumerate(a.ids) if i in index]
    if not pairs:
        raise ValueError(f"the two trials' {a.split} predictions share no example")
    return [p for p, _ in pairs], [q for _, q in pairs]
