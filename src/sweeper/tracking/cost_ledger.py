"""The cost ledger: what each trial run held and used, attempt by attempt.

An attempt is one run of a trial on Ray: it starts when Ray starts the trial (its
resources are placed: Tune's `on_trial_start`) and ends at the Tune event that ends it:
complete, error, recover (a retry follows), an early stop, the sweep stopped under it,
or a preemption. The driver measures its wall time on its own monotonic clock, between
those two events, so the held time is the driver's view of the placement: the same
clock for every attempt, nothing a trial must send, and an attempt that dies with its
node or process is still closed by the event that reports its death. Held CPU- and
GPU-seconds are `resources.cpu` and `resources.gpu` times that wall time.

An attempt that ends without ending its trial (failed, retried, interrupted,
preempted: anything but finished or early-stopped) is **lost**: its held seconds are
counted again under `cost/lost_*`, whatever part of its work a checkpoint kept. A
caller that ends an attempt for a new reason need only say whether it ended the trial.

Beside the held time, each attempt records the CPU time its process tree used (and GPU
busy time where a GPU was sampled), as the trial last reported it
(`record_names.REPORT_CPU_TIME`): an attempt that fails between two reports keeps the
earlier value, so measured time can fall short of the truth, never exceed it.

Per attempt the metrics are logged at step = attempt number; the running totals at
the same step, so a run's latest value of each total is its sum over every attempt. A
resumed sweep seeds each run's totals and attempt count from what its run already
holds (`seed`, read by `recorded_totals`), so `--resume` adds to earlier attempts'
record instead of replacing it. An attempt open when its driver is killed is not
recorded (the driver that timed it is gone); the next driver's attempt is numbered
after the recorded ones.

No MLflow here but `recorded_totals`: the arithmetic is tested with a fake clock.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from sweeper import record_names as rn

if TYPE_CHECKING:
    from mlflow import MlflowClient

Point = tuple[int, str, float]
"""(step, metric key, value), as the Recorder logs it."""


@dataclass
class _Open:
    started: float
    cpu_time: float | None = None
    gpu_time: float | None = None


@dataclass
class _Totals:
    values: dict[str, float] = field(default_factory=lambda: dict.fromkeys(rn.COST_TOTALS, 0.0))

    @property
    def attempts(self) -> int:
        return int(self.values[rn.METRIC_COST_ATTEMPTS])


class CostLedger:
    """Open attempts and running totals per run, for one driver.

    `cpu` and `gpu` are what Ray holds for each trial (the spec's `resources`); `clock`
    is a monotonic clock in seconds (a test's fake)."""

    def __init__(self, cpu: float, gpu: float, clock: Callable[[], float] = time.monotonic):
        self.cpu = float(cpu)
        self.gpu = float(gpu)
        self._clock = clock
        self._open: dict[str, _Open] = {}
        self._totals: dict[str, _Totals] = {}

    def seed(self, run_id: str, recorded: Mapping[str, float]) -> None:
        """Start a run's totals from what it already holds (a resumed run)."""
        totals = self._totals.setdefault(run_id, _Totals())
        for key in rn.COST_TOTALS:
            if key in recorded:
                totals.values[key] = float(recorded[key])

    def is_open(self, run_id: str) -> bool:
        return run_id in self._open

    def open(self, run_id: str) -> None:
        """Ray started an attempt of the run's trial."""
        self._open[run_id] = _Open(self._clock())

    def measured(self, run_id: str, cpu_time: object, gpu_time: object) -> None:
        """The open attempt's CPU (and GPU) time so far, from a trial report; None or
        absent values leave what an earlier report said."""
        attempt = self._open.get(run_id)
        if attempt is None:
            return
        if isinstance(cpu_time, int | float):
            attempt.cpu_time = float(cpu_time)
        if isinstance(gpu_time, int | float):
            attempt.gpu_time = float(gpu_time)

    def close(self, run_id: str, lost: bool) -> list[Point]:
        """End the run's open attempt; its points and the new totals to log (none if no
        attempt is open: an end reported twice is counted once)."""
        attempt = self._open.pop(run_id, None)
        if attempt is None:
            return []
        wall = max(0.0, self._clock() - attempt.started)
        totals = self._totals.setdefault(run_id, _Totals())
        step = totals.attempts + 1
        cpu, gpu = self.cpu * wall, self.gpu * wall
        add = {
            rn.METRIC_COST_ATTEMPTS: 1.0,
            rn.METRIC_COST_LOST_ATTEMPTS: float(lost),
            rn.METRIC_COST_WALL: wall,
            rn.METRIC_COST_CPU: cpu,
            rn.METRIC_COST_GPU: gpu,
            rn.METRIC_COST_LOST_CPU: cpu if lost else 0.0,
            rn.METRIC_COST_LOST_GPU: gpu if lost else 0.0,
            rn.METRIC_COST_CPU_TIME: attempt.cpu_time or 0.0,
            rn.METRIC_COST_GPU_TIME: attempt.gpu_time or 0.0,
        }
        for key, value in add.items():
            totals.values[key] += value
        points: list[Point] = [
            (step, rn.METRIC_ATTEMPT_WALL, wall),
            (step, rn.METRIC_ATTEMPT_CPU, cpu),
            (step, rn.METRIC_ATTEMPT_GPU, gpu),
            (step, rn.METRIC_ATTEMPT_LOST, float(lost)),
        ]
        if attempt.cpu_time is not None:
            points.append((step, rn.METRIC_ATTEMPT_CPU_TIME, attempt.cpu_time))
        if attempt.gpu_time is not None:
            points.append((step, rn.METRIC_ATTEMPT_GPU_TIME, attempt.gpu_time))
        points += [(step, key, totals.values[key]) for key in rn.COST_TOTALS]
        return points


def recorded_totals(client: MlflowClient, run_id: str) -> dict[str, float]:
    """The cost totals a run holds (latest values; empty for a run without any)."""
    metrics = client.get_run(run_id).data.metrics
    return {key: float(metrics[key]) for key in rn.COST_TOTALS if key in metrics}
