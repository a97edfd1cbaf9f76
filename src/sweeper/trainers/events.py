"""The one metric stream both frameworks produce (format documented in `sweeper.record_names`).

Everything downstream (Ray reports, MLflow metrics, the summariser) reads these events,
so a fairseq trial and an HF trial are compared on identical terms.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

from sweeper.selection import ACCURACY, Selection, base_name, best_point

Split = Literal["train", "valid", "test"]


@dataclass(frozen=True)
class MetricEvent:
    """One measurement at one update step."""

    step: int
    """Optimizer updates done so far."""
    epoch: float
    split: Split
    loss: float | None = None
    accuracy: float | None = None
    """Percentage 0–100; None for `train`."""
    lr: float | None = None
    wall_time: float = 0.0
    """Seconds since the trainer process started."""
    metrics: dict[str, float] | None = None
    """Measurements other than loss and accuracy (a causal LM's `perplexity`,
    `exact_match`), by name; left out of the JSON when None, so a classifier's events
    carry only loss and accuracy."""

    def to_json(self) -> str:
        data = asdict(self)
        if self.metrics is None:
            del data["metrics"]
        return json.dumps(data, sort_keys=True)

    @classmethod
    def from_dict(cls, data: dict) -> MetricEvent:
        return cls(**{k: data.get(k) for k in cls.__dataclass_fields__ if k in data})

    def values(self) -> dict[str, float | None]:
        """Every measurement by name: loss, accuracy, then `metrics` (sorted by name)."""
        extra = sorted((self.metrics or {}).items())
        return {"loss": self.loss, "accuracy": self.accuracy, **dict(extra)}

    def value(self, name: str) -> float | None:
        return self.values().get(name)

    def is_finite(self) -> bool:
        return all(v is None or math.isfinite(v) for v in self.values().values())


def read_events(path: Path) -> list[MetricEvent]:
    """Events of a trial, one per (split, step): a resumed trainer may re-emit steps it
    measured before crashing, and the latest measurement is the one that stands. A line
    cut short (an attempt killed mid-write, or a full disk) is skipped: the runner starts
    each attempt on a fresh line, so nothing else is lost with it."""
    if not path.exists():
        return []
    latest: dict[tuple[str, int], MetricEvent] = {}
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            event = MetricEvent.from_dict(json.loads(line)) if line.strip() else None
        except (ValueError, KeyError, TypeError, AttributeError):
            continue
        if event is not None:
            latest[(event.split, event.step)] = event
    return sorted(latest.values(), key=lambda e: (e.step, e.split))


def best_validation(
    events: list[MetricEvent], selection: Selection = ACCURACY
) -> tuple[MetricEvent, MetricEvent | None] | None:
    """The validation point with the best selection metric (ties: earliest step) and the
    test event measured at that same step, if any (docs/architecture.md, invariant 3)."""
    valid = {e.step: e for e in events if e.split == "valid"}
    name = base_name(selection.metric)
    found = best_point(((step, e.value(name)) for step, e in valid.items()), selection.mode)
    if found is None:
        return None
    best = valid[found[0]]
    test = next((e for e in events if e.split == "test" and e.step == best.step), None)
    return best, test
