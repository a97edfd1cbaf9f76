"""Run a planned grid on Ray Tune and keep MLflow's record of it.

`run_grid` creates the runs the plan asks for under the sweep's parent run, runs every
trial that is not finished (a grid Tuner over their keys, `sweeper.tune.tuner`), records
each trial's fate through the tracking callback, closes the parent run and prints the
summary. The search stage's confirm step runs through here too.

Exit status: 0 when every trial finished, 1 when one did not (then the `--resume`
command is printed); a store that stays unreachable past the outbox's bound raises
SweepError with exit 1 and says how to record what is missing.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sweeper.engine.closing_report import summarise
from sweeper.engine.options import EXIT_FAILED, RunOptions, SweepError
from sweeper.engine.session import ray_session
from sweeper.engine.stage_graph import (
    prepare_stages,
    remote_root,
    report_failed_stage,
    start_pretraining,
    trial_order,
)
from sweeper.engine.sweep import Sweep, open_grid, trial_view
from sweeper.selection import Selection

if TYPE_CHECKING:
    from mlflow import MlflowClient

    from sweeper.spec.schema import SweepSpec
    from sweeper.tracking.recorder import Recorder
    from sweeper.tracking.staging import StagedInput
    from sweeper.trainers.trial_pipeline import SweepInputs
    from sweeper.tune.trainable import RunRef


def run_grid_sweep(options: RunOptions, spec: SweepSpec) -> int:
    """`sweeper run` for a spec without a search block: open, prepare, run (pretraining
    beside the trials that do not need it: `sweeper.engine.stage_graph`)."""
    sweep = open_grid(options, spec)
    inputs, pretrain_later = prepare_stages(sweep)
    return run_grid(sweep, inputs, pretrain_later=pretrain_later)


def run_grid(
    sweep: Sweep, inputs: SweepInputs, report: bool = True, pretrain_later: bool = False
) -> int:
    """Create the runs, run the trials that need running, close the record, summarise
    (unless `report` is False: `--until-decided` summarises once, after its last batch).
    `pretrain_later`: `inputs.pretrained` is still to be trained, by a Ray task started
    beside the trials (`sweeper.engine.stage_graph`)."""
    from sweeper import record_names
    from sweeper.tracking.cost_ledger import CostLedger, recorded_totals
    from sweeper.tracking.inputs import inputs_fingerprint
    from sweeper.tracking.lineage import log_lineage, log_vocabulary, sweep_lineage
    from sweeper.tracking.outbox import TrackingDown, sweep_outbox
    from sweeper.tracking.recorder import MetricLog, Recorder, last_steps
    from sweeper.tracking.runs import create_trial_run, run_infos
    from sweeper.tracking.sweep_run import close_sweep_run, open_sweep_run, record_sweep
    from sweeper.tune.trainable import RunRef

    client, spec, plan = sweep.client, sweep.spec, sweep.plan
    staged = (
        stage_inputs(client, sweep.experiment_id, sweep.uri, inputs)
        if plan.create or plan.resume
        else ()
    )
    parent = open_sweep_run(client, sweep.experiment_id, spec)
    record_sweep(client, parent, spec, Path(sweep.options.spec_path), len(sweep.trials))
    inputs_tag = {record_names.TAG_INPUTS: json.dumps(inputs_fingerprint(spec), sort_keys=True)}
    client.set_tag(parent, record_names.TAG_INPUTS, inputs_tag[record_names.TAG_INPUTS])
    run_ids = dict(plan.resume)
    for key in plan.create:
        trial = sweep.trials[key]
        tags = {**inputs_tag, **sweep.tags.get(key, {})}
        run_ids[key] = create_trial_run(
            client, sweep.experiment_id, parent, trial, sweep.stage, tags
        )
    log_lineage(client, [parent, *run_ids.values()], sweep_lineage(spec, inputs))
    log_vocabulary(client, parent, inputs.root)
    metrics = MetricLog()
    ledger = CostLedger(spec.resources.cpu, spec.resources.gpu)
    for run_id in plan.resume.values():  # what a killed driver had logged already
        metrics.seed(run_id, last_steps(client, run_id))
        ledger.seed(run_id, recorded_totals(client, run_id))  # --resume adds to it
    infos = run_infos(client, run_ids.values())
    refs = {key: RunRef(run_id, infos[run_id].artifact_uri) for key, run_id in run_ids.items()}
    unfinished: list[str] = []
    if refs:
        outbox = sweep_outbox(sweep.uri, log=_warn)
        recorder = Recorder(client, run_ids, metrics, outbox, ledger, infos)
        try:
            unfinished = _run_on_ray(sweep, inputs, staged, refs, recorder, parent, pretrain_later)
        except TrackingDown as exc:
            raise _tracking_down(sweep, exc) from None
    close_sweep_run(client, parent, failed=bool(unfinished))
    if report:
        summarise(sweep)
    if unfinished:
        names = ", ".join(sorted(unfinished))
        print(
            f"{len(unfinished)} trial(s) did not finish: {names}\n"
            f"`{sweep.options.resume_command()}` runs them again from their last "
            "checkpoints (finished trials are kept)",
            file=sys.stderr,
        )
    return EXIT_FAILED if unfinished else 0


def stage_inputs(
    client: MlflowClient, experiment_id: str, uri: str, inputs: SweepInputs
) -> tuple[StagedInput, ...]:
    """With a remote artifact store, publish what trials read, so a node without the
    driver's disk fetches it (`sweeper.tracking.staging`); nothing with a local store.
    The grid does it before any run is created: a failed upload (exit 1) leaves no run
    behind. The search stage calls it per group (a second call uploads nothing)."""
    from sweeper.tracking.staging import publish

    root = remote_root(client, experiment_id)
    if root is None:
        return ()
    print(f"inputs for every node: {root.rstrip('/')}/inputs", flush=True)
    try:
        return tuple(publish(inputs, root, uri, log=lambda line: print(f"  {line}")))
    except Exception as exc:
        raise SweepError(
            f"uploading the sweep's inputs to {root} failed: {type(exc).__name__}: {exc}",
            EXIT_FAILED,
        ) from None


def _run_on_ray(
    sweep: Sweep,
    inputs: SweepInputs,
    staged: tuple[StagedInput, ...],
    refs: dict[str, RunRef],
    recorder: Recorder,
    parent: str,
    pretrain_later: bool = False,
) -> list[str]:
    """Run `refs`' trials on Ray (with the pretraining stage beside them when
    `pretrain_later`); returns the names of those that did not finish."""
    from sweeper.tracking.sweep_run import record_cluster
    from sweeper.tune.callback import StageCallback, TrackingCallback
    from sweeper.tune.progress import DONE_BEFORE, FINISHED, Progress
    from sweeper.tune.trainable import TrialContext, run_ray_trial
    from sweeper.tune.tuner import build_tuner

    spec, options = sweep.spec, sweep.options
    selection = Selection.of(spec.select)
    views = {key: trial_view(trial, inputs, selection) for key, trial in sweep.trials.items()}
    for key in sweep.plan.done:
        views[key].status = DONE_BEFORE
    with ray_session(options, spec) as session:
        record_cluster(sweep.client, parent, session.resources(), session.describe())
        stage = start_pretraining(sweep) if pretrain_later else None
        ctx = TrialContext(
            spec=spec,
            trials={key: sweep.trials[key] for key in refs},
            inputs=inputs,
            runs=refs,
            tracking_uri=sweep.uri,
            threads=max(1, int(spec.resources.cpu)),
            staged=staged,
            pretraining=stage.ref if stage is not None else None,
        )
        with Progress(views) as progress:
            callback = TrackingCallback(recorder, progress)
            callbacks: list[Any] = [callback]
            if stage is not None:
                callbacks.append(StageCallback(lambda: stage.poll(progress.note)))
            tuner = build_tuner(
                ctx,
                run_ray_trial,
                name=f"{spec.name}-{options.stamp}",
                max_concurrent=options.max_concurrent or spec.max_concurrent,
                callbacks=callbacks,
                keys=trial_order(sweep, [key for key in sweep.trials if key in refs], stage),
            )
            try:
                tuner.fit()
            finally:
                if stage is not None:
                    stage.stop()
    report_failed_stage(sweep, stage)
    for key in refs:
        if key not in callback.ended:  # the sweep was stopped (Ctrl-C): resumable
            recorder.interrupted(key)
    recorder.drain()  # what an outage of the tracking store left buffered
    return [sweep.trials[key].name for key in refs if views[key].status != FINISHED]


def _warn(line: str) -> None:
    print(f"warning: {line}", file=sys.stderr, flush=True)


def _tracking_down(sweep: Sweep, exc: Exception) -> SweepError:
    """The store stayed unreachable past the outbox's bound: exit 1, saying how to
    record what is missing (the trials' events files hold every point)."""
    return SweepError(
        f"{sweep.uri}: {exc}\nevery trial's metrics are kept in its events file "
        f"under {Path(sweep.spec.output_dir) / 'trials'}; once the store is back, "
        f"`{sweep.options.resume_command()}` records them and continues the unfinished "
        "trials",
        EXIT_FAILED,
    )
