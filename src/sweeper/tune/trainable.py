"""The trial side of the Tune layer: what runs inside a Ray trial, and what it reports.

A Ray trial runs one sweep trial: what it computes stays entirely in
`sweeper.trainers.trial_pipeline.run_trial`, the function `sweeper trial` calls too. A trial's
folder (`trial_dir`) is a function of its key, so a Ray retry, or a resumed sweep,
restarts the trainer where its own last checkpoint left off; Tune checkpoints are not
used at all.

A trial talks to MLflow only to upload its artifacts; its metrics travel in Tune
reports to the driver, which records them (`sweeper.tracking.recorder`, through
`sweeper.tune.callback`). Each report carries the metric points since the previous one
as `[step, key, value]` triples, so train-loss points logged between validations reach
MLflow through the same channel.

Ray is imported inside the functions: `sweeper --help` must not load it.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sweeper import record_names
from sweeper.selection import ACCURACY, Selection, best_metrics
from sweeper.spec.schema import SweepSpec
from sweeper.tracking.resume_sync import CheckpointSync
from sweeper.tracking.staging import StagedInput
from sweeper.tracking.sweep_run import versions_json
from sweeper.trainers.events import MetricEvent, best_validation, read_events
from sweeper.trainers.runner import TrainerPreempted, TrialResult
from sweeper.trainers.seed_evidence import evidence_tags
from sweeper.trainers.trial_pipeline import SweepInputs
from sweeper.trial_keys import Trial

if TYPE_CHECKING:
    from sweeper.tune.system_metrics import SystemSampler

CONFIG_KEY = "trial_key"
"""The one entry of a Ray trial's config: which sweep trial it is."""
FINAL = "sweeper_final"
"""Marks a trial's last report (artifacts uploaded, parameter counts known)."""
POINTS = "points"
CORRECTIONS = "corrections"
"""Points of a step measured again after a resume with other values (see Reporter)."""


@dataclass(frozen=True)
class RunRef:
    """The MLflow run a trial belongs to, as the trial needs it."""

    run_id: str
    artifact_uri: str


@dataclass(frozen=True)
class TrialContext:
    """Everything a Ray trial needs, shipped once through `tune.with_parameters`."""

    spec: SweepSpec
    trials: dict[str, Trial]
    inputs: SweepInputs
    runs: dict[str, RunRef]
    tracking_uri: str
    threads: int
    staged: tuple[StagedInput, ...] = ()
    """Inputs the driver published to a remote artifact store (`tracking.staging`);
    empty when trials read the driver's paths (a local store)."""
    pretraining: Any = None
    """Ray ObjectRef of the pretraining stage running beside the trials
    (`sweeper.tune.pretrain_task`): `pretrained` trials wait for it. None when
    `inputs.pretrained` was ready before the trials started."""


def event_points(event: MetricEvent) -> list[list[Any]]:
    """The MLflow metric points (`[step, key, value]`) one metric event stands for.

    Epoch and wall time are logged at validation points, where the summariser reads
    them (best epoch, trial wall time); train events give the loss and learning rate.
    Evaluations give `<split>_<name>` for each measurement (`MetricEvent.values`).
    """
    if event.split == "train":
        names: tuple[tuple[str, float | None], ...] = (
            (record_names.METRIC_TRAIN_LOSS, event.loss),
            (record_names.METRIC_LR, event.lr),
        )
    else:
        names = tuple((f"{event.split}_{name}", v) for name, v in event.values().items())
    if event.split == "valid":
        names += (
            (record_names.METRIC_EPOCH, event.epoch),
            (record_names.METRIC_WALL_TIME, event.wall_time),
        )
    return [[event.step, key, value] for key, value in names if value is not None]


def best_points(
    evaluations: Sequence[MetricEvent], step: int, selection: Selection = ACCURACY
) -> list[list[Any]]:
    """The best-validation checkpoint's metrics (`Selection.best_names`) as points at
    `step`, by the rule the summariser uses (`trainers.events.best_validation`)."""
    found = best_validation(list(evaluations), selection)
    if found is None:
        return []
    valid, test = found
    tests = {f"test_{k}": v for k, v in test.values().items()} if test is not None else {}
    measured = {**{f"valid_{k}": v for k, v in valid.values().items()}, **tests}
    values = best_metrics(
        valid.value(selection.valid_name), tests, valid.step, valid.epoch, selection, measured
    )
    return [[step, key, value] for key, value in values.items()]


