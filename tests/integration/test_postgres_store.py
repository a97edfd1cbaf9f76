"""The tracking server on a real PostgreSQL database: the URI form docs/cluster.md shows
works with the driver `make install` puts in (the `server` extra), through MLflow's own
server, as sweeper's store check sees it."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.support.cluster import mlflow_server
from tests.support.postgres import PostgresServer

pytestmark = pytest.mark.integration


def test_the_mlflow_server_runs_on_postgresql(
    tmp_path: Path, postgres: PostgresServer, postgres_uri: str
) -> None:
    import mlflow

    from sweeper.tracking.server import check_server

    assert postgres_uri.startswith("postgresql://"), "the plain form, no +driver"
    with mlflow_server(tmp_path / "server", backend_store_uri=postgres_uri) as server:
        check_server(server.uri)
        client = mlflow.MlflowClient(server.uri)
        experiment = client.create_experiment("pg")
        run = client.create_run(experiment)
        client.log_metric(run.info.run_id, "valid_accuracy", 0.5, step=3)
        history = client.get_metric_history(run.info.run_id, "valid_accuracy")
        assert [(m.step, m.value) for m in history] == [(3, 0.5)]
    database = postgres_uri.rsplit("/", 1)[1]
    rows = postgres.psql("SELECT count(*) FROM metrics", database=database).strip()
    assert rows == "1", "the point is in PostgreSQL, not in a file beside the server"


def test_a_server_whose_database_is_down_is_refused_naming_the_database(tmp_path: Path) -> None:
    """MLflow's `/health` answers 200 while PostgreSQL is down; sweeper's check asks a
    read the database must answer, so `sweeper summarize` exits 2 saying which part is
    down instead of MLflow retrying for minutes, and works again once it is back."""
    from sweeper.tracking.server import TrackingUnreachable, check_server
    from tests.support.postgres import postgres_server
    from tests.support.sweeps import run_sweeper

    with postgres_server() as database:  # its own server: this test stops it
        uri = database.create_database("down")
        with mlflow_server(tmp_path / "server", backend_store_uri=uri) as server:
            check_server(server.uri)
            database.stop()
            with pytest.raises(TrackingUnreachable, match="its backend store does not"):
                check_server(server.uri)
            check_server(server.uri, store=False)  # `/health` alone says all is well
            args = ("summarize", "--experiment", "Default", "--tracking-uri", server.uri)
            refused = run_sweeper(*args, timeout=120)
            assert refused.returncode == 2, refused.stderr[-2000:]
            assert "its backend store does not (HTTP 503" in refused.stderr
            assert "Traceback" not in refused.stderr
            database.start()
            deadline = time.monotonic() + 60  # the server's pool reconnects on its own
            while True:
                try:
                    check_server(server.uri)
                    break
                except TrackingUnreachable:
                    assert time.monotonic() < deadline, "the server never saw its database again"
                    time.sleep(1)
