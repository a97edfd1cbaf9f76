"""`select:` and `compare:`: which checkpoint of a trial counts, what the summary
reports, and what a comparison must show."""

from __future__ import annotations

from typing import Literal

from pydantic import (
    Field,
)

from sweeper.record_names import HIGHER_IS_BETTER
from sweeper.spec.strict import Strict


class SelectConfig(Strict):
    """How each trial's best checkpoint is picked, and what the summary reports there.
    Names are logged metric names: `valid_<m>` / `test_<m>` for a measurement `m` the
    task's trainers make (classification: loss, accuracy, macro_f1)."""

    metric: str = "valid_accuracy"
    """The validation metric whose best step is the trial's best checkpoint (ties: the
    earliest step); it is also what Table 1 shows as "Valid". Both classification
    trainers keep that checkpoint as their stored best. `valid_macro_f1`: the mean of
    per-class F1 in percent, over the classes in the split's labels or predictions
    (scikit-learn's `f1_score(average="macro")`), for unbalanced or multi-class data."""
    mode: Literal["max", "min"] | None = None
    """`max` or `min`; unset: the metric's own direction (accuracy and macro-F1 max,
    loss min)."""
    report: list[str] = Field(default_factory=lambda: ["test_accuracy"], min_length=1)
    """Test metrics read at the best checkpoint. The first is the one Table 2, the
    comparisons, figures and `--evaluate` are about; the others get a Table 1 column
    and a Table 2 mean."""

    def direction(self) -> Literal["max", "min"]:
        if self.mode is not None:
            return self.mode
        return "max" if self.metric.removeprefix("valid_") in HIGHER_IS_BETTER else "min"

    def unknown(self, measured: tuple[str, ...]) -> list[str]:
        """Problems with metrics no trainer of the task reports (`measured`: its names)."""
        valid = [f"valid_{m}" for m in measured]
        test = [f"test_{m}" for m in measured]
        problems = []
        if self.metric not in valid:
            problems.append(
                f"metric {self.metric!r} is not reported by any trainer; "
                f"the validation metrics that exist: {', '.join(valid)}"
            )
        problems += [
            f"report {name!r} is not reported by any trainer; the test metrics "
            f"that exist: {', '.join(test)}"
            for name in self.report
            if name not in test
        ]
        return problems


class CompareConfig(Strict):
    """How the summary decides its comparisons (docs/architecture.md, "Statistics")."""

    margin: float | None = Field(None, gt=0)
    """Equivalence margin D in the compared metric's units (accuracy: percentage
    points). With it a comparison can also end "equivalent within ±D": its decision
    interval lies inside (-D, D). `--until-decided` then stops a comparison decided
    either way. Unset: only "better" or "undecided", and the summary says which margin
    the data would already support. `--margin D` on the command line sets it too."""