class Reporter:
    """Turns a trainer's event stream into Tune reports: one per validation point, sent
    once both its valid and test events have arrived, plus a final one.

    A restarted trial first `replay`s the events its folder already holds: whatever
    the driver may have missed (it was killed, or the trainer ran on after the sweep
    was stopped) reaches MLflow that way, and the driver drops what it has. Events the
    resumed trainer then re-emits for steps already replayed are not sent twice.
    """

    def __init__(
        self,
        report: Callable[[dict[str, Any]], None],
        node: str,
        sampler: SystemSampler | None = None,
        versions: str = "",
        selection: Selection = ACCURACY,
    ):
        self._report = report
        self.node = node
        """`node_name()` of the node this attempt runs on."""
        self._selection = selection
        self._versions = versions
        """JSON of the trainer stack's versions on this node: a trial retried on another
        node, or resumed after an upgrade, is recorded with what it last ran on."""
        self._sampler = sampler
        """System metrics (`tune.system_metrics`): sampled at validation events and,
        between them, at train events once its interval has passed; every report
        carries the attempt's CPU (and GPU) time so far from it."""
        self._points: list[list[Any]] = []
        self._evaluations: list[MetricEvent] = []
        """every valid and test event, replayed ones included: the best checkpoint's"""
        self._evals: dict[int, dict[str, MetricEvent]] = {}
        self._replayed: dict[str, int] = {}
        self._replayed_values: dict[tuple[str, int], float] = {}
        """(metric, step) -> the value the replay sent, to tell a re-measurement apart"""
        self._corrections: list[list[Any]] = []
        self.last_step = 0

    def replay(self, events: Sequence[MetricEvent]) -> None:
        """Send a trial's earlier events (from its events file), in step order; no
        system sample is taken for them (they describe a past attempt)."""
        sampler, self._sampler = self._sampler, None
        for event in events:
            self.on_event(event)
        self._sampler = sampler
        self._replayed = {split: -1 for split in ("train", "valid", "test")}
        for event in events:
            self._replayed[event.split] = max(self._replayed[event.split], event.step)
            self._replayed_values.update({(k, s): v for s, k, v in event_points(event)})
        self.flush()

    def on_event(self, event: MetricEvent) -> None:
        if event.step <= self._replayed.get(event.split, -1):
            self._correct(event)
            return
        self._points.extend(event_points(event))
        self.last_step = max(self.last_step, event.step)
        if self._sampler is not None and (event.split == "valid" or self._sampler.due()):
            self._points.extend([event.step, k, v] for k, v in self._sampler.sample().items())
        if event.split == "train":
            return
        self._evaluations.append(event)
        pair = self._evals.setdefault(event.step, {})
        pair[event.split] = event
        if "valid" in pair and "test" in pair:
            del self._evals[event.step]
            valid, test = pair["valid"], pair["test"]
            self._send(
                {
                    "step": event.step,
                    "epoch": valid.epoch,
                    **_measured("valid", valid),
                    **_measured("test", test),
                    "wall_time": max(valid.wall_time, test.wall_time),
                }
            )

    def _correct(self, event: MetricEvent) -> None:
        """A step the resumed trainer measures again. Same values (a deterministic
        resume; the clock aside): nothing to send. Other values (the evaluation before a
        save that failed, redone from the checkpoint before it, need not repeat
        exactly): the new ones stand, as in the events file and for the checkpoint now
        on disk, so they go to MLflow as corrections, logged after the first values."""
        changed = [
            [step, key, value]
            for step, key, value in event_points(event)
            if self._replayed_values.get((key, step)) != value
        ]
        if all(key == record_names.METRIC_WALL_TIME for _, key, _ in changed):
            return
        self._corrections.extend(changed)  # only what differs: nothing is logged twice
        self._replayed_values.update({(k, s): v for s, k, v in changed})
        if event.split != "train":
            same = (event.split, event.step)
            self._evaluations = [e for e in self._evaluations if (e.split, e.step) != same]
            self._evaluations.append(event)
            if event.step in self._evals:  # its pair's other half is still to come
                self._evals[event.step][event.split] = event

    def flush(self) -> None:
        """Send points not reported yet (a trial about to fail keeps its last losses)."""
        if self._points or self._corrections:
            self._send({"step": self.last_step})

    def finish(self, result: TrialResult, predictions: Sequence[str] = ()) -> None:
        """The last report: remaining points, the best checkpoint's metrics, parameter
        counts, the trial's wall time, and the run tags of what its trainer measured of
        its seeds (`trainers.seed_evidence.evidence_tags`) and of the splits whose
        predictions were uploaded (`record_names.TAG_PREDICTIONS`), in
        `record_names.REPORT_TAGS`: no request of their own."""
        counts = result.trainable_params or (None, None)
        self._points.extend(best_points(self._evaluations, self.last_step, self._selection))
        final: dict[str, Any] = {
            FINAL: True,
            "step": self.last_step,
            "wall_time": result.wall_time,
            "trainable_params": counts[0],
            "total_params": counts[1],
        }
        tags = evidence_tags(result.out_dir)
        if predictions:
            tags[record_names.TAG_PREDICTIONS] = ",".join(predictions)
        if tags:
            final[record_names.REPORT_TAGS] = json.dumps(tags, sort_keys=True)
        self._send(final)

    def _send(self, metrics: dict[str, Any]) -> None:
        metrics.update({POINTS: self._points, "node": self.node, "versions": self._versions})
        if self._sampler is not None:  # this attempt's use so far, for the cost ledger
            metrics[record_names.REPORT_CPU_TIME] = self._sampler.cpu_seconds()
            metrics[record_names.REPORT_GPU_TIME] = self._sampler.gpu_seconds
        metrics[CORRECTIONS] = self._corrections
        self._points, self._corrections = [], []
        self._report(metrics)


