"""What the integration tests hold a trial's predictions files to: both splits, the best
and the last checkpoint, each checkpoint's counted flags equal to the metric its trial
recorded at that step, bit for bit (`CheckpointPredictions.accuracy` is
`metrics.accuracy_percent` of the flags, the expression every recorded accuracy and
exact match is)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from sweeper import record_names
from sweeper.selection import ACCURACY, Selection
from sweeper.trainers import predictions
from sweeper.trainers.events import MetricEvent, best_validation
from sweeper.trainers.predictions import SplitPredictions


def recorded(events: Sequence[MetricEvent], split: str, step: int, name: str) -> float | None:
    """The metric `name` (`accuracy`, `exact_match`) a trial's events hold for `split`
    at `step`: the latest event of that step, the measurement that stands."""
    found = [e for e in events if e.split == split and e.step == step]
    return found[-1].value(name) if found else None


def assert_predictions_reproduce(
    out_dir: Path,
    events: Sequence[MetricEvent],
    selection: Selection = ACCURACY,
    metric: str = "accuracy",
) -> dict[str, SplitPredictions]:
    """Read a trial folder's `predictions/{valid,test}.json` and assert they hold the
    trial's best (by `selection`) and last validation steps, each split's counted
    `metric` there equal (==) to the one recorded; returns them by split."""
    events = list(events)
    found = best_validation(events, selection)
    assert found is not None, "the trial recorded no validation point"
    best_step = found[0].step
    last_step = max(e.step for e in events if e.split == "valid")
    files = {}
    for split in ("valid", "test"):
        path = Path(out_dir) / record_names.PREDICTIONS_DIR / f"{split}.json"
        assert path.is_file(), f"no {path}"
        made = predictions.read(path)
        assert made.split == split and made.ids == tuple(range(len(made.ids)))
        assert (made.at("best").step, made.at("last").step) == (best_step, last_step)
        for which in ("best", "last"):
            at = made.at(which)
            assert at.accuracy == recorded(events, split, at.step, metric), (split, which)
            assert all(0.0 <= s <= 1.0 for s in at.scores)
        files[split] = made
    return files
