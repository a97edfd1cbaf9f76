"""Ports of the clusters: the test cluster's choice (tests/support/cluster.py: Ray refuses
to start a node whose worker port range covers one of its own listening ports), and
`sweeper cluster up`'s check, which must tell a port someone listens on from one held
only by connections in TIME_WAIT (the servers bind with SO_REUSEADDR; a `cluster down`
leaves its ports so for a minute). Real sockets on 127.0.0.1."""

from __future__ import annotations

import os
import socket
import sys
import time
from pathlib import Path

import pytest

from sweeper.deploy.up_checks import ClusterError, check_ports, head_path, port_taken
from tests.support import cluster
from tests.support.cluster import free_port, time_wait_ports


def _worker_range(args: list[str]) -> range:
    low = int(args[args.index("--min-worker-port") + 1])
    high = int(args[args.index("--max-worker-port") + 1])
    return range(low, high + 1)


def test_the_worker_range_never_covers_a_port_taken_before(monkeypatch: pytest.MonkeyPatch):
    draws = iter([30000, 30000, 40000])  # the first two ranges cover 30100
    monkeypatch.setattr(cluster.random, "randrange", lambda *_: next(draws))
    args = cluster._node_ports(30100, 50000)
    assert _worker_range(args) == range(40000, 40200)
    listeners = [int(args[i + 1]) for i, a in enumerate(args) if a.endswith("-port")
                 and "worker" not in a]  # fmt: skip
    assert len(listeners) == 6 and not set(listeners) & set(_worker_range(args))


# --- `sweeper cluster up`'s own port check (sweeper.deploy.up_checks)


def _leave_in_time_wait() -> int:
    """A loopback port held only by a closed connection in TIME_WAIT: a server accepts
    one connection and closes it first (the side that closes first waits), then stops
    listening, as a server stopped by `cluster down` leaves its port."""
    with socket.socket() as listener:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        client = socket.create_connection(("127.0.0.1", port))
        served, _ = listener.accept()
        served.close()
        client.recv(1)  # the server's FIN has arrived
        client.close()
    deadline = time.monotonic() + 10
    while port not in time_wait_ports():
        assert time.monotonic() < deadline, "no TIME_WAIT socket on the port"
        time.sleep(0.05)
    return port


def test_a_port_in_time_wait_is_free_for_servers_and_for_the_check():
    port = _leave_in_time_wait()
    with socket.socket() as plain, pytest.raises(OSError):  # the old probe's false alarm
        plain.bind(("127.0.0.1", port))
    assert not port_taken("127.0.0.1", port)
    check_ports("127.0.0.1", {"--dashboard-port": port})  # not refused


def test_a_port_someone_listens_on_is_refused_naming_its_flag():
    with socket.socket() as server:
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as servers bind
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        assert port_taken("127.0.0.1", port)
        assert port_taken("0.0.0.0", port)  # a wildcard bind would collide too
        with pytest.raises(ClusterError, match=rf"port {port} .*listens.*\(--mlflow-port\)") as e:
            check_ports("127.0.0.1", {"--ray-port": free_port(), "--mlflow-port": port})
        assert e.value.bad_input
    with pytest.raises(ClusterError, match="must differ"):
        check_ports("127.0.0.1", {"--ray-port": 7000, "--mlflow-port": 7000})


def test_the_head_finds_this_environments_sweeper_first_on_its_path():
    here = str(Path(sys.executable).parent)
    path = head_path(os.pathsep.join(["/usr/bin", here, "/bin"]))
    assert path.split(os.pathsep) == [here, "/usr/bin", "/bin"]
    assert (Path(here) / "sweeper").is_file()  # what a Ray job's `sweeper run` runs
    assert head_path(None) == here