def _measured(split: str, event: MetricEvent) -> dict[str, float | None]:
    """A report's `<split>_<name>` entries: accuracy and loss (None when not measured,
    as the progress view and searcher expect), then the event's other metrics."""
    values = event.values()
    names = ("accuracy", "loss", *(n for n in values if n not in ("accuracy", "loss")))
    return {f"{split}_{name}": values[name] for name in names}


def node_name() -> str:
    """`hostname (ip, node id)` of the node running this trial, for the run's node tag.
    The Ray node id tells apart nodes that share a host name and address."""
    import socket

    import ray

    node_id = ray.get_runtime_context().get_node_id()[:12]
    return f"{socket.gethostname()} ({ray.util.get_node_ip_address()}, {node_id})"


def run_ray_trial(config: dict[str, Any], ctx: TrialContext) -> None:
    """The Ray trainable: run the trial (resuming from its folder), upload, report.

    A TrainerError propagates, so Ray retries the trial up to `spec.retries` times;
    the trial's log and events are uploaded first (best effort) so a failed run still
    shows what happened. A failed artifact upload after training fails the trial.
    """
    from ray import tune

    key = config[CONFIG_KEY]
    run_reporting(ctx, ctx.trials[key], ctx.runs[key], tune.report)


def run_reporting(
    ctx: TrialContext, trial: Trial, ref: RunRef, report: Callable[[dict[str, Any]], None]
) -> None:
    """`run_ray_trial`'s body for a trial and run known by the caller (the search stage
    builds both from the sampled config); `report` receives every Tune report."""
    from sweeper.tracking.artifacts import upload_logs, upload_trial, uploaded_splits
    from sweeper.tracking.staging import localize
    from sweeper.trainers.trial_pipeline import run_trial, trial_dir
    from sweeper.tune.preemption import DrainWatcher
    from sweeper.tune.system_metrics import SystemSampler

    out = trial_dir(ctx.spec, trial)
    inputs, staged, nice = ctx.inputs, ctx.staged, 0
    if ctx.pretraining is not None:
        from sweeper.tune.pretrain_task import BESIDE_NICE, pretrained_inputs, running

        if trial.init == "pretrained":
            inputs, staged = pretrained_inputs(ctx.pretraining, inputs, staged)
        elif running(ctx.pretraining):
            nice = BESIDE_NICE
    inputs = localize(inputs, list(staged), ctx.tracking_uri) if staged else inputs
    sync = _checkpoint_sync(ctx, ref, out)
    reporter = Reporter(
        report,
        node=node_name(),
        sampler=SystemSampler(),
        versions=versions_json(),
        selection=Selection.of(ctx.spec.select),
    )
    reporter.replay(read_events(out / record_names.EVENTS_FILE))

    def on_event(event: MetricEvent) -> None:
        reporter.on_event(event)
        if sync is not None:
            sync.on_event(event)

    _import_in_background("mlflow.store.artifact.artifact_repository_registry")
    notice = threading.Event()
    preempted: TrainerPreempted | None = None
    try:
        with DrainWatcher(notice):
            result = run_trial(
                ctx.spec,
                trial,
                out,
                inputs=inputs,
                threads=ctx.threads,
                on_event=on_event,
                on_start=sync.start if sync is not None else None,
                log=lambda _: None,
                nice=nice,
                notice=notice,
            )
    except TrainerPreempted as exc:
        preempted = exc
    except Exception:
        _keep_what_happened(reporter, lambda: upload_logs(out, ref.artifact_uri, ctx.tracking_uri))
        raise
    finally:
        if sync is not None:
            sync.close()
    if preempted is not None:
        _leave_on_notice(ctx, out, reporter, sync, preempted)
    uploaded = upload_trial(result, ref.artifact_uri, ctx.tracking_uri)
    if sync is not None:
        sync.discard()
    reporter.finish(result, uploaded_splits(uploaded))


