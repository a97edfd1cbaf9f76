"""The fixed costs of a sweep, each timed alone in a fresh process (bench_overhead.py).

    python bench/overhead_phases.py SPEC TRIAL_FOLDER    # prints one JSON line

Imports, opening a new SQLite store, the prepare cache check, creating the sweep and
trial runs, recording one report, uploading a finished trial's artifacts, and starting
and stopping an embedded Ray: what a single-trial `sweeper run` adds to its trainer.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import common

MARK = "@@phases "


def measure(spec: Path, trial_folder: Path, env: dict[str, str]) -> dict[str, float]:
    """Run this module in a fresh process; returns phase -> seconds."""
    timed = common.run_timed([sys.executable, __file__, spec, trial_folder], env=env)
    line = next(x for x in timed.output.splitlines() if x.startswith(MARK))
    return json.loads(line[len(MARK) :])


def time_phases(spec_path: str, trial_folder: str) -> dict[str, float]:
    """Each fixed cost of a sweep on its own, in this (fresh) process."""
    import tempfile

    timings: dict[str, float] = {}
    start = time.perf_counter()
    import mlflow  # noqa: F401
    import ray

    from sweeper.spec.load import load_spec
    from sweeper.tracking.server import open_store

    timings["imports (mlflow, ray, sweeper)"] = time.perf_counter() - start
    spec = load_spec(spec_path)
    with tempfile.TemporaryDirectory() as tmp:
        uri = f"sqlite:///{tmp}/mlflow.db"
        start = time.perf_counter()
        client, experiment_id = open_store(spec, uri)
        timings["store open (new SQLite file, from the cached schema)"] = (
            time.perf_counter() - start
        )
        start = time.perf_counter()
        from sweeper.trainers.trial_pipeline import prepare_inputs

        inputs = prepare_inputs(spec, log=lambda _: None)
        timings["prepare cache check"] = time.perf_counter() - start
        timings.update(_record_phases(spec, Path(spec_path), client, experiment_id, inputs))
        timings.update(_artifact_phase(Path(trial_folder), client, experiment_id))
    start = time.perf_counter()
    from sweeper.tune.cluster import start_ray

    start_ray(None)
    ray.shutdown()
    timings["Ray start + shutdown (embedded, local)"] = time.perf_counter() - start
    return timings


def _record_phases(spec, spec_file, client, experiment_id, inputs) -> dict[str, float]:  # type: ignore[no-untyped-def]
    """Run creation and the driver's per-report MLflow writes."""
    from sweeper.tracking.recorder import MetricLog, Recorder
    from sweeper.tracking.runs import create_trial_run
    from sweeper.tracking.sweep_run import open_sweep_run, record_sweep
    from sweeper.trial_keys import expand

    trial = expand(spec)[0][0]
    out: dict[str, float] = {}
    start = time.perf_counter()
    parent = open_sweep_run(client, experiment_id, spec)
    record_sweep(client, parent, spec, spec_file, 1)
    run_id = create_trial_run(client, experiment_id, parent, trial)
    out["sweep run + 1 trial run created"] = time.perf_counter() - start
    recorder = Recorder(client, {trial.key: run_id}, MetricLog())
    reports = 20
    start = time.perf_counter()
    for i in range(1, reports + 1):
        step = 225 * i
        points = [[step - 225 + s, "train_loss", 0.5] for s in range(25, 226, 25)]
        points += [[step, k, 1.0] for k in ("valid_loss", "valid_accuracy", "test_loss")]
        recorder.result(trial.key, {"points": points, "node": "bench"})
    out["one report recorded (per validation point, 12 points)"] = (
        time.perf_counter() - start
    ) / reports
    return out


def _artifact_phase(folder: Path, client, experiment_id: str) -> dict[str, float]:  # type: ignore[no-untyped-def]
    """upload_trial of a finished trial folder (best checkpoint, config, log, events)."""
    from sweeper.tracking.artifacts import upload_trial
    from sweeper.trainers.base import TrialJob
    from sweeper.trainers.registry import get_trainer
    from sweeper.trainers.runner import TrialResult

    job = TrialJob.load(folder / "trial.json")
    checkpoints = get_trainer(job.framework).checkpoints(job)
    result = TrialResult(folder, [], checkpoints, 0.0, None)
    run = client.create_run(experiment_id)
    start = time.perf_counter()
    upload_trial(result, run.info.artifact_uri, client.tracking_uri)
    return {f"artifact upload ({job.framework} trial)": time.perf_counter() - start}


if __name__ == "__main__":
    print(MARK + json.dumps(time_phases(sys.argv[1], sys.argv[2])), flush=True)
