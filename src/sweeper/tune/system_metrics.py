"""System metrics of a running trial, for the run page's "System metrics" tab.

MLflow's own monitor (`mlflow.start_run(log_system_metrics=True)`) logs from the
process that holds the run, through its own MLflow client. A sweeper trial holds no
run and opens no tracking store (its metrics travel to the driver in Tune reports,
`sweeper.tune.trainable`), and the process that does the work is the trainer
subprocess, which MLflow's monitor would not see. So the trial samples with the same
libraries MLflow uses (psutil, and NVML through `nvidia-ml-py` where a GPU driver is
present) and sends the values as ordinary metric points under MLflow's `system/`
names, which the UI groups into that tab:

- `system/cpu_utilization_percentage`, `system/system_memory_usage_megabytes`,
  `system/system_memory_usage_percentage`: the node, as MLflow's monitor reports it;
- `system/process_cpu_utilization_percentage`, `system/process_memory_usage_megabytes`:
  the trial's own process tree (Ray worker plus trainer), which on a shared node is what
  tells one trial from another (100% = one core);
- `system/gpu_{i}_utilization_percentage`, `system/gpu_{i}_memory_usage_megabytes`,
  `system/gpu_{i}_memory_usage_percentage`: each GPU the trial may use, when NVML
  answers; `i` is the device's index as the trainer sees it (`cuda:i`), i.e. its
  position in the `CUDA_VISIBLE_DEVICES` Ray gave the trial.

Two more values go to the cost ledger (`sweeper.tracking.cost_ledger`) in every Tune
report rather than as points: `cpu_seconds()`, the CPU time (user + system) the process
tree has used since the sampler was made (one sampler per attempt), and `gpu_seconds`,
GPU busy time estimated from the sampled utilization (each sample's percentage times
the seconds since the previous sample, summed over the trial's GPUs): NVML reports
utilization over its last short window, so this is an estimate, where CPU time is
measured. CPU time counts the live tree and, through the kernel's `children_*` times,
every descendant that ended and was waited for (the trainer subprocess); a descendant
that ends between two readings without being waited for is missed, so the value can
fall short, never exceed.

Megabytes are 10^6 bytes, as in MLflow. A point's step is the trainer's step when it
was taken: one at every validation point and at most one per `interval_s` between them.
"""

from __future__ import annotations

import contextlib
import os
import time
from typing import Any

import psutil

from sweeper.trainers.devices import visible_gpus

PREFIX = "system/"
INTERVAL_S = 10.0
"""Seconds between samples at train events (validation points are always sampled)."""
MB = 1e6


class SystemSampler:
    """Samples the node and the process tree rooted at `pid` (default: this process)."""

    def __init__(self, interval_s: float = INTERVAL_S, pid: int | None = None):
        self.interval_s = interval_s
        self._root = psutil.Process(pid or os.getpid())
        self._procs: dict[int, psutil.Process] = {}
        self._last = time.monotonic()
        self._gpus = visible_gpus()
        self.gpu_seconds: float | None = 0.0 if self._gpus else None
        """GPU busy seconds so far (estimated); None when no GPU is visible."""
        psutil.cpu_percent(interval=None)  # CPU percentages are since the previous call
        self._tree()
        self._root_start = _cpu_total(self._root, children=True) or 0.0

    def due(self) -> bool:
        return time.monotonic() - self._last >= self.interval_s

    def sample(self) -> dict[str, float]:
        """The current values, keyed by full metric name."""
        previous, self._last = self._last, time.monotonic()
        memory = psutil.virtual_memory()
        cpu, rss = 0.0, 0
        for proc in self._tree():
            with contextlib.suppress(psutil.Error):
                cpu += proc.cpu_percent(interval=None)
                rss += proc.memory_info().rss
        values = {
            "cpu_utilization_percentage": psutil.cpu_percent(interval=None),
            "system_memory_usage_megabytes": memory.used / MB,
            "system_memory_usage_percentage": memory.percent,
            "process_cpu_utilization_percentage": cpu,
            "process_memory_usage_megabytes": rss / MB,
        }
        gpus = _gpu_values(self._gpus)
        if self.gpu_seconds is not None:
            busy = sum(v for k, v in gpus.items() if k.endswith("_utilization_percentage"))
            self.gpu_seconds += busy / 100.0 * (self._last - previous)
        values.update(gpus)
        return {PREFIX + name: round(float(value), 3) for name, value in values.items()}

    def cpu_seconds(self) -> float:
        """CPU time (user + system, children waited for included) of the process tree
        since this sampler was made: the root's growth plus each descendant's total."""
        root = _cpu_total(self._root, children=True)
        total = 0.0 if root is None else max(0.0, root - self._root_start)
        for proc in self._tree()[1:]:  # one that ended and was waited for is in its
            total += _cpu_total(proc, children=True) or 0.0  # parent's children times
        return total

    def _tree(self) -> list[psutil.Process]:
        """The live process tree, reusing Process objects: psutil measures a process's
        CPU share between two calls on the same object, so a new one reads 0 once."""
        try:
            current = [self._root, *self._root.children(recursive=True)]
        except psutil.Error:
            return []
        alive = {proc.pid: self._procs.get(proc.pid, proc) for proc in current}
        for pid, proc in alive.items():
            if pid not in self._procs:
                with contextlib.suppress(psutil.Error):
                    proc.cpu_percent(interval=None)  # starts its measurement
        self._procs = alive
        return list(alive.values())


def _cpu_total(proc: psutil.Process, children: bool) -> float | None:
    """User + system seconds of `proc` (and of its waited-for children); None if gone."""
    try:
        times = proc.cpu_times()
    except psutil.Error:
        return None
    total = times.user + times.system
    if children:
        total += getattr(times, "children_user", 0.0) + getattr(times, "children_system", 0.0)
    return total


def _gpu_values(handles: list[Any]) -> dict[str, float]:
    if not handles:
        return {}
    import pynvml

    values: dict[str, float] = {}
    for i, handle in enumerate(handles):
        with contextlib.suppress(pynvml.NVMLError):
            memory = pynvml.nvmlDeviceGetMemoryInfo(handle)
            values[f"gpu_{i}_memory_usage_megabytes"] = memory.used / MB
            values[f"gpu_{i}_memory_usage_percentage"] = 100.0 * memory.used / memory.total
            values[f"gpu_{i}_utilization_percentage"] = float(
                pynvml.nvmlDeviceGetUtilizationRates(handle).gpu
            )
    return values
