"""Faults injected into real sweeps: what a long sweep must survive (issue #7).

Every scenario runs the real `sweeper run` CLI (real Ray, real MLflow, the dummy
trainer as a real subprocess) and injects its fault from outside, the way it happens
in production: a trainer process SIGKILLed mid-run, a Ray worker node killed with
everything on it, the tracking server stopped and restarted on the same port and
database, an artifact store that refuses writes. Each test asserts the outcome and
records its measured figures for docs/reliability.md (`reliability.record`).
Only processes these tests started are signalled, by pid.

Scenario c (driver SIGKILL, then --resume) is test_run_resume.py; the first half of d
(server down at start) is test_run_sweep.py.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from sweeper import record_names
from tests.support.cluster import mlflow_server, ray_cluster
from tests.support.faults import (
    FAST_NODE_DEATH,
    checkpoint_step,
    compare_with_events,
    descendants,
    event_lines,
    finish,
    server_restarted,
    server_root,
    sigkill,
    start_sweep,
    sweep_through_outage,
    trainer_pids,
    trial_folder,
    trials_by_seed,
    wait_until,
)
from tests.support.reliability import record
from tests.support.sweeps import (
    assert_runs_carry_table1,
    client_for,
    kill_group,
    new_sweep,
    run_sweeper,
    sweeper_env,
)

pytestmark = [pytest.mark.integration, pytest.mark.slow]

# --- a. trainer processes killed mid-run ---------------------------------------------------


@pytest.mark.soak  # a multi-minute scenario: `make reliability` runs it
def test_trainers_killed_mid_run_resume_from_their_last_checkpoint(tmp_path, tmp_path_factory):
    seeds, killed_seeds = list(range(1, 9)), (2, 5, 7)
    spec, out = new_sweep(
        tmp_path, tmp_path_factory, "killtrainer", grid={"seed": seeds}, max_concurrent=2
    )
    faults: dict[str, Any] = {"*": {"sleep_per_step": 0.02}}
    for seed in killed_seeds:  # slower, so the kill lands between checkpoints 10 and 20
        faults[f"random-full-s{seed}-"] = {"sleep_per_step": 0.25}
    log = tmp_path / "sweep.log"
    proc = start_sweep(log, spec, env=sweeper_env(faults))
    at_kill: dict[int, int] = {}
    try:
        for seed in killed_seeds:

            def past_first_checkpoint(seed: int = seed) -> list[int] | None:
                folder = trial_folder(out, seed)
                if folder is None or checkpoint_step(folder) < 10:
                    return None
                return trainer_pids(folder)

            pids = wait_until(past_first_checkpoint, proc, log, timeout=240)
            sigkill(pids)
            at_kill[seed] = checkpoint_step(trial_folder(out, seed))  # type: ignore[arg-type]
        text = finish(proc, log)
    finally:
        kill_group(proc.pid)
    assert proc.returncode == 0, text[-3000:]

    by_seed = trials_by_seed(out, "killtrainer")
    client = client_for(out)
    assert sorted(by_seed) == seeds
    totals = [0, 0, 0]
    for seed, runs in by_seed.items():
        assert len(runs) == 1, f"s{seed}: {len(runs)} runs"
        (run,) = runs
        assert run.info.status == "FINISHED", run.data.tags.get(record_names.TAG_ERROR)
        folder = trial_folder(out, seed)
        assert folder is not None
        counts = compare_with_events(client, run, folder)
        assert counts[1:] == (0, 0), f"s{seed}: (points, missing, extra) = {counts}"
        totals = [t + c for t, c in zip(totals, counts, strict=True)]
        starts = [
            line
            for line in (folder / record_names.TRAINER_LOG_FILE).read_text().splitlines()
            if "starting at step" in line
        ]
        if seed in killed_seeds:
            assert 10 <= at_kill[seed] < 20  # killed mid-run, after a checkpoint
            assert f"s{seed}: failed (attempt 1), retrying" in text
            assert len(starts) == 2 and f"starting at step {at_kill[seed]} " in starts[1], starts
        else:
            assert len(starts) == 1 and "starting at step 0 " in starts[0], starts
    assert_runs_carry_table1(spec, [runs[0] for runs in by_seed.values()])
    resumed = ", ".join(f"s{s} from step {at_kill[s]}" for s in killed_seeds)
    record(
        "a. trainer processes killed mid-run",
        "SIGKILL to the trainer subprocess of 3 of 8 trials (s2, s5, s7), each once it "
        "had passed its step-10 checkpoint (20 steps per trial, 2 trials at a time, "
        "retries: 1)",
        f"exit 0; 8/8 keys with exactly one FINISHED run; 3 retried, resumed {resumed} "
        f"(not from step 0); MLflow vs the trials' events files: {totals[0]} points, "
        f"{totals[1]} missing, {totals[2]} duplicated or extra",
    )


# --- b. a worker node lost mid-sweep -------------------------------------------------------


@pytest.mark.soak  # a multi-minute scenario: `make reliability` runs it
def test_a_lost_worker_node_leaves_the_sweep_to_the_head(tmp_path, tmp_path_factory):
    seeds = [1, 2, 3, 4]
    spec, out = new_sweep(
        tmp_path, tmp_path_factory, "lostnode", grid={"seed": seeds}, max_concurrent=2, retries=2
    )
    slow = json.dumps({"*": {"sleep_per_step": 0.25}})
    log = tmp_path / "sweep.log"
    with ray_cluster(
        tmp_path / "ray_logs", head_cpus=1, SWEEPER_DUMMY_EXTRA=slow, **FAST_NODE_DEATH
    ) as cluster:
        cluster.add_worker(num_cpus=1)
        worker = cluster.procs[1]
        proc = start_sweep(log, spec, "--address", cluster.address, env=cluster.env)
        try:

            def trial_mid_run_on_worker() -> tuple[int, int] | None:
                below = descendants(worker.pid)
                for seed in seeds:
                    folder = trial_folder(out, seed)
                    if folder and checkpoint_step(folder) >= 10 and trainer_pids(folder, below):
                        return seed, checkpoint_step(folder)
                return None

            lost_seed, step = wait_until(trial_mid_run_on_worker, proc, log, timeout=240)
            lost_at = time.monotonic()
            for _ in range(2):  # the node and everything on it; twice, for late forks
                sigkill(descendants(worker.pid) | {worker.pid})
            worker.wait(timeout=30)
            declared = _until_one_node(cluster, proc, lost_at)
            text = finish(proc, log)
            took = time.monotonic() - lost_at
        finally:
            kill_group(proc.pid)
    assert proc.returncode == 0, text[-3000:]
    by_seed = trials_by_seed(out, "lostnode")
    assert sorted(by_seed) == seeds
    assert all(len(runs) == 1 for runs in by_seed.values())
    assert all(runs[0].info.status == "FINISHED" for runs in by_seed.values())
    lost = by_seed[lost_seed][0]
    node = lost.data.tags[record_names.TAG_NODE]
    assert "(127.0.0.2, " in node, f"s{lost_seed} finished on {node}, not the head"
    assert f"s{lost_seed}: failed (attempt 1), retrying" in text
    folder = trial_folder(out, lost_seed)
    assert folder is not None
    assert (
        f"starting at step {step} " in (folder / record_names.TRAINER_LOG_FILE).read_text()
    )  # one disk here: its checkpoint survived
    retries = text.count("retrying")
    record(
        "b. worker node lost mid-sweep",
        "two-node loopback cluster (head 127.0.0.2 and worker 127.0.0.3, 1 CPU each), "
        f"4 trials; SIGKILL to the worker's `ray start`, raylet and every process below "
        f"it, once trial s{lost_seed} on the worker had passed its step-{step} checkpoint",
        f"exit 0, {took:.0f} s after the kill; worker declared dead by Ray after "
        f"{declared}; retries: {retries}; 4/4 keys with exactly one FINISHED run; "
        f"s{lost_seed} finished on the head (node tag {node.split(' ', 1)[1]}), resumed "
        f"from step {step}",
    )


def _until_one_node(cluster: Any, proc: subprocess.Popen[bytes], since: float) -> str:
    """How long after `since` the cluster counted only the head alive (polled while
    the sweep runs; "-" if the sweep ended first)."""
    while proc.poll() is None:
        if len(cluster.alive_nodes()) == 1:
            return f"{time.monotonic() - since:.0f} s"
        time.sleep(0.5)
    return "- (sweep ended first)"


# --- d. the tracking server restarted mid-sweep --------------------------------------------


@pytest.mark.soak  # a multi-minute scenario: `make reliability` runs it
def test_a_restarted_tracking_server_loses_no_metric_point(tmp_path, tmp_path_factory):
    seeds = [1, 2, 3, 4]
    spec, out = new_sweep(
        tmp_path, tmp_path_factory, "restart", grid={"seed": seeds}, max_concurrent=2, retries=2
    )
    faults = {"*": {"sleep_per_step": 0.4}}
    root, log = server_root(tmp_path, tmp_path_factory), tmp_path / "sweep.log"
    with mlflow_server(root) as server:
        outage = sweep_through_outage(
            spec, out, log, server.uri, sweeper_env(faults), lambda: server_restarted(server, root)
        )
    outage.assert_every_point_once(seeds)
    points, missing, extra = outage.totals()
    record(
        "d. tracking server restarted mid-sweep",
        f"SIGKILL to the `mlflow server` process group once the trials had begun; the "
        f"same server (same port, same SQLite backend and artifact folder) started again; "
        f"down {outage.down_s:.0f} s",
        f"exit 0; {outage.made_while_down} metric events made by the trials while it was "
        f"down; driver: {outage.line('reachable again')}; 4/4 runs FINISHED; MLflow vs "
        f"the trials' events files: {points} points, {missing} missing, {extra} duplicated "
        "or extra",
    )


@pytest.mark.soak  # a multi-minute scenario: `make reliability` runs it
def test_a_tracking_server_down_past_the_bound_stops_the_sweep_then_resume_records_all(
    tmp_path, tmp_path_factory
):
    """The other side of "buffered and retried": an outage longer than the bound
    ($SWEEPER_TRACKING_RETRY_S, 5 s here) stops the sweep with exit 1 and a message
    naming the server and `--resume`; once the server is back, `--resume` replays the
    trials' events files, so MLflow ends up with every point anyway."""
    from mlflow import MlflowClient

    spec, out = new_sweep(tmp_path, tmp_path_factory, "outage", max_concurrent=2)
    faults = {"*": {"sleep_per_step": 0.3}}
    env = {**sweeper_env(faults), "SWEEPER_TRACKING_RETRY_S": "5"}
    root, log = server_root(tmp_path, tmp_path_factory), tmp_path / "sweep.log"
    with mlflow_server(root) as server:
        port, uri = server.port, server.uri
        proc = start_sweep(log, spec, "--tracking-uri", uri, env=env)
        try:
            wait_until(lambda: event_lines(out) >= 4, proc, log, timeout=240)
            os.killpg(server.proc.pid, signal.SIGKILL)
            server.proc.wait(timeout=30)
            down_at = time.monotonic()
            text = finish(proc, log, timeout=180)
            stopped_after = time.monotonic() - down_at
        finally:
            kill_group(proc.pid)
    assert proc.returncode == 1, text[-3000:]
    message = next(line for line in text.splitlines() if line.startswith("error: "))
    assert uri in message and "unreachable for" in message, message
    assert "--resume" in text
    with mlflow_server(root, port=port):
        resumed = run_sweeper("run", spec, "--tracking-uri", uri, "--resume", timeout=240)
        client = MlflowClient(uri)
        experiment = client.get_experiment_by_name("outage")
        runs = client.search_runs([experiment.experiment_id])
        trials = [
            r for r in runs if r.data.tags.get(record_names.TAG_ROLE) == record_names.ROLE_TRIAL
        ]
        counts = [
            compare_with_events(
                client, r, trial_folder(out, int(r.data.tags[record_names.TAG_SEED])) or out
            )
            for r in trials
        ]
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert len(trials) == 2 and all(r.info.status == "FINISHED" for r in trials)
    assert all(points > 0 and (missing, extra) == (0, 0) for points, missing, extra in counts)
    record(
        "d. tracking server down past the retry bound",
        "SIGKILL to the `mlflow server` once the trials had begun, not restarted while "
        "the sweep ran ($SWEEPER_TRACKING_RETRY_S=5); then restarted and `--resume` run",
        f"sweep stopped {stopped_after:.0f} s after the kill with exit {proc.returncode}: "
        f"{message.split(': ', 2)[2].split('; last error')[0]}; `--resume` exit "
        f"{resumed.returncode}: 2/2 runs FINISHED; MLflow vs the trials' events files: "
        f"{sum(c[0] for c in counts)} points, {sum(c[1] for c in counts)} missing, "
        f"{sum(c[2] for c in counts)} duplicated or extra",
    )


