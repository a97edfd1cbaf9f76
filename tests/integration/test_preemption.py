"""Preemption with notice: a drained node, a trainer sent SIGTERM, and the bound.

A preempted trial saves a checkpoint at its current step, leaves its node without
spending a retry, and resumes elsewhere from that step (`sweeper.tune.preemption`).
Every scenario runs with `retries: 0`, so a preemption counted as a failure would fail
the sweep, and with periodic checkpoints far apart (one epoch of 20 updates: the only
periodic checkpoint is the last step), so a resume from a mid-run step can only come
from the checkpoint saved on the notice.

- a drained worker: the two-node loopback cluster without a shared filesystem (the
  harness of test_cluster_no_shared_fs.py); `ray drain-node --reason
  DRAIN_NODE_REASON_PREEMPTION --deadline-remaining-seconds 15` on the worker once its
  trial has passed step N, then SIGKILL to every process of the worker at the deadline.
- SIGTERM to the trainer process alone (a VM shutting down), for a fairseq and an HF
  trial on one node.
- a second preemption past `preemptions: 1` fails the trial, naming the bound.
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
from sweeper.trainers.events import read_events
from sweeper.trainers.notice import resumed_steps
from tests.support.cluster import (
    FIRST_WORKER_IP,
    HEAD_IP,
    RAY,
    mlflow_server,
    mount_namespace,
    namespace_pids,
    private_disk,
    ray_cluster,
)
from tests.support.faults import (
    FAST_NODE_DEATH,
    by_seed,
    compare_with_events,
    finish,
    sigkill,
    start_sweep,
    trainer_pids,
    trial_folder,
    wait_until,
)
from tests.support.reliability import record
from tests.support.sweeps import client_for, kill_group, new_sweep, roles_in, sweeper_env

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.soak]

HEAD, WORKER = HEAD_IP, FIRST_WORKER_IP
ONE_EPOCH = {"epochs": 1, "batch_size": 4}  # 80 examples: 20 updates, one checkpoint at 20
PAST = 6
"""The step a trial must have passed before the notice (N of the issue)."""
DEADLINE_S = 15


def _last_step(folder: Path) -> int:
    events = read_events(folder / record_names.EVENTS_FILE) if folder.exists() else []
    return max((e.step for e in events), default=0)


def _worker_trial(root: Path, out: Path) -> tuple[int, Path] | None:
    """(seed, folder as the worker sees it) of a trial past step PAST on the worker."""
    for seed in (1, 2):
        seen = Path(f"{root}{out}")
        folder = trial_folder(seen, seed) if (seen / "trials").exists() else None
        if folder is not None and _last_step(folder) >= PAST:
            return seed, folder
    return None


def _node_id(cluster: Any, ip: str) -> str:
    return next(str(n["node_id"]) for n in cluster.alive_nodes() if n.get("node_ip") == ip)


def _drain(cluster: Any, node_id: str) -> None:
    done = subprocess.run(
        [
            RAY, "drain-node", "--address", cluster.address, "--node-id", node_id,
            "--reason", "DRAIN_NODE_REASON_PREEMPTION", "--reason-message", "spot notice (test)",
            "--deadline-remaining-seconds", str(DEADLINE_S),
        ],
        capture_output=True, text=True, env=cluster.env, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr


def _preempted_tag(run: Any) -> list[list[Any]]:
    return json.loads(run.data.tags.get(record_names.TAG_PREEMPTED_ON, "[]"))


def test_a_drained_worker_hands_its_trial_over_from_the_notice_checkpoint(
    tmp_path, tmp_path_factory
):
    from mlflow import MlflowClient

    spec, out = new_sweep(
        tmp_path, tmp_path_factory, "drain", grid={"seed": [1, 2]}, train=ONE_EPOCH,
        max_concurrent=2, retries=0,
    )  # fmt: skip
    disk = tmp_path_factory.getbasetemp()
    log = out.parent / "sweep.log"
    slow = json.dumps({"*": {"sleep_per_step": 1.0}})
    with (
        mlflow_server(tmp_path / "server") as server,
        ray_cluster(out.parent / "ray_logs", head_cpus=1, SWEEPER_DUMMY_EXTRA=slow,
                    **FAST_NODE_DEATH) as cluster,
    ):  # fmt: skip
        cluster.add_worker(num_cpus=1, wrap=private_disk(disk))
        worker = cluster.procs[1]
        root = Path(f"/proc/{worker.pid}/root")
        args = ("--address", cluster.address, "--tracking-uri", server.uri)
        proc = start_sweep(log, spec, *args, env=cluster.env)
        try:
            seed, folder = wait_until(lambda: _worker_trial(root, out), proc, log, timeout=240)
            noticed_at = _last_step(folder)
            _drain(cluster, _node_id(cluster, WORKER))
            drained = time.monotonic()
            node = mount_namespace(worker.pid)
            time.sleep(max(0.0, DEADLINE_S - (time.monotonic() - drained)))
            for _ in range(2):  # the node and everything on it; twice, for late forks
                sigkill(namespace_pids(node))
            worker.wait(timeout=30)
            text = finish(proc, log)
        finally:
            kill_group(proc.pid)
        client = MlflowClient(server.uri)
        seeds = by_seed(roles_in(client, "drain")[1])
        run = seeds[seed][0]
        counts = compare_with_events(client, run, trial_folder(out, seed))

    assert proc.returncode == 0, text[-3000:]
    assert sorted(seeds) == [1, 2] and all(len(r) == 1 for r in seeds.values()), seeds
    assert run.info.status == "FINISHED"
    assert run.data.tags.get(record_names.TAG_PREEMPTIONS) == "1"
    ((step, where),) = _preempted_tag(run)
    assert step >= noticed_at >= PAST and f"({WORKER}, " in where
    assert f"({HEAD}, " in run.data.tags[record_names.TAG_NODE], "did not resume on the head"
    head_folder = trial_folder(out, seed)
    assert head_folder is not None
    trainer_log = (head_folder / record_names.TRAINER_LOG_FILE).read_text()
    assert f"sweeper: restored the checkpoint synced at step {step}" in trainer_log
    assert f"dummy trainer: starting at step {step} of 20" in trainer_log
    assert resumed_steps(trainer_log) == [step]
    assert "starting at step 0 " not in trainer_log  # the head never ran it from scratch
    assert f"s{seed}: preempted at step {step}" in text
    assert counts[1:] == (0, 0), f"(points, missing, extra) = {counts}"
    record(
        "p1. spot node drained for preemption mid-trial",
        f"two-node loopback cluster without a shared filesystem, retries: 0, one epoch of "
        f"20 updates (no periodic checkpoint before step 20); `ray drain-node --reason "
        f"DRAIN_NODE_REASON_PREEMPTION --deadline-remaining-seconds {DEADLINE_S}` on the "
        f"worker once its trial s{seed} had passed step {noticed_at}, SIGKILL to the whole "
        "worker at the deadline",
        f"exit 0; s{seed} saved a checkpoint at step {step} on the notice, synced it, and "
        f"resumed on the head from step {step} (not 0), no retry spent; the run is tagged "
        f"preempted once; MLflow vs its events file: {counts[0]} points, 0 missing, 0 "
        "duplicated",
    )


def _sigterm_when_past(out: Path, seed: int, proc: Any, log: Path, past: int) -> int:
    """SIGTERM the trial's trainer process alone once it has passed step `past`;
    returns the step it had reached."""

    def ready() -> tuple[int, int] | None:
        folder = trial_folder(out, seed)
        if folder is None or _last_step(folder) < past:
            return None
        pids = trainer_pids(folder)
        return (pids[0], _last_step(folder)) if pids else None

    pid, step = wait_until(ready, proc, log, timeout=240)
    os.kill(pid, signal.SIGTERM)
    return step


def test_past_its_preemption_bound_a_trial_fails_naming_the_bound(tmp_path, tmp_path_factory):
    spec, out = new_sweep(
        tmp_path, tmp_path_factory, "bound", grid={"seed": [1]}, train=ONE_EPOCH,
        retries=0, preemptions=1,
    )  # fmt: skip
    log = tmp_path / "sweep.log"
    proc = start_sweep(log, spec, env=sweeper_env({"*": {"sleep_per_step": 0.5}}))
    try:
        first = _sigterm_when_past(out, 1, proc, log, 4)
        wait_until(lambda: "dummy trainer: starting at step" in _trainer_log(out, 1, 2), proc,
                   log, timeout=120)  # fmt: skip
        second = _sigterm_when_past(out, 1, proc, log, first + 3)
        text = finish(proc, log)
    finally:
        kill_group(proc.pid)
    assert proc.returncode == 1, text[-3000:]
    (run,) = by_seed(roles_in(client_for(out), "bound")[1])[1]
    assert run.info.status == "FAILED"
    error = run.data.tags[record_names.TAG_ERROR]
    assert "preempted 2 times, more than preemptions: 1 allows" in error, error
    assert run.data.tags[record_names.TAG_PREEMPTIONS] == "2"
    steps = [step for step, _ in _preempted_tag(run)]
    assert len(steps) == 2 and steps[0] >= first and steps[1] >= second, steps
    record(
        "p3. a trial preempted past its bound",
        "one dummy trial, retries: 0, preemptions: 1; SIGTERM to its trainer at step "
        f"{first}, then again after it resumed",
        "exit 1; the run FAILED with `preempted 2 times, more than preemptions: 1 allows`",
    )


def _trainer_log(out: Path, seed: int, starts: int) -> str:
    """The trial's trainer log once it holds `starts` start lines (else empty)."""
    folder = trial_folder(out, seed)
    path = folder / record_names.TRAINER_LOG_FILE if folder is not None else None
    text = path.read_text() if path is not None and path.exists() else ""
    return text if text.count("dummy trainer: starting at step") >= starts else ""


