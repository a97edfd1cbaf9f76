"""Failing fast on an unreachable tracking server (docs/architecture.md, invariant 5)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from sweeper.tracking.server import (
    STORE_PROBE,
    StoreMissing,
    TrackingUnreachable,
    check_server,
    is_server,
)


def _serve(status: int, store: int | None = None) -> tuple[ThreadingHTTPServer, list[str]]:
    """Answers `/health` with `status`, every other path with `store` (else `status`)."""
    seen: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append(self.path)
            self.send_response(status if store is None or self.path == "/health" else store)
            self.end_headers()
            self.wfile.write(b"OK")

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, seen


@pytest.fixture
def server_factory() -> Iterator:
    servers: list[ThreadingHTTPServer] = []

    def make(status: int, store: int | None = None) -> tuple[str, list[str]]:
        server, seen = _serve(status, store)
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}", seen

    yield make
    for server in servers:
        server.shutdown()
        server.server_close()


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_a_healthy_server_passes(server_factory):
    uri, seen = server_factory(200)
    check_server(uri + "/")
    assert seen == ["/health", STORE_PROBE]


def test_a_server_whose_database_is_down_is_reported(server_factory):
    """MLflow's `/health` answers 200 while its database is down; a read says 503."""
    uri, seen = server_factory(200, store=503)
    with pytest.raises(TrackingUnreachable, match=r"its backend store does not \(HTTP 503"):
        check_server(uri)
    check_server(uri, store=False)  # finding a cluster's server asks `/health` only
    assert seen == ["/health", STORE_PROBE, "/health"]


def test_a_server_answering_4xx_is_reachable(server_factory):
    uri, _ = server_factory(404)
    check_server(uri)


def test_a_failing_server_is_reported(server_factory):
    uri, _ = server_factory(503)
    with pytest.raises(TrackingUnreachable, match="HTTP 503"):
        check_server(uri)


def test_nothing_listening_fails_fast_naming_the_uri():
    uri = f"http://127.0.0.1:{_closed_port()}"
    started = time.monotonic()
    with pytest.raises(TrackingUnreachable) as exc:
        check_server(uri)
    assert uri in str(exc.value)
    assert time.monotonic() - started < 10


def test_a_silent_server_times_out():
    with socket.socket() as sock:  # accepts connections (backlog) but never answers
        sock.bind(("127.0.0.1", 0))
        sock.listen(1)
        uri = f"http://127.0.0.1:{sock.getsockname()[1]}"
        started = time.monotonic()
        with pytest.raises(TrackingUnreachable) as exc:
            check_server(uri, timeout=0.5)
        assert uri in str(exc.value)
        assert time.monotonic() - started < 5


def test_local_stores_are_not_servers(tmp_path):
    for uri in (f"sqlite:///{tmp_path}/mlflow.db", str(tmp_path), "postgresql://u@127.0.0.1/db"):
        check_server(uri)  # no request made, nothing raised
        assert not is_server(uri)
    assert is_server("http://127.0.0.1:5000") and is_server("HTTPS://mlflow.example")


def test_a_missing_local_store_is_refused_only_when_it_must_exist(tmp_path):
    db = tmp_path / "none" / "mlflow.db"
    check_server(f"sqlite:///{db}")  # `sweeper run` creates it
    with pytest.raises(StoreMissing) as exc:
        check_server(f"sqlite:///{db}", must_exist=True)
    assert exc.value.path == db and not db.exists()
    assert str(exc.value).endswith("has the sweep run yet?")
    with pytest.raises(StoreMissing):
        check_server(str(tmp_path / "mlruns"), must_exist=True)
    check_server("postgresql://u@127.0.0.1/db", must_exist=True)  # left to MLflow


def test_unreachable_carries_uri_and_reason_for_each_caller_to_word():
    uri = f"http://127.0.0.1:{_closed_port()}"
    with pytest.raises(TrackingUnreachable) as exc:
        check_server(uri, must_exist=True)
    assert exc.value.uri == uri and exc.value.reason
    assert str(exc.value) == f"cannot reach the MLflow tracking server at {uri}: {exc.value.reason}"
