"""Load on a tracking server in steps, to find the points per second where it saturates.

`saturation(uri, ...)` opens one run per writer and, for each step of writers at once
(1, 2, 4, ... `most`), has that many threads send `log_batch` requests of `points`
metric points each, back to back, for `seconds`; each step reports the points per
second the server stored and the requests' median and 95th-percentile latency.
`knee(steps)` is the first step within 10% of the best throughput: past it the server
(or, on a small machine, the machine) is saturated, and more writers only queue.
Every step runs (a single step's figure is noisy on a shared machine). Each request
is what the driver sends for one trial report (its points in one batch), so writers
stand for trials reporting at once with no pause between reports.

The writers are threads of this process: their client-side cost (JSON, HTTP) is small
beside the server's (the request, SQLAlchemy, the database), but on a machine of few
cores they share those cores with the server, so the figures are a floor.
"""

from __future__ import annotations

import statistics
import threading
import time
from dataclasses import dataclass


@dataclass(frozen=True)
class LoadStep:
    writers: int
    requests: int
    points_per_s: float
    p50_ms: float
    p95_ms: float
    refused: int
    """requests the server answered with an error (e.g. its database pool exhausted)"""
    error: str
    """the first such error's first line ("" if none)"""

    def line(self) -> str:
        refused = f", {self.refused} refused: {self.error}" if self.refused else ""
        return (
            f"{self.writers} writers: {self.points_per_s:.0f} points/s ({self.requests} "
            f"requests, p50 {self.p50_ms:.0f} ms, p95 {self.p95_ms:.0f} ms{refused})"
        )


def step(uri: str, run_ids: list[str], points: int, seconds: float) -> LoadStep:
    """One step: a writer thread per run, each logging batches of `points` for `seconds`."""
    from mlflow import MlflowClient
    from mlflow.entities import Metric

    client = MlflowClient(uri)
    latencies: list[float] = []
    errors: list[str] = []
    lock = threading.Lock()
    stop = time.monotonic() + seconds

    def write(run_id: str) -> None:
        step_no, mine = 0, []
        while time.monotonic() < stop:
            step_no += 1
            now = int(time.time() * 1000)
            batch = [Metric(f"load_{k}", float(k), now, step_no) for k in range(points)]
            started = time.monotonic()
            try:
                client.log_batch(run_id, metrics=batch, synchronous=True)
            except Exception as exc:  # the server refused: counted, not stored
                with lock:
                    errors.append(str(exc).strip().splitlines()[0][:200])
                continue
            mine.append(time.monotonic() - started)
        with lock:
            latencies.extend(mine)

    began = time.monotonic()
    threads = [threading.Thread(target=write, args=(run_id,)) for run_id in run_ids]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    took = time.monotonic() - began
    ordered = sorted(latencies) or [0.0]
    return LoadStep(
        writers=len(run_ids),
        requests=len(latencies),
        points_per_s=len(latencies) * points / took,
        p50_ms=statistics.median(ordered) * 1000,
        p95_ms=ordered[int(0.95 * (len(ordered) - 1))] * 1000,
        refused=len(errors),
        error=errors[0] if errors else "",
    )


def saturation(
    uri: str, experiment: str, points: int = 20, seconds: float = 6.0, most: int = 16
) -> list[LoadStep]:
    """Steps of 1, 2, 4, ... `most` writers."""
    from mlflow import MlflowClient

    client = MlflowClient(uri)
    experiment_id = client.create_experiment(experiment)
    run_ids = [client.create_run(experiment_id).info.run_id for _ in range(most)]
    steps: list[LoadStep] = []
    writers = 1
    while writers <= most:
        steps.append(step(uri, run_ids[:writers], points, seconds))
        writers *= 2
    return steps


def knee(steps: list[LoadStep], within: float = 0.10) -> LoadStep:
    """The first step whose throughput is within `within` of the best step's."""
    best = max(s.points_per_s for s in steps)
    return next(s for s in steps if s.points_per_s >= (1 - within) * best)
