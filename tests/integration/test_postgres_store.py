"""The tracking server on a real PostgreSQL database: the URI form docs/cluster.md shows
works with the driver `make install` puts in (the `server` extra), through MLflow's own
server, as sweeper's store check sees it."""

from __future__ import annotations

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
