"""The one rule for a trial's best validation point (docs/architecture.md, invariant 3).

The trainers' result file, the live progress view, the summariser's tables, the search
stage's objective and the confirm stage's choice of configuration all name a "best"
point. If any two of them applied different rules (a different tie-break, NaN handled
another way), the progress line, the MLflow record and Table 1 could disagree about the
same trial. So every one of them calls `best_point`.

Rule: the best value by `mode` (highest for "max", lowest for "min"); among equal
values the earliest step wins (the checkpoint a run that keeps its first best has on
disk). Points whose value is None or NaN are never best.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Literal

from sweeper import layout

Mode = Literal["max", "min"]


def is_better(value: float, best: float | None, mode: Mode = "max") -> bool:
    """Whether `value` strictly beats `best` (None: nothing yet). Strict, so that a tie
    keeps the earlier point when points arrive in step order."""
    if best is None:
        return True
    return value > best if mode == "max" else value < best


def best_point(
    points: Iterable[tuple[int, float | None]], mode: Mode = "max"
) -> tuple[int, float] | None:
    """The `(step, value)` of the best point, ties to the earliest step; None if no
    point has a value. `points` may come in any order and may repeat a step (then the
    caller decides beforehand which value of that step stands)."""
    best: tuple[int, float] | None = None
    for step, value in sorted(points, key=lambda point: point[0]):
        if value is None or math.isnan(value):
            continue
        if best is None or is_better(value, best[1], mode):
            best = (step, float(value))
    return best


def best_metrics(
    valid_accuracy: float | None, test_accuracy: float | None, step: int, epoch: float | None
) -> dict[str, float]:
    """A best point as the `layout.BEST_METRIC_NAMES` metrics a trial run carries (what
    a finished trial logs, and what the summariser adds to a run that lacks them);
    values that are not known are left out."""
    values = {
        layout.METRIC_BEST_VALID_ACC: valid_accuracy,
        layout.METRIC_BEST_TEST_ACC: test_accuracy,
        layout.METRIC_BEST_STEP: step,
        layout.METRIC_BEST_EPOCH: epoch,
    }
    return {key: float(value) for key, value in values.items() if value is not None}
