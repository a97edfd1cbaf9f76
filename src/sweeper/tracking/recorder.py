"""The driver's writer of trial runs: statuses, tags, metrics and errors.

Only the driver writes a trial's metrics and tags (the trial itself only uploads its
artifacts). With the default SQLite store that keeps one writer per database, and with
any store it gives one place that knows what a run already holds, which is what makes
metric logging idempotent across Ray retries and `--resume`: a point is logged only if
its step is beyond the last step that run has for that metric.

Trials report metric points as `[step, key, value]` triples (see `sweeper.tune`); this
module knows nothing of Ray, so its rules are tested against a real MLflow store alone.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from sweeper import layout

if TYPE_CHECKING:
    from mlflow import MlflowClient

ERROR_ARTIFACT = "error.txt"
TAG_LIMIT = 8000  # mlflow.utils.validation.MAX_TAG_VAL_LENGTH
METRICS_PER_BATCH = 1000  # MLflow's per-request metric limit

Point = tuple[int, str, float]


class MetricLog:
    """Last logged step per (run, metric): the dedupe rule for re-emitted points."""

    def __init__(self) -> None:
        self._last: dict[tuple[str, str], int] = {}

    def seed(self, run_id: str, last_steps: Mapping[str, int]) -> None:
        """Start from what a run already holds (a resumed run)."""
        for key, step in last_steps.items():
            self._last[(run_id, key)] = max(step, self._last.get((run_id, key), step))

    def new_points(self, run_id: str, points: Iterable[Sequence[Any]]) -> list[Point]:
        """The points not logged yet, in order; marks them as logged."""
        kept: list[Point] = []
        for step, key, value in points:
            step = int(step)
            if step > self._last.get((run_id, key), -1) and value is not None:
                kept.append((step, str(key), float(value)))
                self._last[(run_id, key)] = step
        return kept


def last_steps(client: MlflowClient, run_id: str, keys: Iterable[str]) -> dict[str, int]:
    """Highest logged step of each metric of a run (absent metrics left out)."""
    steps: dict[str, int] = {}
    for key in keys:
        history = client.get_metric_history(run_id, key)
        if history:
            steps[key] = max(int(m.step) for m in history)
    return steps


def error_tag(text: str, limit: int = TAG_LIMIT) -> str:
    """An error for the `sweeper.error` tag: whole if it fits, else its first line (the
    reason) and as much of its end (the log tail, where the cause is) as fits."""
    text = text.rstrip()
    if len(text) <= limit:
        return text
    first = text.splitlines()[0][: limit // 4]
    marker = "\n[...]\n"
    return first + marker + text[-(limit - len(first) - len(marker)) :]


class Recorder:
    """Writes what the driver learns about each trial into that trial's run."""

    def __init__(self, client: MlflowClient, runs: Mapping[str, str], metrics: MetricLog):
        self.client = client
        self.runs = dict(runs)
        """trial key -> run id"""
        self.metrics = metrics
        self._node_seen: set[str] = set()

    def started(self, key: str, ray_trial_id: str) -> None:
        """A (re)start: the run is RUNNING again, whatever it was before."""
        run_id = self.runs[key]
        self._tags(
            run_id,
            {layout.TAG_STATUS: layout.STATUS_RUNNING, layout.TAG_RAY_TRIAL_ID: ray_trial_id},
        )
        self.client.update_run(run_id, status="RUNNING")

    def result(self, key: str, result: Mapping[str, Any]) -> int:
        """Log a trial report's new metric points (and its node, params counts); returns
        how many points were new."""
        from mlflow.entities import Metric

        run_id = self.runs[key]
        tags: dict[str, str] = {}
        node = result.get("node")
        if node and run_id not in self._node_seen:
            tags[layout.TAG_NODE] = str(node)
            self._node_seen.add(run_id)
        for name, tag in (
            ("trainable_params", layout.TAG_TRAINABLE_PARAMS),
            ("total_params", layout.TAG_TOTAL_PARAMS),
        ):
            if result.get(name) is not None:
                tags[tag] = str(int(result[name]))
        if tags:
            self._tags(run_id, tags)
        now = int(time.time() * 1000)
        points = self.metrics.new_points(run_id, result.get("points") or ())
        metrics = [Metric(k, v, now, s) for s, k, v in points]
        for start in range(0, len(metrics), METRICS_PER_BATCH):
            self.client.log_batch(
                run_id, metrics=metrics[start : start + METRICS_PER_BATCH], synchronous=True
            )
        return len(metrics)

    def finished(self, key: str) -> None:
        run_id = self.runs[key]
        self._tags(run_id, {layout.TAG_STATUS: layout.STATUS_FINISHED})
        self.client.set_terminated(run_id, status="FINISHED")

    def failed(self, key: str, error: str) -> None:
        """Past its retries: FAILED, with the error tail as a tag and as error.txt."""
        run_id = self.runs[key]
        self.client.log_text(run_id, error, ERROR_ARTIFACT)
        self._tags(
            run_id, {layout.TAG_STATUS: layout.STATUS_FAILED, layout.TAG_ERROR: error_tag(error)}
        )
        self.client.set_terminated(run_id, status="FAILED")

    def interrupted(self, key: str) -> None:
        """The sweep stopped before this trial ended (Ctrl-C): KILLED, resumable."""
        self.client.set_terminated(self.runs[key], status="KILLED")

    def _tags(self, run_id: str, tags: Mapping[str, str]) -> None:
        from mlflow.entities import RunTag

        self.client.log_batch(
            run_id, tags=[RunTag(k, v) for k, v in tags.items()], synchronous=True
        )
