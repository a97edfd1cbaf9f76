"""A sweep on two nodes that share no filesystem, and a node lost mid-trial (issue 13).

The worker node's `ray start` runs in a private mount namespace with an empty tmpfs
over the pytest temp root, which holds everything the sweep has on disk (spec, corpus,
prepared data, output_dir, the nodes' input caches): the worker cannot read the head's
files and its own writes stay on its "disk". A Ray task on each node checks that
before the sweep starts. The tracking server (a real `mlflow server` with served
artifacts) is the only storage both nodes reach.

The sweep (3 dummy trials, 20 steps, a validation point and a checkpoint sync every 10)
must put a trial on the worker, which has to stage its inputs from the artifact store
(the dummy trainer refuses to run without them). Once that trial has synced its step-10
checkpoint, every process of the worker node is SIGKILLed. The trial is retried on the
head, which never saw its folder: it must resume from the synced checkpoint (step > 0),
and MLflow must end with one run per trial key holding each metric point of the trials'
events exactly once.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from sweeper import record_names
from sweeper.tracking.resume_sync import MANIFEST_PREFIX, RESUME_DIR
from sweeper.tracking.staging import CACHE_ENV, INPUTS_DIR
from tests.support.cluster import (
    FIRST_WORKER_IP,
    HEAD_IP,
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
    trial_folder,
    wait_until,
)
from tests.support.reliability import record
from tests.support.sweeps import kill_group, new_sweep, roles_in

pytestmark = [pytest.mark.integration, pytest.mark.slow]

HEAD, WORKER = HEAD_IP, FIRST_WORKER_IP
SEEDS = [1, 2, 3]

# Runs a task pinned to each alive node; prints {node ip: {path: exists}}.
PROBE = """
import json, os, sys, ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
ray.init(address=sys.argv[1], logging_level="ERROR", log_to_driver=False)
@ray.remote(num_cpus=0)
def look(paths):
    return {p: os.path.exists(p) for p in paths}
seen = {}
for node in ray.nodes():
    if node["Alive"]:
        pinned = NodeAffinitySchedulingStrategy(node["NodeID"], soft=False)
        task = look.options(scheduling_strategy=pinned).remote(sys.argv[2:])
        seen[node["NodeManagerAddress"]] = ray.get(task)
print(json.dumps(seen))
"""


def _each_node_sees(address: str, env: dict[str, str], paths: list[Path]) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, address, *map(str, paths)],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def _listing(folder: Path) -> list[str]:
    """A node cache's inputs (one folder per content hash)."""
    return sorted(os.listdir(folder)) if folder.exists() else []


def _synced_on_worker(client: Any, experiment: str) -> tuple[Any, int] | None:
    """A trial run on the worker node with a checkpoint synced to its artifacts."""
    for run in roles_in(client, experiment)[1]:
        if f"({WORKER}, " not in run.data.tags.get(record_names.TAG_NODE, ""):
            continue
        manifests = [
            a.path for a in client.list_artifacts(run.info.run_id, RESUME_DIR)
            if Path(a.path).name.startswith(MANIFEST_PREFIX)
        ]  # fmt: skip
        if manifests:
            return run, max(int(Path(m).stem[len(MANIFEST_PREFIX) :]) for m in manifests)
    return None


@dataclass
class Lost:
    """What the sweep did up to the worker's death, and its output."""

    seed: int
    synced_step: int
    staged: list[str]
    """the worker node's input cache, read through its mount namespace"""
    head_cache: list[str]
    returncode: int | None
    text: str
    took: float


@pytest.mark.soak  # a multi-minute scenario: `make reliability` runs it
def test_a_sweep_without_shared_storage_survives_losing_a_node(tmp_path, tmp_path_factory):
    spec, out = new_sweep(
        tmp_path, tmp_path_factory, "noshare", grid={"seed": SEEDS}, max_concurrent=2,
        retries=1, sync_interval_s=0,
    )  # fmt: skip
    with mlflow_server(tmp_path / "server") as server:
        lost = _sweep_and_lose_the_worker(spec, out, server.uri, tmp_path_factory.getbasetemp())
        totals = _check_the_record(server.uri, out, lost)
    record(
        "b2. worker node without a shared filesystem lost mid-trial",
        f"two-node loopback cluster, the worker ({WORKER}) in a private mount namespace "
        "with a tmpfs over every folder of the sweep (checked: its tasks see none of the "
        "head's files), a tracking server with served artifacts the only shared storage; "
        f"3 trials of 20 steps; SIGKILL to every process of the worker node once trial "
        f"s{lost.seed} on it had synced its step-{lost.synced_step} checkpoint",
        f"exit 0, {lost.took:.0f} s after the kill; the worker had staged "
        f"{len(lost.staged)} inputs (fairseq + HF data) from the artifact store; "
        f"s{lost.seed} retried on the head, which never had its folder, resumed from the "
        f"synced step "
        f"{lost.synced_step}; 3/3 keys with exactly one FINISHED run; MLflow vs the "
        f"trials' events files: {totals[0]} points, {totals[1]} missing, {totals[2]} "
        "duplicated or extra",
    )


