"""Faults of the cluster's own database: sweeps tracked by an MLflow server on PostgreSQL.

The deployment docs/cluster.md describes keeps the record in PostgreSQL behind a tracking
server. Its faults are injected from outside into the real `sweeper run` CLI (real Ray,
real `mlflow server`, real PostgreSQL from tests/support/postgres.py, the dummy trainer
as a real subprocess):

1. PostgreSQL stopped for 30 s mid-sweep and started again, the MLflow server left
   running: the server answers HTTP 503 (and the odd 500) instead of refusing
   connections, which the driver must take for "store away", not for a rejection;
2. the MLflow server SIGKILLed mid-sweep and started again on the same database;
3. the driver SIGKILLed mid-sweep, then `sweeper run --resume`.

Each checks that every trial finished once and that what PostgreSQL holds is exactly
what the trainers measured (their own events files): 0 points lost, 0 duplicated. The
first two also check the driver's progress line while the store is away. Only processes
these tests started are signalled, by pid.
"""

from __future__ import annotations

from typing import Any

import pytest

from sweeper import record_names
from tests.support.cluster import mlflow_server
from tests.support.faults import (
    RESUME_FAULTS,
    Outage,
    database_stopped,
    kill_driver_once,
    server_counts,
    server_restarted,
    start_sweep,
    sweep_through_outage,
    trainer_log,
)
from tests.support.postgres import PostgresServer, postgres_server
from tests.support.reliability import record
from tests.support.sweeps import new_sweep, roles_in, run_sweeper, sweeper_env

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SEEDS = [1, 2, 3, 4]
DOWN_S = 30
NOTE = "tracking store unreachable since"
"""The driver's progress line while the store is away (sweeper.tracking.outbox)."""


def _database(postgres: PostgresServer, uri: str) -> str:
    return uri.rsplit("/", 1)[1]


def _rows(postgres: PostgresServer, database: str, trials: list[Any]) -> tuple[int, int]:
    """(rows of PostgreSQL's metrics table for these runs, distinct (run, key, step) among
    them): read from the database itself, not through MLflow."""
    ids = ", ".join(f"'{r.info.run_id}'" for r in trials)
    answer = postgres.psql(
        "SELECT count(*), count(DISTINCT (run_uuid, key, step)) FROM metrics "
        f"WHERE run_uuid IN ({ids})",
        database=database,
    )
    rows, distinct = answer.strip().split("|")
    return int(rows), int(distinct)


def _observed(outage: Outage, rows: tuple[int, int]) -> str:
    points, missing, extra = outage.totals()
    notes = outage.text.count(NOTE)
    return (
        f"exit 0; {outage.made_while_down} metric events made by the trials meanwhile; "
        f"driver, {notes} progress line(s) while it was away, the last: "
        f"{outage.last_line(NOTE)}; then: "
        f"{outage.line('reachable again')}; 4/4 runs FINISHED; MLflow vs the trials' "
        f"events files: {points} points, {missing} missing, {extra} duplicated or extra; "
        f"PostgreSQL's metrics table: {rows[0]} rows, {rows[0] - rows[1]} repeated "
        "(run, key, step)"
    )


@pytest.mark.soak  # a multi-minute scenario: `make reliability` runs it
def test_postgresql_stopped_mid_sweep_loses_no_metric_point(tmp_path, tmp_path_factory):
    spec, out = new_sweep(
        tmp_path, tmp_path_factory, "pgstop", grid={"seed": SEEDS}, max_concurrent=2, retries=2
    )
    faults = {"*": {"sleep_per_step": 1.0}}  # trials run on past the 30 s outage
    log = tmp_path / "sweep.log"
    with (
        postgres_server() as postgres,  # its own server: this test stops it
        mlflow_server(tmp_path / "server", backend_store_uri=postgres.uri) as server,
    ):
        outage = sweep_through_outage(
            spec, out, log, server.uri, sweeper_env(faults),
            lambda: database_stopped(postgres, DOWN_S),
        )  # fmt: skip
        rows = _rows(postgres, _database(postgres, postgres.uri), outage.trials)
    outage.assert_every_point_once(SEEDS)
    notes = [line for line in outage.text.splitlines() if NOTE in line]
    assert len(notes) >= 2, notes  # the first failure, and again while it stayed away
    assert all(f"{server.uri} answers HTTP 5" in line for line in notes), notes
    assert rows[0] == rows[1], rows
    record(
        "db1. PostgreSQL stopped mid-sweep (MLflow server left running)",
        f"PostgreSQL behind the `mlflow server` stopped (fast shutdown, by pid) once the "
        f"trials had begun, the same server (data dir, port) started again {DOWN_S} s "
        f"later; down {outage.down_s:.0f} s; 4 trials of 20 steps, 2 at a time",
        _observed(outage, rows),
    )


