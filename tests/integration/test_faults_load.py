"""A slow tracking server, and a long soak: load rather than breakage (issue 17, item 5).

Both run the real `sweeper run` CLI against a real loopback `mlflow server` with the
dummy trainer (a real subprocess per trial) and check MLflow's record against each
trial's own events file: every point once, none lost.

* Slow server: the same 4-trial sweep straight to the server, then through a loopback
  proxy that holds every request 200 ms (`tests.support.proxy`); the ratio of the two
  wall times is recorded.
* Soak (`soak` marker: `make reliability` runs it, `make test` does not; about 6
  minutes on 2 cores): 200 trials of about 3 s, 2 at a time. The driver's resident
  memory is sampled every second; at the last trial it must be within 20% of its value
  after the first 20 (a leak per trial would show as growth), and trials per minute
  are reported.
* Load on the cluster's own database (`soak`; about 6 minutes on 2 cores): 200 trials,
  8 at once, over a loopback two-node Ray cluster (`sweeper run --address`), logging to
  an `mlflow server` on a real PostgreSQL; the record is read from PostgreSQL itself
  (one SQL query, not through MLflow) and checked against every trial's events file,
  and the sweep's sustained points per second are reported. Then the same server is
  loaded in steps of writers (`tests.support.server_load`) with 1, 2 and 4 server
  workers, to say where it saturates (docs/cluster.md, "Sizing the tracking server").
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import pytest

from sweeper import record_names
from tests.support.cluster import mlflow_server, ray_cluster
from tests.support.faults import (
    compare_points,
    compare_with_events,
    compared_keys,
    expected_points,
    finish,
    server_root,
    start_sweep,
    trial_folder,
)
from tests.support.proxy import slow_proxy
from tests.support.reliability import record
from tests.support.server_load import knee, saturation
from tests.support.sweeps import kill_group, new_sweep, sweeper_env

pytestmark = [pytest.mark.integration, pytest.mark.slow]

DELAY_S = 0.2
SOAK = {"*": {"sleep_per_step": 0.15}}
"""A few seconds per soak trial (20 steps), as the issue asks: work, not just start-up."""
FINISHED = re.compile(r"^\[(\d+)/\d+ done\] \S+: finished", re.MULTILINE)


def _sweep(
    tmp_path: Path, tmp_path_factory: Any, name: str, uri: str, seeds: list[int], **faults: Any
) -> tuple[float, Path]:
    """Run a dummy sweep against `uri` to the end: (wall seconds, output_dir)."""
    spec, out = new_sweep(tmp_path / name, tmp_path_factory, name, grid={"seed": seeds}, retries=0)
    log = tmp_path / f"{name}.log"
    start = time.monotonic()
    proc = start_sweep(log, spec, "--tracking-uri", uri, env=sweeper_env({"*": faults}))
    try:
        text = finish(proc, log, timeout=900)
    finally:
        kill_group(proc.pid)
    assert proc.returncode == 0, text[-3000:]
    return time.monotonic() - start, out


def _check_record(uri: str, name: str, out: Path, seeds: list[int]) -> tuple[int, int, int]:
    """(points, missing, duplicated or extra) over every trial run of sweep `name`."""
    from mlflow import MlflowClient

    client = MlflowClient(uri)
    experiment = client.get_experiment_by_name(name)
    runs = client.search_runs([experiment.experiment_id], max_results=5000)
    trials = [r for r in runs if r.data.tags.get(record_names.TAG_ROLE) == record_names.ROLE_TRIAL]
    assert sorted(int(r.data.tags[record_names.TAG_SEED]) for r in trials) == seeds  # one per key
    assert all(r.info.status == "FINISHED" for r in trials)
    totals = [0, 0, 0]
    for run in trials:
        folder = trial_folder(out, int(run.data.tags[record_names.TAG_SEED]))
        assert folder is not None
        for i, n in enumerate(compare_with_events(client, run, folder)):
            totals[i] += n
    return totals[0], totals[1], totals[2]


@pytest.mark.soak  # a multi-minute scenario: `make reliability` runs it
def test_a_slow_tracking_server_loses_no_point(tmp_path, tmp_path_factory):
    seeds = [1, 2, 3, 4]
    with mlflow_server(server_root(tmp_path, tmp_path_factory)) as server:
        fast_s, _ = _sweep(
            tmp_path, tmp_path_factory, "direct", server.uri, seeds, sleep_per_step=0.2
        )
        with slow_proxy(server.uri, DELAY_S) as proxy:
            slow_s, out = _sweep(
                tmp_path, tmp_path_factory, "slow", proxy.uri, seeds, sleep_per_step=0.2
            )
        points, missing, extra = _check_record(server.uri, "slow", out, seeds)
    assert points > 0 and (missing, extra) == (0, 0), (points, missing, extra)
    assert proxy.requests > 0
    record(
        "slow tracking server",
        f"every request to the `mlflow server` held {DELAY_S * 1000:.0f} ms by a loopback "
        f"proxy; 4 dummy trials (20 steps of 0.2 s), 2 at a time",
        f"exit 0; {proxy.requests} requests through the proxy; 4/4 runs FINISHED; MLflow vs "
        f"the trials' events files: {points} points, {missing} missing, {extra} duplicated "
        f"or extra; wall time {slow_s:.1f} s against {fast_s:.1f} s without the delay "
        f"({slow_s / fast_s:.2f}x)",
    )


def _rss_kb(pid: int) -> int | None:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    match = re.search(r"^VmRSS:\s+(\d+) kB", status, re.MULTILINE)
    return int(match.group(1)) if match else None


@pytest.mark.soak
def test_soak_200_trials_keep_every_point_and_the_driver_flat(tmp_path, tmp_path_factory):
    seeds = list(range(1, 201))
    with mlflow_server(server_root(tmp_path, tmp_path_factory)) as server:
        spec, out = new_sweep(tmp_path / "soak", tmp_path_factory, "soak",
                              grid={"seed": seeds}, retries=0)  # fmt: skip
        log = tmp_path / "soak.log"
        start = time.monotonic()
        proc = start_sweep(log, spec, "--tracking-uri", server.uri, env=sweeper_env(SOAK))
        samples: list[tuple[int, int]] = []  # (trials finished, driver RSS kB)
        first_at = last_at = None
        try:
            while proc.poll() is None:
                done = [int(n) for n in FINISHED.findall(log.read_text(errors="replace"))]
                finished = max(done, default=0)
                if finished and first_at is None:
                    first_at = time.monotonic()
                if finished >= len(seeds) and last_at is None:
                    last_at = time.monotonic()
                rss = _rss_kb(proc.pid)
                if rss is not None and finished < len(seeds):
                    samples.append((finished, rss))
                time.sleep(1.0)
            text = finish(proc, log, timeout=60)
        finally:
            kill_group(proc.pid)
        assert proc.returncode == 0, text[-3000:]
        wall_s = time.monotonic() - start
        points, missing, extra = _check_record(server.uri, "soak", out, seeds)
    after_20 = next(rss for finished, rss in samples if finished >= 20)
    end_finished, at_end = samples[-1]
    assert points > 0 and (missing, extra) == (0, 0), (points, missing, extra)
    assert at_end <= 1.2 * after_20, (after_20, at_end)
    assert first_at is not None and last_at is not None
    per_minute = (len(seeds) - 1) / ((last_at - first_at) / 60)
    record(
        "soak: 200 trials on a tracking server",
        "200 dummy trials (20 steps of 0.15 s each), 2 at a time, to a loopback "
        "`mlflow server`; "
        "the driver's RSS sampled every second",
        f"exit 0 in {wall_s:.0f} s; 200/200 runs FINISHED, one per key; MLflow vs the "
        f"trials' events files: {points} points, {missing} missing, {extra} duplicated "
        f"or extra; driver RSS {after_20 / 1024:.0f} MiB after 20 trials, "
        f"{at_end / 1024:.0f} MiB after {end_finished} ({at_end / after_20:.2f}x); "
        f"{per_minute:.1f} trials per minute from the first trial's end to the last's",
    )


LOAD_TRIALS, LOAD_AT_ONCE = 200, 8
LOAD = {"*": {"sleep_per_step": 0.1}}
SERVER_WORKERS = (1, 2, 4)
"""`mlflow server --workers` of the saturation steps"""
"""About 2 s of steps per trial: a report every few hundred ms from 8 trials at once,
each with its train loss, learning rate, validation and system points."""


def _record_in_postgres(postgres: Any, database: str) -> dict[int, dict[Any, list[Any]]]:
    """seed -> {(metric, step): [(timestamp, value)]} of every trial run (the runs with
    a seed tag), read from the `metrics` table with one query."""
    rows = postgres.psql(
        "SELECT s.value, m.key, m.step, m.timestamp, m.value FROM metrics m "
        "JOIN tags s ON s.run_uuid = m.run_uuid AND s.key = 'sweeper.seed'",
        database=database,
    )
    found: dict[int, dict[Any, list[Any]]] = {}
    for line in rows.splitlines():
        seed, key, step, timestamp, value = line.split("|")
        points = found.setdefault(int(seed), {}).setdefault((key, int(step)), [])
        points.append((int(timestamp), float(value)))
    return found


def _runs_and_nodes(postgres: Any, database: str) -> tuple[dict[int, int], set[str]]:
    """(seed -> how many runs have that seed tag, the trial runs' distinct node tags)."""
    runs = postgres.psql(
        "SELECT value, count(*) FROM tags WHERE key = 'sweeper.seed' GROUP BY value", database
    )
    nodes = postgres.psql("SELECT DISTINCT value FROM tags WHERE key = 'sweeper.node'", database)
    per_seed = dict(map(int, line.split("|")) for line in runs.splitlines() if line)
    return per_seed, {line for line in nodes.splitlines() if line}


@pytest.mark.soak
def test_load_200_trials_8_at_once_on_a_cluster_keep_every_point_in_postgres(
    tmp_path, tmp_path_factory, postgres, postgres_uri
):
    seeds = list(range(1, LOAD_TRIALS + 1))
    database = postgres_uri.rsplit("/", 1)[1]
    spec, out = new_sweep(tmp_path / "load", tmp_path_factory, "load", grid={"seed": seeds},
                          max_concurrent=LOAD_AT_ONCE, retries=0)  # fmt: skip
    log = tmp_path / "load.log"
    extra = {"SWEEPER_DUMMY_EXTRA": json.dumps(LOAD)}
    with (
        mlflow_server(tmp_path / "server", backend_store_uri=postgres_uri) as server,
        ray_cluster(tmp_path / "ray_logs", head_cpus=LOAD_AT_ONCE // 2, **extra) as cluster,
    ):
        cluster.add_worker(num_cpus=LOAD_AT_ONCE // 2)
        args = ("--address", cluster.address, "--tracking-uri", server.uri)
        start = time.monotonic()
        proc = start_sweep(log, spec, *args, env=cluster.env)
        try:
            text = finish(proc, log, timeout=1800)
        finally:
            kill_group(proc.pid)
        wall_s = time.monotonic() - start
        assert proc.returncode == 0, text[-3000:]
        stored = _record_in_postgres(postgres, database)
        per_seed, nodes = _runs_and_nodes(postgres, database)
    assert per_seed == dict.fromkeys(seeds, 1), "a seed without its one run"
    assert sorted(stored) == seeds
    totals = [0, 0, 0]
    for seed in seeds:
        folder = trial_folder(out, seed)
        assert folder is not None
        expected = expected_points(folder)
        keys = compared_keys(expected)
        history = {where: p for where, p in stored[seed].items() if where[0] in keys}
        for i, n in enumerate(compare_points(expected, history)):
            totals[i] += n
    points, missing, extra_points = totals
    assert points > 0 and (missing, extra_points) == (0, 0), totals
    assert len(nodes) == 2, f"trials ran on {nodes}, not on both nodes"
    every = [t for seed in seeds for points_at in stored[seed].values() for t, _ in points_at]
    span_s = (max(every) - min(every)) / 1000
    rate = len(every) / span_s
    steps = {}
    for workers in SERVER_WORKERS:
        with mlflow_server(
            tmp_path / f"server{workers}", backend_store_uri=postgres_uri, workers=workers
        ) as server:
            steps[workers] = saturation(server.uri, f"saturation-{workers}")
    for workers, found in steps.items():
        print(f"server workers {workers}: " + "; ".join(s.line() for s in found))
    print(
        f"load: {LOAD_TRIALS} trials, {LOAD_AT_ONCE} at once, 2 nodes: {len(every)} points in "
        f"{span_s:.0f} s, {rate:.0f} points/s sustained; {points} events-file points, "
        f"{missing} missing, {extra_points} duplicated or extra; sweep wall {wall_s:.0f} s"
    )

    def best(workers: int) -> str:
        top = knee(steps[workers])
        return (
            f"{top.points_per_s:.0f} points/s from {top.writers} writer(s) on "
            f"(p50 {top.p50_ms:.0f} ms, p95 {top.p95_ms:.0f} ms)"
        )

    record(
        "load: 200 trials, 8 at once, on a cluster, to PostgreSQL",
        f"{LOAD_TRIALS} dummy trials (20 steps of 0.1 s), {LOAD_AT_ONCE} at once over a "
        "loopback two-node Ray cluster, to an `mlflow server` on PostgreSQL; then the "
        "server loaded in steps of 1, 2, 4, 8, 16 writers of 20-point batches, 6 s each, "
        "with 1, 2 and 4 server workers (`mlflow server --workers`)",
        f"exit 0 in {wall_s:.0f} s; {LOAD_TRIALS}/{LOAD_TRIALS} seeds with one run, on "
        f"{len(nodes)} nodes; PostgreSQL's metrics table vs the trials' events files: "
        f"{points} points, {missing} missing, {extra_points} duplicated or extra; "
        f"{len(every)} points stored in {span_s:.0f} s ({rate:.0f} points/s sustained); "
        "saturation (the first step within 10% of the best): "
        + "; ".join(f"{w} server worker(s) {best(w)}" for w in SERVER_WORKERS),
    )