@pytest.mark.parametrize("framework", ["fairseq", "hf"])
def test_sigterm_to_the_trainer_is_a_preemption_not_a_failure(
    framework, tmp_path, tmp_path_factory
):
    spec, out = new_sweep(
        tmp_path, tmp_path_factory, f"term-{framework}",
        grid={"seed": [1], "init": ["random"], "framework": [framework]},
        train={"epochs": 40}, retries=0,
    )  # fmt: skip
    log = tmp_path / "sweep.log"
    proc = start_sweep(log, spec, env=sweeper_env())

    def running() -> tuple[Path, int, int] | None:
        folder = next((out / "trials").glob(f"{framework}-random-full-s1-*"), None)
        if folder is None or _last_step(folder) < 25:
            return None
        pids = trainer_pids(folder, marker="sweeper.trainers.")
        return (folder, pids[0], _last_step(folder)) if pids else None

    try:
        folder, pid, reached = wait_until(running, proc, log, timeout=300)
        os.kill(pid, signal.SIGTERM)
        text = finish(proc, log)
    finally:
        kill_group(proc.pid)
    assert proc.returncode == 0, text[-3000:]
    (run,) = by_seed(roles_in(client_for(out), f"term-{framework}")[1])[1]
    assert run.info.status == "FINISHED"
    assert run.data.tags[record_names.TAG_PREEMPTIONS] == "1"
    ((step, _),) = _preempted_tag(run)
    assert step >= reached, (step, reached)
    assert step < 400, "the trainer had finished: no mid-run checkpoint was needed"
    trainer_log = (folder / record_names.TRAINER_LOG_FILE).read_text()
    assert f"sweeper: preempted: checkpoint saved at step {step}" in trainer_log
    assert resumed_steps(trainer_log) == [step], trainer_log[-3000:]
    assert "failed (attempt" not in text and f"preempted at step {step}" in text
    counts = compare_with_events(client_for(out), run, folder)
    assert counts[1:] == (0, 0), f"(points, missing, extra) = {counts}"
    record(
        f"p2. SIGTERM to a {framework} trainer (a VM shutting down)",
        f"one {framework} trial of 400 updates on one node, retries: 0; SIGTERM to the "
        f"trainer process alone once it had passed step {reached}",
        f"exit 0; the trainer saved a checkpoint at step {step} and exited as preempted; "
        f"the trial resumed from step {step}, no retry spent, the run tagged preempted "
        f"once; MLflow vs its events file: {counts[0]} points, 0 missing, 0 duplicated",
    )