def _sweep_and_lose_the_worker(spec: Path, out: Path, tracking: str, disk: Path) -> Lost:
    """Run the sweep on a head and a worker with a private `disk`; kill the worker
    once a trial on it has synced a checkpoint; wait for the sweep to end."""
    from mlflow import MlflowClient

    cache = out.parent / "node-cache"  # the same path on both nodes, a different disk each
    log = out.parent / "sweep.log"
    slow = json.dumps({"*": {"sleep_per_step": 0.8}})
    with ray_cluster(
        out.parent / "ray_logs", head_cpus=1, SWEEPER_DUMMY_EXTRA=slow,
        **{CACHE_ENV: str(cache)}, **FAST_NODE_DEATH,
    ) as cluster:  # fmt: skip
        cluster.add_worker(num_cpus=1, wrap=private_disk(disk))
        worker = cluster.procs[1]
        seen = _each_node_sees(cluster.address, cluster.env, [spec, out / "prepared"])
        assert set(seen) == {HEAD, WORKER}, seen
        assert all(seen[HEAD].values()), f"the head must see its own files: {seen}"
        assert not any(seen[WORKER].values()), f"the worker sees the head's files: {seen}"

        client = MlflowClient(tracking)
        args = ("--address", cluster.address, "--tracking-uri", tracking)
        proc = start_sweep(log, spec, *args, env=cluster.env)
        try:
            run, step = wait_until(
                lambda: _synced_on_worker(client, "noshare"), proc, log, timeout=240
            )
            staged = _listing(Path(f"/proc/{worker.pid}/root{cache}") / INPUTS_DIR)
            head_cache = _listing(cache / INPUTS_DIR)
            node = mount_namespace(worker.pid)
            lost_at = time.monotonic()
            for _ in range(2):  # the node and everything on it; twice, for late forks
                sigkill(namespace_pids(node))
            worker.wait(timeout=30)
            text = finish(proc, log)
        finally:
            kill_group(proc.pid)
    seed = int(run.data.tags[record_names.TAG_SEED])
    took = time.monotonic() - lost_at
    return Lost(seed, step, staged, head_cache, proc.returncode, text, took)


def _check_the_record(tracking: str, out: Path, lost: Lost) -> list[int]:
    """The assertions; returns (events points, missing, duplicated) over every trial."""
    from mlflow import MlflowClient

    assert lost.returncode == 0, lost.text[-3000:]
    assert "inputs for every node:" in lost.text, lost.text[-3000:]
    assert len(lost.staged) == 2, f"the worker staged {lost.staged}, not the fairseq + HF data"
    assert lost.head_cache == [], "the head's trials should read the driver's paths in place"

    client = MlflowClient(tracking)
    seeds = by_seed(roles_in(client, "noshare")[1])
    assert sorted(seeds) == SEEDS and all(len(r) == 1 for r in seeds.values()), seeds
    assert all(r[0].info.status == "FINISHED" for r in seeds.values())
    final = seeds[lost.seed][0]
    assert f"({HEAD}, " in final.data.tags[record_names.TAG_NODE], (
        "the retry did not run on the head"
    )
    assert f"s{lost.seed}: failed (attempt 1), retrying" in lost.text

    folder = trial_folder(out, lost.seed)
    assert folder is not None
    trainer_log = (folder / record_names.TRAINER_LOG_FILE).read_text()
    assert lost.synced_step > 0
    assert f"sweeper: restored the checkpoint synced at step {lost.synced_step}" in trainer_log
    assert f"dummy trainer: starting at step {lost.synced_step} of 20" in trainer_log
    assert "starting at step 0 " not in trainer_log  # the head never ran it from scratch

    totals = [0, 0, 0]
    for seed, (run,) in seeds.items():
        seed_folder = trial_folder(out, seed)
        assert seed_folder is not None
        counts = compare_with_events(client, run, seed_folder)
        assert counts[1:] == (0, 0), f"s{seed}: (points, missing, extra) = {counts}"
        totals = [t + c for t, c in zip(totals, counts, strict=True)]
    return totals
