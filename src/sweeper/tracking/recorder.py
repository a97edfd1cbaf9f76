"""The driver's writer of trial runs: statuses, tags, metrics and errors.

Only the driver writes a trial's metrics and tags (the trial itself only uploads its
artifacts). With the default SQLite store that keeps one writer per database, and with
any store it gives one place that knows what a run already holds, which is what makes
metric logging idempotent across Ray retries and `--resume`: a point is logged only if
its step is beyond the last step that run has for that metric. The one exception is a
report's `corrections`: a step a resumed trainer measured again with other values, so
the step's latest point in MLflow is the measurement that stands (as in the events
file, and for the checkpoint on disk).

Trials report metric points as `[step, key, value]` triples (see `sweeper.tune`); this
module knows nothing of Ray, so its rules are tested against a real MLflow store alone.

With a `CostLedger` (`sweeper.tracking.cost_ledger`) it also times each attempt of a
trial, from `started` to the call that ends it (`finished`, `failed`, `retrying`,
`interrupted`, or `attempt_ended` for any other end), and logs what the attempt held
and used.

Every write goes through an `Outbox` (`sweeper.tracking.outbox`): in order (per run),
buffered and retried while the store is unreachable, so a restarted tracking server
costs no point; `drain()` at the end of the sweep waits (bounded) for the last ones.
A run's metrics and tags go as batches the outbox may join, so one report is one
request (its tags with its points), and under load several are.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from sweeper import record_names
from sweeper.tracking.outbox import Outbox

if TYPE_CHECKING:
    from mlflow import MlflowClient
    from mlflow.entities import RunInfo

    from sweeper.tracking.cost_ledger import CostLedger

ERROR_ARTIFACT = "error.txt"
TAG_LIMIT = 8000  # mlflow.utils.validation.MAX_TAG_VAL_LENGTH
METRICS_PER_BATCH = 1000  # MLflow's per-request metric limit

MetricPoint = tuple[int, str, float]
"""(step, metric key, value): one point for the driver to log (not the summariser's
`sweeper.summarize.records.Point`, which is a logged value read back)."""


class MetricLog:
    """Last logged step per (run, metric): the dedupe rule for re-emitted points."""

    def __init__(self) -> None:
        self._last: dict[tuple[str, str], int] = {}

    def seed(self, run_id: str, last_steps: Mapping[str, int]) -> None:
        """Start from what a run already holds (a resumed run)."""
        for key, step in last_steps.items():
            self._last[(run_id, key)] = max(step, self._last.get((run_id, key), step))

    def new_points(self, run_id: str, points: Iterable[Sequence[Any]]) -> list[MetricPoint]:
        """The points not logged yet, in order; marks them as logged."""
        kept: list[MetricPoint] = []
        for step, key, value in points:
            step = int(step)
            if step > self._last.get((run_id, key), -1) and value is not None:
                kept.append((step, str(key), float(value)))
                self._last[(run_id, key)] = step
        return kept


def last_steps(client: MlflowClient, run_id: str) -> dict[str, int]:
    """Highest logged step of every metric the run holds: all of them, since a trial
    logs names no fixed list holds (a class's precision, recall and F1; its task's
    measurements; system samples), and a resumed trial's replay sends each again."""
    steps: dict[str, int] = {}
    for key in client.get_run(run_id).data.metrics:
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

    def __init__(
        self,
        client: MlflowClient,
        runs: Mapping[str, str],
        metrics: MetricLog,
        outbox: Outbox | None = None,
        ledger: CostLedger | None = None,
        infos: Mapping[str, RunInfo] | None = None,
    ):
        self.client = client
        self.runs = dict(runs)
        """trial key -> run id"""
        self.metrics = metrics
        self.outbox = outbox or Outbox()
        self.ledger = ledger
        """Times each attempt (None: no cost ledger is kept)."""
        self.infos = dict(infos or {})
        """run id -> its RunInfo where the caller read it already (no second read)"""
        self._node: dict[str, str] = {}
        """run id -> node last tagged: a retry on another node re-tags the run"""
        self._versions: dict[str, str] = {}
        """run id -> package versions last tagged, the same way"""
        self._best: dict[str, list[MetricPoint]] = {}
        """run id -> its final report's best-checkpoint points, until it finishes"""
        self._models: dict[str, str] = {}
        """run id -> the logged model made for it (one, however often the write retries)"""

    def started(self, key: str, ray_trial_id: str) -> None:
        """A (re)start: the run is RUNNING again, whatever it was before. An attempt
        still open (its end never reported) is closed as lost first."""
        run_id = self.runs[key]
        if self.ledger is not None:
            self.attempt_ended(key, lost=True)
            self.ledger.open(run_id)
        self._put(
            f"status of run {run_id}", run_id,
            self.client.update_run, run_id, status=record_names.RunState.RUNNING, status_write=True,
        )  # fmt: skip
        self._tags(  # after the status: it may go with the first report's points
            run_id,
            {
                record_names.TAG_STATUS: record_names.Status.RUNNING,
                record_names.TAG_RAY_TRIAL_ID: ray_trial_id,
            },
        )

    def result(self, key: str, result: Mapping[str, Any]) -> int:
        """Log a trial report's new metric points (and its node, params counts, the tags
        the trial sent, `record_names.REPORT_TAGS`: its seed evidence, the splits whose
        predictions it uploaded); returns how many points were new."""
        from mlflow.entities import Metric

        run_id = self.runs[key]
        if self.ledger is not None:
            self.ledger.measured(
                run_id,
                result.get(record_names.REPORT_CPU_TIME),
                result.get(record_names.REPORT_GPU_TIME),
            )
        tags: dict[str, str] = {}
        node = result.get("node")
        if node and self._node.get(run_id) != str(node):
            tags[record_names.TAG_NODE] = self._node[run_id] = str(node)
        versions = result.get("versions")
        if versions and self._versions.get(run_id) != versions:
            tags[record_names.TAG_VERSIONS] = self._versions[run_id] = str(versions)
        for name, tag in (
            ("trainable_params", record_names.TAG_TRAINABLE_PARAMS),
            ("total_params", record_names.TAG_TOTAL_PARAMS),
        ):
            if result.get(name) is not None:
                tags[tag] = str(int(result[name]))
        if result.get(record_names.REPORT_TAGS):  # the trial's own, e.g. its seed evidence
            tags.update(json.loads(str(result[record_names.REPORT_TAGS])))
        now = int(time.time() * 1000)
        points = self.metrics.new_points(run_id, result.get("points") or ())
        best = [p for p in points if _is_best(p[1])]
        if best:  # logged with the trial's model when it finishes (`finished`)
            self._best[run_id] = best
        metrics = [Metric(k, v, now, s) for s, k, v in points if not _is_best(k)]
        # A step measured again after a resume, with other values: logged at the same
        # step, later, so readers that take a step's latest value get the new one.
        corrections = result.get("corrections") or ()
        metrics += [Metric(k, float(v), now, int(s)) for s, k, v in corrections]
        for start in range(0, max(len(metrics), 1 if tags else 0), METRICS_PER_BATCH):
            batch = metrics[start : start + METRICS_PER_BATCH]
            self._batch(f"{len(batch)} metric point(s) of run {run_id}", run_id, batch, tags)
            tags = {}  # with the first batch
        return len(metrics)

    def finished(self, key: str) -> None:
        """FINISHED; its best-checkpoint metrics go to the run and to a logged model of
        the best checkpoint (`tracking.models`), or to the run alone if the store has
        no logged models."""
        from mlflow.entities import RunTag

        run_id = self.runs[key]
        best = self._best.pop(run_id, [])
        cost = self._attempt_metrics(key, lost=False)
        status = {record_names.TAG_STATUS: record_names.Status.FINISHED}
        if best:  # the attempt's cost and the status go in the model's batch
            tags = [RunTag(k, v) for k, v in status.items()]
            self.outbox.put(
                f"best checkpoint of run {run_id}",
                lambda: self._model(key, best, cost, tags),
                run_id=run_id,
                points=len(best) + len(cost),
            )
        else:
            self._batch(f"cost and status of run {run_id}", run_id, cost, status)
        self._end(run_id, record_names.RunState.FINISHED)

    def _model(self, key: str, best: list[MetricPoint], cost: list[Any], tags: list[Any]) -> None:
        from mlflow.entities import Metric
        from mlflow.exceptions import MlflowException

        from sweeper.tracking.models import log_best_model

        run_id = self.runs[key]
        values, step = {k: v for _, k, v in best}, max(s for s, _, _ in best)
        try:
            log_best_model(
                self.client, run_id, key, values, step, self._models, self.infos.get(run_id),
                also=cost, tags=tags,
            )  # fmt: skip
        except MlflowException as exc:
            if exc.error_code not in ("ENDPOINT_NOT_FOUND", "NOT_IMPLEMENTED"):
                raise
            now = int(time.time() * 1000)  # a store without logged models: the run only
            metrics = [Metric(k, v, now, step) for k, v in values.items()]
            self.client.log_batch(run_id, metrics=metrics + cost, tags=tags, synchronous=True)

    def preempted(self, key: str, history: Sequence[tuple[int | None, str]]) -> None:
        """Tag the run with its preemptions so far: how many, and each one's step and
        node (the run stays one run; its trial resumes elsewhere). The node list is
        JSON kept whole: past the tag limit, the oldest entries are left out."""
        import json

        entries = [list(h) for h in history]
        listed = json.dumps(entries)
        while len(listed) > TAG_LIMIT and len(entries) > 1:
            entries = entries[1:]
            listed = json.dumps(entries)
        tags = {
            record_names.TAG_PREEMPTIONS: str(len(history)),
            record_names.TAG_PREEMPTED_ON: listed,
        }
        self._tags(self.runs[key], tags)

    def failed(self, key: str, error: str) -> None:
        """Past its retries: FAILED, with the error tail as a tag and, where the artifact
        store takes it, whole as error.txt (optional: the failure may be that store's).
        Secrets a traceback may quote (a URL's password, a token's value) are masked."""
        from sweeper.redact import redact

        run_id, error = self.runs[key], redact(error)
        self.attempt_ended(key, lost=True)
        self.outbox.put(
            f"{ERROR_ARTIFACT} of run {run_id}",
            lambda: self.client.log_text(run_id, error, ERROR_ARTIFACT),
            optional=True,
            run_id=run_id,
        )
        self._tags(
            run_id,
            {
                record_names.TAG_STATUS: record_names.Status.FAILED,
                record_names.TAG_ERROR: error_tag(error),
            },
        )
        self._end(run_id, record_names.RunState.FAILED)

    def interrupted(self, key: str) -> None:
        """The sweep stopped before this trial ended (Ctrl-C): KILLED, resumable; its
        open attempt is lost work."""
        self.attempt_ended(key, lost=True)
        self._end(self.runs[key], record_names.RunState.KILLED)

    def retrying(self, key: str) -> None:
        """The trial failed and Ray will start it again: this attempt is lost work."""
        self.attempt_ended(key, lost=True)

    def attempt_ended(self, key: str, lost: bool) -> None:
        """Close the trial's open attempt, if any, and log what it held and used
        (`sweeper.tracking.cost_ledger`); `lost`: it ended without ending its trial."""
        run_id = self.runs[key]
        metrics = self._attempt_metrics(key, lost)
        if metrics:
            self._batch(f"cost of attempt {metrics[0].step} of run {run_id}", run_id, metrics)

    def _attempt_metrics(self, key: str, lost: bool) -> list[Any]:
        """Close the trial's open attempt, if any: the metrics of what it held and used."""
        points = self.ledger.close(self.runs[key], lost) if self.ledger is not None else []
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        return [Metric(k, v, now, s) for s, k, v in points]

    def check(self) -> None:
        """Raise TrackingDown if the store has stayed unreachable past the bound."""
        self.outbox.check()

    def drain(self) -> None:
        """Wait (bounded) until every buffered write has reached the store."""
        self.outbox.drain()

    def _tags(self, run_id: str, tags: Mapping[str, str]) -> None:
        self._batch(f"tags of run {run_id}", run_id, (), tags)

    def _batch(
        self, what: str, run_id: str, metrics: Sequence[Any], tags: Mapping[str, str] = {}
    ) -> None:
        """A `log_batch` of the run's metrics and tags (the outbox may join it)."""
        from mlflow.entities import RunTag

        def send(metrics: list[Any], tags: list[Any]) -> None:
            self.client.log_batch(run_id, metrics=metrics, tags=tags, synchronous=True)

        run_tags = [RunTag(k, v) for k, v in tags.items()]
        self.outbox.put_batch(what, run_id, send, metrics, run_tags)

    def _end(self, run_id: str, state: record_names.RunState) -> None:
        """The run's end, at the time the driver learned it (not when the write reaches
        the store, which the outbox's linger or an outage delays)."""
        ended = int(time.time() * 1000)
        self._put(
            f"end of run {run_id}", run_id,
            self.client.set_terminated, run_id, status=state, end_time=ended, status_write=True,
        )  # fmt: skip

    def _put(
        self,
        what: str,
        run_id: str,
        method: Callable[..., object],
        *args: Any,
        status_write: bool = False,
        **kwargs: Any,
    ) -> None:
        """Queue `method(*args, **kwargs)`; `status_write`: it sets the run's status
        (one a later status write of the run overrides is not sent)."""
        self.outbox.put(what, lambda: method(*args, **kwargs), run_id=run_id, status=status_write)


def _is_best(key: str) -> bool:
    """A best-checkpoint metric (`Selection.best_names`): logged with the trial's model."""
    return key.startswith(record_names.METRIC_BEST_PREFIX)
