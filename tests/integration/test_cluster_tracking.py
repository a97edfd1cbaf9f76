"""A sweep against a real MLflow tracking server, and `sweeper ui` on a sweep's store.

Both servers are real `mlflow server` processes on 127.0.0.1, stopped by process
group at the end of each test, pass or fail.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time

import pytest
import yaml

from sweeper import record_names
from sweeper.tracking.links import FIRST_VIEW, experiment_url
from tests.support.cluster import free_port, get, mlflow_server
from tests.support.processes import clean_env, kill_group
from tests.support.specs import minimal_spec
from tests.support.sweeps import client_for, new_sweep, run_sweeper
from tests.support.trial_record import trial_record

pytestmark = pytest.mark.integration


@pytest.mark.slow
def test_a_sweep_records_to_a_tracking_server(tmp_path, tmp_path_factory):
    from mlflow import MlflowClient

    spec, _ = new_sweep(tmp_path, tmp_path_factory, "served")
    started = time.monotonic()
    with mlflow_server(tmp_path / "server") as server:
        done = run_sweeper("run", spec, "--tracking-uri", server.uri)
        assert done.returncode == 0, done.stderr[-3000:]
        client = MlflowClient(server.uri)
        experiment = client.get_experiment_by_name("served")
        assert experiment is not None
        runs = client.search_runs([experiment.experiment_id])
        trials = [
            r for r in runs if r.data.tags.get(record_names.TAG_ROLE) == record_names.ROLE_TRIAL
        ]
        assert len(trials) == 2
        for run in trials:
            assert run.info.status == "FINISHED", run.data.tags.get(record_names.TAG_ERROR)
            steps = [m.step for m in client.get_metric_history(run.info.run_id, "valid_accuracy")]
            assert steps == [10, 20]  # 2 epochs of 10 updates
            listed = {a.path for a in client.list_artifacts(run.info.run_id)}
            assert record_names.ARTIFACT_TRIAL_CONFIG in listed, listed
        # the server stored the artifacts (proxied), not the sweep's local folder
        assert list((tmp_path / "server" / "artifacts").rglob(record_names.ARTIFACT_TRIAL_CONFIG))
        served = trial_record(client, "served")
    # The server's record is the file store's: the writes joined into fewer requests,
    # sent by the outbox's thread, and the uploads made at once lose nothing.
    local_spec, out = new_sweep(tmp_path / "local", tmp_path_factory, "served")
    done = run_sweeper("run", local_spec)
    assert done.returncode == 0, done.stderr[-3000:]
    assert trial_record(client_for(out), "served") == served
    print(f"tracking server sweep: {time.monotonic() - started:.1f}s")


def test_sweeper_ui_serves_the_sweeps_store(tmp_path):
    from mlflow import MlflowClient

    from sweeper.tracking.store import ensure_experiment

    out = tmp_path / "out"
    out.mkdir()
    raw = {**minimal_spec(), "name": "uisweep", "output_dir": str(out)}
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump(raw), encoding="utf-8")
    client = MlflowClient(f"sqlite:///{out / 'mlflow.db'}")  # a finished sweep's store
    experiment_id = ensure_experiment(client, "uisweep", out / "mlartifacts")
    run = client.create_run(experiment_id, tags={record_names.TAG_ROLE: record_names.ROLE_TRIAL})
    client.log_metric(run.info.run_id, record_names.METRIC_VALID_ACC, 71.5, step=10)
    client.set_terminated(run.info.run_id)

    port = free_port()
    started = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-m", "sweeper.cli.main", "ui", str(spec), "--port", str(port)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env=clean_env(), start_new_session=True,
    )  # fmt: skip
    try:
        line = ""
        deadline = time.monotonic() + 90
        while "MLflow UI:" not in line and time.monotonic() < deadline:
            line = proc.stdout.readline() if proc.stdout else ""
            if not line and proc.poll() is not None:
                break
        found = re.search(r"MLflow UI: (\S+)", line)
        assert found, f"no URL printed (exit {proc.poll()}): {line!r}"
        url = found.group(1)
        assert url == experiment_url(f"http://127.0.0.1:{port}", experiment_id)
        assert url.endswith(f"/#/experiments/{experiment_id}/runs?{FIRST_VIEW}")
        assert b"<html" in get(url.split("#")[0]).lower()
        api = f"http://127.0.0.1:{port}/ajax-api/2.0/mlflow/experiments/get"
        answer = get(f"{api}?experiment_id={experiment_id}")
        assert b'"uisweep"' in answer
        print(f"sweeper ui: URL live after {time.monotonic() - started:.1f}s")
        os.kill(proc.pid, signal.SIGTERM)  # what Ctrl-C / a service manager does
        assert proc.wait(timeout=30) == 0
        with pytest.raises(OSError):  # the mlflow server child went with it
            get(f"http://127.0.0.1:{port}/health", timeout=2)
    finally:
        kill_group(proc.pid)