def _import_in_background(module: str) -> None:
    """Import `module` in a thread while the trainer subprocess runs: the upload after
    it needs MLflow, whose slow import would otherwise wait for the trainer's end in a
    worker's first trial (docs/benchmarks.md has the measurements). A later trial of a
    reused worker finds it imported; a failed import shows again where the upload
    imports it."""
    import importlib
    import threading

    def load() -> None:
        with contextlib.suppress(Exception):
            importlib.import_module(module)

    threading.Thread(target=load, name=f"import {module}", daemon=True).start()


def _checkpoint_sync(ctx: TrialContext, ref: RunRef, out: Path) -> CheckpointSync | None:
    """With a remote artifact store: restore a checkpoint synced by an earlier attempt
    (on any node) into a folder that has none, and sync this attempt's as it goes
    (`sweeper.tracking.resume_sync`). None with a local store or `sync_every: 0`."""
    from sweeper.tracking.resume_sync import (
        CheckpointSync,
        has_checkpoint,
        restore,
        resume_repo,
        synced_manifests,
    )
    from sweeper.tracking.staging import is_remote

    if ctx.spec.sync_every == 0 or not is_remote(ref.artifact_uri):
        return None
    repo = resume_repo(ref.artifact_uri, ctx.tracking_uri)
    names = None if has_checkpoint(out) else synced_manifests(repo)
    step = restore(repo, out, names) if names else None
    if step is not None:
        with open(out / record_names.TRAINER_LOG_FILE, "a", encoding="utf-8") as log:
            log.write(f"sweeper: restored the checkpoint synced at step {step}\n")
    warn = logging.getLogger(__name__).warning
    every, interval = ctx.spec.sync_every, ctx.spec.sync_interval_s
    return CheckpointSync(repo, out, every, warn, interval, copies=names != [])


def _leave_on_notice(
    ctx: TrialContext,
    out: Path,
    reporter: Reporter,
    sync: CheckpointSync | None,
    exc: TrainerPreempted,
) -> None:
    """The trainer saved a checkpoint on a preemption notice and exited: note the
    preemption in the trial folder, sync checkpoint and note (with a remote store the
    next node restores both), send the points not reported yet, and leave the node:
    `TrialPreempted`, which Tune does not count as a failure, or past
    `spec.preemptions` a `PreemptionBoundError`, which it does (`tune.preemption`)."""
    from sweeper.tune.preemption import PreemptionBoundError, TrialPreempted, note_preemption

    history = note_preemption(out, exc.step, reporter.node)
    if sync is not None:
        sync.sync_now(exc.step if exc.step is not None else reporter.last_step)
    reporter.flush()
    if len(history) > ctx.spec.preemptions:
        raise PreemptionBoundError(history, ctx.spec.preemptions)
    raise TrialPreempted(history, ctx.spec.preemptions)


def _keep_what_happened(reporter: Reporter, upload: Callable[[], object]) -> None:
    """Best effort, for a failing trial: report its last points, upload its log. Either
    may fail too (the Tune session may be gone); the trainer's error is the one that
    must reach the driver, so these failures are only logged."""
    for step in (reporter.flush, upload):
        try:
            step()
        except Exception as exc:
            logging.getLogger(__name__).warning("after a trial failure: %s", exc)
