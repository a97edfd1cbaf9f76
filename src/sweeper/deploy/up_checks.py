"""What `sweeper cluster up` checks and sets before it starts anything.

* **Ports**, probed the way the servers bind them. Ray's gRPC servers and MLflow's
  uvicorn set SO_REUSEADDR, so a port held only by connections in TIME_WAIT (a
  `cluster down` a moment ago leaves its ports so for a minute) is free for them, and
  for the probe; a port something listens on is refused, naming its flag.
* **The backend store's driver.** The MLflow server runs under the interpreter `up`
  runs under (`sys.executable -m mlflow server`), so the driver SQLAlchemy would load
  for `--backend-store-uri` is importable there exactly when it is importable here
  (`sweeper.tracking.drivers`). A missing one is a one-line error naming the install
  command, before any process starts, instead of a server that dies with a traceback.
* **The head's PATH**, with this interpreter's folder first: Ray job entrypoints
  (`ray job submit ... -- sweeper run SPEC`) run in the head's environment, and find
  this environment's `sweeper` even when it was never activated
  (`.venv/bin/sweeper cluster up` from a plain shell).
"""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Mapping
from pathlib import Path

from sweeper.tracking.drivers import DriverMissing, check_driver


class ClusterError(Exception):
    """A cluster that cannot start. `bad_input`: the user can fix it before anything
    starts (a running cluster, a taken port, a missing driver), exit 2; else a server
    failed, exit 1."""

    def __init__(self, message: str, bad_input: bool = False):
        super().__init__(message)
        self.bad_input = bad_input


def port_taken(host: str, port: int) -> bool:
    """A server binding host:port with SO_REUSEADDR would fail now: something listens
    on it (or binding is refused). Sockets in TIME_WAIT do not count."""
    bind_host = "0.0.0.0" if host in {"0.0.0.0", ""} else host
    with socket.socket(socket.AF_INET6 if ":" in bind_host else socket.AF_INET) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((bind_host, port))
        except OSError:
            return True
    return False


def check_ports(host: str, ports: Mapping[str, int]) -> None:
    """ClusterError (bad input) for ports that coincide or that something listens on;
    `ports` maps each flag (`--ray-port`) to its value."""
    if len(set(ports.values())) < len(ports):
        raise ClusterError(f"the ports must differ: {dict(ports)}", bad_input=True)
    for flag, port in ports.items():
        if port_taken(host, port):
            raise ClusterError(
                f"port {port} on {host} is taken: a process listens on it; choose another ({flag})",
                bad_input=True,
            )


def check_backend(uri: str | None) -> None:
    """ClusterError (bad input) when `--backend-store-uri` names a database whose
    driver this interpreter, the server's, cannot import."""
    if uri is None:
        return
    try:
        check_driver(uri)
    except DriverMissing as exc:
        raise ClusterError(f"--backend-store-uri: {exc}", bad_input=True) from None


def head_path(path: str | None) -> str:
    """`path` with this interpreter's folder first (and only there): the `sweeper`,
    `ray` and `python` of the environment `cluster up` runs in."""
    here = str(Path(sys.executable).parent)
    rest = [entry for entry in (path or "").split(os.pathsep) if entry and entry != here]
    return os.pathsep.join([here, *rest])
