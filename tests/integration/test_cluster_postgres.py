"""The design card's path on the cluster's own database: `sweeper cluster up
--backend-store-uri postgresql://...` on a real PostgreSQL (tests/support/postgres.py),
started from a shell where the project's environment was never activated.

One cluster for the module. Its PATH lacks the venv's bin folder (`.venv/bin/sweeper
cluster up` from a plain shell), so a Ray job's `sweeper run` works only because `up`
puts its own interpreter's folder first on the head's PATH. On it:

* Ray's own `ray job submit` of a tiny grid (the shipped sweeps/demo.yaml, dummy
  trainer), then `sweeper summarize --format json` from the checkout, through the
  server, equal trial by trial and group by group to the same sweep run on a SQLite
  file (same cluster, `--tracking-uri sqlite:///...`); the runs are rows in PostgreSQL.
* Two drivers on one sweep: the second is refused naming the first; the first is then
  SIGKILLed mid-trial, and `--resume` finishes the sweep with every trial run once and
  every metric point once.
* `cluster down`, then `cluster up` at once on the same ports (held in TIME_WAIT by the
  stopped servers' connections) and the same database: it starts, and the record is
  still there.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from sweeper import record_names
from tests.support.cluster import HEAD_IP, RAY, SWEEPER, sweeper_cluster_up, time_wait_ports
from tests.support.postgres import PostgresServer
from tests.support.processes import BIN, clean_env, kill_group, sweeper_command
from tests.support.sweeps import new_sweep, roles_in

pytestmark = [pytest.mark.integration, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
TINY = [
    "grid.framework=[dummy]", "grid.init=[random]",
    "data.generate.train_size=80", "data.generate.valid_size=20",
    "data.generate.test_size=20", "data.generate.unlabeled_size=400",
    "data.generate.vocab_size=200", "model.arch.layers=1", "model.arch.embed_dim=16",
    "model.arch.ffn_dim=32", "model.arch.heads=2", "train.epochs=2", "train.lr=0.002",
    "grid.seed=[1,2]",
]  # fmt: skip
SLOW_S4 = {"random-full-s4-": {"sleep_per_step": 0.8}}
"""The two-driver sweep's seed 4 takes 16 s: long enough to refuse a second driver and
kill the first mid-trial (the cluster's workers inherit it from the head)."""


@dataclass
class PgCluster:
    env: dict[str, str]
    root: Path
    checkout: Path
    storage: Path
    gcs: str
    dashboard: str
    tracking: str
    postgres: PostgresServer
    database: str
    uri: str
    ports: list[int]

    def rows(self, sql: str) -> str:
        """`sql` on the cluster's database, as psql prints it."""
        return self.postgres.psql(sql, database=self.database).strip()


def _run(args: list[str], env: dict[str, str], cwd: Path, timeout: float = 300):
    return subprocess.run(args, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)


def _checkout(root: Path) -> Path:
    """A folder holding only the shipped sweeps/demo.yaml (what a job uploads)."""
    (root / "sweeps").mkdir(parents=True)
    shutil.copy(REPO / "sweeps" / "demo.yaml", root / "sweeps" / "demo.yaml")
    return root


@pytest.fixture(scope="module")
def pg(tmp_path_factory: pytest.TempPathFactory, postgres: PostgresServer) -> Iterator[PgCluster]:
    root = tmp_path_factory.mktemp("cluster_pg")
    database = f"cluster{uuid.uuid4().hex[:8]}"
    uri = postgres.create_database(database)
    assert uri.startswith("postgresql://"), "the plain form docs/cluster.md shows"
    env = clean_env(
        SWEEPER_HOME=str(root / "sweeper_home"), SWEEPER_DUMMY_EXTRA=json.dumps(SLOW_S4)
    )
    # a shell where the venv was never activated: nothing of it on PATH
    env["PATH"] = os.pathsep.join(p for p in env["PATH"].split(os.pathsep) if p != str(BIN))
    assert shutil.which("sweeper", path=env["PATH"]) is None
    checkout = _checkout(root / "checkout")
    storage = root / "storage"
    started, ports = sweeper_cluster_up(env, checkout, storage, "--backend-store-uri", uri)
    state_file = root / "sweeper_home" / "cluster.json"
    try:
        assert started.returncode == 0, started.stdout + started.stderr
        assert f"MLflow store:    {uri}" in started.stdout
        yield PgCluster(
            env, root, checkout, storage, f"{HEAD_IP}:{ports[0]}",
            f"http://{HEAD_IP}:{ports[1]}", f"http://{HEAD_IP}:{ports[2]}", postgres, database,
            uri, ports,
        )  # fmt: skip
    finally:
        recorded = json.loads(state_file.read_text()) if state_file.exists() else None
        _run([SWEEPER, "cluster", "down"], env, checkout, timeout=120)
        for key in ("ray_pgid", "mlflow_pgid"):  # gone already: belt and braces
            if recorded and recorded[key] > 1:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(recorded[key], signal.SIGKILL)


def _summary(pg: PgCluster, cwd: Path, *store: str) -> dict[str, Any]:
    done = _run(
        [SWEEPER, "summarize", "sweeps/demo.yaml", *TINY, "--format", "json", "--no-log", *store],
        pg.env, cwd, timeout=180,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def _results(summary: dict[str, Any]) -> dict[str, Any]:
    """What a summary says about the sweep, without what differs between two records of
    it (run ids, wall times, the store's address, costs timed by the driver)."""
    timed = {"run_id", "wall_time", "cpu_hours", "gpu_hours", "cost", "currency"}
    trials = {
        t["run_name"]: {k: v for k, v in t.items() if k not in timed} for t in summary["trials"]
    }
    groups = [{k: v for k, v in g.items() if k not in timed} for g in summary["groups"]]
    return {"trials": trials, "groups": groups, "comparisons": summary["comparisons"]}


def test_ray_job_submit_on_postgresql_summarizes_as_on_sqlite(pg: PgCluster):
    # The same sweep on a SQLite file, on the same cluster, beside the job (a checkout of
    # its own: its corpus must not enter the job's upload).
    local = _checkout(pg.root / "sqlite")
    store = f"sqlite:///{local / 'runs' / 'demo' / 'mlflow.db'}"
    beside = subprocess.Popen(
        [SWEEPER, "run", "sweeps/demo.yaml", *TINY, "--address", pg.gcs, "--tracking-uri", store],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=pg.env, cwd=local,
        start_new_session=True,
    )  # fmt: skip
    try:
        submitted = _run(
            [RAY, "job", "submit", "--address", pg.dashboard, "--working-dir", ".",
             "--", "sweeper", "run", "sweeps/demo.yaml", *TINY],
            pg.env, pg.checkout,
        )  # fmt: skip
        out, _ = beside.communicate(timeout=300)
    finally:
        kill_group(beside.pid)
    text = submitted.stdout + submitted.stderr
    assert submitted.returncode == 0 and "succeeded" in text, text[-4000:]
    assert beside.returncode == 0, out[-4000:]
    on_pg = _summary(pg, pg.checkout)  # the running cluster's server is the default store
    assert on_pg["tracking_uri"] == pg.tracking
    on_sqlite = _summary(pg, local, "--tracking-uri", store)

    assert sorted(_results(on_pg)["trials"]) == ["dummy-random-full-s1", "dummy-random-full-s2"]
    assert _results(on_pg) == _results(on_sqlite)
    runs = pg.rows("SELECT count(*) FROM runs WHERE lifecycle_stage = 'active'")
    assert runs == "3", "the parent and two trial runs are rows in PostgreSQL"


def _wait_for(log: Path, texts: list[str], proc: subprocess.Popen[bytes], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        content = log.read_text(encoding="utf-8") if log.exists() else ""
        if all(t in content for t in texts):
            return
        assert proc.poll() is None, f"the driver exited ({proc.returncode}):\n{content[-3000:]}"
        assert time.monotonic() < deadline, f"no {texts}:\n{content[-3000:]}"
        time.sleep(0.2)


def _driver(pg: PgCluster, spec: Path, *args: str) -> list[str]:
    return sweeper_command("run", spec, "--address", pg.gcs, "--tracking-uri", pg.tracking, *args)


def test_two_drivers_refused_then_a_killed_driver_resumed(
    pg: PgCluster, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
):
    from mlflow import MlflowClient

    spec, _ = new_sweep(
        tmp_path, tmp_path_factory, "pgresume", grid={"seed": [3, 4]}, max_concurrent=1
    )
    log = tmp_path / "first.log"
    with open(log, "w", encoding="utf-8") as stdout:
        first = subprocess.Popen(
            _driver(pg, spec), stdout=stdout, stderr=subprocess.STDOUT, env=pg.env,
            start_new_session=True,
        )  # fmt: skip
    try:
        _wait_for(log, ["s3: finished", "s4: started"], first, timeout=240)
        second = _run(_driver(pg, spec, "--resume"), pg.env, tmp_path, timeout=180)
        assert first.poll() is None, "the first driver still runs"
        os.kill(first.pid, signal.SIGKILL)  # mid-trial: seed 4 sleeps 0.8 s a step
        first.wait(timeout=30)
    finally:
        kill_group(first.pid)
    assert second.returncode == 2, second.stdout[-2000:] + second.stderr[-2000:]
    assert "is being run by another driver" in second.stderr
    assert f"pid {first.pid} on {socket.gethostname()}" in second.stderr
    assert "started" not in second.stdout

    client = MlflowClient(pg.tracking)
    before = {r.data.tags[record_names.TAG_TRIAL_KEY]: r for r in roles_in(client, "pgresume")[1]}
    assert sorted(r.info.status for r in before.values()) == ["FINISHED", "RUNNING"]
    resumed = _run(_driver(pg, spec, "--resume"), pg.env, tmp_path, timeout=240)
    text = resumed.stdout + resumed.stderr
    assert resumed.returncode == 0, text[-4000:]
    assert "2 trials (1 finished before, 1 to resume, 0 new)" in text, text[-3000:]
    assert "s3: started" not in text  # the finished trial did not run again

    _, after = roles_in(client, "pgresume")
    assert {r.data.tags[record_names.TAG_TRIAL_KEY]: r.info.run_id for r in after} == {
        key: run.info.run_id for key, run in before.items()
    }  # one run per trial key, the same ones
    for run in after:
        assert run.info.status == "FINISHED", run.info.run_name
        losses = client.get_metric_history(run.info.run_id, record_names.METRIC_TRAIN_LOSS)
        assert sorted(m.step for m in losses) == list(range(1, 21)), run.info.run_name
        valid = client.get_metric_history(run.info.run_id, record_names.METRIC_VALID_ACC)
        assert sorted(m.step for m in valid) == [10, 20], run.info.run_name
    ids = ", ".join(f"'{r.info.run_id}'" for r in after)
    points = pg.rows(
        f"SELECT count(*) FROM metrics WHERE key = 'train_loss' AND run_uuid IN ({ids})"
    )
    assert points == "40", "every point once, in PostgreSQL"


def test_down_then_up_again_on_the_same_ports_finds_the_record(pg: PgCluster):
    from mlflow import MlflowClient

    client = MlflowClient(pg.tracking)
    run = client.create_run(client.create_experiment("restart"))
    client.log_metric(run.info.run_id, "valid_accuracy", 75.0, step=10)
    down = _run([SWEEPER, "cluster", "down"], pg.env, pg.checkout, timeout=120)
    assert down.returncode == 0, down.stdout + down.stderr
    waiting = time_wait_ports() & set(pg.ports)
    assert waiting, "the stopped servers' connections wait on their ports"
    with socket.socket() as plain, pytest.raises(OSError):  # what the old check tried
        plain.bind((HEAD_IP, min(waiting)))
    again, _ = sweeper_cluster_up(
        pg.env, pg.checkout, pg.storage, "--backend-store-uri", pg.uri, ports=pg.ports
    )
    assert again.returncode == 0, again.stdout + again.stderr
    history = MlflowClient(pg.tracking).get_metric_history(run.info.run_id, "valid_accuracy")
    assert [(m.step, m.value) for m in history] == [(10, 75.0)]  # kept by PostgreSQL
