"""What a sweep's trials held, read back from their cost ledgers, and its price.

Each trial run's latest `cost/...` values are its totals over every attempt (the
driver's ledger, `sweeper.tracking.cost_ledger`); `Spend` is such totals summed over a
set of runs, `Prices` the spec's `cost:` block. Held resource-seconds, not measured
CPU time, are what the hours and the money are of: a reservation is paid for whether
the trial used it or not, and lost attempts were paid for too.

The estimate for an undecided comparison (`needed`) prices the trials it would still
take: each group brought to the seeds needed, at that group's recorded seconds per
counted trial (its runs' held seconds, lost attempts and failed runs included, over
its counted trials), so a group that often fails is estimated at what it took to get
a counted trial out of it, and a group that never failed at its mean.

Plain records and arithmetic on mappings: nothing here reads a store.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from sweeper import record_names as rn

HOUR = 3600.0

_FIELDS = {
    "attempts": rn.METRIC_COST_ATTEMPTS,
    "lost_attempts": rn.METRIC_COST_LOST_ATTEMPTS,
    "cpu_seconds": rn.METRIC_COST_CPU,
    "gpu_seconds": rn.METRIC_COST_GPU,
    "lost_cpu_seconds": rn.METRIC_COST_LOST_CPU,
    "lost_gpu_seconds": rn.METRIC_COST_LOST_GPU,
    "cpu_time_seconds": rn.METRIC_COST_CPU_TIME,
    "gpu_time_seconds": rn.METRIC_COST_GPU_TIME,
}
"""Spend field -> the run metric (latest value: the run's total) it sums."""


@dataclass(frozen=True)
class Prices:
    """The spec's `cost:` block as the summary needs it."""

    cpu_hour: float
    gpu_hour: float
    currency: str

    def of(self, cpu_seconds: float, gpu_seconds: float) -> float:
        """The price of that many held CPU- and GPU-seconds."""
        return (cpu_seconds * self.cpu_hour + gpu_seconds * self.gpu_hour) / HOUR

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class Spend:
    """Cost-ledger totals summed over runs (seconds; `*_hours` for the tables)."""

    runs: int = 0
    """Runs with a ledger (runs recorded before it have none and add nothing)."""
    attempts: int = 0
    lost_attempts: int = 0
    """Attempts that ended without ending their trial (failed, retried, interrupted,
    preempted)."""
    cpu_seconds: float = 0.0
    """CPU-seconds held: resources.cpu x each attempt's wall time, lost ones included."""
    gpu_seconds: float = 0.0
    lost_cpu_seconds: float = 0.0
    """The part of cpu_seconds held by lost attempts."""
    lost_gpu_seconds: float = 0.0
    cpu_time_seconds: float = 0.0
    """CPU time the trials' process trees measured (at most what was held, roughly)."""
    gpu_time_seconds: float = 0.0
    """GPU busy time estimated from sampled utilization (0 without a GPU)."""

    @classmethod
    def of_run(cls, latest: Mapping[str, float]) -> Spend | None:
        """One run's totals from its latest metric values; None if it has no ledger."""
        if rn.METRIC_COST_ATTEMPTS not in latest:
            return None
        values = {name: float(latest.get(metric) or 0.0) for name, metric in _FIELDS.items()}
        values["attempts"] = int(values["attempts"])
        values["lost_attempts"] = int(values["lost_attempts"])
        return cls(runs=1, **values)  # type: ignore[arg-type]

    @classmethod
    def total(cls, spends: Iterable[Spend]) -> Spend:
        """The sum of `spends` (an empty sum is zero)."""
        result = cls()
        for spend in spends:
            result = cls(
                **{
                    f.name: getattr(result, f.name) + getattr(spend, f.name)
                    for f in dataclasses.fields(cls)
                }
            )
        return result

    @property
    def cpu_hours(self) -> float:
        return self.cpu_seconds / HOUR

    @property
    def gpu_hours(self) -> float:
        return self.gpu_seconds / HOUR

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}


@dataclass(frozen=True)
class SweepCost:
    """The summary's cost: the sweep's total, its parts, and the prices if given."""

    total: Spend
    """Every trial run of the sweep: grid, search and confirm, counted or not."""
    groups: dict[str, Spend]
    """Per Table 2 group: its grid or confirm runs, counted or not."""
    search: Spend | None = None
    """The search stage's runs (None for a grid sweep)."""
    prices: Prices | None = None

    @property
    def gpu(self) -> bool:
        """Whether any trial held a GPU (the tables then show GPU-hours)."""
        return self.total.gpu_seconds > 0

    def money(self, spend: Spend) -> float | None:
        """What `spend` cost at the prices; None without prices."""
        if self.prices is None:
            return None
        return self.prices.of(spend.cpu_seconds, spend.gpu_seconds)

    def to_dict(self) -> dict[str, Any]:
        return {
            "unit": "seconds of resources held (cpu/gpu x wall), every attempt",
            "total": self.total.to_dict(),
            "cost": self.money(self.total),
            "search": None if self.search is None else self.search.to_dict(),
            "groups": {name: spend.to_dict() for name, spend in self.groups.items()},
            "prices": None if self.prices is None else self.prices.to_dict(),
        }


@dataclass(frozen=True)
class Needed:
    """What deciding one comparison would still take, estimated."""

    trials: int
    cpu_seconds: float
    gpu_seconds: float


def per_trial(spend: Spend, counted: int) -> tuple[float, float] | None:
    """(CPU-seconds, GPU-seconds) per counted trial of a group; None without either."""
    if counted <= 0 or spend.runs == 0:
        return None
    return spend.cpu_seconds / counted, spend.gpu_seconds / counted


def needed(
    seeds: int, have: Mapping[str, int], rates: Mapping[str, tuple[float, float] | None]
) -> Needed | None:
    """Trials and held seconds to bring every group in `have` (group -> seeds it has)
    to `seeds`, each at its rate; None when a group that needs trials has no rate."""
    trials, cpu, gpu = 0, 0.0, 0.0
    for group, n in have.items():
        more = max(0, seeds - n)
        if more == 0:
            continue
        rate = rates.get(group)
        if rate is None:
            return None
        trials, cpu, gpu = trials + more, cpu + more * rate[0], gpu + more * rate[1]
    return Needed(trials, cpu, gpu)
