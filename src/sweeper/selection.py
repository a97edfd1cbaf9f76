"""The one rule for a trial's best validation point (docs/architecture.md, invariant 3).

The trainers' result file, the live progress view, the summariser's tables, the search
stage's objective and the confirm stage's choice of configuration all name a "best"
point. If any two of them applied different rules (a different tie-break, NaN handled
another way), the progress line, the MLflow record and Table 1 could disagree about the
same trial. So every one of them calls `best_point`.

Rule: the best value by `mode` (highest for "max", lowest for "min"); among equal
values the earliest step wins (the checkpoint a run that keeps its first best has on
disk). Points whose value is None or NaN are never best.

Which validation metric is "best", in which direction, and which test metrics are read
at that point is a sweep's `Selection` (its spec's `select:` block; classification's
default: highest `valid_accuracy`, report `test_accuracy`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from sweeper import record_names

if TYPE_CHECKING:
    from sweeper.spec.select_block import SelectConfig

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


@dataclass(frozen=True)
class Selection:
    """How a sweep picks each trial's best checkpoint and what it reports there.

    Metric names are the logged ones (`valid_<name>`, `test_<name>`, `record_names.TASK_METRICS`).
    The first `report` metric is the one Table 2, the comparisons and the figures are
    about; the others are shown beside it.
    """

    metric: str = record_names.METRIC_VALID_ACC
    mode: Mode = "max"
    report: tuple[str, ...] = (record_names.METRIC_TEST_ACC,)

    @classmethod
    def of(cls, select: SelectConfig) -> Selection:
        """A spec's `select:` block, its mode defaulted to the metric's direction."""
        return cls(select.metric, select.direction(), tuple(select.report))

    @property
    def valid_name(self) -> str:
        """The selection metric as a metric event names it (`accuracy`, `loss`, ...)."""
        return base_name(self.metric)

    @property
    def primary(self) -> str:
        return self.report[0]

    def is_default(self) -> bool:
        return self == ACCURACY

    def on(self, name: str) -> Selection:
        """This selection aimed at measurement `name` (`macro_f1`, or `valid_macro_f1`):
        best checkpoint by `valid_<name>` in the metric's own direction, `test_<name>`
        reported first, then this selection's other reported metrics (`summarize
        --metric`). `ACCURACY.on("accuracy")` is `ACCURACY`."""
        base = base_name(name)
        test = f"test_{base}"
        return Selection(
            f"valid_{base}", metric_mode(base), (test, *(r for r in self.report if r != test))
        )

    def best_names(self) -> tuple[str, ...]:
        """The best-checkpoint metrics a finished trial run carries, in logging order
        (and, where the trial measured them, `best_` + `record_names.HEADLINE_METRICS`
        not named here, logged before the step: `best_metrics`)."""
        return (
            *(record_names.METRIC_BEST_PREFIX + name for name in (self.metric, *self.report)),
            record_names.METRIC_BEST_STEP,
            record_names.METRIC_BEST_EPOCH,
        )

    def to_json(self) -> str:
        return json.dumps({"metric": self.metric, "mode": self.mode, "report": list(self.report)})

    @classmethod
    def from_json(cls, text: str | None) -> Selection:
        """A sweep run's `sweeper.select` tag; absent (a classification sweep): ACCURACY."""
        if not text:
            return ACCURACY
        data = json.loads(text)
        return cls(data["metric"], data["mode"], tuple(data["report"]))


ACCURACY = Selection()
"""Classification's selection: highest validation accuracy, test accuracy reported."""


def base_name(metric: str) -> str:
    """`valid_loss` -> `loss`: the name a metric event gives a logged metric."""
    return metric.split("_", 1)[1] if metric.startswith(("valid_", "test_")) else metric


def metric_mode(metric: str) -> Mode:
    """Which way a metric improves (`record_names.HIGHER_IS_BETTER`)."""
    return "max" if base_name(metric) in record_names.HIGHER_IS_BETTER else "min"


def best_metrics(
    valid: float | None,
    tests: Mapping[str, float | None],
    step: int,
    epoch: float | None,
    selection: Selection = ACCURACY,
    measured: Mapping[str, float | None] | None = None,
) -> dict[str, float]:
    """A best point as the best-checkpoint metrics a trial run carries
    (`Selection.best_names`: what a finished trial logs, and what the summariser adds to
    a run that lacks them): the selection metric's value, each reported test metric
    (`tests`, by logged name), then `record_names.HEADLINE_METRICS` found in `measured`
    (every value at the best step, by logged name), step and epoch; values that are not
    known are left out."""
    prefix = record_names.METRIC_BEST_PREFIX
    values: dict[str, float | None] = {prefix + selection.metric: valid}
    values.update({prefix + name: tests.get(name) for name in selection.report})
    for name in record_names.HEADLINE_METRICS:
        values.setdefault(prefix + name, (measured or {}).get(name))
    values[record_names.METRIC_BEST_STEP] = step
    values[record_names.METRIC_BEST_EPOCH] = epoch
    return {key: float(value) for key, value in values.items() if value is not None}