@pytest.mark.soak  # a multi-minute scenario: `make reliability` runs it
def test_a_restarted_tracking_server_on_postgresql_loses_no_metric_point(
    tmp_path, tmp_path_factory, postgres: PostgresServer, postgres_uri: str
):
    spec, out = new_sweep(
        tmp_path, tmp_path_factory, "pgrestart", grid={"seed": SEEDS}, max_concurrent=2, retries=2
    )
    faults = {"*": {"sleep_per_step": 0.4}}
    root, log = tmp_path / "server", tmp_path / "sweep.log"
    with mlflow_server(root, backend_store_uri=postgres_uri) as server:
        outage = sweep_through_outage(
            spec, out, log, server.uri, sweeper_env(faults),
            lambda: server_restarted(server, root, backend_store_uri=postgres_uri),
        )  # fmt: skip
    rows = _rows(postgres, _database(postgres, postgres_uri), outage.trials)
    outage.assert_every_point_once(SEEDS)
    assert rows[0] == rows[1], rows
    record(
        "db2. tracking server on PostgreSQL restarted mid-sweep",
        "SIGKILL to the `mlflow server` process group once the trials had begun; the same "
        "server (port, PostgreSQL database, artifact folder) started again 3 s later; down "
        f"{outage.down_s:.0f} s; 4 trials of 20 steps, 2 at a time",
        _observed(outage, rows),
    )


@pytest.mark.soak  # a multi-minute scenario: `make reliability` runs it
def test_a_killed_driver_on_postgresql_resumes_every_point_once(
    tmp_path, tmp_path_factory, postgres: PostgresServer, postgres_uri: str
):
    """As test_run_resume.py on a local file, through a server on PostgreSQL: s1 is
    fast, s2-s4 slow; the driver is SIGKILLed once s1 finished and s2 passed its step-10
    checkpoint; `--resume` finishes the rest in the same runs."""
    from mlflow import MlflowClient

    spec, out = new_sweep(tmp_path, tmp_path_factory, "pgresume", grid={"seed": SEEDS})
    log = tmp_path / "first.log"
    with mlflow_server(tmp_path / "server", backend_store_uri=postgres_uri) as server:
        client = MlflowClient(server.uri)
        proc = start_sweep(log, spec, "--tracking-uri", server.uri, env=sweeper_env(RESUME_FAULTS))
        kill_driver_once(log, proc, ["s1: finished", "s2: step 10/20"])
        _, before = roles_in(client, "pgresume")
        s1_log = trainer_log(out, 1).read_text()
        resumed = run_sweeper(
            "run", spec, "--tracking-uri", server.uri, "--resume", extra=RESUME_FAULTS
        )
        after, counts = server_counts(client, "pgresume", out)
    rows = _rows(postgres, _database(postgres, postgres_uri), after)
    status_before = {int(r.data.tags[record_names.TAG_SEED]): r.info.status for r in before}
    assert len(before) == 4
    assert status_before[1] == "FINISHED" and status_before[2] == "RUNNING", status_before
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "1 finished before, 3 to resume, 0 new" in resumed.stdout
    assert "dummy-random-full-s1: started" not in resumed.stdout
    ids = {r.data.tags[record_names.TAG_TRIAL_KEY]: r.info.run_id for r in after}
    assert ids == {r.data.tags[record_names.TAG_TRIAL_KEY]: r.info.run_id for r in before}
    assert all(r.info.status == "FINISHED" for r in after)
    assert sorted(counts) == SEEDS
    for seed, (points, missing, extra) in counts.items():
        assert points > 0 and (missing, extra) == (0, 0), f"s{seed}: {points} {missing} {extra}"
    assert trainer_log(out, 1).read_text() == s1_log  # the finished trial not run again
    assert "starting at step 10" in trainer_log(out, 2).read_text()
    points, missing, extra = (sum(c[i] for c in counts.values()) for i in range(3))
    record(
        "db3. driver SIGKILLed, then `--resume`, on PostgreSQL",
        "tracking server on PostgreSQL; SIGKILL to the `sweeper run` driver once s1 had "
        "finished and s2 had passed its step-10 checkpoint (4 trials, 2 at a time); then "
        "`sweeper run --resume`",
        f"runs before resume: 4 ({sorted(status_before.values())}); `--resume` exit "
        f"{resumed.returncode}: 1 finished before, 3 resumed, 0 new; 4/4 keys with exactly "
        "one FINISHED run, same run ids; s1 not re-run; s2 resumed from step 10; MLflow vs "
        f"the trials' events files: {points} points, {missing} missing, {extra} duplicated "
        f"or extra; PostgreSQL's metrics table: {rows[0]} rows for {rows[1]} (run, key, "
        "step)",
    )