# --- e. the artifact store refuses one trial's upload --------------------------------------


@pytest.mark.soak  # a multi-minute scenario: `make reliability` runs it
def test_a_failed_artifact_upload_fails_the_trial(tmp_path, tmp_path_factory):
    """The blocker is a regular file where the run's artifact folder must be: tests run
    as root, who ignores permission bits (chmod would not stop the write) but cannot
    create a folder, or a file inside one, where a regular file is."""
    from mlflow.utils.file_utils import local_file_uri_to_path

    spec, out = new_sweep(tmp_path, tmp_path_factory, "noupload", grid={"seed": [1, 2, 3]})
    faults = {"*": {"sleep_per_step": 0.05}, "random-full-s2-": {"sleep_per_step": 0.3}}
    log = tmp_path / "sweep.log"
    proc = start_sweep(log, spec, env=sweeper_env(faults))
    try:

        def s2_run() -> Any:
            return next(iter(trials_by_seed(out, "noupload").get(2, [])), None)

        run = wait_until(s2_run, proc, log, timeout=180)
        store = Path(local_file_uri_to_path(run.info.artifact_uri))
        if store.exists() or checkpoint_step(trial_folder(out, 2) or out) >= 20:
            pytest.fail(f"s2 uploaded before the store could be blocked ({store})")
        store.parent.mkdir(parents=True, exist_ok=True)
        store.write_text("a regular file where the run's artifact folder must be\n")
        text = finish(proc, log)
    finally:
        kill_group(proc.pid)
    assert proc.returncode == 1, text[-3000:]
    by_seed = trials_by_seed(out, "noupload")
    assert sorted(by_seed) == [1, 2, 3] and all(len(r) == 1 for r in by_seed.values())
    failed = by_seed[2][0]
    error = failed.data.tags.get(record_names.TAG_ERROR, "")
    assert failed.info.status == "FAILED"
    assert failed.data.tags[record_names.TAG_STATUS] == record_names.Status.FAILED
    assert error.startswith("UploadError: artifact upload to "), error[:500]
    assert checkpoint_step(trial_folder(out, 2)) == 20  # type: ignore[arg-type]  # trained
    assert "dummy-random-full-s2: FAILED: UploadError: artifact upload to" in text
    assert "1 trial(s) did not finish: dummy-random-full-s2" in text
    client = client_for(out)
    for seed in (1, 3):
        ok = by_seed[seed][0]
        assert ok.info.status == "FINISHED", ok.data.tags.get(record_names.TAG_ERROR)
        listed = {a.path for a in client.list_artifacts(ok.info.run_id)}
        assert {"checkpoints", record_names.ARTIFACT_TRIAL_CONFIG} <= listed, listed
    reason = error.splitlines()[0].replace(str(tmp_path), "$TMP")
    record(
        "e. artifact upload fails",
        "trial s2's artifact folder in the local store replaced by a regular file "
        "(root ignores permission bits) while it trained; 3 trials, retries: 1",
        f"exit 1; s2 trained to step 20 and its run is FAILED (`sweeper.status` "
        f"{failed.data.tags[record_names.TAG_STATUS]}), error tag: "
        f"{reason}; s1 and s3 FINISHED with their artifacts",
    )
