"""Run a sweep's grid of fine-tuning trials on Ray Tune and record them in MLflow.

Steps: validate the spec; check the tracking store; prepare the data and the
pretrained checkpoint once (cached); create one MLflow run per trial key under a
parent run for the sweep; run the trials on Ray (each retried up to `retries` times
from its own last checkpoint); print the summary (`sweeper summarize`), which is also
logged to the parent run.

With no --address (and no $RAY_ADDRESS) Ray starts on this machine; the MLflow store
is the spec's `tracking.uri`, else a SQLite file in output_dir (--tracking-uri wins).
A sweep whose trial runs already exist needs --resume: trials that finished are not
run again, every other trial continues its own run from its last checkpoint.

examples:
  sweeper run sweeps/demo.yaml
  sweeper run sweeps/demo.yaml train.epochs=1 grid.seed=[1] --max-concurrent 1
  sweeper run sweeps/demo.yaml --resume
  sweeper run sweeps/search.yaml           # Optuna + ASHA search, then confirm
  sweeper run sweeps/roberta.yaml --address HEAD:6379 --tracking-uri http://HOST:5000
  ray job submit --address http://HEAD:8265 --working-dir . -- sweeper run sweeps/roberta.yaml

With a `search:` block the command runs two stages: per group (init × framework ×
method), Optuna samples `num_samples` configurations on the tuning seed (ASHA may stop
weak ones early; the study lives in output_dir/optuna.db, so --resume continues it),
then each group's best configuration is confirmed over every grid.seed.

A tracking server that goes away mid-sweep costs nothing: the driver buffers its writes
and retries them, for up to $SWEEPER_TRACKING_RETRY_S seconds (default 300) of outage.

exit status: 0 when every trial finished; 1 when any trial failed past its retries,
or the tracking server stayed unreachable past that limit (then --resume records the rest);
2 for bad input (spec, data, unreachable tracking server, existing runs without
--resume), reported before any trial starts.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from sweeper.cli.common import add_spec_argument, fail, load_or_exit, quiet_root_logger

if TYPE_CHECKING:
    from mlflow import MlflowClient

    from sweeper.progress import TrialView
    from sweeper.spec import SweepSpec
    from sweeper.tracking.recorder import Recorder
    from sweeper.tracking.runs import RunPlan
    from sweeper.trainers.trial import SweepInputs
    from sweeper.trials import Trial
    from sweeper.tune import RunRef


def build_parser(parser: argparse.ArgumentParser) -> None:
    add_spec_argument(parser)
    parser.add_argument(
        "--resume",
        action="store_true",
        help="continue a sweep whose runs exist: finished trials are kept, the rest resume",
    )
    parser.add_argument(
        "--address", metavar="ADDR", help="Ray cluster (default: $RAY_ADDRESS, else local Ray)"
    )
    parser.add_argument(
        "--tracking-uri", metavar="URI", help="MLflow tracking URI (default: the spec's)"
    )
    parser.add_argument(
        "--max-concurrent",
        type=int,
        metavar="N",
        help="trials running at once (default: the spec's max_concurrent)",
    )


@dataclass
class Sweep:
    """What the steps of one `sweeper run` share once the store is open."""

    args: argparse.Namespace
    spec: SweepSpec
    trials: dict[str, Trial]
    """trial key -> trial, in grid order"""
    plan: RunPlan
    client: MlflowClient
    experiment_id: str
    uri: str
    stage: str = "grid"
    """Stage tag of the runs this sweep creates (`confirm` after a search)."""
    tags: dict[str, dict[str, str]] = field(default_factory=dict)
    """Extra tags of the run each key creates (a confirm trial's searched values)."""


def run(args: argparse.Namespace) -> int:
    spec = load_or_exit(args.spec, args.overrides)
    from sweeper.preflight import check_or_exit

    check_or_exit(spec)  # every input file, before the store or output_dir exists
    if args.max_concurrent is not None and args.max_concurrent < 1:
        fail("--max-concurrent must be at least 1")
    if spec.search is not None:  # search per group, then confirm: sweeper.search.stages
        from sweeper.search.stages import run_search

        return run_search(args, spec)
    sweep = _open(args, spec)
    inputs = prepare_or_exit(spec)
    return run_grid(sweep, inputs)


def _open(args: argparse.Namespace, spec: SweepSpec) -> Sweep:
    """Check the store and decide what to run; exit 2 before anything is created."""
    from mlflow.exceptions import MlflowException

    from sweeper.tracking import experiment_name, tracking_uri
    from sweeper.tracking.runs import ExistingRunsError, find_trial_runs, plan_runs
    from sweeper.tracking.server import TrackingUnreachable, check_server, open_store
    from sweeper.trials import expand

    uri = args.tracking_uri or tracking_uri(spec)
    trials, skipped = expand(spec)
    where = f"sweep {spec.name!r} (experiment {experiment_name(spec)!r} at {uri})"
    try:
        check_server(uri)
        client, experiment_id = open_store(spec, uri)
        found = find_trial_runs(client, experiment_id, spec.name)
        plan = plan_runs([t.key for t in trials], found, args.resume)
    except TrackingUnreachable as exc:
        fail(str(exc))
    except (ExistingRunsError, ValueError, MlflowException) as exc:
        fail(f"{where}: {exc}")
    for item in skipped:
        print(f"skipped {item.combination}: {item.reason}")
    print(
        f"{where}: {len(trials)} trials ({len(plan.done)} finished before, "
        f"{len(plan.resume)} to resume, {len(plan.create)} new)",
        flush=True,
    )
    by_key = {t.key: t for t in trials}
    return Sweep(args, spec, by_key, plan, client, experiment_id, uri)


def prepare_or_exit(spec: SweepSpec) -> SweepInputs:
    """Data and pretrained checkpoint, once, before any trial and any run is created:
    exit 2 on bad data, 1 if pretraining fails."""
    from sweeper.data.errors import DataError
    from sweeper.trainers.runner import TrainerError
    from sweeper.trainers.trial import prepare_inputs

    try:
        return prepare_inputs(spec, log=lambda line: print(line, flush=True))
    except (DataError, ValueError) as exc:
        fail(str(exc))
    except TrainerError as exc:
        print(f"error: pretraining failed: {exc}", file=sys.stderr)
        raise SystemExit(1) from None
    finally:
        quiet_root_logger()  # binarizing imported fairseq


def run_grid(sweep: Sweep, inputs: SweepInputs) -> int:
    """Create the runs, run the trials that need running, close the record, summarise."""
    from sweeper.layout import METRIC_NAMES
    from sweeper.tracking.outbox import Outbox, TrackingDown
    from sweeper.tracking.recorder import MetricLog, Recorder, last_steps
    from sweeper.tracking.runs import artifact_uris, create_trial_run
    from sweeper.tracking.sweep_run import close_sweep_run, open_sweep_run, record_sweep
    from sweeper.tune import RunRef

    client, spec, plan = sweep.client, sweep.spec, sweep.plan
    parent = open_sweep_run(client, sweep.experiment_id, spec)
    record_sweep(client, parent, spec, Path(sweep.args.spec), len(sweep.trials))
    run_ids = dict(plan.resume)
    for key in plan.create:
        trial = sweep.trials[key]
        run_ids[key] = create_trial_run(
            client, sweep.experiment_id, parent, trial, sweep.stage, sweep.tags.get(key)
        )
    metrics = MetricLog()
    for run_id in plan.resume.values():  # what a killed driver had logged already
        metrics.seed(run_id, last_steps(client, run_id, METRIC_NAMES))
    uris = artifact_uris(client, run_ids.values())
    refs = {key: RunRef(run_id, uris[run_id]) for key, run_id in run_ids.items()}
    unfinished: list[str] = []
    if refs:
        recorder = Recorder(client, run_ids, metrics, Outbox(log=_warn))
        try:
            unfinished = _run_on_ray(sweep, inputs, refs, recorder, parent)
        except TrackingDown as exc:
            _tracking_down(sweep, exc)
    close_sweep_run(client, parent, failed=bool(unfinished))
    _summarise(sweep)
    if unfinished:
        names = ", ".join(sorted(unfinished))
        again = " ".join(["sweeper run", sweep.args.spec, *sweep.args.overrides, "--resume"])
        print(
            f"{len(unfinished)} trial(s) did not finish: {names}\n"
            f"`{again}` runs them again from their last checkpoints (finished trials are kept)",
            file=sys.stderr,
        )
    return 1 if unfinished else 0


def _run_on_ray(
    sweep: Sweep, inputs: SweepInputs, refs: dict[str, RunRef], recorder: Recorder, parent: str
) -> list[str]:
    """Run `refs`' trials on Ray; returns the names of those that did not finish."""
    import os

    import ray

    from sweeper.progress import DONE_BEFORE, FINISHED, Progress
    from sweeper.tracking.callback import TrackingCallback
    from sweeper.tracking.sweep_run import record_cluster
    from sweeper.tune import TrialContext, build_tuner, start_ray

    spec, args = sweep.spec, sweep.args
    views = {key: trial_view(trial, inputs) for key, trial in sweep.trials.items()}
    for key in sweep.plan.done:
        views[key].status = DONE_BEFORE
    ctx = TrialContext(
        spec=spec,
        trials={key: sweep.trials[key] for key in refs},
        inputs=inputs,
        runs=refs,
        tracking_uri=sweep.uri,
        threads=max(1, int(spec.resources.cpu)),
    )
    stamp = time.strftime("%Y%m%d-%H%M%S")
    address = args.address or os.environ.get("RAY_ADDRESS") or None
    embedded = start_ray(address, Path(spec.output_dir) / "ray" / f"driver-{stamp}.log")
    try:
        record_cluster(sweep.client, parent, ray.cluster_resources(), address or "local")
        with Progress(views) as progress:
            callback = TrackingCallback(recorder, progress)
            tuner = build_tuner(
                ctx,
                [key for key in sweep.trials if key in refs],
                max_concurrent=args.max_concurrent or spec.max_concurrent,
                callbacks=[callback],
                name=f"{spec.name}-{stamp}",
            )
            tuner.fit()
    finally:
        if embedded:
            ray.shutdown()
    for key in refs:
        if key not in callback.ended:  # the sweep was stopped (Ctrl-C): resumable
            recorder.interrupted(key)
    recorder.drain()  # what an outage of the tracking store left buffered
    return [sweep.trials[key].name for key in refs if views[key].status != FINISHED]


def _warn(line: str) -> None:
    print(f"warning: {line}", file=sys.stderr, flush=True)


def _tracking_down(sweep: Sweep, exc: Exception) -> None:
    """The store stayed unreachable past the outbox's bound: stop with exit 1, saying
    how to record what is missing (the trials' events files hold every point)."""
    again = " ".join(["sweeper run", sweep.args.spec, *sweep.args.overrides, "--resume"])
    print(
        f"error: {sweep.uri}: {exc}\nevery trial's metrics are kept in its events file "
        f"under {Path(sweep.spec.output_dir) / 'trials'}; once the store is back, "
        f"`{again}` records them and continues the unfinished trials",
        file=sys.stderr,
    )
    raise SystemExit(1)


def trial_view(trial: Trial, inputs: SweepInputs) -> TrialView:
    from sweeper.progress import TrialView

    per_epoch = -(-inputs.num_train // int(trial.train["batch_size"]))
    return TrialView(name=trial.name, total=per_epoch * int(trial.train["epochs"]))


def _summarise(sweep: Sweep) -> None:
    """Print the summariser's tables and log its report to the parent run."""
    import tempfile

    from sweeper.summarize import SummarizeError, log_report, summarize, write_report
    from sweeper.summarize.tables import print_rich, to_plain
    from sweeper.tracking import experiment_name

    try:
        summary = summarize(
            experiment_name(sweep.spec), sweep.uri, sweep=sweep.spec.name, client=sweep.client
        )
    except SummarizeError as exc:
        print(f"warning: no summary: {exc}", file=sys.stderr)
        return
    print()
    if sys.stdout.isatty():
        print_rich(summary, sys.stdout)
    else:
        sys.stdout.write(to_plain(summary))
    sys.stdout.flush()
    with tempfile.TemporaryDirectory(prefix="sweeper-report-") as tmp:
        log_report(sweep.client, summary, write_report(summary, Path(tmp)))
